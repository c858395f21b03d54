"""The certified search behind every inverse problem of the toolkit: the largest x at which
a nondecreasing value (eps_g of a composition, as a function of a per-query eps, a scale
c of given weights, or a mechanism's privacy parameter) stays within a target.

:func:`_largest_below` brackets the answer between the last point that passed and the first
that failed and narrows the bracket by regula falsi on log value against log x, safeguarded
by bisection; the point returned is always one at which the value was evaluated and passed,
so the answer is certified on the safe side.  :func:`_search` starts it, for the costly
methods, from the answer of the KOV bound.  Its users: :mod:`optcomp.calibrate` (per-query
eps, weighted scales, :func:`~optcomp.calibrate.largest_passing` on a predicate),
:mod:`optcomp.noise` (a mechanism's least noise) and :meth:`optcomp.Accountant.remaining`.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Callable

from . import _progress
from ._inputs import ParameterTypeError, _check_real, _describe

__all__ = ["largest_passing"]

_RTOL = 0.0  # bisect down to adjacent floats
_MAX_DOUBLINGS = 2100  # from 2^-1074 to 2^1024 and then some
_MAX = sys.float_info.max


def _check_rtol(rtol) -> float:
    x = _check_real("rtol", rtol)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"rtol must be a finite number >= 0, got {x!r}")
    return x


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
