"""The README is a front page: short, its examples print what it says, its two commands are the
ones CI runs, its quoted block is its generated file, and every command, file and test its claims
table names exists.  (The documentation's pages: tests/test_docs.py.)"""

from __future__ import annotations

import doctest
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


def test_ci_runs_the_readme_commands():
    """.ci/run runs the test command, extracted from its README block exactly as written (the
    figures command's clean tree is checked by tests/test_provenance.py in that run)."""
    command = _block("test-command")
    assert "pytest" in command and "pip install" in command
    assert "snakemake" in _block("figures-command") and "--cores 8" in _block("figures-command")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command:start -->" in ci and 'bash -euo pipefail -c "$command"' in ci
    assert "test_provenance" in ci


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300, "the README is the front page: the rest belongs in docs/"
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == ["Two commands", "Five lines each", "The papers' claims, reproduced", "Gallery",
                        "Documentation", "How to cite"], headings
    flat = " ".join(text.split())
    assert "`--cores 8`" in flat and "fixed in advance" in flat and "privacy filter" in flat
    for figure in re.findall(r'<img src="([^"]+)"', text):
        assert (ROOT / figure).is_file(), figure


def _claims() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- claims:start -->")[1].split("<!-- claims:end -->")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.strip().splitlines()]
    assert rows[0] == ["paper claim", "command", "generated file", "test"]
    return rows[2:]


def test_claims_table_names_commands_files_and_tests_that_exist():
    """Each row: the command runs (``optcomp ...``) or names outputs of the workflow
    (``snakemake ... target``); the generated file is committed; the test exists."""
    pytest.importorskip("snakemake")
    from optcomp import provenance

    rows = _claims()
    assert len(rows) >= 8
    workflow = provenance._workflow(ROOT)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for claim, command, generated, test in rows:
        command = command.strip("`")
        if command.startswith("optcomp "):
            r = subprocess.run([sys.executable, "-m", "optcomp", *command.split()[1:]], capture_output=True,
                               text=True, env=env, timeout=120)
            assert r.returncode == 0 and r.stdout.strip(), f"{claim}: {command}\n{r.stderr}"
        else:
            words = command.split()
            assert words[:3] == ["snakemake", "--cores", "8"], command
            for target in words[3:]:
                assert any(rule.is_producer(target) for rule in workflow.rules), f"{claim}: no rule writes {target}"
        assert committed(generated.strip("`")), f"{claim}: {generated} is not committed"
        m = re.fullmatch(r"`(tests/\w+\.py)::(\w+)`", test)
        if m:
            source = (ROOT / m.group(1)).read_text()
            assert re.search(rf"^def {m.group(2)}\(", source, re.M), f"{claim}: {test} does not exist"
        else:
            assert test.startswith("measured, not tested: `benchmarks/") and (
                ROOT / test.split("`")[1]).is_file(), test


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
