"""Sphinx configuration: the user guide and the pages on reproducing, benchmarks, the guarantee
and the cluster (reStructuredText in docs/), the API reference generated from the docstrings
(autodoc + napoleon), and the generated tables of results/ and benchmarks/results/ rendered
from those files at build time (the ``generated`` directive below), never copied by hand.

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
smartquotes = False  # quotes and apostrophes as written (and as in the generated tables)
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


# ------------------------------------------------------------------ generated Markdown files
# The pipeline and the benchmarks write their tables as Markdown (results/**/*.md,
# benchmarks/results/*.md).  ``.. generated:: path`` renders such a file in place, converted
# to reStructuredText at build time: pipe tables become tables, a fenced block a literal
# block, other lines paragraphs or bullet items.  A page therefore shows the generated file
# as it is committed, and no number of it is ever typed into docs/.

_INLINE = re.compile(r"(\*\*[^*]+?\*\*|`[^`]+`)")


def _inline(text: str) -> str:
    """Markdown inline text as reST: **bold** and `code` kept, every other character that reST
    reads as markup escaped."""
    out = []
    for i, part in enumerate(_INLINE.split(text)):
        if i % 2:
            out.append(part)
        else:
            out.append(re.sub(r"([\\*_|`<>\[\]])", r"\\\1", part))
    return "".join(out).strip() or "\\ "


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
    return [_inline(c.replace("\\|", "|").strip()) for c in cells]


def markdown_to_rst(text: str) -> list[str]:
    """The Markdown subset the generators write (pipe tables, fenced blocks, paragraphs,
    ``-`` bullets, ``<!-- -->`` comments) as reStructuredText lines."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("<!--")]
    out: list[str] = []
    kind = None  # the kind of the previous line: blank, text, bullet (blocks end with a blank)

    def start(new_kind):
        nonlocal kind
        if out and out[-1] != "" and kind != new_kind:
            out.append("")  # reST separates a paragraph, a list and a block by a blank line
        kind = new_kind

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            start("block")
            out += ["::", ""]
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append("   " + lines[i])
                i += 1
            out.append("")
        elif line.startswith("|"):
            start("block")
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"\|[\s:|-]+\|", lines[i].strip()):
                    rows.append(_cells(lines[i]))
                i += 1
            i -= 1
            out += [".. list-table::", "   :header-rows: 1", "   :class: generated", ""]
            for row in rows:
                out += [f"   * - {row[0]}"] + [f"     - {cell}" for cell in row[1:]]
            out.append("")
        elif line.startswith("- "):
            start("bullet")
            out.append("- " + _inline(line[2:]))
        elif line.strip():
            start("text")
            out.append(_inline(line))
        else:
            out.append("")
            kind = None
        i += 1
    return out + [""]


def _generated_directive():
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList

    class Generated(Directive):
        """``.. generated:: results/x.md``: the committed generated file, rendered in place."""

        required_arguments = 1
        has_content = False

        def run(self):
            path = ROOT / self.arguments[0]
            env = self.state.document.settings.env
            env.note_dependency(str(path))
            container = __import__("docutils").nodes.container(classes=["generated"])
            lines = markdown_to_rst(path.read_text())
            self.state.nested_parse(StringList(lines, source=str(path)), self.content_offset, container)
            return [container]

    return Generated


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text_markup)
    app.add_directive("generated", _generated_directive())
