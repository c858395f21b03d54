"""Self-composition of one law (k copies of one mechanism): optcomp's certified bracket beside
Google's ``dp_accounting`` pessimistic PLD (``self_compose(k).get_epsilon_for_delta``), the
same instances in the same run.

    .venv/bin/python benchmarks/bench_selfcompose.py            # -> results/bench_selfcompose.md
    .venv/bin/python benchmarks/bench_selfcompose.py --quick    # -> results/bench_selfcompose.quick.md

Every timed call runs in a fresh process (imports excluded; peak resident memory VmHWM).
Ours: ``optcomp.epsilon_bounds`` at tol = (target relative gap) x (a rough answer from an
earlier, separate process).  Theirs: ``dp_accounting.pld`` pessimistic estimates on a ladder
of value discretization intervals, each try in its own process (4 GiB of address space,
``--pld-timeout`` seconds); each value is placed against our certified bracket, and "same
accuracy" is the coarsest interval whose value is within our tolerance of the bracket.

Instances: 10^4 Laplace (scale 100) at gap 1e-6, 10^6 Laplace (scale 1000) at gap 1e-4, and
a law with a heavy right tail -- a rare leak: 3-outcome randomized response with eps 0.01
beside an outcome of P-mass 1e-4 and Q-mass 1e-9 (loss 11.5), and its mirror image so that
the pair is symmetric -- 10^4 copies at gap 1e-4 (the answer, ~100, is decided by ~9 of the
rare outcomes).  dp_accounting builds that pair with ``from_two_probability_mass_functions``
(losses rounded up to the interval: a first-order shift per copy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DELTA_G = 1e-6

LEAK = ("pb, qb = 1e-4, 1e-9; rest = 1.0 - pb - qb; a = rest * math.exp(0.01) / (1 + math.exp(0.01)); "
        "b = rest - a; P = (pb, a, b, qb); Q = (qb, b, a, pb)")
SETUP = {
    "lap1e4": "mech, k = Laplace(100.0), 10**4",
    "lap1e6": "mech, k = Laplace(1000.0), 10**6",
    "leak": LEAK + "; mech, k = Pair(P, Q), 10**4",
}
CASES = [  # (label, setup, target relative gap, target seconds or "dp": no slower than dp_accounting)
    ("10^4 identical Laplace (scale 100)", "lap1e4", 1e-6, "dp"),
    ("10^6 identical Laplace (scale 1000)", "lap1e6", 1e-4, 0.5),
    ("10^4 rare-leak pairs (heavy right tail)", "leak", 1e-4, "dp"),
]
INTERVALS = [1e-2, 1e-3, 1e-4, 1e-5]

CHILD = r"""
import json, math, sys, time
import numpy as np
{setup_imports}
{setup}
def vmhwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024.0
{body}
out["mib"] = vmhwm()
print(json.dumps(out))
"""

OURS_IMPORTS = ("import optcomp, optcomp.approx, optcomp.lattice, scipy.fft  # imports not timed (the facade's\n"
                "# entry points load lazily)\nfrom optcomp.mechanisms import Laplace, Pair\nentry = optcomp.epsilon_bounds")
OURS = r"""
t0 = time.perf_counter()
b = entry([mech], counts=[k], delta_g={dg}, tol={tol})
out = dict(seconds=time.perf_counter() - t0, lower=b.lower, upper=b.upper)
"""

THEIRS_IMPORTS = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))\n"
                  "from dp_accounting.pld import privacy_loss_distribution as pld\n"
                  "from optcomp.mechanisms import Laplace, Pair")
THEIRS = r"""
t0 = time.perf_counter()
if type(mech).__name__ == "Laplace":
    p = pld.from_laplace_mechanism(mech.scale, sensitivity=mech.sensitivity, pessimistic_estimate=True,
                                   value_discretization_interval={interval})
else:
    p = pld.from_two_probability_mass_functions({{i: math.log(v) for i, v in enumerate(mech.q)}},
                                                {{i: math.log(v) for i, v in enumerate(mech.p)}},
                                                pessimistic_estimate=True, value_discretization_interval={interval})
v = p.self_compose(k).get_epsilon_for_delta({dg})
out = dict(seconds=time.perf_counter() - t0, eps=float(v))
"""


def _child(name: str, imports: str, body: str, timeout: float) -> dict:
    code = CHILD.format(setup_imports=imports, setup=SETUP[name], body=body)
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:g} s"}
    if p.returncode:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": "out of memory (4 GiB)" if "MemoryError" in last or "bad_alloc" in last else last[:80]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _distance(v: float, lo: float, hi: float) -> float:
    return 0.0 if lo <= v <= hi else (v - hi if v > hi else lo - v)


def _t(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pld-timeout", type=float, default=120.0)
    ap.add_argument("--quick", action="store_true", help="dp_accounting at intervals 1e-2 .. 1e-4 only")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    rows = []
    for label, name, rel, target in CASES:
        rough = _child(name, OURS_IMPORTS, OURS.format(dg=DELTA_G, tol=0.05), 1800)
        if "error" in rough:
            rows.append([label, rough["error"]] + [""] * 6)
            continue
        tol = rel * rough["upper"]
        ours = _child(name, OURS_IMPORTS, OURS.format(dg=DELTA_G, tol=tol), 1800)
        if "error" in ours:
            rows.append([label, ours["error"]] + [""] * 6)
            continue
        lo, hi = ours["lower"], ours["upper"]
        tries, same = [], None
        for interval in INTERVALS:
            if args.quick and interval < 1e-4:
                break
            th = _child(name, THEIRS_IMPORTS, THEIRS.format(dg=DELTA_G, interval=interval), args.pld_timeout)
            if "error" in th:
                tries.append(f"{interval:g}: {th['error']}")
                break
            d = _distance(th["eps"], lo, hi)
            where = "inside" if d == 0.0 else f"{'above' if th['eps'] > hi else 'below'} by {d:.2g}"
            tries.append(f"{interval:g}: {th['eps']:.10g} ({_t(th['seconds'])}, {th['mib']:.0f} MiB, {where})")
            if d <= tol:
                same = (interval, th)
                break
        if same is None:
            same_txt = "not reached"
            met = "time " + ("met" if isinstance(target, float) and ours["seconds"] <= target else
                             ("n/a" if target == "dp" else "missed"))
        else:
            iv, th = same
            same_txt = f"{iv:g}: {_t(th['seconds'])} ({ours['seconds'] / th['seconds']:.2g}x ours)"
            limit = th["seconds"] if target == "dp" else target
            met = "time " + ("met" if ours["seconds"] <= limit else f"missed ({_t(limit)})")
        gap = (hi - lo) / hi
        met += ", gap " + ("met" if gap <= rel else f"missed ({rel:g})")
        rows.append([label, _t(ours["seconds"]), f"[{lo:.10g}, {hi:.10g}]", f"{gap:.2g}", f"{ours['mib']:.0f} MiB",
                     met, same_txt, "; ".join(tries)])
        print(" | ".join(rows[-1]), flush=True)
    load1 = os.getloadavg()
    lines = ["<!-- generated by benchmarks/bench_selfcompose.py: do not edit -->",
             f"delta_g = {DELTA_G:g}; {os.cpu_count()} cores, load average {load0[0]:.1f} {load0[1]:.1f} "
             f"{load0[2]:.1f} before and {load1[0]:.1f} {load1[1]:.1f} {load1[2]:.1f} after; each timed call in a "
             f"fresh process; dp_accounting: pessimistic PLD, intervals from 1e-2 down, {args.pld_timeout:g} s and "
             "4 GiB per try, stopping at the first within our tolerance of our bracket.", "",
             "| instance | optcomp time | certified bracket on eps_g | relative gap | peak memory | targets | "
             "dp_accounting at the same accuracy (interval: time) | dp_accounting tries (interval: value, time, "
             "memory, against our bracket) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("bench_selfcompose.quick.md" if args.quick else "bench_selfcompose.md")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
