"""The "sigma schedule" row of bench_dpsgd.py alone (a Poisson-subsampled Gaussian, q = 0.01,
sigma 0.8, 0.81, ..., 1.79 each for 100 steps, delta 1e-5, gap 1e-4 relative of a rough
answer), timed as there: a fresh process per run, the rough call first (not timed), then
``optcomp.epsilon_bounds`` at the target gap (wall and process CPU time).  Several source
trees run alternately, to compare two versions side by side on a shared machine:

    .venv/bin/python benchmarks/bench_schedule.py --repeat 8 --src /path/a/src --src /path/b/src

Prints each run (seconds, CPU seconds, the bracket's float bits, the 1-minute load) and
then per tree the median and range.
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

CHILD = r"""
import json, time
import optcomp
from optcomp.mechanisms import Gaussian, Subsampled
history = [(0.8 + 0.01 * i, 0.01, 100) for i in range(100)]
m = [Subsampled(Gaussian(s), q) for s, q, _ in history]
c = [n for _, _, n in history]
rough = optcomp.epsilon_bounds(m, counts=c, delta_g=1e-5, tol=0.05)
tol = 1e-4 * rough.upper
c0, t0 = time.process_time(), time.perf_counter()
b = optcomp.epsilon_bounds(m, counts=c, delta_g=1e-5, tol=tol)
s, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps(dict(seconds=s, cpu=cpu, lower=b.lower.hex(), upper=b.upper.hex(), gap=b.gap / tol)))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per source tree (default 5)")
    ap.add_argument("--src", action="append", help="a source tree (its src/ directory) put first on "
                    "PYTHONPATH; repeatable (default: this checkout's)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    trees = args.src or [str(HERE.parent / "src")]
    runs: dict[str, list] = {t: [] for t in trees}
    for _ in range(args.repeat):
        for t in trees:
            env = dict(os.environ, PYTHONPATH=t)
            out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[t].append(r)
            print(f"{t}: {r['seconds']:.3f} s, cpu {r['cpu']:.3f} s, [{r['lower']}, {r['upper']}], "
                  f"gap/tol {r['gap']:.3f}, load {os.getloadavg()[0]:.2f}", flush=True)
    for t, rs in runs.items():
        s = [r["seconds"] for r in rs]
        c = [r["cpu"] for r in rs]
        print(f"{t}: wall median {statistics.median(s):.3f} s [{min(s):.3f}, {max(s):.3f}]; "
              f"cpu median {statistics.median(c):.3f} s [{min(c):.3f}, {max(c):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
