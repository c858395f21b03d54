"""The cumulant generating function of the composed privacy loss (layer L1).

For a multiset of randomized responses (MV Def. 3.1) with P0-masses p_i = expit(eps_i) at
+eps_i and q_i = 1 - p_i at -eps_i, K(theta) = log E_P0[e^{theta L}] = sum_i c_i
log(p_i e^{theta eps_i} + q_i e^{-theta eps_i}), its slope K'(theta) = sum_i c_i eps_i
tanh(eps_i (theta + 1/2)), the Esscher tilt that centres the loss at a point and the
Chernoff guess of eps_g that aims the lattice passes.  Only choices are made here (any
tilt gives certified bounds); the certified tail bounds live with their producers."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_expit

from ._rounding import UNIT

__all__ = ["cgf_terms", "tilt_for", "chernoff_guess", "binomial_chernoff", "binomial_quantile"]


def _cumulant_slope(e: np.ndarray, theta: float, c: np.ndarray | None = None) -> float:
    """d/dtheta log E_P0[e^{theta L}] = sum_i c_i eps_i tanh(eps_i (theta + 1/2)) (c_i = 1
    when ``c`` is None)."""
    terms = e * np.tanh(e * (theta + 0.5))
    return float(np.sum(terms if c is None else c * terms))


def tilt_for(e: np.ndarray, x: float, c: np.ndarray | None = None) -> float:
    """The Esscher tilt theta >= 0 that centres the loss distribution at x (0 if x is
    below the P0 mean); ``c``: multiplicities of the values ``e``.  Any theta gives
    correct bounds; this one makes them tight."""
    if x <= _cumulant_slope(e, 0.0, c):
        return 0.0
    top = float(np.sum(e if c is None else c * e))
    if x >= top:
        x = top * (1.0 - 1e-9)
    # Newton from theta = 0: the slope is increasing and concave in theta >= -1/2, so the
    # iterates increase to the root from below (a handful of evaluations); bisection if not
    cw = e if c is None else c * e
    theta = 0.0
    for _ in range(100):
        a = e * (theta + 0.5)
        f = float(np.sum(cw * np.tanh(a))) - x
        with np.errstate(over="ignore"):
            fp = float(np.sum(cw * e / np.cosh(a) ** 2))
        if f >= 0.0:
            return theta
        if not fp > 0.0 or not math.isfinite(fp):
            break
        step = -f / fp
        theta += step
        if step <= 1e-12 * theta:
            return theta
    lo, hi = 0.0, 1.0
    while _cumulant_slope(e, hi, c) < x and hi < 1e8:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _cumulant_slope(e, mid, c) < x:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def cgf_terms(lp, lq, e, theta):
    """log(p e^{theta eps} + q e^{-theta eps}) = log E_P0[e^{theta L_i}] of one randomized
    response (lp = log p, lq = log q), elementwise with broadcasting (arrays of eps, of
    tilts, or both): the one formula of K that every caller sums with its counts."""
    return np.logaddexp(lp + theta * e, lq - theta * e)


def _log_mgf(e: np.ndarray, theta: float, c: np.ndarray | None = None) -> float:
    """K(theta) = log E_P0[e^{theta L}] = sum_i c_i log(p_i e^{theta eps_i} + q_i e^{-theta eps_i})."""
    terms = cgf_terms(log_expit(e), log_expit(-e), e, theta)
    return float(np.sum(terms if c is None else c * terms))


def chernoff_guess(e: np.ndarray, t: float, c: np.ndarray | None = None) -> float:
    """The x at which the Chernoff bound P0[L > x] <= exp(K(theta) - theta K'(theta)),
    x = K'(theta), equals t: an estimate (slightly above) of eps_g used only to aim the
    tilt of the first lattice pass (``c``: multiplicities of the values ``e``).

    The rate K - theta K' decreases in theta (its derivative is -theta K''): bracketed by
    doubling, then Newton steps kept inside the bracket (bisection otherwise) to 1e-10
    relative; log p_i, log q_i computed once."""
    top = float(np.sum(e if c is None else c * e))
    logt = math.log(max(min(t, 0.5), 1e-300))
    w = np.ones_like(e) if c is None else c
    lp, lq = log_expit(e), log_expit(-e)

    def rate(theta):
        a = e * (theta + 0.5)
        K = float(np.sum(w * cgf_terms(lp, lq, e, theta)))
        K1 = float(np.sum(w * e * np.tanh(a)))
        with np.errstate(over="ignore"):
            K2 = float(np.sum(w * e * e / np.cosh(a) ** 2))
        return K - theta * K1, K2

    lo, hi = 0.0, 1.0
    while rate(hi)[0] > logt and hi < 1e6:
        lo, hi = hi, 2.0 * hi
    theta = 0.5 * (lo + hi)
    for _ in range(100):
        if hi - lo <= 1e-10 * hi:
            break
        r, K2 = rate(theta)
        if r > logt:
            lo = theta
        else:
            hi = theta
        nxt = theta + (r - logt) / (theta * K2) if theta * K2 > 0.0 else math.nan
        if lo < nxt < hi:
            step, theta = abs(nxt - theta), nxt
            if step <= 1e-12 * hi:  # converged: theta is the root to ~1e-12
                hi = theta
                break
        else:
            theta = 0.5 * (lo + hi)
    return min(_cumulant_slope(e, hi, c), top)


def binomial_chernoff(c: int, m: int, lp: float, lq: float, upper: bool) -> float:
    """log of a bound on P[X >= m] (``upper``) or P[X <= m] for X ~ Bin(c, e^lp), q = e^lq:
    -c D(m/c || p) beyond the mean (0 on the near side, -inf beyond the support), with
    D(a || p) = a log(a/p) + (1 - a) log((1 - a)/q) evaluated in floats and widened by 16
    ulps of every term's size times c (plus 1e-12)."""
    if upper and m > c or not upper and m < 0:
        return -math.inf
    a = m / c
    p = math.exp(lp)
    if (upper and a <= p) or (not upper and a >= p):
        return 0.0
    t1 = a * (math.log(a) - lp) if a > 0.0 else 0.0
    t2 = (1.0 - a) * (math.log1p(-a) - lq) if a < 1.0 else 0.0
    mag = abs(a * math.log(a) if a > 0 else 0.0) + a * abs(lp) + abs((1 - a) * math.log1p(-a) if a < 1 else 0.0) + (1 - a) * abs(lq)
    return -c * (t1 + t2) + 16.0 * UNIT * c * (mag + 1.0) + 1e-12


def binomial_quantile(c: int, lp: float, lq: float, log_tail: float) -> int:
    """The least m in [0, c] with :func:`binomial_chernoff` (c, m, lp, lq, upper) <= log_tail,
    so P[X >= m] <= e^log_tail for X ~ Bin(c, e^lp) (``log_tail`` < 0; a log, so tails far
    below the float range are reachable).  The exponent is nonincreasing in m: bisection
    over the integers (~log2 c evaluations)."""
    lo, hi = 0, c + 1  # the bound holds at c + 1 (-inf); invariant: fails at lo - 1 .. , holds at hi
    while lo < hi:
        mid = (lo + hi) // 2
        if binomial_chernoff(c, mid, lp, lq, True) <= log_tail:
            hi = mid
        else:
            lo = mid + 1
    return min(lo, c)
