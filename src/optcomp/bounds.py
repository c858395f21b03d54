"""Closed-form composition theorems: basic, DRV advanced, the KOV bound, advanced-from-pure.

Each theorem certifies that the composition of mechanisms M_i, M_i being
(eps_i, delta_i)-DP, is (eps_g, delta_g)-DP for a family of (eps_g, delta_g).  For every
theorem there are two functions, both taking a validated :class:`~optcomp._inputs.Mechanisms`:

* ``*_epsilon(m, delta_g)`` -- the least eps_g the theorem certifies at ``delta_g``
  (``math.inf`` when it certifies none);
* ``*_delta(m, eps_g)`` -- the least delta_g it certifies at ``eps_g`` (1.0 when none).

Rounding.  These values are *upper bounds on privacy loss*, so they are rounded to the
safe side: every returned eps_g (delta_g) is >= the value of the theorem's formula in exact
real arithmetic on the given floats.  The code does upper/lower-bound ("one-sided
interval") arithmetic: sums of floats are rounded in the required direction exactly
(``math.fsum`` plus an exact residual, or :class:`fractions.Fraction` for k * x), each other
correctly rounded operation is pushed outward by one ulp, each libm call (log, exp,
expm1, log1p, tanh; glibc documents <= 2 ulp) by ``_LIBM`` ulps, and each sum of
element-wise NumPy transcendental terms by ``_ARR`` ulps (the guarantee assumes libm
and NumPy within those error bounds; measured: <= 1.2 ulp).  The price is a relative
excess of order 1e-15 over the exact value (delta_g = exp(-a) inherits about a * 1e-15).
KOV's delta~ comes from ``loss.residual_target``, rounded down, so the KOV eps_g is
>= the formula at the exact delta~ too.  Homogeneous inputs (``m.homogeneous``) take
O(1) closed forms (k * eps, sqrt(k) * eps, exact k * x via Fraction); the only O(k)
work left is NumPy's check that the mechanisms are identical.  Nothing here returns
NaN or emits a RuntimeWarning: overflow (e.g. eps * (e^eps - 1) for eps > 709.78) is
turned into ``math.inf`` for eps_g and 1.0 for delta_g.
"""

from __future__ import annotations

import math

import numpy as np

from ._inputs import Mechanisms
from ._rounding import dot_dir
from .loss import residual_target

__all__ = [
    "basic_epsilon",
    "basic_delta",
    "drv_epsilon",
    "drv_delta",
    "kov_epsilon",
    "kov_delta",
    "advanced_pure_epsilon",
    "advanced_pure_delta",
]

_INF = math.inf
# Extra ulps (of the computed value, on top of one nextafter step) allowed for ...
_LIBM = 3  # ... one libm call (glibc documents <= 2 ulp for log, exp, expm1, log1p, tanh)
_ARR = 8  # ... a sum of element-wise NumPy terms eps_i * f(eps_i) (f within ~1.2 ulp)
_LND = 8  # ... Mechanisms.log_no_delta (log1p per mechanism, then k * or fsum)
_E_LO = math.e  # the float math.e lies below Euler's number ...
_E_HI = math.nextafter(math.e, _INF)  # ... and its successor above it


# ----------------------------------------------------------------------------------------
# one-sided rounding helpers


def _up(x: float, n: int = 0) -> float:
    """A float >= every real within n ulp(x) of x, and above x itself (+-inf unchanged).

    n = 0 (one nextafter step) covers the rounding of one correctly rounded operation
    (+, -, *, /, sqrt), whose exact result lies within half a spacing of x.
    """
    if math.isinf(x):
        return x
    return math.nextafter(x + n * math.ulp(x), _INF)


def _dn(x: float, n: int = 0) -> float:
    """A float <= every real within n ulp(x) of x, and below x itself (+-inf unchanged)."""
    if math.isinf(x):
        return x
    return math.nextafter(x - n * math.ulp(x), -_INF)


def _array_sum_up(terms: np.ndarray, k: int) -> float:
    """Upper bound of sum_i exact_i, terms[i] >= 0 the NumPy value of exact_i >= 0.

    Each term is trusted to a relative error of a few ulps plus an absolute error of
    one subnormal unit (underflow); both are covered by ``_ARR`` ulps and k * 2**-1074.
    """
    if np.isinf(terms).any():
        return _INF
    try:
        s = math.fsum(terms.tolist())
    except OverflowError:
        return _INF
    return _up(_up(s, _ARR) + k * 2.0**-1074)


# ----------------------------------------------------------------------------------------
# the sums every theorem is made of, over the multiset (count-weighted, O(#groups))


def _eps_sum(m: Mechanisms, up: bool = True) -> float:
    """sum_i eps_i, rounded up (or down) exactly."""
    return dot_dir(m.count, m.eps, up)


def _delta_sum_up(m: Mechanisms) -> float:
    """sum_i delta_i, rounded up exactly."""
    return dot_dir(m.count, m.delta, True)


def _slack_down(m: Mechanisms, delta_g: float) -> float:
    """delta_g - sum_i delta_i, rounded down exactly (its sign is therefore exact)."""
    return dot_dir(m.count, -m.delta, False, extra=delta_g)


def _scaled_squares(m: Mechanisms) -> tuple[float, float]:
    """(s, ss) with s = max eps_i and ss >= sum_i (eps_i / s)^2 >= 1 (no under/overflow
    in the squares; ss itself may reach k = 10^12)."""
    s = float(m.eps.max())
    if s == 0.0:
        return 0.0, 0.0
    r = m.eps / s  # in [0, 1]; each within 1/2 ulp
    # each count * r_i^2 within 2 ulp, fsum 1/2 ulp, underflowed terms < k 2^-1075 << ulp(ss >= 1):
    # relative error < 2^-51 (+ k 2^-1075), covered by 4 ulp(ss) and the nextafter step
    return s, _up(math.fsum((m.count * (r * r)).tolist()), 4)


def _norm_hi(m: Mechanisms) -> float:
    """Upper bound of sqrt(sum_i eps_i^2); exactly 0.0 iff every eps_i is 0."""
    if m.groups == 1:  # sqrt(k) eps: three roundings
        e = float(m.eps[0])
        return 0.0 if e == 0.0 else _up(_up(math.sqrt(m.k)) * e)
    s, ss = _scaled_squares(m)
    return 0.0 if s == 0.0 else _up(s * _up(math.sqrt(ss)))


def _sq_sum_hi(m: Mechanisms) -> float:
    """Upper bound of sum_i eps_i^2 (0.0 iff every eps_i is 0; inf if it overflows)."""
    if m.groups == 1:
        e = float(m.eps[0])
        with np.errstate(over="ignore"):
            return 0.0 if e == 0.0 else _up(m.k * _up(e * e))
    s, ss = _scaled_squares(m)
    if s == 0.0:
        return 0.0
    with np.errstate(over="ignore"):
        return _up(_up(s * s) * ss)


def _weighted_sum_up(terms: np.ndarray, m: Mechanisms) -> float:
    """Upper bound of sum_j count_j exact_j, terms[j] >= 0 the NumPy value of exact_j."""
    if m.groups == 1:  # k * term: one rounding on top of the term's own
        return _up(m.k * _up(float(terms[0]), _ARR // 2)) if math.isfinite(terms[0]) else _INF
    with np.errstate(over="ignore"):
        return _array_sum_up(m.count * terms, m.groups)


def _drv_mean_hi(m: Mechanisms) -> float:
    """Upper bound of sum_i eps_i (e^eps_i - 1) (inf when it overflows)."""
    if not np.any(m.eps):
        return 0.0
    with np.errstate(over="ignore"):
        terms = m.eps * np.expm1(m.eps)
    return _weighted_sum_up(terms, m)


def _kov_mean_hi(m: Mechanisms) -> float:
    """Upper bound of sum_i eps_i (e^eps_i - 1)/(e^eps_i + 1) = sum_i eps_i tanh(eps_i / 2)."""
    if not np.any(m.eps):
        return 0.0
    return _weighted_sum_up(m.eps * np.tanh(m.eps * 0.5), m)


def _all_eps_zero(m: Mechanisms) -> bool:
    return not np.any(m.eps)


def _sqrt2l_times(log_term: float, norm: float) -> float:
    """Upper bound of sqrt(2 L) * norm from upper bounds L >= 0 and norm > 0."""
    return _up(_up(math.sqrt(2.0 * log_term)) * norm)


def _half_square_lo(r: float, norm: float) -> float:
    """Lower bound of r^2 / (2 norm^2) from a lower bound r > 0 and an upper bound norm > 0."""
    z = _dn(r / norm)  # may be +inf (then the bound is +inf, correctly)
    return _dn(_dn(z * z) * 0.5)


def _gauss_tail_hi(r: float, norm: float) -> float:
    """Upper bound of exp(-r^2 / (2 norm^2)), r > 0 a lower and norm > 0 an upper bound."""
    return _up(math.exp(-_half_square_lo(r, norm)), _LIBM)


def _log_inv_hi(x: float) -> float:
    """Upper bound of log(1/x) for 0 < x <= x_exact < 1 (x a lower bound of the argument)."""
    return _up(-math.log(x), _LIBM)


# ----------------------------------------------------------------------------------------
# basic composition


def basic_epsilon(m: Mechanisms, delta_g: float) -> float:
    """Basic composition (MV Thm 1.2; heterogeneous form as in Steinke, Composition Basics).

    The composition of (eps_i, delta_i)-DP mechanisms is (sum_i eps_i, sum_i delta_i)-DP,
    hence (eps_g, delta_g)-DP with eps_g = sum_i eps_i whenever delta_g >= sum_i delta_i.
    Returns sum_i eps_i rounded up, or ``math.inf`` if delta_g < sum_i delta_i (both sums
    and the comparison are exact).
    """
    if _slack_down(m, delta_g) < 0.0:
        return _INF
    return _eps_sum(m)


def basic_delta(m: Mechanisms, eps_g: float) -> float:
    """Basic composition (MV Thm 1.2, heterogeneous): (sum eps_i, sum delta_i)-DP.

    Returns min(1, sum_i delta_i) rounded up if eps_g >= sum_i eps_i (exact comparison),
    else 1.0 (the theorem certifies nothing at a smaller eps_g).
    """
    if _eps_sum(m, up=True) > eps_g:
        return 1.0
    return min(1.0, _delta_sum_up(m))


# ----------------------------------------------------------------------------------------
# DRV advanced composition


def drv_epsilon(m: Mechanisms, delta_g: float) -> float:
    """Advanced composition of Dwork, Rothblum and Vadhan (MV Thm 1.3 / KOV Thm 3.2).

    Homogeneous (MV Thm 1.3): for every delta' > 0 the k-fold composition of
    (eps, delta)-DP mechanisms is (eps_g, k delta + delta')-DP with
    eps_g = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1).
    Heterogeneous, the natural generalisation (the DRV proof, Azuma's inequality on the
    privacy-loss martingale with increments in [-eps_i, eps_i] and means
    <= eps_i (e^eps_i - 1), goes through verbatim): (eps_g, sum delta_i + delta')-DP with
    eps_g = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1).

    Here delta' = delta_g - sum delta_i; returns ``math.inf`` when delta' <= 0 (the
    theorem needs delta' > 0).  If every eps_i is 0 the formula is 0 for every
    delta' > 0, and (0, sum delta_i)-DP then holds as well (basic composition), so the
    result is 0.0 whenever delta_g >= sum delta_i.  Rounded up.
    """
    return _drv_epsilon(m, delta_g)


def _drv_epsilon(m: Mechanisms, delta_g: float) -> float:
    slack = _slack_down(m, delta_g)  # <= delta', sign exact
    if _all_eps_zero(m):
        return 0.0 if slack >= 0.0 else _INF
    if slack <= 0.0:
        return _INF
    spread = _sqrt2l_times(_log_inv_hi(slack), _norm_hi(m))
    return _up(spread + _drv_mean_hi(m))


def drv_delta(m: Mechanisms, eps_g: float) -> float:
    """Least delta_g certified at eps_g by DRV advanced composition (MV Thm 1.3, generalised).

    The least delta' with sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1) <= eps_g
    is delta' = exp(-r^2 / (2 sum eps_i^2)), r = eps_g - sum eps_i (e^eps_i - 1) > 0; the
    result is min(1, sum delta_i + delta'), rounded up.  r <= 0 gives 1.0.  If every
    eps_i is 0, every delta' > 0 works and the result is min(1, sum delta_i) (the limit,
    also basic composition).
    """
    return _drv_delta(m, eps_g)


def _drv_delta(m: Mechanisms, eps_g: float) -> float:
    total = _delta_sum_up(m)
    if _all_eps_zero(m):
        return min(1.0, total)
    r = _dn(eps_g - _drv_mean_hi(m))
    if not r > 0.0:
        return 1.0
    return min(1.0, _up(total + _gauss_tail_hi(r, _norm_hi(m))))


# ----------------------------------------------------------------------------------------
# advanced composition starting from pure DP (Steinke)


def advanced_pure_epsilon(m: Mechanisms, delta_g: float) -> float:
    """Advanced composition starting from pure DP (Steinke, Composition Basics, with footnote 1).

    If M_j is (eps_j, delta_j)-DP, the composition is (eps, delta' + sum_j delta_j)-DP for
    every delta' > 0, with eps = 1/2 sum_j eps_j^2 + sqrt(2 log(1/delta') sum_j eps_j^2).
    Here delta' = delta_g - sum delta_j; ``math.inf`` when delta' <= 0, except that all
    eps_j = 0 gives 0.0 whenever delta_g >= sum delta_j (as for :func:`drv_epsilon`).
    Rounded up.
    """
    return _advanced_pure_epsilon(m, delta_g)


def _advanced_pure_epsilon(m: Mechanisms, delta_g: float) -> float:
    slack = _slack_down(m, delta_g)
    if _all_eps_zero(m):
        return 0.0 if slack >= 0.0 else _INF
    if slack <= 0.0:
        return _INF
    spread = _sqrt2l_times(_log_inv_hi(slack), _norm_hi(m))
    return _up(spread + _sq_sum_hi(m) * 0.5)


def advanced_pure_delta(m: Mechanisms, eps_g: float) -> float:
    """Least delta_g certified at eps_g by advanced composition from pure DP (Steinke).

    delta' = exp(-r^2 / (2 sum eps_j^2)) with r = eps_g - 1/2 sum eps_j^2 > 0, result
    min(1, sum delta_j + delta') rounded up; r <= 0 gives 1.0; all eps_j = 0 gives
    min(1, sum delta_j).
    """
    return _advanced_pure_delta(m, eps_g)


def _advanced_pure_delta(m: Mechanisms, eps_g: float) -> float:
    total = _delta_sum_up(m)
    if _all_eps_zero(m):
        return min(1.0, total)
    r = _dn(eps_g - _up(_sq_sum_hi(m) * 0.5))
    if not r > 0.0:
        return 1.0
    return min(1.0, _up(total + _gauss_tail_hi(r, _norm_hi(m))))


# ----------------------------------------------------------------------------------------
# the KOV closed-form bound


def kov_epsilon(m: Mechanisms, delta_g: float) -> float:
    """The KOV bound: KOV Thm 3.4 (= MV Thm 6.1, homogeneous) and KOV Thm 3.5 (heterogeneous).

    For delta~ in (0, 1] the composition is (eps~, 1 - (1 - delta~) prod_l (1 - delta_l))-DP::

        eps~ = min{ sum eps_l,
                    sum eps_l tanh(eps_l/2) + sqrt(2 sum eps_l^2 log(e + sqrt(sum eps_l^2) / delta~)),
                    sum eps_l tanh(eps_l/2) + sqrt(2 sum eps_l^2 log(1 / delta~)) },

    using (e^x - 1)/(e^x + 1) = tanh(x/2); with k equal mechanisms this is Thm 3.4.
    Thm 3.5 is stated for eps_l > 0; an eps_l = 0 mechanism is (eta, delta_l)-DP for all
    eta > 0 and the bound is continuous in eps_l, so it holds in the limit.

    delta~ is t = 1 - (1 - delta_g) / prod_l (1 - delta_l) (``loss.residual_target``,
    rounded down).  t < 0: no delta~ >= 0 reaches delta_g, ``math.inf``.  t = 0: only
    the first term is valid (it is basic composition, delta~ = 0), sum eps_l.  Rounded up.
    """
    return _kov_epsilon(m, delta_g)


def _kov_epsilon(m: Mechanisms, delta_g: float) -> float:
    t = residual_target(m, delta_g)
    if not t >= 0.0:
        return _INF
    total = _eps_sum(m)
    if t == 0.0 or total == 0.0:
        return total
    t = min(t, 1.0)
    mean = _kov_mean_hi(m)
    norm = _norm_hi(m)
    # second term: log(e + norm / t) >= 1; when norm / t overflows (t subnormal), use
    # log(e + q) <= log(q) + e/q with log q = log(norm) - log(t), each bounded outward
    q = norm / t
    if math.isinf(q):
        log_q = _up(_up(math.log(norm), _LIBM) - _dn(math.log(t), _LIBM))
        log2 = _up(log_q + _up(_E_HI * _up(t / norm)))
    else:
        log2 = _up(math.log(_up(_E_HI + _up(q))), _LIBM)
    second = _up(mean + _sqrt2l_times(log2, norm))
    # third term: log(1/t) = 0 exactly at t = 1
    third = _up(mean + (0.0 if t == 1.0 else _sqrt2l_times(_log_inv_hi(t), norm)))
    return min(total, second, third)


def kov_delta(m: Mechanisms, eps_g: float) -> float:
    """Least delta_g certified at eps_g by the KOV bound (KOV Thms 3.4/3.5, MV Thm 6.1).

    The least delta~ with eps~(delta~) <= eps_g is the least over the three terms:
    term 1 gives delta~ = 0 if eps_g >= sum eps_l (else nothing); with
    r = eps_g - sum eps_l tanh(eps_l/2) and a = r^2 / (2 sum eps_l^2), term 3 gives
    delta~ = exp(-a) (r >= 0) and term 2 gives
    delta~ = sqrt(sum eps_l^2) / (e^a - e) = sqrt(sum eps_l^2) / (e expm1(a - 1)) (a > 1).
    Then delta_g = 1 - (1 - delta~) prod_l (1 - delta_l)
    = -expm1(log1p(-delta~) + sum_l log1p(-delta_l)), rounded up, at most 1.0; 1.0 if no
    delta~ <= 1 works.
    """
    return _kov_delta(m, eps_g)


def _kov_delta(m: Mechanisms, eps_g: float) -> float:
    if _eps_sum(m, up=True) <= eps_g:
        tilde = 0.0
    else:
        mean = _kov_mean_hi(m)
        norm = _norm_hi(m)  # > 0 here: sum eps_l > eps_g >= 0
        r = _dn(eps_g - mean)
        if not r > 0.0:  # r = 0 needs delta~ = 1, i.e. delta_g = 1 as well
            return 1.0
        a = _half_square_lo(r, norm)
        tilde = min(1.0, _up(math.exp(-a), _LIBM))  # third term
        y = _dn(a - 1.0)
        if y > 0.0:  # second term
            if y < 700.0:
                den = _dn(_E_LO * _dn(math.expm1(y), _LIBM))
                second = _up(norm / den)
            else:  # e^a - e = e^a (1 - e^(1-a)), the bracket within 1e-304 of 1
                second = _up(_up(norm * _up(math.exp(-a), _LIBM)), 1)
            tilde = min(tilde, second)
    if tilde >= 1.0:
        return 1.0
    log_nd = m.log_no_delta  # <= 0, relative error a few ulps
    if tilde == 0.0 and log_nd == 0.0:
        return 0.0
    log_nd_lo = _dn(log_nd, _LND) if log_nd != 0.0 else 0.0
    log_t_lo = _dn(math.log1p(-tilde), _LIBM) if tilde != 0.0 else 0.0
    s = _dn(log_t_lo + log_nd_lo)
    return min(1.0, _up(-math.expm1(s), _LIBM))
