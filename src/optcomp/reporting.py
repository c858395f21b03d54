"""What the repository's front page quotes of the generated files, kept in step with them.

* :data:`README_QUOTES` -- the README blocks (``<!-- name:start --> ... <!-- name:end -->``)
  and the generated Markdown file each quotes; :func:`quoted_text` -- what of a file a block
  holds;
* :func:`update_readme` -- copy every generated file into its block and rerun the
  ``console`` sessions (``$ optcomp ...`` lines) of the README and of ``docs/cli.rst``, so
  that no number or output there is typed by hand (``python -m optcomp.pipeline
  update-readme``; the tests compare).  The other pages of ``docs/`` render their generated
  files at build time (the ``generated`` directive of ``docs/conf.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["README_QUOTES", "quoted_text", "update_readme"]


# README blocks that quote generated files: <!-- name:start --> ... <!-- name:end -->
# (the documentation renders the other generated tables from their files at build time)
README_QUOTES = {
    "command-times": "results/timing/reference/commands.md",
}


def quoted_text(generated: str) -> str:
    """What the README quotes of a generated Markdown file: the file without its generator
    comment and outer blank lines (inner blank lines stay: they end tables and paragraphs)."""
    return "\n".join(line for line in generated.splitlines() if not line.startswith("<!--")).strip()


def update_readme(readme: str | os.PathLike = "README.md", root: str | os.PathLike = ".") -> list[str]:
    """Copy every generated file of :data:`README_QUOTES` into its README block (the
    numbers the README quotes are never typed by hand); returns the blocks changed."""
    import re

    path = Path(readme)
    text = path.read_text()
    changed = []
    for name, source in README_QUOTES.items():
        generated = Path(root, source)
        if not generated.exists():
            continue
        new = f"<!-- {name}:start -->\n" + quoted_text(generated.read_text()) + f"\n<!-- {name}:end -->"
        pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
        if pattern.search(text) and pattern.search(text).group(0) != new:
            text = pattern.sub(lambda _m: new, text)
            changed.append(name)
    refreshed = _refresh_console(text, Path(root))
    if refreshed != text:
        text = refreshed
        changed.append("console sessions")
    path.write_text(text)
    cli = Path(root, "docs", "cli.rst")  # the command-line session of the documentation
    if cli.exists():
        before = cli.read_text()
        after = _refresh_rst_console(before, Path(root))
        if after != before:
            cli.write_text(after)
            changed.append("docs/cli.rst sessions")
    return changed


def _run_session_line(command: str, cwd: str, root: Path) -> str:
    """One ``$ optcomp ...`` line run as ``python -m optcomp`` from ``root/src``: its stdout and stderr."""
    import re
    import subprocess

    env = dict(os.environ, PYTHONPATH=str((root / "src").resolve()))
    shell = re.sub(r"(^|\| )optcomp ", rf"\g<1>{sys.executable} -m optcomp ", command)
    r = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    return r.stdout + r.stderr


def _refresh_rst_console(text: str, root: Path) -> str:
    """The reStructuredText form of :func:`_refresh_console`: every ``.. code-block:: console``
    block (indented three spaces) gets the current output of each of its ``$`` lines."""
    import tempfile

    lines, out, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].strip() != ".. code-block:: console":
            i += 1
            continue
        i += 1
        block = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("   ")):
            block.append(lines[i])
            i += 1
        trailing = []
        while block and not block[-1].strip():
            trailing.insert(0, block.pop())
        with tempfile.TemporaryDirectory() as tmp:
            out.append("\n")
            for line in block:
                if line.startswith("   $ "):
                    out.append(line)
                    output = _run_session_line(line[5:].rstrip("\n"), tmp, root)
                    out += ["   " + o if o.strip() else "\n" for o in output.splitlines(keepends=True)]
        out += trailing
    return "".join(out)


def _refresh_console(text: str, root: Path) -> str:
    """Rerun every ``$ optcomp ...`` line of the README's ``console`` blocks (as
    ``python -m optcomp`` from ``root/src``) and put its output (stdout and stderr) below it."""
    import re
    import subprocess
    import tempfile

    env = dict(os.environ, PYTHONPATH=str((root / "src").resolve()))

    def run_block(match) -> str:
        out = []
        with tempfile.TemporaryDirectory() as tmp:
            for line in match.group(1).splitlines(keepends=True):
                if not line.startswith("$ "):
                    continue
                command = line[2:].rstrip("\n")
                shell = re.sub(r"(^|\| )optcomp ", rf"\g<1>{sys.executable} -m optcomp ", command)
                r = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
                out.append(line + r.stdout + r.stderr)
        return "```console\n" + "".join(out) + "```"

    return re.sub(r"```console\n(.*?)```", run_block, text, flags=re.S)
