r"""The privacy-loss distribution and the hockey-stick functional every exact and
approximate method of this package solves.

By MV Lemma 3.2/3.4 (KOV Thm 2.5) composing (eps_i, delta_i)-DP mechanisms is exactly
composing the randomized responses of MV Definition 3.1.  Under the input 0, with
probability prod(1 - delta_i) no "delta event" happens and the privacy loss is the sum
``L = sum_i s_i eps_i`` of independent signs, ``P0[s_i = +1] = e^{eps_i}/(1 + e^{eps_i})``;
otherwise the loss is +inf.  MV Theorem 1.5 rewritten in probabilities reads

    delta(eps_g) = 1 - prod(1 - delta_i) * (1 - H(eps_g)),
    H(x) = E_P0[(1 - e^{x - L})_+]  =  sum_{l > x} P0[L = l] (1 - e^{x - l}),

so (eps_g, delta_g)-DP holds iff ``H(eps_g) <= t`` with the *residual target*
``t = 1 - (1 - delta_g) / prod(1 - delta_i)`` (:func:`residual_target`).

**Cancellation-free evaluation.**  For atoms ``l_0 < l_1 < ...`` with masses ``p_i`` let

    W_j = sum_{i >= j} p_i e^{-(l_i - l_j)},   D_j = H(l_j) = sum_{i > j} p_i (1 - e^{-(l_i - l_j)}).

Both follow from the atom above by sums of *non-negative* terms,
``W_j = p_j + e^{-g_j} W_{j+1}`` and ``D_j = D_{j+1} + W_{j+1} (1 - e^{-g_j})`` with the gap
``g_j = l_{j+1} - l_j`` (``1 - e^{-g}`` by ``expm1``), so they carry a small *relative*
error however tiny H is next to the masses (no ``S - e^{..} W`` cancellation), and only
*differences* of losses enter (no e^{k eps} overflow).  Between atoms,
``H(x) = D_j + W_j (1 - e^{-(l_j - x)})`` for ``l_{j-1} <= x <= l_j``, which is inverted
in closed form for eps_g.  The recurrences run blockwise (blocks of 32, block totals
combined by the same recurrence, recursively), so the error grows with log n, not n
(:func:`rounding_bound`).

**Positions.**  A distribution lists its atoms as ``origin + unit * loss[i]`` (the
homogeneous producer uses integer ``loss`` and ``unit = 2 eps``, so gaps are exact up to
one rounding whatever k), within ``pos_err`` of the truth, and can give the exact
position of an atom (``exact(i)``, a :class:`fractions.Fraction`).  The distance from
eps_g to the first atom above it is taken from the exact position, so an eps_g within
ulps of an atom (eps_g = k * eps as a float, the top atom sum eps_i) still gets the
right delta.

**Rounding** (the safe side is a larger eps_g and a larger delta_g for upper bounds;
lower bounds mirror every step): gaps and distances are widened (narrowed) by their
rounding and ``pos_err``, masses are the producer's upper (lower) bounds, every sum is
charged ``rounding_bound(n)`` relative plus an absolute underflow bound, ``slack``
(mass cut off by truncation, placed at +inf) is added to upper bounds and dropped from
lower bounds, and results are moved a few ulps outward.

Length (~740 lines): one data type and the single place for each formula of the composed
loss (products, the delta event, root solving on segments) that every exact producer shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np

from ._inputs import LOG_NO_DELTA_REL, Mechanisms
from ._rounding import UNIT, down, exact_dir, mpf_dir, sum_dir, up

__all__ = [
    "LossDistribution",
    "WindowTooNarrow",
    "residual_target",
    "delta_from_excess",
    "delta_event_bounds",
    "solve_segments",
    "solve_lower",
    "excess_lower",
    "rounding_bound",
    "suffix_dw",
]

_BLOCK = 32  # block length of the blockwise recurrences
_MAX_FLOAT = 1.7976931348623157e308
_ABS = 2.0**-1070  # absolute error bound of one operation that may underflow (a few subnormal units)


def _levels(n: int) -> int:
    """Levels of :func:`suffix_dw` for n terms (ceil(log_BLOCK n), at least 1)."""
    levels, size = 1, _BLOCK
    while size < n:
        levels += 1
        size *= _BLOCK
    return levels


def rounding_bound(n: int) -> float:
    """Relative error bound of the suffix quantities W and D of :func:`suffix_dw` over n
    atoms, and of one H evaluation from them.

    One recurrence step ``W = w + e W'`` costs <= 4 u (exp within 2 u, one product, one
    sum: all terms non-negative), ``D = d + D' + W' f`` <= 5 u on top of W' (expm1 within
    2 u); a block of 32 steps therefore <= 9 * 32 u, and each level of the recursion adds
    one block and one combination (<= 16 u).  16 u more cover an H evaluation from D, W.
    The first level runs min(n, 32) steps.
    """
    levels = _levels(max(n, 2))
    return (16.0 + 9.0 * min(max(n, 2), _BLOCK) + 16.0 + (levels - 1) * (9.0 * _BLOCK + 16.0)) * UNIT


def _widen(g: np.ndarray, pos_err: float, upward: bool) -> np.ndarray:
    """Gaps moved to the safe side: apart (upward: every atom above moves up relative to
    the ones below, which raises H) by their rounding and 2 pos_err, or together."""
    if upward:
        return g * (1.0 + 4.0 * UNIT) + 2.0 * pos_err
    return np.maximum(g * (1.0 - 4.0 * UNIT) - 2.0 * pos_err, 0.0)


def suffix_dw(w0: np.ndarray, pos: np.ndarray, unit: float = 1.0, *, pos_err: float = 0.0, upward: bool = True,
              d0: np.ndarray | None = None, step: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(D, W) of atoms at ``unit * pos`` (ascending) with masses ``w0`` (see the module
    docstring); ``d0`` are own D values of aggregated elements (0 for atoms).  Relative
    error <= ``rounding_bound(n)`` plus an absolute ``n * 2^-1070`` for underflow.
    ``step``: the positions are ``pos[0] + step * i`` exactly (a lattice), so every gap
    is the same and the exponentials are formed once per distinct gap."""
    n = w0.size
    if step is not None:
        return _suffix_dw_uniform(w0, step * unit, pos_err, upward, d0)
    if d0 is None:
        d0 = np.zeros(n)
    if n <= _BLOCK:
        D = np.empty(n)
        W = np.empty(n)
        D[-1], W[-1] = d0[-1], w0[-1]
        if n > 1:
            g = _widen((pos[1:] - pos[:-1]) * unit, pos_err, upward)
            with np.errstate(under="ignore"):
                e = np.exp(-g)
            f = -np.expm1(-g)
            w, dd = float(W[-1]), float(D[-1])
            ee, ff, ww, d00 = e.tolist(), f.tolist(), w0.tolist(), d0.tolist()
            for i in range(n - 2, -1, -1):
                dd = d00[i] + dd + w * ff[i]
                w = ww[i] + ee[i] * w
                D[i], W[i] = dd, w
        return D, W
    nb = -(-n // _BLOCK)
    pad = nb * _BLOCK - n
    # layout (BLOCK, nb): row i holds atom i of every block, contiguous for the vector steps
    P = np.concatenate([pos, np.full(pad, pos[-1])]).reshape(nb, _BLOCK).T.copy()
    w0p = np.concatenate([w0, np.zeros(pad)]).reshape(nb, _BLOCK).T.copy()
    d0p = np.concatenate([d0, np.zeros(pad)]).reshape(nb, _BLOCK).T.copy()
    g = _widen((P[1:] - P[:-1]) * unit, pos_err, upward)
    with np.errstate(under="ignore"):
        e = np.exp(-g)
    f = -np.expm1(-g)
    D = np.empty((_BLOCK, nb))
    W = np.empty((_BLOCK, nb))
    D[-1], W[-1] = d0p[-1], w0p[-1]
    tmp = np.empty(nb)
    with np.errstate(under="ignore"):
        for i in range(_BLOCK - 2, -1, -1):
            np.multiply(W[i + 1], f[i], out=tmp)
            np.add(tmp, D[i + 1], out=D[i])
            D[i] += d0p[i]
            np.multiply(W[i + 1], e[i], out=W[i])
            W[i] += w0p[i]
        Dt, Wt = suffix_dw(W[0].copy(), P[0].copy(), unit, pos_err=pos_err, upward=upward, d0=D[0].copy())
        s = _widen((P[0, 1:][None, :] - P[:, :-1]) * unit, pos_err, upward)  # atom -> next block's start
        D[:, :-1] += Dt[None, 1:] + Wt[None, 1:] * (-np.expm1(-s))
        W[:, :-1] += Wt[None, 1:] * np.exp(-s)
    return D.T.ravel()[:n], W.T.ravel()[:n]


def _suffix_dw_uniform(w0: np.ndarray, gap: float, pos_err: float, upward: bool, d0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`suffix_dw` for atoms spaced ``gap`` apart (the same recurrences and bound)."""
    n = w0.size
    g = float(_widen(np.array([gap]), pos_err, upward)[0])
    e, f = math.exp(-g), -math.expm1(-g)
    if d0 is None and n <= _BLOCK:
        d0 = np.zeros(n)
    if n <= _BLOCK:
        D = np.empty(n)
        W = np.empty(n)
        dd, w = float(d0[-1]), float(w0[-1])
        D[-1], W[-1] = dd, w
        ww, d00 = w0.tolist(), d0.tolist()
        for i in range(n - 2, -1, -1):
            dd = d00[i] + dd + w * f
            w = ww[i] + e * w
            D[i], W[i] = dd, w
        return D, W
    nb = -(-n // _BLOCK)
    pad = nb * _BLOCK - n
    w0p = np.concatenate([w0, np.zeros(pad)]).reshape(nb, _BLOCK).T.copy()
    # (no own D values -- atoms -- : no zero array to add, bit-identical)
    d0p = None if d0 is None else np.concatenate([d0, np.zeros(pad)]).reshape(nb, _BLOCK).T.copy()
    D = np.empty((_BLOCK, nb))
    W = np.empty((_BLOCK, nb))
    D[-1], W[-1] = (0.0 if d0p is None else d0p[-1]), w0p[-1]
    with np.errstate(under="ignore"):
        for i in range(_BLOCK - 2, -1, -1):
            np.multiply(W[i + 1], f, out=D[i])
            D[i] += D[i + 1]
            if d0p is not None:
                D[i] += d0p[i]
            np.multiply(W[i + 1], e, out=W[i])
            W[i] += w0p[i]
        # the padding sits at the last block's end; block starts are _BLOCK gaps apart
        Dt, Wt = _suffix_dw_uniform(W[0].copy(), gap * _BLOCK, pos_err, upward, D[0].copy())
        dist = _widen(gap * (_BLOCK - np.arange(_BLOCK, dtype=float)), pos_err, upward)  # row i -> next block
        fs, es = -np.expm1(-dist), np.exp(-dist)
        D[:, :-1] += Dt[None, 1:] + Wt[None, 1:] * fs[:, None]
        W[:, :-1] += Wt[None, 1:] * es[:, None]
    return D.T.ravel()[:n], W.T.ravel()[:n]


# --------------------------------------------------------------------------- targets


def residual_target(m: Mechanisms, delta_g: float, *, round_up: bool = False, log2_scale: int = 0) -> float:
    """t = 1 - (1 - delta_g) / prod_i (1 - delta_i), rounded down (the safe side for an
    upper bound on eps_g), or up with ``round_up=True`` (the safe side for a lower bound).

    ``t < 0`` (possibly ``-inf``) means delta_g < 1 - prod(1 - delta_i): no finite eps_g.
    In log space ``t = -expm1(log1p(-delta_g) - sum_j c_j log1p(-delta_j))`` carries an
    absolute error of a few ulps of its two logs, whatever the counts; when that is not
    small next to ``t`` (delta_g just above 1 - prod(1 - delta_i)), ``t`` is settled in
    high precision (:func:`_precise_residual`), never by a k-fold rational power.

    ``log2_scale`` s > 0 returns t 2^s instead (rounded the same way, always settled in
    high precision): a target below the float range (delta_g ~ 1 - prod(1 - delta_i) ~ 1e-200)
    for distributions whose masses are scaled by 2^s.
    """
    if not np.any(m.delta):
        return math.ldexp(delta_g, log2_scale) if log2_scale else delta_g  # exact: prod(1 - delta_i) = 1
    if np.any(m.delta >= 1.0):  # a delta event of probability 1 (a mechanism all at loss +inf): delta = 1
        return -math.inf
    if log2_scale:
        return _precise_residual(m, delta_g, round_up, log2_scale)
    log_nd = m.log_no_delta
    l1 = math.log1p(-delta_g)
    a = l1 - log_nd
    err_a = 4.0 * UNIT * abs(l1) + 2.0 * LOG_NO_DELTA_REL * abs(log_nd) + 2.0 * UNIT * abs(a)
    if a - err_a > 700.0:
        return -math.inf
    t_low = -math.expm1(min(a + err_a, 700.0))
    t_low -= 4.0 * UNIT * abs(t_low)
    t_high = -math.expm1(a - err_a)
    t_high += 4.0 * UNIT * abs(t_high)
    width = t_high - t_low
    if (t_low > 0.0 and width <= 2.0**-44 * t_low) or (t_high < 0.0 and width <= -(2.0**-44) * t_high):
        return t_high if round_up else t_low
    return _precise_residual(m, delta_g, round_up)


def _odd_part(x: Fraction) -> tuple[int, int]:
    """(odd integer M, exponent E) with x = M 2^E for a positive dyadic rational x."""
    num, den = x.numerator, x.denominator
    e = -(den.bit_length() - 1)  # den is a power of two
    tz = (num & -num).bit_length() - 1
    return num >> tz, e + tz


def _precise_residual(m: Mechanisms, delta_g: float, round_up: bool, log2_scale: int = 0) -> float:
    """t near 0, settled with mpmath at growing precision (interval-style error bounds)
    until its relative error is below 2^-60;
    exact zero detected in integer arithmetic (it needs the product prod_j M_j^{c_j} of the
    odd parts M_j of 1 - delta_j to equal the odd part of 1 - delta_g, below 2^1130, so it is
    cheap whenever it is possible at all)."""
    one_minus = [Fraction(1) - Fraction(float(d)) for d in m.delta.tolist()]
    target = Fraction(1) - Fraction(delta_g)
    tm, te = _odd_part(target)  # tm < 2^1130: 1 - delta_g is a dyadic rational
    bits = sum(int(c) * math.log2(_odd_part(x)[0]) for x, c in zip(one_minus, m.count.tolist()) if x != 1)
    if bits <= tm.bit_length() + 1:  # else prod_j M_j^{c_j} != tm: t != 0
        odd, e2 = 1, 0
        for x, c in zip(one_minus, m.count.tolist()):
            mm, ee = _odd_part(x)
            odd *= mm ** int(c)
            e2 += ee * int(c)
        if tm == odd and te == e2:
            return 0.0
    import mpmath as mp  # only for this rare, near-infeasible case

    for prec in (160, 640, 2560, 10240):
        last = prec == 10240
        with mp.workprec(prec):
            # log1p of the exact binary deltas: relative error 2^-prec of each log, whatever
            # its size (log of a rounded 1 - delta would err by 2^-prec absolutely: too much
            # next to delta ~ 1e-38 counted 10^6 times)
            l1 = mp.log1p(-mp.mpf(delta_g))
            terms = [int(c) * mp.log1p(-mp.mpf(float(d))) for d, c in zip(m.delta.tolist(), m.count.tolist())]
            lnd = mp.fsum(terms)
            a = l1 - lnd
            err = mp.ldexp(abs(l1) + sum(abs(t) for t in terms), 16 - prec) + mp.ldexp(1, -2 * prec)
            # t = -expm1(a) ~ -a: its relative error is err / |a|; settle it to 2^-60 (a
            # precision whose answer is only sign-certain is kept only at the last level)
            if abs(a) > mp.ldexp(err, 60) or (last and abs(a) > 2 * err):
                lo = -mp.expm1(a + err)
                hi = -mp.expm1(a - err)
                margin = mp.ldexp(1, 16 - prec)  # expm1's own rounding at this precision
                val = hi + abs(hi) * margin if round_up else lo - abs(lo) * margin
                return mpf_dir(mp.ldexp(mp.mpf(val), log2_scale), round_up)  # (x 2^s: exact)
    # |t| < 2^-10000: t may be of either sign; the safe side of each bound
    return 0.0 if round_up else -math.inf


def delta_event_bounds(m: Mechanisms) -> tuple[float, float]:
    """Bounds (lo, hi) on A = 1 - prod_i (1 - delta_i), the probability of a delta event,
    each the nearest float on its side (so delta_g(epsilon_g(d)) <= d can hold to the last
    ulp): exact rationals for up to 256 mechanisms, else -expm1(sum_i c_i log1p(-delta_i))
    in 40-digit arithmetic (relative error < 1e-36), widened by 1e-30 relative and rounded
    outward, for up to 4096 distinct nonzero delta_i; beyond, from log space with its
    error bound (a few ulps: relative error of log_no_delta, expm1 within 2 ulp)."""
    if not np.any(m.delta):
        return 0.0, 0.0
    if m.k <= 256:
        prod = Fraction(1)
        for d, c in zip(m.delta.tolist(), m.count.tolist()):
            if d:
                prod *= (1 - Fraction(d)) ** int(c)
        a = 1 - prod
        return exact_dir(a, up=False), exact_dir(a, up=True)
    if np.count_nonzero(m.delta) > 4096:
        log_nd = m.log_no_delta
        value = -math.expm1(log_nd)
        err = LOG_NO_DELTA_REL * abs(log_nd) * math.exp(min(log_nd * (1.0 - LOG_NO_DELTA_REL), 0.0)) + 4.0 * UNIT * value
        return max(0.0, down(value - err, 1)), min(1.0, up(value + err, 1))
    import mpmath as mp

    with mp.workdps(40):
        lnd = mp.fsum(int(c) * mp.log1p(-mp.mpf(d)) for d, c in zip(m.delta.tolist(), m.count.tolist()) if d)
        a = -mp.expm1(lnd)
        margin = a * mp.mpf("1e-30")
        return max(0.0, mpf_dir(a - margin, False)), min(1.0, mpf_dir(a + margin, True))




def delta_from_excess(m: Mechanisms, excess: float, *, round_up: bool = True) -> float:
    """delta_g = 1 - prod(1 - delta_i) (1 - H) = A + (1 - A) H, A = 1 - prod(1 - delta_i), from
    a bound ``excess`` on H: rounded up (an upper bound on H gives a certified delta_g) or
    down (a lower bound on H, a lower bound).  Tight: at H = 0 it is A itself, rounded once
    (exactly for up to 256 mechanisms), so delta_g(epsilon_g(d)) <= d holds to the last ulp."""
    excess = min(max(excess, 0.0), 1.0)
    a_lo, a_hi = delta_event_bounds(m)
    if round_up:
        prod = up(up(1.0 - a_lo, 1) * excess, 1) if excess else 0.0  # >= (1 - A) H
        return min(1.0, sum_dir([a_hi, prod], True))
    prod = down(down(1.0 - a_hi, 1) * excess, 1) if excess else 0.0
    return max(0.0, sum_dir([a_lo, max(prod, 0.0)], False))


# --------------------------------------------------------------------------- suffix store

_FULL = 4096  # up to this many atoms the per-atom D, W are stored; beyond, block totals only


class _Suffix:
    """D_j, W_j of a distribution's atoms on demand.  Up to ``_FULL`` atoms both arrays are
    stored; beyond, only the totals at the start of every block of ``_BLOCK`` atoms (the
    recurrences run row by row, keeping one row), and an atom's values are recomputed from
    its block's end (at most 32 steps, the same error bound): memory O(n / 32)."""

    def __init__(self, p: np.ndarray, pos: np.ndarray, unit: float, pos_err: float, upward: bool,
                 step: float | None):
        self.n = n = p.size
        self.p, self.pos, self.unit, self.pos_err, self.upward, self.step = p, pos, unit, pos_err, upward, step
        if n <= _FULL:
            self.D, self.W = suffix_dw(p, pos, unit, pos_err=pos_err, upward=upward, step=step)
            return
        self.D = self.W = None
        nb = -(-n // _BLOCK)
        pad = nb * _BLOCK - n
        P = np.concatenate([p, np.zeros(pad)]).reshape(nb, _BLOCK)
        X = None if step is not None else np.concatenate([pos, np.full(pad, pos[-1])]).reshape(nb, _BLOCK)
        D = np.zeros(nb)
        W = P[:, -1].copy()
        with np.errstate(under="ignore"):
            for i in range(_BLOCK - 2, -1, -1):
                if step is not None:
                    g = float(_widen(np.array([step * unit]), pos_err, upward)[0])
                    e, f = math.exp(-g), -math.expm1(-g)
                else:
                    g = _widen((X[:, i + 1] - X[:, i]) * unit, pos_err, upward)
                    e, f = np.exp(-g), -np.expm1(-g)
                D += W * f
                W *= e
                W += P[:, i]
        starts = pos[::_BLOCK] if step is None else pos[0] + step * _BLOCK * np.arange(nb, dtype=float)
        self.Dt, self.Wt = suffix_dw(W, starts, unit, pos_err=pos_err, upward=upward, d0=D,
                                     step=None if step is None else step * _BLOCK)

    def _gap(self, i: int, j: int) -> float:
        """Widened (narrowed) distance from atom i to atom/position index j (j may be n: unused)."""
        if self.step is not None:
            d = self.step * (j - i) * self.unit
        else:
            d = (float(self.pos[j]) - float(self.pos[i])) * self.unit
        return float(_widen(np.array([d]), self.pos_err, self.upward)[0])

    def _block(self, b: int) -> tuple[list, list]:
        """Per-atom (D, W) of block b, from the totals of the blocks above it."""
        lo, hi = b * _BLOCK, min((b + 1) * _BLOCK, self.n)
        if b + 1 < len(self.Dt):
            dd, w, nxt = float(self.Dt[b + 1]), float(self.Wt[b + 1]), hi
        else:
            dd, w, nxt = 0.0, 0.0, None
        Ds, Ws = [0.0] * (hi - lo), [0.0] * (hi - lo)
        for i in range(hi - 1, lo - 1, -1):
            if nxt is not None:
                g = self._gap(i, nxt)
                dd = dd + w * -math.expm1(-g)
                w = w * math.exp(-g)
            w = w + float(self.p[i])
            Ds[i - lo], Ws[i - lo] = dd, w
            nxt = i
        return Ds, Ws

    def at(self, j: int) -> tuple[float, float]:
        if self.D is not None:
            return float(self.D[j]), float(self.W[j])
        Ds, Ws = self._block(j // _BLOCK)
        return Ds[j % _BLOCK], Ws[j % _BLOCK]

    def first_at_or_below(self, target: float, factor: float, wfactor: float = 0.0) -> int:
        """The first atom j with factor * D_j + wfactor * W_j <= target (the top atom's D is 0)."""
        if self.D is not None:
            hit = self.D * factor + self.W * wfactor <= target
            return int(np.argmax(hit)) if hit.any() else self.n - 1
        hit = self.Dt * factor + self.Wt * wfactor <= target
        b = int(np.argmax(hit)) if hit.any() else len(self.Dt)
        if b == 0:
            return 0
        Ds, Ws = self._block(b - 1)
        for i, (d, w) in enumerate(zip(Ds, Ws)):
            if d * factor + w * wfactor <= target:
                return (b - 1) * _BLOCK + i
        return b * _BLOCK if b < len(self.Dt) else self.n - 1


# --------------------------------------------------------------------------- the distribution


class WindowTooNarrow(Exception):
    """Raised when the root lies below ``exact_from`` (the producer must widen)."""


@dataclass(frozen=True)
class LossDistribution:
    """Finite atoms of a privacy-loss distribution under P0 (given no delta event).

    Atom i lies at ``origin + unit * loss[i]`` (``loss`` ascending) within ``pos_err``
    (absolute) of its true position, which ``exact(i)`` returns as a Fraction when given
    (else the listed float position counts as exact when ``pos_err == 0``).  ``p0`` are
    upper bounds of the masses, ``p0_lower`` (optional) lower bounds.  ``slack`` is mass
    not listed (placed at +inf for upper bounds, dropped for lower bounds) plus any
    absolute error bound of the producer.  ``exact_from``: H(x) is exact for
    ``x >= exact_from`` (atoms below it may be omitted, as by windowing).  Masses and
    slack may be scaled by ``2^log2_scale`` (so that masses far below the float range stay
    normal); every result is scaled back, rounded to the safe side.
    """

    loss: np.ndarray
    p0: np.ndarray
    slack: float = 0.0
    exact_from: float = -math.inf
    unit: float = 1.0
    origin: float | Fraction = 0.0
    pos_err: float = 0.0
    exact: Callable[[int], Fraction] | None = None
    p0_lower: np.ndarray | None = None
    step: float | None = None  # loss[i] = loss[0] + step * i exactly (a lattice)
    log2_scale: int = 0  # p0, p0_lower and slack are 2^log2_scale times the true masses
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ geometry
    @property
    def size(self) -> int:
        return int(self.loss.size)

    def positions(self) -> np.ndarray:
        """Float positions (nearest; for search only)."""
        if "pos" not in self._cache:
            o = exact_dir(Fraction(self.origin), up=True) if isinstance(self.origin, Fraction) else self.origin
            with np.errstate(over="ignore", invalid="ignore"):
                self._cache["pos"] = o + self.unit * self.loss
        return self._cache["pos"]

    def position(self, i: int) -> Fraction | None:
        """The exact position of atom i, or None when only the float is known (pos_err > 0)."""
        if self.exact is not None:
            return self.exact(i)
        if self.pos_err == 0.0:
            return Fraction(self.origin) + Fraction(self.unit) * Fraction(float(self.loss[i]))
        return None

    def _search_err(self) -> float:
        """Bound on |float position - true position| for every atom."""
        if "serr" not in self._cache:
            pos = self.positions()
            big = float(np.max(np.abs(pos))) if pos.size else 0.0
            o = float(self.positions()[0] - self.unit * self.loss[0]) if pos.size else 0.0
            self._cache["serr"] = 4.0 * UNIT * (abs(o) + big) + self.pos_err * (1.0 + 4.0 * UNIT)
        return self._cache["serr"]

    def _lattice_first_above(self, x: float) -> int:
        """:meth:`_first_above` for exact lattice positions (``step`` and ``exact`` given):
        O(1) in exact arithmetic, no array of positions."""
        fx = Fraction(x)
        q = (fx - self.exact(0)) / (Fraction(self.unit) * Fraction(self.step))
        i = min(max(math.floor(q) + 1, 0), self.size)
        while i > 0 and self.exact(i - 1) > fx:  # guard the arithmetic against the callback
            i -= 1
        while i < self.size and self.exact(i) <= fx:
            i += 1
        return i

    def _first_above(self, x: float) -> int:
        """Index of the first atom whose true position is > x (size if none)."""
        if self.step is not None and self.exact is not None:
            return self._lattice_first_above(x)
        pos = self.positions()
        err = self._search_err()
        lo = int(np.searchsorted(pos, x - err, side="right"))
        hi = int(np.searchsorted(pos, x + err, side="right"))
        fx = Fraction(x)
        for i in range(lo, hi):  # ambiguous atoms: decide exactly where possible
            exact = self.position(i)
            if exact is None or exact > fx:
                return i  # unknown: counted as above (the safe side for an upper bound)
        return hi

    def _first_above_lower(self, x: float) -> int:
        if self.step is not None and self.exact is not None:
            return self._lattice_first_above(x)  # exact: the same index both ways
        pos = self.positions()
        err = self._search_err()
        lo = int(np.searchsorted(pos, x - err, side="right"))
        hi = int(np.searchsorted(pos, x + err, side="right"))
        fx = Fraction(x)
        for i in range(lo, hi):
            exact = self.position(i)
            if exact is not None and exact > fx:
                return i
        return hi  # unknown ones counted below x: the safe side for a lower bound

    def _distance(self, j: int, x: float, upward: bool) -> float:
        """A bound on l_j - x >= 0 (above for upward, below otherwise)."""
        exact = self.position(j)
        if exact is not None:
            return max(exact_dir(exact - Fraction(x), up=upward), 0.0)
        d = float(self.positions()[j]) - x
        err = self._search_err() + 2.0 * UNIT * abs(d)
        return max(d + err, 0.0) if upward else max(d - err, 0.0)

    def _suffix(self, upward: bool) -> _Suffix:
        key = ("dw", upward)
        if key not in self._cache:
            p = self.p0 if upward else self.p0_lower
            if p is None:
                raise ValueError("this distribution carries no lower-bound masses")
            self._cache[key] = _Suffix(p, self.loss, self.unit, 0.0, upward, self.step)
        return self._cache[key]

    @property
    def error(self) -> float:
        """Relative rounding-error bound charged to each evaluation of H."""
        return rounding_bound(self.size)

    @property
    def pos_charge(self) -> float:
        """Charge per unit of W_J for the atoms' position errors: every distance l_i - l_J
        (i > J) is off by at most 2 pos_err, and dH/d(l_i - x) = p_i e^{-(l_i - x)}, so H moves by at
        most 2 pos_err (W_J - p_J) (atom J's own distance is exact; the recurrences use the
        listed positions)."""
        return 2.0 * self.pos_err * (1.0 + 1e-9)

    def _abs(self) -> float:
        return 8.0 * (self.size + 1) * _ABS

    def _unscale(self, h: float, upward: bool) -> float:
        if not self.log2_scale:
            return h
        v = math.ldexp(h, -self.log2_scale)  # exact unless it lands below the normal range
        return up(v, 1) if upward else max(down(v, 1), 0.0)

    def tail_slack(self) -> float:
        """``slack`` in true (unscaled) units, rounded up."""
        return self._unscale(self.slack, True)

    # ------------------------------------------------------------------ H(x)
    def excess(self, x: float) -> float:
        """An upper bound on H(x) = sum_{l > x} p0 (1 - e^{x - l}) (plus ``slack``)."""
        if x < self.exact_from:
            raise ValueError("excess evaluated below the distribution's exact range")
        j = self._first_above(x)
        if j >= self.size:
            return self._unscale(self.slack, True)
        dj, wj = self._suffix(True).at(j)
        v = self._distance(j, x, True)
        h = dj + wj * -math.expm1(-v) + self.pos_charge * max(wj - float(self.p0[j]), 0.0)
        return self._unscale(h * (1.0 + self.error) + self._abs() + self.slack, True)

    def excess_many(self, xs) -> np.ndarray:
        """:meth:`excess` at every x of ``xs`` (upper bounds), from one pass over the atoms."""
        xs = np.asarray(xs, dtype=float)
        out = np.empty(xs.size)
        suffix = self._suffix(True)
        for i, x in enumerate(xs.tolist()):
            if x < self.exact_from:
                raise ValueError("excess evaluated below the distribution's exact range")
            j = self._first_above(x)
            if j >= self.size:
                out[i] = self._unscale(self.slack, True)
                continue
            dj, wj = suffix.at(j)
            v = self._distance(j, x, True)
            h = dj + wj * -math.expm1(-v) + self.pos_charge * max(wj - float(self.p0[j]), 0.0)
            out[i] = self._unscale(h * (1.0 + self.error) + self._abs() + self.slack, True)
        return out

    def excess_lower(self, x: float) -> float:
        """A lower bound on H(x) from the lower-bound masses (slack dropped)."""
        j = self._first_above_lower(x)
        if j >= self.size:
            return 0.0
        dj, wj = self._suffix(False).at(j)
        v = self._distance(j, x, False)
        h = dj + wj * -math.expm1(-v) - self.pos_charge * max(wj - float(self.p0_lower[j]), 0.0)
        return self._unscale(max(h * (1.0 - self.error) - self._abs(), 0.0), False)

    def delta(self, m: Mechanisms, eps_g: float) -> float:
        """Certified delta_g at eps_g: 1 - prod(1-delta_i)(1 - H(eps_g)), rounded up."""
        return delta_from_excess(m, self.excess(eps_g))

    # ------------------------------------------------------------------ eps_g(t)
    def epsilon(self, t: float) -> float:
        """Least x >= 0 with H(x) <= t, rounded up (see :func:`solve_segments`)."""
        return solve_segments(self, t)

    def epsilon_lower(self, t: float, *, scaled: bool = False) -> float:
        """A lower bound on the least x >= 0 with H(x) <= t (``scaled``: t in the masses' units,
        t 2^log2_scale)."""
        return _solve(self, t, upward=False, scaled=scaled)


def _solve(dist: LossDistribution, t: float, upward: bool, scaled: bool = False) -> float:
    if t < 0.0:
        return math.inf
    if dist.log2_scale and not scaled:  # t in the distribution's units (exact: a power of two)
        t = math.ldexp(t, dist.log2_scale)
    n = dist.size
    rel = dist.error
    absb = dist._abs()
    if upward:
        target = t - dist.slack - absb
        if target < 0.0:
            return math.inf
    else:
        target = t + absb
    if n == 0:
        return 0.0
    suffix = dist._suffix(upward)
    f = (1.0 + rel) if upward else (1.0 - rel)
    # the first atom whose charged H(l_J) = D_J is <= the target: any J with that property
    # gives a valid upper bound below (the root of the charged segment formula), the first
    # one the least; for lower bounds the first such J is <= the true one
    c = dist.pos_charge * f if upward else -dist.pos_charge * f
    J = suffix.first_at_or_below(target, f, c)
    dj, wj = suffix.at(J)
    p_j = float((dist.p0 if upward else dist.p0_lower)[J])
    Dc, Wc = dj * f + max(wj - p_j, 0.0) * c, wj * f  # D_J charged for the atoms above J's positions
    # on [l_{J-1}, l_J]: H(x) = D_J + W_J (1 - e^{-v}), v = l_J - x
    if Wc > 0.0:
        y = (target - Dc) / Wc
    else:  # H is constant (= D_J <= target) on the segment: the root is at or below l_{J-1}
        y = 0.0 if upward else math.inf  # (an upper bound may stop at l_J; a lower one may not)
    if y <= 0.0:
        v = 0.0
    elif y >= 1.0:
        v = math.inf
    else:
        v = -math.log1p(-y) if y < 0.5 else -math.log((Dc + Wc - target) / Wc)
        # (y's division rounds to half a unit of the least subnormal where y is one -- an
        # absolute error a relative charge misses: delta_g 8.3e-317 at RandomizedResponse(1e-300)
        # put the upper end one float below the root -- through dv/dy = 1/(1 - y))
        err_v = 4.0 * UNIT * v + 4.0 * UNIT * y / (1.0 - y) + 2.0**-1073 / (1.0 - y)
        v = max(v - err_v, 0.0) if upward else v + err_v
    lJ = dist.position(J)
    if lJ is None:
        lJ = Fraction(float(dist.positions()[J])) + (Fraction(dist._search_err()) if upward else -Fraction(dist._search_err()))
    if J > 0:
        prev = dist.position(J - 1)
        if prev is None:
            prev = Fraction(float(dist.positions()[J - 1])) + (
                Fraction(dist._search_err()) if upward else -Fraction(dist._search_err()))
    else:
        prev = None
    if math.isinf(v):
        x = prev if prev is not None else None
    elif exact_dir(lJ, up=False) == math.inf:  # the root lies beyond the float range
        return math.inf if upward else _MAX_FLOAT
    else:
        x = lJ - Fraction(v)
        if prev is not None and x < prev:
            x = prev
    if x is None:  # any x below the listed atoms (and >= exact_from) satisfies the bound
        if upward and dist.exact_from > 0.0:
            raise WindowTooNarrow
        return 0.0
    if upward and J == 0 and dist.exact_from > 0.0 and (math.isinf(dist.exact_from) or x < Fraction(dist.exact_from)):
        raise WindowTooNarrow
    if x <= 0:
        return 0.0
    return exact_dir(x, up=upward)


def solve_segments(dist: LossDistribution, t: float, *, scaled: bool = False) -> float:
    """Least x >= 0 with H(x) <= t for an explicitly listed distribution, rounded up.

    The first atom l_J whose (charged) H(l_J) = D_J is <= t is found from the D values;
    on [l_{J-1}, l_J] the charged ``D_J + W_J (1 - e^{-(l_J - x)}) = t`` is solved in closed
    form, ``x = l_J + log1p(-(t - D_J)/W_J)``, and ``x`` is formed from the exact position
    of l_J, rounded up.  ``math.inf`` when even x -> inf leaves H above the target.
    """
    return _solve(dist, t, upward=True, scaled=scaled)


def solve_lower(loss: np.ndarray, p0: np.ndarray, t: float) -> float:
    """Least x >= 0 with H(x) <= t for the listed atoms (exact float positions, masses
    ``p0`` lower bounds of the true ones), every error charged *downward*: a certified
    lower bound.  ``math.inf`` when t < 0."""
    if t < 0.0:
        return math.inf
    if loss.size == 0:
        return 0.0
    return LossDistribution(loss, p0, p0_lower=p0).epsilon_lower(t)


def excess_lower(loss: np.ndarray, p0: np.ndarray, x: float) -> float:
    """A lower bound on H(x) = sum_{l > x} p0 (1 - e^{x - l}) for atoms at exact float
    positions whose ``p0`` are lower bounds."""
    if loss.size == 0:
        return 0.0
    return LossDistribution(loss, p0, p0_lower=p0).excess_lower(x)
