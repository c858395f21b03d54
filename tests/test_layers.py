"""The engine's layers (issue 17 item 1; ../shared/ARCHITECTURE.md): imports go only to a lower
layer (or within one), function-level imports included; the two drivers never import each
other; no core module imports the ``optcomp`` facade; every historical import path still works."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "optcomp"

LAYERS = {
    # L0 vocabulary
    "_rounding": 0, "_types": 0, "_laws": 0, "_inputs": 0, "_binomial": 0, "_version": 0, "_memory": 0,
    # L1 mathematics of the composed loss
    "_cgf": 1,
    # L2 distributions and closed forms (``_pairs``: the finite dominating pair, a leaf's type)
    "loss": 2, "bounds": 2, "hardness": 2, "_pairs": 2, "gdp": 2,
    # L3 producers: build certified distributions, never search (``mechanisms``: profiles and
    # discrete pairs of real mechanisms)
    "_exact": 3, "_lattice": 3, "mechanisms": 3, "kov_noise": 3,
    # L4 drivers: choose producers, refine; never import each other
    "optimal": 4, "lattice": 4,
    # (the lattice driver's parts: ``_refine`` the refine loop and its steps, ``_splits`` the
    # exact splits by monotonicity, ``_directions`` the global directions of mechanisms)
    "_refine": 4, "_splits": 4, "_directions": 4,
    # L5 method entry points, the method registry and the facade
    "approx": 5, "auto": 5, "_progress": 5, "methods": 5, "_evaluate": 5, "": 5,
    # L6 toolkit
    # (``ledger``: the Accountant's files and mechanism specs; ``noise``: calibrate's mechanism-aware
    # search; ``_search``: the certified search of calibrate, noise and Accountant.remaining)
    "accountant": 6, "ledger": 6, "calibrate": 6, "noise": 6, "_search": 6, "curves": 6, "region": 6, "cli": 6, "__main__": 6,
    "dpsgd": 6,
    "integrations": 6,
    # L7 pipeline
    "pipeline": 7, "pipeline_config": 7, "provenance": 7, "reporting": 7, "experiments": 7, "figures": 7,
}
DRIVERS = {"optimal", "lattice"}
CORE = 4  # modules up to this layer may not import the facade


def _top(mod: str) -> str:
    """'optcomp._lattice.tree' -> '_lattice'; 'optcomp' -> ''."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path, path.name == "__init__.py"


def _imports(mod: str, path: Path, is_pkg: bool):
    """Every module imported anywhere in the file (nested imports included), absolute."""
    package = mod if is_pkg else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, node.lineno
            for a in node.names:  # "from . import loss" imports the submodule optcomp.loss
                sub = f"{target}.{a.name}"
                if importlib.util.find_spec(sub.split(".")[0]) and _is_module(sub):
                    yield sub, node.lineno


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "optcomp":
        return False
    p = PKG.parent.joinpath(*parts)
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _edges():
    for mod, path, is_pkg in _modules():
        for target, line in _imports(mod, path, is_pkg):
            if target == "optcomp" or target.startswith("optcomp."):
                yield mod, target, line


def test_every_module_has_a_layer():
    missing = sorted({_top(m) for m, _, _ in _modules()} - set(LAYERS))
    assert not missing, f"modules without a layer in tests/test_layers.py: {missing}"


def test_imports_only_go_down():
    bad = []
    edges = list(_edges())
    assert len(edges) > 50 and ("optcomp._refine", "optcomp._lattice.grouped") in {(s, d) for s, d, _ in edges}
    for src, dst, line in edges:
        a, b = _top(src), _top(dst)
        if a == b:
            continue
        if dst == "optcomp":  # the facade: checked below
            continue
        if LAYERS[b] > LAYERS[a]:
            bad.append(f"{src}:{line} -> {dst} (L{LAYERS[a]} -> L{LAYERS[b]})")
        if a in DRIVERS and b in DRIVERS:
            bad.append(f"{src}:{line} -> {dst} (driver -> driver)")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_core_module_imports_the_facade():
    bad = [f"{src}:{line}" for src, dst, line in _edges()
           if dst == "optcomp" and src != "optcomp" and LAYERS[_top(src)] <= CORE]
    assert not bad, "core modules importing the optcomp facade:\n" + "\n".join(bad)


def _facade_names(mod: str, text: str, is_pkg: bool):
    """(name, line) of every name read from the facade: ``optcomp.name`` and ``from optcomp
    import name`` (relative forms included)."""
    package = mod if is_pkg else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "optcomp":
            yield node.attr, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            if ".".join(base + ([node.module] if node.module else [])) == "optcomp":
                yield from ((a.name, node.lineno) for a in node.names)


def test_no_module_reads_a_private_name_of_the_facade():
    """The registry is public (``optcomp.methods``, layer L5): no module reaches for a private
    name of the facade (``optcomp._method`` was one); private submodules (``optcomp._inputs``)
    are modules, not names of the facade."""
    bad = []
    for mod, path, is_pkg in _modules():
        bad += [f"{mod}:{line} optcomp.{name}" for name, line in _facade_names(mod, path.read_text(), is_pkg)
                if name.startswith("_") and not name.startswith("__") and not _is_module(f"optcomp.{name}")]
    assert not bad, "private names of the facade read elsewhere:\n" + "\n".join(bad)
    import optcomp
    from optcomp import methods

    assert not hasattr(optcomp, "_method") and methods.check_method("kov", {}) is optcomp.METHOD_INFO["kov"]
    assert optcomp.Method is methods.Method and optcomp.METHODS is methods.METHODS


def test_private_packages_have_empty_inits():
    for pkg in ("_lattice", "_exact"):
        assert (PKG / pkg / "__init__.py").read_text().strip() == ""


def test_the_layer_walk_sees_nested_imports(tmp_path):
    """The walk counts an import inside a function (a lazy import is still an edge)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from .lattice import lattice_bounds\n")
    assert ("optcomp.lattice", 2) in list(_imports("optcomp.loss", f, False))


@pytest.mark.parametrize("path, name", [
    ("optcomp.lattice", "lattice_bounds"), ("optcomp.lattice", "lattice_delta_bounds"),
    ("optcomp.lattice", "Bounds"), ("optcomp.lattice", "ApproxTooCostly"), ("optcomp.lattice", "BracketInfo"),
    ("optcomp.lattice", "Bracket"),
    ("optcomp.lattice", "LatticePass"), ("optcomp.lattice", "lattice_pass"), ("optcomp.lattice", "tilt_for"),
    ("optcomp.lattice", "chernoff_guess"), ("optcomp.lattice", "MAX_POINTS"), ("optcomp.lattice", "DELTA_FLOOR"),
    ("optcomp.optimal", "optimal_epsilon"), ("optcomp.optimal", "optimal_delta"),
    ("optcomp.optimal", "optimal_epsilon_bruteforce"), ("optcomp.optimal", "ExactTooLarge"),
    ("optcomp.optimal", "binomial_window"), ("optcomp.optimal", "binomial_atoms"),
    ("optcomp.optimal", "product_atoms"), ("optcomp.optimal", "product_distribution"),
    ("optcomp.optimal", "exact_epsilon_bounds"), ("optcomp.optimal", "exact_excess_bounds"),
    ("optcomp.optimal", "MAX_ATOMS"), ("optcomp.optimal", "BIG_EPS"),
    ("optcomp.approx", "Bounds"), ("optcomp.approx", "ApproxTooCostly"), ("optcomp", "Bounds"),
    # moved out of calibrate (to optcomp.noise) and the command line (to optcomp.ledger)
    ("optcomp.calibrate", "noise_for"), ("optcomp.calibrate", "NOISE_MECHANISMS"), ("optcomp.calibrate", "NoiseRow"),
    ("optcomp.calibrate", "noise_table"), ("optcomp.cli", "main"),
    # the pipeline's configuration and README reporting, moved to optcomp.pipeline_config / .reporting
    ("optcomp.pipeline", "validate_config"), ("optcomp.pipeline", "config_problem"),
    ("optcomp.pipeline", "config_reference"), ("optcomp.pipeline", "ConfigError"),
    ("optcomp.pipeline", "README_QUOTES"), ("optcomp.pipeline", "quoted_text"), ("optcomp.pipeline", "update_readme"),
])
def test_public_import_paths_keep_working(path, name):
    obj = getattr(importlib.import_module(path), name)
    assert obj is not None
    if path in ("optcomp.optimal", "optcomp.lattice") and name not in ("BIG_EPS",):
        assert name in importlib.import_module(path).__all__  # documented where it always was


def test_moved_functions_are_one_object_behind_every_path():
    """noise_for moved to optcomp.noise, the pipeline's configuration and README reporting
    to their own modules: the historical paths give the same objects, star imports included."""
    from optcomp import calibrate, noise

    assert calibrate.noise_for is noise.noise_for and calibrate.NOISE_MECHANISMS is noise.NOISE_MECHANISMS
    ns: dict = {}
    exec("from optcomp.calibrate import *", ns)
    assert set(calibrate.__all__) <= set(ns) and ns["noise_for"] is noise.noise_for
    with pytest.raises(AttributeError):
        calibrate.no_such_name
    from optcomp import pipeline, pipeline_config, reporting

    assert pipeline.validate_config is pipeline_config.validate_config
    assert pipeline.README_QUOTES is reporting.README_QUOTES and pipeline.update_readme is reporting.update_readme
    schema = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"
    r = subprocess.run([sys.executable, "-m", "optcomp.pipeline", "config-reference", str(schema)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(PKG.parent)))
    assert r.returncode == 0 and r.stdout == pipeline_config.config_reference(schema), r.stderr


def test_one_class_behind_every_path():
    import optcomp
    from optcomp import _types, approx, lattice, optimal

    assert optcomp.Bounds is lattice.Bounds is approx.Bounds is _types.Bounds
    assert optcomp.ApproxTooCostly is lattice.ApproxTooCostly is _types.ApproxTooCostly
    assert optcomp.ExactTooLarge is optimal.ExactTooLarge is _types.ExactTooLarge
