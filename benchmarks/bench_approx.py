"""Benchmarks of MV Theorem 1.7 (optcomp.approx, its default algorithm in optcomp.lattice) and
Google's dp_accounting PLD accountant.

Run standalone::

    .venv/bin/python benchmarks/bench_approx.py            # full table (~3 min)
    .venv/bin/python benchmarks/bench_approx.py --quick    # smaller table (~30 s), printed only

The instance of the issue: k mechanisms with eps_i ~ Uniform[0.05, 0.2] (seeded, on no
common grid), delta_i = 0, delta_g = 1e-6.  Every row reports the time, the certified
(lower, upper) bracket where the method has one, and the error of the returned value
against the best available reference (a very tight certified bracket from the fast
algorithm itself, whose width is printed in the header: the reference is exact to within
it).

The functions ``time_approx``, ``time_paper``, ``time_pld`` and ``paper_scaling`` return
plain dicts so the pipeline can call them (one row per measurement) without importing
anything else from here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from optcomp import approx, lattice
from optcomp._inputs import mechanisms

DELTA_G = 1e-6
RESULTS = Path(__file__).resolve().parent / "results"


def instance(k: int, seed: int = 0) -> np.ndarray:
    """eps_i ~ Uniform[0.05, 0.2], seeded (the benchmark instance of the issue)."""
    return np.random.default_rng(seed).uniform(0.05, 0.2, k)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_approx(k: int, eta: float = 1e-3, algorithm: str = "fast", seed: int = 0, *,
                delta_g: float = DELTA_G, tol: float | None = None, repeat: int = 1) -> dict:
    """Time ``optcomp.approx`` on the benchmark instance (best of ``repeat`` runs).

    ``algorithm="fast"``: certified bounds with gap <= tol (default eta); the row holds
    both bounds.  ``algorithm="paper"``: MV Thm 1.7 as published (upper bound only)."""
    m = mechanisms(instance(k, seed))
    best = math.inf
    row: dict = dict(method=f"optcomp.approx[{algorithm}]", k=k, eta=eta, seed=seed, delta_g=delta_g)
    for _ in range(repeat):
        if algorithm == "fast":
            info = lattice.BracketInfo()
            t0 = time.perf_counter()
            b = lattice.lattice_bounds(m, delta_g, eta if tol is None else tol, info=info)
            dt = time.perf_counter() - t0
            row.update(tol=eta if tol is None else tol, upper=b.upper, lower=b.lower, gap=b.gap,
                       step=info.passes[-1]["h"] if info.passes else math.nan,
                       points=info.passes[-1]["points"] if info.passes else 0, passes=len(info.passes))
        elif algorithm == "paper":
            info = {}
            t0 = time.perf_counter()
            value = approx.paper_epsilon(m, delta_g, eta, info=info)
            dt = time.perf_counter() - t0
            row.update(upper=value, lower=math.nan, gap=math.nan, step=info["eps0"], points=info["sum_a"],
                       passes=info["tests"])
        else:
            raise ValueError(f"algorithm must be 'fast' or 'paper', got {algorithm!r}")
        best = min(best, dt)
    row["seconds"] = best
    row["peak_rss_mib"] = _peak_rss_mib()
    return row


def time_paper(k: int, eta: float = 0.1, seed: int = 0, *, delta_g: float = DELTA_G) -> dict:
    return time_approx(k, eta, "paper", seed, delta_g=delta_g)


def time_pld(k: int, value_discretization_interval: float, seed: int = 0, *, delta_g: float = DELTA_G) -> dict:
    """Google's dp_accounting PLD accountant, used at its best for this input
    (:func:`optcomp.experiments.peers.pld_epsilon`: one pessimistic PLD per distinct eps,
    identical ones grouped by ``self_compose``, then ``compose`` and ``get_epsilon_for_delta``)."""
    from optcomp.experiments import peers

    peers.available()  # the imports, outside the timed call
    eps = instance(k, seed)
    t0 = time.perf_counter()
    value = peers.pld_epsilon(eps, delta_g=delta_g, interval=value_discretization_interval)
    dt = time.perf_counter() - t0
    return dict(method="dp_accounting PLD", k=k, eta=math.nan, seed=seed, delta_g=delta_g,
                vdi=value_discretization_interval, upper=value, lower=math.nan, gap=math.nan,
                seconds=dt, peak_rss_mib=_peak_rss_mib())


def reference(k: int, seed: int = 0, *, delta_g: float = DELTA_G, tol: float | None = None) -> lattice.Bounds:
    """The best available reference: a tight certified bracket (no exact method reaches
    k = 1000 heterogeneous, MV Thm 1.6)."""
    tol = tol if tol is not None else (1e-6 if k <= 2000 else 2e-4)
    m = mechanisms(instance(k, seed))
    return lattice.lattice_bounds(m, delta_g, tol, max_points=2**25)


def peak_memory_mib(k: int, tol: float = 1e-2, seed: int = 0, *, delta_g: float = DELTA_G) -> float:
    """Peak resident memory (MiB) of a fresh interpreter computing the fast bounds for the
    benchmark instance (measured in a subprocess so earlier rows do not count)."""
    import subprocess

    code = (
        "import numpy as np\n"
        "from optcomp import lattice\n"
        "from optcomp._inputs import mechanisms\n"
        f"eps = np.random.default_rng({seed}).uniform(0.05, 0.2, {k})\n"
        f"lattice.lattice_bounds(mechanisms(eps), {delta_g!r}, {tol!r})\n"
        # VmHWM of this address space (ru_maxrss would inherit the parent's peak across exec)
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0] / 1024.0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def paper_scaling(ks=(25, 50, 100, 200), eta: float = 0.1, seed: int = 0) -> list[dict]:
    """Runtime of the published algorithm against k (the pipeline's runtime figure)."""
    return [time_paper(k, eta, seed) for k in ks]


# --------------------------------------------------------------------------- table


def _fmt(x, spec):
    if isinstance(x, float) and (math.isnan(x)):
        return "-"
    return format(x, spec)


def _print_table(rows, ref: lattice.Bounds, title: str) -> None:
    mid = 0.5 * (ref.lower + ref.upper)
    print(f"\n{title}")
    print(f"reference (certified): {ref.lower!r} <= eps_g <= {ref.upper!r}  (width {ref.gap:.1e})")
    head = f"{'method':26} {'params':22} {'time [s]':>9} {'upper':>14} {'lower':>14} {'gap':>9} {'error(upper)':>12}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "vdi" in r:
            params = f"vdi={r['vdi']:g}"
        elif r["method"].endswith("[paper]"):
            params = f"eta={r['eta']:g}"
        else:
            params = f"tol={r['tol']:g} h={r['step']:g}"
        err = r["upper"] - mid
        print(f"{r['method']:26} {params:22} {r['seconds']:9.3f} {r['upper']:14.7f} {_fmt(r['lower'], '14.7f'):>14} "
              f"{_fmt(r['gap'], '9.1e'):>9} {err:12.2e}")


def _pld_extrapolation(pld_rows, ours, target_error):
    """Fit error ~ c vdi (pessimistic rounding is first order) and time ~ a vdi^-b; report
    the vdi and time the PLD accountant would need for ``target_error``."""
    if len(pld_rows) < 2:
        return None
    v = np.array([r["vdi"] for r in pld_rows])
    err = np.array([r["error"] for r in pld_rows])
    t = np.array([r["seconds"] for r in pld_rows])
    c = float(np.median(err / v))
    vdi_needed = target_error / c
    b, loga = np.polyfit(np.log(v), np.log(t), 1)
    t_needed = float(np.exp(loga) * vdi_needed**b)
    return dict(vdi=vdi_needed, seconds=t_needed, slope=c, exponent=-b)


class _Tee(io.TextIOBase):
    """Print and keep: the run's output becomes ``benchmarks/results/bench_approx.md``."""

    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, text):
        self.kept.write(text)
        return self.out.write(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller table (~30 s)")
    ap.add_argument("--no-pld", action="store_true", help="skip dp_accounting")
    ap.add_argument("--out", type=Path, default=RESULTS / "bench_approx.md",
                    help="the generated Markdown file the documentation renders (not written with --quick)")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        _run(args)
    end = os.getloadavg()
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            "<!-- generated by benchmarks/bench_approx.py -->\n```text" + tee.kept.getvalue().rstrip() + "\n```\n\n"
            f"Machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, "
            f"{end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end.\n")
        print(f"written: {args.out}")
    return 0


def _run(args) -> None:
    from optcomp.experiments import peers

    have_pld = not args.no_pld and peers.available()
    if not peers.available():  # pragma: no cover - optional extra
        print("dp_accounting not installed: PLD rows skipped (pip install optcomp[compare])")

    # warm-up (FFT plans, imports) so the first timed row is not penalised
    lattice.lattice_bounds(mechanisms(instance(300, 1)), DELTA_G, 1e-3)

    # ---------------- k = 1000
    k = 1000
    ref = reference(k)
    mid = 0.5 * (ref.lower + ref.upper)
    rows = [time_approx(k, 1e-3, "fast", repeat=3), time_approx(k, 1e-3, "fast", tol=1e-4, repeat=2)]
    if not args.quick:
        rows.append(time_approx(k, 0.1, "paper"))
    pld_rows = []
    if have_pld:
        for vdi in ((1e-3, 3e-4) if args.quick else (1e-3, 3e-4, 1e-4)):
            r = time_pld(k, vdi)
            r["error"] = r["upper"] - mid
            pld_rows.append(r)
    rows += pld_rows
    _print_table(rows, ref, f"k = {k}, eps_i ~ U[0.05, 0.2], delta_g = {DELTA_G:g}")
    fast = rows[0]
    print(f"fast: certified gap {fast['gap']:.2e} <= 1e-3 in {fast['seconds']:.3f} s "
          f"(step h = {fast['step']:.4g}, {fast['points']:,} lattice points, {fast['passes']} passes)")
    if pld_rows:
        best = min(pld_rows, key=lambda r: r["error"])
        print(f"dp_accounting at vdi={best['vdi']:g}: error {best['error']:.2e} in {best['seconds']:.1f} s -> "
              f"{best['seconds'] / fast['seconds']:.0f}x slower than the fast algorithm, at "
              f"{best['error'] / max(fast['upper'] - mid, fast['gap']):.0f}x its (certified) error")
        ex = _pld_extrapolation(pld_rows, fast, max(fast["upper"] - mid, 1e-12))
        if ex:
            print(f"  PLD error ~ {ex['slope']:.0f} * vdi; equal accuracy needs vdi ~ {ex['vdi']:.1e}, "
                  f"extrapolated time ~ {ex['seconds']:.0f} s (time ~ vdi^-{ex['exponent']:.2f}): "
                  f"ratio ~ {ex['seconds'] / fast['seconds']:.0f}x")

    # ---------------- k = 10^4
    k = 10_000 if not args.quick else 3000
    tol = 1e-2
    ref = reference(k, tol=2e-4)
    mid = 0.5 * (ref.lower + ref.upper)
    rows = [time_approx(k, tol, "fast")]
    pld_rows = []
    if have_pld:
        for vdi in ((3e-2,) if args.quick else (3e-2, 1e-2)):
            r = time_pld(k, vdi)
            r["error"] = r["upper"] - mid
            pld_rows.append(r)
    rows += pld_rows
    _print_table(rows, ref, f"k = {k}, eps_i ~ U[0.05, 0.2], delta_g = {DELTA_G:g}")
    fast = rows[0]
    print(f"fast: certified gap {fast['gap']:.2e} <= {tol:g} in {fast['seconds']:.2f} s; "
          f"peak memory {peak_memory_mib(k, tol):.0f} MiB (fresh process, interpreter included)")
    if pld_rows:
        best = min(pld_rows, key=lambda r: r["error"])
        c = best["error"] / best["vdi"]
        print(f"dp_accounting at vdi={best['vdi']:g}: error {best['error']:.2f} in {best['seconds']:.1f} s; "
              f"error {tol:g} would need vdi ~ {tol / c:.0e}, i.e. ~{2 * 0.125 * k / (tol / c):.1e} lattice "
              f"points per FFT (out of reach in 4 GiB)")

    # ---------------- the published algorithm's runtime scaling
    ks = (25, 50, 100, 200) if args.quick else (25, 50, 100, 200, 400)
    print("\nMV Thm 1.7 as published (eta = 0.1): runtime against k (cost O(k^3 eps_bar (1+eps_bar)/eta log ...))")
    print(f"{'k':>6} {'sum a_i':>10} {'tests':>6} {'time [s]':>9} {'eps*':>12} {'eps* - ref':>11}")
    for r in paper_scaling(ks):
        rf = reference(r["k"], tol=1e-6)
        print(f"{r['k']:6d} {r['points']:10,d} {r['passes']:6d} {r['seconds']:9.3f} {r['upper']:12.6f} "
              f"{r['upper'] - 0.5 * (rf.lower + rf.upper):11.2e}")


if __name__ == "__main__":
    sys.exit(main())
