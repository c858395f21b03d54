r"""The binomial masses of k identical randomized responses, in log space, with error bounds.

Given no delta event, k identical (eps, delta)-DP randomized responses (MV Def. 3.1) have
privacy loss (2M - k) eps with M ~ Bin(k, p), p = e^eps/(1 + e^eps).  Every exact producer
of :mod:`optcomp.optimal` lists a window of these masses; their accuracy is the accuracy of
the answer.  Library pmfs fall short at the scale this package promises (Boost's
``binom.pmf`` errs by ~1e7 ulp at k = 10^12 twenty standard deviations out, and by far
more when p is rounded to a float first: the error ``(m - kp) dq / (pq)`` of a rounded q
reaches 1e-4 at k = 10^12), so the masses are computed here, following Loader
(*Fast and accurate computation of binomial probabilities*, 2000):

    log P[M = m] = stirlerr(k) - stirlerr(j) - stirlerr(m) - bd0(j, kq) - bd0(m, kp)
                   + 1/2 log(k / (2 pi j m)),          j = k - m,  q = 1 - p,

with ``stirlerr(n) = log n! - (n + 1/2) log n + n - 1/2 log 2 pi`` (series for n > 15, a
table below) and the deviance ``bd0(x, M) = x log(x/M) + M - x >= 0``, summed as a series
in ``v = (x - M)/(x + M)`` when x is near M (no cancellation).  q, kq and kp are formed
once in 40-digit arithmetic and carried as double-doubles, so the rounding of q moves
nothing.  Each mass comes with an absolute error bound of its logarithm (a few units of
2^-53 times the size of the terms; checked against 50-digit mpmath in
``tests/test_binomial.py``), and can be returned scaled by 2^s, so that masses far below
the float range (delta_g down to 1e-300 at huge k) keep their relative accuracy.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["binomial_log_pmf", "binomial_masses"]

_U = 2.0**-53
_HALF_LOG_2PI = 0.9189385332046728  # 1/2 log(2 pi), correctly rounded


@lru_cache(maxsize=1)
def _stirlerr_table() -> np.ndarray:
    import mpmath as mp

    with mp.workdps(40):
        return np.array([0.0] + [float(mp.log(mp.factorial(n)) - (n + mp.mpf(0.5)) * mp.log(n) + n
                                       - mp.log(2 * mp.pi) / 2) for n in range(1, 16)])


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """stirlerr(n) for integers n >= 1 (relative error a few u; 0 < stirlerr < 0.082)."""
    out = np.empty(n.shape)
    small = n <= 15
    out[small] = _stirlerr_table()[n[small].astype(np.int64)]
    x = n[~small]
    nn = x * x
    out[~small] = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - (1.0 / 1188) / nn) / nn) / nn) / nn) / x
    return out


def _series(t: np.ndarray, first: int, coef) -> np.ndarray:
    """sum_{n >= first} coef(n) t^n for 0 <= t <= 1/2 (every term >= 0), to 2^-60 relative."""
    out = np.zeros(t.shape)
    term = t**first
    top = float(np.max(t)) if t.size else 0.0
    n_max = first if top == 0.0 else first + min(60, math.ceil(-41.6 / math.log(top)))
    for n in range(first, n_max + 1):
        out += coef(n) * term
        term = term * t
    return out


def _bd0(x: np.ndarray, mh: float, ml: float) -> tuple[np.ndarray, np.ndarray]:
    """(x log(x/M) + M - x, a bound on its absolute error) for M = mh + ml (a double-double)
    and integers x >= 1 (as floats).

    Written M phi(r), r = x/M, phi(r) = r log r + 1 - r >= 0, it is summed without
    cancellation wherever cancellation could hurt, from the exact d = x - M:
    |d| < 0.1 (x + M): Loader's series in v = d/(x + M) (terms of one sign);
    1/2 <= r < 1: M sum_{n>=2} t^n / (n(n-1)), t = -d/M;  1 < r <= 2: x sum_{n>=2} s^n / n,
    s = d/x (all terms positive, error a few u of the result); elsewhere the closed form,
    whose terms then cancel by at most a factor ~4 (charged by their sizes)."""
    d = (x - mh) - ml
    sx = x + mh
    out = np.empty(x.shape)
    err = np.empty(x.shape)
    near = np.abs(d) < 0.1 * sx
    if np.any(near):
        dn, xn = d[near], x[near]
        v = dn / sx[near]
        r = dn * v
        ej = 2.0 * xn * v
        v2 = v * v
        top = float(np.max(v2))
        steps = 1 if top == 0.0 else min(13, max(1, math.ceil(-41.6 / math.log(top))))
        for i in range(1, steps + 1):  # |v| < 0.1: 13 steps reach v^26 < 1e-26
            ej = ej * v2
            r = r + ej / (2 * i + 1)
        out[near] = r
        err[near] = 8.0 * _U * r  # d, v carry ~3 u, the series terms one sign
    below = ~near & (d < 0) & (x >= 0.5 * mh)
    if np.any(below):
        t = -d[below] / mh
        out[below] = mh * _series(t, 2, lambda n: 1.0 / (n * (n - 1)))
        err[below] = 8.0 * _U * out[below]
    above = ~near & (d > 0) & (x <= 2.0 * mh)
    if np.any(above):
        xa = x[above]
        out[above] = xa * _series(d[above] / xa, 2, lambda n: 1.0 / n)
        err[above] = 8.0 * _U * out[above]
    far = ~(near | below | above)
    if np.any(far):
        xf = x[far]
        lg = np.log(xf / mh) - ml / mh
        a = xf * lg
        out[far] = a + (mh - xf) + ml
        err[far] = 16.0 * _U * (np.abs(a) + np.abs(mh - xf) + mh * _U)
    return out, err


@lru_cache(maxsize=256)
def _parameters(eps: float, k: int):
    """Double-double q, kq, kp and log q, log p for Bin(k, p), p = e^eps/(1 + e^eps)."""
    import mpmath as mp

    with mp.workdps(40):
        e = mp.mpf(eps)
        q = 1 / (1 + mp.exp(e))
        p = 1 - q
        kq, kp = k * q, k * p

        def dd(x):
            hi = float(x)
            return hi, float(x - hi)

        return dd(kq), dd(kp), float(mp.log(q)), float(mp.log1p(-q))


def binomial_log_pmf(eps: float, k: int, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log P[M = m], a bound on its absolute error) for M ~ Bin(k, p), p = e^eps/(1+e^eps),
    integers 0 <= m <= k (an array)."""
    (kqh, kql), (kph, kpl), log_q, log_p = _parameters(float(eps), int(k))
    m = np.asarray(m, dtype=np.int64)
    y = m.astype(float)  # successes (prob p)
    j = (k - m).astype(float)  # failures (prob q)
    out = np.empty(y.shape)
    err = np.empty(y.shape)
    top = m == k  # p^k
    none = m == 0  # q^k
    mid = ~(top | none)
    out[top] = k * log_p
    err[top] = 8.0 * _U * abs(k * log_p) + 4.0 * _U
    out[none] = k * log_q
    err[none] = 8.0 * _U * abs(k * log_q) + 4.0 * _U
    if np.any(mid):
        ym, jm = y[mid], j[mid]
        b1, e1 = _bd0(jm, kqh, kql)
        b2, e2 = _bd0(ym, kph, kpl)
        lk = math.log(k)
        lj, ly = np.log(jm), np.log(ym)
        st = float(_stirlerr(np.array([float(k)]))[0]) - _stirlerr(jm) - _stirlerr(ym)
        out[mid] = st - b1 - b2 + 0.5 * (lk - lj - ly) - _HALF_LOG_2PI
        # the pieces themselves, plus the rounding of adding them up (u of each partial sum)
        err[mid] = e1 + e2 + 8.0 * _U * (b1 + b2 + np.abs(st)) + 16.0 * _U * (lk + np.abs(lj) + np.abs(ly) + 4.0)
    return out, err


def binomial_masses(eps: float, k: int, m_lo: int, m_hi: int, log2_scale: int | None = None):
    """Lower and upper bounds on 2^s P[M = m] for m in [m_lo, m_hi], and s.

    ``log2_scale`` s: the masses are returned multiplied by 2^s (exactly: a power of two);
    ``None`` picks s >= 0 so that the largest mass of the window's first 2^18 atoms is
    about 1 (s <= 1000), so that masses down to ~1e-600 stay normal floats; a mass that
    would overflow after scaling is +inf (an upper bound still)."""
    n = m_hi - m_lo + 1
    p_lo, p_up = np.empty(n), np.empty(n)
    chunk = 1 << 18  # bounded temporaries whatever the window
    for a in range(0, n, chunk):
        m = np.arange(m_lo + a, min(m_lo + a + chunk, m_hi + 1), dtype=np.int64)
        logp, err = binomial_log_pmf(eps, k, m)
        if log2_scale is None:  # from the first chunk's largest mass (windows start near the mode)
            top = float(np.max(logp))
            log2_scale = int(min(1000, max(0, math.floor(-top / math.log(2.0)))))
        shift = log2_scale * math.log(2.0)  # rounding of the product: u |shift|, charged below
        y = logp + shift
        err += 2.0 * _U * (abs(shift) + np.abs(y))
        with np.errstate(under="ignore", over="ignore"):
            p_up[a:a + m.size] = np.exp(y + err) * (1.0 + 4.0 * _U)
            p_lo[a:a + m.size] = np.exp(y - err) * (1.0 - 4.0 * _U)
    return p_lo, p_up, log2_scale
