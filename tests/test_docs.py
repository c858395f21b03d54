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
from html.parser import HTMLParser

import pytest

import optcomp

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> pathlib.Path:
    """The HTML reference, built once into a temporary directory with warnings as errors."""
    pytest.importorskip("sphinx")
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return out / "html"


def test_sphinx_builds_the_api_reference_with_warnings_as_errors(html):
    api = (html / "api.html").read_text()
    for name in ("epsilon_g", "delta_g", "epsilon_bounds", "Accountant", "privacy_curve", "per_query_epsilon",
                 "noise_table", "kov_recipe", "get_epsilon", "remaining"):
        assert name in api, name
    assert "privacy filter" in (html / "index.html").read_text()
    assert not list((ROOT / "docs").glob("_build"))  # docs/ holds sources only


class _Entries(HTMLParser):
    """Each API entry (``<dt id="optcomp...">``): the first element of its ``<dd>`` and the
    number of internal links (cross-references) in its description."""

    def __init__(self):
        super().__init__()
        self.first: dict[str, str] = {}
        self.links: dict[str, int] = {}
        self._id = self._pending = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "dt" and (attrs.get("id") or "").startswith("optcomp"):
            self._id = attrs["id"]
            self.links.setdefault(self._id, 0)
        elif tag == "dd" and self._id:
            self._pending = self._id
        elif self._pending:
            self.first[self._pending] = f"{tag}.{attrs.get('class', '')}"
            self._pending = None
        if tag == "a" and "reference internal" in (attrs.get("class") or "") and self._id:
            self.links[self._id] += 1


def _entries(html: pathlib.Path) -> _Entries:
    parser = _Entries()
    parser.feed((html / "api.html").read_text())
    return parser


def test_api_entries_are_rendered_not_verbatim(html):
    """Every documented name renders its docstring as reST -- paragraphs, lists, links --
    never as one raw preformatted block (issue 16: 52 of 91 entries used to)."""
    entries = _entries(html)
    assert len(entries.first) >= 80, sorted(entries.first)
    verbatim = sorted(name for name, first in entries.first.items() if first.startswith(("div.highlight", "pre")))
    assert not verbatim, f"{len(verbatim)} API entries render as verbatim blocks: {verbatim}"
    for name in ("epsilon_bounds", "delta_bounds", "Bounds", "ExactTooLarge", "ApproxTooCostly"):
        assert entries.first[f"optcomp.{name}"].startswith("p."), name
    for name in ("epsilon_bounds", "ApproxTooCostly"):
        assert entries.links[f"optcomp.{name}"] >= 1, f"{name}: no cross-reference rendered as a link"
    api = (html / "api.html").read_text()
    assert "|d log H/dx|" in api  # a plain-text absolute value prints its bars


def test_docs_build_directory_is_ignored():
    """The README's build command writes into docs/_build/, which git must not offer to commit."""
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    r = subprocess.run(["git", "check-ignore", "-q", "docs/_build/html/index.html"], cwd=ROOT)
    assert r.returncode == 0, "docs/_build/ is not git-ignored"


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
    for leaked in ("Callable", "dataclass", "annotations", "np", "numbers", "math", "check_delta_g", "_inputs"):
        assert leaked not in names, leaked
    assert set(optcomp.__all__) <= set(names)
    for name in names:
        assert getattr(optcomp, name) is not None  # every listed name resolves
    assert optcomp.METHODS == ("basic", "drv", "kov", "advanced_pure", "optimal", "approx", "auto")


def test_a_repl_finds_the_mechanisms_and_the_adapters():
    """In a fresh interpreter ``optcomp.mechanisms`` (the module, not a function of the
    input layer) and ``optcomp.integrations`` resolve without importing them first, and
    ``dir(optcomp)`` lists every documented module (those ``docs/api.rst`` documents)."""
    code = ("import optcomp, inspect; m = optcomp.mechanisms; print(inspect.ismodule(m), m.__name__, "
            "optcomp.mechanisms.Laplace(scale=2.0).scale, optcomp.integrations.__name__, "
            "sorted(n for n in dir(optcomp) if inspect.ismodule(getattr(optcomp, n))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert r.returncode == 0, r.stderr
    ismod, name, scale, integrations, listed = r.stdout.split(" ", 4)
    assert (ismod, name, scale, integrations) == ("True", "optcomp.mechanisms", "2.0", "optcomp.integrations")
    documented = set(re.findall(r"automodule:: optcomp\.(\w+)$", (ROOT / "docs" / "api.rst").read_text(), re.M))
    assert {"mechanisms", "integrations", "kov_noise"} <= documented <= set(eval(listed))


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
