"""The README's examples print what it says, and its two commands are the ones CI runs."""

from __future__ import annotations

import doctest
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_examples():
    result = doctest.testfile(str(ROOT / "README.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5
    assert result.failed == 0


def _block(name: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {name}:start -->\s*```bash\n(.+?)\n```\s*<!-- {name}:end -->", text, re.S)
    assert m, f"README lacks the {name} block"
    return m.group(1).strip()


def test_ci_runs_the_readme_test_command():
    command = _block("test-command")
    assert "pytest" in command and "pip install" in command
    ci = (ROOT / ".ci" / "run").read_text()
    assert "test-command:start" in ci  # .ci/run extracts and runs exactly that block
    assert "snakemake" in _block("figures-command")
