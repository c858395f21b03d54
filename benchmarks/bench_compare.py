"""Two commits side by side, in one run (issue 17: "bench_scale and bench_exact no slower").

    python benchmarks/bench_compare.py                 # 9cce5a2 (before the engine's layering) vs the working tree
    python benchmarks/bench_compare.py --old REV --repeats 3 --quick

The old commit is checked out into a temporary git worktree; every case runs in a fresh
process with ``PYTHONPATH`` pointing at one tree's ``src`` (the process prints which
``optcomp`` it imported), old and new alternating case by case and repetition by
repetition, so both see the same machine load.  The cases are those of
``bench_scale.py`` (certified brackets) and ``bench_exact.py`` (exact optimum) that take
under a minute.  Reported: per side the median and the range of the wall times of the
call (imports and a warm-up excluded), the ratio new/old of the medians, both answers (they
must agree to the bracket), and the load average before and after.  Writes
``benchmarks/results/bench_compare.md`` (``--quick``: ``bench_compare.quick.md``,
git-ignored).  Nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

# label -> code evaluating to (seconds, answer); ``np``, ``optcomp``, ``rng`` are defined
_BOUNDS = ("import scipy.fft\nt0 = time.perf_counter()\n"
           "b = optcomp.epsilon_bounds({eps}, counts={counts}, delta_g=1e-6, tol={tol})\n"
           "out = (time.perf_counter() - t0, [b.lower, b.upper])")
_OPT = ("optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method='optimal')\nt0 = time.perf_counter()\n"
        "v = optcomp.epsilon_g({eps}, {delta}, k={k}, counts={counts}, delta_g={dg}, method='optimal')\n"
        "out = (time.perf_counter() - t0, [v])")
CASES = {
    # bench_scale.py (delta_g = 1e-6; eps ~ U[0.05, 0.2] from default_rng(0))
    "scale: 3 kinds x 10^4, tol 1e-9 rel": _BOUNDS.format(eps="[0.01, 0.05, 0.1]", counts="[10**4] * 3",
                                                          tol="2e-9"),
    "scale: 1000 decimals (3 digits), tol 1e-9 rel": _BOUNDS.format(
        eps="np.round(rng.uniform(0.05, 0.2, 1000), 3)", counts="None", tol="3e-8"),
    "scale: 1000 reals, tol 1e-6": _BOUNDS.format(eps="rng.uniform(0.05, 0.2, 1000)", counts="None", tol="1e-6"),
    "scale: 10^4 reals, tol 1e-4": _BOUNDS.format(eps="rng.uniform(0.05, 0.2, 10**4)", counts="None", tol="1e-4"),
    "scale: 10^5 reals, tol 1e-3": _BOUNDS.format(eps="rng.uniform(0.05, 0.2, 10**5)", counts="None", tol="1e-3"),
    "scale: 10^6 mechanisms, 1000 distinct, tol 1e-3": _BOUNDS.format(
        eps="rng.uniform(0.05, 0.2, 1000)", counts="np.full(1000, 1000)", tol="1e-3"),
    # bench_exact.py
    "exact: homogeneous k=10^6, eps 0.01, delta_g 1e-6": _OPT.format(eps="0.01", delta="0.0", k="10**6",
                                                                     counts="None", dg="1e-6"),
    "exact: homogeneous k=10^12, eps 0.1, delta_g 1e-6": _OPT.format(eps="0.1", delta="0.0", k="10**12",
                                                                     counts="None", dg="1e-6"),
    "exact: homogeneous k=10^12, eps 1e-4, delta_g 1e-300": _OPT.format(eps="1e-4", delta="0.0", k="10**12",
                                                                        counts="None", dg="1e-300"),
    "exact: grouped 3 kinds x 300": _OPT.format(eps="[0.01, 0.05, 0.1]", delta="0.0", k="None",
                                                counts="[300, 300, 300]", dg="1e-6"),
    "exact: grouped 5 kinds x 40": _OPT.format(eps="[0.02, 0.05, 0.1, 0.2, 0.5]", delta="0.0", k="None",
                                               counts="[40] * 5", dg="1e-6"),
    "exact: heterogeneous k=30 (meet in the middle)": _OPT.format(eps="list(rng.uniform(0.01, 0.5, 30))",
                                                                  delta="0.0", k="None", counts="None", dg="1e-6"),
    "exact: heterogeneous k=40 (meet in the middle)": _OPT.format(eps="list(rng.uniform(0.01, 0.5, 40))",
                                                                  delta="0.0", k="None", counts="None", dg="1e-6"),
}
QUICK = [c for c in CASES if "10^5" not in c and "10^6 mech" not in c and "k=40" not in c]

CHILD = """
import json, sys, time
import numpy as np
import optcomp
rng = np.random.default_rng(0)
{code}
print(json.dumps({{"seconds": out[0], "answer": out[1], "module": optcomp.__file__}}))
"""


def _worktree(rev: str) -> Path:
    path = Path(f"/tmp/optcomp-bench-{rev}")
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
    version = path / "src" / "optcomp" / "_version.py"
    if not version.exists():  # generated at install time in some checkouts
        version.write_text((ROOT / "src" / "optcomp" / "_version.py").read_text())
    return path


def _run(tree: Path, code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    p = subprocess.run([sys.executable, "-c", CHILD.format(code=code)], env=env, capture_output=True, text=True,
                       timeout=900)
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["module"].startswith(str(tree / "src")), (out["module"], tree)
    return out


def _fmt(ts) -> str:
    med = statistics.median(ts)
    unit, f = ("ms", 1e3) if med < 1 else ("s", 1.0)
    return f"{med * f:.3g} {unit} ({min(ts) * f:.3g}–{max(ts) * f:.3g})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="9cce5a2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    old, new = _worktree(args.old), ROOT
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    load0 = os.getloadavg()
    rows = []
    for label in (QUICK if args.quick else list(CASES)):
        times = {"old": [], "new": []}
        answers = {}
        for r in range(args.repeats):
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                out = _run(old if side == "old" else new, CASES[label])
                if "error" in out:
                    answers[side] = out["error"]
                    continue
                times[side].append(out["seconds"])
                answers[side] = out["answer"]
        ratio = (statistics.median(times["new"]) / statistics.median(times["old"])
                 if times["old"] and times["new"] else float("nan"))
        row = (label, _fmt(times["old"]) if times["old"] else "error", _fmt(times["new"]) if times["new"] else "error",
               f"{ratio:.2f}", json.dumps(answers.get("old")), json.dumps(answers.get("new")))
        rows.append(row)
        print(" | ".join(row), flush=True)
    load1 = os.getloadavg()
    lines = [f"Side by side in one run: old = {args.old}, new = {head} (working tree); median (min–max) of "
             f"{args.repeats} fresh processes each, alternating; load average {load0[0]:.2f} before, "
             f"{load1[0]:.2f} after; {os.cpu_count()} cores.", "",
             "| case | old | new | new/old | old answer | new answer |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    name = "bench_compare.quick.md" if args.quick else "bench_compare.md"
    (RESULTS / name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
