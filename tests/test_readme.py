"""The README's examples print what it says, and its two commands are the ones CI runs."""

from __future__ import annotations

import doctest
import math
import os
import pathlib
import re
import subprocess
import sys

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


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _same_output(got: str, want: str) -> bool:
    """Equal text, numbers equal to 1e-9 relative (the core may move the last ulps)."""
    if _NUMBER.sub("#", got) != _NUMBER.sub("#", want):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-300)
               for a, b in zip(_NUMBER.findall(got), _NUMBER.findall(want)))


def _console_sessions():
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        commands = []
        for line in block.splitlines(keepends=True):
            if line.startswith("$ "):
                commands.append([line[2:].rstrip("\n"), ""])
            else:
                commands[-1][1] += line
        yield commands


def test_readme_command_line_session(tmp_path):
    """Every ``$ optcomp ...`` line of the README's console blocks prints what the README shows
    (stdout and stderr together; ``optcomp`` run as ``python -m optcomp`` from this checkout)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    sessions = list(_console_sessions())
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


def test_readme_quotes_are_the_generated_files():
    """Every number block the README quotes is its generated file, word for word (refreshed
    by ``python -m optcomp.pipeline update-readme``, never typed by hand)."""
    from optcomp.pipeline import README_QUOTES, quoted_text

    text = (ROOT / "README.md").read_text()
    for name, source in README_QUOTES.items():
        block = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
        assert block, f"README has no {name} block"
        assert block.group(1) == quoted_text((ROOT / source).read_text()), f"README block {name} != {source}"
