"""Certified normal-distribution arithmetic shared by the Gaussian and the discrete Gaussian
mechanisms: float brackets of Phi-differences (vectorised) and, in mpmath, sums of the
Gaussian kernel over the integers by Euler--Maclaurin with a proved remainder."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from .._pairs import mpf_err
from .._rounding import LIBM_ULPS, log_ndtr_error

__all__ = ["phi_interval", "phi_cells", "kernel_sum", "kernel_total"]

_U = 2.0**-53


def _side(za, ea, zb, eb, La=None, Lb=None):
    """za < zb <= 0 (arrays, argument errors ea, eb): (lo, hi) of Phi(zb) - Phi(za); La, Lb:
    log_ndtr(za), log_ndtr(zb) when the caller has them (:func:`phi_cells`).

    In log space: Phi(zb) - Phi(za) = e^{L(zb)} (1 - e^{L(za) - L(zb)}), L = log Phi (scipy's
    log_ndtr), with no cancellation beyond that of D = L(za) - L(zb) < 0.  Each L(x) is
    within eta(x) = SPECIAL_ABS + SPECIAL_ULPS u |L(x)| (``_rounding``'s assumption 4) + (|x| + 1) e(x) (the slope
    phi/Phi <= |x| + 1 of L for x <= 0 times the argument's error); then the difference is
    within a relative eta_b + (eta_a + eta_b)/|D| + (2 LIBM_ULPS + 4) u (1 + |L(zb)|) (exp's
    argument error, the slope e^D/(1 - e^D) <= 1/|D| of log(-expm1(D)), exp, expm1 and the
    product), and always below e^{L(zb) + eta_b} (|D| + eta_a + eta_b) (1 + 8u)."""
    from scipy.special import log_ndtr

    La = log_ndtr(za) if La is None else La
    Lb = log_ndtr(zb) if Lb is None else Lb
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        # (an infinite argument error, or both ends at -inf: NaN or inf below, a cell [0, 1])
        eta_a = log_ndtr_error(La) + (np.abs(za) + 1.0) * ea
        eta_b = log_ndtr_error(Lb) + (np.abs(zb) + 1.0) * eb
        D = La - Lb
        m = np.exp(Lb) * -np.expm1(D)
        rel = eta_b + (eta_a + eta_b) / np.abs(D) + (2 * LIBM_ULPS + 4) * _U * (1.0 + np.abs(Lb))
        cap = np.exp(Lb + eta_b) * (np.abs(D) + eta_a + eta_b) * (1.0 + 8.0 * _U)
    rel = np.where(np.isfinite(rel), rel, np.inf)
    ok = rel < 1.0
    r = np.where(ok, rel, 0.0)
    m_hi = np.minimum(np.where(ok, m * (1.0 + r), np.inf), np.where(np.isnan(cap), np.inf, cap))
    m_lo = np.where(ok, m * (1.0 - r), 0.0)
    # a difference whose bound underflowed is below 2^-1074 (1 + ...): 2^-1000 bounds it
    m_hi = np.where(m_hi < 2.0**-1000, 2.0**-1000, m_hi)
    return np.maximum(np.nan_to_num(m_lo, nan=0.0), 0.0), np.minimum(m_hi, 1.0)


def phi_interval(z0, e0, z1, e1):
    """Certified float brackets (lo, hi) of Phi(z1) - Phi(z0), z0 <= z1 (arrays; the true
    arguments lie within e0, e1 of the floats z0, z1; -inf/+inf allowed as exact ends).  A
    range on one side of 0 is :func:`_side` (mirrored for z0 >= 0); one across 0 is two."""
    z0, z1 = np.asarray(z0, float), np.asarray(z1, float)
    e0, e1 = np.broadcast_to(np.asarray(e0, float), z0.shape), np.broadcast_to(np.asarray(e1, float), z1.shape)
    lo, hi = np.zeros(z0.size), np.zeros(z0.size)
    neg = z1 <= 0.0
    pos = z0 >= 0.0
    mid = ~neg & ~pos
    if neg.any():
        lo[neg], hi[neg] = _side(z0[neg], e0[neg], z1[neg], e1[neg])
    if pos.any():  # mirrored: [z0, z1] -> [-z1, -z0]
        lo[pos], hi[pos] = _side(-z1[pos], e1[pos], -z0[pos], e0[pos])
    if mid.any():  # across 0: [z0, 0] + [0, z1] (0 exact)
        zero = np.zeros(int(mid.sum()))
        a_lo, a_hi = _side(z0[mid], e0[mid], zero, zero)
        b_lo, b_hi = _side(-z1[mid], e1[mid], zero, zero)
        lo[mid] = (a_lo + b_lo) * (1.0 - 2.0 * _U)
        hi[mid] = np.minimum((a_hi + b_hi) * (1.0 + 2.0 * _U), 1.0)
    empty = z1 <= z0
    return np.where(empty, 0.0, lo), np.where(empty, 0.0, hi)


def phi_cells(z, e):
    """:func:`phi_interval` of the consecutive cells [z_i, z_(i+1)] of ascending edges z (argument
    errors e): the same brackets, bit for bit, with log Phi(-|z|) evaluated once an edge instead
    of twice a cell (each edge of a cell on one side of 0 enters :func:`_side` as log_ndtr(-|z|):
    z itself left of 0, mirrored right of it)."""
    from scipy.special import log_ndtr

    z, e = np.asarray(z, float), np.asarray(e, float)
    L = log_ndtr(-np.abs(z))
    z0, z1, e0, e1, L0, L1 = z[:-1], z[1:], e[:-1], e[1:], L[:-1], L[1:]
    lo, hi = np.zeros(z0.size), np.zeros(z0.size)
    neg = z1 <= 0.0
    pos = z0 >= 0.0
    mid = ~neg & ~pos
    if neg.any():
        lo[neg], hi[neg] = _side(z0[neg], e0[neg], z1[neg], e1[neg], L0[neg], L1[neg])
    if pos.any():  # mirrored: [z0, z1] -> [-z1, -z0]
        lo[pos], hi[pos] = _side(-z1[pos], e1[pos], -z0[pos], e0[pos], L1[pos], L0[pos])
    if mid.any():  # across 0: [z0, 0] + [0, z1] (0 exact)
        zero = np.zeros(int(mid.sum()))
        L_zero = np.full(zero.size, log_ndtr(0.0))
        a_lo, a_hi = _side(z0[mid], e0[mid], zero, zero, L0[mid], L_zero)
        b_lo, b_hi = _side(-z1[mid], e1[mid], zero, zero, L1[mid], L_zero)
        lo[mid] = (a_lo + b_lo) * (1.0 - 2.0 * _U)
        hi[mid] = np.minimum((a_hi + b_hi) * (1.0 + 2.0 * _U), 1.0)
    empty = z1 <= z0
    return np.where(empty, 0.0, lo), np.where(empty, 0.0, hi)


# ---------------------------------------------------------------------------------------------
# sums of f(z) = e^{-z^2/(2 sigma^2)} over the integers (mpmath)

_EM_TERMS = (4, 8, 16, 32)  # Euler--Maclaurin orders p tried, smallest first
_FAR = 2**20  # beyond this many sigmas a kernel sum is bounded by its first term


def kernel_sum(k: int, sigma):
    """(value, err) of S(k) = sum_{z <= k} e^{-z^2/(2 sigma^2)} (k an integer, sigma an mpf)
    at the working precision, by Euler--Maclaurin (Apostol, *An Elementary View of Euler's
    Summation Formula*, Amer. Math. Monthly 106 (1999), Thm 1 with the remainder of Sec. 4):

        S(k) = int_{-inf}^k f + f(k)/2 + sum_{j=1}^{p} B_2j/(2j)! f^(2j-1)(k) + R_p,
        |R_p| <= 2 zeta(2p)/(2 pi)^{2p} int_{-inf}^k |f^(2p)|,

    with f^(n)(t) = (-1/sigma)^n He_n(t/sigma) f(t) (probabilists' Hermite polynomials, by
    their three-term recurrence) and int_{-inf}^k f = sigma sqrt(2 pi) Phi(k/sigma).  The
    remainder's integral: when k/sigma lies below every zero of He_2p (all within
    sqrt(8p + 2)), f^(2p) keeps its sign on (-inf, k] and the integral is |f^(2p-1)(k)|
    exactly; otherwise it is at most int_R |f^(2p)| <= sigma^{1-2p} sqrt(2 pi) sqrt((2p)!)
    (Cauchy--Schwarz against the standard normal density, E He_n^2 = n!).  2 zeta(2p) <= 4.
    The order p grows through 4, 8, 16, 32 until R_p is below 2^-prec of the value.  For
    large sigma (the discrete Gaussian's cell regime, sigma > 2^15) p = 4 gives ~2^-120
    relative."""
    sig = mpmath.mpf(sigma)
    u = mpmath.mpf(k) / sig
    if abs(u) > _FAR:  # (mpmath's erfc refuses such arguments) the sum is ~0 or ~Z:
        # sum_{z >= |k|} f <= f(k)(1 + sigma^2/|k|) <= e^{-2^39} (1 + sigma) < 2^-10^6 sigma
        tail = mpmath.ldexp(1, -10**6) * (1 + sig)
        if u < 0:
            return mpmath.mpf(0), tail
        total, t_err = kernel_total(sigma)
        return total, t_err + tail
    f = mpmath.exp(-u * u / 2)
    integral = sig * mpmath.sqrt(2 * mpmath.pi) * mpmath.ncdf(u)
    best = None
    for p in _EM_TERMS:
        n_max = 2 * p
        he = [mpmath.mpf(1), u]
        for n in range(1, n_max):
            he.append(u * he[n] - n * he[n - 1])
        deriv = [(-1) ** n * he[n] * f / sig**n for n in range(n_max + 1)]  # f^(n)(k)
        corr = mpmath.mpf(0)
        mags = [integral, f / 2]
        for j in range(1, p + 1):
            term = mpmath.bernoulli(2 * j) / mpmath.factorial(2 * j) * deriv[2 * j - 1]
            corr += term
            mags.append(term)
        value = integral + f / 2 + corr
        if u < -mpmath.sqrt(8 * p + 2):
            tail_int = abs(deriv[2 * p - 1])
        else:
            tail_int = sig ** (1 - 2 * p) * mpmath.sqrt(2 * mpmath.pi) * mpmath.sqrt(mpmath.factorial(2 * p))
        rem = 4 * tail_int / (2 * mpmath.pi) ** (2 * p)
        err = rem + mpf_err(*mags, bits=12) + mpf_err(value, bits=4)
        if best is None or err < best[1]:
            best = (value, err)
        if err <= abs(value) * mpmath.ldexp(1, -mpmath.mp.prec + 16):
            break
    return best


def kernel_total(sigma):
    """(value, err) of Z = sum_{z in Z} e^{-z^2/(2 sigma^2)} = sigma sqrt(2 pi) theta,
    theta = 1 + 2 sum_{j >= 1} e^{-2 pi^2 sigma^2 j^2} (Poisson summation; Jacobi's theta
    function), for sigma >= 1: the series is within 3 e^{-2 pi^2 sigma^2} of 1."""
    sig = mpmath.mpf(sigma)
    base = sig * mpmath.sqrt(2 * mpmath.pi)
    arg = 2 * mpmath.pi**2 * sig * sig
    # e^{-a} <= 2^{-a} (e > 2): for a >= 2^20 the bound 2^-(2^20) is far below any working
    # precision's ulp, and mpmath's exp of a huge argument costs seconds
    eta = 3 * (mpmath.exp(-arg) if arg < 2**20 else mpmath.ldexp(1, -2**20))
    return base, base * eta + mpf_err(base, bits=4)


def log_kernel_tail(u: float, sigma: float) -> float:
    """A float upper bound of log sum_{z >= k} e^{-z^2/(2 sigma^2)} for an integer k >= 0
    given as u = k/sigma rounded down (f decreasing on [k, inf): the sum is <= f(k) +
    int_k^inf f = e^{-u^2/2} + sigma sqrt(2 pi) Phi(-u); u <= k/sigma only raises both)."""
    from scipy.special import log_ndtr

    a = -(u * u) / 2.0
    b = math.log(sigma) + 0.5 * math.log(2.0 * math.pi) + float(log_ndtr(-u))
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(math.exp(lo - hi)) + 1e-9 * (1.0 + abs(hi))
