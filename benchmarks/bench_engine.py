"""The engine's targets (self-composition at FFT speed, exact finite composition, memory
budget, the heterogeneous paths): every row of the target table in one run, each case in a
fresh process (time of the call, imports and a warm-up of the imports excluded; peak resident
memory VmHWM), dp_accounting's pessimistic PLD beside the Laplace rows in the same run.

    .venv/bin/python benchmarks/bench_engine.py            # -> results/bench_engine.md
    .venv/bin/python benchmarks/bench_engine.py --quick    # skip the heaviest rows
    .venv/bin/python benchmarks/bench_engine.py --only "10^5"   # some rows (-> results/bench_engine.only.md)

Each row states its target and whether it is met; the load average before and after is
recorded (the machine is shared: read the times as ranges)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

CHILD = r"""
import json, math, time
import numpy as np
import optcomp
from optcomp.mechanisms import Gaussian, Laplace, Pair, Profile, RandomizedResponse
def vmhwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024.0
{setup}
optcomp.epsilon_g(0.1, k=3, delta_g=1e-6)  # warm the imports
t0 = time.perf_counter()
{call}
s = time.perf_counter() - t0
print(json.dumps(dict(seconds=s, lower=float(lo), upper=float(hi), mib=vmhwm())))
"""

PLD = r"""
import json, time
from dp_accounting.pld import privacy_loss_distribution as pld
def vmhwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024.0
t0 = time.perf_counter()
d = pld.from_laplace_mechanism({scale}, value_discretization_interval={interval}, pessimistic_estimate=True)
e = d.self_compose({k}).get_epsilon_for_delta({delta})
print(json.dumps(dict(seconds=time.perf_counter() - t0, eps=e, mib=vmhwm())))
"""

BOUNDS = "b = optcomp.epsilon_bounds(eps, delta_g=dg, tol=tol, **kw); lo, hi = b.lower, b.upper"
EXACT_D = "v = optcomp.delta_g(eps, eps_g=x, method='optimal', **kw); lo = hi = v"
EXACT_E = "v = optcomp.epsilon_g(eps, delta_g=dg, method='optimal', **kw); lo = hi = v"

# (label, setup, call, target seconds, target relative gap, target MiB, Laplace (scale, k) for the PLD peer)
CASES = [
    ("10^4 identical Laplace (scale 100), delta_g 1e-6, gap <= 1e-6",
     "eps, kw, dg = [Laplace(100.0)], dict(counts=[10**4]), 1e-6; "
     "tol = 0.99e-6 * optcomp.epsilon_bounds(eps, delta_g=dg, tol=0.05, **kw).lower", BOUNDS, None, 1e-6, None,
     (100.0, 10**4, 1e-6)),
    ("10^6 identical Laplace (scale 1000), gap <= 1e-4",
     "eps, kw, dg = [Laplace(1000.0)], dict(counts=[10**6]), 1e-6; "
     "tol = 0.99e-4 * optcomp.epsilon_bounds(eps, delta_g=dg, tol=0.05, **kw).lower", BOUNDS, 0.5, 1e-4, None,
     (1000.0, 10**6, 1e-6)),
    ("RandomizedResponse(0.5, 3) x 3, optimal delta_g at eps_g 0",
     "eps, kw, x = [RandomizedResponse(0.5, values=3)], dict(counts=[3]), 0.0", EXACT_D, 0.01, None, None, None),
    ("Pair of 4 outcomes x 4, optimal delta_g at eps_g 0.3",
     "eps, kw, x = [Pair((0.4, 0.3, 0.2, 0.1), (0.1, 0.2, 0.3, 0.4))], dict(counts=[4]), 0.3", EXACT_D, 0.01,
     None, None, None),
    ("3-outcome Pair x 10^6, optimal eps_g at delta_g 1e-6",
     "eps, kw, dg = [Pair((0.5, 0.3, 0.2), (0.3, 0.3, 0.4))], dict(counts=[10**6]), 1e-6", EXACT_E, 1.0, None,
     None, None),
    ("Profile of 5 guarantees x 10^4, optimal eps_g at delta_g 1e-6",
     "eps, kw, dg = [Profile([(0.01, 1e-9), (0.02, 1e-10), (0.05, 1e-12), (0.1, 1e-14), (0.2, 0.0)])], "
     "dict(counts=[10**4]), 1e-6", EXACT_E, 1.0, None, None, None),
    ("10^5 distinct real eps, tol 1e-3",
     "rng = np.random.default_rng(5); eps, kw, dg = list(rng.uniform(1e-4, 1e-2, 10**5)), {}, 1e-6; tol = 1e-3",
     BOUNDS, 3.0, None, None, None),
    ("3 kinds x 10^4 (eps 0.01 / 0.05 / 0.1), default epsilon_g (exact)",
     "eps, kw, dg = [0.01, 0.05, 0.1], dict(counts=[10**4] * 3), 1e-6",
     "v = optcomp.epsilon_g(eps, delta_g=dg, **kw); lo = hi = v", 0.5, None, None, None),
    ("RandomizedResponse(0.5, 3) x 10^6 at eps_g 0, default delta_g (was 22 GB)",
     "eps, kw, x = [RandomizedResponse(0.5, values=3)], dict(counts=[10**6]), 0.0",
     "try:\n    b = optcomp.delta_bounds(eps, eps_g=x, **kw); lo, hi = b.lower, b.upper\n"
     "except (optcomp.ApproxTooCostly, optcomp.ExactTooLarge) as exc:\n    lo, hi = exc.bounds.lower, exc.bounds.upper",
     None, None, 2048, None),
    ("1000 Laplace + 1000 Gaussian + 1000 black boxes, each x 10, gap 1e-4",
     "rng = np.random.default_rng(1); eps = ([Laplace(float(s)) for s in rng.uniform(50, 500, 1000)] + "
     "[Gaussian(float(s)) for s in rng.uniform(50, 500, 1000)] + list(rng.uniform(0.001, 0.01, 1000))); "
     "kw = dict(delta=[0.0] * 2000 + list(10 ** rng.uniform(-14, -11, 1000)), counts=[10] * 3000); dg = 1e-6; "
     "tol = 0.99e-4 * optcomp.epsilon_bounds(eps, delta_g=dg, tol=0.05, **kw).lower", BOUNDS, 3.0, 1e-4, 2048, None),
]


def _run(code: str, timeout: float) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:g} s"}
    if p.returncode:
        return {"error": ((p.stderr.strip().splitlines() or ["?"])[-1])[:100]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _t(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 10^6 rows and the mixed workload")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="run only the rows whose label contains TEXT (repeatable; written to "
                         "results/bench_engine.only.md)")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    rows = []
    for label, setup, call, t_s, t_gap, t_mib, peer in CASES:
        if args.quick and ("10^6" in label or "1000 Laplace" in label):
            continue
        if args.only and not any(t in label for t in args.only):
            continue
        ours = _run(CHILD.format(setup=setup, call=call), args.timeout)
        if "error" in ours:
            rows.append([label, ours["error"], "", "", "", "", ""])
            print(" | ".join(rows[-1]), flush=True)
            continue
        lo, hi = ours["lower"], ours["upper"]
        gap = (hi - lo) / hi if hi else 0.0
        met = []
        if t_s is not None:
            met.append("time " + ("met" if ours["seconds"] <= t_s else f"missed ({_t(t_s)})"))
        if t_gap is not None:
            met.append("gap " + ("met" if gap <= t_gap else f"missed ({t_gap:g})"))
        if t_mib is not None:
            met.append("memory " + ("met" if ours["mib"] <= t_mib else f"missed ({t_mib} MiB)"))
        theirs = ""
        if peer is not None:
            scale, k, delta = peer
            r = _run(PLD.format(scale=scale, k=k, delta=delta, interval=1e-4), args.timeout)
            if "error" in r:
                theirs = r["error"]
            else:
                where = "inside" if lo <= r["eps"] <= hi else ("above" if r["eps"] > hi else "BELOW")
                theirs = f"{r['eps']:.10g} in {_t(r['seconds'])} ({where} our bracket); ours/theirs time " \
                         f"{ours['seconds'] / r['seconds']:.2g}"
                if t_s is None:
                    met.append("time " + ("met" if ours["seconds"] <= r["seconds"] else "missed (theirs)"))
        rows.append([label, _t(ours["seconds"]), f"[{lo:.12g}, {hi:.12g}]", f"{gap:.2g}", f"{ours['mib']:.0f} MiB",
                     ", ".join(met), theirs])
        print(" | ".join(rows[-1]), flush=True)
    load1 = os.getloadavg()[0]
    lines = ["<!-- generated by benchmarks/bench_engine.py: do not edit -->",
             f"{os.cpu_count()} cores, load average {load0:.1f} before and {load1:.1f} after; dp_accounting: "
             "pessimistic PLD at value_discretization_interval 1e-4, same run.", "",
             "| instance | optcomp time | certified bracket | relative gap | peak memory | targets | "
             "dp_accounting PLD (same run) |", "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("bench_engine.only.md" if args.only else "bench_engine.quick.md" if args.quick
                     else "bench_engine.md")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
