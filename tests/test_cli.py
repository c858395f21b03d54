"""The command line end to end: ``cli.main`` with this process's stdin, stdout, stderr and
working directory standing in for a subprocess's, and ``python -m optcomp`` itself where the
process boundary is the point (version and bare usage, bad input, --mechanism, hostile stdin).

Every subcommand runs once per output format that matters and its output is parsed back
(table, JSON, CSV) and compared with the library; bad input must give exit status 2, one
line on stderr, nothing on stdout and no traceback.  The parser itself is checked in
process (help text on every flag, an example in every subcommand's help).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

import numpy as np

import optcomp
from optcomp import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
COMMANDS = ("epsilon", "delta", "bounds", "compare", "split", "curve", "methods")


def run_process(*args, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    """``python -m optcomp ARGS`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "optcomp", *args], input=stdin, capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=120)


def run(*args, stdin: str | None = None, cwd=None, process: bool = False) -> subprocess.CompletedProcess:
    """What ``python -m optcomp ARGS`` gives (status, stdout, stderr), from ``cli.main`` in this
    process (a subprocess's start-up, ~0.3-0.5 s, spared), or from :func:`run_process` with
    ``process``: stdin a text stream over UTF-8 bytes (with a ``buffer``, as a process's), stdout
    and stderr captured, the working directory ``cwd``, a SystemExit's code the status
    (``python -m optcomp`` runs ``sys.exit(main())``); a warning is an error under the suite's
    filter, which the command turns into its one-line message (the stderr checks then fail)."""
    if process:
        return run_process(*args, stdin=stdin, cwd=cwd)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    here = os.getcwd()
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            status = cli.main(list(args))
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
    finally:
        os.chdir(here)
        sys.stdin, sys.stdout, sys.stderr = saved
    return subprocess.CompletedProcess(["optcomp", *args], status, out.getvalue(), err.getvalue())


def ok(*args, **kw) -> str:
    r = run(*args, **kw)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return r.stdout


def rows_json(*args, **kw) -> list[dict]:
    data = json.loads(ok(*args, "--json", **kw))
    assert data["command"] == args[0]
    return data["rows"]


def inproc_json(*args) -> list[dict]:
    """cli.main in this process (no start-up cost: for the checks of the numbers; every
    subcommand also runs through a subprocess, here and in tests/test_readme.py)."""
    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        assert cli.main([*args, "--json"]) == 0
    finally:
        sys.stdout = saved
    data = json.loads(out.getvalue())
    assert data["command"] == args[0]
    return data["rows"]


def rows_csv(*args, **kw) -> list[dict]:
    return list(csv.DictReader(io.StringIO(ok(*args, "--csv", **kw))))


def fails(*args, stdin=None, match: str = "") -> str:
    r = run_process(*args, stdin=stdin)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""  # nothing half-written
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert lines[0].startswith("optcomp")
    assert match in lines[0], lines[0]
    return lines[0]


def fails_in_process(args, match, capsys, monkeypatch, stdin: str | None = None) -> str:
    """cli.main on bad input: status 2 (returned, or argparse's SystemExit), one line on stderr."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        status = cli.main(list(args))
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("optcomp"), err
    assert match in err, err
    return err


# ------------------------------------------------------------------------- the basics


def test_version_and_bare_usage():
    assert ok("--version", process=True).strip() == f"optcomp {optcomp.__version__}"
    r = run_process()
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: optcomp")
    for command in COMMANDS:
        assert command in r.stderr


def test_every_subcommand_has_help_with_an_example(capsys):
    assert "examples:\n  optcomp epsilon --eps" in ok("epsilon", "--help")
    for command in COMMANDS:  # in process (each subprocess costs a Python start-up)
        with pytest.raises(SystemExit) as exc:
            cli.main([command, "--help"])
        assert exc.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: optcomp {command}")
        assert f"optcomp {command} " in text.split("examples:")[1], command


def test_every_flag_has_help_text():
    parser = cli._parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert set(subparsers.choices) == set(COMMANDS)
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help and action.help.strip(), (name, action.option_strings)


# ------------------------------------------------------------------------- answers, parsed back


def test_epsilon_all_formats_agree_with_the_library():
    args = ("epsilon", "--eps", "0.1", "--k", "100", "--delta-g", "1e-6")
    want = optcomp.epsilon_g(0.1, k=100, delta_g=1e-6)
    assert rows_json(*args) == [{"method": "auto", "delta_g": 1e-6, "eps_g": want}]
    # the other formats with a closed form (numpy only: a fast start)
    args += ("--method", "kov")
    want = optcomp.epsilon_g(0.1, k=100, delta_g=1e-6, method="kov")
    table = ok(*args).splitlines()
    assert table[0].startswith("# 100 mechanisms")
    assert table[1].split() == ["method", "delta_g", "eps_g"]
    assert float(table[2].split()[2]) == want  # shortest round-trip repr: exact
    (row,) = rows_csv(*args)
    assert float(row["eps_g"]) == want and row["method"] == "kov"


def test_delta_with_counts_and_options():
    got = inproc_json("delta", "--eps", "0.1,0.2", "--delta", "1e-7", "--count", "50,20", "--eps-g", "5",
                      "--method", "approx", "--tol", "1e-4", "--max-points", "1000000")
    want = optcomp.delta_g([0.1, 0.2], 1e-7, counts=[50, 20], eps_g=5.0, method="approx", tol=1e-4,
                           max_points=10**6)
    assert got[0]["delta_g"] == want
    got = rows_json("delta", "--eps", "0.1,0.2", "--delta", "1e-7", "--count", "50,20", "--eps-g", "5", "--method", "drv")
    assert got[0]["delta_g"] == optcomp.delta_g([0.1, 0.2], 1e-7, counts=[50, 20], eps_g=5.0, method="drv")


def test_inf_is_spelled_inf_everywhere():
    args = ("epsilon", "--eps", "0.1", "--delta", "0.01", "--k", "10", "--delta-g", "0.05", "--method", "basic")
    assert rows_json(*args)[0]["eps_g"] == "inf"
    r = run(*args, "--csv")  # the reason on stderr (CSV has no place for it)
    assert r.returncode == 0 and list(csv.DictReader(io.StringIO(r.stdout)))[0]["eps_g"] == "inf"
    assert r.stderr.startswith("optcomp epsilon: note: unattainable") and len(r.stderr.splitlines()) == 1
    assert ok(*args).splitlines()[2].split()[2] == "inf"


# 10 mechanisms with delta 0.01: some delta event has probability 1 - 0.99^10 = 0.0956...
UNATTAINABLE = ("--eps", "0.1", "--delta", "0.01", "--k", "10", "--delta-g", "0.05")


def test_unattainable_budget_says_why():
    """Issue 16, item 4: inf with exit 0, and the reason with a certified number: the printed
    value is at most 1 - 0.99^10 (rounded down) and still above delta_g."""
    a = 1 - 0.99**10
    for method in ("optimal", "basic", "approx"):
        data = json.loads(ok("epsilon", *UNATTAINABLE, "--method", method, "--json"))
        assert data["rows"][0]["eps_g"] == "inf"
        (note,) = data["notes"]
        m = re.fullmatch(r"unattainable: delta_g = 0\.05 < 1 - prod\(1 - delta_i\) = ([0-9.e-]+) .*", note)
        assert m, note
        assert 0.05 < float(m.group(1)) <= a and float(m.group(1)) > a - 1e-4
    caption = ok("epsilon", *UNATTAINABLE).splitlines()[0]
    assert caption.startswith("# 10 mechanisms") and "unattainable: delta_g = 0.05 < 1 - prod(1 - delta_i)" in caption
    # attainable, but not by a closed form: a different reason
    data = json.loads(ok("epsilon", *UNATTAINABLE[:-1], "0.0957", "--method", "basic", "--json"))
    assert data["rows"][0]["eps_g"] == "inf" and "method basic certifies no eps_g" in data["notes"][0]
    # a finite answer has no note
    assert "notes" not in json.loads(ok("epsilon", *UNATTAINABLE[:-1], "0.0957", "--json"))
    # close to the boundary the printed value keeps enough digits to stay above delta_g
    assert cli._decimal_down(0.0956179249911955, 0.09561) == "0.095617"
    assert cli._decimal_down(0.1 + 2**-50, 0.1) == "0.1000000000000008"


def test_bounds_never_print_nan():
    """Issue 16, items 4, 12: the gap of an unattainable budget is inf in every format."""
    r = run("bounds", *UNATTAINABLE, "--csv")
    assert r.returncode == 0 and "nan" not in r.stdout and "note: unattainable" in r.stderr
    for fmt_rows in (rows_json("bounds", *UNATTAINABLE), list(csv.DictReader(io.StringIO(r.stdout)))):
        assert [fmt_rows[0][c] for c in ("eps_g_lower", "eps_g_upper", "gap")] == ["inf"] * 3
    table = ok("bounds", *UNATTAINABLE)
    assert "nan" not in table and table.splitlines()[2].split() == ["0.05", "inf", "inf", "inf"]
    assert "unattainable" in table.splitlines()[0]
    # NaN is rendered as no value in every format, never as "nan"
    for fmt in ("json", "csv", "table"):
        assert "nan" not in cli._render("x", "c", ["a", "b"], [[float("nan"), 1.0]], fmt).lower()


def test_bounds_bracket_the_optimum():
    (row,) = inproc_json("bounds", "--eps", "0.1,0.2", "--count", "30,20", "--delta-g", "1e-6", "--tol", "1e-5")
    opt = optcomp.epsilon_g([0.1, 0.2], counts=[30, 20], delta_g=1e-6)
    assert row["eps_g_lower"] <= opt <= row["eps_g_upper"]
    assert row["gap"] <= 1e-5


def test_compare_lists_every_method_with_its_theorem():
    rows = inproc_json("compare", "--eps", "0.1", "--k", "100", "--delta-g", "1e-6")
    assert [r["method"] for r in rows] == list(optcomp.METHODS)  # auto too: the default answer, and its source
    by = {r["method"]: r for r in rows}
    for m in optcomp.METHODS:
        if m not in ("approx", "auto"):
            assert by[m]["theorem"] == optcomp.METHOD_INFO[m].theorem
        if m != "approx":
            assert by[m]["eps_g"] == optcomp.epsilon_g(0.1, k=100, delta_g=1e-6, method=m)
    assert by["auto"]["theorem"] == "The default: optimal (exact)" and by["auto"]["vs_optimal"] == 1.0
    assert by["optimal"]["vs_optimal"] == 1.0
    assert by["basic"]["vs_optimal"] > by["drv"]["vs_optimal"] > by["kov"]["vs_optimal"] > 1.0
    assert by["approx"]["certified_lower"] <= by["optimal"]["eps_g"] <= by["approx"]["eps_g"]
    table = ok("compare", "--eps", "0.1", "--k", "100", "--eps-g", "4", "--methods", "basic,kov")
    assert [line.split()[0] for line in table.splitlines()[2:]] == ["basic", "kov"]


def test_compare_from_stdin_has_a_row_per_method_of_the_api(capsys, monkeypatch):
    """Two pairs on stdin: one row per name of optcomp.METHODS, each the library's value
    for the same mechanisms (approx: its certified bracket around the optimum)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("eps,delta\n0.1,0\n0.2,1e-6\n"))
    rows = inproc_json("compare", "--file", "-", "--delta-g", "1e-5")
    api = {m: optcomp.epsilon_g([0.1, 0.2], [0.0, 1e-6], delta_g=1e-5, method=m) for m in optcomp.METHODS}
    assert [r["method"] for r in rows] == list(api) and len(rows) == 7
    for r in rows:
        if r["method"] == "approx":
            assert r["certified_lower"] <= api["optimal"] <= r["eps_g"]
        else:
            assert r["eps_g"] == api[r["method"]], r["method"]
    # auto answers with approx where exact is out of reach: the row says so
    eps = ",".join(repr(v) for v in np.random.default_rng(60).uniform(0.01, 0.07, 60).tolist())
    rows = inproc_json("compare", "--eps", eps, "--delta-g", "1e-6", "--methods", "optimal,auto")
    assert rows[0]["eps_g"] is None and rows[1]["theorem"].startswith("The default: approx (certified upper bound")
    assert rows[1]["eps_g"] == optcomp.epsilon_g([float(x) for x in eps.split(",")], delta_g=1e-6)


def test_compare_reports_an_exact_computation_that_is_too_large():
    # 60 distinct arbitrary reals (not multiples of a common unit): 2^30 atoms per half
    eps = ",".join(repr(v) for v in np.random.default_rng(60).uniform(0.01, 0.07, 60).tolist())
    rows = inproc_json("compare", "--eps", eps, "--delta-g", "1e-6", "--methods", "kov,optimal")
    assert rows[0]["eps_g"] > 0 and rows[1]["eps_g"] is None and "approx" in rows[1]["note"]
    assert rows[0]["vs_optimal"] is None  # no optimum, no approx: no ratio
    # issue 16, item 6: without the optimum the ratio is to approx's upper bound, and says so
    data = json.loads(ok("compare", "--eps", eps, "--delta-g", "1e-6", "--methods", "kov,optimal,approx", "--json"))
    by = {r["method"]: r for r in data["rows"]}
    assert "vs_optimal" not in by["kov"] and by["kov"]["vs_approx"] == by["kov"]["eps_g"] / by["approx"]["eps_g"]
    assert any(n.startswith("vs_approx: ratio to approx's certified upper bound") for n in data["notes"])
    table = ok("compare", "--eps", eps, "--delta-g", "1e-6", "--methods", "kov,approx")
    assert "vs_approx" in table.splitlines()[1] and "optimal not compared" in table.splitlines()[0]


def test_approx_is_labelled_by_the_algorithm_that_ran():
    """Issue 16, item 6: the fast algorithm is not labelled as the published one."""
    args = ("compare", "--eps", "0.1", "--k", "20", "--delta-g", "1e-6", "--methods", "approx")
    (fast,) = inproc_json(*args)
    (paper,) = inproc_json(*args, "--algorithm", "paper")
    assert "fast lattice algorithm" in fast["theorem"] and "as published" not in fast["theorem"]
    assert "algorithm='paper' as published" in paper["theorem"]
    listed = {r["method"]: r["theorem"] for r in inproc_json("methods")}
    assert "default: fast lattice algorithm" in listed["approx"]
    (row,) = inproc_json("split", "--eps-g", "0.5", "--delta-g", "1e-6", "--k", "20", "--method", "approx")
    assert "fast lattice algorithm" in row["theorem"]


def test_split_says_why_the_kov_recipe_is_missing():
    """Issue 16, item 6: KOV Cor. 4.1 holds for 0 < eps_g <= 0.9 and delta_g > 0 only."""
    data = json.loads(ok("split", "--eps-g", "1", "--delta-g", "1e-6", "--k", "100", "--json"))
    assert "kov_cor4.1" not in [r["method"] for r in data["rows"]]
    assert data["notes"] == ["no kov_cor4.1 row: KOV Cor. 4.1 holds only for 0 < eps_g <= 0.9 and delta_g > 0 "
                             "(here eps_g = 1.0, delta_g = 1e-06)"]
    assert "no kov_cor4.1 row" in ok("split", "--eps-g", "0.5", "--delta-g", "0", "--k", "100").splitlines()[0]
    data = json.loads(ok("split", "--eps-g", "0.9", "--delta-g", "1e-6", "--k", "100", "--json"))
    assert "kov_cor4.1" in [r["method"] for r in data["rows"]] and "notes" not in data
    # one method asked for: no recipe row promised, no note
    assert "notes" not in json.loads(ok("split", "--eps-g", "1", "--delta-g", "1e-6", "--k", "100",
                                        "--method", "kov", "--json"))


def test_split_table_and_weights():
    rows = inproc_json("split", "--eps-g", "0.5", "--delta-g", "1e-6", "--k", "100", "--sensitivity", "2")
    by = {r["method"]: r for r in rows}
    assert list(by) == ["basic", "drv", "kov", "optimal", "kov_cor4.1"]
    for m in ("basic", "drv", "kov", "optimal"):
        assert by[m]["eps"] == optcomp.calibrate.per_query_epsilon(100, 0.5, 1e-6, method=m)
        assert by[m]["laplace_scale"] == 2.0 / by[m]["eps"]
        assert optcomp.epsilon_g(by[m]["eps"], k=100, delta_g=1e-6, method=m) <= 0.5
    assert by["optimal"]["noise_vs_optimal"] == 1.0
    assert all(by[m]["noise_vs_optimal"] > 1.0 for m in ("basic", "drv", "kov", "kov_cor4.1"))
    assert by["kov_cor4.1"]["delta"] == 1e-6 / 200
    rows = rows_csv("split", "--eps-g", "1", "--delta-g", "1e-6", "--weights", "1,2", "--count", "10,5",
                    "--method", "kov")
    eps = [float(r["eps"]) for r in rows]
    assert eps[1] == 2 * eps[0]
    assert optcomp.epsilon_g(eps, counts=[10, 5], delta_g=1e-6, method="kov") <= 1.0
    assert optcomp.epsilon_g([e * (1 + 1e-9) for e in eps], counts=[10, 5], delta_g=1e-6, method="kov") > 1.0


def test_curve_and_tradeoff():
    rows = rows_csv("curve", "--eps", "0.1", "--k", "100", "--eps-g", "2,4,6", "--method", "kov")
    assert [float(r["eps_g"]) for r in rows] == [2.0, 4.0, 6.0]
    for r in rows:
        assert float(r["delta"]) == optcomp.delta_g(0.1, k=100, eps_g=float(r["eps_g"]), method="kov")
    rows = rows_json("curve", "--eps", "0.4", "--k", "5", "--tradeoff", "--num-alpha", "11", "--method", "drv")
    assert rows[0]["alpha"] == 0.0 and rows[-1]["alpha"] == 1.0 and rows[-1]["beta"] == 0.0
    assert all(0.0 <= r["beta"] <= r["beta_upper"] <= 1.0 for r in rows)
    rows = inproc_json("curve", "--eps", "0.1,0.2", "--count", "20,10", "--num", "3", "--method", "approx")
    assert all(r["delta_lower"] <= r["delta"] for r in rows) and len(rows) == 3


def test_methods():
    rows = rows_json("methods")
    assert [r["method"] for r in rows] == list(optcomp.METHODS)
    assert rows[4]["options"] == "max_atoms,max_memory"


# ------------------------------------------------------------------------- files and stdin


def test_file_csv_json_and_stdin_agree(tmp_path):
    want = optcomp.epsilon_g([0.1, 0.5], [0.0, 1e-6], counts=[100, 1], delta_g=1e-5)
    (tmp_path / "m.csv").write_text("eps,delta,count\n0.1,0,100\n0.5,1e-6,1\n")
    (tmp_path / "m.json").write_text(json.dumps([{"eps": 0.1, "delta": 0, "count": 100}, {"eps": 0.5, "delta": 1e-6}]))
    acc = optcomp.Accountant().compose(0.1, count=100).compose(0.5, 1e-6)
    (tmp_path / "ledger.json").write_text(json.dumps(acc.to_dict()))
    got = [rows_json("epsilon", "--file", name, "--delta-g", "1e-5", cwd=tmp_path)[0]["eps_g"]
           for name in ("m.csv",)]
    for name in ("m.json", "ledger.json"):  # the rest with a closed form: the same mechanisms?
        got.append(rows_json("epsilon", "--file", name, "--delta-g", "1e-5", "--method", "kov", cwd=tmp_path)[0]["eps_g"])
    for name in ("m.csv", "m.json"):
        got.append(rows_json("epsilon", "--file", "-", "--delta-g", "1e-5", "--method", "kov",
                             stdin=(tmp_path / name).read_text())[0]["eps_g"])
    kov = optcomp.epsilon_g([0.1, 0.5], [0.0, 1e-6], counts=[100, 1], delta_g=1e-5, method="kov")
    assert got == [want] + [kov] * 4


def test_the_ledger_reader_is_the_library_behind_file(tmp_path, monkeypatch):
    """optcomp.ledger.read_accountant -- what --file runs -- gives the Accountant of the
    same mechanisms from CSV, JSON and stdin; its errors are LedgerError (a ValueError) naming
    the file and line, which the command line prefixes with the flag."""
    from optcomp import ledger
    from optcomp.mechanisms import Laplace

    (tmp_path / "m.csv").write_text('eps,delta,count,mechanism\n0.1,0,100,\n,,2,"laplace:scale=10"\n')
    (tmp_path / "m.json").write_text(json.dumps([{"eps": 0.1, "delta": 0, "count": 1e2},
                                                 {"mechanism": "Laplace", "scale": 10, "count": 2}]))
    want = optcomp.Accountant().compose(0.1, count=100).compose(Laplace(10.0), count=2)
    assert ledger.read_accountant(str(tmp_path / "m.csv")) == want
    assert ledger.read_accountant(str(tmp_path / "m.json")) == want
    monkeypatch.setattr(sys, "stdin", io.StringIO((tmp_path / "m.csv").read_text()))
    assert ledger.read_accountant("-") == want
    (tmp_path / "bad.csv").write_text("eps,delta\n0.1,2\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ledger.LedgerError, match=r"^bad\.csv line 2: delta must lie in \[0, 1\), got 2.0$") as exc:
        ledger.read_accountant("bad.csv")
    assert isinstance(exc.value, ValueError)
    with pytest.raises(ValueError, match="^missing.csv: No such file"):
        ledger.read_accountant("missing.csv")
    r = run("epsilon", "--file", "bad.csv", "--delta-g", "1e-6", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "optcomp epsilon: error: --file bad.csv line 2: delta must lie in [0, 1), got 2.0\n"


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, match", [
    (("epsilon", "--eps", "0.1,,0.2", "--delta-g", "1e-6"), "empty item 2"),
    (("epsilon", "--eps", "0.1,", "--delta-g", "1e-6"), "empty item 2"),
    (("epsilon", "--eps", "0.1", "--k", "2.5", "--delta-g", "1e-6"), "--k"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--eps", "0.2", "--delta-g", "1e-6"), "more than once"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--file", "m.csv", "--delta-g", "1e-6"), "not both"),
    (("epsilon", "--eps", "-0.1", "--k", "10", "--delta-g", "1e-6"), "eps must be"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1.5"), "delta_g"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--eta", "0.1"), "--eta"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--method", "nope"), "--method"),
    (("epsilon", "--eps", "0.1", "--k", "10"), "--delta-g"),
    (("epsilon", "--eps", "0.1,0.2", "--delta", "0,0,0", "--delta-g", "1e-6"), "--delta has 3 items"),
    (("epsilon", "--delta-g", "1e-6"), "no mechanisms"),
    (("epsilon", "--file", "/nonexistent/m.csv", "--delta-g", "1e-6"), "/nonexistent/m.csv"),
    (("delta", "--eps", "0.1", "--k", "10", "--eps-g", "1", "--json", "--csv"), "--csv"),
    (("bounds", "--eps", "0.1", "--k", "10", "--eps-g", "1", "--delta-g", "1e-6"), "not allowed"),
    (("compare", "--eps", "0.1", "--k", "10", "--eps-g", "1", "--methods", "kov,nope"), "nope"),
    (("split", "--eps-g", "1", "--delta-g", "1e-6"), "--k"),
    (("split", "--eps-g", "1", "--delta-g", "1e-6", "--k", "10", "--sensitivity", "0"), "sensitivity"),
    (("curve", "--eps", "0.1", "--k", "10", "--eps-g", "1,nan"), "--eps-g"),
    (("frobnicate",), "invalid choice"),
    # moved from tests/test_inputs.py (the CLI's checks now live here)
    (("epsilon", "--eps", "0.1", "--k", "0", "--delta-g", "0.1"), "--k"),
    (("delta", "--eps", "0.1", "--k", "3", "--eps-g", "nan"), "--eps-g"),
    (("epsilon", "--eps", "abc", "--k", "3", "--delta-g", "0.1"), "--eps"),
    (("epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "0.1", "--method", "x"), "--method"),
    # issue 16, item 10: a negative number is a value, rejected by the range check naming it
    (("epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "-1e-6"), "delta_g must lie in [0, 1), got -1e-06"),
    (("epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "-.5"), "delta_g must lie in [0, 1), got -0.5"),
    (("epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "-inf"), "delta_g must lie in [0, 1), got -inf"),
    (("epsilon", "--eps", "-1e-3", "--k", "3", "--delta-g", "1e-6"), "eps must be finite and >= 0, got -0.001"),
    (("epsilon", "--eps", "0.1", "--k", "-3", "--delta-g", "1e-6"), "argument --k: expected an integer in [1,"),
    (("delta", "--eps", "0.1", "--k", "3", "--eps-g", "-2e-3"), "eps_g must be finite and >= 0, got -0.002"),
    # one rule, one message for the grid sizes
    (("curve", "--eps", "0.1", "--k", "3", "--num", "0"), "argument --num: expected an integer >= 2, got '0'"),
    (("curve", "--eps", "0.1", "--k", "3", "--num", "1"), "argument --num: expected an integer >= 2, got '1'"),
    (("curve", "--eps", "0.1", "--k", "3", "--num-alpha", "1"), "argument --num-alpha: expected an integer >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(args, match, capsys, monkeypatch):
    fails_in_process(args, match, capsys, monkeypatch)


@pytest.mark.parametrize("text, match", [
    ("eps,epsilon\n0.1,0.2\n", "unknown column 'epsilon'"),
    ("eps,delta\n0.1,\n", "line 2: empty delta"),
    ("eps,delta\n0.1,0,5\n", "line 2"),
    ("delta\n0.1\n", "eps column"),
    ("eps\n", "no mechanisms"),
    ('[{"eps": 0.1, "foo": 1}]', "unknown field 'foo'"),
    ('[{"eps": 0.1, "count": 2.5}]', "count"),
    ('[{"eps": 0.1', "invalid JSON"),
    ("", "empty"),
    # issue 16, item 12: hostile files
    ("eps\n" + "1" * 140_000 + "\n", "line 2: malformed CSV: a field longer than 131,072 characters"),
    ("eps\n0.1\r0.2\n", "line 2: a bare carriage return"),
    ('eps\n"0.1\n', "line 2: malformed CSV: unterminated quote"),
    ('eps\n"0.1"x\n', "malformed CSV"),
    ("[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply"),
    ('[{"eps": 0.1, "count": ' + "1" * 5000 + "}]", "invalid JSON: a number with too many digits"),
])
def test_bad_files_are_one_line_and_exit_2(text, match, capsys, monkeypatch):
    fails_in_process(("epsilon", "--file", "-", "--delta-g", "1e-6"), match, capsys, monkeypatch, stdin=text)


def test_a_privacy_loss_near_the_float_range_is_answered():
    """Two Laplace(1e-308) (loss 1e308 but for P-mass e^-1e308): delta is 1 to every float at
    every eps_g of the curve (it failed with 'values beyond floating-point range' before the
    library composed such laws)."""
    rows = inproc_json("curve", "--mechanism", "laplace:scale=1e-308", "--k", "2", "--num", "3")
    assert rows and all(float(r["delta"]) == 1.0 and float(r["delta_lower"]) > 0.999 for r in rows)


@pytest.mark.parametrize("args, line", [
    # a mistyped option is named (with the nearest real one) before the option it leaves missing
    (("epsilon", "--eps", "0.1", "--k", "10", "--detla-g", "1e-6"),
     "optcomp epsilon: error: unrecognized option '--detla-g' (did you mean --delta-g?) (see optcomp epsilon --help)"),
    (("bounds", "--eps", "0.1", "--k", "10", "--detla-g=1e-6"),
     "optcomp bounds: error: unrecognized option '--detla-g' (did you mean --delta-g?) (see optcomp bounds --help)"),
    # an option the command does not know: that command's help, not the top level's
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--methd", "kov"),
     "optcomp epsilon: error: unrecognized option '--methd' (did you mean --method?) (see optcomp epsilon --help)"),
    (("compare", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--methd", "kov"),
     "optcomp compare: error: unrecognized option '--methd' (did you mean --methods?) (see optcomp compare --help)"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--zzzzzz", "--qqqqqq"),
     "optcomp epsilon: error: unrecognized options '--zzzzzz', '--qqqqqq' (see optcomp epsilon --help)"),
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "extra"),
     "optcomp epsilon: error: unrecognized arguments: extra (see optcomp epsilon --help)"),
    (("--detla-g", "epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6"),
     "optcomp: error: unrecognized option '--detla-g' (see optcomp --help)"),
    # an abbreviation is argparse's (accepted when unique, else named ambiguous), not a typo
    (("epsilon", "--eps", "0.1", "--k", "10", "--del", "1e-6"),
     "optcomp epsilon: error: ambiguous option: --del could match --delta, --delta-g (see optcomp epsilon --help)"),
    # the options a method takes are the flags there are (progress is none)
    (("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--max-atoms", "5"),
     "optcomp epsilon: error: --max-atoms does not apply to method auto (its options: --tol, --max-memory)"),
])
def test_mistyped_options_and_extreme_values_are_one_line(args, line, capsys, monkeypatch):
    err = fails_in_process(args, line, capsys, monkeypatch)
    assert err.startswith(line)


def test_a_privacy_loss_near_the_float_range_is_answered(capsys):
    """Laplace of scale 1e-308 (loss 1e308 per copy), two copies: certified answers, no
    warning or traceback (delta is 1 - e^{(x - 2e308)/2}, i.e. 1 to float precision)."""
    assert cli.main(["curve", "--mechanism", "laplace:scale=1e-308", "--k", "2", "--num", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 3
    for r in rows:
        assert r["delta"] == 1.0 and 0.999 <= r["delta_lower"] <= 1.0


def test_a_warning_inside_a_command_is_one_line(capsys, monkeypatch):
    """Whatever floating-point trouble optcomp's code meets on input it does not support
    ends the command with one line and status 2 (nothing half-printed)."""
    import warnings

    def overflowing(args):  # numpy's overflow warning, as raised on a line of optcomp.curves
        warnings.warn_explicit("overflow encountered in multiply", RuntimeWarning, "curves.py", 1,
                               module="optcomp.curves")
        return "never", ["x"], [[1.0]]

    monkeypatch.setitem(cli._COMMANDS, "methods", overflowing)
    err = fails_in_process(("methods",), "optcomp methods: error: values beyond floating-point range", capsys,
                           monkeypatch)
    assert "overflow encountered" in err


def test_curve_near_the_float_range_is_certified():
    """Two (1e308, 0)-DP mechanisms: basic composition's point 2e308 overflows; the default
    grid ends at the largest float, where delta is still 1 (the loss is 2e308 with
    probability 1 - O(e^-1e308)), with no warning, in the library and the command line."""
    curve = optcomp.privacy_curve(1e308, k=2, num=5)
    assert curve.eps_g[-1] == sys.float_info.max and np.all(np.isfinite(curve.eps_g))
    assert curve.delta.tolist() == [1.0] * 5
    rows = rows_csv("curve", "--eps", "1e308", "--k", "2", "--num", "5")
    assert [float(r["eps_g"]) for r in rows] == curve.eps_g.tolist()
    assert [float(r["delta"]) for r in rows] == [1.0] * 5


def test_line_endings_and_byte_order_mark_read_alike(tmp_path, capsys, monkeypatch):
    """CRLF and CR-only files are the same mechanisms as LF; a BOM is dropped (in process:
    stdin as a text stream)."""
    want = inproc_json("epsilon", "--eps", "0.1,0.2", "--delta-g", "1e-6", "--method", "kov")
    for text in ("eps\n0.1\n0.2\n", "eps\r\n0.1\r\n0.2\r\n", "eps\r0.1\r0.2\r", "\ufeffeps\n0.1\n0.2\n"):
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
        assert inproc_json("epsilon", "--file", "-", "--delta-g", "1e-6", "--method", "kov") == want, repr(text)
        (tmp_path / "m.csv").write_bytes(text.encode())
        assert inproc_json("epsilon", "--file", str(tmp_path / "m.csv"), "--delta-g", "1e-6", "--method", "kov") == want


def test_hostile_stdin_through_a_subprocess(tmp_path):
    """Real stdin (bytes): a UTF-8 byte-order mark as spreadsheets write it is accepted like
    the same file by name; a lone CR amid LF lines and non-UTF-8 bytes get one line, exit 2."""
    text = "\ufeffcount,eps,delta\n10,0.1,0\n"
    (tmp_path / "bom.csv").write_text(text, encoding="utf-8")
    args = ("epsilon", "--delta-g", "1e-6", "--method", "kov")
    by_name = rows_json(*args, "--file", str(tmp_path / "bom.csv"))
    assert rows_json(*args, "--file", "-", stdin=text) == by_name
    assert by_name[0]["eps_g"] == optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method="kov")
    fails("epsilon", "--file", "-", "--delta-g", "1e-6", stdin="eps\n0.1\r0.2\n", match="bare carriage return")
    r = subprocess.run([sys.executable, "-m", "optcomp", "epsilon", "--file", "-", "--delta-g", "1e-6"],
                       input=b"eps\n\xff\n", capture_output=True, env=ENV, timeout=120)
    assert r.returncode == 2 and r.stdout == b"" and len(r.stderr.splitlines()) == 1
    assert b"not a UTF-8 text file" in r.stderr


def test_long_values_are_cut_in_error_lines(capsys, monkeypatch):
    digits = "1" * 5000
    err = fails_in_process(("epsilon", "--eps", "0.1", "--k", digits, "--delta-g", "1e-6"), "argument --k",
                           capsys, monkeypatch)
    assert "(5,000 characters)" in err and len(err) < 200
    err = fails_in_process(("epsilon", "--eps", "0.1,," + digits, "--delta-g", "1e-6"), "empty item 2",
                           capsys, monkeypatch)
    assert len(err) < 200
    err = fails_in_process(("epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "1e-6", "--method", "x" * 5000),
                           "--method", capsys, monkeypatch)
    assert len(err) <= cli.MAX_LINE + 40
    err = fails_in_process(("epsilon", "--file", "-", "--delta-g", "1e-6"), "unknown column", capsys, monkeypatch,
                           stdin="eps," + "x" * 5000 + "\n0.1,2\n")
    assert len(err) < 200


def test_bad_input_through_a_subprocess():
    """The same checks end to end (a few representative cases; the rest run in process)."""
    fails("epsilon", "--eps", "0.1,,0.2", "--delta-g", "1e-6", match="empty item 2")
    fails("epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1.5", match="delta_g must lie in [0, 1)")
    fails("epsilon", "--eps", "0.1", "--k", "10", "--file", "-", "--delta-g", "1e-6", match="not both")
    fails("epsilon", "--file", "-", "--delta-g", "1e-6", stdin="eps,epsilon\n0.1,0.2\n", match="unknown column")
    fails("split", "--eps-g", "1", "--delta-g", "1e-6", "--k", "1e3.5", match="--k")
    fails("epsilon", "--mechanism", "laplace:scale=-1", "--delta-g", "1e-6", match="scale must be finite and > 0")
    fails("epsilon", "--file", "-", "--delta-g", "1e-6", stdin="mechanism\nlaplace:sigma=1\n",
          match="line 2, mechanism 'laplace:sigma=1': unknown key 'sigma'")


def test_mechanisms_through_a_subprocess():
    """--mechanism end to end (the checks of its answers run in tests/test_toolkit_mechanisms.py):
    one Laplace (a = 1/2) and one staircase, the library's value."""
    rows = rows_json("epsilon", "--mechanism", "laplace:scale=2", "--mechanism", "staircase:eps=0.3,gamma=0.4",
                     "--delta-g", "1e-6", process=True)
    from optcomp.mechanisms import Laplace, Staircase

    assert rows[0]["eps_g"] == optcomp.epsilon_g([Laplace(2.0), Staircase(0.3, 0.4)], counts=[1, 1], delta_g=1e-6)


def test_in_process_main_prints_the_library_value(capsys):
    """(Moved from tests/test_inputs.py, for the table output.)"""
    assert cli.main(["delta", "--eps", "0.1,0.2", "--delta", "0,1e-6", "--eps-g", "0.25", "--method", "kov"]) == 0
    assert float(capsys.readouterr().out.splitlines()[-1].split()[2]) == optcomp.delta_g(
        [0.1, 0.2], [0, 1e-6], eps_g=0.25, method="kov")
    assert cli.main(["epsilon", "--eps", "0.1", "--delta", "0.5", "--k", "3", "--delta-g", "0.1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split()[2] == "inf"


def test_in_process_main_matches(capsys):
    assert cli.main(["epsilon", "--eps", "0.1", "--k", "100", "--delta-g", "1e-6", "--method", "kov", "--csv"]) == 0
    out = capsys.readouterr().out
    assert float(out.splitlines()[1].split(",")[2]) == optcomp.epsilon_g(0.1, k=100, delta_g=1e-6, method="kov")
    assert cli.main(["epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "2"]) == 2
    assert math.isfinite(len(capsys.readouterr().err))


def test_curve_of_a_ledger_beyond_the_domain_is_refused(tmp_path, capsys, monkeypatch):
    """A JSON ledger may merge more than 10^12 mechanisms; the curve command refuses it in one
    line (exit 2), as the other commands do, instead of composing beyond the domain."""
    ledger = tmp_path / "big.json"
    ledger.write_text(json.dumps({"format": "optcomp.Accountant", "version": 1, "mechanisms": [
        {"eps": 1e-7, "count": 10**12}, {"eps": 2e-7, "count": 10**12}]}))
    fails_in_process(["curve", "--file", str(ledger), "--num", "3", "--method", "kov"], "more than the 1e+12",
                     capsys, monkeypatch)
