r"""Budget splitting: how much privacy each of k queries may use under a global budget.

The inverse problem of composition (KOV Section 4; the "budget-splitting" use of MV's
optimal composition): given a global budget (eps_g, delta_g) and k queries, find the
largest per-query eps such that the composition theorem certifies

    epsilon_g(eps, delta, k=k, delta_g=delta_g, method=method) <= eps_g,

and from it the Laplace noise each query needs (sensitivity s: scale b = s / eps, standard
deviation sqrt(2) b).  A tighter theorem certifies a larger per-query eps, hence less
noise for the same global guarantee: that difference is what the optimal composition
theorem buys in practice (:func:`noise_table`).

Functions:

* :func:`per_query_epsilon` -- the largest eps for k identical (eps, delta)-DP queries;
* :func:`largest_scale` / :func:`split_budget` -- the largest common scale c for given
  weights (query i gets eps_i = c w_i);
* :func:`laplace_scale` -- the Laplace scale per query for a given sensitivity;
* :func:`kov_recipe` -- the closed-form recipe of KOV Corollary 4.1 / Theorem 4.2;
* :func:`noise_for` -- mechanism-aware: the least noise of a Laplace, Gaussian, geometric,
  staircase or discrete Gaussian mechanism whose k-fold composition, composed *as that
  mechanism* (its privacy-loss distribution, not a black-box (eps, delta)), meets the budget;
* :func:`noise_table` -- per-query eps and Laplace noise under basic / DRV / KOV /
  optimal composition, with the KOV recipe beside them (and mechanism-aware rows on request).

How it is computed: a bracketing search over the public API (:func:`optcomp.epsilon_g`),
which is nondecreasing in eps for every method -- regula falsi on log eps_g against log eps
inside the bracket [last eps that passed, first that failed], safeguarded by bisection
(:func:`_largest_below`), started for ``optimal``/``approx`` from the answer of the KOV
bound (cheap, and just below the optimal answer): typically under ten exact evaluations
instead of ~70 for a bisection (k = 10^12 identical queries: 8 evaluations, ~9 s at load 6
on 2 cores where the bisection took ~2 min; ``benchmarks/bench_inverse.py``).  The answer
is *certified on the safe side*: the returned eps is always one at which the check above was
evaluated and passed (the library's eps_g values are themselves rounded up), so using it
never exceeds the budget under that method; the search runs until the bracket is narrower
than ``rtol`` relative to the answer (default 0: until its ends are adjacent floats, the
upper one evaluated and failing), so the answer is the largest admissible value to that
precision.  ``progress=True`` shows a status line on stderr for searches longer than 2 s.
Identical queries are passed to the library as one (eps, delta) pair with its count, never
as k copies.

Setting: the composition theorems (and so every split here) assume that the per-query
parameters are fixed in advance, before any query runs; the queries themselves may be chosen
adaptively.  Choosing the parameters adaptively (e.g. spending more on a query because of
an earlier answer) needs a privacy filter (Rogers et al. 2016; Whitehouse et al. 2023),
which optcomp does not provide.

Length (~800 lines): every inverse problem here -- per-query eps, weighted scales, the
noise of one mechanism family, the tables -- runs the one certified search
(:func:`_largest_below`) and shares its validation; apart they would repeat both.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable, NamedTuple

import numpy as np

import optcomp

from . import _progress
from ._inputs import (MAX_K, ParameterTypeError, _as_vector, _check_real, _describe, _integer, check_count,
                      check_delta_g, check_eps_g, check_k, check_probability, mechanisms)
from .methods import METHOD_INFO, METHODS, check_method

__all__ = [
    "per_query_epsilon",
    "largest_scale",
    "split_budget",
    "laplace_scale",
    "kov_recipe",
    "noise_table",
    "NoiseRow",
    "Recipe",
    "TABLE_METHODS",
    "largest_passing",
    "noise_for",
    "NOISE_MECHANISMS",
]

_RTOL = 0.0  # bisect down to adjacent floats
_MAX_DOUBLINGS = 2100  # from 2^-1074 to 2^1024 and then some
_MAX = sys.float_info.max
TABLE_METHODS = ("basic", "drv", "kov", "optimal")  # the default rows of noise_table


def _check_rtol(rtol) -> float:
    x = _check_real("rtol", rtol)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"rtol must be a finite number >= 0, got {x!r}")
    return x


def _check_delta(delta) -> float:
    """A per-query delta: one number in [0, 1)."""
    return check_probability("delta", delta)


def largest_passing(passes: Callable[[float], bool], start: float, *, rtol: float = _RTOL) -> float:
    """Largest x >= 0 (to relative precision ``rtol``) with ``passes(x)`` true.

    For a predicate that is true on [0, x*] and false above (monotone).  Returns a point
    where ``passes`` was evaluated true, or 0.0 if it fails at 0 as well (then nothing
    passes); the largest finite float if it never fails (``passes`` is never called
    with an infinite argument).  ``start`` is a first guess of the scale (> 0).
    """
    if not callable(passes):
        raise ParameterTypeError(f"passes must be callable (a predicate of one float), got {_describe(passes)}")
    start = _check_real("start", start)
    if not (start > 0 and math.isfinite(start)):
        raise ValueError(f"start must be a finite number > 0, got {start!r}")
    rtol = _check_rtol(rtol)
    if not passes(0.0):
        return 0.0
    lo, hi = 0.0, float(start)
    # bracket: find hi with passes(hi) false
    for _ in range(_MAX_DOUBLINGS):
        if not passes(hi):
            break
        if hi == _MAX:
            return _MAX
        lo, hi = hi, min(hi * 2.0, _MAX)
    else:  # pragma: no cover - would need > 2^2100
        return lo
    if lo == 0.0:
        # shrink until something passes (a tiny positive eps passes for every method
        # that passes at 0, unless the budget is exactly 0)
        while hi > 0.0:
            mid = hi / 2.0
            if mid == 0.0:
                return 0.0
            if passes(mid):
                lo = mid
                break
            hi = mid
    # bisection: passes(lo) true, passes(hi) false
    while hi - lo > rtol * lo:
        mid = lo + 0.5 * (hi - lo)
        if mid <= lo or mid >= hi:
            break
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- the search


_TINY = 5e-324  # the least positive float
_MAX_EVALUATIONS = 5000  # far beyond any search (bisection over the whole float range: ~2100)


def _log_ratio(a: float, b: float) -> float | None:
    """log(a / b) for finite a, b > 0 (else None), to a few ulps of the *result* when a and
    b are close (their difference is then exact): the secant steps near the root need it."""
    if not (0.0 < a < math.inf and 0.0 < b < math.inf):
        return None
    d = (a - b) / b
    return math.log1p(d) if abs(d) < 0.5 else math.log(a) - math.log(b)


def _secant(x0: float, v0: float, x1: float, v1: float, target: float) -> float | None:
    """The root of log(value / target) on the line through the two points in
    (log x, log value), as a step from x1 (so its precision is that of the step, not of
    log x1); None when the points give no line."""
    f0, f1, dx = _log_ratio(v0, target), _log_ratio(v1, target), _log_ratio(x1, x0)
    if f0 is None or f1 is None or dx is None or f0 == f1 or dx == 0.0:
        return None
    step = -f1 * dx / (f1 - f0)
    return _step(x1, step)


def _step(x: float, step: float) -> float:
    """x e^step, as x + x expm1(step) (exact to an ulp for small steps)."""
    if step > 700.0:
        return math.inf
    return x + x * math.expm1(step)


def _largest_below(value: Callable[[float], float], target: float, start: float, *, rtol: float = _RTOL,
                   progress=None, what: str = "calibrate", known: dict | None = None,
                   slope: float = 1.0) -> float | None:
    """Largest x >= 0 with ``value(x) <= target``, for ``value`` nondecreasing in x.

    Returns a point at which ``value`` was evaluated and found ``<= target`` (so whatever
    ``value`` certifies holds there), to relative precision ``rtol`` (0: its failing
    neighbour, an adjacent float, was evaluated too); the largest finite float if nothing
    fails; None when ``value(0) > target`` (nothing passes).  ``start`` is a first guess
    (> 0); ``known`` maps points to values already computed; ``slope`` is the guessed
    d log(value) / d log(x) for the first step (1: value proportional to x).

    Fewer evaluations than bisection, the same answer: regula falsi on log(value) against
    log(x) between the ends of the bracket [last pass, first fail] (before there is one: a
    secant through the last two points, or from one point with ``slope`` -- composition
    bounds are close to homogeneous of degree one in the per-query eps), each step formed
    as an offset so that it stays exact to the last ulps; when the same end moved twice in
    a row the step overshoots the estimate by what that end moved (at least 2^(n-2) ulps
    after n moves) so that the other end moves too; a bisection step (geometric while the
    ends are more than a factor 4 apart) whenever the model gives nothing usable or the
    bracket failed to halve in four model steps.  Each value is computed once (a cache), and
    ``progress`` (:mod:`optcomp._progress`, delayed: a stderr line only after 2 s) hears of
    each evaluation (``stage``, ``lower``, ``upper``, ``gap``, ``seconds``).
    """
    callback = _progress.callback(progress, delayed=True)
    cache: dict[float, float] = dict(known or {})
    t0 = time.perf_counter()
    lo: float = 0.0
    hi: float | None = None

    def ev(x: float) -> float:
        v = cache.get(x)
        if v is None:
            v = float(value(x))
            cache[x] = v
            if callback is not None:
                gap = None if hi is None else hi - lo
                callback(dict(stage=f"{what} ({len(cache)} evaluations)", lower=lo, upper=hi, gap=gap,
                              seconds=time.perf_counter() - t0))
        return v

    try:
        if not ev(0.0) <= target:
            return None
        modelled = target > 0.0  # a model in log(value) needs a positive target
        recent: list[float] = []  # the last two points with a usable value (finite, > 0)
        last_side, same_side = None, 0
        width_ref, model_steps, grow = None, 0, 0
        x = min(max(float(start), _TINY), _MAX)
        for _ in range(_MAX_EVALUATIONS):
            v = ev(x)
            side = "lo" if v <= target else "hi"
            if side == "lo":
                lo = x
            else:
                hi = x
            same_side = same_side + 1 if side == last_side else 1
            last_side = side
            if modelled and x > 0.0 and 0.0 < v < math.inf:
                recent = (recent + [x])[-2:]
            # ---- done?
            if hi is None:
                if lo >= _MAX:
                    return _MAX
            elif math.nextafter(lo, math.inf) >= hi or (lo > 0.0 and hi - lo <= rtol * lo):
                return lo
            # ---- the model's estimate
            est = None
            if modelled and hi is not None and lo > 0.0:  # regula falsi between the bracket's ends
                est = _secant(lo, cache[lo], hi, cache[hi], target)
            if est is None and len(recent) == 2:  # secant through the last two points
                est = _secant(recent[0], cache[recent[0]], recent[1], cache[recent[1]], target)
            if est is None and len(recent) == 1 and recent[0] == x:  # one point: value ~ x^slope
                est = _step(x, -_log_ratio(v, target) / slope)
            if est is not None and math.isfinite(est) and same_side >= 2:
                # the other end has not moved for two steps: step past the estimate by
                # what this end moved, at least 2^(n-2) ulps (n: steps this end moved in a row)
                push = max(abs(est - x), math.ulp(x) * 2.0 ** min(same_side - 2, 1000))
                est = est + push if side == "lo" else est - push
            # ---- safeguards
            if hi is None:
                if est is None or not math.isfinite(est) or not est > lo:
                    grow += 1
                    est = max(lo, x) * 2.0 ** min(2**grow, 256)
                else:
                    grow = 0
                x = min(est, _MAX)
                continue
            width = hi - lo
            if width_ref is None or width <= 0.5 * width_ref:
                width_ref, model_steps = width, 0
            if est is not None and math.isfinite(est) and model_steps < 4:
                model_steps += 1
                x = est
            else:  # bisection
                model_steps = 0
                width_ref = width
                base = lo if lo > 0.0 else _TINY
                if hi > 4.0 * base:
                    x = math.sqrt(base) * math.sqrt(hi)
                else:
                    x = lo + 0.5 * (hi - lo)
            if x <= lo:
                x = math.nextafter(lo, math.inf)
            if x >= hi:
                x = math.nextafter(hi, 0.0)
            if x <= lo:  # lo and hi adjacent (caught above)
                return lo
        return lo  # pragma: no cover - beyond _MAX_EVALUATIONS
    finally:
        _progress.close(callback)


_GUIDED = ("optimal", "approx")  # costly methods: the search starts where the KOV bound's ends


def _search(value_for: Callable[[str, dict], Callable[[float], float]], method: str, options: dict,
            target: float, start: float, *, rtol: float, progress, what: str) -> float | None:
    """:func:`_largest_below` for ``value_for(method, options)``, the value function of a
    composition method (nondecreasing in the searched eps or scale).

    The first evaluation is at 0 (it validates the input and settles "nothing fits");
    for the costly methods the search then starts at the answer of the KOV bound (KOV Thm
    3.4/3.5), found to 1e-6 in microseconds: the KOV bound is >= the optimum, so its answer
    lies just below the optimal one.  It is a first guess only: the answer is certified by
    ``method`` itself, at the point returned.
    """
    value = value_for(method, options)
    v0 = float(value(0.0))
    if not v0 <= target:
        return None
    slope = 1.0
    if method in _GUIDED:
        try:
            kov = value_for("kov", {})
            guess = _largest_below(kov, target, start, rtol=1e-6)
            if guess is not None and 0.0 < guess < _MAX / 2:
                start = guess
                a, b = kov(guess), kov(guess * 1.001)  # the local slope of log eps_g against log eps
                if 0.0 < a < b < math.inf:
                    slope = min(max(math.log(b / a) / math.log(1.001), 0.5), 4.0)
        except ValueError:  # pragma: no cover - a first guess only
            pass
    return _largest_below(value, target, start, rtol=rtol, progress=progress, what=what, known={0.0: v0},
                          slope=slope)


def _check_weights(weights, counts=None) -> tuple[np.ndarray, np.ndarray | None]:
    w = _as_vector("weights", weights)
    if w.ndim != 1 or w.size < 1:
        raise ParameterTypeError(f"weights must be a non-empty 1-D sequence of numbers, got {_describe(weights)}")
    bad = ~((w > 0) & np.isfinite(w))
    if bad.any():
        raise ValueError(f"weights must be finite and > 0, got weights[{int(np.argmax(bad))}]={float(w[bad][0])!r}")
    if counts is None:
        return w, None
    if not isinstance(counts, (list, tuple, np.ndarray)) or np.ndim(counts) == 0:
        raise ParameterTypeError(f"counts must be a sequence of integers >= 1, one per weight, got {_describe(counts)}")
    c = [check_count(x, f"counts[{i}]") for i, x in enumerate(counts)]  # each a number of queries
    if len(c) != w.size:
        raise ValueError(f"counts has length {len(c)} but weights has {w.size}")
    if sum(c) > MAX_K:
        raise ValueError(f"counts must sum to at most {MAX_K:.0e} queries, got {sum(c)}")
    return w, np.array(c, dtype=np.int64)


def _check_deltas(delta, size: int) -> np.ndarray:
    """Per-query delta: one number in [0, 1) for all, or one per weight."""
    d = _as_vector("delta", delta)
    if d.ndim == 0:
        d = np.full(size, _check_delta(float(d)))
    elif d.size != size:
        raise ValueError(f"delta has length {d.size} but weights has {size} (give one number or one per weight)")
    bad = ~((d >= 0) & (d < 1))
    if bad.any():
        raise ValueError(f"delta must lie in [0, 1), got delta[{int(np.argmax(bad))}]={float(d[bad][0])!r}")
    return d + 0.0


def largest_scale(weights, eps_g: float, delta_g: float, *, delta=0.0, counts=None, method: str = "auto",
                  rtol: float = _RTOL, progress=None, **options) -> float:
    """Largest c such that queries with eps_i = c * weights[i] (and per-query ``delta``)
    compose to (eps_g, delta_g)-DP under ``method``.

    Args:
        weights: positive relative budgets, one per query (or per kind of query with
            ``counts``).
        eps_g, delta_g: the global budget.
        delta: per-query delta_i (a number, or one per weight); 0 for pure-DP mechanisms
            such as Laplace.
        counts: optional multiplicities: ``weights[i]`` stands for ``counts[i]`` queries.
        method: a name of :data:`optcomp.METHODS`; ``options`` are passed on to it.
        rtol: relative precision of the search (0: to adjacent floats).
        progress: True for a status line on stderr when the search takes more than 2 s,
            or a callable receiving a status dict per evaluation (as ``optcomp.approx``).

    Returns:
        c, certified: ``optcomp.epsilon_g(c * weights, delta, counts=counts,
        delta_g=delta_g, method=method) <= eps_g`` was evaluated at exactly this c.
        0.0 if not even c = 0 fits (delta_g too small for the delta_i).
    """
    w, c = _check_weights(weights, counts)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    d = _check_deltas(delta, w.size)
    rtol = _check_rtol(rtol)
    check_method(method, options)
    m = mechanisms(w, d, counts=c)  # the multiset of (weight, delta) pairs, equal ones grouped
    w, d, c = m.eps, m.delta, m.count
    optcomp.epsilon_g(w, d, counts=c, delta_g=delta_g, method=method, **options)  # validate the rest once

    def value_for(m: str, opts: dict) -> Callable[[float], float]:
        def value(scale: float) -> float:
            with np.errstate(over="ignore"):
                eps = scale * w
            if not np.all(np.isfinite(eps)):  # beyond the float range: nothing is certified
                return math.inf
            return optcomp.epsilon_g(eps, d, counts=c, delta_g=delta_g, method=m, **opts)
        return value

    start = max(eps_g, 1e-3) / float(np.dot(w, c.astype(float)))  # basic composition's answer
    scale = _search(value_for, method, options, eps_g, start, rtol=rtol, progress=progress,
                    what=f"largest_scale under {method}")
    return 0.0 if scale is None else scale


def split_budget(weights, eps_g: float, delta_g: float, *, delta=0.0, method: str = "auto",
                 rtol: float = _RTOL, progress=None, **options) -> np.ndarray:
    """Per-query eps_i = c * weights[i] with the largest c of :func:`largest_scale`.

    Returns the array of eps_i (all zeros if even eps_i = 0 does not fit, i.e. delta_g is
    too small for the delta_i).  Certified: ``optcomp.epsilon_g(result, delta,
    delta_g=delta_g, method=method) <= eps_g`` was checked for exactly this c.
    ``progress``: as for :func:`largest_scale`.
    """
    w, _ = _check_weights(weights)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    _check_deltas(delta, w.size)
    rtol = _check_rtol(rtol)
    return largest_scale(w, eps_g, delta_g, delta=delta, method=method, rtol=rtol, progress=progress, **options) * w


def per_query_epsilon(k: int, eps_g: float, delta_g: float, *, delta: float = 0.0, method: str = "auto",
                      rtol: float = _RTOL, progress=None, **options) -> float:
    """Largest eps such that k (eps, delta)-DP queries compose to (eps_g, delta_g)-DP.

    Args:
        k: number of queries (an integer >= 1).
        eps_g, delta_g: the global budget.
        delta: the per-query delta (0 for pure-DP mechanisms such as Laplace).
        method: a name of :data:`optcomp.METHODS`; ``options`` are passed on to it.
        rtol: relative precision of the search (0: to adjacent floats).
        progress: True for a status line on stderr when the search takes more than 2 s,
            or a callable receiving a status dict per evaluation (as ``optcomp.approx``).

    Returns:
        The largest eps to precision ``rtol``, certified: ``optcomp.epsilon_g(eps, delta,
        k=k, delta_g=delta_g, method=method) <= eps_g`` was evaluated at this value.  0.0
        when no eps works (delta_g < 1 - (1 - delta)^k for the optimal method, < k delta
        for the others; or a zero budget).
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    delta = _check_delta(delta)
    rtol = _check_rtol(rtol)
    check_method(method, options)

    def value_for(m: str, opts: dict) -> Callable[[float], float]:
        return lambda e: optcomp.epsilon_g(e, delta, k=k, delta_g=delta_g, method=m, **opts)

    eps = _search(value_for, method, options, eps_g, max(eps_g, 1e-3) / k, rtol=rtol, progress=progress,
                  what=f"per-query eps under {method}")
    return 0.0 if eps is None else eps


def _check_sensitivity(sensitivity) -> float:
    s = _check_real("sensitivity", sensitivity)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return s


def _noise(sensitivity: float, eps: float, what: str) -> float:
    """sensitivity / eps, refusing an infinite or zero scale (no usable noise level)."""
    scale = sensitivity / eps if eps > 0 else math.inf
    if not (0.0 < scale < math.inf):
        raise ValueError(f"no finite, nonzero Laplace scale for {what}: per-query eps = {eps!r}, "
                         f"sensitivity = {sensitivity!r}")
    return scale


def laplace_scale(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0, method: str = "auto",
                  progress=None, **options) -> float:
    """Laplace noise scale b = sensitivity / eps per query (variance 2 b^2).

    k queries of that sensitivity, each answered with Lap(b) noise (an (eps, 0)-DP
    mechanism), are (eps_g, delta_g)-DP under ``method``; eps from
    :func:`per_query_epsilon` (certified).  Raises ``ValueError`` when the budget admits no
    positive per-query eps under the method (e.g. eps_g = 0 with delta_g = 0, or DRV with
    delta_g = 0): no finite noise level suffices.
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = _check_sensitivity(sensitivity)
    eps = per_query_epsilon(k, eps_g, delta_g, delta=0.0, method=method, progress=progress, **options)
    return _noise(sensitivity, eps, f"k={k} queries within (eps_g={eps_g!r}, delta_g={delta_g!r}) under {method!r}")


class Recipe(NamedTuple):
    """A per-query (eps, delta) and the Laplace noise that realises it."""

    eps: float
    delta: float
    laplace_scale: float
    laplace_std: float


def kov_recipe(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0) -> Recipe:
    """KOV Corollary 4.1 and Theorem 4.2: a closed-form per-query budget.

    For eps_g in (0, 0.9] and delta_g in (0, 1], k queries, each
    (sqrt(eps_g^2 / (4 k log(e + eps_g/delta_g))), delta_g/(2k))-DP, compose to
    (eps_g, delta_g)-DP; Laplace noise of variance 8 k sensitivity^2 log(e + eps_g/delta_g)
    / eps_g^2 per query (scale sensitivity / eps) achieves it.  The eps is rounded down
    (a few ulps) so that floating point never leaves the corollary's guarantee.

    Raises ``ValueError`` outside the corollary's range (eps_g > 0.9, eps_g = 0 or
    delta_g = 0).
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = _check_sensitivity(sensitivity)
    if not 0.0 < eps_g <= 0.9:
        raise ValueError(f"eps_g must lie in (0, 0.9] for KOV Corollary 4.1, got {eps_g!r}")
    if not delta_g > 0.0:
        raise ValueError(f"delta_g must be > 0 for KOV Corollary 4.1, got {delta_g!r}")
    eps = eps_g / math.sqrt(4.0 * k * math.log(math.e + eps_g / delta_g))
    for _ in range(4):  # round down: sqrt, log, division and product each err by <= 1 ulp
        eps = math.nextafter(eps, 0.0)
    scale = _noise(sensitivity, eps, f"KOV Cor. 4.1 with k={k}")
    return Recipe(eps, delta_g / (2 * k), scale, math.sqrt(2.0) * scale)


# --------------------------------------------------------------------------- mechanism-aware noise

#: the mechanisms :func:`noise_for` calibrates, by the name it takes
NOISE_MECHANISMS = ("laplace", "gaussian", "geometric", "staircase", "discrete_gaussian")
_INTEGER_SENSITIVITY = ("geometric", "discrete_gaussian")
_PURE = ("laplace", "geometric", "staircase")  # x is a pure-DP eps of the mechanism (times the sensitivity for geometric)
_RESOLUTION = {"auto": 1e-4, "approx": 1e-3}  # the certified gap (absolute, in eps_g) of the methods' default tol


class _NoNoise(ValueError):
    """No finite noise of the mechanism meets the budget."""


def _check_noise_mechanism(name, what: str = "mechanism") -> str:
    if not isinstance(name, str) or name not in NOISE_MECHANISMS:
        raise ValueError(f"{what} must be one of {', '.join(NOISE_MECHANISMS)}; got {_describe(name)}")
    return name


def _make(name: str, x: float, sensitivity):
    """The mechanism of privacy parameter x > 0 (``with_privacy`` of the registered family):
    Laplace / Gaussian / discrete Gaussian with scale or sigma sensitivity / x, geometric or
    staircase with eps = x (the staircase with Geng--Viswanath's variance-optimal gamma)."""
    from .mechanisms import REGISTRY

    return REGISTRY[name].with_privacy(x, sensitivity)


def _pure_eps(name: str, m) -> float:
    """The pure-DP eps of a calibrated mechanism: inf for the Gaussians (their privacy loss
    is unbounded, so they are (eps, 0)-DP for no finite eps)."""
    if name == "laplace":
        return m.sensitivity / m.scale
    if name == "geometric":
        return m.eps * m.sensitivity
    if name == "staircase":
        return m.eps
    return math.inf


def _noise_std(m) -> float:
    """The standard deviation of the mechanism's noise (the discrete Gaussian's summed
    directly: its variance is a little below sigma^2)."""
    var = getattr(m, "variance", None)
    if var is not None:
        return math.sqrt(var())
    sigma = m.sigma
    w = int(math.ceil(40.0 * sigma)) + 1
    z = np.arange(-w, w + 1, dtype=float)
    weights = np.exp(-(z * z) / (2.0 * sigma * sigma))
    return math.sqrt(float(np.dot(z * z, weights) / weights.sum()))


def _guide(name: str, k: int, delta_g: float, sensitivity) -> Callable[[float], float] | None:
    """A cheap stand-in for the mechanism-aware eps_g as a function of x, to place the
    search's first point: KOV's bound on k x-DP black boxes for the pure-DP mechanisms (it is
    >= their optimum), the Gaussian closed form (method optimal) for the Gaussians."""
    if name in _PURE:
        scale = sensitivity if name == "geometric" else 1.0
        return lambda x: optcomp.epsilon_g(x * scale, k=k, delta_g=delta_g, method="kov")
    from .mechanisms import Gaussian

    return lambda x: optcomp.epsilon_g(Gaussian(sensitivity / x, sensitivity), k=k, delta_g=delta_g,
                                       method="optimal") if x > 0.0 else 0.0


def noise_for(mechanism, k, eps_g, delta_g, *, sensitivity=1.0, method="auto", rtol=1e-6, progress=None):
    """The least noise of a mechanism whose k copies meet (eps_g, delta_g), mechanism-aware.

    ``mechanism`` is one of :data:`NOISE_MECHANISMS`: ``"laplace"``, ``"gaussian"``,
    ``"geometric"``, ``"staircase"``, ``"discrete_gaussian"``.  Searched is the largest
    privacy parameter x -- ``sensitivity / scale`` (Laplace), ``sensitivity / sigma``
    (Gaussian, discrete Gaussian), ``eps`` (geometric, staircase; the staircase with its
    variance-optimal gamma = 1/(1 + e^{eps/2})) -- such that

        optcomp.epsilon_g(m, k=k, delta_g=delta_g, method=method) <= eps_g

    for the mechanism object m of that x: the k copies composed *as that mechanism* (its
    privacy-loss distribution), not as the black box (eps, delta) it also is.  The search is
    :func:`_largest_below`'s (started from a cheap guide: KOV's black-box bound for the
    pure-DP mechanisms, the Gaussian closed form for the Gaussians), to relative precision
    ``rtol`` in x.

    Args:
        mechanism: the mechanism's name (above).
        k: the number of queries, each answered by one copy (an integer in [1, 10^12]).
        eps_g, delta_g: the global budget.
        sensitivity: the query's sensitivity (> 0; a positive integer for ``"geometric"``
            and ``"discrete_gaussian"``, whose noise is on the integers).
        method: ``"auto"`` (default: the exact optimum for Gaussians -- their closed form --,
            approx's certified upper bound otherwise), ``"approx"``, or ``"optimal"`` (Gaussians
            only: else :class:`optcomp.ExactTooLarge`); the theorems about (eps, delta) pairs
            refuse these mechanisms (``ValueError`` naming the method), except the geometric
            mechanism with sensitivity 1, which *is* the black box (eps, 0) (KOV Thm 4.4).
        rtol: relative precision of the search in x (0: to adjacent floats), never finer
            than the method's own: where the values are approx's certified upper bounds
            (method approx, and auto for all but the Gaussians) the search stops once the
            bracket is within tol / eps_g (auto: tol = 1e-4, approx: 1e-3 absolute in eps_g)
            -- finer steps would chase the lattice's rounding, not the optimum.
        progress: True for a status line on stderr when the search takes more than 2 s, or a
            callable receiving a status dict per evaluation.

    Returns:
        The mechanism object (``optcomp.mechanisms.Laplace(scale, sensitivity)``, ``Gaussian``,
        ``Geometric``, ``Staircase``, ``DiscreteGaussian``), certified: the check above was
        evaluated for exactly this object and passed, so its k copies are (eps_g, delta_g)-DP.

    Raises:
        ValueError: bad input (naming the parameter), or no finite noise meets the budget
            (e.g. a Gaussian with delta_g = 0, or eps_g = delta_g = 0).
    """
    name = _check_noise_mechanism(mechanism)
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    if name in _INTEGER_SENSITIVITY:
        sensitivity = _integer("sensitivity", sensitivity, 1, 2**20)
    else:
        sensitivity = _check_sensitivity(sensitivity)
    rtol = _check_rtol(rtol)
    check_method(method, {})

    def value(x: float) -> float:
        if x == 0.0:  # infinite noise: no privacy loss at all
            return 0.0
        try:
            m = _make(name, x, sensitivity)
        except ValueError:  # no such mechanism (a scale rounding to 0 at huge x): nothing certified
            return math.inf
        return optcomp.epsilon_g(m, k=k, delta_g=delta_g, method=method)

    # approx's values (auto's for all but the Gaussians) are upper bounds within its tolerance
    # of the optimum, rounded on a lattice that moves with x: steps in x finer than that chase
    # the rounding (k = 2 Laplace: 130 evaluations instead of 6), so the search stops there
    # (the geometric mechanism with sensitivity 1 is the black box (x, 0): auto searches it as
    # per_query_epsilon does, exactly where the optimum is feasible)
    exact = method == "optimal" or (method == "auto" and (name == "gaussian" or (name == "geometric"
                                                                                  and sensitivity == 1)))
    resolution = 0.0 if exact else _RESOLUTION.get(method, 0.0)
    if eps_g > 0.0:
        rtol = max(rtol, resolution / eps_g)
    start, slope = max(eps_g, 1e-3) / math.sqrt(k), 1.0
    guide = _guide(name, k, delta_g, sensitivity)
    try:
        guess = _largest_below(guide, eps_g, start, rtol=1e-6)
        if guess is not None and 0.0 < guess < _MAX / 2:
            start = guess * (1.0 - min(rtol, 0.5))  # just below: the search starts from a passing point
            a, b = guide(guess), guide(guess * 1.001)  # the local slope of log eps_g against log x
            if 0.0 < a < b < math.inf:
                slope = min(max(math.log(b / a) / math.log(1.001), 0.5), 4.0)
    except ValueError:  # pragma: no cover - a first guess only
        pass
    x = _largest_below(value, eps_g, start, rtol=rtol, progress=progress, known={0.0: 0.0}, slope=slope,
                       what=f"noise_for({name!r}) under {method}")
    if x is None or x == 0.0:
        raise _NoNoise(f"no finite {name} noise meets (eps_g={eps_g!r}, delta_g={delta_g!r}) for k={k} "
                       f"queries under {method!r}")
    return _make(name, x, sensitivity)


class NoiseRow(NamedTuple):
    """One row of :func:`noise_table`.

    ``eps``/``delta``: the per-query budget, always a float (never None or NaN).  A
    mechanism-aware row gives the mechanism's own pure-DP guarantee: its eps with delta 0.0
    -- eps = inf for the Gaussians, whose privacy loss is unbounded (no finite eps at
    delta 0: their guarantee is the composed one the row was calibrated to) -- and, where no
    finite noise fits, eps = delta = 0.0 as for a method that certifies no positive eps
    (only infinite noise, i.e. no output, meets the budget); ``laplace_scale``/``laplace_std``:
    the Laplace noise per query (None where the method certifies no positive eps, and in the
    rows of other mechanisms); ``vs_optimal``: noise relative to the optimal row (its
    standard deviation; None without one); ``noise_std``: the standard deviation of the
    row's noise per query; ``mechanism``: a mechanism-aware row's mechanism object (of
    :func:`noise_for`), else None.
    """

    method: str
    theorem: str
    eps: float
    delta: float
    laplace_scale: float | None
    laplace_std: float | None
    vs_optimal: float | None
    noise_std: float | None = None
    mechanism: object | None = None


def noise_table(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0, delta: float = 0.0,
                methods=TABLE_METHODS, recipe: bool = True, mechanisms=(), progress=None,
                **options) -> list[NoiseRow]:
    """What tighter accounting buys: per-query eps and Laplace noise under each method.

    One row per name in ``methods`` (:func:`per_query_epsilon` with per-query ``delta``,
    certified) and, with ``recipe=True`` and where it applies (eps_g <= 0.9, delta_g > 0),
    a row ``"kov_cor4.1"`` for KOV Corollary 4.1 (:func:`kov_recipe`, its per-query delta is
    delta_g/(2k)).  Options are passed to every method that accepts them.  A method that
    certifies no positive eps gets eps 0.0 and no noise (None).

    ``mechanisms``: names of :data:`NOISE_MECHANISMS` (e.g. ``("laplace", "gaussian")``), one
    mechanism-aware row each, ``"laplace-aware"``, ``"gaussian-aware"`` ...: the least noise
    of that mechanism whose k copies, composed as that mechanism, meet the budget
    (:func:`noise_for` with method auto: the optimum where exact -- Gaussians --, else
    approx's certified upper bound), with its standard deviation ``noise_std`` and the
    ``mechanism`` object; no noise (None) where no finite noise fits.  (Each Laplace-aware
    row runs a search over the mechanism engine: ~10 s at k = 10^4.)  ``progress``: as for
    :func:`per_query_epsilon`, for each row's search.
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = _check_sensitivity(sensitivity)
    delta = _check_delta(delta)
    if isinstance(methods, str):
        methods = (methods,)
    if not isinstance(methods, (list, tuple)):
        raise ParameterTypeError(f"methods must be a method name or a list of them, got {_describe(methods)}")
    for i, m in enumerate(methods):
        if not isinstance(m, str) or m not in METHOD_INFO:
            raise ValueError(f"methods[{i}] must be one of {', '.join(METHODS)}; got {_describe(m)}")
    if not isinstance(recipe, (bool, np.bool_)):
        raise ParameterTypeError(f"recipe must be True or False, got {_describe(recipe)}")
    if isinstance(mechanisms, str):
        mechanisms = (mechanisms,)
    if not isinstance(mechanisms, (list, tuple)):
        raise ParameterTypeError(f"mechanisms must be a mechanism name or a list of them, got {_describe(mechanisms)}")
    for i, name in enumerate(mechanisms):
        _check_noise_mechanism(name, f"mechanisms[{i}]")
    for key in options:
        if not any(key in METHOD_INFO[m].options for m in methods):
            raise ValueError(f"unknown option {key!r}: accepted by none of the methods {', '.join(methods)}")
    rows = []
    for m in methods:
        info = check_method(m, {})
        opts = {key: v for key, v in options.items() if key in info.options}
        eps = per_query_epsilon(k, eps_g, delta_g, delta=delta, method=m, progress=progress, **opts)
        scale = sensitivity / eps if eps > 0 and math.isfinite(sensitivity / eps) else None
        std = None if scale is None else math.sqrt(2.0) * scale
        rows.append(NoiseRow(m, info.theorem, eps, float(delta), scale, std, None, std))
    if recipe and 0.0 < eps_g <= 0.9 and delta_g > 0.0:
        r = kov_recipe(k, eps_g, delta_g, sensitivity=sensitivity)
        rows.append(NoiseRow("kov_cor4.1", "KOV Cor. 4.1 / Thm 4.2 (closed-form recipe, eps_g <= 0.9)",
                             r.eps, r.delta, r.laplace_scale, r.laplace_std, None, r.laplace_std))
    for name in mechanisms:
        rows.append(_mechanism_row(name, k, eps_g, delta_g, sensitivity, progress))
    best = next((r for r in rows if r.method == "optimal" and r.laplace_scale is not None), None)
    if best is not None:
        rows = [r._replace(vs_optimal=r.laplace_scale / best.laplace_scale if r.laplace_scale is not None
                           else None if r.noise_std is None else r.noise_std / best.laplace_std) for r in rows]
    return rows


def _mechanism_row(name: str, k: int, eps_g: float, delta_g: float, sensitivity: float, progress) -> NoiseRow:
    """The mechanism-aware row of :func:`noise_table` for ``name`` (no noise where none fits)."""
    from .mechanisms import REGISTRY

    cls = REGISTRY[name].__name__
    theorem = (f"{k} {cls} mechanisms composed as such (their privacy-loss distribution), least noise "
               f"certified by method auto (exact for Gaussians, else approx's upper bound within 1e-4)")
    sens = _integer("sensitivity", sensitivity, 1, 2**20) if name in _INTEGER_SENSITIVITY else sensitivity
    try:
        mech = noise_for(name, k, eps_g, delta_g, sensitivity=sens, progress=progress)
    except _NoNoise:
        return NoiseRow(f"{name}-aware", theorem, 0.0, 0.0, None, None, None, None, None)
    scale = mech.scale if name == "laplace" else None
    std = _noise_std(mech) if scale is None else math.sqrt(2.0) * scale  # Laplace: as the black-box rows
    return NoiseRow(f"{name}-aware", theorem, _pure_eps(name, mech), 0.0, scale,
                    None if scale is None else std, None, std, mech)
