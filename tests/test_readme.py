"""The README's examples print what it says, and its two commands are the ones CI runs."""

from __future__ import annotations

import doctest
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

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


def committed(path: str, root: pathlib.Path = ROOT) -> str:
    """The committed version of a generated file (``git show HEAD:path``): a user's own rerun
    (another config, a benchmark) changes the working copy, never what the README quotes.  In a
    clean clone (CI) both agree; outside a git checkout, or for a file not committed yet, the
    working copy."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True)
    if top.returncode == 0 and pathlib.Path(top.stdout.strip()).resolve() == root.resolve():
        shown = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout
    return (root / path).read_text()


def test_readme_quotes_are_the_generated_files():
    """Every number block the README quotes is its generated file as committed, word for word
    (refreshed by ``python -m optcomp.pipeline update-readme``, never typed by hand)."""
    from optcomp.pipeline import README_QUOTES, quoted_text

    text = (ROOT / "README.md").read_text()
    for name, source in README_QUOTES.items():
        block = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
        assert block, f"README has no {name} block"
        assert block.group(1) == quoted_text(committed(source)), f"README block {name} != {source} (committed)"


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def test_quotes_are_checked_against_the_commit_not_a_users_rerun(tmp_path):
    """A rerun that rewrites a generated file (a config change, ``bench_exact.py --quick``)
    leaves the committed text the README is checked against; without git, the working copy."""
    (tmp_path / "table.md").write_text("committed\n")
    assert committed("table.md", tmp_path) == "committed\n"  # no git checkout: the file itself
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "table.md")
    _git(tmp_path, "commit", "-q", "-m", "x")
    (tmp_path / "table.md").write_text("a user's rerun\n")
    assert committed("table.md", tmp_path) == "committed\n"
    (tmp_path / "new.md").write_text("not committed yet\n")
    assert committed("new.md", tmp_path) == "not committed yet\n"


def _benchmark(name: str, monkeypatch, tmp_path):
    """benchmarks/<name>.py as a module, writing into tmp_path instead of benchmarks/results."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    return module


def test_bench_exact_quick_never_overwrites_the_quoted_table(monkeypatch, tmp_path):
    """``bench_exact.py --quick`` (advertised in the README) writes bench_exact.quick.md, not
    the full table the README quotes; the full run writes bench_exact.md with every case."""
    bench = _benchmark("bench_exact", monkeypatch, tmp_path)
    monkeypatch.setattr(bench, "CASES", {"small k=3": (1.0, "small", 1), "heterogeneous k=48": (60.0, "big", 1)})
    monkeypatch.setattr(bench, "run_case", lambda spec, repeats: {"time": 0.5, "value": 1.25, "rss_mb": 40})
    assert bench.main(["--quick"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["bench_exact.quick.md"]
    assert "k=48" not in (tmp_path / "bench_exact.quick.md").read_text()
    assert bench.main([]) == 0
    assert "k=48" in (tmp_path / "bench_exact.md").read_text()


def test_bench_scale_subset_never_overwrites_the_quoted_table(monkeypatch, tmp_path):
    bench = _benchmark("bench_scale", monkeypatch, tmp_path)
    monkeypatch.setattr(bench, "CASES", [("identical k=3, basic", "identical", "basic", None, None, 1.0, 200)])
    monkeypatch.setattr(bench, "_child", lambda args, timeout, mem_bytes=None: (
        {"case": "identical k=3, basic", "method": "basic", "seconds": 0.1, "eps_g": 0.3}, "ok"))
    assert bench.main(["--only", "k=3", "--no-pld"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_scale.quick.csv", "bench_scale.quick.md"]


def test_bench_approx_quick_only_prints(monkeypatch, tmp_path, capsys):
    bench = _benchmark("bench_approx", monkeypatch, tmp_path)
    monkeypatch.setattr(bench, "_run", lambda args: print("a quick table"))
    assert bench.main(["--quick"]) == 0
    assert "a quick table" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())


def test_benchmark_quick_outputs_are_git_ignored():
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    for name in ("bench_exact.quick.md", "bench_scale.quick.csv", "bench_scale.quick.md"):
        r = subprocess.run(["git", "check-ignore", "-q", f"benchmarks/results/{name}"], cwd=ROOT)
        assert r.returncode == 0, name


def test_readme_hardness_numbers_are_the_generated_instances():
    """The hardness paragraph's largest instance (k, solutions, oracle bits) is the largest
    oracle instance of the committed ``results/hardness/instances.csv``; no run time is quoted
    there (it depends on the machine: ``results/timing/local/hardness.csv``)."""
    import csv
    import io

    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"k = (\d+) with ([\d,]+) solutions, asks the oracle for (\d+) bits", text)
    assert m, "README's hardness paragraph no longer names its largest instance"
    rows = [r for r in csv.DictReader(io.StringIO(committed("results/hardness/instances.csv")))
            if int(r["oracle_calls"]) > 0]
    largest = max(rows, key=lambda r: int(r["k"]))
    assert (int(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(3))) == (
        int(largest["k"]), int(largest["recovered_count"]), int(largest["bits_oracle"]))
    paragraph = text[text.index("The reduction is cheap"):text.index("answered without an oracle call")]
    assert not re.search(r"\d+(–\d+)? s\b", paragraph), "a machine-dependent time typed into the README"
