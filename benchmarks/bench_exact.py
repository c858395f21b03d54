"""Benchmarks of the exact optimal composition (issue targets), run on demand.

    python benchmarks/bench_exact.py           # all targets -> benchmarks/results/bench_exact.md (docs/benchmarks.rst)
    python benchmarks/bench_exact.py --quick   # skip k = 48 -> benchmarks/results/bench_exact.quick.md (git-ignored)
    python benchmarks/bench_exact.py --finite  # finite mechanisms -> benchmarks/results/bench_exact_finite.md

Each case runs in a fresh subprocess so that its peak memory (ru_maxrss) is its own.
Prints a Markdown table: case, target, wall time (best of the repeats), peak memory,
and eps_g.  Timings are machine-dependent; nothing here is asserted by the test suite.  A
``--quick`` run never overwrites the full table the documentation renders.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

CASES = {
    # name: (target seconds, code building (eps, delta, k, delta_g), repeats)
    "homogeneous k=10^6, eps=0.01, delta_g=1e-6": (0.05, "0.01, 0.0, 10**6, 1e-6", 7),
    "homogeneous k=10^6, eps=0.1, delta_g=1e-30": (0.05, "0.1, 0.0, 10**6, 1e-30", 7),
    "homogeneous k=10^6, eps=5, delta=1e-9, delta_g=1e-3": (0.05, "5.0, 1e-9, 10**6, 1e-3", 7),
    "homogeneous k=10^12, eps=0.1, delta_g=1e-6": (1.0, "0.1, 0.0, 10**12, 1e-6", 3),
    "homogeneous k=10^12, eps=1e-4, delta_g=1e-300": (1.0, "1e-4, 0.0, 10**12, 1e-300", 3),
    "homogeneous k=10^6, eps=0.01, delta_g=1e-300": (None, "0.01, 0.0, 10**6, 1e-300", 3),
    "grouped 3 kinds x 300 (eps 0.01/0.05/0.1)": (None, "np.repeat([0.01, 0.05, 0.1], 300), 0.0, None, 1e-6", 3),
    "grouped 5 kinds x 40": (None, "np.repeat([0.02, 0.05, 0.1, 0.2, 0.5], 40), 0.0, None, 1e-6", 3),
    "heterogeneous k=20 (2^k brute force, Thm 1.5 as written)": (None, "BRUTE:20", 1),
    "heterogeneous k=30 (meet in the middle)": (None, "rng.uniform(0.01, 0.5, 30), 0.0, None, 1e-6", 3),
    "heterogeneous k=40 (meet in the middle)": (5.0, "rng.uniform(0.01, 0.5, 40), 0.0, None, 1e-6", 1),
    "heterogeneous k=48 (meet in the middle)": (60.0, "rng.uniform(0.01, 0.5, 48), 0.0, None, 1e-6", 1),
}

FINITE_CASES = {
    # name: (target seconds, (mechanisms, counts, "delta" | "epsilon", eps_g | delta_g), repeats)
    "RandomizedResponse(0.5, 3) x 3, delta_g(eps_g=0)": (0.01, "[RandomizedResponse(0.5, values=3)], [3], 'delta', 0.0", 7),
    "RandomizedResponse(0.5, 3) x 3, eps_g(delta_g=1e-6)":
        (0.01, "[RandomizedResponse(0.5, values=3)], [3], 'epsilon', 1e-6", 7),
    "Pair of 4 outcomes x 4, delta_g(eps_g=1)":
        (0.01, "[Pair((0.4, 0.3, 0.2, 0.1), (0.1, 0.2, 0.3, 0.4))], [4], 'delta', 1.0", 7),
    "Pair of 4 outcomes x 4, eps_g(delta_g=1e-6)":
        (0.01, "[Pair((0.4, 0.3, 0.2, 0.1), (0.1, 0.2, 0.3, 0.4))], [4], 'epsilon', 1e-6", 7),
    "Pair of 3 outcomes x 4, eps_g(delta_g=1e-6)":
        (0.01, "[Pair((0.5, 0.3, 0.2), (0.3, 0.3, 0.4))], [4], 'epsilon', 1e-6", 7),
    "Pair of 3 outcomes x 10^6, eps_g(delta_g=1e-6) (two global directions)":
        (1.0, "[Pair((0.5, 0.3, 0.2), (0.3, 0.3, 0.4))], [10**6], 'epsilon', 1e-6", 3),
    "Pair of 3 outcomes x 10^6, delta_g(eps_g=126000)":
        (1.0, "[Pair((0.5, 0.3, 0.2), (0.3, 0.3, 0.4))], [10**6], 'delta', 126000.0", 3),
    "Profile of 5 guarantees x 10^4, eps_g(delta_g=1e-6)":
        (1.0, "[Profile([(0.5, 1e-3), (1.0, 1e-5), (2.0, 1e-8), (3.0, 1e-10), (4.0, 0.0)])], [10**4], 'epsilon', 1e-6", 3),
    "Profile of 5 guarantees x 10^4, delta_g(eps_g=1400)":
        (1.0, "[Profile([(0.5, 1e-3), (1.0, 1e-5), (2.0, 1e-8), (3.0, 1e-10), (4.0, 0.0)])], [10**4], 'delta', 1400.0", 3),
    "RandomizedResponse(0.5, 3) x 10^6, eps_g(delta_g=1e-6)":
        (None, "[RandomizedResponse(0.5, values=3)], [10**6], 'epsilon', 1e-6", 3),
    "RandomizedResponse(0.5, 3) x 10^6 + 10 black boxes (eps 0.05), eps_g(delta_g=1e-6)":
        (None, "[RandomizedResponse(0.5, values=3), 0.05], [10**6, 10], 'epsilon', 1e-6", 3),
}

# every repeat on a fresh multiset: the exact laws' caches (and the mechanisms' own) are cleared
FINITE_CHILD = r"""
import json, resource, sys, time
import optcomp
from optcomp.mechanisms import Pair, Profile, RandomizedResponse
from optcomp._exact import finite
spec, repeats = sys.argv[1], int(sys.argv[2])
mechs, counts, kind, arg = eval(spec)
optcomp.delta_g([Pair((0.6, 0.4), (0.3, 0.7))], counts=[3], eps_g=0.1, method="optimal")  # warm imports
walls, cpus = [], []
for _ in range(repeats):
    finite._compositions.cache_clear(); finite.finite_law.cache_clear()
    for m in mechs:
        if hasattr(type(m), "_atoms_at"):
            type(m)._atoms_at.cache_clear()
    t, c = time.perf_counter(), time.process_time()
    if kind == "delta":
        v = optcomp.delta_g(mechs, counts=counts, eps_g=arg, method="optimal")
    else:
        v = optcomp.epsilon_g(mechs, counts=counts, delta_g=arg, method="optimal")
    walls.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
print(json.dumps({"time": min(walls), "cpu": min(cpus), "value": v,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD = r"""
import json, resource, sys, time
import numpy as np
import optcomp
from optcomp._inputs import mechanisms
from optcomp.optimal import optimal_epsilon_bruteforce
rng = np.random.default_rng(2024)
spec, repeats = sys.argv[1], int(sys.argv[2])
times = []
if spec.startswith("BRUTE:"):
    k = int(spec.split(":")[1])
    m = mechanisms(rng.uniform(0.01, 0.5, k))
    for _ in range(repeats):
        t = time.perf_counter(); v = optimal_epsilon_bruteforce(m, 1e-6); times.append(time.perf_counter() - t)
else:
    eps, delta, k, delta_g = eval(spec)
    optcomp.epsilon_g(0.1, k=3, delta_g=1e-3)  # warm imports
    for _ in range(repeats):
        t = time.perf_counter(); v = optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g); times.append(time.perf_counter() - t)
print(json.dumps({"time": min(times), "value": v, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_case(spec: str, repeats: int, child: str = CHILD) -> dict:
    out = subprocess.run([sys.executable, "-c", child, spec, str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main_finite(out: Path) -> int:
    """The finite-mechanism cases (``method="optimal"``): wall and CPU time of the best repeat."""
    load = os.getloadavg()
    lines = ["| case | target | time (wall) | time (CPU) | peak memory | value |", "|---|---|---|---|---|---|"]
    print("\n".join(lines))
    for name, (target, spec, repeats) in FINITE_CASES.items():
        r = run_case(spec, repeats, FINITE_CHILD)
        tgt = f"≤ {target:g} s" if target else ""
        flag = "" if target is None or r["time"] <= target else " (MISSED)"
        lines.append(f"| {name} | {tgt} | {_seconds(r['time'])}{flag} | {_seconds(r['cpu'])} | {r['rss_mb']:.0f} MiB "
                     f"| {r['value']!r} |")
        print(lines[-1], flush=True)
    end = os.getloadavg()
    lines += ["", f"Machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the "
              f"start, {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end; best of the repeats (every repeat on cleared "
              "caches), each case in a fresh process; CPU: this process's time (wall time waits for a core)."]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("<!-- generated by benchmarks/bench_exact.py --finite -->\n" + "\n".join(lines) + "\n")
    print(f"written: {out}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the k = 48 case")
    parser.add_argument("--finite", action="store_true", help="the finite-mechanism cases only")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/bench_exact.md, the table the documentation renders; "
                             "with --quick results/bench_exact.quick.md")
    args = parser.parse_args(argv)
    if args.finite:
        return main_finite(args.out or RESULTS / "bench_exact_finite.md")
    if args.out is None:
        args.out = RESULTS / ("bench_exact.quick.md" if args.quick else "bench_exact.md")
    load = os.getloadavg()
    lines = ["| case | target | time | peak memory | eps_g |", "|---|---|---|---|---|"]
    print("\n".join(lines))
    for name, (target, spec, repeats) in CASES.items():
        if args.quick and "k=48" in name:
            continue
        r = run_case(spec, repeats)
        tgt = f"≤ {target:g} s" if target else ""
        flag = "" if target is None or r["time"] <= target else " (MISSED)"
        lines.append(f"| {name} | {tgt} | {_seconds(r['time'])}{flag} | {r['rss_mb']:.0f} MiB | {r['value']:.12g} |")
        print(lines[-1], flush=True)
    end = os.getloadavg()
    lines += ["", f"Machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the "
              f"start, {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end; best of the repeats, each case in a fresh process."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("<!-- generated by benchmarks/bench_exact.py -->\n" + "\n".join(lines) + "\n")
    print(f"written: {args.out}")
    return 0


def _seconds(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 1.0 else f"{t:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
