r"""DP-SGD calibration: the inverse problems of a Poisson-subsampled Gaussian composed for
every training step.

A DP-SGD step with noise multiplier sigma (noise N(0, sigma^2 C^2) on gradients clipped to
norm C) and Poisson sampling rate q is :class:`~optcomp.mechanisms.Subsampled`
``(Gaussian(sigma), q)`` under add/remove neighbours (Zhu, Dong and Wang, AISTATS 2022,
Thm 11; both global directions taken).  Its guarantee after ``steps`` steps is the
certified bracket of :func:`optcomp.epsilon_bounds`; the searches here invert it:

* :func:`noise_multiplier` -- the least sigma with eps_g(sigma) <= the budget;
* :func:`max_steps` -- the most steps within the budget;
* :func:`max_sampling_rate` -- the largest q within the budget.

Each is *certified on the safe side*: the returned value is one at which the certified
upper bound of eps_g was evaluated and is within the budget, and its neighbour on the unsafe
side (sigma / (1 + rtol), steps + 1, q (1 + rtol)) was evaluated and certified over budget
by the bracket's lower end -- or, where the bracket could not separate it from the budget at
the finest tolerance tried, counted as over budget (the answer then errs on the safe side).
eps_g is monotone in each parameter (decreasing in sigma; increasing in steps, and in q by
joint convexity of the hockey-stick divergence), so the searches bracket by factors of 2 and
then close in by regula falsi on log eps_g against the log of the parameter (safeguarded by
bisection), each evaluation at a tolerance just fine enough to decide its side.

Setting: as for every result of optcomp, the parameters are fixed before training (the
steps themselves may be adaptive)."""

from __future__ import annotations

import math
from typing import NamedTuple

import optcomp

from ._inputs import ParameterTypeError, _check_real, _describe, check_delta_g, check_eps_g
from ._types import ApproxTooCostly, Bounds
from .mechanisms import Gaussian, Subsampled

__all__ = ["Calibration", "noise_multiplier", "max_steps", "max_sampling_rate", "dpsgd_epsilon"]

_FINEST = 1e-7  # the finest relative tolerance an evaluation is refined to (then: over budget)


class Calibration(NamedTuple):
    """The answer of a search: ``value`` (sigma, steps or q) and the certified bracket of eps_g
    at it (``epsilon.upper <= eps_g``); ``evaluations``: how many brackets were computed."""

    value: float
    epsilon: Bounds
    evaluations: int


def dpsgd_epsilon(noise_multiplier, sampling_rate, steps, delta_g, *, tol=None) -> Bounds:
    """Certified bracket of eps_g for ``steps`` DP-SGD steps (the Poisson-subsampled Gaussian,
    sensitivity 1: the clipping norm).  ``tol``: the bracket's width (default 1e-4 relative)."""
    mech = Subsampled(Gaussian(_positive("noise_multiplier", noise_multiplier)), sampling_rate)
    k = _steps(steps)
    delta_g = check_delta_g(delta_g)
    return optcomp.epsilon_bounds(mech, k=k, delta_g=delta_g, tol=tol if tol is not None else 1e-4)


# ---------------------------------------------------------------------------------------------
# validation


def _positive(name, value) -> float:
    x = _check_real(name, value)
    if not (x > 0.0 and math.isfinite(x)):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return x


def _rate(name, value) -> float:
    x = _check_real(name, value)
    if not (0.0 < x <= 1.0):
        raise ValueError(f"{name} must be in (0, 1], got {x!r}")
    return x


def _steps(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float)
                                                                          and not value.is_integer()):
        raise ParameterTypeError(f"steps must be a positive integer, got {_describe(value)}")
    k = int(value)
    if k < 1:
        raise ValueError(f"steps must be >= 1, got {k}")
    return k


def _rtol(value) -> float:
    x = _check_real("rtol", value)
    if not (0.0 < x < 1.0):
        raise ValueError(f"rtol must be in (0, 1), got {x!r}")
    return x


# ---------------------------------------------------------------------------------------------
# the certified side of one evaluation


class _Judge:
    """Decides whether eps_g(x) <= eps_g: brackets refined until one end decides (True: the
    upper end within budget; False: the lower end over it, or no decision at _FINEST)."""

    def __init__(self, bracket_at, eps_g: float):
        self.bracket_at, self.eps_g, self.evaluations = bracket_at, eps_g, 0
        self.brackets = {}  # x -> its bracket, where x passed
        self.estimate = {}  # x -> the middle of its last bracket (an estimate of eps_g(x), for the secant)

    def __call__(self, x) -> bool:
        tol = max(1e-3 * self.eps_g, 1e-12)
        while True:
            self.evaluations += 1
            try:
                b = self.bracket_at(x, tol)
            except ApproxTooCostly as exc:  # a size limit: its bracket decides or the value fails
                b = exc.bounds if exc.bounds is not None else Bounds(0.0, math.inf)
                if not b.upper <= self.eps_g:
                    return False
            if math.isfinite(b.upper) and b.upper > 0.0:
                self.estimate[x] = 0.5 * (b.lower + b.upper)
            if b.upper <= self.eps_g:
                self.brackets[x] = b
                return True
            if b.lower > self.eps_g:
                return False
            gap_needed = min(self.eps_g - b.lower, b.upper - self.eps_g)
            tol = max(min(tol / 4.0, gap_needed), _FINEST * self.eps_g)
            if b.gap <= _FINEST * self.eps_g * 1.0001:
                return False


def _boundary(judge: _Judge, lo: float, hi: float, rtol: float, passing_high: bool, integer: bool = False) -> float:
    """The boundary of ``judge`` in [lo, hi] to relative ``rtol`` (adjacent integers when
    ``integer``): ``passing_high``: judge(hi) True and judge(lo) False (return the least
    passing x), else judge(lo) True and judge(hi) False (the largest passing x).  Regula
    falsi on log eps_g against log x through the brackets' middles (Illinois: an end kept
    twice has its value halved), safeguarded by bisection in log x -- only the judge's
    certified verdicts move the ends."""
    target = math.log(judge.eps_g) if judge.eps_g > 0 else None
    kept = [0, 0]

    def value(x):
        e = judge.estimate.get(x)
        return math.log(e) - target if (e is not None and e > 0 and target is not None) else None

    while (hi - lo > 1) if integer else (hi > lo * (1.0 + rtol)):
        a, b = math.log(lo), math.log(hi)
        fa, fb = value(lo), value(hi)
        x = None
        if fa is not None and fb is not None and fa != fb:
            fa, fb = fa / 2.0**kept[0], fb / 2.0**kept[1]
            t = a + (b - a) * (-fa) / (fb - fa) if fb != fa else None
            if t is not None and a + 0.05 * (b - a) < t < b - 0.05 * (b - a):
                x = math.exp(t)
        if x is None:
            x = math.sqrt(lo * hi)
        if integer:
            x = min(max(int(round(x)), lo + 1), hi - 1)
        if not lo < x < hi:
            break
        moves_hi = judge(x) == passing_high
        if moves_hi:
            hi, kept = x, [kept[0] + 1, 0]
        else:
            lo, kept = x, [0, kept[1] + 1]
    return hi if passing_high else lo


# ---------------------------------------------------------------------------------------------
# the searches


def noise_multiplier(sampling_rate, steps, eps_g, delta_g, *, rtol: float = 1e-3) -> Calibration:
    """The least noise multiplier sigma (to relative ``rtol``) with which ``steps`` DP-SGD steps
    at Poisson sampling rate ``sampling_rate`` are (eps_g, delta_g)-DP, certified: the returned
    sigma's eps_g bracket (``Calibration.epsilon``) has its upper end within eps_g, and
    sigma / (1 + rtol) was certified over budget (or undecidable at 1e-7 relative)."""
    q = _rate("sampling_rate", sampling_rate)
    k = _steps(steps)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    rtol = _rtol(rtol)

    def bracket_at(sigma, tol):
        return optcomp.epsilon_bounds(Subsampled(Gaussian(sigma), q), k=k, delta_g=delta_g, tol=tol)

    judge = _Judge(bracket_at, eps_g)
    # start from the unsampled Gaussian's closed form scaled by sqrt(k) q (a CLT guess), then
    # bracket by factors of 2
    x = max(q * math.sqrt(k) * math.sqrt(2.0 * math.log(1.25 / delta_g)) / max(eps_g, 1e-300), 1e-3)
    x = min(x, 1e6)
    if judge(x):
        hi = x
        lo = x / 2.0
        while judge(lo):
            hi, lo = lo, lo / 2.0
            if lo < 1e-12:
                return Calibration(hi, judge.brackets[hi], judge.evaluations)
    else:
        lo, hi = x, 2.0 * x
        while not judge(hi):
            lo, hi = hi, 2.0 * hi
            if hi > 1e12:
                raise ValueError(f"no noise multiplier up to 1e12 meets eps_g={eps_g!r}, delta_g={delta_g!r} "
                                 f"at sampling_rate={q!r} for {k} steps")
    sigma = _boundary(judge, lo, hi, rtol, passing_high=True)
    return Calibration(sigma, judge.brackets[sigma], judge.evaluations)


def max_steps(noise_multiplier, sampling_rate, eps_g, delta_g, *, limit: int = 10**12) -> Calibration:
    """The most DP-SGD steps (up to ``limit``) within the budget (eps_g, delta_g), certified:
    the returned count's eps_g bracket has its upper end within eps_g and one more step was
    certified over budget (or undecidable at 1e-7 relative).  0 steps (``value`` 0, bracket
    (0, 0)) when even one step is over budget."""
    sigma = _positive("noise_multiplier", noise_multiplier)
    q = _rate("sampling_rate", sampling_rate)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    mech = Subsampled(Gaussian(sigma), q)
    judge = _Judge(lambda k, tol: optcomp.epsilon_bounds(mech, k=int(k), delta_g=delta_g, tol=tol), eps_g)
    if not judge(1):
        return Calibration(0, Bounds(0.0, 0.0), judge.evaluations)
    lo, hi = 1, 2
    while judge(hi):
        lo, hi = hi, 2 * hi
        if hi > limit:
            if judge(limit):
                return Calibration(limit, judge.brackets[limit], judge.evaluations)
            hi = limit
            break
    lo = _boundary(judge, lo, hi, 0.0, passing_high=False, integer=True)
    return Calibration(lo, judge.brackets[lo], judge.evaluations)


def max_sampling_rate(noise_multiplier, steps, eps_g, delta_g, *, rtol: float = 1e-3) -> Calibration:
    """The largest Poisson sampling rate q <= 1 (to relative ``rtol``) with which ``steps``
    DP-SGD steps at ``noise_multiplier`` are (eps_g, delta_g)-DP, certified as in
    :func:`noise_multiplier` (q (1 + rtol) certified over budget).  q = 1 when the unsampled
    Gaussian fits; ``ValueError`` when no q >= 1e-12 does."""
    sigma = _positive("noise_multiplier", noise_multiplier)
    k = _steps(steps)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    rtol = _rtol(rtol)
    judge = _Judge(lambda q, tol: optcomp.epsilon_bounds(Subsampled(Gaussian(sigma), q), k=k, delta_g=delta_g,
                                                         tol=tol), eps_g)
    if judge(1.0):
        return Calibration(1.0, judge.brackets[1.0], judge.evaluations)
    hi = 1.0
    lo = 0.5
    while not judge(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-12:
            raise ValueError(f"no sampling rate >= 1e-12 meets eps_g={eps_g!r}, delta_g={delta_g!r} with "
                             f"noise_multiplier={sigma!r} for {k} steps")
    q = _boundary(judge, lo, hi, rtol, passing_high=False)
    return Calibration(q, judge.brackets[q], judge.evaluations)
