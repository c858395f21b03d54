"""Sphinx configuration: API reference generated from the docstrings (autodoc + napoleon).

Build: ``python -m sphinx -W -b html docs <output-dir>`` (tests/test_docs.py does this into a
temporary directory; docs/ holds sources only).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import optcomp  # noqa: E402

project = "optcomp"
author = "optcomp developers"
copyright = "optcomp developers (MIT License)"
release = optcomp.__version__
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # signatures show the defaults; the docstrings say the types
napoleon_google_docstring = True
napoleon_numpy_docstring = True
default_role = "literal"  # `x` in a docstring is code, never a dangling reference
nitpicky = False
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []

# Every docstring is rendered as reStructuredText (roles such as :func: become links).  The
# numerical core writes formulas in plain text: a bar is an absolute value or a norm (|x|,
# |a|_2), never a reST substitution, so bars outside inline literals are escaped; and a
# displayed equation is an indented block after a blank line, which reST would reflow as a
# block quote, so it is shown as a literal block with its line breaks.  No docstring is shown
# as a raw verbatim block as a whole (tests/test_docs.py checks).
_BACKQUOTED = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _escape_bars(line: str) -> str:
    if line.lstrip().startswith(("| ", "+-", "+=")):  # reST line blocks and grid tables keep their bars
        return line
    out, last = [], 0
    for m in _BACKQUOTED.finditer(line):
        out += [line[last:m.start()].replace("|", r"\|"), m.group(0)]
        last = m.end()
    return "".join(out + [line[last:].replace("|", r"\|")])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_MARKER = re.compile(r"([-*+] |\d+[.)] |#[.)] |\(\d+\) |:[^:]+: )")


def _content_indent(paragraph: list[str]) -> int:
    """Where the text of a paragraph starts: its second line, or after a list/field marker."""
    if len(paragraph) > 1:
        return _indent(paragraph[1])
    m = _MARKER.match(paragraph[0].lstrip())
    return _indent(paragraph[0]) + (len(m.group(1)) if m else 0)


def _plain_text_markup(app, what, name, obj, options, lines):
    out = []
    paragraph: list[str] = []  # the lines of the current paragraph
    previous: list[str] = []  # the paragraph before the last blank line
    literal = None  # indentation of the paragraph that opened a literal block
    for line in lines:
        if literal is not None and line.strip() and _indent(line) <= literal:
            literal, previous = None, []
        if literal is not None:
            out.append(line)
        elif not line.strip():
            out.append(line)
            previous, paragraph = paragraph or previous, []
        elif (not paragraph and previous and _indent(line) > _content_indent(previous)
              and not previous[0].lstrip().startswith(".. ") and not line.lstrip().startswith(">>>")):
            literal = _content_indent(previous)  # a displayed equation: keep its lines as they are
            out += [" " * literal + "::", "", line]
        else:
            paragraph.append(line)
            out.append(_escape_bars(line))
            if line.rstrip().endswith("::"):
                literal = _indent(paragraph[0])
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text_markup)
