"""Wall-clock scaling of the exact and approximate algorithms (timing CSVs).

Timings depend on the machine and its load: they are the only outputs of the pipeline that
differ between runs.  The pipeline writes this machine's run to ``results/timing/local/``
(git-ignored) and draws the committed figure from a reference run in
``results/timing/reference/`` (never overwritten by the pipeline).  Each point is timed
``repeats`` (>= 5 by default) times, each repetition the mean over enough back-to-back calls
to last ``min_time`` seconds; a row holds the median and the extremes of the repetitions.
A method stops growing the problem size once one call takes longer than ``max_seconds``
(the skipped sizes are simply absent), so a slow machine finishes in bounded time.  Every
row also records the value computed, so accuracy can be read off the same table.

Experiments (one function each, one timing CSV each):

* :func:`approx_vs_k` -- MV Thm 1.7 as published (``algorithm="paper"``, fixed eta), the
  certified fast algorithm (fixed tolerance), Google's ``dp_accounting`` PLD accountant
  (fixed discretization) and exact optimal composition, on the first k eps_i of a seeded
  draw, versus k;
* :func:`approx_vs_eta` -- the two approximation algorithms at fixed k versus 1/eta;
* :func:`exact_heterogeneous` -- MV Thm 1.5 by the paper's 2^k brute force versus
  optcomp's exact algorithm (full enumeration of small distributions, then meet in the
  middle);
* :func:`exact_homogeneous` -- MV Thm 1.4 / KOV Thm 3.3 for k up to 10^6 (optcomp's
  windowed binomial) versus ``dp_accounting``'s self-composition;
* :func:`accuracy` -- error versus time of the approximate methods on one instance;

and :func:`fit_slopes`, the fitted log-log slopes next to the theoretical ones.
"""

from __future__ import annotations

import math
import time
from typing import Callable, IO

import numpy as np
import pandas as pd

import optcomp

from . import peers
from .grids import delta_from_log2, int_grid
from .heterogeneous import draw_eps
from .io import Progress

__all__ = [
    "time_call",
    "approx_vs_k",
    "approx_vs_eta",
    "exact_heterogeneous",
    "exact_homogeneous",
    "accuracy",
    "fit_slopes",
    "fit_line",
    "experiment_spec",
    "slopes_spec",
    "summary_markdown",
    "THEORY",
    "TIMING_COLUMNS",
]

TIMING_COLUMNS = ["experiment", "method", "k", "eta", "seconds", "seconds_min", "seconds_max", "repeats", "calls",
                  "eps_g"]

# theoretical growth of the running time: (x variable, exponent, explanation)
THEORY = {
    ("approx_vs_k", "approx_paper"): ("k", 3.0, "O(k^2 sum(eps)/eta log), sum(eps) ~ k (MV Thm 1.7)"),
    ("approx_vs_k", "approx"): ("k", 1.5, "FFT on ~k^1.5 lattice points (gap ~ k h^2)"),
    ("approx_vs_k", "dp_accounting"): ("k", 2.0, "k convolutions of supports ~ k"),
    ("approx_vs_eta", "approx_paper"): ("1/eta", 1.0, "lattice step beta ~ eta/k (MV Sec. 5)"),
    ("approx_vs_eta", "approx"): ("1/eta", 0.5, "lattice step h ~ sqrt(tol)"),
    ("exact_heterogeneous", "bruteforce"): ("k", 1.0, "2^k subsets (slope of log2 time)"),
    ("exact_heterogeneous", "optimal"): ("k", 0.5, "meet in the middle: 2^(k/2) (slope of log2 time)"),
    ("exact_homogeneous", "optimal"): ("k", 0.5, "binomial window ~ sqrt(k log(1/delta_g))"),
    ("exact_homogeneous", "dp_accounting"): ("k", 1.0, "support ~ k, FFT self-composition"),
}
# experiments whose sizes grow exponentially: slopes of log2(seconds) against k (not log k)
SEMILOG = {"exact_heterogeneous"}


def time_call(fn: Callable[[], object], *, repeats: int = 5, min_time: float = 0.02) -> tuple[list[float], int, object]:
    """(seconds per call of each repetition, calls per repetition, last value): a warm-up
    call (never counted: lazy imports and caches can make it seconds slower), a second call
    that sets n, then ``repeats`` repetitions, each the mean over n back-to-back calls, n
    chosen so that a repetition lasts >= ``min_time`` (a second call that slow counts as the
    first repetition)."""
    fn()  # warm-up
    t0 = time.perf_counter()
    value = fn()
    second = time.perf_counter() - t0
    n = 1 if second >= min_time else max(1, min(10_000, int(math.ceil(min_time / max(second, 1e-7)))))
    times = [second] if n == 1 else []
    while len(times) < max(int(repeats), 1):
        t0 = time.perf_counter()
        for _ in range(n):
            value = fn()
        times.append((time.perf_counter() - t0) / n)
    return times, n, value


def experiment_spec(cfg: dict, experiment: str) -> dict:
    """The share of the ``runtime`` config section one timing job needs: the shared keys
    and the experiment's own subsection (so editing one experiment reruns only its job)."""
    shared = {key: cfg[key] for key in ("repeats", "max_seconds", "instance", "fit_points")}
    return dict(shared, **{experiment: cfg[experiment]})


def _instance(spec: dict, k: int) -> np.ndarray:
    inst = spec["instance"]
    return draw_eps(inst["distribution"], inst["seed"], int(spec.get("k_max", k)))[:k]


class _Runner:
    """Times calls, drops sizes after the first call slower than ``max_seconds`` per method."""

    def __init__(self, experiment: str, spec: dict, total: int, log):
        self.experiment = experiment
        self.repeats = int(spec["repeats"])
        self.max_seconds = float(spec["max_seconds"])
        self.stopped: set[str] = set()
        self.rows: list[tuple] = []
        self.progress = Progress(total, f"timing {experiment}", log)

    def run(self, method: str, k: int, eta: float, fn: Callable[[], object]) -> None:
        if method in self.stopped:
            self.progress.step()
            return
        try:
            times, calls, value = time_call(fn, repeats=self.repeats)
        except ValueError as exc:  # e.g. ApproxTooCostly, ExactTooLarge: out of reach
            self.progress.message(f"{method} k={k} eta={eta:g}: {type(exc).__name__}: {exc}")
            self.stopped.add(method)
            self.progress.step()
            return
        median = float(np.median(times))
        self.rows.append((self.experiment, method, int(k), float(eta), median, float(min(times)), float(max(times)),
                          len(times), calls, float(value)))
        if median > self.max_seconds:
            self.progress.message(f"{method}: {median:.1f} s at k={k}, eta={eta:g} > max_seconds; larger sizes skipped")
            self.stopped.add(method)
        self.progress.step()

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=TIMING_COLUMNS)


def approx_vs_k(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Time versus k at fixed accuracy: paper algorithm (eta = ``paper_eta``, k <= ``paper_max_k``), fast algorithm
    (eta = ``eta``), ``dp_accounting`` (``dp_accounting_interval``), exact optimal
    (k <= ``optimal_max_k``)."""
    cfg = spec["approx_vs_k"]
    ks = int_grid(cfg["k"])
    spec = dict(spec, k_max=ks[-1])
    delta_g = delta_from_log2(spec["instance"]["delta_g_log2"])
    methods = ["approx_paper", "approx", "optimal"] + (["dp_accounting"] if peers.available() else [])
    runner = _Runner("approx_vs_k", spec, len(ks) * len(methods), log)
    for k in ks:
        eps = _instance(spec, k)
        if k <= int(cfg.get("paper_max_k", ks[-1])):
            runner.run("approx_paper", k, cfg["paper_eta"], lambda: optcomp.epsilon_g(
                eps, delta_g=delta_g, method="approx", algorithm="paper", eta=cfg["paper_eta"]))
        else:
            runner.progress.step()
        runner.run("approx", k, cfg["eta"], lambda: optcomp.epsilon_g(eps, delta_g=delta_g, method="approx",
                                                                      eta=cfg["eta"]))
        if k <= int(cfg["optimal_max_k"]):
            runner.run("optimal", k, 0.0, lambda: optcomp.epsilon_g(eps, delta_g=delta_g, method="optimal"))
        else:
            runner.progress.step()
        if "dp_accounting" in methods:
            vdi = float(cfg["dp_accounting_interval"])
            runner.run("dp_accounting", k, vdi, lambda: peers.pld_epsilon(eps, delta_g=delta_g, interval=vdi))
    return runner.frame()


def approx_vs_eta(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Time versus 1/eta at fixed k (eta decreasing, so the budget cut-off drops the
    most accurate settings first)."""
    cfg = spec["approx_vs_eta"]
    k = int(cfg["k"])
    spec = dict(spec, k_max=k)
    eps = _instance(spec, k)
    delta_g = delta_from_log2(spec["instance"]["delta_g_log2"])
    paper = sorted((float(e) for e in cfg["paper_eta"]), reverse=True)
    fast = sorted((float(e) for e in cfg["eta"]), reverse=True)
    runner = _Runner("approx_vs_eta", spec, len(paper) + len(fast), log)
    for eta in paper:
        runner.run("approx_paper", k, eta, lambda: optcomp.epsilon_g(eps, delta_g=delta_g, method="approx",
                                                                     algorithm="paper", eta=eta))
    for eta in fast:
        runner.run("approx", k, eta, lambda: optcomp.epsilon_g(eps, delta_g=delta_g, method="approx", eta=eta))
    return runner.frame()


def exact_heterogeneous(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """MV Thm 1.5: the paper's 2^k brute force versus optcomp's exact algorithm, versus k."""
    from .._inputs import mechanisms
    from ..optimal import optimal_epsilon_bruteforce

    cfg = spec["exact_heterogeneous"]
    brute, exact = int_grid(cfg["bruteforce_k"]), int_grid(cfg["optimal_k"])
    spec = dict(spec, k_max=max(brute[-1], exact[-1]))
    delta_g = delta_from_log2(spec["instance"]["delta_g_log2"])
    runner = _Runner("exact_heterogeneous", spec, len(brute) + len(exact), log)
    for k in brute:
        mech = mechanisms(_instance(spec, k), 0.0, None)
        runner.run("bruteforce", k, 0.0, lambda: optimal_epsilon_bruteforce(mech, delta_g, max_k=max(22, k)))
    for k in exact:
        eps = _instance(spec, k)
        runner.run("optimal", k, 0.0, lambda: optcomp.epsilon_g(eps, delta_g=delta_g, method="optimal"))
    return runner.frame()


def exact_homogeneous(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """MV Thm 1.4 for k identical (eps, 0)-DP mechanisms, k up to 10^12, versus
    ``dp_accounting``'s self-composition (k <= ``dp_accounting_k_max``)."""
    cfg = spec["exact_homogeneous"]
    ks = int_grid(cfg["k"])
    eps = float(cfg["eps"])
    delta_g = delta_from_log2(spec["instance"]["delta_g_log2"])
    with_pld = peers.available()
    runner = _Runner("exact_homogeneous", spec, len(ks) * (2 if with_pld else 1), log)
    for k in ks:
        runner.run("optimal", k, 0.0, lambda: optcomp.epsilon_g(eps, k=k, delta_g=delta_g, method="optimal"))
        if with_pld:
            if k <= int(cfg["dp_accounting_k_max"]):
                vdi = float(cfg["dp_accounting_interval"])
                runner.run("dp_accounting", k, vdi, lambda: peers.pld_epsilon([eps], counts=[k], delta_g=delta_g,
                                                                               interval=vdi))
            else:
                runner.progress.step()
    return runner.frame()


def accuracy(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Error versus time on one heterogeneous instance of size ``k``: the paper algorithm at
    each ``paper_eta``, the fast algorithm at each ``eta``, ``dp_accounting`` at each
    interval.  ``error`` = eps_g - reference, the reference being the exact optimum when
    ``k <= optimal_max_k``, otherwise the certified lower bound of the fast algorithm at
    ``reference_eta`` (so the error shown is never smaller than the true one)."""
    from .. import approx

    cfg = spec["accuracy"]
    k = int(cfg["k"])
    spec = dict(spec, k_max=k)
    eps = _instance(spec, k)
    delta_g = delta_from_log2(spec["instance"]["delta_g_log2"])
    if k <= int(cfg["optimal_max_k"]):
        reference, ref_kind = optcomp.epsilon_g(eps, delta_g=delta_g, method="optimal"), "exact"
    else:
        try:
            reference = approx.epsilon_bounds(eps, delta_g=delta_g, eta=float(cfg["reference_eta"])).lower
        except approx.ApproxTooCostly as exc:  # the bracket reached is still certified
            if exc.bounds is None:
                raise
            reference = exc.bounds.lower
        ref_kind = "certified lower bound"
    settings = [("approx_paper", float(e)) for e in sorted(cfg["paper_eta"], reverse=True)]
    settings += [("approx", float(e)) for e in sorted(cfg["eta"], reverse=True)]
    if peers.available():
        settings += [("dp_accounting", float(v)) for v in sorted(cfg["dp_accounting_interval"], reverse=True)]
    runner = _Runner("accuracy", spec, len(settings), log)
    for method, eta in settings:
        if method == "approx_paper":
            fn = (lambda eta=eta: optcomp.epsilon_g(eps, delta_g=delta_g, method="approx", algorithm="paper", eta=eta))
        elif method == "approx":
            fn = (lambda eta=eta: optcomp.epsilon_g(eps, delta_g=delta_g, method="approx", eta=eta))
        else:
            fn = (lambda eta=eta: peers.pld_epsilon(eps, delta_g=delta_g, interval=eta))
        runner.run(method, k, eta, fn)
    df = runner.frame()
    df["reference"] = reference
    df["reference_kind"] = ref_kind
    df["error"] = df["eps_g"] - reference
    return df


def fit_line(x, y) -> tuple[float, float, int]:
    """Least-squares slope of y on x, its standard error and the residual degrees of freedom."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = x.size
    if n < 2 or np.ptp(x) == 0:
        return math.nan, math.nan, 0
    xc = x - x.mean()
    slope = float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))
    if n < 3:
        return slope, math.nan, 0
    resid = y - y.mean() - slope * xc
    se = float(math.sqrt(np.dot(resid, resid) / (n - 2) / np.dot(xc, xc)))
    return slope, se, n - 2


def fit_slopes(*timings: pd.DataFrame, fit_points: int = 6, min_seconds: float = 1e-4) -> pd.DataFrame:
    """Least-squares slope of log(median seconds) against log(size) -- or of log2(seconds)
    against k for the exponential experiments -- per (experiment, method), over the largest
    ``max(fit_points, half)`` sizes with at least ``min_seconds`` per call (the asymptotic
    regime), with a 95 % confidence interval (Student t on the regression's standard error,
    n - 2 degrees of freedom), beside the theoretical exponent (:data:`THEORY`).  Fewer than
    ``fit_points`` sizes available: the slope is still fitted and ``points`` says so."""
    from scipy import stats

    rows = []
    for df in timings:
        for (experiment, method), g in df.groupby(["experiment", "method"], sort=False):
            if (experiment, method) not in THEORY:
                continue
            var, theory, why = THEORY[(experiment, method)]
            x = (1.0 / g["eta"] if var == "1/eta" else g["k"]).to_numpy(dtype=float)
            y = g["seconds"].to_numpy(dtype=float)
            keep = y >= min_seconds
            x, y = x[keep], y[keep]
            order = np.argsort(x)
            x, y = x[order], y[order]
            use = min(len(x), max(int(fit_points), math.ceil(len(x) / 2)))
            x, y = x[len(x) - use:], y[len(y) - use:]
            semilog = experiment in SEMILOG
            slope, se, dof = fit_line(x, np.log2(y)) if semilog else fit_line(np.log(x), np.log(y))
            half = float(stats.t.ppf(0.975, dof) * se) if dof > 0 and math.isfinite(se) else math.nan
            rows.append((experiment, method, var, "log2(seconds) vs k" if semilog else "log-log",
                         len(x), float(x.min()) if len(x) else math.nan, float(x.max()) if len(x) else math.nan,
                         slope, se, slope - half, slope + half, theory, why))
    return pd.DataFrame(rows, columns=["experiment", "method", "x", "fit", "points", "x_min", "x_max",
                                       "fitted_slope", "slope_se", "slope_ci95_low", "slope_ci95_high",
                                       "theoretical_slope", "theory"])


def slopes_spec(cfg: dict) -> dict:
    """Keyword arguments of :func:`fit_slopes` from the ``runtime`` config section."""
    return {"fit_points": int(cfg["fit_points"])}


_SUMMARY_NAMES = {
    ("approx_vs_k", "approx_paper"): "MV Thm 1.7 as published",
    ("approx_vs_k", "approx"): "MV Thm 1.7, certified fast",
    ("approx_vs_k", "dp_accounting"): "dp_accounting PLD accountant",
    ("approx_vs_eta", "approx_paper"): "MV Thm 1.7 as published",
    ("approx_vs_eta", "approx"): "MV Thm 1.7, certified fast",
    ("exact_heterogeneous", "bruteforce"): "exact, the paper's 2^k brute force",
    ("exact_heterogeneous", "optimal"): "exact, optcomp (meet in the middle)",
    ("exact_homogeneous", "optimal"): "exact homogeneous, optcomp",
    ("exact_homogeneous", "dp_accounting"): "dp_accounting self-composition",
}


def _seconds(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def summary_markdown(*timings: pd.DataFrame, slopes: pd.DataFrame, meta: dict, source: str) -> str:
    """The timing claims the README quotes, as Markdown: the machine and its load, then per
    (experiment, method) the largest size reached with the median and the min..max range of
    its repetitions, and the fitted exponent with its 95 % interval beside the theory."""
    m = meta.get("machine") or {}
    before, after = m.get("load_average_before"), m.get("load_average_1_5_15_min")
    lines = [f"Machine: {m.get('cpu_model')}, {m.get('cpu_count')} cores; 1-minute load average "
             f"{before[0] if before else '?'} before and {after[0] if after else '?'} after the first timing job; "
             f"median and min..max of {meta.get('config', {}).get('repeats', '?')} repetitions per point.", "",
             "| experiment | method | largest size | time: median (min..max) | fitted exponent [95 % CI] | theory |",
             "|---|---|---|---|---|---|"]
    fits = {(r.experiment, r.method): r for r in slopes.itertuples(index=False)}
    for df in timings:
        for (experiment, method), g in df.groupby(["experiment", "method"], sort=False):
            if (experiment, method) not in _SUMMARY_NAMES:
                continue
            var = THEORY[(experiment, method)][0]
            row = g.loc[(1.0 / g["eta"] if var == "1/eta" else g["k"]).idxmax()]
            size = f"k = {int(row['k']):,}" if var == "k" else f"eta = {row['eta']:g} (k = {int(row['k'])})"
            fit = fits.get((experiment, method))
            if fit is not None and math.isfinite(fit.fitted_slope) and math.isfinite(fit.slope_ci95_low):
                slope = f"{fit.fitted_slope:.2f} [{fit.slope_ci95_low:.2f}, {fit.slope_ci95_high:.2f}]"
            else:
                slope = "-"
            unit = " (log2 time per k)" if experiment in SEMILOG else ""
            lines.append(f"| {experiment} | {_SUMMARY_NAMES[(experiment, method)]} | {size} | "
                         f"{_seconds(row['seconds'])} ({_seconds(row['seconds_min'])}..{_seconds(row['seconds_max'])}) | "
                         f"{slope}{unit} | {THEORY[(experiment, method)][1]:g} |")
    lines += ["", f"<!-- generated by optcomp.experiments.runtime.summary_markdown from {source}; do not edit -->", ""]
    return "\n".join(lines)
