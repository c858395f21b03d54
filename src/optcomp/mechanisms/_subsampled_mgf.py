r"""A certified upper bound of the moment generating function of one Poisson-subsampled
Gaussian step's privacy loss (add/remove; the dominating pairs of Zhu, Dong and Wang,
*Optimal Accounting of Differential Privacy via Characteristic Function*, AISTATS 2022,
Thm 11): with (P, Q) = (N(mu, 1), N(0, 1)), r(z) = dP/dQ(z) = e^{mu z - mu^2/2} and
P' = (1 - q) Q + q P,

* forward (remove, (P', Q)):  E_{P'}[e^{theta L}] = E_Q[(1 - q + q r)^{theta + 1}],
* reverse (add, (Q, P')):     E_Q[e^{theta L}]    = E_Q[(1 - q + q r)^{-theta}],

i.e. M(a) = E_{Z ~ N(0,1)}[(1 - q + q r(Z))^a] at a = theta + 1 >= 1, resp. a = -theta <= 0.

**Relative to M - 1.**  With u(z) = q (r(z) - 1) = q expm1(t), t = mu z - mu^2/2, and
R(u) = (1 + u)^a - 1 - a u, E_Q[u] = 0 exactly, so M = 1 + E_Q[R(u(Z))] and log M =
log1p(E_Q[R]): an upper bound of E_Q[R] accurate relative to itself gives log M accurate
relative to M - 1 (~1e-13 at q = 1e-6).  R >= 0 is convex (a >= 1 or a <= 0) with R(0) =
R'(0) = 0.

**Shape facts** (a >= 1 or a <= 0; each by one derivative):

1. K(u) = R(u)/u^2 = a (a - 1) int_0^1 (1 - v)(1 + u v)^{a-2} dv (Taylor, integral
   remainder): nondecreasing in u for a >= 2, nonincreasing for a <= 2; and
   K(u) <= a (a - 1)/2 max(1, (1 + u)^{a - 2}) (a "Taylor" bound, used as a fallback).
2. J(u) = R(u)/u = ((1 + u)^a - 1)/u - a, a chord slope of the convex (1 + u)^a from 0:
   nondecreasing in u.
3. rho(u) = R(u)/(1 + u)^a = 1 - (1 + a u)(1 + u)^{-a}: d/du (1 + a u)(1 + u)^{-a} =
   a (1 - a) u (1 + u)^{-a-1}, so rho decreases in u < 0 and increases in u > 0; rho <= 1
   where 1 + a u > 0 (u > 0 for a >= 1, u < 0 for a <= 0).
4. log|u(z)| = log q + log|e^t - 1| is concave in z on each side of z0 = mu/2 (the
   derivative mu / (1 - e^{-t}) decreases), so a tangent bounds it above.
5. G(z) = a log(1 - q + q e^t) = a g(t): g is a log-sum-exp in t (convex, 0 <= g' <= 1),
   so G is convex for a >= 1 (a chord bounds it above) and concave for a <= 0 (a tangent
   does); G'(z) = a mu h, h = q e^t/(1 - q + q e^t) in [0, 1], h' = h(1 - h) <= 1/4.
6. G(z) - a mu z = a log((1 - q) e^{-mu z} + q e^{-mu^2/2}) is nonincreasing for a >= 1.

**Cells.**  z0 is an edge between an inner cell [z0 - eta, z0 + eta] and cells on either
side (geometric near z0, then uniform) up to zL < z0 < zR.  On a cell [c, d] on one side,
R(u(z)) = F(z) e^{l(z)} with F monotone (K, |J| or rho: its largest value is at a known end,
evaluated at a certified bracket end of u there) and l(z) <= A + S (z - z_a) a line (tangent
of a concave part at the midpoint, charged its slope's error times the width, or chord of a
convex part), so E[R; c <= Z <= d] <= F_max e^{A - S z_a + S^2/2} P(c - S <= Z <= d - S)
(E[e^{S Z}; Z in I] = e^{S^2/2} P(Z - S in I)); the candidates are
u^2 K (fact 1 with 4, twice the tangent), e^G rho (3 with 5) and |u| |J| (2 with 4, a <= 0
right of z0); each is a certified bound and the least is taken.  The inner cell:
max(R at its ends) times its mass (R decreases to z0 and increases after).  These
bounds are tight to second order in the width except where the monotone factor moves
(|a u| ~ 1), where the cells are ~0.15/mu wide.
**Tails.**  Z > zR: for a >= 1, R <= (1 + u)^a = e^G and fact 6 give e^{G(zR) - S zR +
S^2/2} Qbar(zR - S), S = a mu rounded up; for a <= 0, R <= |a| u <= |a| q r and
E[r; Z > c] = Qbar(c - mu).  Z < zL: for a >= 1, R <= a |u| <= a q (times Phi(zL)); for
a <= 0, R <= (1 + u)^a = e^G and G(z) <= G(zL) + S (z - zL) for z <= zL with S <= G'(zL)
(S = a mu times an upper bound of h(zL)).

**Floating point** (``_rounding``'s assumptions 1, 2 and 4): t at a float z is within
e_t = 2u (|mu z| + mu^2/2 + |t|) of the computed one; u is bracketed as q expm1(t) +-
(q e^{t + e_t} e_t + (2 LIBM_ULPS + 2) u |u|) and monotone factors are evaluated at the
bracket end on their safe side (a float, exact input); R at a float u: for |a u| <= 1,
|u| <= 1/2, R = E2(a u) + e^{a u} expm1(a D(u)), E2(x) = e^x - 1 - x by its Taylor
polynomial to x^25 (remainder < 1e-24 relative, Horner's rounding charged 256 u relative)
and D(u) = u - log1p(u) by its series for |u| <= 0.05 (16
terms) or directly (relative error <= 37 u/|u| < 1024 u); elsewhere R = e^L - (1 + a u),
L = a log1p(u), as a sum of non-negative terms when 1 + a u < 0 and as
e^L (1 - e^{v}), v = log(1 + a u) - L, evaluated at v lowered by its error bound (1 - e^v
decreases in v) otherwise; the least with the Taylor bound of fact 1.  Every other
expression (a handful of sums, products, exp and log on terms of magnitude T_i) is charged
16 LIBM_ULPS u sum |T_i| in the log domain (each operation errs by at most 2 LIBM_ULPS u of
its result, itself at most the sum of the magnitudes involved).  Gaussian masses: the
interval widened by 4u of its ends' magnitudes (the shifted arguments' rounding) and
log P = log Phi(b) + log(-expm1(log Phi(a) - log Phi(b))) (mirrored for a >= 0, split at
0 otherwise) with scipy's log_ndtr within e(L) = SPECIAL_ABS + SPECIAL_ULPS u |L| (assumption
4): log-error at most e(Lb) + (e(La) + e(Lb))/(|D| - ...) plus the roundings.  The cells'
log-bounds are summed by log-sum-exp (the exponentials' sum: 2 LIBM_ULPS u + 2 n u), and
log M = log1p(E) rounded up.  mu is monotone: M is nondecreasing in mu (the pair at a
smaller mu is a post-processing of the one at a larger mu, and x^a is convex), so the
caller passes mu rounded up.

Anything non-finite on the way (overflow, a cancellation the charges cannot resolve) makes
that cell's candidate +inf (the least candidate or the final sum is then +inf): never a
number below the truth.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._rounding import LIBM_ULPS, log_ndtr_error

__all__ = ["log_mgf_bound"]

_U = 2.0**-53
_L = LIBM_ULPS
_CH = 16 * _L * _U  # per-expression charge, relative to the sum of the magnitudes involved
_ETA = 1e-3  # half-width of the inner cell around z0
_RATIO = 1.25  # geometric growth of the cells next to the inner one
_WIDTH = 0.15  # uniform cell width (divided by mu for mu > 1)
_MAX_CELLS = 2500  # beyond: wider uniform cells (still certified, looser)
_REACH = 40.0  # the grid extends this far beyond the integrand's peaks

_E2_COEF = np.array([1.0 / math.factorial(k) for k in range(2, 26)])
_D_COEF = np.array([(-1.0) ** k / k for k in range(2, 18)])  # u - log1p(u) = sum_{k >= 2} (-1)^k u^k / k


def _up(x):
    return np.nextafter(x, np.inf)


def _down(x):
    return np.nextafter(x, -np.inf)


def _charge(*terms):
    """16 LIBM_ULPS u times the sum of the magnitudes (the per-expression rounding charge)."""
    s = 0.0
    for t in terms:
        s = s + np.abs(t)
    return s * _CH + 1e-300


def _clean(x):
    """NaN (an undetermined cancellation of infinities) as +inf: never below the truth."""
    return np.where(np.isnan(x), np.inf, x)


# ---------------------------------------------------------------------------------- R(u)
def _e2(x):
    """(value, relative error) of E2(x) = e^x - 1 - x for |x| <= 1: the Taylor polynomial to
    x^25 by Horner; remainder <= |x|^26/26! (26/25) <= 3 |x|^24/26! relative to E2 >= x^2/3;
    Horner's rounding <= 50 u sum |c_k x^k| <= 50 u (e^|x| - 1 - |x|) <= 210 u E2(x)."""
    acc = np.full_like(x, _E2_COEF[-1])
    for c in _E2_COEF[-2::-1]:
        acc = acc * x + c
    val = acc * x * x
    return val, 256 * _U + 3.0 / math.factorial(26) * 1.05


def _dm(u):
    """(value, relative error) of D(u) = u - log1p(u) >= 0 for |u| <= 1/2: series u^2/2 -
    u^3/3 + ... (16 terms; remainder <= |u|^18/(18 (1 - |u|)) < 3e-22 relative to D >= u^2/3
    for |u| <= 0.05) or, for |u| > 0.05, directly (errors u |u| + 2 LIBM_ULPS u |log1p u|
    + u D <= 37 u/|u| D, D >= u^2/3)."""
    small = np.abs(u) <= 0.05
    us = np.where(small, u, 0.0)
    acc = np.full_like(u, _D_COEF[-1])
    for c in _D_COEF[-2::-1]:
        acc = acc * us + c
    ser = acc * us * us
    with np.errstate(all="ignore"):
        direct = u - np.log1p(u)
    return np.where(small, ser, direct), 1024 * _U


def log_r_upper(u, a: float):
    """An upper bound of log R(u), R(u) = (1 + u)^a - 1 - a u, at the floats u > -1 (array;
    a >= 1 or a <= 0): the least of the evaluated form (module docstring) and the Taylor bound
    log(a (a - 1)/2) + 2 log|u| + max(0, (a - 2) log1p(u)).  -inf where R = 0 (u = 0)."""
    u = np.asarray(u, float)
    with np.errstate(all="ignore"):
        x = a * u
        small = (np.abs(x) <= 1.0) & (np.abs(u) <= 0.5)
        # ---- small: R = E2(x) + e^x expm1(-a D(u))
        xs = np.where(small, x, 0.0)
        e2, re2 = _e2(xs)
        re2 = re2 + 4 * _U  # x's own rounding (relative u): E2's relative change <= (2 + |x|) u
        d, rd = _dm(np.where(small, u, 0.0))
        y = a * d
        T = np.exp(xs) * np.expm1(-y)
        # D's error (expm1's relative condition |y| e^|y|/(e^|y| - 1) <= 1.5 at |y| = |a| D <= 1/2), the
        # product a D, exp (with x's error u|x| <= u), expm1, the product
        rT = 1.5 * rd + (4 * _L + 6) * _U
        R = e2 + T
        err = re2 * e2 + rT * np.abs(T) + 2 * _U * np.abs(R) + 1e-300
        Rhi = R + err * (1 + 8 * _U)
        log_small = np.log(np.where(Rhi > 0, Rhi, 0.0))
        log_small = log_small + _charge(log_small)
        # (always valid: E2's bound when a >= 1, the subtracted term being >= 0)
        if a >= 1:
            log_e2 = np.log(e2 * (1 + re2 + 8 * _U))
            log_small = np.minimum(log_small, log_e2 + _charge(log_e2))
        log_small = np.where(small, log_small, np.inf)
        # ---- elsewhere: R = e^L - w, L = a log1p(u), w = 1 + a u
        lp = np.log1p(u)
        L = a * lp
        eL = (4 * _L + 4) * _U * np.abs(L) + 1e-300
        w = 1.0 + x
        ew = 2 * _U * (np.abs(w) + np.abs(x)) + 1e-300
        # w < 0 for sure: R = e^L + |w|
        neg = w < -ew
        s1 = np.exp(L + eL) * (1 + (2 * _L + 2) * _U) + (-w + ew)
        log_neg = np.log(s1)
        log_neg = log_neg + _charge(log_neg) + 4 * _U
        # w > 0 for sure: R = e^L (1 - e^v), v = log w - L <= 0; at v lowered by its error
        pos = w > ew
        lw = np.log(np.where(pos, w, 1.0))
        ev = (2 * _L * _U * np.abs(lw) + (ew / np.where(pos, w, 1.0)) * 1.01 + eL + 2 * _U * (np.abs(lw) + np.abs(L)))
        v = lw - L - ev * (1 + 4 * _U)
        one_m = -np.expm1(v)
        log_pos = L + eL + np.log(np.where(one_m > 0, one_m * (1 + (2 * _L + 2) * _U), np.nan))
        log_pos = log_pos + _charge(L, log_pos) + 4 * _U
        # |w| tiny: R <= e^L + |w| + ew
        log_mid = np.log(np.exp(L + eL) * (1 + (2 * _L + 2) * _U) + np.abs(w) + ew)
        log_mid = log_mid + _charge(log_mid) + 4 * _U
        log_big = np.where(neg, log_neg, np.where(pos, log_pos, log_mid))
        log_big = np.where(small, np.inf, _clean(log_big))
        # ---- Taylor: R <= a (a - 1)/2 u^2 max(1, (1 + u)^(a - 2))
        c0 = math.log(a * (a - 1) / 2.0)
        lu = np.log(np.abs(u))
        tay = c0 + 2 * lu + np.maximum(0.0, (a - 2) * lp)
        tay = tay + _charge(c0, 2 * lu, (a - 2) * lp) + 4 * _U
        tay = np.where(u == 0, -np.inf, _clean(tay))
        out = np.minimum(np.minimum(_clean(log_small), log_big), tay)
    return np.where(u == 0, -np.inf, out)


# ------------------------------------------------------------------ Gaussian interval masses
def _log_side(a, b):
    """Upper bound of log(Phi(b) - Phi(a)) for float a < b <= 0 (arrays; a may be -inf)."""
    from scipy.special import log_ndtr

    La = log_ndtr(a)
    Lb = log_ndtr(b)
    with np.errstate(all="ignore"):
        D = La - Lb
        ea, eb = log_ndtr_error(La), log_ndtr_error(Lb)  # assumption 4, each log
        eD = ea + eb + _U * np.abs(D)
        ok = -D > 4 * eD
        # log(-expm1(D)) at D lowered by its error (1 - e^D increases as D falls)
        inner = np.log(-np.expm1(np.where(ok, D - eD, -1.0)))
        val = Lb + eb + inner
        val = val + _charge(Lb, inner) + 8 * _L * _U
        fallback = Lb + eb + _charge(Lb)  # Phi(b) - Phi(a) <= Phi(b)
        val = np.where(ok, val, fallback)
        val = np.where(np.isneginf(Lb), -np.inf, val)
    return np.minimum(_clean(val), 0.0)


def log_mass(a, b):
    """Upper bound of log P(a' <= Z <= b') for the exact a', b' within 4u |.| + 1e-300 of the
    floats a <= b (arrays): the interval widened outward, then :func:`_log_side` (mirrored
    above 0, split at 0 across it)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    with np.errstate(all="ignore"):
        a = _down(a - (4 * _U * np.abs(a) + 1e-300))
        b = _up(b + (4 * _U * np.abs(b) + 1e-300))
        a = np.where(np.isnan(a), -np.inf, a)
        b = np.where(np.isnan(b), np.inf, b)
        neg = b <= 0.0
        pos = a >= 0.0
        mid = ~neg & ~pos
        out = np.empty(a.shape)
        if neg.any():
            out[neg] = _log_side(a[neg], b[neg])
        if pos.any():
            out[pos] = _log_side(-b[pos], -a[pos])
        if mid.any():
            z = np.zeros(int(mid.sum()))
            l1 = _log_side(a[mid], z)
            l2 = _log_side(-b[mid], z)
            m = np.maximum(l1, l2)
            s = m + np.log1p(np.exp(np.minimum(l1, l2) - m))
            out[mid] = np.minimum(s + _charge(m, s) + 4 * _L * _U, 0.0)
    return out


# ------------------------------------------------------------------------- the integrand
class _Pts:
    """The certified quantities at float points z: t (and its error), the bracket of u,
    g(t) = log(1 - q + q e^t) with its error, h = g'(t) with its error."""

    def __init__(self, z, mu, hm, q, logq):
        with np.errstate(all="ignore"):
            self.z = z
            mz = mu * z
            t = mz - hm
            et = 2 * _U * (np.abs(mz) + hm + np.abs(t)) + 1e-300
            self.t, self.et = t, et
            em = np.expm1(t)
            ut = q * em
            eu = (q * np.exp(t + et) * et + np.abs(ut) * (2 * _L + 2) * _U) * (1 + 16 * _U) + 1e-320
            self.u_hi = _up(ut + eu)
            self.u_lo = np.maximum(-q, _down(ut - eu))
            # g(t): log1p(q expm1 t) (alpha >= -1/2, t <= 700); log((1 - q) + q e^t) (alpha < -1/2:
            # q > 1/2, 1 - q exact); t + log q + log1p((1 - q) e^-t / q) (t > 700)
            alpha = ut
            g1 = np.log1p(alpha)
            # (alpha's relative error (2 LIBM_ULPS + 2) u moves log1p by at most that times
            # |alpha|/(1 + alpha) <= 2 min(|alpha|, 1) for alpha >= -1/2)
            e1 = (4 * _L + 4) * _U * np.minimum(np.abs(alpha), 1.0) + 2 * _L * _U * np.abs(g1)
            g2 = np.log((1.0 - q) + q * np.exp(t))
            e2 = (2 * _L + 3) * _U + 2 * _L * _U * np.abs(g2)
            g3 = t + logq + np.log1p((1.0 - q) * np.exp(-t) / q)
            e3 = 8 * _L * _U * (np.abs(t) + abs(logq) + 1.0)
            far = t > 700.0
            low = (~far) & (alpha < -0.5)
            g = np.where(far, g3, np.where(low, g2, g1))
            eg = np.where(far, e3, np.where(low, e2, e1))
            self.g = g
            self.eg = (eg + et) * (1 + 8 * _U) + 1e-300  # g' <= 1: t's error moves g at most et
            # h = q e^t / (1 - q + q e^t) = exp(log q + t - g), h' <= 1/4
            arg = logq + t - g
            h = np.minimum(np.exp(arg), 1.0)
            earg = self.eg + _charge(logq, t, g, arg)
            self.h = h
            self.eh = h * (np.expm1(earg) + 2 * _L * _U) * (1 + 8 * _U) + et / 4 + 1e-300

    def part(self, sl):
        """The same quantities at a slice of the points."""
        out = object.__new__(_Pts)
        for k, v in self.__dict__.items():
            out.__dict__[k] = v[sl]
        return out


def _tilted(F, A, anchor, S, e_line, c, d):
    """Upper bound of log E[e^{F + A + S (Z - anchor) + e_line}; c <= Z <= d]
    = F + A + e_line - S anchor + S^2/2 + log P(c - S <= Z <= d - S)."""
    with np.errstate(all="ignore"):
        sa = S * anchor
        s2 = S * S / 2
        lm = log_mass(c - S, d - S)
        val = F + A + e_line - sa + s2 + lm
        val = val + _charge(F, A, e_line, sa, s2, lm)
    return _clean(val)


@lru_cache(maxsize=4096)
def log_mgf_bound(mu: float, q: float, a: float) -> float:
    """A certified upper bound (float, safe side) of log M(a), M(a) = E_{Z ~ N(0,1)}[(1 - q +
    q e^{mu Z - mu^2/2})^a], for a >= 1 or a <= 0, 0 < q <= 1, mu > 0 (floats; the bound at
    the float mu: pass mu rounded up -- M is nondecreasing in mu).  math.inf where it cannot
    certify a finite one (module docstring)."""
    mu, q, a = float(mu), float(q), float(a)
    if not (math.isfinite(mu) and mu > 0.0 and 0.0 < q <= 1.0 and math.isfinite(a) and (a >= 1.0 or a <= 0.0)):
        return math.inf
    if a == 1.0 or a == 0.0:
        return 0.0  # M = E_Q[1 - q + q r] = 1, resp. E_Q[1] = 1
    if q == 1.0:  # M = E_Q[r^a] = e^{a (a - 1) mu^2 / 2} (a >= 1 or a <= 0: a (a - 1) > 0); four roundings
        v = a * (a - 1.0) * mu * mu / 2.0
        return math.nextafter(v * (1.0 + 8.0 * _U), math.inf) if math.isfinite(v) else math.inf
    try:
        v = _bound(mu, q, a)
    except (OverflowError, ValueError, ZeroDivisionError, FloatingPointError):
        v = math.inf
    if math.isnan(v):
        v = math.inf
    if a < 0.0:
        # a <= 0: (1 - q + q r)^a <= (1 - q)^a (r >= 0), so log M <= |a| (-log1p(-q)) -- the limit
        # mu -> inf, where the cells overflow (mu >~ 12.5); log1p within 2 LIBM_ULPS u, the product u
        tail = -a * -math.log1p(-q) * (1.0 + (2 * LIBM_ULPS + 4) * _U)
        v = min(v, math.nextafter(tail, math.inf))
    return v


def _grid(mu, q, a, z0):
    """Ascending float edges: [zL, ..., z0 - eta] (left), [z0 + eta, ..., zR] (right)."""
    width = _WIDTH / max(mu, 1.0)
    zR = max(z0, 2.0 * mu, a * mu) + _REACH
    h0 = min(1.0, q / (1.0 - q)) if q < 1.0 else 1.0
    zL = min(0.0, a * mu * h0) - _REACH
    span = zR - zL
    if span / width > _MAX_CELLS:
        width = span / _MAX_CELLS
    eta = min(_ETA, width)
    # offsets from z0: eta, eta r, eta r^2, ... while the gap is below width, then by width
    n_geo = max(0, int(math.ceil(math.log(width / (eta * (_RATIO - 1.0))) / math.log(_RATIO)))) if width > eta * (_RATIO - 1.0) else 0
    geo = eta * _RATIO ** np.arange(n_geo + 1)
    start = geo[-1]
    right_off = np.concatenate([geo, start + width * np.arange(1, max(1, int(math.ceil((zR - z0 - start) / width))) + 1)])
    left_off = np.concatenate([geo, start + width * np.arange(1, max(1, int(math.ceil((z0 - zL - start) / width))) + 1)])
    right = z0 + right_off
    left = (z0 - left_off)[::-1]
    return left, right


def _bound(mu, q, a):
    hm = mu * mu / 2.0
    z0 = mu / 2.0
    logq = math.log(q)
    left, right = _grid(mu, q, a, z0)
    edges = np.concatenate([left, right])
    n_left = left.size
    terms = []
    with np.errstate(all="ignore"):
        # every cell at once: left of z0 (index < n_left - 1), the inner cell (n_left - 1), right
        c, d = edges[:-1], edges[1:]
        idx = np.arange(c.size)
        is_right = idx >= n_left
        is_left = idx < n_left - 1
        inner = n_left - 1
        m = (c + d) / 2.0
        w = (d - c) * (1 + 2 * _U)
        pe, pm = _Pts(edges, mu, hm, q, logq), _Pts(m, mu, hm, q, logq)
        pc, pd = pe.part(slice(None, -1)), pe.part(slice(1, None))
        lr_hi, lr_lo = log_r_upper(pe.u_hi, a), log_r_upper(pe.u_lo, a)
        lr_hi_d, lr_lo_c = lr_hi[1:], lr_lo[:-1]
        # tangent of log|u| at m: value (upper: |u(m)| <= u_hi right of z0, -u_lo left), slope
        # mu / (1 - e^{-t}) and its error
        lu_m = np.log(np.where(is_right, pm.u_hi, -pm.u_lo))
        lu_m = lu_m + _charge(lu_m)
        den = -np.expm1(-pm.t)
        s = mu / den
        rel_t = pm.et / np.abs(np.expm1(pm.t))
        es = np.abs(s) * (2.0 * rel_t + (2 * _L + 4) * _U) * (1 + 8 * _U)
        es = np.where(rel_t < 0.25, es, np.inf)
        # u^2 K: K = R/u^2 at its safe end (nondecreasing in u for a >= 2, else nonincreasing)
        uk = pd.u_hi if a >= 2 else pc.u_lo
        luk = np.log(np.abs(uk))
        lk = (lr_hi_d if a >= 2 else lr_lo_c) - 2 * luk
        lk = lk + _charge(lk, 2 * luk) + 8 * _L * _U * np.abs(luk)
        best = _tilted(lk, 2 * lu_m, m, 2 * s, 2 * es * w, c, d)
        if a >= 1:
            # right of z0: chord of the convex G between c and d, rho at u_hi(d) (<= 1)
            Gc = a * (pc.g + pc.eg)
            Gd = a * (pd.g + pd.eg)
            Gc = Gc + 2 * _U * np.abs(Gc)
            Gd = Gd + 2 * _U * np.abs(Gd)
            S = (Gd - Gc) / (d - c)
            e_ch = 4 * _U * (np.abs(Gc) + np.abs(Gd)) + 1e-300
            ud = pd.u_hi
            L1 = a * np.log1p(ud)
            lrho = lr_hi_d - L1 + _charge(lr_hi_d, L1) + (4 * _L + 4) * _U * np.abs(L1)
            lrho = np.where(np.isnan(lrho), 0.0, np.minimum(lrho, 0.0))
            b2 = _tilted(lrho, Gc + e_ch, c, S, 0.0, c, d)
            best = np.where(is_right, np.minimum(best, b2), best)
        else:
            # left of z0: tangent of the concave G at m, rho at u_lo(c) (<= 1)
            Gm = a * (pm.g - pm.eg)
            Gm = Gm + 2 * _U * np.abs(Gm)
            S = a * mu * pm.h
            eS = abs(a) * mu * pm.eh * (1 + 4 * _U) + 2 * _U * np.abs(S)
            uc = pc.u_lo
            L1 = a * np.log1p(uc)
            lrho = lr_lo_c - L1 + _charge(lr_lo_c, L1) + (4 * _L + 4) * _U * np.abs(L1)
            lrho = np.where(np.isnan(lrho), 0.0, np.minimum(lrho, 0.0))
            b2 = _tilted(lrho, Gm, m, S, eS * w, c, d)
            # right of z0: |u| |J|, tangent of log|u|, J at u_hi(d)
            lud = np.log(pd.u_hi)
            lj = lr_hi_d - lud
            lj = lj + _charge(lj, lud) + 4 * _L * _U * np.abs(lud)
            b3 = _tilted(lj, lu_m, m, s, es * w, c, d)
            best = np.where(is_left, np.minimum(best, b2), np.where(is_right, np.minimum(best, b3), best))
        # the inner cell [z0 - eta, z0 + eta]: R at its ends (decreasing to z0, increasing after)
        lri = max(lr_lo[inner], lr_hi[inner + 1])
        lmi = float(log_mass(c[inner:inner + 1], d[inner:inner + 1])[0])
        best[inner] = lri + lmi + float(_charge(lri, lmi))
        terms.append(_clean(best))
        # ---------------------------------------------------------------- tails
        zR, zL = edges[-1:], edges[:1]
        pR, pL = pe.part(slice(-1, None)), pe.part(slice(0, 1))
        if a >= 1:
            S = _up(np.array([a * mu]))
            G = a * (pR.g + pR.eg)
            G = G + 2 * _U * np.abs(G)
            terms.append(_tilted(0.0, G, zR, S, 0.0, zR, np.array([np.inf])))
            lt = math.log(a * q) + log_mass(np.array([-np.inf]), zL)
            terms.append(lt + _charge(lt) + 4 * _L * _U * abs(math.log(a * q)))
        else:
            lt = math.log(-a * q) + log_mass(zR - mu, np.array([np.inf]))
            terms.append(lt + _charge(lt) + 4 * _L * _U * abs(math.log(-a * q)))
            S = _down(a * mu * np.minimum(pL.h + pL.eh, 1.0) * (1 + 4 * _U))  # (<= a mu h(zL): a <= 0)
            G = a * (pL.g - pL.eg)
            G = G + 2 * _U * np.abs(G)
            terms.append(_tilted(0.0, G, zL, S, 0.0, np.array([-np.inf]), zL))
    lb = np.concatenate([np.atleast_1d(np.asarray(t, float)) for t in terms])
    lb = np.where(np.isnan(lb), np.inf, lb)
    if np.any(lb == np.inf):
        return math.inf
    top = float(np.max(lb))
    if top == -math.inf:
        return 0.0
    ex = np.exp(lb - top)  # each within 2 LIBM_ULPS u (the difference's rounding charged below)
    ssum = float(np.sum(ex))  # n non-negative terms: within (n - 1) u / (1 - (n - 1) u) relative
    n = ex.size
    log_e = top + math.log(ssum) + (2 * _L + 4) * _U * (1.0 + 2.0 * abs(math.log(ssum))) + 2.0 * n * _U \
        + 2 * _U * (abs(top) + float(np.max(np.abs(lb)))) + 1e-300
    # log M = log1p(E)
    if log_e < 0.0:
        E = math.exp(log_e) * (1 + (2 * _L + 2) * _U)
        val = math.log1p(E)
        val = val * (1 + (2 * _L + 2) * _U)
    else:
        val = log_e + math.log1p(math.exp(-log_e))
        val = val + (2 * _L + 4) * _U * (abs(val) + 1.0)
    return math.nextafter(val, math.inf)
