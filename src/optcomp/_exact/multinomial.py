r"""Multinomial rows (layer L3): the exact composition of finite laws too large to list.

k copies of a law with atoms l_1 < ... < l_m (normalised masses p_a) have the multinomial
law of the count vector.  Pick two atoms a < b of the *main* factor (the pivot pair: the
heaviest two above its lowest atom) and enumerate everything else -- the counts of the
main factor's other atoms, and every count vector of the other factors (black-box groups,
other mechanisms) -- as *outer atoms* i: a shift S_i, the number N_i of the main factor's
copies left for the pivot pair, and the weight w_i (a product of binomial masses: the
sequential decomposition of each multinomial).  Given outer atom i the pivot count n of
atom b is Bin(N_i, pi), pi = p_b / (p_a + p_b), and the loss is the row

    L = S_i + N_i l_a + n beta,   beta = l_b - l_a > 0,

so H(x) = sum_i w_i H_i(x), H_i a binomial row's hockey stick.  Row i's atoms above x start
at n_1 = floor(y_i / beta) + 1, y_i = x - S_i - N_i l_a; the first M of them (M beta >= 1/4)
are summed term by term (``-expm1`` of their exact distance: no cancellation), the rest in
closed form,

    sum_{n >= f} b(n) (1 - e^{x - L(n)}) = A(N, f) - e^{-(f beta - y)} B(N, f),
    A(N, f) = P[Bin(N, pi) >= f],   B(N, f) = sum_{j >= f} b(j) e^{-(j - f) beta},

whose difference is at least (1 - e^{-M beta}) A: a relative error grows by at most
1/(1 - e^{-1/4}) < 4.6.

**Tails.**  A and B obey A(N + 1, n) = A(N, n) + pi b(N, n - 1), A(N, n - 1) = A(N, n) +
b(N, n - 1), B(N + 1, n) = rho B(N, n) + pi b(N, n - 1) (rho = 1 - pi + pi e^-beta, formed as
p_a/(p_a + p_b) + pi e^-beta: pi may round to 1) and
B(N, n - 1) = b(N, n - 1) + e^-beta B(N, n): positive combinations only, while N grows and
n falls.  With the pivot pair above the main factor's lowest atom the rows' thresholds fall
as N grows (one copy fewer at the lowest atom raises the row), so one chain over the
distinct N ascending (thresholds made monotone by a suffix maximum) gives every A and B from
one pair summed directly, in long double (2^-64 a step, over at most a few 10^4 steps), and
each outer atom's own threshold by the terms between (:func:`_chain`).

**Masses.**  A binomial mass is e^y with y from :func:`optcomp._binomial.binomial_log_pmf_rows`
(Loader's saddle-point form, parameters in double-double: an error bound independent of k;
long double where the bound exceeds 2^-43), exponentiated in long double (range to 1e-4932:
no scaling).  The masses of a path of (N, n) pairs one step apart (the near atoms row by
row, the chain's terms) are certified every PATH_ANCHOR steps and multiplied up between by
the exact pmf ratios (:class:`_Path`).  Lower and upper bounds are carried through every sum.

**Windows.**  Each enumerated count is cut to a window of its marginal Bin(c, p_a) whose two
tails are certified (Chernoff quantiles, checked by the geometric series of the pmf ratio)
to weigh at most eps / (2 windows); the tuples outside are charged (+inf for the upper
bound, dropped for the lower), eps = 2^-56 of the target t, or of the H found (checked, and
narrowed again if needed).  The pivot pair is never cut.  A main factor with several outer
atoms at rational positions (a :class:`~optcomp.mechanisms.Profile`: 2 per guarantee) is
enumerated merged by position on their common lattice (:meth:`RowLaw._outer_lattice`).

**Roots.**  eps_g by Newton's method on log H (d log H / dx = 1 - P[L > x] / H) from the
saddle-point estimate, safeguarded by a bracket; the float returned is one where the
certified upper bound on H is below t, and the lower end one where the lower bound is
above t: both checked, never assumed.

Positions are double-doubles (2^-100 relative), with exact rational positions where the
laws have them to decide an atom within rounding of x.  Memory: no array beyond
MAX_ELEMENTS entries (ExactTooLarge before it).

Length (~1140 lines): the binomial rows, their windows and paths, the outer law (vectors or a
lattice) and the eps_g root share the double-double and long-double arithmetic they charge;
split apart, each piece would re-derive the other's error bounds.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from .._binomial import binomial_log_pmf_rows, binomial_parameter
from .._cgf import binomial_quantile
from .._types import ExactTooLarge
from .._rounding import down, up
from .finite import PREC, Composition, LawSolver

__all__ = ["RowLaw", "OUTER_MAX"]

OUTER_MAX = 2**16  # outer atoms (enumerated tuples) of one composition at most (building one takes
# ~15 us, and a root walks them ~10 times: 2^16 is ~2 s; DiscreteGaussian(1.0) x 3 beside a Geometric,
# 232,890 count vectors, took 5 s alone, 15-40 s under load, where the lattice answers in 0.1 s)
MAX_ELEMENTS = 2**22  # the largest array of one evaluation (long doubles: 64 MiB), else ExactTooLarge
#: the most (row, near atom) pairs one evaluation of H walks (~1 us each: ~0.5 s an evaluation,
#: a root takes ~10), else ExactTooLarge -- beyond it the certified lattice is the faster answer
#: (a 10-atom Profile x 30: 38 s here against 20 ms for a bracket 4e-11 wide; Geometric(1e-3,
#: sensitivity 4096) x 2: 38 s)
MAX_ROW_ATOMS = 2**19
#: rows whose evaluation is estimated beyond this many chain terms (:meth:`RowLaw.terms`; a root
#: costs ~0.2-1 ms a term, measured) yield to the split law where one exists: black boxes of eps
#: beside a randomized response of eps 1 walk 1/eps terms -- 1e-4 x 10^5: 12 s by the rows, 0.8 s
#: split; 1e-6 x 10^12: 10^6 terms, ~16 s an evaluation, against ~3 s in all for the split law
ROW_TERMS = 2**12
ROW_REL_MAX = 2.0**-30  # the far sums' relative error (from e^-beta's) the rows accept
REFINE_ERR = 2.0**-43  # log-pmf bounds above this are recomputed in long double
TAIL_REL = 2.0**-56  # mass cut by the windows, relative to the target (or to H)
_LD = np.longdouble
_U = float(np.finfo(_LD).epsneg) if np.finfo(_LD).nmant > 52 else 2.0**-53  # long double unit roundoff
PATH_ANCHOR = 1024  # masses along a path: a certified one every this many steps, ratios between
PATH_STEP = 4  # the largest step (in N, n and N - n) a path's ratios bridge


# --------------------------------------------------------------------------- double-doubles


def _split_dd(x) -> tuple[float, float]:
    """An exact Fraction or an mpmath number as a double-double (hi, lo)."""
    if isinstance(x, Fraction):
        hi = float(x)
        return hi, float(x - Fraction(hi))
    hi = float(x)
    return hi, float(x - hi)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    p = a * b
    sa = 134217729.0 * a
    ah = sa - (sa - a)
    al = a - ah
    sb = 134217729.0 * b
    bh = sb - (sb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_add(ah, al, bh, bl):
    s, e = _two_sum(ah, bh)
    e = e + (al + bl)
    hi = s + e
    return hi, e - (hi - s)


def _dd_scale(n, h, lo):
    """n (integers as float64 arrays, exact) times the double-double (h, lo)."""
    p, e = _two_prod(n, h)
    e = e + n * lo
    hi = p + e
    return hi, e - (hi - p)


def _ld(hi, lo):
    return np.asarray(hi, dtype=_LD) + np.asarray(lo, dtype=_LD)


# --------------------------------------------------------------------------- binomial masses


def _fact_ratio_const(a: np.ndarray, d: int) -> np.ndarray:
    """a! / (a - d)! for integers a >= 0 and one step d (|d| small), in long double: d
    factors (d > 0) multiplied, or the reciprocal of -d factors."""
    out = np.ones(a.shape, dtype=_LD)
    af = a.astype(_LD)
    if d > 0:
        for j in range(d):
            out *= af - j
    elif d < 0:
        den = np.ones(a.shape, dtype=_LD)
        for j in range(1, -d + 1):
            den *= af + j
        out = out / den
    return out


class _Path:
    """(N_k, n_k) pairs forming a path for the binomial masses b(N, n) of any p: consecutive
    pairs at most PATH_STEP apart in N, n and N - n are bridged by the exact step ratio
    b(N', n') / b(N, n) = [N'!/N!][n!/n'!][(N - n)!/(N' - n')!] p^{dn} q^{d(N - n)} (its
    combinatorial part ``comb`` here, shared by every p); anchors -- every PATH_ANCHOR-th
    pair, and wherever the path jumps or leaves the support -- get certified masses.  A ratio
    costs at most 3 PATH_STEP + 2 long double roundings, the products within a block one
    each and the division by the anchor's product one more, so a mass is within
    (3 PATH_STEP + 4) PATH_ANCHOR 2^-64 (< 1.8e-15) relative of its anchor's bracket
    (``grow``)."""

    def __init__(self, N, n):
        N = np.asarray(N, dtype=np.int64)
        n = np.asarray(n, dtype=np.int64)
        self.N, self.n = N, n
        L = N.size
        valid = (n >= 0) & (n <= N)
        dN, dn = np.diff(N), np.diff(n)
        dm = dN - dn
        D = PATH_STEP
        self.near = (np.abs(dN) <= D) & (np.abs(dn) <= D) & (np.abs(dm) <= D) & valid[:-1] & valid[1:]
        k = np.arange(L)
        anchor = np.ones(L, dtype=bool)
        anchor[1:] = ~self.near | (k[1:] % PATH_ANCHOR == 0)
        anchor &= valid
        self.anchors = np.nonzero(anchor)[0]
        self.follow = np.nonzero(valid & ~anchor)[0]
        self.start = np.maximum.accumulate(np.where(anchor | ~valid, k, 0))
        self.dn_c = np.clip(dn, -D, D)
        self.dm_c = np.clip(dm, -D, D)
        if self.follow.size:
            # by step type (dN, dn): a few distinct ones per path, each a product of integers
            self.comb = np.ones(L - 1, dtype=_LD)
            N1, n1, m1 = N[1:], n[1:], (N - n)[1:]
            kind = (dN + D) * (2 * D + 1) + (dn + D)
            for kd in np.unique(kind[self.near]).tolist():
                sel = np.nonzero(self.near & (kind == kd))[0]
                a, b = divmod(kd, 2 * D + 1)
                self.comb[sel] = _fact_ratio_const(N1[sel], a - D) / _fact_ratio_const(n1[sel], b - D) / \
                    _fact_ratio_const(m1[sel], (a - D) - (b - D))
        self.grow = _LD(1.0 + (3 * D + 4) * PATH_ANCHOR * 2.0 * _U)


class _Binom:
    """Bin(N, p) for one exactly given p: masses of (N, n) pairs in long double, with bounds.
    ``q``: 1 - p computed apart (a quotient of masses), when p may lie within 2^-256 of 1 (the
    pivot of Pair((1e-300, 1), (1, 1e-300)): 1 - p would be 0, every mass below N NaN)."""

    def __init__(self, p, q=None):
        with mpmath.workdps(60):
            if isinstance(p, Fraction):  # q from the exact 1 - p (1 - the 60-digit p loses q's digits near 1)
                pm = mpmath.mpf(p.numerator) / p.denominator
                qm = mpmath.mpf(p.denominator - p.numerator) / p.denominator
            else:
                pm = mpmath.mpf(p)
                qm = 1 - pm if q is None else mpmath.mpf(q)
            self.p, self.q = float(pm), float(qm)
            self.odds, self.inv_odds = float(pm / qm), float(qm / pm)  # (no 1/0 for a q below the floats)
            self.p_ld, self.q_ld = _ld(*_split_dd(pm)), _ld(*_split_dd(qm))  # within 2^-64 relative
            self.lp, self.lq = float(mpmath.log(pm)), float(mpmath.log(qm))
        try:
            self.par = binomial_parameter(p if isinstance(p, Fraction) else pm, None if q is None else qm)
            self.tiny = None
        except ValueError:  # p or q below 2^-800 (a double-double cannot carry k p): 60 digits
            self.par = None
            self.tiny = pm
            with mpmath.workdps(60):
                self._mp_logs = ((mpmath.log1p(-qm), mpmath.log(qm)) if q is not None and qm < 0.5
                                 else (mpmath.log(pm), mpmath.log1p(-pm)))
        self._mp_memo = {}  # (N, n) -> (log pmf, error) of the 60-digit path

    def pmf(self, N: np.ndarray, n: np.ndarray, precise: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) long double bounds on P[Bin(N, p) = n] (0 outside 0..N); ``precise``:
        the log masses in long double throughout (~3x the time: for anchors)."""
        N = np.asarray(N, dtype=np.int64)
        n = np.asarray(n, dtype=np.int64)
        N, n = np.broadcast_arrays(N, n)
        lo = np.zeros(N.shape, dtype=_LD)
        hi = np.zeros(N.shape, dtype=_LD)
        ok = (n >= 0) & (n <= N)
        if not np.any(ok):
            return lo, hi
        y, err = self.log_pmf(N[ok], n[ok], precise)
        # exp in long double: L ulps, and 2 u for the products with the error factor
        f = _LD(1.0 + 16.0 * _U)
        with np.errstate(under="ignore"):
            lo[ok] = np.exp(y - err) / f
            hi[ok] = np.exp(y + err) * f
        return lo, hi

    def path(self, N: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pmf` of (N_k, n_k) pairs forming a path (see :class:`_Path`)."""
        if self.tiny is not None:
            return self.pmf(N, n)
        return self.on_path(_Path(N, n))

    def _log_pmf_mp(self, N, n) -> tuple[np.ndarray, np.ndarray]:
        """log pmf in 60-digit arithmetic, one pair at a time (p or q below 2^-800: the few
        counts of a window near 0 or N), its error 10^-50 of the terms' sizes."""
        N = np.broadcast_to(np.asarray(N, dtype=np.int64), np.shape(n))
        n = np.asarray(n, dtype=np.int64)
        y = np.empty(n.shape, dtype=_LD)
        err = np.empty(n.shape, dtype=_LD)
        memo = self._mp_memo  # (the same pairs recur at every evaluation of H: 280x at 1000 copies)
        with mpmath.workdps(60):
            for i, (kk, m) in enumerate(zip(N.ravel().tolist(), n.ravel().tolist())):
                if (kk, m) not in memo:
                    lp, lq = self._mp_logs
                    v = mpmath.loggamma(kk + 1) - mpmath.loggamma(m + 1) - mpmath.loggamma(kk - m + 1) + m * lp \
                        + (kk - m) * lq
                    memo[(kk, m)] = (_ld(*_split_dd(v)),
                                     _LD(float(abs(v) + abs(m * lp) + abs((kk - m) * lq)
                                               + 10 * (abs(mpmath.loggamma(kk + 1)) + 1)) * 1e-50
                                         + 2.0**-62 * (float(abs(v)) + 1)))
                y.ravel()[i], err.ravel()[i] = memo[(kk, m)]
        return y, err

    def on_path(self, path: "_Path") -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pmf` along ``path``: the certified masses (long double logs) at its anchors,
        between them the anchor times the exact step ratios (:class:`_Path`)."""
        L = path.N.size
        lo = np.zeros(L, dtype=_LD)
        hi = np.zeros(L, dtype=_LD)
        a_idx = path.anchors
        if a_idx.size:
            lo[a_idx], hi[a_idx] = self.pmf(path.N[a_idx], path.n[a_idx], precise=True)
        f = path.follow
        if f.size == 0:
            return lo, hi
        D = PATH_STEP
        table_p = np.array([self.p_ld ** j for j in range(-D, D + 1)], dtype=_LD)
        table_q = np.array([self.q_ld ** j for j in range(-D, D + 1)], dtype=_LD)
        r = np.ones(L, dtype=_LD)  # r[j] = b(j) / b(j - 1) on near steps
        r[1:] = np.where(path.near, path.comb * table_p[path.dn_c + D] * table_q[path.dm_c + D], 1)
        pad = (-L) % PATH_ANCHOR
        blocks = np.concatenate([r, np.ones(pad, dtype=_LD)]).reshape(-1, PATH_ANCHOR)
        blocks[:, 0] = 1
        a = path.start[f]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            P = np.cumprod(blocks, axis=1).ravel()[:L]
            ratio = P[f] / P[a]
        # a block whose products leave long double's range (ratios of 1e-20 a step, 256 steps:
        # Pair((1e-20, 1), (1, 1e-20)) x 10^6): those masses directly, certified one by one
        # (or whose products go subnormal, losing the relative accuracy of one rounding a step)
        normal = _LD(np.finfo(_LD).tiny)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(ratio) | ~(ratio > 0) | ~(np.abs(P[f]) >= normal) | ~(np.abs(P[a]) >= normal) \
                | ~np.isfinite(P[f]) | ~np.isfinite(P[a])
        if np.any(bad):
            fb = f[bad]
            lo[fb], hi[fb] = self.pmf(path.N[fb], path.n[fb], precise=True)
            f, a, ratio = f[~bad], a[~bad], ratio[~bad]
        lo[f] = lo[a] * ratio / path.grow
        hi[f] = hi[a] * ratio * path.grow
        return lo, hi

    def log_pmf(self, N: np.ndarray, n: np.ndarray, precise: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(log P[Bin(N, p) = n], error bound) in long double, 0 <= n <= N (refined in long
        double where the float64 bound exceeds REFINE_ERR, or everywhere when ``precise``)."""
        if self.tiny is not None:
            return self._log_pmf_mp(N, n)
        if precise:
            return binomial_log_pmf_rows(self.par, N, n, dtype=_LD)
        y, err = binomial_log_pmf_rows(self.par, N, n)
        y, err = y.astype(_LD), err.astype(_LD)
        loose = err > REFINE_ERR
        if np.any(loose):
            y[loose], err[loose] = binomial_log_pmf_rows(self.par, np.asarray(N)[loose] if np.ndim(N) else N,
                                                         np.asarray(n)[loose], dtype=_LD)
        return y, err

    def tail(self, N: int, f: int) -> tuple:
        """Long double bounds (lower, upper) on U(N, f) = P[Bin(N, p) >= f], summed directly:
        terms from f up (f above the mean) or 1 minus the terms below f (f at or below it), in
        blocks until a geometric bound of the rest -- the pmf ratio falls monotonically away
        from the mean -- is below 2^-80 of the sum."""
        if f <= 0:
            return _LD(1), _LD(1)
        if f > N:
            return _LD(0), _LD(0)
        upper = f >= N * self.p
        s_lo, s_hi, terms = _LD(0), _LD(0), 0
        start = f if upper else f - 1
        block = 256
        rest = _LD(0)
        while True:
            idx = np.arange(start, min(start + block, N + 1)) if upper else np.arange(start, max(start - block, -1), -1)
            lo, hi = self.path(np.full(idx.size, N), idx)
            s_lo += np.sum(lo)
            s_hi += np.sum(hi)
            terms += idx.size
            last = int(idx[-1])
            if (upper and last >= N) or (not upper and last <= 0):
                rest = _LD(0)
                break
            # the pmf ratio after the last term (beyond the mean it only falls further): a
            # geometric bound on the rest (the ratio from floats, raised by 1e-12)
            r = (N - last) / (last + 1.0) * self.odds if upper else last / (N - last + 1.0) * self.inv_odds
            r = r * (1.0 + 1e-12) + 1e-300
            if r < 1.0:
                rest = hi[-1] * _LD(r / (1.0 - r)) * _LD(1.0 + 1e-12)
                if rest <= s_lo * _LD(2.0**-80):
                    break
            start = last + 1 if upper else last - 1
            block = min(block * 4, 1 << 16)
        grow = _LD(1.0 + (terms + 8) * _U)  # the sums' roundings (positive terms)
        if upper:
            return s_lo / grow, (s_hi + rest) * grow
        return max(_LD(0), 1 - (s_hi + rest) * grow), min(_LD(1), 1 - s_lo / grow)


    def discounted(self, N: int, f: int, disc) -> tuple:
        """Long double bounds (lower, upper) on B(N, f) = sum_{j >= f} b(N, j) disc^(j - f)
        (0 < disc < 1, a long double): terms from max(f, 0) up until the term ratio
        b(j + 1) disc / b(j) -- falling in j, the pmf being log-concave -- is below 1 and the
        geometric bound of the rest below 2^-80 of the sum."""
        if f > N:
            return _LD(0), _LD(0)
        j0 = max(f, 0)
        s_lo, s_hi, terms = _LD(0), _LD(0), 0
        start, block = j0, 256
        rest = _LD(0)
        while True:
            idx = np.arange(start, min(start + block, N + 1))
            lo, hi = self.path(np.full(idx.size, N), idx)
            w = disc ** (idx - f).astype(_LD)  # (powl: within L ulps, charged below)
            s_lo += np.sum(lo * w)
            s_hi += np.sum(hi * w)
            terms += idx.size
            last = int(idx[-1])
            if last >= N:
                break
            r = (N - last) / (last + 1.0) * self.odds * float(disc)
            r = r * (1.0 + 1e-12) + 1e-300
            if r < 1.0:
                rest = hi[-1] * w[-1] * _LD(r / (1.0 - r)) * _LD(1.0 + 1e-12)
                if rest <= s_lo * _LD(2.0**-80):
                    break
            start = last + 1
            block = min(block * 4, 1 << 16)
        grow = _LD(1.0 + (terms + 8 + 16) * _U)  # the sums' roundings, the powers
        return s_lo / grow, (s_hi + rest) * grow


def _discounted_start(binom: _Binom, disc, q, N: int, f: int) -> tuple:
    """B(N, f) = sum_{j >= f} b(N, j) disc^(j - f) (:meth:`_Binom.discounted`); at or below the
    mean of the discounted law, by the closed form B = disc^-f rho^N Q[Bin(N, pi') >= f]
    (b(j) disc^j = rho^N Bin(N, pi')(j): ``q`` = (that binomial, log rho and beta as long
    doubles, a bound on the error of f beta + N log rho per unit of f + N)), the Q-tail by its
    complement: a direct sum from f up would run to the mean."""
    qb, log_rho, beta, err_unit = q
    if f > N or f > N * qb.p:
        return binom.discounted(N, f, disc)
    t_lo, t_hi = qb.tail(N, f)
    lf = _LD(f) * beta + _LD(N) * log_rho
    e = _LD(4 * _U) * (abs(_LD(f) * beta) + abs(_LD(N) * log_rho)) + _LD(err_unit * (f + N))
    with np.errstate(under="ignore", over="ignore"):
        return np.exp(lf - e) * t_lo / _LD(1 + 16 * _U), np.exp(lf + e) * t_hi * _LD(1 + 16 * _U)


def _chain(binom: _Binom, disc, N: np.ndarray, f: np.ndarray, q=None):
    """Long double bounds on A_i = U(N_i, f_i) = P[Bin(N_i, p) >= f_i] and on the discounted
    tails B_i = sum_{j >= f_i} b(N_i, j) disc^(j - f_i) for all i, by the chain of the module
    docstring: over the distinct N ascending, with thresholds made non-increasing (a suffix
    maximum), A(N + 1, n) = A(N, n) + p b(N, n - 1), A(N, n - 1) = A(N, n) + b(N, n - 1),
    and B(N + 1, n) = rho B(N, n) + p b(N, n - 1) (rho = q + p disc), B(N, n - 1) =
    b(N, n - 1) + disc B(N, n): positive combinations only, in long double (one path of
    masses for all steps); then each atom from its N's threshold down to its own f.
    Returns (A_lo, A_hi, B_lo, B_hi)."""
    size = N.size
    out = [np.zeros(size, dtype=_LD) for _ in range(4)]
    act = f <= N
    if not np.any(act):
        return out
    Na, fa = N[act], np.maximum(f[act], 0)
    keys, inv = np.unique(Na, return_inverse=True)  # distinct N ascending
    F = np.full(keys.size, np.iinfo(np.int64).min)
    np.maximum.at(F, inv, fa)
    nt = np.maximum.accumulate(F[::-1])[::-1]  # suffix maximum: non-increasing as N grows
    K = keys.size
    p_ld = binom.p_ld
    rho = binom.q_ld + p_ld * disc
    # the chain's operations, in order: per step k, N' = keys[k] .. keys[k+1] - 1 at n = nt[k]
    # (term p b(N', nt[k] - 1); B multiplied by rho), then n' = nt[k] - 1 down to nt[k+1] at
    # N = keys[k+1] (term b(N, n'); B multiplied by disc) -- consecutive ops one unit apart
    gaps = np.diff(keys)
    drops = nt[:-1] - nt[1:]
    per_step = gaps + drops
    tot = int(np.sum(per_step))
    step_of = np.repeat(np.arange(K - 1), per_step)
    pos = np.arange(tot) - np.repeat(np.cumsum(per_step) - per_step, per_step)  # index within the step
    is_gap = pos < gaps[step_of]
    opN = np.where(is_gap, keys[:-1][step_of] + pos, keys[1:][step_of])
    opn = np.where(is_gap, nt[:-1][step_of] - 1, nt[:-1][step_of] - 1 - (pos - gaps[step_of]))
    g_lo, g_hi = binom.path(opN, opn)
    g_lo = np.where(is_gap, g_lo * p_ld, g_lo)
    g_hi = np.where(is_gap, g_hi * p_ld, g_hi)
    alpha = np.where(is_gap, rho, disc).astype(_LD)
    a0 = binom.tail(int(keys[0]), int(nt[0]))
    b0 = _discounted_start(binom, disc, q, int(keys[0]), int(nt[0])) if q is not None else \
        binom.discounted(int(keys[0]), int(nt[0]), disc)
    # A: cumulative sums; B: the linear recurrence B <- alpha B + g, blockwise
    ends = np.cumsum(per_step)  # op index after which key k + 1 is reached
    A_lo = np.empty(K, dtype=_LD)
    A_hi = np.empty(K, dtype=_LD)
    B_lo = np.empty(K, dtype=_LD)
    B_hi = np.empty(K, dtype=_LD)
    A_lo[0], A_hi[0] = a0
    B_lo[0], B_hi[0] = b0
    if tot:
        ca_lo = a0[0] + np.cumsum(g_lo)
        ca_hi = a0[1] + np.cumsum(g_hi)
        A_lo[1:], A_hi[1:] = ca_lo[ends - 1], ca_hi[ends - 1]
        cb_lo = _linear_recurrence(alpha, g_lo, b0[0])
        cb_hi = _linear_recurrence(alpha, g_hi, b0[1])
        B_lo[1:], B_hi[1:] = cb_lo[ends - 1], cb_hi[ends - 1]
    # per atom: from nt(N) down to its own f: padded rows per distinct N (width + 1 columns,
    # the chain's value at column nt - fmin), suffix sums (A) and discounted ones (B)
    fmin = np.full(K, np.iinfo(np.int64).max)
    np.minimum.at(fmin, inv, fa)
    width = int(np.max(nt - fmin)) + 1
    if K * width > MAX_ELEMENTS or tot > MAX_ELEMENTS:
        raise ExactTooLarge(f"the multinomial rows' tails need {max(K * width, tot):,} terms (> {MAX_ELEMENTS:,}); "
                            "use method='approx' or 'auto'")
    nn = fmin[:, None] + np.arange(width)[None, :]
    live = nn < nt[:, None]
    rows = [np.zeros((K, width), dtype=_LD) for _ in range(4)]
    if np.any(live):
        t_lo, t_hi = binom.path(np.broadcast_to(keys[:, None], nn.shape)[live], nn[live])
        for r_ in (0, 2):
            rows[r_][live] = t_lo
        for r_ in (1, 3):
            rows[r_][live] = t_hi
    kk = np.arange(K)
    for r_, v in enumerate((A_lo, A_hi, B_lo, B_hi)):
        rows[r_][kk, nt - fmin] = v
    sA_lo = np.cumsum(rows[0][:, ::-1], axis=1)[:, ::-1]
    sA_hi = np.cumsum(rows[1][:, ::-1], axis=1)[:, ::-1]
    sB_lo, sB_hi = rows[2].copy(), rows[3].copy()
    for col in range(width - 2, -1, -1):
        sB_lo[:, col] += disc * sB_lo[:, col + 1]
        sB_hi[:, col] += disc * sB_hi[:, col + 1]
    col = fa - fmin[inv]
    # every sum of positive terms: (its number of additions and products) u relative
    grow = _LD(1.0 + (3 * tot + 3 * width + 64) * 2.0 * _U)
    vals = (sA_lo[inv, col] / grow, np.minimum(sA_hi[inv, col] * grow, _LD(1)), sB_lo[inv, col] / grow,
            sB_hi[inv, col] * grow)
    for o_, v in zip(out, vals):
        o_[act] = v
    return out


def _linear_recurrence(alpha: np.ndarray, g: np.ndarray, b0) -> np.ndarray:
    """B_k = alpha_k B_{k-1} + g_k (B_{-1} = b0), all terms positive, in long double: blocks of
    at most 256 steps, within a block B_k = P_k (B_start + sum_{j <= k} g_j / P_j) with P the
    cumulative product of alpha (relative error growing by ~3 u a step, as the sequential
    recurrence's), the block's last value carried to the next."""
    out = np.empty(g.size, dtype=_LD)
    carry = _LD(b0)
    # block length: the cumulative product of alpha >= disc stays above e^-10000 (long double)
    a_min = float(np.min(alpha)) if alpha.size else 1.0
    B = int(min(4096, max(16, 10000.0 / max(-math.log(max(a_min, 1e-4900)), 1e-9))))
    for s in range(0, g.size, B):
        a = alpha[s:s + B]
        P = np.cumprod(a)
        with np.errstate(over="ignore", under="ignore"):
            v = P * (carry + np.cumsum(g[s:s + B] / P))
        out[s:s + B] = v
        carry = v[-1]
    return out


# --------------------------------------------------------------------------- windows


def _window(c: int, binom: _Binom, log_tail: float) -> tuple[int, int, float]:
    """[lo, hi] of M ~ Bin(c, p) with P[M < lo] and P[M > hi] each at most e^log_tail (Chernoff
    quantiles, then checked by the geometric series of the pmf ratio at the edge and moved out
    until it holds), and the certified bound on the mass outside (unscaled float)."""
    lp, lq = binom.lp, binom.lq
    out = 0.0
    edges = []
    for upper in (True, False):
        aim = log_tail - math.log(math.sqrt(c * binom.p * binom.q) + 2.0)
        m, bound = (c, 0.0) if upper else (0, 0.0)
        for _ in range(12):
            m = min(c, binomial_quantile(c, lp, lq, aim)) if upper else max(0, c - binomial_quantile(c, lq, lp, aim))
            if (upper and m >= c) or (not upper and m <= 0):
                m, bound = (c, 0.0) if upper else (0, 0.0)
                break
            lb = _log_geometric(c, binom, m, upper)
            if lb <= log_tail:
                bound = math.exp(lb) * (1.0 + 1e-9) if lb > -745.0 else 5e-324
                break
            aim -= 16.0
        else:
            m, bound = (c, 0.0) if upper else (0, 0.0)
        edges.append(m)
        out += bound
    return edges[1], edges[0], up(out, 1)


def _log_geometric(c: int, binom: _Binom, m: int, upper: bool) -> float:
    """log of a bound on P[M > m] (``upper``) or P[M < m], M ~ Bin(c, p): the pmf at m times
    r/(1 - r), r the pmf ratio at m (monotone beyond the mode); +inf when r >= 1.  log r from
    the logs of p and 1 - p (each within an ulp of the 60-digit value): a p within 2^-54 of 1
    (or 0) leaves the float 1 - p (or p) at 0, where the ratio itself is tiny but not 0."""
    lp, lq = binom.lp, binom.lq
    if upper:
        log_r = math.log((c - m) / (m + 1.0)) + (lp - lq)
    else:
        log_r = math.log(m / (c - m + 1.0)) + (lq - lp)
    log_r += 1e-12 * (1.0 + abs(log_r) + abs(lp) + abs(lq))  # (the roundings: a few ulps of each term)
    if not log_r < 0.0:
        return math.inf
    r = math.exp(log_r)  # (may underflow to 0: then log1p(-r) = 0, the bound stays e^(log_r ...))
    y, err = binom.log_pmf(np.array([c]), np.array([m]))
    return float(y[0] + err[0]) + log_r - math.log1p(-r) + 1e-9


# --------------------------------------------------------------------------- the rows


LATTICE_R_MAX = 4096  # the most copies of the outer law convolved one by one (lattice mode)
LATTICE_POINTS = 2**20  # lattice points of the outer law at most


def _suffix_sums(masses) -> list:
    """The sums masses[j] + masses[j + 1] + ... for every j, in one pass from the end (a sum
    per j would be quadratic: 2^20 atoms of a Geometric with sensitivity 2^20).  Positive
    terms added at PREC + 64 bits, each addition rounded once: relative error at most
    len(masses) 2^-(PREC + 64) (< 2^-(PREC + 20) up to 2^44 terms), rounded to PREC bits
    once -- within the 2^-PREC relative of one rounded sum, as the callers assume."""
    out = [None] * len(masses)
    with mpmath.workprec(PREC + 64):
        acc = mpmath.mpf(0)
        for j in range(len(masses) - 1, -1, -1):
            acc = acc + masses[j]
            out[j] = acc
    with mpmath.workprec(PREC):
        return [+a for a in out]


def _common_unit(values) -> Fraction | None:
    """The largest u with every value an integer multiple of it (a gcd of rationals), or None
    when the multiples exceed 2^31 (no useful lattice)."""
    vals = [v for v in values if v != 0]
    if not vals:
        return Fraction(1)
    den = math.lcm(*[v.denominator for v in vals])
    nums = [int(v * den) for v in vals]
    g = math.gcd(*nums)
    unit = Fraction(g, den)
    if max(abs(n) // g for n in nums) > 2**31:
        return None
    return unit


def _split_dd_array(idx: np.ndarray, unit: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """idx * unit (integers times a rational) as double-doubles, exactly rounded pieces."""
    uh, ul = _split_dd(unit)
    return _dd_scale(idx.astype(float), uh, ul)


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full convolution of two non-negative long double arrays (direct sums)."""
    out = np.zeros(a.size + b.size - 1, dtype=_LD)
    small, big = (a, b) if a.size <= b.size else (b, a)
    for i, v in enumerate(small.tolist()):
        if v:
            out[i:i + big.size] += big * v
    return out


def _power_law(atoms, c: int) -> tuple[np.ndarray, int]:
    """The c-fold convolution of a law on the integers ((index, mass) pairs, long double),
    one copy at a time: (values, offset of the first)."""
    lo = min(i for i, _ in atoms)
    width = max(i for i, _ in atoms) - lo
    law = np.zeros(width + 1, dtype=_LD)
    for i, m in atoms:
        law[i - lo] += m
    out = np.ones(1, dtype=_LD)
    for _ in range(c):
        out = _convolve(out, law)
    return out, c * lo


def _fold_rows(atoms, R_lo: int, R_hi: int):
    """F_R for R = R_lo..R_hi, the R-fold convolutions of the law ((index, mass) pairs), as
    rows of one array on a common offset (R_hi times the lowest index), and each row's
    relative error bound (R (m + 2) 2^-64: a step's entry is a sum of at most m positive
    products, formed by numpy's long double convolution -- a dot product, one rounding per
    product and per addition; the zeros of the dense law add exact zeros, and atoms at one
    index are merged first, one rounding in place of a product's)."""
    off = min(0, R_hi * min(i for i, _ in atoms))
    width = max(0, R_hi * max(i for i, _ in atoms)) - off + 1
    cur = np.zeros(width, dtype=_LD)
    cur[-off] = 1  # F_0: all mass at index 0
    rows = []
    i_min, i_max = min(i for i, _ in atoms), max(i for i, _ in atoms)
    dense = np.zeros(i_max - i_min + 1, dtype=_LD)
    for i, m in atoms:
        dense[i - i_min] += m
    lo = hi = -off  # F_R is 0 outside [lo, hi] (R i_min .. R i_max): only that slice is folded
    for R in range(R_hi + 1):
        if R >= R_lo:
            rows.append(cur.copy())
        if R == R_hi:
            break
        nxt = np.zeros(width, dtype=_LD)
        nxt[lo + i_min:hi + i_max + 1] = np.convolve(cur[lo:hi + 1], dense)
        cur = nxt
        lo, hi = lo + i_min, hi + i_max
    m = len(atoms)
    frel = np.array([R * (m + 2) * 2.0 * _U for R in range(R_lo, R_hi + 1)])
    return off, np.stack(rows), frel


class _Atom:
    """One enumerated atom of a factor: exact position (or None), double-double position with
    an error bound, mass (mpmath)."""

    __slots__ = ("exact", "hi", "lo", "err", "mass")

    def __init__(self, exact, pos, perr, mass):
        self.exact = exact
        self.hi, self.lo = _split_dd(exact if exact is not None else pos)
        self.err = (float(perr) * (1.0 + 1e-9) if exact is None else 0.0) + abs(self.hi) * 2.0**-104
        self.mass = mass


class _Outer:
    """The enumerated outer atoms: N (pivot copies left), shift S (double-double, error bound),
    log weight (long double) and its error bound, the counts of each enumerated atom (to
    recover exact shifts: ``atoms``), and the mass cut by the windows."""

    def __init__(self, N, Sh, Sl, Serr, lw, lwerr, counts, atoms, cut, unit=None):
        self.N, self.Sh, self.Sl, self.Serr, self.lw, self.lwerr = N, Sh, Sl, Serr, lw, lwerr
        self.counts, self.atoms, self.cut, self.unit = counts, atoms, cut, unit

    def exact_shift(self, i: int):
        """The exact (rational) shift of outer atom i, or None when its positions are not."""
        if self.unit is not None:  # lattice mode: counts holds the index on the lattice unit Z
            return int(self.counts[i, 0]) * self.unit
        if not all(a.exact is not None for a in self.atoms):
            return None
        return sum((int(k) * a.exact for k, a in zip(self.counts[i].tolist(), self.atoms) if k), Fraction(0))


class RowLaw(LawSolver):
    """The composition as multinomial rows (see the module docstring): ``excess_bounds`` and
    ``epsilon_bounds`` as :class:`optcomp._exact.finite.SmallLaw`'s."""

    def __init__(self, comp: Composition):
        factors = list(comp.factors)
        # the main factor: the most copies among laws of two atoms or more
        cand = [i for i, (law, c) in enumerate(factors) if law.size >= 2]
        main = max(cand, key=lambda i: (factors[i][1], factors[i][0].size))
        law, c = factors[main]
        self.c = c
        idx = list(range(law.size))
        if law.size == 2:
            a, b = 0, 1
        else:  # the heaviest two above the lowest atom (so the chain's thresholds fall as N grows)
            a, b = sorted(sorted(idx[1:], key=lambda i: law.mass[i], reverse=True)[:2])
        with mpmath.workprec(PREC):
            pa, pb = law.mass[a], law.mass[b]
            self.pivot_mass = pa + pb
            pi = pb / (pa + pb)
            qi = pa / (pa + pb)  # (not 1 - pi: pi may round to 1)
            beta = law.pos[b] - law.pos[a]
            self.beta_err = float(law.perr[a] + law.perr[b]) * (1.0 + 1e-9) + float(abs(beta)) * 2.0**-200
            # e^-beta in long double (2^-64), its position error: e^-beta beta_err
            self.disc = _ld(*_split_dd(mpmath.exp(-beta)))
            rho = qi + pi * mpmath.exp(-beta)
            self.Q = (_Binom(pi * mpmath.exp(-beta) / rho, qi / rho), _ld(*_split_dd(mpmath.log(rho))),
                      _ld(*_split_dd(beta)), self.beta_err * 2.0 + 2.0**-100 * (float(beta) + 1.0))
            # B's relative sensitivity to disc: a term j - f steps on moves by (j - f) dd/d,
            # and B's weight beyond ~ 80 / beta steps is below 2^-100: (80/beta + 2) (beta_err + 2^-62)
            self.disc_rel = (80.0 / max(float(beta), 1e-300) + 2.0) * (self.beta_err + 2.0**-62)
            self.beta = _split_dd(law.exact[b] - law.exact[a] if law.exact[a] is not None and law.exact[b] is not None
                                  else beta)
            self.beta_exact = law.exact[b] - law.exact[a] if law.exact[a] is not None and law.exact[b] is not None \
                else None
        self.la = _Atom(law.exact[a], law.pos[a], law.perr[a], law.mass[a])
        #: the far sums' relative error from e^-beta's is beyond ROW_REL_MAX (the pivot pair's
        #: atoms a tiny eps apart: the rows' bracket would be trivial)
        self.ill_conditioned = self.disc_rel > ROW_REL_MAX
        self.P = _Binom(pi, qi)
        # M near atoms per row: M beta >= 1/4 (the far remainder then loses at most a factor 4.6)
        self.M = max(1, min(4096, math.ceil(0.25 / float(beta))))
        self.main_outer = [_Atom(law.exact[i], law.pos[i], law.perr[i], law.mass[i]) for i in idx if i not in (a, b)]
        self.side = [(lw, cc) for j, (lw, cc) in enumerate(factors) if j != main]
        self.rel = sum(cc * lw.rel for lw, cc in factors)  # the laws' own relative errors, times counts
        self.slack = comp.slack
        with mpmath.workprec(PREC):  # (estimates for :meth:`terms`: floats suffice)
            out_mass = float(sum((at.mass for at in self.main_outer), mpmath.mpf(0)))
            lever = max([abs(at.hi - float(law.pos[a])) for at in self.main_outer] + [0.0])
            side = sum(cc * float(max(lw.pos) - min(lw.pos)) for lw, cc in self.side if lw.size)
        n_out = c * out_mass + 12.0 * math.sqrt(c * out_mass) + 1.0
        sd = math.sqrt(c * float(self.P.p) * float(self.P.q))
        self._terms = (side + lever * n_out) / max(float(beta), 1e-300) + 20.0 * sd + self.M
        self._outers = {}
        self._memo = {}
        self._cgf_laws = [(np.array([float(p) for p in lw.pos]), np.array([float(mpmath.log(m)) for m in lw.mass]), cc)
                          for lw, cc in factors]

    def terms(self) -> float:
        """An estimate of the terms one evaluation of H sums (a routing heuristic only): the
        spread of the rows' thresholds over the outer atoms, in pivot steps beta (the chain
        walks them), plus the pivot binomial's tails (direct sums over ~20 standard
        deviations) and the near atoms."""
        return self._terms

    # ------------------------------------------------------------------ the outer atoms
    def _stages(self):
        """(count, [(atom, conditional mass p_j / sum_{i >= j} p_i, marginal mass)], forced)
        per factor: side factors by decreasing mass with the last count forced (the rest),
        then the main factor's outer atoms (the pivot pair takes the rest)."""
        out = []
        with mpmath.workprec(PREC):
            for law, c in self.side:
                order = sorted(range(law.size), key=lambda i: law.mass[i], reverse=True)
                atoms = [_Atom(law.exact[i], law.pos[i], law.perr[i], law.mass[i]) for i in order]
                # conditional masses from the sums of the masses left (never by subtraction)
                left = _suffix_sums([a.mass for a in atoms])
                st = [(at, at.mass / left[j] if j < len(atoms) - 1 else mpmath.mpf(1), at.mass)
                      for j, at in enumerate(atoms)]
                out.append((c, st, True))
            atoms = sorted(self.main_outer, key=lambda t: t.mass, reverse=True)
            left = _suffix_sums([a.mass for a in atoms])
            st = [(at, at.mass / (left[j] + self.pivot_mass), at.mass) for j, at in enumerate(atoms)]
            out.append((self.c, st, False))
        return out

    def _outer(self, log_budget: float) -> _Outer:
        """The outer atoms, windows cutting at most e^log_budget of mass in all: merged on a
        common lattice (:meth:`_outer_lattice`) when the main factor has several outer atoms
        and every enumerated position is rational, else enumerated count vector by count
        vector (:meth:`_outer_vectors`)."""
        key = round(log_budget, 3)
        if key not in self._outers:
            res = self._outer_lattice(log_budget) if len(self.main_outer) >= 2 else None
            self._outers[key] = res if res is not None else self._outer_vectors(log_budget)
        return self._outers[key]

    def _outer_vectors(self, log_budget: float) -> _Outer:
        """The outer atoms count vector by count vector (nested binomial windows)."""
        stages = self._stages()
        n_windows = sum(len(st) for _, st, _ in stages) or 1
        log_each = log_budget - math.log(2.0 * n_windows)
        N = np.zeros(1, dtype=np.int64)
        Sh, Sl, Serr = np.zeros(1), np.zeros(1), np.zeros(1)
        lw = np.zeros(1, dtype=_LD)
        lwerr = np.zeros(1, dtype=_LD)
        cols, atoms = [], []
        cut = 0.0
        for c, st, forced in stages:
            N = np.full(N.size, c, dtype=np.int64)
            for j, (at, cond, marg) in enumerate(st):
                lo, hi, out = _window(c, _Binom(marg), log_each) if 0 < marg < 1 else (0, c, 0.0)
                cut += out
                if (forced and j == len(st) - 1) or cond >= 1:  # the last atom takes the rest
                    sel = np.nonzero((N >= lo) & (N <= hi))[0]
                    n = N[sel]
                    w_y = np.zeros(sel.size, dtype=_LD)
                    w_e = np.zeros(sel.size, dtype=_LD)
                else:
                    first = np.minimum(lo, N + 1)
                    last = np.minimum(hi, N)
                    width = np.maximum(last - first + 1, 0)
                    total = int(np.sum(width))
                    if total > OUTER_MAX:
                        raise ExactTooLarge(f"exact composition of these mechanisms needs more than {OUTER_MAX:,} "
                                            "count vectors beside its largest factor (several large or many distinct "
                                            "factors: computing it exactly is #P-complete in general, MV Thm 1.6); "
                                            "use method='approx' or 'auto' for certified bounds")
                    sel = np.repeat(np.arange(N.size), width)
                    n = first[sel] + (np.arange(total) - np.repeat(np.cumsum(width) - width, width))
                    w_y, w_e = _Binom(cond).log_pmf(N[sel], n)
                N = N[sel] - n
                h, l_ = _dd_scale(n.astype(float), at.hi, at.lo)
                Sh, Sl = _dd_add(Sh[sel], Sl[sel], h, l_)
                Serr = Serr[sel] + n * at.err + np.abs(Sh) * 2.0**-100
                lw = lw[sel] + w_y
                lwerr = lwerr[sel] + w_e
                cols = [col[sel] for col in cols] + [n.astype(np.int64)]
                atoms.append(at)
        if not stages[-1][1]:  # no outer atom in the main factor: all c copies are the pivot's
            N = np.full(N.size, self.c, dtype=np.int64)
        counts = np.stack(cols, axis=1) if cols else np.zeros((N.size, 0), dtype=np.int64)
        return _Outer(N, Sh, Sl, Serr, lw, lwerr, counts, atoms, cut)

    def _outer_lattice(self, log_budget: float) -> _Outer | None:
        """The outer atoms merged by position on the lattice u Z (u the common unit of every
        enumerated position, all rational), or None when they are not (or the lattice or the
        counts are too large).  R ~ Bin(c, P_out) copies of the main factor fall on its outer
        atoms (a window of R); given R their loss is the R-fold convolution F_R of the outer
        law, built one copy at a time in long double (each step a sum of at most m positive
        terms: F_R within R (m + 2) 2^-64 relative); the side factors' laws are convolved in
        the same way (a two-atom factor, a black box, by its binomial masses).  Entries of
        weight Bin(c, P_out)(R) F_R(s) are kept from the largest down until the rest weighs at
        most half the budget (charged as cut, with the window's tails)."""
        atoms = self.main_outer + [a for _, st, _ in self._stages()[:-1] for a, _, _ in st]
        if any(a.exact is None for a in atoms):
            return None
        unit = _common_unit([a.exact for a in atoms])
        if unit is None:
            return None
        idx = {id(a): int(a.exact / unit) for a in atoms}
        # the main factor's outer law (normalised), its R window
        with mpmath.workprec(PREC):
            p_out = mpmath.fsum(a.mass for a in self.main_outer)
            if not 0 < p_out < 1:
                return None
            outer = [(idx[id(a)], _ld(*_split_dd(a.mass / p_out))) for a in self.main_outer]
            cut_log = log_budget - math.log(4.0)
            R_lo, R_hi, cut = _window(self.c, _Binom(p_out), cut_log)
        span = max(i for i, _ in outer) - min(i for i, _ in outer)
        if R_hi > LATTICE_R_MAX or span * R_hi > LATTICE_POINTS or (R_hi - R_lo + 1) * (span * R_hi + 1) > MAX_ELEMENTS:
            return None
        # side factors on the same lattice
        side = np.ones(1, dtype=_LD)
        side_lo = 0
        side_rel = 0.0
        for law, c in self.side:
            ids = [int(e / unit) for e in law.exact] if all(e is not None for e in law.exact) else None
            if ids is None or any(i * unit != e for i, e in zip(ids, law.exact)):
                return None
            if law.size == 2:
                b = _Binom(law.mass[1] / (law.mass[0] + law.mass[1]))
                lo, hi, out = _window(c, b, cut_log - math.log(2.0 * len(self.side)))
                cut += out
                k = np.arange(lo, hi + 1)
                m_lo, m_hi = b.path(np.full(k.size, c), k)
                vals = np.sqrt(m_lo * m_hi)  # (the bracket's geometric middle; its half-width charged below)
                rel = float(np.max((m_hi - m_lo) / np.maximum(m_hi, _LD(1e-4900))))
                pos = k * ids[1] + (c - k) * ids[0]
                base = int(np.min(pos))
                f_law = np.zeros(int(np.max(pos)) - base + 1, dtype=_LD)
                np.add.at(f_law, pos - base, vals)
            elif c <= LATTICE_R_MAX and c * (max(ids) - min(ids)) <= LATTICE_POINTS:
                with mpmath.workprec(PREC):
                    one = [(i, _ld(*_split_dd(m))) for i, m in zip(ids, law.mass)]
                f_law, base = _power_law(one, c)
                rel = c * (law.size + 2) * 2.0 * _U
            else:
                return None
            side = _convolve(side, f_law)
            side_lo += base
            side_rel += rel
        F = _fold_rows(outer, R_lo, R_hi)  # rows R_lo..R_hi: (offset, values) with one offset
        offs, rows, frel = F
        # weights Bin(c, P_out)(R) F_R(s), convolved with the side factors
        Rs = np.arange(R_lo, R_hi + 1)
        ly, le = _Binom(p_out).log_pmf(np.full(Rs.size, self.c), Rs)
        if side.size > 1:
            if rows.shape[0] * (rows.shape[1] + side.size) > MAX_ELEMENTS:
                return None
            rows = np.stack([_convolve(r_, side) for r_ in rows])
        lw_rows = np.log(np.where(rows > 0, rows, _LD(1))) + ly[:, None]
        lw_rows = np.where(rows > 0, lw_rows, -np.inf)
        err_rows = np.broadcast_to(le[:, None] + (frel[:, None] + side_rel + 8 * _U).astype(_LD), lw_rows.shape)
        # keep the heaviest entries: the rest (sorted ascending, summed) within half the budget
        flat = lw_rows.ravel()
        live = np.nonzero(np.isfinite(flat))[0]
        order = live[np.argsort(flat[live])]
        with np.errstate(under="ignore"):
            w_up = np.exp(flat[order] + err_rows.ravel()[order])
        acc = np.cumsum(w_up)
        drop = acc <= _LD(math.exp(log_budget) / 2.0)
        keep = order[~drop]
        if np.any(drop):  # (the dropped weights' sum, in long double, rounded up to a float)
            gone = acc[drop][-1] * _LD(1.0 + 1e-9)
            cut = up(cut + max(float(gone), 5e-324), 1)
        if keep.size > OUTER_MAX:
            return None
        r_i, s_i = np.divmod(keep, lw_rows.shape[1])
        N = self.c - Rs[r_i]
        s_idx = offs + side_lo + s_i
        Sh, Sl = _split_dd_array(s_idx, unit)
        Serr = np.abs(Sh) * 2.0**-100
        return _Outer(N.astype(np.int64), Sh, Sl, Serr, flat[keep], err_rows.ravel()[keep],
                      s_idx.astype(np.int64)[:, None], [], cut, unit=unit)

    def _log_guess(self, x: float) -> float:
        """log of the Chernoff bound on P[L > x] (an estimate from above of log H(x)), to aim
        the windows: K(theta) - theta x at the tilt with K'(theta) = x (0 below the mean)."""
        theta = self._tilt(x)
        if theta <= 0.0:
            return 0.0
        K = self._cgf(theta)[0]
        return max(min(0.0, K - theta * x), math.log(1e-300))

    # ------------------------------------------------------------------ H
    def _evaluate(self, x: float, o: _Outer):
        """(H_lo, H_hi, P[L > x] estimate) at x in long double, before the window cut, the
        slack and the laws' relative errors."""
        N = o.N
        Nf = N.astype(float)
        # y = x - S - N l_a (double-double), with its error bound
        ah, al = _dd_scale(Nf, self.la.hi, self.la.lo)
        yh, yl = _dd_add(np.full(N.size, float(x)), np.zeros(N.size), -o.Sh, -o.Sl)
        yh, yl = _dd_add(yh, yl, -ah, -al)
        yerr = o.Serr + Nf * self.la.err + (abs(x) + np.abs(o.Sh) + np.abs(ah)) * 2.0**-98
        bh, bl = self.beta
        # rows whose every atom lies below x (y beyond N beta by more than y's error): they add
        # nothing to H; their tau is held at N (huge y / beta overflows int64) and their far
        # terms are masked out below
        top = (yh - np.abs(yl) - yerr) >= (Nf + 2.0) * bh * (1.0 + 2.0**-40)
        tau = np.floor(np.where(top, Nf, yh / bh))
        # the last atom at or below x: v(tau) = tau beta - y <= 0 < v(tau + 1) (double-double)
        for _ in range(4):
            v1, _l = _dd_add(*_dd_scale(tau + 1.0, bh, bl), -yh, -yl)
            v0, _l = _dd_add(*_dd_scale(tau, bh, bl), -yh, -yl)
            move = np.where(v1 <= 0.0, 1.0, np.where(v0 > 0.0, -1.0, 0.0))
            if not np.any(move):
                break
            tau = tau + move
        n1 = np.maximum(tau + 1.0, 0.0).astype(np.int64)
        M = self.M
        if N.size * M > MAX_ROW_ATOMS:
            raise ExactTooLarge(f"the multinomial rows need {N.size:,} rows x {M} near atoms (> {MAX_ROW_ATOMS:,}); "
                                "use method='approx' or 'auto'")
        nn = n1[:, None] + np.arange(M)[None, :]
        live = nn <= N[:, None]
        vh, vl = _dd_add(*_dd_scale(nn.astype(float), bh, bl), -yh[:, None], -yl[:, None])
        v = _ld(vh, vl)
        verr = yerr[:, None] + nn * self.beta_err + np.abs(vh) * 2.0**-98
        amb = live & (v.astype(float) <= verr)
        if np.any(amb) and self._exact_ok(o):
            v, verr = self._exact_distances(x, o, nn, v, verr, amb)
        # the near atoms column by column, each a path across the rows -- or, when the columns
        # outnumber the rows (a pair of tiny losses: thousands of near atoms, a few rows), row by
        # row, each a path along its consecutive counts (the same certified masses, far fewer calls)
        if M <= N.size:
            b = [self.P.path(N, nn[:, i]) for i in range(M)]
            b_lo = np.stack([v[0] for v in b], axis=1)
            b_hi = np.stack([v[1] for v in b], axis=1)
        else:
            b = [self.P.path(np.full(M, N[r]), nn[r]) for r in range(N.size)]
            b_lo = np.stack([v[0] for v in b], axis=0)
            b_hi = np.stack([v[1] for v in b], axis=0)
        verr_ld = np.asarray(verr, dtype=_LD)
        g_hi = np.where(live, -np.expm1(-(np.maximum(v, 0) + verr_ld)), 0)
        g_lo = np.where(live & (v > verr_ld), -np.expm1(-np.maximum(v - verr_ld, 0)), 0)
        near_hi = np.sum(b_hi * g_hi, axis=1)
        near_lo = np.sum(b_lo * g_lo, axis=1)
        above = np.sum(b_hi * live, axis=1)
        # far: U_P(N, f) - e^{y + N log rho} U_Q(N, f), f = n1 + M
        f = n1 + M
        # (disc = e^-beta is known within disc_err: B grows with disc, so B_hi at disc + err,
        # B_lo at disc - err; charged as a relative error of B: width x d log B / d disc <= width / disc x f-terms)
        u_lo, u_hi, d_lo, d_hi = _chain(self.P, self.disc, N, f, self.Q)
        vfh, vfl = _dd_add(*_dd_scale(f.astype(float), bh, bl), -yh, -yl)  # f beta - y >= M beta
        vf = np.where(top, 0, _ld(vfh, vfl))  # (a top row's f beta - y < 0: masked, its far terms are 0)
        vferr = np.asarray(np.where(top, 0.0, yerr + f * self.beta_err + np.abs(vfh) * 2.0**-98), dtype=_LD)
        with np.errstate(under="ignore"):
            e_hi = np.exp(-(vf - vferr)) * _LD(1 + 16 * _U)
            e_lo = np.exp(-(vf + vferr)) / _LD(1 + 16 * _U)
        far_hi = np.where(top, 0, np.maximum(u_hi - e_lo * d_lo * _LD(1 - self.disc_rel), 0))
        far_lo = np.where(top, 0, np.maximum(u_lo - e_hi * d_hi * _LD(1 + self.disc_rel), 0))
        with np.errstate(under="ignore", over="ignore"):
            w_hi = np.exp(o.lw + o.lwerr) * _LD(1 + 16 * _U)
            w_lo = np.exp(o.lw - o.lwerr) / _LD(1 + 16 * _U)
        h_hi = np.sum(w_hi * (near_hi + far_hi))
        h_lo = np.sum(w_lo * (near_lo + far_lo))
        p_above = float(np.sum(w_hi * np.where(top, 0, above + u_hi)))
        # the products and sums of positive terms: (32 + M + rows) roundings, expm1 (L ulps)
        g = _LD(1.0 + (32 + M + N.size) * _U * 2.0)
        return h_lo / g, h_hi * g, p_above

    def _exact_ok(self, o: _Outer) -> bool:
        return self.la.exact is not None and self.beta_exact is not None and \
            (o.unit is not None or all(a.exact is not None for a in o.atoms))

    def _exact_distances(self, x, o, nn, v, verr, amb):
        """The ambiguous atoms' distances from their exact rational positions (exact sign)."""
        fx = Fraction(x)
        v = v.copy()
        verr = verr.copy()
        for r, col in zip(*[a.tolist() for a in np.nonzero(amb)]):
            S = o.exact_shift(r)
            d = S + int(o.N[r]) * self.la.exact + int(nn[r, col]) * self.beta_exact - fx
            v[r, col] = _LD(float(d)) if d > 0 else _LD(0)
            verr[r, col] = abs(float(d)) * 2.0**-52 if d > 0 else 0.0
        return v, verr

    def _bounds(self, x: float, o: _Outer):
        lo, hi, p_above = self._evaluate(x, o)
        return lo * _LD(1.0 - self.rel), hi * _LD(1.0 + self.rel) + _LD(o.cut + self.slack), p_above

    def excess_bounds(self, x: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around H(x): windows aimed at a Chernoff estimate,
        narrowed again until their cut is below 2^-50 of the lower bound (or below 1e-320)."""
        log_b = math.log(TAIL_REL) + self._log_guess(x)
        for _ in range(8):
            o = self._outer(log_b)
            lo, hi, _ = self._bounds(x, o)
            if o.cut <= 2.0**-50 * float(lo) or o.cut <= 1e-320:
                break
            log_b = max(math.log(max(float(lo), 1e-320)) + math.log(TAIL_REL), log_b - 60.0)
        lo, hi = float(lo), float(hi)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            # a row weight beyond long double's range times a zero row (inf x 0: the reverse
            # direction of Pair((0.5, 0.5), (1, 1e-62)) beside 12 randomized responses) -- the
            # trivial bracket, which the exact path reports as too wide (auto goes on to the lattice)
            return 0.0, 1.0
        return max(0.0, down(lo, 2)), up(hi, 2)

    # ------------------------------------------------------------------ eps_g
    def epsilon_bounds(self, t_low: float, t_high: float, top: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around the least x >= 0 with H(x) <= t (t in
        [t_low, t_high]): Newton's method on log H (d log H/dx = 1 - P[L > x]/H) from the
        saddle-point guess, safeguarded by the bracket found so far; the upper end checked
        with H's upper bound <= t_low, the lower end with H's lower bound > t_high, each
        placed beyond the root by what the bracket's width asks."""
        if t_low >= 1.0:
            return 0.0, 0.0
        if t_high < 0.0:
            return math.inf, math.inf
        if not t_low > 0.0:
            return 0.0, top  # (a target below the float range: the top atom bounds it)
        o = self._outer(math.log(TAIL_REL) + math.log(t_low))
        t = math.exp(0.5 * (math.log(t_low) + math.log(t_high)))  # (the geometric middle, no underflow)
        t = min(max(t, t_low), t_high)

        # the upper end below t_low (1 - 2^-48): the delta direction's windows (cut <= 2^-50 H)
        # then give H's upper bound <= t_low there too (delta_g(eps_g(d)) <= d)
        t_up = t_low * (1.0 - 2.0**-48)
        ends = [top, 0.0]  # the least x seen with H_hi <= t_up, the largest with H_lo > t_high

        def H(x):
            key = (x, id(o))
            if key not in self._memo:
                lo, hi, pa = self._bounds(x, o)
                self._memo[key] = (float(lo), float(hi), pa)
            lo, hi, pa = self._memo[key]
            if hi <= t_up:
                ends[0] = min(ends[0], x)
            if lo > t_high:
                ends[1] = max(ends[1], x)
            return lo, hi, pa

        a, b = 0.0, top  # H(a) > t >= H(b) (H(0) > t is checked when the iterates reach 0)
        x = min(max(self._saddle_x(t), 0.0), top)
        if x <= 0.0 and H(0.0)[1] <= t_low:
            return 0.0, 0.0
        slope = -1.0
        for _ in range(60):
            lo, hi, pa = H(x)
            mid = 0.5 * (lo + hi)
            if mid > t:
                a = max(a, x)
            else:
                b = min(b, x)
            if mid > 0.0 and pa > mid:
                slope = 1.0 - pa / mid  # d log H / dx < 0
                if pa > t:
                    # Newton in e^x: on the segment of x (no atom between), H = P - e^{x' - x} (P - H)
                    # exactly (P = P[L > x]): the step lands on the root when it stays there
                    xn = x + math.log1p((mid - t) / (pa - mid))
                else:  # (P[L > x] < t: the root lies atoms away) Newton on log H
                    xn = x - (math.log(mid) - math.log(t)) / slope
                if not (a <= xn <= b):  # (xn = x: converged to within an ulp)
                    xn = 0.5 * (a + b)
            else:
                xn = 0.5 * (a + b)
            if xn <= 0.0 or a == b == 0.0:
                if H(0.0)[1] <= t_low:
                    return 0.0, 0.0
                xn = max(xn, 0.0)
            done = abs(xn - x) <= 2.0**-52 * max(abs(x), 1e-300) or b - a <= 2.0**-52 * b
            x = xn
            if done:
                break
        lo, hi, pa = H(x)
        # the bounds' roots lie about log(bound / t) / |slope| from x (a linear model of log H)
        if slope < 0.0 and lo > 0.0:
            d_hi = max(math.log(hi / t_low), 0.0) / -slope * 1.25 + 4.0 * math.ulp(x)
            d_lo = max(math.log(t_high / lo), 0.0) / -slope * 1.25 + 4.0 * math.ulp(x)
        else:
            d_hi = d_lo = 2.0**-40 * max(x, 1.0)
        # an end certified on the way (within 2^-47 of x) is kept; else checked from x
        close = 2.0**-47 * x + 8.0 * math.ulp(x)
        x_hi = ends[0] if ends[0] - x <= close else self._check(x + d_hi, t_up, True, H, top, d_hi)
        x_lo = ends[1] if x - ends[1] <= close else self._check(x - d_lo, t_high, False, H, top, d_lo)
        return min(x_lo, x_hi), x_hi

    def _check(self, x: float, t: float, upper: bool, H, top: float, step: float) -> float:
        """x, moved outward in doubling steps until H's upper bound is <= t (upper) or its
        lower bound is > t (lower end); top / 0 at worst."""
        for _ in range(80):
            x = min(max(x, 0.0), top)
            lo, hi, _ = H(x)
            if upper and (hi <= t or x >= top):
                return x if hi <= t else top
            if not upper and (lo > t or x <= 0.0):
                return x
            x = up(x + step, 1) if upper else down(x - step, 1)
            step *= 2.0
        return top if upper else 0.0  # pragma: no cover
