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
nothing.  Each mass comes with an absolute error bound of its logarithm (a few units of the
arithmetic's roundoff u times the size of the terms, derived term by term in
:func:`binomial_log_pmf`; ``tests/test_binomial.py`` compares it with 60-digit mpmath), and
can be returned scaled by 2^s, so that masses far below the float range (delta_g down to
1e-300 at huge k) keep their relative accuracy.

Precision.  A mass e^y known through y carries a relative error of about |y| u: in double
precision (u = 2^-53) about 1e-13 at y = -700 -- the documented 1e-12 of ``optimal`` would be
spent in the masses alone at delta_g ~ 1e-300.  So the masses are computed in double and
every one whose error bound exceeds ``REFINE_ERR`` (2^-43, i.e. |y| beyond ~80) is
recomputed in the platform's extended precision (``numpy.longdouble``: 64-bit significand
on x86-64, u = 2^-64, 2^-113 on aarch64 Linux; where it is only a double, as on Apple
silicon, nothing changes and the bounds say so), exponentiated there and rounded once to a
double.  Near the mode, where the masses matter at moderate delta_g, the double pass is
kept: the extended one is ~3x slower.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ._rounding import LIBM_ULPS

__all__ = ["binomial_log_pmf", "binomial_log_pmf_rows", "binomial_parameter", "binomial_masses", "exp_bounds"]

_U = 2.0**-53
_XP = np.longdouble
# unit roundoff 2^-p of the extended type (p = 64 significant bits on x86-64): numpy's epsneg,
# the gap below 1 (eps/2).  (It was taken as epsneg/2 = 2^-65 until the bounds were derived:
# every extended-precision charge was half what it should be.)
_U_XP = float(np.finfo(_XP).epsneg) if np.finfo(_XP).nmant > 52 else _U
_FN = 2.0 * LIBM_ULPS  # relative error of one exp, log or log1p, in units of u (L ulps <= 2L u)
REFINE_ERR = 2.0**-43  # masses whose log error bound exceeds this are recomputed in _XP


def _split(x) -> tuple[float, float]:
    """A 40-digit mpmath number as a double-double (hi, lo)."""
    hi = float(x)
    return hi, float(x - hi)


def _const(dt, hi: float, lo: float):
    """hi + lo in precision dt (rounded once)."""
    return dt(hi) + dt(lo) if dt is not np.float64 else np.float64(hi)


_TABLE_MAX = 31  # stirlerr(n) tabulated for n <= 31, the series beyond


@lru_cache(maxsize=1)
def _constants():
    """1/2 log(2 pi) and stirlerr(n), n = 0.._TABLE_MAX, as double-doubles, from 40-digit mpmath."""
    import mpmath as mp

    with mp.workdps(40):
        half = _split(mp.log(2 * mp.pi) / 2)
        table = [(0.0, 0.0)] + [_split(mp.log(mp.factorial(n)) - (n + mp.mpf(0.5)) * mp.log(n) + n
                                       - mp.log(2 * mp.pi) / 2) for n in range(1, _TABLE_MAX + 1)]
    return half, table


@lru_cache(maxsize=2)
def _stirlerr_table(dt) -> np.ndarray:
    return np.array([_const(dt, hi, lo) for hi, lo in _constants()[1]], dtype=dt)


# Stirling's series stirlerr(n) = sum_i (-1)^i c_i / n^(2i+1), its coefficients as fractions
_STIRLING = ((1, 12), (1, 360), (1, 1260), (1, 1680), (1, 1188), (691, 360360), (1, 156), (3617, 122400))


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """stirlerr(n) for integers n >= 1 given as floats of any precision (0 < stirlerr <=
    stirlerr(1) = 0.0811): tabulated to n = 31 (a 40-digit double-double rounded once:
    relative error u); beyond, Stirling's series through n^-15 (the first omitted term,
    43867/244188 n^-17, is below 2^-80 of the sum for n >= 32), or its first two terms for
    n >= 2^20 (the third is below 2^-80 of the first).  The series is evaluated by Horner in
    1/n^2 from the last term; every level subtracts less than 2^-13 of its coefficient, so
    the leading coefficient's rounding, the subtraction and the final division give
    relative error <= 3u, plus below 0.001u from the rest: <= 3.01 u."""
    dt = n.dtype.type
    small = n <= _TABLE_MAX
    x = n if not np.any(small) else n[~small]
    nn = x * x
    if x.size and float(np.min(x)) >= 2.0**20:
        big = (dt(1) / 12 - (dt(1) / 360) / nn) / x
    else:
        big = np.zeros(x.shape, dtype=dt)
        for i in range(len(_STIRLING) - 1, -1, -1):  # Horner in 1/n^2, alternating signs
            a, b = _STIRLING[i]
            big = dt(a) / dt(b) - big / nn
        big = big / x
    if not np.any(small):
        return big
    out = np.empty(n.shape, dtype=dt)
    out[small] = _stirlerr_table(dt)[n[small].astype(np.int64)]
    out[~small] = big
    return out


def _series(t: np.ndarray, first: int, coef) -> np.ndarray:
    """sum_{n >= first} coef(n) t^n for 0 <= t <= 1/2 (every term >= 0), to 2^-70 relative,
    by Horner from the last term: coefficient n (rounded once) meets 2 (n - first) + 2
    roundings, damped by t^(n - first), so the sum carries the average 2.52u (coef 1/(n(n-1)),
    t <= 1/2) or 3.17u (coef 1/n) from the levels, and 2 e_t + u from t^first = t t (e_t the
    relative error of t, which also moves the Horner sum by <= 0.26 e_t, resp. 0.59 e_t;
    charged by the caller)."""
    dt = t.dtype.type
    top = float(np.max(t)) if t.size else 0.0
    n_max = first if top == 0.0 else first + min(80, math.ceil(-48.5 / math.log(top)))
    out = np.zeros(t.shape, dtype=dt)
    for n in range(n_max, first - 1, -1):
        out = out * t + coef(dt, n)
    return out * (t * t if first == 2 else t**first)


def _bd0(x: np.ndarray, mh: float, ml: float, u: float):
    """(x log(x/M) + M - x, a bound on its absolute error, d = x - M, whether every x is in
    the near regime below) for M = mh + ml (a double-double) and integers x >= 1 (as floats
    of the working precision, unit roundoff u).

    Written M phi(r), r = x/M, phi(r) = r log r + 1 - r >= 0, it is summed without
    cancellation wherever cancellation could hurt, from d = x - M (x - mh is exact by
    Sterbenz's lemma wherever d is used, x/mh in [1/2, 2]; then one rounding):
    |d| < 0.1 (x + M): Loader's series in v = d/(x + M) (:func:`_bd0_near`);
    1/2 <= r < 1: M sum_{n>=2} t^n / (n(n-1)), t = -d/M (3u: d, M, the division): by
    :func:`_series` 2.52u + 0.26 (3u) + t^2 (7u) + the products by t^2 and by M (u, and u for
    M, u) = 13.3u; 1 < r <= 2: x sum_{n>=2} s^n / n, s = d/x (2u): 3.17u + 0.59 (2u) + s^2 (5u) +
    the products by s^2 and by x (2u) = 11.4u -- both charged 16u of the result; elsewhere (r < 1/2 or r > 2, so
    |log r| > log 2) the closed form: log(x/mh) within 2L u |.| + u (its argument rounded)
    <= (2L + 1.45) u |log r|, then the product by x, the subtraction of ml/mh and three
    roundings: (2L + 5.45) u |x log r| + 3u |M - x| + u |ml|, charged (2L + 8) u (|x log r| +
    |M - x| + u M), L = LIBM_ULPS.  (Computing with the double-double M' = mh + ml, within
    2^-105 M of M, moves bd0 by <= |x - M| 2^-105: an absolute term, charged by the caller.)"""
    dt = x.dtype.type
    # M per atom (an array of x's shape) or one M for all (a scalar: the same operations)
    mh_, ml_ = (np.asarray(mh).astype(dt), np.asarray(ml).astype(dt)) if np.ndim(mh) else (dt(mh), dt(ml))

    def at(v, mask):
        return v[mask] if np.ndim(v) else v

    d = (x - mh_) - ml_
    sx = (x + mh_) + ml_  # ml matters in extended precision
    near = np.abs(d) < 0.1 * sx
    if near.all():  # the common case (windows around the bulk): no masks
        return (*_bd0_near(d, x, sx, u), d, True)
    out = np.empty(x.shape, dtype=dt)
    err = np.empty(x.shape, dtype=dt)
    if np.any(near):
        out[near], err[near] = _bd0_near(d[near], x[near], sx[near], u)
    below = ~near & (d < 0) & (x >= 0.5 * mh_)
    if np.any(below):
        mb = at(mh_, below) + at(ml_, below)
        t = -d[below] / mb  # 3 u (d, M, the division): 2 x 3 u through t^2
        out[below] = mb * _series(t, 2, lambda dt, n: dt(1) / (n * (n - 1)))
        err[below] = 16.0 * u * out[below]
    above = ~near & (d > 0) & (x <= 2.0 * mh_)
    if np.any(above):
        xa = x[above]
        out[above] = xa * _series(d[above] / xa, 2, lambda dt, n: dt(1) / n)
        err[above] = 16.0 * u * out[above]
    far = ~(near | below | above)
    if np.any(far):
        xf, mf, lf = x[far], at(mh_, far), at(ml_, far)
        lg = np.log(xf / mf) - lf / mf
        a = xf * lg
        out[far] = a + (mf - xf) + lf
        err[far] = (_FN + 8.0) * u * (np.abs(a) + np.abs(mf - xf) + mf * u)
    return out, err, d, False


def _bd0_near(d, x, sx, u):
    """Loader's series bd0 = D + sum_{i>=1} t_i, D = d v, t_i = 2 x v^(2i+1)/(2i+1),
    v = d/(x + M), |v| < 0.1, so |t_i| / D = (1 + v) |v|^(2i-1)/(2i+1): <= 0.0367 (i = 1) and
    <= 0.00023 for all i >= 2 together.  Roundings: d carries u, x + M 2u, v 4u, D 6u; t_i
    (6 + 10 i) u (2 x v: 5u, each v^2 9u and its product u, the division u); each of the
    ``steps`` <= 11 additions (v^2 < 0.01) rounds by u of its partial sum; the terms left
    out are below 10^-23 D.  v > 0: the partial sums increase to bd0 >= D, so
    (6 + 16 (0.0367) + 0.006 + steps) u bd0 = (6.6 + steps) u bd0.  v < 0: every t_i < 0,
    the partial sums decrease from D to bd0 >= 0.9698 D, so (6.49 + steps) u D <=
    (6.69 + 1.032 steps) u bd0.  Charged (7 + 1.04 steps) u of the computed sum.  (It was
    (7 + steps) u, "u of the sum" per addition, which misses the v < 0 partial sums above
    the result: 0.03 u bd0 short at steps = 11.)"""
    v = d / sx
    r = d * v
    ej = 2.0 * x * v
    v2 = v * v
    top = float(np.max(v2)) if v2.size else 0.0
    steps = 1 if top == 0.0 else min(16, max(1, math.ceil(-48.5 / math.log(top))))
    for i in range(1, steps + 1):  # |v| < 0.1: 16 steps reach v^32 < 1e-32
        ej = ej * v2
        r = r + ej / (2 * i + 1)
    return r, (7.0 + 1.04 * steps) * u * r


@lru_cache(maxsize=256)
def _parameters(eps: float, k: int):
    """Double-double kq, kp, log q, log p, -log(k p q) for Bin(k, p), p = e^eps/(1 + e^eps),
    q = 1 - p."""
    import mpmath as mp

    with mp.workdps(40):
        q = 1 / (1 + mp.exp(mp.mpf(eps)))
        p = 1 - q
        return _split(k * q), _split(k * p), _split(mp.log(q)), _split(mp.log1p(-q)), _split(-mp.log(k * p * q))


def binomial_log_pmf(eps: float, k: int, m: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(log P[M = m], a bound on its absolute error) for M ~ Bin(k, p), p = e^eps/(1+e^eps),
    integers 0 <= m <= k (an array; k <= MAX_K = 10^12 < 2^53, so k, m, j = k - m are exact
    in either type), computed in ``dtype`` (float64, or numpy.longdouble for the extended
    precision: its unit roundoff enters the bound).

    The bound, term by term (u the unit roundoff of ``dtype``: 2^-53, or 2^-64 for x87 long
    double; first order in u, every charge below exceeding its derived value by more than
    the second-order terms; L = LIBM_ULPS = 4: a log or log1p is within L ulps <= 2L u = 8u
    relative, assumption 2 of :mod:`optcomp._rounding`, the only library assumption here):

    * constants: kq, kp, log q, log p, c = -log(k p q), 1/2 log(2 pi) (``half``) and the
      stirlerr table come from 40-digit mpmath as double-doubles, within 2^-105 relative;
      rounded once to ``dtype`` they carry u.
    * stirlerr (:func:`_stirlerr`): u (table) or 3.01u (series) of s(n); st = (s_k - s_j) -
      s_m adds two roundings: 5.01 u (s_k + s_j + s_m) <= 1.02 u (the largest sum, j = m = 1,
      is 0.2035).
    * bd0 (:func:`_bd0`): near the mean (7 + 1.04 steps) u bd0 (:func:`_bd0_near`); the two
      series 16u bd0; the closed form (2L + 8) u (|x log(x/M)| + |M - x| + u M).  Using the
      double-double M' for M moves each bd0 by <= |x - M| 2^-105 < k 2^-105 < 2^-65 (k < 2^40).
    * L = log(k/(j m)): when both bd0 are near, L = ((c_hi - l1) - l2) + c_lo with l_i =
      log1p(d_i/M_i), |d_i/M_i| < 0.223: the argument carries 3u (d, M rounded to one
      float, the division), which moves l_i by <= 1.108 (3u) |l_i| (the largest |z/((1 + z)
      log1p z)| on (-0.182, 0.223)), and log1p 2L u: 11.33u |l_i|, charged (2L + 4) u; three
      roundings, 3u (|c_hi| + |l1| + |l2|) (|c_lo| <= u |c_hi|).  Otherwise L = (log k -
      log j) - log m: 2L u per log and two roundings, (2L + 2) u (|log k| + |log j| + |log m|).
    * the sum (((st - b1) - b2) + L/2) - half (L/2 exact): four roundings, each within u of a
      partial sum, and the partial sums add up to at most 4 (|st| + b1 + b2 + |L|/2) + half;
      half itself carries u half.

    Total: e1 + e2 + err_L/2 + 4u (b1 + b2 + |L|/2 + |st|) + (1.02 + 2 (0.919)) u, plus the
    double-double terms (the two bd0 above, and 2^-105 of c, half and the table: 2^-93),
    <= 2^-64 + 2^-93 <= 1.01u: charged e1 + e2 + err_L/2 + 4u (b1 + b2 + |L|/2 + 2 |st| + 1)
    + u (the constant 5u >= 3.87u).  m = 0 or m = k: k log q (k log p),
    the constant's u and the product's u, charged 8u |k log q| + 4u."""
    dt = np.dtype(dtype).type
    u = _U if dt is np.float64 else _U_XP
    kq, kp, lq, lp, c_log = _parameters(float(eps), int(k))
    kk = dt(k)
    return _log_pmf(dt, u, np.asarray(m, dtype=np.int64), k, kk, np.log(kk), _stirlerr(np.array([kk]))[0],
                    kq, kp, lq, lp, c_log, 0.0)


def _log_pmf(dt, u, m, k, kk, lk, st_k, kq, kp, lq, lp, c_log, c_err):
    """The formula of :func:`binomial_log_pmf` (its docstring has the bound): k, kk = k in
    ``dt``, lk = log k, st_k = stirlerr(k), kq, kp, c_log (double-doubles) one each for all m
    (scalars) or one per m (arrays of m's shape); ``c_err`` bounds an error of c_log's high
    part beyond the derivation's (0 when it is the 40-digit constant)."""
    y = m.astype(dt)  # successes (prob p)
    j = (k - m).astype(dt)  # failures (prob q)
    out = np.empty(y.shape, dtype=dt)
    err = np.empty(y.shape, dtype=dt)
    half = _const(dt, *_constants()[0])
    per_atom = np.ndim(kk) > 0

    def at(v, mask):
        return v[mask] if per_atom else v

    # every term is within a few u of its value; the sum of the five rounds once per term
    # (u of each partial sum, each at most the sum of the magnitudes)

    def mid_terms(ym, jm, sel):
        (kqh, kql), (kph, kpl) = [(at(h, sel), at(lo, sel)) for h, lo in (kq, kp)]
        b1, e1, dj, near1 = _bd0(jm, kqh, kql, u)
        b2, e2, dm, near2 = _bd0(ym, kph, kpl, u)
        st = at(st_k, sel) - _stirlerr(jm) - _stirlerr(ym)
        if near1 and near2:
            # log(k/(j m)) = -log(k p q) - log1p(dj/kq) - log1p(dm/kp): a constant (a
            # double-double) and two small logarithms (|d/M| < 0.223) instead of three
            # logs of size log k; log1p within 2L u, its argument within 3 u (so <= 3.33 u
            # of the result more), three additions
            l1 = np.log1p(dj / (dt(kqh) + dt(kql)))
            l2 = np.log1p(dm / (dt(kph) + dt(kpl)))
            c_hi, c_lo = at(c_log[0], sel), at(c_log[1], sel)
            L = ((dt(c_hi) - l1) - l2) + dt(c_lo)
            err_L = 3.0 * u * (abs(c_hi) + np.abs(l1) + np.abs(l2)) + (_FN + 4.0) * u * (np.abs(l1) + np.abs(l2)) \
                + at(c_err, sel)
        else:
            lj, ly = np.log(jm), np.log(ym)
            lkm = at(lk, sel)
            L = (lkm - lj) - ly  # logs within L ulps (2L u), two additions
            err_L = (_FN + 2.0) * u * (lkm + np.abs(lj) + np.abs(ly))
        val = st - b1 - b2 + 0.5 * L - half
        # four additions (u of each partial sum, each at most the sum of the magnitudes),
        # the terms' own errors, the stirlerr values (a few u of < 0.25) and half (u)
        return val, e1 + e2 + 4.0 * u * (b1 + b2 + 0.5 * np.abs(L) + 2.0 * np.abs(st) + 1.0) + 0.5 * err_L + u

    mid = (m > 0) & (m < k)
    if mid.all():
        return mid_terms(y, j, slice(None))
    top = m == k  # p^k
    none = m == 0  # q^k
    for sel, (h, lo) in ((top, lp), (none, lq)):
        if np.any(sel):
            log1 = _const(dt, h, lo)
            kks = at(kk, sel)
            out[sel] = kks * log1
            err[sel] = 8.0 * u * abs(kks * log1) + 4.0 * u
    if np.any(mid):
        out[mid], err[mid] = mid_terms(y[mid], j[mid], mid)
    return out, err


def binomial_parameter(p, q=None) -> tuple:
    """The constants of :func:`binomial_log_pmf_rows` for Bin(k, p) with any p in (0, 1) given
    exactly (a Fraction, or an mpmath number; p and q = 1 - p at least 2^-800): p, q, log p,
    log q and log(p q) as double-doubles from 60-digit arithmetic (hashable: cache it).
    ``q``: 1 - p computed apart (an mpmath number), for a p within 60 digits of 1."""
    import mpmath as mp

    with mp.workdps(60):
        if hasattr(p, "denominator"):  # q from the exact 1 - p (1 - the 60-digit p loses q's digits near 1)
            pm = mp.mpf(p.numerator) / p.denominator
            qm = mp.mpf(p.denominator - p.numerator) / p.denominator
        else:
            pm = mp.mpf(p)
            qm = 1 - pm if q is None else mp.mpf(q)
        if not (pm >= mp.ldexp(1, -800) and qm >= mp.ldexp(1, -800)):
            raise ValueError(f"binomial parameter p={float(pm)!r} too close to 0 or 1")
        lp = mp.log1p(-qm) if q is not None and qm < 0.5 else mp.log(pm)
        return (_split(pm), _split(qm), _split(lp), _split(mp.log(qm)), _split(lp + mp.log(qm)))


def _two_product(a: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) with hi + lo = a b exactly (Dekker's splitting; float64, no over- or
    underflow: |a b| within [2^-900, 2^900], which the callers' ranges guarantee)."""
    hi = a * b
    sa = 134217729.0 * a
    ah = sa - (sa - a)
    al = a - ah
    sb = 134217729.0 * b
    bh = sb - (sb - b)
    bl = b - bh
    return hi, ((ah * bh - hi) + ah * bl + al * bh) + al * bl


def binomial_log_pmf_rows(par: tuple, k: np.ndarray, m: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """(log P[M = m], a bound on its absolute error) for M ~ Bin(k, p) with one (k, m) pair
    per entry of the arrays ``k`` and ``m`` (0 <= m <= k <= 10^12) and any p, given by
    ``par`` = :func:`binomial_parameter` (p): the formula and bound of
    :func:`binomial_log_pmf`, with kq = k q and kp = k p formed exactly in double-double
    (Dekker's product of the integer k and q's high part, plus k times its low part: within
    2^-104 relative, as the 40-digit constants) and c = -log(k p q) = -(log k + log(p q))
    from log k in ``dtype`` (L ulps) and two roundings, charged 2L u |log k| + 2u (|log k| +
    |log(p q)|) on top."""
    dt = np.dtype(dtype).type
    u = _U if dt is np.float64 else _U_XP
    (ph, pl), (qh, ql), lp, lq, lpq = par
    k = np.asarray(k, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    k, m = np.broadcast_arrays(k, m)
    kf = k.astype(np.float64)  # exact: k < 2^53
    kq, kp = [], []
    for h, lo in ((qh, ql), (ph, pl)):
        a, b = _two_product(kf, h)
        b = b + kf * lo
        s_ = a + b
        kq.append((s_, b - (s_ - a)))  # renormalised (|lo| <= ulp(hi)/2)
    kq, kp = kq
    kk = k.astype(dt)
    with np.errstate(divide="ignore"):
        lk = np.log(np.maximum(kk, dt(1)))
    c_hi = -(lk + dt(lpq[0]))
    c_err = (_FN + 2.0) * u * np.abs(lk) + 2.0 * u * abs(lpq[0])
    c_log = (c_hi, np.full(k.shape, -lpq[1]))
    return _log_pmf(dt, u, m, k, kk, lk, _stirlerr(np.maximum(kk, dt(1))), kq, kp, lq, lp, c_log, c_err)


# ln 2 = hi + lo, hi with 32 significant bits (so n * hi is exact for |n| < 2^21)
_LN2_DD = (0.6931471803691238, 1.9082149292705877e-10)
_LOG_FLOOR = -1.0e5  # log masses below are bounded by e^-1e5 = 0 (+ the subnormal charge)


def _exp_bounds(y, err, s: int, u: float):
    """Lower and upper bounds (doubles) on 2^s e^y' for every y' within err of y, from y,
    err in a precision of unit roundoff u, with an error independent of |y|: y = n ln 2 + r
    with n = rint(y / ln 2) and r = (y - n hi) - n lo (n hi exact for |n| < 2^18, n lo below
    3e-5; two roundings of at most u |r| <= 0.35 u each), so e^y = 2^n e^r and the power of two is
    applied exactly (ldexp) after e^r and the error factor e^(+-err) (two exps within L =
    LIBM_ULPS ulps, 2L u each, two products: (4L + 4) u = 20 u; the rounding to a double 2^-53 relative, or 2^-1075
    absolute when subnormal)."""
    dt = y.dtype.type
    y = np.maximum(y, dt(_LOG_FLOOR))
    n = np.rint(y * dt(1.0 / math.log(2.0)))
    r = (y - n * dt(_LN2_DD[0])) - n * dt(_LN2_DD[1])  # |r| <= 0.35 + tiny: two roundings <= 0.7 u
    base = np.exp(r)
    widen = np.exp(err + u)
    # 20 u for the exps and products, 2^-53 for the rounding to a double, 2^-53 for the product
    # by up/down themselves (in extended precision 20 u is far below 2^-53: 4 units of 2^-53 cover all)
    up, down = 1.0 + (4.0 * _U + (2.0 * _FN + 4.0) * u), 1.0 - (4.0 * _U + (2.0 * _FN + 4.0) * u)
    with np.errstate(under="ignore", over="ignore"):
        hi = (base * widen).astype(np.float64, copy=False) * up
        lo = (base / widen).astype(np.float64, copy=False) * down
        e2 = n.astype(np.int64) + s
        hi = np.ldexp(hi, e2) + 2.0**-1074
        lo = np.maximum(np.ldexp(lo, e2) - 2.0**-1074, 0.0)
    return lo, hi


exp_bounds = _exp_bounds  # (public name: the exact producers of mechanism laws use it too)

FILL_BLOCK = 32  # atoms per anchor of the ratio fill (see binomial_masses)
FILL_MIN = 4 * FILL_BLOCK  # windows (chunks) below this many atoms are computed atom by atom


def _ratio_products(eps: float, k: int, m0: int, n: int, B: int):
    """F[i] = P[M = m0 + i] / P[M = m0 + a(i)], a(i) = B floor(i / B) (the block's anchor, F
    = 1 there), and a bound on each one's relative error.  With j = i - a(i),
    F = e^{j eps} prod_{t<j} (k - m_t)/(m_t + 1) over m_t = m0 + a(i) + t: the integer
    ratios (k - m and m + 1 exact doubles, k < 2^53) are divided and multiplied up in
    double (two roundings per factor: (1 + u)^{2j} - 1 <= 2.01 j u), e^{j eps} is taken
    from a table of B values computed in the extended precision (j eps exact there for
    j < 2^11) and rounded to doubles (u, plus L = LIBM_ULPS ulps of the extended exp), and the final
    product rounds once more."""
    nb = -(-n // B)
    R = np.ones(nb * B)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        # factor i (i > 0): (k - m0 - i + 1) / (m0 + i)
        R[:n] = np.arange(k - m0 + 1, k - m0 + 1 - n, -1, dtype=np.float64) / np.arange(m0, m0 + n, dtype=np.float64)
        R[::B] = 1.0
        F = np.cumprod(R.reshape(nb, B), axis=1)
        jj = np.arange(B)
        if _U_XP < _U:
            Ej = np.exp(jj.astype(_XP) * _XP(eps)).astype(np.float64)
        else:  # pragma: no cover - platforms without an extended type: e^eps to the j-th power
            Ej = np.exp(jj * eps)
        F *= Ej[None, :]
        F = F.reshape(-1)[:n]
    j = (np.arange(n, dtype=np.int64) % B).astype(np.float64)
    # the error of e^{j eps}: L ulps (2L u) of the extended exp and the rounding to a double, or
    # (double only) the rounding of j eps, amplified by up to j eps, and the exp
    ej = _FN * _U_XP + _U if _U_XP < _U else 2.0 * _FN * _U * (1.0 + j * max(eps, 1.0))
    return F, j * (2.01 * _U) + ej + _U


def binomial_masses(eps: float, k: int, m_lo: int, m_hi: int, log2_scale: int | None = None, refine: bool = True):
    """Lower and upper bounds on 2^s P[M = m] for m in [m_lo, m_hi], and s.

    ``log2_scale`` s: the masses are returned multiplied by 2^s (exactly: a power of two);
    ``None`` picks s >= 0 so that the largest mass of the window's first 2^18 atoms is
    about 1 (s <= 1000), so that masses down to ~1e-600 stay normal floats; a mass that
    would overflow after scaling is +inf (an upper bound still).  Masses whose double
    bound is above ``REFINE_ERR`` and that are normal floats after the scaling are
    recomputed in extended precision (unless not ``refine``: a root eps_g is insensitive
    to the masses' relative errors where they are deep in the tail).

    Wide windows (>= FILL_MIN atoms, eps <= 700, k < 2^53) are computed at the anchors
    m = 0 mod FILL_BLOCK (as above) and filled between anchors by products of the pmf
    ratios (:func:`_ratio_products`, relative error <= 7.3e-15 with an extended type):
    ~10x faster than atom by atom.  A filled mass carries its *anchor's* relative bracket
    plus that (and the 4 u of the three products below) on each side.  The anchor's
    bracket is the atom-by-atom one at the anchor, which stays in double precision when its
    log error is below ``REFINE_ERR``: with refinement a filled mass is within
    2 REFINE_ERR + 2 (7.6e-15) + 48 u <= 2.6e-13 relative, though its own atom-by-atom
    bracket may be far tighter (refined because its log error is just above the threshold).
    A block whose anchor is not a normal float after the scaling, and every filled mass
    whose upper bound is below 2^-1000 (or not finite), is computed atom by atom instead,
    so all products stay normal (their rounding is then relative)."""
    n = m_hi - m_lo + 1
    p_lo, p_up = np.empty(n), np.empty(n)
    chunk = 1 << 18  # bounded temporaries whatever the window
    fill = eps <= 700.0 and k < 2**53

    def direct(m: np.ndarray, scale: int | None):
        logp, err = binomial_log_pmf(eps, k, m)
        if scale is None:  # from the first chunk's largest mass (windows start near the mode)
            top = float(np.max(logp))
            scale = int(min(1000, max(0, math.floor(-top / math.log(2.0)))))
        lo_, hi_ = _exp_bounds(logp, err, scale, _U)
        # refined: loose masses that are normal floats after the scaling (the others are
        # charged 2^-1074 absolute each, whatever their relative error)
        fine = (err > REFINE_ERR) & (logp > -740.0 - scale * math.log(2.0))
        if refine and _U_XP < _U and np.any(fine):
            ly, ey = binomial_log_pmf(eps, k, m[fine], dtype=_XP)
            lo_[fine], hi_[fine] = _exp_bounds(ly, ey, scale, _U_XP)
        return lo_, hi_, scale

    for a in range(0, n, chunk):
        m = np.arange(m_lo + a, min(m_lo + a + chunk, m_hi + 1), dtype=np.int64)
        if not fill or m.size < FILL_MIN:
            lo_, hi_, log2_scale = direct(m, log2_scale)
        else:
            # anchors at the multiples of B (whatever the window: every window gives an atom
            # the same bounds), the blocks computed from the multiple of B at or below m[0]
            B = FILL_BLOCK
            m_a = (int(m[0]) // B) * B
            pre = int(m[0]) - m_a
            alo, ahi, log2_scale = direct(np.arange(m_a, int(m[-1]) + 1, B, dtype=np.int64), log2_scale)
            F, ferr = _ratio_products(eps, k, m_a, m.size + pre, B)
            F, ferr = F[pre:], ferr[pre:]
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                # three more roundings of a double (F times the anchor, times the factor, the factor)
                hi_ = (np.repeat(ahi, B)[pre:pre + m.size] * F) * (1.0 + (ferr + 4.0 * _U))
                lo_ = (np.repeat(alo, B)[pre:pre + m.size] * F) * (1.0 - (ferr + 4.0 * _U))
            # anchors must be normal (their bounds then relative: 2^-1074 absolute is < 2^-74 of them)
            anchor_ok = np.repeat((alo >= 2.0**-1000) & np.isfinite(ahi), B)[pre:pre + m.size]
            bad = ~anchor_ok | ~(hi_ >= 2.0**-1000) | ~np.isfinite(hi_) | ~(F > 0.0) | ~np.isfinite(F)
            if np.any(bad):
                lo_[bad], hi_[bad], _ = direct(m[bad], log2_scale)
        p_lo[a:a + m.size], p_up[a:a + m.size] = lo_, hi_
    return p_lo, p_up, log2_scale
