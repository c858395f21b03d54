"""Accounting at scale (issue 8): one table, every case in a fresh process.

Run standalone::

    .venv/bin/python benchmarks/bench_scale.py                    # optcomp rows + dp_accounting (60 s per try)
    .venv/bin/python benchmarks/bench_scale.py --pld-timeout 600  # dp_accounting with the issue's full budget
    .venv/bin/python benchmarks/bench_scale.py --no-pld
    .venv/bin/python benchmarks/bench_scale.py --only 10^12  # some cases -> results/bench_scale.quick.{csv,md} (git-ignored)

Instances (delta_i = 0, delta_g = 1e-6; eps_i ~ Uniform[0.05, 0.2] seeded unless said):
identical mechanisms at k = 10^12 (``optimal`` and every closed form); 3 kinds x 10^4
(eps 0.01, 0.05, 0.1) and 1000 decimals with 3 digits (commensurable: gap <= 1e-9
relative); 1000, 10^4, 10^5 arbitrary reals (tol 1e-6, 1e-4, 1e-3); 10^6 mechanisms with
1000 distinct values (tol 1e-3).  For each, ``delta_bounds`` at the eps_g found (relative
tol 1e-3, 1e-9 for the commensurable ones).  Time is the call (not the interpreter
start or the imports: closed forms and ``optimal`` are called once on k = 10 first); memory is the process's peak resident set (VmHWM).

Beside them, Google's ``dp_accounting`` PLD accountant (pessimistic PLDs, identical
mechanisms grouped by ``self_compose``): a ladder of value discretisation intervals from
coarse to fine, each try in its own process limited to 4 GiB of address space and
``--pld-timeout`` seconds, stopping at the first that reaches our tolerance; its error
is measured against our certified bracket.  Prints a markdown table and writes
``benchmarks/results/bench_scale.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DELTA_G = 1e-6
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


# ----------------------------------------------------------------------------- instances


def instance(name: str):
    """(eps values, counts) of a named instance."""
    rng = np.random.default_rng(0)
    if name == "identical":
        return np.array([0.001]), np.array([10**12])
    if name == "kinds3":
        return np.array([0.01, 0.05, 0.1]), np.array([10**4] * 3)
    if name == "decimals1000":
        return np.round(rng.uniform(0.05, 0.2, 1000), 3), None
    if name.startswith("reals"):
        return rng.uniform(0.05, 0.2, int(float(name[5:]))), None
    if name == "groups1e6":
        return rng.uniform(0.05, 0.2, 1000), np.full(1000, 1000)
    raise ValueError(name)


CASES = [
    # (label, instance, method, eps tol (absolute) or None, delta tol (relative), target seconds, target MiB)
    ("identical k=10^12, optimal", "identical", "optimal", None, None, 1.0, 200),
    ("identical k=10^12, basic", "identical", "basic", None, None, 1e-3, 200),
    ("identical k=10^12, drv", "identical", "drv", None, None, 1e-3, 200),
    ("identical k=10^12, kov", "identical", "kov", None, None, 1e-3, 200),
    ("identical k=10^12, advanced_pure", "identical", "advanced_pure", None, None, 1e-3, 200),
    ("3 kinds x 10^4 (0.01, 0.05, 0.1)", "kinds3", "bounds", "rel1e-9", 1e-9, 0.5, None),
    ("1000 decimals, 3 digits", "decimals1000", "bounds", "rel1e-9", 1e-9, 1.0, None),
    ("1000 reals", "reals1000", "bounds", 1e-6, 1e-3, 2.0, None),
    ("10^4 reals", "reals1e4", "bounds", 1e-4, 1e-3, 5.0, None),
    ("10^5 reals", "reals1e5", "bounds", 1e-3, 1e-3, 15.0, 2048),
    ("10^6 mechanisms, 1000 distinct", "groups1e6", "bounds", 1e-3, 1e-3, 15.0, 2048),
]


def _vmhwm_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024.0
    return math.nan


# ----------------------------------------------------------------------------- one case (child process)


def run_case(index: int) -> dict:
    import optcomp

    label, inst, method, tol, dtol, target_s, target_mib = CASES[index]
    eps, counts = instance(inst)
    row = dict(case=label, method=method)
    if method != "bounds":
        kw = dict(k=int(counts[0])) if inst == "identical" else dict(counts=counts)
        # warm-up on a small instance: the lazy imports of the method's module are not timed
        optcomp.epsilon_g(float(eps[0]), delta_g=DELTA_G, method=method, k=10)
        t0 = time.perf_counter()
        value = optcomp.epsilon_g(float(eps[0]), delta_g=DELTA_G, method=method, **kw)
        row.update(seconds=time.perf_counter() - t0, eps_g=value, lower=math.nan, upper=value)
        t0 = time.perf_counter()
        row["delta_at_eps_g"] = optcomp.delta_g(float(eps[0]), eps_g=value, method=method, **kw)
        row["delta_seconds"] = time.perf_counter() - t0
    else:
        import scipy.fft  # noqa: F401  -- its first import (~0.3 s) is not timed, as for the closed forms
        abs_tol = tol
        if tol == "rel1e-9":
            # the answer's scale from a cheap closed form: tol = 1e-9 x (a lower estimate)
            scale = optcomp.epsilon_g(eps, counts=counts, delta_g=DELTA_G, method="kov") * 0.5
            abs_tol = 1e-9 * scale
        t0 = time.perf_counter()
        b = optcomp.epsilon_bounds(eps, counts=counts, delta_g=DELTA_G, tol=abs_tol)
        row.update(seconds=time.perf_counter() - t0, eps_g=b.upper, lower=b.lower, upper=b.upper, gap=b.gap,
                   rel_gap=b.gap / b.upper, tol=abs_tol)
        t0 = time.perf_counter()
        try:
            d = optcomp.delta_bounds(eps, counts=counts, eps_g=b.upper, tol=dtol)
            row.update(delta_seconds=time.perf_counter() - t0, delta_lower=d.lower, delta_upper=d.upper,
                       delta_rel_gap=d.gap / d.upper, delta_tol=dtol)
        except optcomp.approx.ApproxTooCostly as exc:
            row.update(delta_seconds=time.perf_counter() - t0, delta_error=str(exc)[:160], delta_tol=dtol)
    row.update(target_seconds=target_s, target_mib=target_mib, peak_mib=_vmhwm_mib())
    return row


# ----------------------------------------------------------------------------- dp_accounting (child process)


def run_pld(inst: str, vdi: float) -> dict:
    from optcomp.experiments import peers

    peers.available()  # the imports, outside the timed call
    eps, counts = instance(inst)
    t0 = time.perf_counter()
    value = peers.pld_epsilon(eps, counts=counts, delta_g=DELTA_G, interval=vdi)
    return dict(vdi=vdi, eps_g=value, seconds=time.perf_counter() - t0, peak_mib=_vmhwm_mib())


def _child(args: list[str], timeout: float, mem_bytes: int | None = None):
    """Run this script in a fresh process; (row | None, status)."""
    def limit():
        if mem_bytes is not None:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))

    env = dict(os.environ)
    try:
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True,
                             text=True, timeout=timeout, preexec_fn=limit, env=env)
    except subprocess.TimeoutExpired:
        return None, f"out of budget (> {timeout:g} s)"
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        if "MemoryError" in out.stderr or "Cannot allocate" in out.stderr or "bad_alloc" in out.stderr:
            return None, "out of budget (> 4 GiB)"
        return None, f"failed: {tail[:120]}"
    return json.loads(out.stdout.strip().splitlines()[-1]), "ok"


PLD_LADDER = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6)


def pld_for(inst: str, ours: dict, timeout: float) -> dict:
    """The coarsest discretisation reaching our accuracy, else the finest that ran."""
    if not math.isfinite(ours.get("upper", math.nan)):
        return dict(status="no reference")
    target = ours["upper"] - ours["lower"] if math.isfinite(ours.get("lower", math.nan)) else 1e-3
    target = max(target, 1e-12)
    best = None
    status = "ok"
    for vdi in PLD_LADDER:
        row, status = _child(["--pld", inst, repr(vdi)], timeout, 4 * 2**30)
        if row is None:
            break
        err = max(row["eps_g"] - ours["upper"], ours["lower"] - row["eps_g"], 0.0) \
            if math.isfinite(ours.get("lower", math.nan)) else abs(row["eps_g"] - ours["upper"])
        row["error"] = err
        best = row
        if err <= target:
            status = "reached"
            break
    out = dict(status=status, load=round(os.getloadavg()[0], 2), date=time.strftime("%Y-%m-%d %H:%M"))
    if best is not None:
        out.update(best)
    return out


# ----------------------------------------------------------------------------- table


def _f(x, spec):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pld", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--no-pld", action="store_true")
    ap.add_argument("--pld-timeout", type=float, default=60.0)
    ap.add_argument("--only", type=str, default=None, help="run only cases whose label contains this")
    ap.add_argument("--out", type=Path, default=None,
                    help="default: results/bench_scale.csv (and .md, the table the documentation renders); "
                         "with --only results/bench_scale.quick.csv, never the full table")
    ap.add_argument("--pld-from", type=Path, default=None,
                    help="reuse the dp_accounting columns of an earlier CSV (its runs do not depend on optcomp); "
                         "errors are recomputed against this run's brackets")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / ("bench_scale.quick.csv" if args.only else "bench_scale.csv")
    if args.case is not None:
        print(json.dumps(run_case(args.case)))
        return 0
    if args.pld is not None:
        print(json.dumps(run_pld(args.pld[0], float(args.pld[1]))))
        return 0
    load = os.getloadavg()
    rows = []
    for i, case in enumerate(CASES):
        if args.only and args.only not in case[0]:
            continue
        row, status = _child(["--case", str(i)], 1800)
        if row is None:
            row = dict(case=case[0], method=case[2], status=status)
        row["status"] = status
        if args.pld_from is not None:
            old = {r["case"]: r for r in csv.DictReader(open(args.pld_from))}.get(case[0], {})
            for k, v in old.items():
                if k.startswith("pld_") and v != "":
                    try:
                        row[k] = float(v)
                    except ValueError:
                        row[k] = v
            if "pld_eps_g" in row and math.isfinite(row.get("lower", math.nan)):
                row["pld_error"] = max(row["pld_eps_g"] - row["upper"], row["lower"] - row["pld_eps_g"], 0.0)
            elif "pld_eps_g" in row:
                row["pld_error"] = abs(row["pld_eps_g"] - row["upper"])
        elif not args.no_pld and case[2] in ("optimal", "bounds") and status == "ok":
            p = pld_for(case[1], row, args.pld_timeout)
            row.update({f"pld_{k}": v for k, v in p.items()})
        rows.append(row)
        print(f"  {row['case']}: {row.get('seconds', math.nan):.3g} s", file=sys.stderr)
    end = os.getloadavg()
    lines = [f"Machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start, "
             f"{end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end (`benchmarks/bench_scale.py`; each case in a fresh process)."]
    if args.pld_from is not None:
        dates = sorted(str(r["pld_date"]) for r in rows if r.get("pld_date"))
        loads = sorted(float(r["pld_load"]) for r in rows if r.get("pld_load") not in (None, ""))
        span = f"{dates[0]} to {dates[-1][-5:]}, load {loads[0]:.1f}–{loads[-1]:.1f}" if dates and loads else "earlier"
        lines.append(f"dp_accounting columns from an earlier run of the same script (`--pld-from {args.pld_from.name}`, "
                     f"{span}; each try ≤ 4 GiB, ≤ 600 s): the ratio compares times of two runs.")
    else:
        lines.append(f"dp_accounting: each try in its own process, ≤ 4 GiB, ≤ {args.pld_timeout:g} s.")
    lines.append("")
    lines.append("| instance | method | time (target) | peak memory | certified gap (rel.) | delta_bounds at eps_g: time, rel. gap "
          "| dp_accounting PLD: discretisation, time, error vs our bracket | ratio (PLD time / ours) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t = r.get("seconds")
        ts = f"{_f(t, '.3g')} s (≤ {r.get('target_seconds', '')} s)" if t is not None else r.get("status", "")
        mem = f"{_f(r.get('peak_mib'), '.0f')} MiB"
        gap = f"{_f(r.get('gap'), '.2g')} ({_f(r.get('rel_gap'), '.1e')})" if r.get("method") == "bounds" else \
            f"eps_g = {_f(r.get('eps_g'), '.6g')}"
        dcol = f"{_f(r.get('delta_seconds'), '.3g')} s, " + (
            _f(r.get('delta_rel_gap'), '.1e') if "delta_error" not in r else "ApproxTooCostly") \
            if r.get("method") == "bounds" else f"{_f(r.get('delta_seconds'), '.3g')} s"
        if "pld_status" in r:
            if "pld_vdi" in r:
                note = "" if r["pld_status"] == "reached" else f"; finer: {r['pld_status']}"
                pcol = (f"{r['pld_vdi']:g}, {r['pld_seconds']:.3g} s, {r['pld_error']:.2g}{note}")
                ratio = f"{r['pld_seconds'] / t:.3g}×" if t else "—"
            else:
                pcol, ratio = r["pld_status"], "—"
        else:
            pcol, ratio = "—", "—"
        lines.append(f"| {r['case']} | {r.get('method')} | {ts} | {mem} | {gap} | {dcol} | {pcol} | {ratio} |")
    table = "\n".join(lines) + "\n"
    print("\n" + table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(args.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    md = args.out.with_suffix(".md")  # docs/benchmarks.rst renders this file
    md.write_text("<!-- generated by benchmarks/bench_scale.py -->\n" + table)
    print(f"\nwritten: {args.out}, {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
