"""One release of a Poisson-sampled mechanism, from the definitions (mpmath; never from
optcomp's code): the references of the DP-SGD tests.

The base pair (P, Q) = (the law with the record, without it) -- Gaussian N(1, s²) against
N(0, s²), Laplace Lap(1, b) against Lap(0, b) -- has a base loss l(x) = log(dP/dQ)(x) that
is nondecreasing in x.  Poisson sampling at rate q under add/remove neighbours gives the
remove pair ((1 − q)Q + qP, Q) and the add pair (Q, (1 − q)Q + qP) (Zhu, Dong and Wang,
AISTATS 2022, Thm 11: the two orders of the same two laws).  The remove loss
log(1 − q + q e^{l(x)}) is nondecreasing in x, so {loss > eps} = {x > t} with
l(t) = log((e^eps − 1 + q)/q), and H_{e^eps} = A(x > t) − e^eps B(x > t) from the two
survival functions; the add loss is its negative, {loss > eps} = {x < t'} with
l(t') = log((e^{−eps} − 1 + q)/q) (empty when e^{−eps} <= 1 − q).  dp_accounting's
replace-one pair for a Poisson-sampled Gaussian, (1 − q)N(0, s²) + qN(−1, s²) against
(1 − q)N(0, s²) + qN(+1, s²), has a loss decreasing in x: {loss > eps} = {x < t}, t found by
bisection in mpmath.  The reference eps at delta is the root of the decreasing profile
max(H_remove, H_add)(eps) = delta, by bisection at 40 digits.
"""

from __future__ import annotations

import mpmath as mp

DPS = 40


def gauss(s):
    """N(1, s²) against N(0, s²): the inverse base loss ``linv``, the survival functions
    ``sp``/``sq`` of P and Q, and the range (``lo``, ``hi``) of the base loss."""
    s = mp.mpf(s)
    return dict(linv=lambda y: s**2 * y + mp.mpf(1) / 2,
                sp=lambda t: mp.ncdf(-(t - 1) / s), sq=lambda t: mp.ncdf(-t / s),
                lo=-mp.inf, hi=mp.inf)


def laplace(b):
    """The same for Lap(1, b) against Lap(0, b): l(x) = (|x| − |x − 1|)/b, from −1/b to 1/b."""
    b = mp.mpf(b)

    def surv(mu):
        return lambda t: mp.exp(-(t - mu) / b) / 2 if t >= mu else 1 - mp.exp((t - mu) / b) / 2

    return dict(linv=lambda y: (y * b + 1) / 2, sp=surv(1), sq=surv(0), lo=-1 / b, hi=1 / b)


def h_remove(base, q, eps):
    q, x = mp.mpf(q), mp.exp(eps)
    y = mp.log((x - 1 + q) / q)  # the base loss at the threshold
    if y >= base["hi"]:
        return mp.mpf(0)
    if y < base["lo"]:
        return max(mp.mpf(0), 1 - x)
    t = base["linv"](y)
    return (1 - q) * base["sq"](t) + q * base["sp"](t) - x * base["sq"](t)


def h_add(base, q, eps):
    q, x = mp.mpf(q), mp.exp(eps)
    c = 1 / x - 1 + q
    if c <= 0:
        return mp.mpf(0)
    y = mp.log(c / q)
    if y <= base["lo"]:
        return mp.mpf(0)
    if y > base["hi"]:
        return max(mp.mpf(0), 1 - x)
    t = base["linv"](y)
    cq, cp = 1 - base["sq"](t), 1 - base["sp"](t)  # masses of x < t
    return cq - x * ((1 - q) * cq + q * cp)


def h_replace_gauss(s, q, eps):
    """dp_accounting's replace-one pair of a Poisson-sampled Gaussian (module docstring)."""
    s, q, x = mp.mpf(s), mp.mpf(q), mp.exp(eps)

    def loss(v):
        return mp.log((1 - q) + q * mp.exp((-2 * v - 1) / (2 * s**2))) - \
            mp.log((1 - q) + q * mp.exp((2 * v - 1) / (2 * s**2)))

    lo, hi = mp.mpf(-1), mp.mpf(1)
    while loss(lo) <= eps:
        lo *= 2
    while loss(hi) > eps:
        hi *= 2
    for _ in range(200):  # loss decreasing: loss(lo) > eps >= loss(hi)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if loss(mid) > eps else (lo, mid)
    t = lo

    def cdf(mu):
        return mp.ncdf((t - mu) / s)

    return ((1 - q) * cdf(0) + q * cdf(-1)) - x * ((1 - q) * cdf(0) + q * cdf(1))


def eps_at(profile, delta):
    """The root of the decreasing profile at delta (bisection, 40 digits)."""
    with mp.workdps(DPS):
        lo, hi = mp.mpf(0), mp.mpf(1)
        if profile(lo) <= delta:
            return 0.0
        while profile(hi) > delta:
            hi *= 2
        for _ in range(150):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if profile(mid) > delta else (lo, mid)
        return hi


def ref_eps_poisson(base, q, delta):
    return eps_at(lambda e: max(h_remove(base, q, e), h_add(base, q, e)), delta)
