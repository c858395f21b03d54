"""Sphinx configuration: API reference generated from the docstrings (autodoc + napoleon).

Build: ``python -m sphinx -W -b html docs <output-dir>`` (tests/test_docs.py does this into a
temporary directory; docs/ holds sources only).
"""

import pathlib
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

# The numerical core (bounds, optimal, approx, lattice, loss) writes its docstrings as plain
# text with formulas (|x|, *, indentation for displayed equations), not reStructuredText.
# They are shown verbatim, as preformatted text, so that no formula is misread as markup.
_PLAIN_TEXT_MODULES = ("optcomp.bounds", "optcomp.optimal", "optcomp.approx", "optcomp.lattice", "optcomp.loss")


def _plain_text_module(what, name, obj) -> bool:
    module = name if what == "module" else getattr(obj, "__module__", None) or ""
    return any(module == m or module.startswith(m + ".") for m in _PLAIN_TEXT_MODULES)


def _verbatim(app, what, name, obj, options, lines):
    if not _plain_text_module(what, name, obj):
        return
    import inspect

    doc = inspect.getdoc(obj) or ""
    lines[:] = ["::", ""] + ["    " + line for line in doc.splitlines()] + [""] if doc.strip() else []


def setup(app):
    app.connect("autodoc-process-docstring", _verbatim)
