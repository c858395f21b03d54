"""A fresh clone, the figures command, a clean tree: what can be checked without running the
whole pipeline (about ten minutes), is checked here.

* Every committed ``.meta.json`` sidecar is what the current code and config would write
  beside its CSV: its rule exists and produces that file, its function exists and is the
  rule's, its config share and the hash of the producing code are the current ones
  (:func:`optcomp.provenance.problems`).  An engine change without rerunning the pipeline
  fails here, not after a ten-minute run.
* The provenance is stable: rewording a docstring or a comment leaves the code hash alone,
  a change of code moves it; the modules a function reaches through the lazy registries count.
* No rule writes the committed reference timing run, and what is drawn from it alone (the
  runtime figure, the runtime notebook) is redrawn into the committed bytes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optcomp import provenance

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("snakemake")


@pytest.fixture(scope="module")
def workflow():
    return provenance._workflow(ROOT)


def test_every_committed_sidecar_is_what_the_current_code_writes():
    found = provenance.problems(ROOT)
    assert not found, ("committed results were produced by other code or config than the committed one; "
                       "rerun the figures command (snakemake --cores 8 --forceall) and commit results/ and "
                       "figures/:\n" + "\n".join(found))
    assert len(provenance.sidecars(ROOT)) >= 20


def _copy_workflow(tmp_path: Path) -> Path:
    for name in ("Snakefile", "rules", "config"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    return tmp_path


def _sidecar(tmp_path: Path, relative: str, meta: dict) -> None:
    """A sidecar beside a copy of the committed CSV (so rows and columns agree)."""
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / relative.replace(".meta.json", ".csv"), path.with_name(path.name.replace(".meta.json", ".csv")))
    path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def test_a_stale_sidecar_is_named_with_what_is_wrong(tmp_path):
    """Outside a git checkout every sidecar under results/ is checked; each kind of staleness
    is reported on a line of its own, naming the file."""
    work = _copy_workflow(tmp_path)
    good = json.loads((ROOT / "results/budget/laplace.meta.json").read_text())
    cases = {
        "results/budget/laplace.meta.json": dict(good, rule="budget_sweep"),  # a renamed rule
        "results/homogeneous/ratios.meta.json": dict(
            json.loads((ROOT / "results/homogeneous/ratios.meta.json").read_text()),
            function="optcomp.experiments.homogeneous.no_such_table"),
        # written by a rule that no longer writes it (the merge rule, not the summary's)
        "results/kov_section4/geometric_summary.meta.json": dict(
            json.loads((ROOT / "results/kov_section4/geometric_region.meta.json").read_text()), rows=0, columns=[]),
        "results/regions/kov_figure2_boundary.meta.json": dict(
            json.loads((ROOT / "results/regions/kov_figure2_boundary.meta.json").read_text()), code_sha256="0" * 64),
        "results/heterogeneous/mechanisms.meta.json": dict(
            json.loads((ROOT / "results/heterogeneous/mechanisms.meta.json").read_text()), git_commit="86baaa4"),
        # a byte-for-byte merge records how many chunks it merged (a fresh clone's run found this one missing)
        "results/kov_section4/geometric_region.meta.json": {
            k: v for k, v in json.loads((ROOT / "results/kov_section4/geometric_region.meta.json").read_text()).items()
            if k != "chunks"},
    }
    cases["results/kov_section4/geometric_summary.meta.json"].update(
        {k: json.loads((ROOT / "results/kov_section4/geometric_summary.meta.json").read_text())[k]
         for k in ("rows", "columns")})
    for relative, meta in cases.items():
        _sidecar(work, relative, meta)
    found = provenance.problems(work)
    text = "\n".join(found)
    assert "results/budget/laplace.meta.json: rule 'budget_sweep' does not exist" in text
    assert "ratios.meta.json: function 'optcomp.experiments.homogeneous.no_such_table' does not exist" in text
    assert re.search(r"geometric_summary\.meta\.json: .*produced by rule 'kov_section4_geometric_summary', "
                     r"the sidecar names 'kov_section4_geometric'", text)
    assert "kov_figure2_boundary.meta.json: code_sha256 is" in text
    assert "mechanisms.meta.json: git_commit is no longer recorded" in text
    assert "geometric_region.meta.json: chunks is null" in text
    assert len(found) == 6, text
    # and the config: one changed value of the section is a stale sidecar
    config = (work / "config/config.yaml").read_text()
    (work / "config/config.yaml").write_text(config.replace("sensitivity: 1.0", "sensitivity: 2.0", 1))
    _sidecar(work, "results/budget/laplace.meta.json", good)
    assert "sensitivity: 2.0" in (work / "config/config.yaml").read_text()
    found = [line for line in provenance.problems(work) if "laplace" in line]
    assert any("config is" in line for line in found) and any("config_sha256 is" in line for line in found), found


# ------------------------------------------------------------------------------ the code hash


def test_docstrings_and_comments_do_not_count_code_does():
    source = '''"""Module docstring: MV Thm 1.5 — élan."""
import math  # why


class A:
    """A class."""

    def f(self, x):  # a comment
        """Return x, rounded up (never below the optimum)."""
        # a whole-line comment
        return math.nextafter(x, math.inf)


def g():
    "one line"
    s = "# not a comment"
    return s
'''
    reworded = (source.replace("élan", "the optimum").replace("# why", "# because")
                .replace("rounded up (never below the optimum)", "rounded\n        up").replace("one line", "two words"))
    changed = source.replace("math.inf)", "-math.inf)")
    base = provenance.normalized_source(source)
    assert provenance.normalized_source(reworded) == base
    assert provenance.normalized_source(changed) != base
    assert '"# not a comment"' in base and "docstring" not in base and "comment" not in base.replace('"# not a comment"', "")
    assert base.splitlines() == ["import math", "class A:", "    def f(self, x):",
                                 "        return math.nextafter(x, math.inf)", "def g():",
                                 '    s = "# not a comment"', "    return s"]


def test_code_modules_follow_lazy_imports_and_leave_out_the_presentation():
    modules = provenance.code_modules("optcomp.experiments.budget.sweep")
    # the facade's and the registry's modules are imported by name on first use
    for name in ("optcomp", "optcomp.methods", "optcomp.optimal", "optcomp.calibrate", "optcomp._exact.atoms",
                 "optcomp.experiments.budget", "optcomp.experiments.io"):
        assert name in modules, name
    for name in modules:
        assert not name.startswith(("optcomp.cli", "optcomp.figures", "optcomp.integrations", "optcomp.pipeline"))
    assert "optcomp.experiments.kov_section4" not in modules  # another figure's sweep
    with pytest.raises(ValueError, match="function"):
        provenance.code_modules("numpy.sum")


def test_a_module_in_the_closure_changes_the_hash(tmp_path):
    """The hash reads the package's files: in a copy of the package, an engine module's
    docstring reworded keeps it, a line of its code moves it, the command line does not count."""
    package = tmp_path / "optcomp"
    shutil.copytree(provenance.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    function = "optcomp.experiments.budget.sweep"
    before = provenance.code_hash(function, package)
    assert before == provenance.code_hash(function)
    loss = package / "loss.py"
    text = loss.read_text()
    doc = re.search(r'"""(.+?)"""', text, re.S)
    loss.write_text(text.replace(doc.group(0), '"""Reworded."""', 1))
    assert provenance.code_hash(function, package) == before
    loss.write_text(text + "\nEXTRA = 1\n")
    assert provenance.code_hash(function, package) != before
    loss.write_text(text)
    (package / "cli.py").write_text((package / "cli.py").read_text() + "\nEXTRA = 1\n")
    assert provenance.code_hash(function, package) == before  # the command line produces no table


def test_the_cache_of_parsed_files_changes_no_hash(tmp_path, monkeypatch):
    """The facts read from each file (normalized source, imports, string constants) are kept in
    a cache keyed by the file's bytes: cold, warm, off and with a corrupt entry, the hash and the
    modules are the same, and a changed byte is a new entry, not the old answer (on a small
    package of the same shape; the committed sidecars are checked through the cache above)."""
    package = tmp_path / "optcomp"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Doc."""\nfrom .a import run  # a comment\n')
    (package / "a.py").write_text("from . import b\nfrom .sub import c\nLAZY = 'd'\n\ndef run():\n    return b.X\n")
    (package / "b.py").write_text("X = 1\n")
    (package / "d.py").write_text("import optcomp.b\nY = 2\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from ..b import X\n")
    (package / "cli.py").write_text("import optcomp.a\n")
    (package / "unused.py").write_text("Z = 3\n")
    function = "optcomp.a.run"
    cache = tmp_path / "cache"

    def fresh(value):  # a new process: nothing in memory, the cache as ``value`` sets it
        monkeypatch.setenv("OPTCOMP_PROVENANCE_CACHE", value)
        provenance._facts_cached.cache_clear()
        return provenance.code_hash(function, package), provenance.code_modules(function, package)

    off = fresh("")
    assert off[1] == ["optcomp", "optcomp.a", "optcomp.b", "optcomp.d", "optcomp.sub", "optcomp.sub.c"]
    assert not cache.exists()
    assert fresh(str(cache)) == off  # cold: fills the cache
    entries = sorted(cache.glob("*.json"))
    assert len(entries) == len(off[1])
    assert fresh(str(cache)) == off  # warm: read from it
    entries[0].write_text("{not json")
    entries[1].write_text('{"format": "other"}')
    assert fresh(str(cache)) == off  # a corrupt entry is recomputed
    (package / "b.py").write_text("X = 2\n")
    changed = fresh(str(cache))
    assert changed[0] != off[0] and changed == fresh("")
    provenance._facts_cached.cache_clear()


# ----------------------------------------------------------------------- the reference run


def test_no_rule_writes_the_reference_timing_run(workflow):
    reference = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "results/timing/reference").iterdir())
    assert {"results/timing/reference/slopes.csv", "results/timing/reference/summary.md"} <= set(reference)
    for path in reference:
        writers = [rule.name for rule in workflow.rules if rule.is_producer(path)]
        assert not writers, f"{path} is written by {writers}"
    # it is a copy of a local run: every timing table, slopes and summary of this machine's run
    for rule in workflow.rules:
        for pattern in map(str, rule.output):
            if pattern.startswith("results/timing/local/") and pattern.endswith((".csv", ".md")) and "{" not in pattern:
                assert (ROOT / pattern.replace("/local/", "/reference/")).is_file(), pattern


def _lock_version(package: str) -> str | None:
    m = re.search(rf"^{re.escape(package)}==(\S+)", (ROOT / "requirements.lock").read_text(), re.M | re.I)
    return m.group(1) if m else None


def _locked_environment_or_skip() -> None:
    """Byte identity of figures needs the lock's packages and the Python the results were made with."""
    import importlib.metadata

    recorded = json.loads((ROOT / "results/budget/laplace.meta.json").read_text())["python"]
    here = ".".join(map(str, sys.version_info[:3]))
    if here != recorded:
        pytest.skip(f"Python {here}, the committed figures were drawn with {recorded}")
    for package in ("matplotlib", "numpy", "pandas", "nbformat", "ipykernel"):
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{package} is not installed")
        if installed != _lock_version(package):
            pytest.skip(f"{package} {installed} is not requirements.lock's {_lock_version(package)}")


def test_the_runtime_figure_and_notebook_redraw_into_the_committed_bytes(tmp_path):
    """figures/runtime.* and the executed runtime notebook read only the committed reference run:
    redrawn, they are the committed files byte for byte (the notebook's inline figure included)."""
    _locked_environment_or_skip()
    pytest.importorskip("nbclient")
    from optcomp.figures import save
    from optcomp.figures.runtime import scaling
    from optcomp.pipeline import run_notebook

    names = ["approx_vs_k", "approx_vs_eta", "exact_heterogeneous", "exact_homogeneous", "accuracy", "slopes"]
    fig = scaling(*(ROOT / "results/timing/reference" / f"{n}.csv" for n in names))
    save(fig, pdf=tmp_path / "runtime.pdf", png=tmp_path / "runtime.png")
    for suffix in ("png", "pdf"):
        assert (tmp_path / f"runtime.{suffix}").read_bytes() == (ROOT / f"figures/runtime.{suffix}").read_bytes(), suffix
    run_notebook(ROOT / "notebooks/03_runtime.ipynb", tmp_path / "03_runtime.ipynb", results_dir=ROOT / "results",
                 timeout=300)
    got = (tmp_path / "03_runtime.ipynb").read_text().splitlines()
    want = (ROOT / "results/notebooks/03_runtime.ipynb").read_text().splitlines()
    differ = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert got == want, ("the executed runtime notebook differs from results/notebooks/03_runtime.ipynb: "
                         f"{len(got)} vs {len(want)} lines, first difference at line {differ[:1]}: "
                         f"{[got[i][:120] for i in differ[:1]]} vs {[want[i][:120] for i in differ[:1]]}")


def test_git_status_is_clean_of_pipeline_byproducts():
    """What the pipeline writes besides the committed results (logs, chunks, this machine's
    timings, Snakemake's state) is git-ignored, so it never shows in ``git status``."""
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    for path in ("results/logs/x.log", "results/chunks/homogeneous/x.csv", "results/timing/local/x.csv",
                 ".snakemake/metadata/x", "report.html"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
