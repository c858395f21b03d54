"""Documentation and packaging: the Sphinx API reference builds without a warning, the
version has one source, the public namespace is the public API, the licence is there."""

from __future__ import annotations

import inspect
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import optcomp

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_sphinx_builds_the_api_reference_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(tmp_path / "html")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    api = (tmp_path / "html" / "api.html").read_text()
    for name in ("epsilon_g", "delta_g", "epsilon_bounds", "Accountant", "privacy_curve", "per_query_epsilon",
                 "noise_table", "kov_recipe", "get_epsilon", "remaining"):
        assert name in api, name
    assert "privacy filter" in (tmp_path / "html" / "index.html").read_text()
    assert not list((ROOT / "docs").glob("_build"))  # docs/ holds sources only


def test_public_names_have_docstrings_and_the_setting_is_stated():
    for name in optcomp.__all__:
        obj = getattr(optcomp, name)
        if callable(obj):
            assert inspect.getdoc(obj), name
    for module in ("accountant", "calibrate", "curves"):
        doc = inspect.getdoc(getattr(optcomp, module))
        assert "fixed in advance" in doc and "privacy filter" in doc and "not provide" in doc, module
    assert "privacy filter" in optcomp.__doc__ and "privacy filter" in inspect.getdoc(optcomp.Accountant)


def test_dir_shows_the_public_api_only():
    names = dir(optcomp)
    for leaked in ("Callable", "dataclass", "annotations", "np", "numbers", "math", "mechanisms", "check_delta_g"):
        assert leaked not in names, leaked
    assert set(optcomp.__all__) <= set(names)
    for name in names:
        assert getattr(optcomp, name) is not None  # every listed name resolves
    assert optcomp.METHODS == ("basic", "drv", "kov", "advanced_pure", "optimal", "approx")


def test_import_is_light():
    """``import optcomp`` loads neither scipy nor the numerical core (they load on first use)."""
    code = "import sys, optcomp; print(sorted(m for m in sys.modules if m.startswith(('scipy', 'optcomp.'))))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert not [m for m in loaded if m.startswith("scipy")], loaded
    assert not {"optcomp.optimal", "optcomp.approx", "optcomp.lattice", "optcomp.calibrate"} & set(loaded), loaded


def test_version_has_one_source():
    ns: dict = {}
    exec((ROOT / "src" / "optcomp" / "_version.py").read_text(), ns)
    assert optcomp.__version__ == ns["__version__"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "optcomp._version.__version__"}
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^version: (\S+)$", cff, re.M).group(1) == optcomp.__version__
    assert f"## [{optcomp.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_license_and_docs_extra():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "MIT"}
    assert "license: MIT" in (ROOT / "CITATION.cff").read_text()
    assert any(r.startswith("sphinx>=") for r in project["optional-dependencies"]["docs"])
    assert any("docs" in r for r in project["optional-dependencies"]["dev"] if r.startswith("optcomp["))
    assert project["scripts"]["optcomp"] == "optcomp.cli:main"
