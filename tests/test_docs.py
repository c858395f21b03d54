"""Documentation and packaging: the Sphinx documentation builds without a warning, its examples
(doctests) and its command-line session print what they say, its generated tables are rendered
from the committed files, every measured number in its prose (and the README's) is found in a
generated file the page names, no issue number reaches a reader; the version has one source,
the public namespace is the public API, the licence is there."""

from __future__ import annotations

import doctest
import inspect
import math
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


PAGES = ["index", "guide", "toolkit", "cli", "reproducing", "benchmarks", "guarantee", "cluster", "api",
         "architecture"]


def test_sphinx_builds_every_page_with_warnings_as_errors(html):
    for page in PAGES:
        assert (html / f"{page}.html").is_file(), page
    assert sorted(p.stem for p in (ROOT / "docs").glob("*.rst")) == sorted(PAGES)
    api = (html / "api.html").read_text()
    for name in ("epsilon_g", "delta_g", "epsilon_bounds", "Accountant", "privacy_curve", "per_query_epsilon",
                 "noise_table", "kov_recipe", "get_epsilon", "remaining"):
        assert name in api, name
    assert "privacy filter" in (html / "index.html").read_text()
    assert "refinement" in (html / "guarantee.html").read_text()  # the proofs, from the module docstrings
    assert not list((ROOT / "docs").glob("_build"))  # docs/ holds sources only


def _text(path: pathlib.Path) -> str:
    """An HTML page's text, tags removed, whitespace collapsed."""
    import html as _html

    return " ".join(_html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


def _generated(rst: str) -> list[str]:
    return re.findall(r"^\.\. generated:: (\S+)$", (ROOT / "docs" / rst).read_text(), re.M)


def test_generated_tables_are_rendered_from_the_committed_files(html):
    """Every ``.. generated::`` file is rendered on its page: each cell of its tables is there,
    as text (so a number of the docs is never typed by hand)."""
    seen = 0
    for rst in sorted((ROOT / "docs").glob("*.rst")):
        page = _text(html / f"{rst.stem}.html")
        for source in _generated(rst.name):
            seen += 1
            for line in (ROOT / source).read_text().splitlines():
                if line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line):
                    for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1]):
                        cell = " ".join(cell.replace("\\|", "|").replace("**", "").replace("`", "").split())
                        assert cell in page, f"{rst.name}: {source}: {cell!r} not rendered"
    assert seen >= 9


def test_markdown_tables_become_restructured_text():
    """The converter of ``.. generated::`` on the Markdown the generators write: a paragraph, a
    table whose cells hold reST markup characters, a fenced block, bullets after a paragraph."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    text = ("<!-- generated -->\nMachine: 2 cores.\n\n| a | b_c |\n|---|---:|\n| **1 h** | x*y \\| z `k_1` |\n\n"
            "```text\nk = 1000 *raw*\n```\nWall times:\n- one_\n- two\nafter\n")
    assert conf.markdown_to_rst(text) == [
        "Machine: 2 cores.", "", ".. list-table::", "   :header-rows: 1", "   :class: generated", "",
        "   * - a", "     - b\\_c", "   * - **1 h**", "     - x\\*y \\| z `k_1`", "", "", "::", "",
        "   k = 1000 *raw*", "", "Wall times:", "", "- one\\_", "- two", "", "after", ""]


def _doc_files() -> list[pathlib.Path]:
    return sorted((ROOT / "docs").glob("*.rst"))


def test_documentation_examples():
    """Every ``>>>`` example of the documentation is a doctest, run here (one namespace per page)."""
    attempted = 0
    for path in _doc_files():
        result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, path.name
        attempted += result.attempted
    assert attempted >= 60


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _same_output(got: str, want: str) -> bool:
    """Equal text, numbers equal to 1e-9 relative (the core may move the last ulps)."""
    if _NUMBER.sub("#", got) != _NUMBER.sub("#", want):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-300)
               for a, b in zip(_NUMBER.findall(got), _NUMBER.findall(want)))


def _console_sessions(path: pathlib.Path):
    """The ``$`` lines of each ``.. code-block:: console`` block and the output shown below each."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() != ".. code-block:: console":
            continue
        commands = []
        for body in lines[i + 1:]:
            if body.strip() and not body.startswith("   "):
                break
            if body.startswith("   $ "):
                commands.append([body[5:], ""])
            elif body.strip() and commands:
                commands[-1][1] += body[3:] + "\n"
        yield commands


def test_command_line_session(tmp_path):
    """Every ``$ optcomp ...`` line of docs/cli.rst prints what the page shows (stdout and stderr
    together; ``optcomp`` run as ``python -m optcomp`` from this checkout;
    ``python -m optcomp.pipeline update-readme`` rewrites the outputs after an intended change)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    sessions = list(_console_sessions(ROOT / "docs" / "cli.rst"))
    assert sessions and sum(len(s) for s in sessions) >= 6
    seen = set()
    for session in sessions:
        for command, want in session:
            shell = re.sub(r"(^|\| )optcomp ", rf"\g<1>{sys.executable} -m optcomp ", command)
            r = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
            assert _same_output(r.stdout + r.stderr, want), f"$ {command}\n{r.stdout}{r.stderr}"
            if command.startswith("optcomp "):
                seen.add(command.split()[1])
    assert {"epsilon", "delta", "bounds", "compare", "split", "curve"} <= seen


def test_hardness_numbers_are_the_generated_instances():
    """The hardness paragraph's largest instance (k, solutions, oracle bits) is the largest
    oracle instance of the committed ``results/hardness/instances.csv``."""
    import csv
    import io

    from test_readme import committed

    text = " ".join((ROOT / "docs" / "guide.rst").read_text().split())
    m = re.search(r"k = (\d+) with ([\d,]+) solutions, asks the oracle for (\d+) bits", text)
    assert m, "the guide's hardness paragraph no longer names its largest instance"
    rows = [r for r in csv.DictReader(io.StringIO(committed("results/hardness/instances.csv")))
            if int(r["oracle_calls"]) > 0]
    largest = max(rows, key=lambda r: int(r["k"]))
    assert (int(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(3))) == (
        int(largest["k"]), int(largest["recovered_count"]), int(largest["bits_oracle"]))


# a measured quantity in prose: a time, a memory size, a percentage, a speed-up factor
_MEASURED = re.compile(r"(?<![\w.^/-])(\d[\d,]*(?:\.\d+)?)(?:\s?(ms|s|min|h|GiB|MiB|KiB|CPU-hours|CPU-minutes|CPU-s|%)"
                       r"(?![\w%])|(×))")


def _prose(path: pathlib.Path) -> tuple[str, list[str]]:
    """The prose of a README or a docs page (code blocks, comments and quoted generated blocks
    left out) and the generated files it names as the source of its numbers
    (``.. sources: a, b`` in reST, ``<!-- sources: a, b -->`` in Markdown)."""
    text = path.read_text()
    sources = [s.strip() for m in re.finditer(r"(?:^\.\. sources:|<!-- sources:)\s*([^\n]+?)\s*(?:-->)?$", text, re.M)
               for s in m.group(1).split(",")]
    if path.suffix == ".md":
        from optcomp.pipeline import README_QUOTES

        for name, source in README_QUOTES.items():
            text = re.sub(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", " ", text, flags=re.S)
            sources.append(source)
        text = re.sub(r"```.*?```", " ", text, flags=re.S)
        return re.sub(r"<!--.*?-->|<[^>]+>", " ", text, flags=re.S), sources
    keep, block = [], None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if block is not None and (not line.strip() or indent > block):
            continue
        block = None
        if line.lstrip().startswith(".. ") and not line.lstrip().startswith(".. list-table"):
            block = indent  # a directive or comment: its indented body is not prose
            continue
        if line.rstrip().endswith("::"):
            block = indent
        keep.append(line)
    return "\n".join(keep), sources


def test_measured_numbers_in_prose_come_from_generated_files():
    """Every time, memory size, percentage or speed-up written in the README's or the
    documentation's prose appears in a generated file (``results/``, ``benchmarks/results/``)
    that the page names as its source; generated tables themselves are rendered, not typed.
    A number in double quotes quotes a paper and is left alone."""
    checked = 0
    for path in [ROOT / "README.md", *_doc_files()]:
        prose, sources = _prose(path)
        for source in sources:
            assert source.startswith(("results/", "benchmarks/results/")) and (ROOT / source).is_file(), \
                f"{path.name}: source {source} is not a generated file"
        corpus = " ".join(" ".join((ROOT / s).read_text() for s in sources).split())
        prose = re.sub(r'"[^"\n]*"', " ", prose)  # a quotation ("about 20 %") is the paper's number, not ours
        for m in _MEASURED.finditer(" ".join(prose.split())):
            token = m.group(0)
            number = re.escape(m.group(1))
            unit = re.escape(m.group(2) or m.group(3))
            found = re.search(rf"(?<![\d.]){number}\s?{unit}", corpus)
            assert found, f"{path.relative_to(ROOT)}: {token!r} is in no generated file the page names {sources}"
            checked += 1
    assert checked >= 10


_ISSUE = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.I)


def test_no_issue_numbers_reach_a_reader(html):
    """An outsider cannot follow "issue 18": none in the README, the changelog, the docs' sources
    or the built pages (docstrings included)."""
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *_doc_files()]:
        assert not _ISSUE.search(path.read_text()), f"{path.name}: {_ISSUE.search(path.read_text()).group(0)}"
    for page in sorted(html.glob("*.html")):
        found = _ISSUE.search(_text(page))
        assert not found, f"{page.name}: {found.group(0)}"


def test_hosting_config_builds_like_the_test():
    """.readthedocs.yaml builds docs/conf.py with warnings as errors, from the docs extra."""
    text = (ROOT / ".readthedocs.yaml").read_text()
    assert re.search(r"^version: 2$", text, re.M)
    assert "configuration: docs/conf.py" in text and "fail_on_warning: true" in text
    assert re.search(r"python: \"3\.11\"", text) and "- docs" in text


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
