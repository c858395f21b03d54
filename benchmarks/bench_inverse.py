"""Benchmarks of the inverse questions at scale (issue 16 item 5), run on demand.

    python benchmarks/bench_inverse.py                     # print the table (nothing written)
    python benchmarks/bench_inverse.py --out FILE.md       # also write it to FILE.md
    python benchmarks/bench_inverse.py --src OTHER/src     # time another checkout (e.g. before a change)

The calls that took 10-70 s before the calibration search, the Chernoff shortcut of
privacy_curve and the tiny-loss shortcut: the per-query eps of k = 10^12 queries, the
``split`` table, ``Accountant.remaining`` for 10^12 more steps, the default privacy curve
of 10^12 mechanisms, and eps_g / delta_g of 10^12 mechanisms of eps = 5e-324.  Each case
runs in a fresh subprocess (imports warmed first); the table gives its wall time (best of
the repeats), the number of library evaluations where a search runs (``progress``
callback), the value, and the load average (``os.getloadavg``) before and after.  Timings
are machine- and load-dependent; nothing here is asserted by the test suite, and no
committed table is overwritten unless ``--out`` names it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CASES = {
    # name: (code returning the value; `seen` collects progress reports where supported, repeats)
    "per_query_epsilon(10**12, 1.0, 1e-6)": ("calibrate.per_query_epsilon(10**12, 1.0, 1e-6, **P)", 1),
    "per_query_epsilon(10**9, 1.0, 1e-6)": ("calibrate.per_query_epsilon(10**9, 1.0, 1e-6, **P)", 3),
    "noise_table(10**12, 1.0, 1e-6) (optcomp split --k 10^12)": (
        "{r.method: r.eps for r in calibrate.noise_table(10**12, 1.0, 1e-6, **P)}['optimal']", 1),
    "Accountant().remaining(1.0, 1e-6, count=10**12)": ("optcomp.Accountant().remaining(1.0, 1e-6, count=10**12, **P)", 1),
    "privacy_curve(0.1, k=10**12)": ("float(optcomp.privacy_curve(0.1, k=10**12).delta[-1])", 1),
    "epsilon_g(5e-324, k=10**12, delta_g=1e-6)": ("optcomp.epsilon_g(5e-324, k=10**12, delta_g=1e-6)", 3),
    "delta_g(5e-324, k=10**12, eps_g=0)": ("optcomp.delta_g(5e-324, k=10**12, eps_g=0.0)", 3),
}

CHILD = r"""
import inspect, json, sys, time
import optcomp
from optcomp import calibrate
code, repeats = sys.argv[1], int(sys.argv[2])
optcomp.epsilon_g(0.1, k=3, delta_g=1e-3)  # warm imports
seen = []
P = {"progress": seen.append} if "progress" in inspect.signature(calibrate.per_query_epsilon).parameters else {}
times, counts = [], []
for _ in range(repeats):
    seen.clear()
    t = time.perf_counter(); v = eval(code); times.append(time.perf_counter() - t)
    counts.append(len(seen))
print(json.dumps({"time": min(times), "value": v, "evaluations": counts[0] if P else None}))
"""


def run_case(code: str, repeats: int, src: Path | None) -> dict:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", CHILD, code, str(repeats)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown table here")
    parser.add_argument("--src", type=Path, default=None, help="the src/ directory of another checkout to time")
    parser.add_argument("--only", default=None, help="run the cases whose name contains this text")
    args = parser.parse_args(argv)
    lines = ["| case | time | evaluations | value | load before | load after |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, (code, repeats) in CASES.items():
        if args.only and args.only not in name:
            continue
        before = _load()
        r = run_case(code, repeats, args.src)
        evals = "" if r["evaluations"] is None else str(r["evaluations"])
        row = f"| {name} | {r['time']:.2f} s | {evals} | {r['value']!r} | {before} | {_load()} |"
        lines.append(row)
        print(row, flush=True)
    note = f"Machine: {os.cpu_count()} cores; best of the repeats, each case in a fresh process."
    print("\n" + note)
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n\n" + note + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
