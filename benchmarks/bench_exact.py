"""Benchmarks of the exact optimal composition (issue targets), run on demand.

    python benchmarks/bench_exact.py           # all targets (k = 48 takes about a minute)
    python benchmarks/bench_exact.py --quick   # skip k = 48

Each case runs in a fresh subprocess so that its peak memory (ru_maxrss) is its own.
Prints a Markdown table: case, target, wall time (best of the repeats), peak memory,
and eps_g.  Timings are machine-dependent; nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

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


def run_case(spec: str, repeats: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, spec, str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the k = 48 case")
    args = parser.parse_args(argv)
    print("| case | target | time | peak memory | eps_g |")
    print("|---|---|---|---|---|")
    for name, (target, spec, repeats) in CASES.items():
        if args.quick and "k=48" in name:
            continue
        r = run_case(spec, repeats)
        tgt = f"<= {target:g} s" if target else ""
        flag = "" if target is None or r["time"] <= target else " (MISSED)"
        print(f"| {name} | {tgt} | {r['time'] * 1e3:.1f} ms{flag} | {r['rss_mb']:.0f} MiB | {r['value']:.12g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
