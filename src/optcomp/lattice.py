r"""The certified lattice algorithm: lower and upper bounds on OptComp and on delta_opt.

The default algorithm (``algorithm="fast"``) behind MV Theorem 1.7 in
:mod:`optcomp.approx`.  :func:`lattice_bounds` returns certified bounds

    lower  <=  OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g)  <=  upper

refined until ``upper - lower <= tol``, so the upper bound eps* satisfies

    OptComp(..., delta_g) <= eps* <= OptComp(..., delta_g) + tol,

which implies MV Thm 1.7's guarantee OptComp(..., e^{-eta/2} delta_g) + eta whenever
tol <= eta (OptComp decreases in delta_g).  :func:`lattice_delta_bounds` does the same in
the delta direction.  Both bounds follow from data processing, exactly; only their
evaluation is numerical, and it is certified in floating point (below).

What the drivers run, in order (each path certified on its own):

1. **enumerated** -- one group (binomial) or a small product of groups: listed exactly
   (:mod:`optcomp.optimal`);
2. **commensurable** -- every eps_i is, up to float rounding (2^-46 relative), an integer
   multiple n_i of a common unit u (decimals such as 0.1, 0.25, 0.05; a few kinds of
   query): :func:`commensurable_bounds`.  OptComp is nondecreasing in each eps_i, so the
   instances n_i u_hi >= eps_i >= n_i u_lo (u_hi, u_lo floats, checked in exact
   rationals) bound it from both sides, and each is composed *exactly* on the lattice uZ:
   one binomial leaf per group (masses of :mod:`optcomp._binomial`, moved by at most
   c |n u - eps| in the log for the instance's eps), one tilted FFT tree, every error
   charged as below -- no refinement, no garbling; the tree runs in x87 long double
   (unit roundoff 2^-64) when float64's charges would exceed 1e-10.  The bracket is
   ~1e-11 relative: effectively exact;
3. **grouped lattice** -- any eps: :func:`grouped_pass` (one leaf per group of equal eps,
   or per bundle of small groups composed exactly; refined / garbled atom by atom, so a
   group of c mechanisms costs one refinement, not c; a streamed FFT tree whose nodes are
   cut to windows certified by Chernoff bounds, so the lattice covers a few tilted
   standard deviations around the answer, not [-sum eps, sum eps]; memory O(#groups +
   window), never O(k)).  Its proofs are in its docstring; the per-mechanism
   :func:`lattice_pass` below (the construction the grouped one generalises) is kept as
   a reference and for the tests.

The per-mechanism construction, on a lattice of step h = m 2^j with an integer m <= 15 (so
every residue below is exact in floating point):

* **upper bound: a refinement** (exact, by data processing).  Mechanism i's pair of
  output distributions (the randomized response of MV Def. 3.1 / Lemma 3.2: loss +eps_i
  with P0-mass p_i = e^{eps_i}/(1 + e^{eps_i}), loss -eps_i with q_i = 1 - p_i) is
  replaced by a *more informative* pair whose loss is lattice-valued: the lattice of
  mechanism i is shifted so that +eps_i is a lattice point, and the outcome "-" is
  split into two outcomes with losses at the lattice neighbours lo < -eps_i < hi,
  with P1-probabilities p_i (1 - pi_i), p_i pi_i and P0-probabilities P1 e^{loss};
  pi_i = expm1(h (1 - g_i)) / expm1(h) makes (1 - pi) e^{lo} + pi e^{hi} = e^{-eps_i}, so
  both are probability distributions and forgetting the split gives back the original
  pair.  The original composition is therefore a garbling of the refined one, and its
  hockey-stick curve H(x) -- hence OptComp -- is below the refined one's at every x.
* **lower bound: a garbling** (exact, by data processing).  The statistic
  T(s) = sum_i T_i(s_i), T_i(+) = +eps_i, T_i(-) = the lattice neighbour nearest to
  -eps_i, is a function of the outcome, so the pair of pushforwards (P0 T^-1, P1 T^-1)
  has hockey-stick curve sum_t (P0_T(t) - e^x P1_T(t))_+ <= H(x) at every x.  Its atoms
  become privacy-loss atoms ell_t = log(P0_T(t)/P1_T(t)) of mass P0_T(t).
* the gap is second order in h: about (1/2)(1 + lambda) sum_i (q_i g_i (1 - g_i)
  + r_i^2/4) h^2 ~ 0.1 k h^2 for eps_i ~ 0.1 (g_i, r_i the fractional residues of
  2 eps_i / h, lambda = |d log H/dx|), so gap 1e-3 at k = 1000 needs only h = 2^-9
  (~1.3e5 lattice points); mechanisms with eps_i < h/4 are dropped by T (a first-order
  term eps_i each), which the step control measures and refines away.
* (per-mechanism pass) the 3k independent lattice factors (refined P0; P0 and P1 of T) are convolved by a
  balanced FFT tree (scipy.fft, 5-smooth lengths, batched; leaves and levels chunked
  by width so one large eps_i does not pad every row), after an exponential tilt
  (Esscher transform) P_theta(l) ~ P(l) e^{theta l} with theta chosen so the tilted
  mean is at the answer: FFT errors, which are absolute, are then relative to the mass
  that matters, down to delta_g ~ 1e-300.  The whole support (2 sum_i eps_i / h
  points) is kept -- no tail truncation -- so the work is
  O(sum_i eps_i / h * log(.) * log k) ~ k^1.5 / sqrt(tol): eps_i ~ U[0.05, 0.2] on
  2 cores, k = 1000 at tol 1e-3 in ~0.15 s, k = 10^4 at tol 1e-2 in ~2 s (0.3 GiB);
  k = 10^5 (eps_i ~ 0.03) at tol 1e-2 in ~30 s, at the default ``max_points``.
* delta direction (:func:`lattice_delta_bounds`): the same passes at x = eps_g, until
  upper - lower <= tol * upper or upper <= delta_opt(eps_g - tol) (certified).
* steps (h = m 2^j, 8 <= m <= 15): a first pass at the step whose gap is predicted ~0.75 tol
  (measured per-leaf coefficients; in the delta direction the eps gap times an estimate
  of |d log H/dx|), usually the only one; otherwise the step predicted from the measured
  gap and its measured order in h; the tilt is re-aimed at the bracket.  ``max_points`` caps the lattice (:class:`ApproxTooCostly` carries the
  best bracket).  Homogeneous inputs (one distinct eps) are solved exactly instead
  (binomial atoms with their pmf error charged both ways), upward and downward.

Soundness in floating point.  Nothing is computed "exactly"; every quantity is bounded
on the safe side:

* residues, lattice positions: exact (h = m 2^j, m <= 15, and |n| < 2^49, so h n is exact and the residue
  eps - h n is exact by Sterbenz's lemma; positions C + h n with the integer n exact and
  C = sum of offsets correctly rounded by fsum); loss values of the upper bound are then
  moved up by 4 ulps of |loss| + |C|;
* leaf masses: computed from logs (log_expit, log(expm1)) with a relative error bound per
  leaf of 8 ulps times the magnitude of every term involved (libm functions assumed
  accurate to a few ulps); the k leaves multiply these (all terms are positive), and so
  does the tilt's normaliser exp(sum log Z_i - theta h n);
* FFT convolution: per convolution, error <= (40 log2 N + 10) u (|a|_2 |b|_1 + |a|_1 |b|_2)
  in the 2-norm -- about 1.7x the standard normwise bound for radix-2 Cooley-Tukey
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm 24.2, with
  accurate twiddles) carried through the pointwise product and inverse transform; that
  this form also covers scipy's mixed-radix (2, 3, 4, 5) real FFTs is an assumption, which
  the tests check against long-double and rational convolutions (actual errors are 10^3 to
  10^5 times below the bound).  Errors propagate by Young's inequality, and at the root
  ||a * b||_inf <= ||a||_2 ||b||_2 turns them into a max-norm bound per lattice point;
* upper bounds add that bound to every atom's (tilted) mass and clip at 1 (a mass that
  underflows is charged 2.5e-308 as slack), then :func:`optcomp.loss.solve_segments` or
  ``LossDistribution.excess`` charge their own summation error upward; lower bounds
  subtract it (clip at 0), raise P1 by it, and :func:`optcomp.loss.solve_lower` /
  :func:`optcomp.loss.excess_lower` charge every summation error downward;
* the residual target t = 1 - (1 - delta_g)/prod(1 - delta_i) is rounded down for upper
  bounds (:func:`optcomp.loss.residual_target`) and up for lower bounds
  (``residual_target(..., round_up=True)``, exact rationals when the sign is in doubt).
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from scipy.special import expit, log_expit

from ._inputs import Mechanisms
from ._rounding import TINY, UNIT, dot_dir, down, exact_dir, up
from .loss import (
    LossDistribution,
    delta_from_excess,
    excess_lower,
    residual_target,
    solve_lower,
    solve_segments,
)
from .optimal import _split_groups, exact_epsilon_bounds, exact_excess_bounds

__all__ = [
    "MAX_POINTS",
    "DELTA_FLOOR",
    "DELTA_FLOAT_GAP",
    "Bounds",
    "ApproxTooCostly",
    "BracketInfo",
    "LatticePass",
    "lattice_bounds",
    "lattice_delta_bounds",
    "lattice_pass",
    "tilt_for",
    "chernoff_guess",
]

MAX_POINTS = 2**23  # lattice points of the composed distribution (memory ~ 1 GiB at the cap)
DELTA_FLOOR = 2.0**-1000  # absolute delta accuracy always accepted (~1e-301: float's own floor)
DELTA_FLOAT_GAP = 2.0**-40  # accepted only when refining the lattice no longer helps (see lattice_delta_bounds)


class ApproxTooCostly(ValueError):
    """The requested tolerance needs a finer lattice than ``max_points`` allows (or, for
    ``algorithm="paper"`` of :mod:`optcomp.approx`, hours of dynamic programming).

    ``bounds`` holds the certified (lower, upper) bracket reached before giving up (None
    when there is none)."""

    def __init__(self, message: str, bounds: "Bounds | None" = None):
        super().__init__(message)
        self.bounds = bounds


class Bounds(NamedTuple):
    """Certified bounds: ``lower <= optimum <= upper``."""

    lower: float
    upper: float

    @property
    def gap(self) -> float:
        """``upper - lower``; ``math.inf`` whenever ``upper`` is infinite (never NaN)."""
        return math.inf if self.upper == math.inf else self.upper - self.lower


# --------------------------------------------------------------------------- FFT tree


def _fft():
    """scipy.fft, imported on first use (it costs ~0.3 s at start-up)."""
    import scipy.fft

    return scipy.fft


def _fft_error(N: int, unit: float = UNIT) -> float:
    """Max-norm error factor of one FFT convolution of length N (see module docstring);
    ``unit``: the unit roundoff of the arithmetic (2^-53, or 2^-64 for x87 long double)."""
    return (40.0 * math.log2(max(N, 2)) + 10.0) * unit


def _tilted_leaves(positions, logmasses, magnitudes, theta_h):
    """Leaf masses m_a e^{theta h pos_a}, normalised per leaf.

    ``magnitudes`` bound the sum of the absolute values of the terms each log-mass was
    computed from (its absolute rounding error is a few ulps of that).  Returns
    (weights, logZ, rho): ``weights[j][i]`` the normalised mass of atom j of leaf i,
    ``logZ[i]`` the (float) log-normaliser of leaf i -- an exact constant from here on --
    and ``rho[i]`` a bound on the relative error of leaf i's weights with respect to the
    exact m_a e^{theta h pos_a - logZ[i]}."""
    logw = [lm + theta_h * pos for pos, lm in zip(positions, logmasses)]
    mx = np.max(np.vstack(logw), axis=0)
    with np.errstate(under="ignore"):
        ws = [np.exp(lw - mx) for lw in logw]
    Z = np.zeros_like(mx)
    for w in ws:
        Z += w
    ws = [w / Z for w in ws]
    logZ = mx + np.log(Z)
    mag = np.max(np.vstack([mg + np.abs(theta_h * pos) for pos, mg in zip(positions, magnitudes)]), axis=0)
    rho = 8.0 * UNIT * (mag + np.abs(mx) + 8.0)
    return ws, logZ, rho


def _leaf_blocks(width, offset, batches, budget: int = 2**22):
    """Scatter the leaves into blocks of similar width (sorted by width; within a block the
    widest is at most 1.5 x the narrowest + 64): a list of (X (B, n, W), widths, offsets, E)
    for :func:`_fft_tree`.  ``batches[b]`` is a list of (positions, weights) per atom."""
    order = np.argsort(width, kind="stable")
    ws = width[order]
    blocks = []
    start, k = 0, width.size
    nb = len(batches)
    while start < k:
        end = start + 1
        while end < k and ws[end] <= 1.5 * ws[start] + 64 and (end - start + 1) * int(ws[end]) <= budget:
            end += 1
        sel = order[start:end]
        W = int(ws[end - 1])
        X = np.zeros((nb, sel.size, W))
        rows = np.arange(sel.size)
        for b, atoms in enumerate(batches):
            for pos, wt in atoms:
                X[b, rows, pos[sel]] += wt[sel]
        blocks.append((X, width[sel].astype(np.int64), offset[sel].astype(np.int64), np.zeros((nb, sel.size))))
        start = end
    return blocks


def _fft_tree(blocks, workers: int, budget: int = 2**22, dtype=np.float64, max_norm: bool = True):
    """Linear convolution of all rows of the ``blocks`` (each (X (B, n, W), widths, offsets,
    E)) along the last axis, batched over the first axis (B), by a balanced tree of FFTs
    (scipy.fft, 5-smooth lengths).

    Each level pairs the narrowest rows with the widest (so the sums have even widths), and
    convolves the pairs in chunks of similar width (at most ``budget`` padded entries per
    batch row and chunk), so one very wide row (a large eps_i) never forces every row to
    its width.  ``dtype=np.longdouble`` runs the tree in x87 extended precision (unit
    roundoff 2^-64, about 4x slower; the commensurable path uses it where the FFT error
    charges would otherwise dominate a 1e-9 bracket).  ``max_norm=False``: the root's
    bound stays in the 2-norm (for a root that is convolved further).

    ``widths``/``offsets`` (length n) give each row's true support length and lattice
    offset; ``E`` (B, n) bounds each row's error in the 2-norm.  Returns (root (B, width),
    width, offset, E_root (B,)) with ``E_root`` a bound on the root's error in the *max*
    norm.  For one convolution c = a * b of computed rows a^, b^ with true a, b:

        c^ - c = (a^ - a) * b^ + a * (b^ - b) + (fl_FFT(a^ * b^) - a^ * b^),

    so (Young's inequality, ||x * y||_2 <= ||x||_2 ||y||_1)
        E_c = E_a |b^|_1 + (|a^|_1 + sqrt(w_a) E_a) E_b + F(N) (|a^|_2 |b^|_1 + |a^|_1 |b^|_2),
    and at the root, ||x * y||_inf <= ||x||_2 ||y||_2 gives the far smaller max-norm bound
        E_inf = E_a |b^|_2 + (|a^|_2 + E_a) E_b + F(N) (...)
    (the error of the whole left half is smoothed by the spread-out right half).  Clipping
    negative outputs to 0 and zeroing beyond the true width only reduce the error."""
    nb = blocks[0][0].shape[0]
    while True:
        sizes = [blk[1].size for blk in blocks]
        r = sum(sizes)
        if r == 1:
            Xb, wb_, ob_, Eb_ = next(blk for blk in blocks if blk[1].size == 1)
            w = int(wb_[0])
            return Xb[:, 0, :w], w, int(ob_[0]), Eb_[:, 0]
        bid = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
        idx = np.concatenate([np.arange(n) for n in sizes])
        w = np.concatenate([blk[1] for blk in blocks])
        off = np.concatenate([blk[2] for blk in blocks])
        Ecat = np.concatenate([blk[3] for blk in blocks], axis=1)
        order = np.argsort(w, kind="stable")
        new_blocks = []
        if r % 2:
            c = order[0]
            order = order[1:]
            src = blocks[bid[c]]
            new_blocks.append((src[0][:, [idx[c]], : w[c]].copy(), w[[c]], off[[c]], Ecat[:, [c]]))
        half = order.size // 2
        ia, ib = order[:half], order[half:][::-1]  # narrowest with widest: even sums
        wc_all = w[ia] + w[ib] - 1
        porder = np.argsort(wc_all, kind="stable")
        ia, ib, wc_all = ia[porder], ib[porder], wc_all[porder]
        npairs = ia.size
        is_root = npairs == 1 and r == 2 and max_norm
        start = 0
        while start < npairs:
            end = start + 1
            while end < npairs:
                n_est = _fft().next_fast_len(int(wc_all[end]), real=True)
                if wc_all[end] > 1.5 * wc_all[start] + 64 or (end - start + 1) * n_est > budget:
                    break
                end += 1
            pa, pb = ia[start:end], ib[start:end]
            new_blocks.append(_convolve_chunk(blocks, bid, idx, w, off, Ecat, pa, pb, nb, is_root, workers, dtype))
            start = end
        blocks = new_blocks


def _gather(blocks, bid, idx, rows, width, nb, N, dtype=np.float64):
    """Rows ``rows`` (global indices) copied into a zero-padded (nb, len(rows), N) array."""
    out = np.zeros((nb, rows.size, N), dtype=dtype)
    if rows.size <= 16:  # row by row: one copy each (fancy indexing copies twice)
        for k, (b, i) in enumerate(zip(bid[rows].tolist(), idx[rows].tolist())):
            Xb = blocks[b][0]
            cols = min(width, Xb.shape[2])
            out[:, k, :cols] = Xb[:, i, :cols]
        return out
    for b in np.unique(bid[rows]):
        sel = np.nonzero(bid[rows] == b)[0]
        Xb = blocks[b][0]
        cols = min(width, Xb.shape[2])
        out[:, sel, :cols] = Xb[:, idx[rows[sel]], :cols]
    return out


def _convolve_chunk(blocks, bid, idx, w, off, Ecat, pa, pb, nb, is_root, workers, dtype=np.float64):
    wa, wb = w[pa], w[pb]
    Wa, Wb = int(wa.max()), int(wb.max())
    N = _fft().next_fast_len(Wa + Wb - 1, real=True)
    wc = wa + wb - 1
    Wc = int(wc.max())
    ea, eb = Ecat[:, pa], Ecat[:, pb]
    # contiguous zero-padded copies (much faster than letting rfft pad a strided view)
    A = _gather(blocks, bid, idx, pa, Wa, nb, N, dtype)
    Bm = _gather(blocks, bid, idx, pb, Wb, nb, N, dtype)
    # norms over the first Wa (Wb) columns: the padding is exactly 0
    Av, Bv = A[..., :Wa], Bm[..., :Wb]
    s1a = Av.sum(axis=-1) * (1.0 + Wa * UNIT) + 1e-300
    s1b = Bv.sum(axis=-1) * (1.0 + Wb * UNIT) + 1e-300
    s2a = np.sqrt(np.einsum("ijk,ijk->ij", Av, Av)) * (1.0 + Wa * UNIT)
    s2b = np.sqrt(np.einsum("ijk,ijk->ij", Bv, Bv)) * (1.0 + Wb * UNIT)
    del Av, Bv
    FA = _fft().rfft(A, axis=-1, workers=workers, overwrite_x=True)
    del A
    FA *= _fft().rfft(Bm, axis=-1, workers=workers, overwrite_x=True)
    del Bm
    C = _fft().irfft(FA, N, axis=-1, workers=workers, overwrite_x=True)[..., :Wc]
    del FA
    np.maximum(C, 0.0, out=C)
    for j in np.nonzero(wc < Wc)[0]:  # true values are exactly 0 beyond the true width
        C[:, j, wc[j]:] = 0.0
    # norms carry (1 + W u64) >= their own summation error in either precision
    s1a, s1b, s2a, s2b = (np.asarray(v, dtype=float) * (1.0 + 4.0 * UNIT) for v in (s1a, s1b, s2a, s2b))
    fe = _fft_error(N, UNIT if dtype == np.float64 else 2.0**-64) * (s2a * s1b + s1a * s2b)
    Ec = (ea * s1b + eb * (s1a + np.sqrt(wa) * ea) + fe) * (1.0 + 1e-9)
    if is_root:  # max-norm bound via 2-norms
        Einf = (ea * s2b + eb * (s2a + ea) + fe) * (1.0 + 1e-9)
        Ec = np.minimum(Ec, Einf)
    return C, wc, off[pa] + off[pb], Ec


# --------------------------------------------------------------------------- one lattice pass


@dataclass
class LatticePass:
    """One lattice computation at step ``h`` (see :func:`lattice_pass`)."""

    h: float
    theta: float
    upper: LossDistribution  # P0 atoms (loss > 0) of the refined experiment
    lower_loss: np.ndarray  # sorted losses (> 0) of the garbled experiment T
    lower_p0: np.ndarray  # their P0 masses (lower bounds)
    points: int  # lattice points of the composed distribution

    def epsilon_bounds(self, t_low: float, t_high: float) -> Bounds:
        upper = solve_segments(self.upper, t_low)
        lower = solve_lower(self.lower_loss, self.lower_p0, t_high)
        return Bounds(lower, upper)

    def excess_bounds(self, x: float) -> tuple[float, float]:
        return excess_lower(self.lower_loss, self.lower_p0, x), self.upper.excess(x)


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


def _residues(x: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Integers n and residues r with x = h n + r, 0 <= r < h, all exact.

    h = m 2^j with an integer m <= 15 and |n| < 2^49, so h n is exact; r = x - h n
    is then exact by Sterbenz's lemma (h n >= x/2 when x >= h; n in {0, 1} otherwise).  The
    float floor(x/h) may be off by one next to an integer: corrected on the exact r."""
    n = np.floor(x / h)
    r = x - h * n
    low = r < 0.0
    n[low] -= 1.0
    high = r >= h
    n[high] += 1.0
    r = x - h * n
    return n, r


def lattice_pass(e: np.ndarray, h: float, theta: float, workers: int = -1) -> LatticePass:
    """Certified upper- and lower-bound loss distributions of sum_i s_i eps_i on the lattice of
    step ``h`` (h = m 2^j with an integer m <= 15, so every residue below is exact).

    Mechanism i (eps_i > 0; p_i = e^{eps_i}/(1 + e^{eps_i}) = P0[s_i = +], q_i = 1 - p_i)
    lives on the shifted lattice c_i + hZ with c_i = eps_i - h floor(eps_i/h): its atom
    +eps_i is a lattice point; -eps_i = c_i + h (n_i - m_i - g_i) with
    2 eps_i / h = m_i + g_i (m_i integer, 0 <= g_i < 1) lies between the neighbours
    lo = c_i + h(n_i - m_i - 1) and hi = lo + h.  The sum lives on (sum c_i) + hZ.

    Upper (refinement): -eps_i is split under P1 (mass p_i) into hi with probability
    pi_i = expm1(h(1 - g_i))/expm1(h) and lo with 1 - pi_i, chosen so that
    E_P1[e^{L_i}] = 1 is kept (e^{-eps_i} = (1 - pi) e^{lo} + pi e^{hi}); the P0 masses are
    the P1 masses times e^{loss}: q (1 - pi) e^{-h(1-g)} at lo, q pi e^{hg} at hi, p at
    +eps_i.  Forgetting the split gives back the original pair, so the refined pair is
    more informative and its hockey-stick curve dominates: H_true(x) <= H_upper(x) for
    every x.

    Lower (garbling): T_i(+) = +eps_i, T_i(-) = the nearer of lo/hi; the pushforwards
    P0 o T^-1 and P1 o T^-1 have hockey-stick curve H_T(x) <= H_true(x) for every x.
    Their atoms t become privacy-loss atoms ell_t = log(P0_T(t)/P1_T(t)) with mass
    P0_T(t), which (after sorting) is the form every solver here takes.
    """
    k = e.size
    mm, hg = _residues(2.0 * e, h)  # 2 eps = h m + hg, 0 <= hg < h, exactly
    n, c = _residues(e, h)  # eps = h n + c, 0 <= c < h, exactly
    width = (mm + 2).astype(np.int64)
    offset = (n - mm - 1).astype(np.int64)
    logp = log_expit(e)
    logq = log_expit(-e)
    lem1h = math.log(math.expm1(h))
    with np.errstate(divide="ignore"):
        l_g = np.log(np.expm1(hg))  # -inf when hg == 0 (then -eps_i is a lattice point)
    l_1g = np.log(np.expm1(h - hg))  # h - hg: relative rounding error <= u, charged below
    up_lo = logq + l_g - lem1h
    up_hi = logq + l_1g - lem1h + hg
    mag_p, mag_q = np.abs(logp), np.abs(logq)
    mag_lo = mag_q + np.abs(np.where(np.isfinite(l_g), l_g, 0.0)) + abs(lem1h)
    mag_hi = mag_q + np.abs(l_1g) + abs(lem1h) + hg
    top = width - 1
    pos_lo = np.zeros(k, dtype=np.int64)
    pos_hi = np.ones(k, dtype=np.int64)
    pos_t = np.where(hg < 0.5 * h, 1, 0).astype(np.int64)
    th = theta * h
    w0, lz0, r0 = _tilted_leaves([pos_lo, pos_hi, top], [up_lo, up_hi, logp], [mag_lo, mag_hi, mag_p], th)
    w1, lz1, r1 = _tilted_leaves([pos_t, top], [logq, logp], [mag_q, mag_p], th)
    w2, lz2, r2 = _tilted_leaves([pos_t, top], [logp, logq], [mag_p, mag_q], th + h)
    blocks = _leaf_blocks(width, offset, [list(zip([pos_lo, pos_hi, top], w0)), list(zip([pos_t, top], w1)),
                                          list(zip([pos_t, top], w2))])
    root, w, off, Eroot = _fft_tree(blocks, workers)
    del blocks
    logZ = [math.fsum(lz.tolist()) for lz in (lz0, lz1, lz2)]
    J = np.arange(w, dtype=float)
    thetas = (theta, theta, theta + 1.0)
    rho = []
    for b, rb in enumerate((r0, r1, r2)):
        mag_w = float(np.sum(np.abs((lz0, lz1, lz2)[b]))) + abs(logZ[b]) + thetas[b] * h * w
        rho.append(math.expm1(float(np.sum(rb)) + 4.0 * UNIT * (mag_w + 4.0)) + 4.0 * UNIT)
    # lattice values: C + h (off + J) with C = sum c_i correctly rounded (fsum) and
    # h (off + J) exact (an integer times a power of two): error <= u (|loss| + |C|)
    C = math.fsum(c.tolist())
    loss = C + h * (np.arange(w, dtype=np.int64) + off).astype(float)
    loss_up = loss + 4.0 * UNIT * (np.abs(loss) + abs(C))
    # ---- upper: P0 masses of the refined experiment, inflated by the error bounds
    keep = loss_up > 0.0
    with np.errstate(under="ignore", over="ignore"):
        logw0 = logZ[0] - theta * h * J[keep]
        p_up = np.exp(logw0) * (root[0, keep] + Eroot[0]) * (1.0 + rho[0])
    np.minimum(p_up, 1.0, out=p_up)
    # a mass that underflowed may hide up to TINY: keep it on the safe side
    nz = p_up > 0.0
    slack = TINY * float(np.count_nonzero(~nz))
    upper = LossDistribution(loss_up[keep][nz], p_up[nz], slack=slack, exact_from=0.0)
    # ---- lower: garbled experiment, P0 lowered and P1 raised by the error bounds
    p0t = root[1] - Eroot[1]
    ok = p0t > 0.0
    Jk = J[ok]
    with np.errstate(divide="ignore"):
        log_p0 = logZ[1] - theta * h * Jk + np.log(p0t[ok]) + math.log1p(-rho[1])
        log_p1 = logZ[2] - (theta + 1.0) * h * Jk + np.log(root[2, ok] + Eroot[2]) + math.log1p(rho[2])
    ell = log_p0 - log_p1
    err = 4.0 * UNIT * (np.abs(log_p0) + np.abs(log_p1) + abs(logZ[1]) + abs(logZ[2]) + (2 * theta + 1) * h * Jk + 4.0)
    ell = ell - err
    pos = ell > 0.0
    # exp of a sum whose partial sums reach |logZ| + theta h J: charge their rounding
    mag0 = abs(logZ[1]) + theta * h * Jk[pos] + np.abs(np.log(p0t[ok][pos])) + np.abs(log_p0[pos]) + 4.0
    with np.errstate(under="ignore"):
        p_lo = np.exp(log_p0[pos]) * (1.0 - 4.0 * UNIT * mag0)
    ell = ell[pos]
    order = np.argsort(ell, kind="stable")
    return LatticePass(
        h=h,
        theta=theta,
        upper=upper,
        lower_loss=ell[order],
        lower_p0=p_lo[order],
        points=w,
    )


# --------------------------------------------------------------------------- drivers (tilt, steps, homogeneous)


MAX_MECHANISMS = 10**7  # the lattice passes take one leaf per mechanism


def _positive(m: Mechanisms) -> np.ndarray:
    """The per-mechanism positive eps (for the lattice passes; bounded before allocating)."""
    vals, cnts = m.positive()
    if int(cnts.sum()) > MAX_MECHANISMS:
        raise ApproxTooCostly(
            f"the lattice algorithm composes mechanism by mechanism and is limited to {MAX_MECHANISMS:,} "
            f"mechanisms of positive eps here, got {int(cnts.sum()):,}", None)
    return np.ascontiguousarray(np.repeat(vals, cnts), dtype=float)


def _log_mgf(e: np.ndarray, theta: float, c: np.ndarray | None = None) -> float:
    """K(theta) = log E_P0[e^{theta L}] = sum_i c_i log(p_i e^{theta eps_i} + q_i e^{-theta eps_i})."""
    terms = np.logaddexp(log_expit(e) + theta * e, log_expit(-e) - theta * e)
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
        K = float(np.sum(w * np.logaddexp(lp + theta * e, lq - theta * e)))
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


def _leaf_weight(plan, theta: float) -> float:
    """Sum over the leaves of their measured gap coefficients (gap ~ this x h^2): about
    0.12 (1 + theta) for a binomial group leaf and 0.1 (1 + theta) for a bundle (the
    (1 + lambda) factor of the second-order term, lambda ~ theta = |d log H/dx|)."""
    return (1.0 + theta) * sum(0.12 if (len(items) == 1 and items[0][1] + 1 > BUNDLE_ATOMS) else 0.1
                               for items in plan)


def _log_slope(vals: np.ndarray, cnts: np.ndarray, theta: float) -> float:
    """An estimate of lambda = |d log H / dx| at the x the tilt ``theta`` centres (only used to
    choose the first step of :func:`lattice_delta_bounds`: the relative gap of H is about
    lambda times the gap in eps).  Normal approximation of the tilted loss (sd sigma):
    H ~ int_0^inf e^{-theta u} (1 - e^{-u}) phi_sigma(u) du and -H' ~ int_0^inf
    e^{-(theta + 1) u} phi_sigma(u) du, with int_0^inf e^{-a u} phi_sigma(u) du =
    erfcx(a sigma / sqrt 2) / 2; lambda -> theta for sigma theta >> 1 and ~0.8/sigma at
    theta = 0."""
    from scipy.special import erfcx

    e2 = vals * (1.0 + 2.0 * theta)
    sigma = math.sqrt(float(np.sum(cnts * (2.0 * vals) ** 2 * expit(e2) * expit(-e2))))
    i0 = float(erfcx(theta * sigma / math.sqrt(2.0)))
    i1 = float(erfcx((theta + 1.0) * sigma / math.sqrt(2.0)))
    return i1 / (i0 - i1) if i0 > i1 else math.inf


def _initial_step_n(n: float, tol: float) -> float:
    """A step (:func:`_step_below`) whose predicted gap is ~0.75 tol for n refined leaves:
    each leaf's refinement and garbling cost ~0.14-0.24 h^2 (measured: 0.14 for binomial
    group leaves, 0.17-0.2 for bundles of singletons, 0.23 for bundles of small groups;
    second order, one per leaf whatever its mechanisms), so one pass usually suffices;
    otherwise the next step comes from the measured gap (:func:`_next_step`)."""
    h = min(math.sqrt(0.75 * tol / max(n, 0.2)), 0.25)
    return _step_below(h)


def _points_estimate(vals: np.ndarray, cnts: np.ndarray, theta: float, h: float) -> int:
    """Lattice points of the widest node: the tilted spread (sd sigma_theta of the loss
    under P_theta) times a generous window factor, capped by the full support."""
    e2 = vals * (1.0 + 2.0 * theta)
    var = float(np.sum(cnts * (2.0 * vals) ** 2 * expit(e2) * expit(-e2)))
    full = 2.0 * float(np.sum(cnts * vals))
    return int(min(full, 30.0 * math.sqrt(var) + 4.0 * float(np.max(vals)) + 2.0) / h) + 1


@dataclass
class BracketInfo:
    """Diagnostics of :func:`lattice_bounds`: the passes run (h, points, bounds, seconds)."""

    passes: list = field(default_factory=list)
    path: str = "lattice"


ENUMERATED_ATOMS = 2**15  # up to this many atoms, list the distribution exactly (no lattice)


def lattice_bounds(
    m: Mechanisms,
    delta_g: float,
    tol: float,
    *,
    max_points: int = MAX_POINTS,
    info: BracketInfo | None = None,
    workers: int = -1,
    progress=None,
) -> Bounds:
    """Certified (lower, upper) on OptComp(m, delta_g) with upper - lower <= tol.

    Lattice passes (:func:`grouped_pass`) at steps h = m 2^j (:func:`_step_below`): the first at
    a step whose gap is predicted ~0.75 tol (:func:`_initial_step_n`; one pass usually
    suffices), then at the step predicted from the measured gap (which scales as h^2),
    refining further if needed; the tilt of each pass is aimed at the midpoint of the
    previous bracket.  Raises :class:`ApproxTooCostly` (with the best
    bracket) when the lattice would exceed ``max_points`` points or stops improving.
    """
    info = info if info is not None else BracketInfo()
    t_low = residual_target(m, delta_g)
    if t_low < 0.0:
        return Bounds(math.inf if residual_target(m, delta_g, round_up=True) < 0.0 else 0.0, math.inf)
    t_high = residual_target(m, delta_g, round_up=True)
    vals, cnts = m.positive()
    if vals.size == 0:
        return Bounds(0.0, 0.0)
    top = dot_dir(cnts, vals, True)
    if t_high == 0.0:  # exactly t = 0: H(x) <= 0 iff x >= the largest loss sum eps_i
        return Bounds(dot_dir(cnts, vals, False), top)
    small, shift, big_slack = _split_big(m)
    if small is not None:
        # L = shift + L_s except with probability <= big_slack (then anywhere): H(x) <=
        # H_s(x - shift) + big_slack and H(x) >= (1 - big_slack) H_s(x - shift); big_slack
        # <= 2 k e^-800 is far below an ulp of t, so one ulp up covers the division
        def shifted(b: Bounds) -> Bounds:
            return Bounds(_shifted(b.lower, shift, False), min(_shifted(b.upper, shift, True), top))

        try:
            b = _epsilon_bounds_t(small, down(t_low - big_slack, 1), up(t_high, 1), tol, max_points=max_points,
                                  info=info, workers=workers, progress=progress)
        except ApproxTooCostly as exc:
            raise ApproxTooCostly(str(exc), None if exc.bounds is None else shifted(exc.bounds)) from None
        return shifted(b)
    return _epsilon_bounds_t(m, t_low, t_high, tol, max_points=max_points, info=info, workers=workers,
                             progress=progress)


def _split_big(m: Mechanisms):
    """(small, shift, slack): the mechanisms with 0 < eps_i < BIG_EPS as a multiset without
    delta events (None when there are none, or no big ones), the exact sum of the big eps_i
    (each a deterministic +eps_i but for P0-mass <= e^-eps_i, charged as ``slack``)."""
    groups, shift, slack = _split_groups(m)
    if not shift or not groups:
        return None, shift, slack
    eps = np.array([g[0] for g in groups], dtype=float)
    cnt = np.array([g[1] for g in groups], dtype=np.int64)
    return Mechanisms(eps=eps, delta=np.zeros(eps.size), count=cnt), shift, slack


def _shifted(x: float, shift: Fraction, upward: bool) -> float:
    """x + shift (exact), rounded to the requested side (+-inf stay)."""
    if not math.isfinite(x):
        return x
    return exact_dir(Fraction(x) + shift, upward)


def _epsilon_bounds_t(m: Mechanisms, t_low: float, t_high: float, tol: float, *, max_points: int,
                      info: BracketInfo, workers: int, progress) -> Bounds:
    """:func:`lattice_bounds` at the residual target t (``t_low`` <= t <= ``t_high``)."""
    vals, cnts = m.positive()
    top = dot_dir(cnts, vals, True)
    exact = exact_epsilon_bounds(m, t_low, t_high, ENUMERATED_ATOMS)
    if exact is not None:  # one group (binomial) or a small product: listed exactly
        info.path = "enumerated"
        return Bounds(exact[0], min(exact[1], top))
    comm = commensurable_bounds(m, t_low, t_high, max_points=max_points, workers=workers, info=info,
                                progress=progress)
    if comm is not None and comm.gap <= tol:  # eps_i = n_i u: the lattice at step u is exact
        return Bounds(comm.lower, min(comm.upper, top))
    info.passes.clear()
    info.path = "lattice"
    cf = cnts.astype(float)
    plan = leaf_plan(vals, cnts)
    x_est = chernoff_guess(vals, t_low, cf)
    h = _initial_step_n(_leaf_weight(plan, tilt_for(vals, x_est, cf)), tol)
    # mass sent to +inf: a fraction <= min(2^-40, tol/64) of t in all (H moves by less
    # than that relative, eps by about that / theta: far inside tol)
    log_slack = math.log(max(t_low, 1e-300) * max(SLACK_REL, min(2.0**-20, tol / 64.0)) / (4 * len(plan) + 4))
    best = Bounds(0.0, top)
    if t_low <= 0.0 < t_high:
        # t is positive but below the float range (rounded down to 0): no upper bound below
        # the top atom can be certified in float64 masses, and refining cannot change that;
        # one pass gives the lower bound (its target t_high >= t is the safe side)
        lp = grouped_pass(vals, cnts, h, tilt_for(vals, x_est, cf), log_slack, workers, plan, progress)
        return Bounds(min(lp.epsilon_bounds(t_low, t_high).lower, top), top)
    gaps: list[float] = []
    steps: list[float] = []
    reaimed = False
    while True:
        theta = tilt_for(vals, x_est, cf)
        points = _points_estimate(vals, cnts, theta, h)
        if points > max_points:
            raise ApproxTooCostly(
                f"a certified gap <= tol={tol:g} needs a lattice step h={h:g} with about {points:,} points "
                f"(> max_points={max_points:,}); best bounds so far {best.lower!r} <= eps_g <= {best.upper!r}. "
                "Raise tol (or eta) or max_points.",
                best,
            )
        t0 = time.perf_counter()
        lp = grouped_pass(vals, cnts, h, theta, log_slack, workers, plan, progress)
        b = lp.epsilon_bounds(t_low, t_high)
        b = Bounds(max(b.lower, best.lower), min(b.upper, best.upper, top))
        info.passes.append(dict(h=h, points=lp.points, lower=b.lower, upper=b.upper, theta=lp.theta,
                                seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="lattice", step=h, points=lp.points, lower=b.lower, upper=b.upper, gap=b.gap,
                          tol=tol, seconds=time.perf_counter() - t0))
        best = b
        gap = b.gap
        if gap <= tol:
            return b
        if not reaimed and 0.0 < b.lower and (gap >= 64.0 * tol or gap >= 0.1 * b.upper) and math.isfinite(b.upper):
            # a bracket this wide at a step aimed at ~0.75 tol is a misaimed tilt (the
            # Chernoff guess overshoots to the top atom when delta_g is near its mass, and
            # the windows then cut what matters), not the step: the same step again, aimed
            # at the middle of the bracket
            reaimed = True
            x_est = 0.5 * (b.lower + b.upper)
            continue
        gaps.append(gap)
        steps.append(h)
        if len(gaps) > 6 and gap > 0.9 * gaps[-7]:
            # six halvings of h without progress: not a discretisation gap (should not happen)
            raise ApproxTooCostly(
                f"the certified gap stopped shrinking at {gap:g} (tol={tol:g}; h={h:g}); "
                f"best bounds {b.lower!r} <= eps_g <= {b.upper!r}",
                b,
            )
        if math.isfinite(b.upper):
            x_est = 0.5 * (b.lower + b.upper) if b.gap < 0.1 * b.upper else b.upper
        h = _next_step(steps, gaps, tol)


STEP_MANTISSA_BITS = 4  # steps h = m 2^j with an integer 8 <= m <= 15: consecutive steps 1/8 apart at most


def _step_below(x: float) -> float:
    """The largest lattice step h = m 2^(j-3), 8 <= m <= 15 (consecutive ones at most 1/8
    apart), with h <= x.

    A 4-bit mantissa keeps every product of h with an integer n, |n| < 2^49, exact (m n <
    2^53), which is what the residues and lattice positions rely on (:func:`grouped_pass`
    checks the bound); the finer grid lets the step sit closer to the one the tolerance
    allows (the cost of a pass is ~1/h)."""
    j = math.floor(math.log2(x))
    unit = 2.0 ** (j - STEP_MANTISSA_BITS + 1)
    m = min(2 ** STEP_MANTISSA_BITS - 1, max(2 ** (STEP_MANTISSA_BITS - 1), math.floor(x / unit)))
    h = m * unit
    while h > x and m > 2 ** (STEP_MANTISSA_BITS - 1):  # float floor next to an integer
        m -= 1
        h = m * unit
    return h


def _next_step(steps, gaps, tol) -> float:
    """The next lattice step (:func:`_step_below`): the gap is second order in h (refinement
    and garbling of every mechanism with eps_i >> h) but first order in the contribution
    of mechanisms with eps_i < h/4 (the garbling drops them); the local order is measured
    from the last two passes.  At least a factor 4/3 and at most 16 per pass."""
    h, gap = steps[-1], gaps[-1]
    order = 2.0
    if len(gaps) >= 2:
        ratio = gaps[-2] / gap if gap > 0 else math.inf
        order = min(2.0, max(0.5, math.log(max(ratio, 1.0)) / math.log(steps[-2] / h)))
    target = h * (0.6 * tol / gap) ** (1.0 / order)
    return max(_step_below(h / 16.0), min(_step_below(0.75 * h), _step_below(target)))


def lattice_delta_bounds(
    m: Mechanisms,
    eps_g: float,
    tol: float,
    *,
    max_points: int = MAX_POINTS,
    info: BracketInfo | None = None,
    workers: int = -1,
    progress=None,
) -> Bounds:
    """Certified (lower, upper) on the optimal delta_g(eps_g), refined until

        upper - lower <= tol * upper + 2^-1000     (relative)   or
        upper <= a certified lower bound on delta_opt(eps_g - tol)   (horizontal),

    so that delta_opt(eps_g) <= upper <= max(delta_opt(eps_g)/(1 - tol), delta_opt(eps_g - tol)):
    MV Thm 1.7's additive-eps form read in the delta direction.  (A relative tolerance
    alone cannot always be met: for eps_g within rounding distance below an atom of the
    loss distribution, e.g. just below sum eps_i, delta_opt is dominated by that
    distance.)  In degenerate float cases (delta_opt below ~1e-14 P0[L > eps_g], e.g.
    eps_i ~ 1e-200) where six halvings of the step bring no progress, a bracket of
    absolute width <= 2^-40 is returned as the float64 floor.

    The first step is the one whose relative gap in H is predicted ~0.75 tol: the eps gap
    of :func:`_initial_step_n` times lambda = |d log H/dx| (:func:`_log_slope`, ~theta at
    the tilt; capped at 1 + theta), usually the only pass; then :func:`_next_step` from the
    measured relative gaps.  (Only the cost depends on these choices, never the bounds.)"""
    info = info if info is not None else BracketInfo()
    vals, cnts = m.positive()
    if vals.size == 0 or eps_g >= dot_dir(cnts, vals, True):
        return Bounds(delta_from_excess(m, 0.0, round_up=False), delta_from_excess(m, 0.0))
    small, shift, big_slack = _split_big(m)
    if small is None:
        def to_delta(lo: float, hi: float) -> Bounds:
            return Bounds(delta_from_excess(m, lo, round_up=False), delta_from_excess(m, hi))

        return _delta_bounds_x(m, eps_g, tol, to_delta, max_points=max_points, info=info, workers=workers,
                               progress=progress)
    # L = shift + L_s but for P0-mass <= big_slack: H(x) <= H_s(y) + big_slack and H(x) >=
    # (1 - big_slack) H_s(y), y = x - shift exact.  For y < 0, H_s(y) = 1 - e^y + e^y H_s(-y)
    # exactly (P0(l) = e^l P0(-l) for products of randomized responses, and E_P0[e^{-L_s}] = 1).
    # H_s is 1-Lipschitz (slope -E[e^{z - L}; L > z]), so evaluating at the float z <= |y|
    # costs |y| - z on the lower side.
    y = Fraction(eps_g) - shift
    z = exact_dir(abs(y), False)
    move = exact_dir(abs(y) - Fraction(z), True)
    if y < 0:  # 1 - e^y and e^y, each bounded both ways (exp, expm1 within 1 ulp)
        y_dn, y_up = exact_dir(y, False), exact_dir(y, True)
        one_lo, one_hi = max(down(-math.expm1(y_up), 2), 0.0), up(-math.expm1(y_dn), 2)
        e_lo, e_hi = max(down(math.exp(y_dn), 2), 0.0), min(up(math.exp(y_up), 2), 1.0)
    else:
        one_lo = one_hi = 0.0
        e_lo = e_hi = 1.0

    def to_delta(lo: float, hi: float) -> Bounds:
        lo = max(down(lo - move, 1), 0.0)
        lo = down(one_lo + down(e_lo * lo, 1), 1)
        lo = max(down(lo * down(1.0 - big_slack, 1), 1), 0.0)
        hi = min(1.0, up(up(one_hi + up(e_hi * hi, 1), 1) + big_slack, 1))
        return Bounds(delta_from_excess(m, lo, round_up=False), delta_from_excess(m, hi))

    return _delta_bounds_x(small, z, tol, to_delta, max_points=max_points, info=info, workers=workers,
                           progress=progress)


def _delta_bounds_x(m: Mechanisms, eps_g: float, tol: float, to_delta, *, max_points: int, info: BracketInfo,
                    workers: int, progress) -> Bounds:
    """:func:`lattice_delta_bounds` from bounds (lo, hi) on H(eps_g), which ``to_delta``
    turns into certified delta bounds."""
    vals, cnts = m.positive()
    if eps_g >= dot_dir(cnts, vals, True):
        return to_delta(0.0, 0.0)
    exact = exact_excess_bounds(m, eps_g, ENUMERATED_ATOMS)
    if exact is not None:  # one group (binomial) or a small product: the float64 floor
        info.path = "enumerated"
        return to_delta(exact[0], exact[1])
    comm = commensurable_excess_bounds(m, eps_g, rel_gap=max(tol, 1e-12), max_points=max_points,
                                       workers=workers, info=info, progress=progress)
    if comm is not None:  # eps_i = n_i u: the lattice at step u is exact
        b = to_delta(comm[0], comm[1])
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
    info.passes.clear()
    info.path = "lattice"
    cf = cnts.astype(float)
    plan = leaf_plan(vals, cnts)
    theta = tilt_for(vals, eps_g, cf)
    # relative gap of H ~ lambda x the gap in eps (lambda = |d log H / dx| ~ theta at the tilt)
    lam = min(_log_slope(vals, cf, theta), 1.0 + theta)
    h = _initial_step_n(_leaf_weight(plan, theta), tol / lam)
    # the untilted mass sent to +inf: a tiny fraction of the Chernoff estimate of H(eps_g)
    log_slack = (_log_mgf(vals, theta, cf) - theta * eps_g
                 + math.log(1e-6 * max(SLACK_REL, min(2.0**-20, tol / 64.0)) / (4 * len(plan) + 4)))
    rels: list[float] = []
    steps: list[float] = []
    while True:
        points = _points_estimate(vals, cnts, theta, h)
        if points > max_points:
            raise ApproxTooCostly(
                f"a delta gap <= tol={tol:g} needs a lattice step h={h:g} with about {points:,} points "
                f"(> max_points={max_points:,}). Raise tol (or eta) or max_points.",
                None,
            )
        t0 = time.perf_counter()
        lp = grouped_pass(vals, cnts, h, theta, log_slack, workers, plan, progress)
        lo, hi = lp.excess_bounds(eps_g)
        b = to_delta(lo, hi)
        info.passes.append(dict(h=h, points=lp.points, lower=b.lower, upper=b.upper, theta=theta,
                                seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="lattice", step=h, points=lp.points, lower=b.lower, upper=b.upper, gap=b.gap,
                          tol=tol, seconds=time.perf_counter() - t0))
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
        if eps_g - tol >= 0.0:
            shifted = to_delta(excess_lower(lp.lower_loss, lp.lower_p0, eps_g - tol), 1.0).lower
            if b.upper <= shifted:
                return b
        rel = b.gap / b.upper
        rels.append(rel)
        steps.append(h)
        if len(rels) > 6 and rel > 0.9 * rels[-7]:
            if b.gap <= DELTA_FLOAT_GAP:
                # the hockey-stick sums charge rounding relative to the masses summed, not to
                # H: when H is far below them (e.g. eps_i ~ 1e-200) this absolute gap is the
                # floor of float64, reached and reported
                return b
            raise ApproxTooCostly(f"the certified delta gap stopped shrinking at {rel:g} relative (tol={tol:g})", b)
        h = _next_step(steps, rels, tol)


# --------------------------------------------------------------------------- commensurable eps: exact lattice


COMMENSURABLE_MAX_DEN = 10**6  # denominators tried for each eps (decimals with up to 6 digits)
COMMENSURABLE_MAX_LCM = 10**12  # common denominator accepted
COMMENSURABLE_REL = 2.0**-46  # |eps_i - n_i u| <= this * eps_i (a few ulps: float decimals)
SMALL_GROUP = 64  # groups up to this count take their masses from lgamma and log_expit directly
COMMENSURABLE_GAP = 1e-10  # relative gap the commensurable path aims at (float64 pass, then long double)


@dataclass(frozen=True)
class CommonUnit:
    """eps_i = n_i u up to float rounding (|eps_i - n_i u| <= 2^-46 eps_i), u = ``unit``."""

    unit: Fraction
    n: np.ndarray  # int64, n_i >= 1
    eps: np.ndarray  # the distinct positive eps_i (floats)
    count: np.ndarray  # their multiplicities

    @property
    def points(self) -> int:
        """Points of the composed lattice distribution: 2 sum_i c_i n_i + 1."""
        return 2 * sum(int(a) * int(b) for a, b in zip(self.count.tolist(), self.n.tolist())) + 1


def common_unit(eps: np.ndarray, count: np.ndarray, max_points: int = MAX_POINTS) -> CommonUnit | None:
    """A common unit u of the positive ``eps`` (distinct, with multiplicities ``count``):
    each eps_i is within 2^-46 relative of a rational a_i/b_i with b_i <= 10^6 (the
    nearest such by continued fractions), u = gcd of the a_i/b_i, n_i = eps_i/u.  None
    when some eps_i is not of that form, the common denominator exceeds 10^12, or the
    composed lattice would exceed ``max_points`` points.  Only a *choice* of lattice: the
    bounds built on it (:func:`commensurable_pass`) are certified whatever u is."""
    nums, dens = [], []
    for v in eps.tolist():
        fv = Fraction(v)
        f = fv.limit_denominator(COMMENSURABLE_MAX_DEN)
        if f <= 0 or abs(fv - f) > fv * Fraction(COMMENSURABLE_REL):
            return None
        nums.append(f.numerator)
        dens.append(f.denominator)
    L = math.lcm(*dens)
    if L > COMMENSURABLE_MAX_LCM:
        return None
    scaled = [a * (L // b) for a, b in zip(nums, dens)]
    g = math.gcd(*scaled)
    n = [s // g for s in scaled]
    total = 2 * sum(int(c) * ni for c, ni in zip(count.tolist(), n)) + 1
    if total > max_points:
        return None
    return CommonUnit(Fraction(g, L), np.array(n, dtype=np.int64), eps, count)


def _binomial_leaf(eps: float, c: int, n: int, u_inst: float, theta_u: float):
    """Tilted masses of one group on the index lattice: c mechanisms of eps'' = n u_inst
    (the instance's eps, a real number within 2^-46 relative of the float ``eps``), loss
    (2j - c) n u_inst = idx u_inst for j ~ Bin(c, p''), stored at position n j of a row of
    width cn + 1 (losses of a sum of such groups all have the parity of sum_i c_i n_i, so
    the composed row indexes only that parity: half the points).

    Returns (row, logZ, rho, E2): row[n j] = P''(j) e^{theta_u idx - logZ} up to a
    relative error e^{rho} - 1 for every entry that is a normal float, and an absolute
    error (2-norm) E2 for the underflowed ones.  P'' is the binomial mass at eps'': the
    masses of :func:`optcomp._binomial.binomial_log_pmf` at the float eps (log error
    ``err``) moved by |d log P(j)/d eps| = |j q - (c - j) p| <= c per unit of eps, i.e. by
    at most c |n u_inst - eps| in the log (the distance computed in exact rationals)."""
    from ._binomial import binomial_log_pmf

    j = np.arange(c + 1, dtype=np.int64)
    if c <= SMALL_GROUP:
        # direct: log C(c, j) + j log p + (c - j) log q (lgamma, log_expit: a few ulps of
        # each term; every term's magnitude charged 8 ulps, plus the float p vs exact)
        jf = j.astype(float)
        lp, lq = float(log_expit(eps)), float(log_expit(-eps))
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        logp = lc + jf * lp + (c - jf) * lq
        err = 8.0 * UNIT * (3.0 * math.lgamma(c + 1) + jf * abs(lp) + (c - jf) * abs(lq) + np.abs(logp) + 4.0)
    else:
        logp, err = binomial_log_pmf(eps, c, j)
    shift = exact_dir(abs(Fraction(n) * Fraction(u_inst) - Fraction(eps)) * c, True)
    idx = (2 * j - c) * n
    tl = theta_u * idx.astype(float)
    lw = logp + tl
    M = float(np.max(lw))
    with np.errstate(under="ignore"):
        w = np.exp(lw - M)
    Z = float(np.sum(w))  # >= 1 (the largest term is 1)
    w /= Z
    logZ = M + math.log(Z)
    mag = np.abs(logp) + np.abs(tl) + abs(M) + abs(logZ) + 4.0
    # relative error of each entry (in the log): log-pmf error, eps'' vs eps, and the
    # rounding of lw, lw - M, exp, the sum Z (c + 1 positive terms) and logZ = M + log Z
    # (treated as exact from here on)
    rel = err + 8.0 * UNIT * mag + shift + (c + 8) * UNIT
    # entries >= 2^-40 carry it as a relative error rho (the largest among them); the
    # others as an absolute one, w (e^rel - 1) each (far tails, whose log-pmf bound is the
    # loosest, then do not widen the bracket), plus 2^-1073 for subnormal rounding
    core = w >= 2.0**-40
    rho = float(np.max(rel[core]))
    tail = ~core
    E2 = 0.0
    if np.any(tail):
        with np.errstate(under="ignore"):
            a_err = w[tail] * np.expm1(rel[tail]) * 2.0 + 2.0**-1073
        E2 = float(np.sqrt(np.sum(a_err * a_err))) * (1.0 + 1e-9) + 2.0**-1060
    row = np.zeros(c * n + 1)  # position n j: the loss index is 2 n j - c n (one parity only)
    row[::n] = w
    return row, logZ, rho, E2


def _unit_instances(cu: CommonUnit) -> tuple[float, float]:
    """(u_hi, u_lo): floats with n_i u_hi >= eps_i >= n_i u_lo for every i (exact rationals).

    OptComp is nondecreasing in each eps_i (an (eps, delta)-DP mechanism is (eps', delta)-DP
    for eps' >= eps), so the instance eps_i'' = n_i u_hi bounds it from above and
    n_i u_lo from below; both are exactly commensurable with unit u_hi (u_lo)."""
    ratios = [Fraction(e) / int(n) for e, n in zip(cu.eps.tolist(), cu.n.tolist())]
    return exact_dir(max(ratios), True), exact_dir(min(ratios), False)


def commensurable_pass(cu: CommonUnit, theta: float, workers: int = -1, extended: bool = False) -> LatticePass:
    """The loss distributions of the two commensurable instances n_i u_hi >= eps_i >= n_i u_lo
    (:func:`_unit_instances`), composed exactly on the lattice u Z by the tilted FFT tree
    (one binomial leaf per group, batch 0 the upper instance and batch 1 the lower one).

    Upper: P0 masses raised by the leaf and FFT error bounds, losses (index) u_hi rounded
    up -- raising a loss at fixed P0 lowers P1, which only raises H.  Lower: P0 masses
    lowered by the error bounds, losses index u_lo rounded down (lowers H).  No
    refinement or garbling is needed: every atom of the instances lies on the lattice, so
    the bracket's width is the float residues of the eps_i (~1e-16 relative) plus the
    FFT error charges (``extended``: the FFT tree in x87 long double, ~2000x smaller
    charges at ~4x the FFT time)."""
    u_hi, u_lo = _unit_instances(cu)
    u_f = float(cu.unit)
    th = theta * u_f
    rows, widths, offsets, E, logZ, rho = [], [], [], [], [[], []], [[], []]
    for e, c, n in zip(cu.eps.tolist(), cu.count.tolist(), cu.n.tolist()):
        r_hi, lz_hi, rh_hi, e_hi = _binomial_leaf(e, int(c), int(n), u_hi, th)
        r_lo, lz_lo, rh_lo, e_lo = _binomial_leaf(e, int(c), int(n), u_lo, th)
        rows.append((r_hi, r_lo))
        widths.append(r_hi.size)
        offsets.append(0)
        E.append((e_hi, e_lo))
        logZ[0].append(lz_hi)
        logZ[1].append(lz_lo)
        rho[0].append(rh_hi)
        rho[1].append(rh_lo)
    blocks = _row_blocks(rows, np.array(widths, dtype=np.int64), np.array(offsets, dtype=np.int64), np.array(E).T)
    del rows
    root, w, off, Eroot = _fft_tree(blocks, workers, dtype=np.longdouble if extended else np.float64)
    del blocks
    # back to float64: relative 2^-53 per entry (charged in ``rel``), 2^-1074 absolute
    root = root.astype(float)
    Eroot = np.asarray(Eroot, dtype=float) * (1.0 + 4.0 * UNIT) + 2.0**-1073
    # root position J = sum_i n_i j_i holds the loss index 2 J - sum_i c_i n_i (exact integers)
    S = sum(int(c) * int(n) for c, n in zip(cu.count.tolist(), cu.n.tolist()))
    idx = (2 * (np.arange(w, dtype=np.int64) + off) - S).astype(float)
    tl = th * idx
    out = []
    for b, u_inst in enumerate((u_hi, u_lo)):
        lz = math.fsum(logZ[b])
        mag = np.abs(tl) + abs(lz) + 4.0
        # relative error of every root entry: the leaves' (they multiply), the sum of the
        # logZ (fsum: correctly rounded, u |lz|), th * idx and the exponent (u each)
        rel = float(np.sum(rho[b])) + 8.0 * UNIT * mag + 2.0 * UNIT
        loss = idx * u_inst  # integer times a float: one rounding, <= u |loss|
        if b == 0:
            keep = idx > 0.0
            loss_up = loss[keep] * (1.0 + 4.0 * UNIT)
            with np.errstate(under="ignore", over="ignore", invalid="ignore"):
                p_up = np.exp(lz - tl[keep] + rel[keep]) * (root[0, keep] + Eroot[0]) * (1.0 + 8.0 * UNIT)
            p_up[np.isnan(p_up)] = 1.0
            np.minimum(p_up, 1.0, out=p_up)
            nz = p_up > 0.0
            slack = TINY * float(np.count_nonzero(~nz))
            out.append(LossDistribution(loss_up[nz], p_up[nz], slack=slack, exact_from=0.0))
        else:
            p0 = root[1] - Eroot[1]
            keep = (idx > 0.0) & (p0 > 0.0)
            loss_lo = loss[keep] * (1.0 - 4.0 * UNIT)
            with np.errstate(under="ignore", over="ignore"):
                p_lo = np.exp(lz - tl[keep] - rel[keep]) * p0[keep] * (1.0 - 8.0 * UNIT)
            p_lo[~np.isfinite(p_lo)] = 0.0  # an overflowed lower bound is replaced by 0 (safe)
            ok = p_lo > 0.0
            out.append((loss_lo[ok], p_lo[ok]))
    return LatticePass(h=u_f, theta=theta, upper=out[0], lower_loss=out[1][0], lower_p0=out[1][1], points=w)


def _row_blocks(rows, widths, offsets, E, budget: int = 2**22):
    """Leaves given as dense rows (one (B-tuple of arrays) per leaf) grouped into blocks of
    similar width for :func:`_fft_tree` (as :func:`_leaf_blocks`)."""
    order = np.argsort(widths, kind="stable")
    ws = widths[order]
    nb = len(rows[0])
    blocks, start, k = [], 0, widths.size
    while start < k:
        end = start + 1
        while end < k and ws[end] <= 1.5 * ws[start] + 64 and (end - start + 1) * int(ws[end]) <= budget:
            end += 1
        sel = order[start:end]
        W = int(ws[end - 1])
        X = np.zeros((nb, sel.size, W))
        for r, i in enumerate(sel.tolist()):
            for b in range(nb):
                X[b, r, : widths[i]] = rows[i][b]
        blocks.append((X, widths[sel].astype(np.int64), offsets[sel].astype(np.int64), E[:, sel].copy()))
        start = end
    return blocks


def commensurable_bounds(m: Mechanisms, t_low: float, t_high: float, *, rel_gap: float = COMMENSURABLE_GAP,
                         max_points: int = MAX_POINTS, workers: int = -1, info: BracketInfo | None = None,
                         progress=None) -> Bounds | None:
    """Certified (lower, upper) on OptComp at residual target t (``t_low`` its value rounded
    down, ``t_high`` rounded up; see :func:`optcomp.loss.residual_target`) when the positive
    eps_i are commensurable (:func:`common_unit`), else None.

    The bracket is exact up to the float residues of the eps_i and the FFT error charges:
    a first pass in float64 (relative gap ~1e-11 typically); if its relative gap exceeds
    ``rel_gap`` (default 1e-9), the tilt is re-aimed at the bracket and the tree run in
    long double (gap ~1e-13), at most three passes.  Cost: one FFT tree over
    sum_i c_i n_i + 1 points per pass."""
    vals, cnts = m.positive()
    if vals.size == 0:
        return None
    cu = common_unit(vals, cnts, max_points)
    if cu is None:
        return None
    top = dot_dir(cnts, vals, True)
    x_est = chernoff_guess(vals, t_low, cnts.astype(float))
    best = Bounds(0.0, top)
    for i in range(3):
        t0 = time.perf_counter()
        lp = commensurable_pass(cu, tilt_for(vals, x_est, cnts.astype(float)), workers, extended=i > 0)
        b = lp.epsilon_bounds(t_low, t_high)
        best = Bounds(max(b.lower, best.lower), min(b.upper, best.upper))
        if info is not None:
            info.path = "commensurable"
            info.passes.append(dict(h=lp.h, points=lp.points, lower=best.lower, upper=best.upper,
                                    theta=lp.theta, seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="commensurable", step=lp.h, points=lp.points, lower=best.lower, upper=best.upper,
                          gap=best.gap, seconds=time.perf_counter() - t0))
        if not math.isfinite(best.upper) or best.gap <= rel_gap * best.upper or t_low <= 0.0:
            break  # (t_low <= 0: the upper end is the top atom whatever the pass)
        x_est = 0.5 * (best.lower + best.upper) if best.gap < 0.1 * best.upper else best.upper
    return best


def commensurable_excess_bounds(m: Mechanisms, x: float, *, rel_gap: float = COMMENSURABLE_GAP,
                                max_points: int = MAX_POINTS, workers: int = -1, info: BracketInfo | None = None,
                                progress=None) -> tuple[float, float] | None:
    """Certified (lower, upper) on H(x) = E_P0[(1 - e^{x - L})_+] (no delta event) when the
    positive eps_i are commensurable (:func:`common_unit`), else None; one tilted FFT tree
    aimed at x (float64; again in long double when the relative gap exceeds ``rel_gap``).
    ``optcomp.loss.delta_from_excess`` turns them into delta bounds."""
    vals, cnts = m.positive()
    if vals.size == 0:
        return None
    cu = common_unit(vals, cnts, max_points)
    if cu is None:
        return None
    theta = tilt_for(vals, x, cnts.astype(float))
    for extended in (False, True):
        t0 = time.perf_counter()
        lp = commensurable_pass(cu, theta, workers, extended=extended)
        lo, hi = lp.excess_bounds(x)
        if info is not None:
            info.path = "commensurable"
            info.passes.append(dict(h=lp.h, points=lp.points, lower=lo, upper=hi, theta=lp.theta,
                                    seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="commensurable", step=lp.h, points=lp.points, lower=lo, upper=hi,
                          gap=hi - lo, seconds=time.perf_counter() - t0))
        if hi - lo <= rel_gap * hi:
            break
    return lo, hi


# --------------------------------------------------------------------------- groups and windows: the lattice at scale


BUNDLE_ATOMS = 1024  # small groups / singletons are composed exactly into leaves of <= this many atoms
CHUNK_POINTS = 2**17  # leaf lattice points per chunk of the streamed FFT tree
CHUNK_POW2 = True  # flush a chunk at a power-of-two number of leaves once it holds >= CHUNK_POINTS / 2
WINDOW_LOG = math.log(2.0**-60)  # tilted mass lumped (upper) / dropped (lower) below each node's window
SLACK_REL = 2.0**-40  # untilted mass sent to +inf above the windows, relative to the target, in all


def _chernoff_exponent(c: int, m: int, lp: float, lq: float, upper: bool) -> float:
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


def _group_window(eps: float, c: int, theta: float, log_slack: float):
    """[j_lo, j_hi] of Bin(c, p) kept for a group leaf, log of the P0 mass of X < j_lo (lumped
    at j_lo for the upper bound), log of the P0 mass of X > j_hi (sent to +inf).

    j_hi: the least with P0[X > j_hi] <= e^log_slack and P_theta[X > j_hi] <= 2^-60 (Chernoff
    bounds, P_theta the tilted binomial p_theta = expit(eps (1 + 2 theta))); j_lo: the
    largest with the lumped mass's tilted weight P0[X < j_lo] e^{theta l_{j_lo}} / M(theta)
    <= 2^-60 and P_theta[X < j_lo] <= 2^-60 (M(theta) = E_P0 e^{theta L})."""
    lp, lq = float(log_expit(eps)), float(log_expit(-eps))
    e2 = eps * (1.0 + 2.0 * theta)
    lpt, lqt = float(log_expit(e2)), float(log_expit(-e2))
    logM = c * float(np.logaddexp(lp + theta * eps, lq - theta * eps))
    mean = c * math.exp(lpt)

    def hi_ok(m):
        return (_chernoff_exponent(c, m + 1, lp, lq, True) <= log_slack
                and _chernoff_exponent(c, m + 1, lpt, lqt, True) <= WINDOW_LOG)

    def lo_ok(m):
        if m <= 0:
            return True
        lump = _chernoff_exponent(c, m - 1, lp, lq, False) + theta * (2 * m - c) * eps - logM
        return lump <= WINDOW_LOG and _chernoff_exponent(c, m - 1, lpt, lqt, False) <= WINDOW_LOG

    a, b = min(c, max(0, math.floor(mean))), c  # hi_ok(c) holds
    while a < b:
        mid = (a + b) // 2
        if hi_ok(mid):
            b = mid
        else:
            a = mid + 1
    j_hi = b
    a, b = 0, min(j_hi, max(0, math.ceil(mean)))  # lo_ok(0) holds
    while a < b:
        mid = (a + b + 1) // 2
        if lo_ok(mid):
            a = mid
        else:
            b = mid - 1
    j_lo = a
    log_lump = _chernoff_exponent(c, j_lo - 1, lp, lq, False) if j_lo > 0 else -math.inf
    log_up = _chernoff_exponent(c, j_hi + 1, lp, lq, True) if j_hi < c else -math.inf
    return j_lo, j_hi, log_lump, log_up


def _leaf_atoms(items, theta: float, log_slack: float):
    """The exact atoms of one leaf: (loss, perr, logp, err, lump_index, log_lump, log_up).

    ``items``: one (eps, c) group with c + 1 > BUNDLE_ATOMS (a window of its binomial,
    :func:`_group_window`), or several small ones composed exactly (every combination).
    ``loss`` are float positions within ``perr`` of the true ones, ``logp`` the log P0
    masses within ``err``; the P0 mass below the window (<= e^log_lump) is added to atom
    ``lump_index`` for the upper bound, the mass above it (<= e^log_up) goes to +inf."""
    from ._binomial import binomial_log_pmf

    if len(items) == 1 and items[0][1] + 1 > BUNDLE_ATOMS:
        eps, c = items[0]
        j_lo, j_hi, log_lump, log_up = _group_window(eps, c, theta, log_slack)
        j = np.arange(j_lo, j_hi + 1, dtype=np.int64)
        logp, err = binomial_log_pmf(eps, c, j)
        loss = (2 * j - c).astype(float) * eps
        perr = UNIT * np.abs(loss)
        return loss, perr, logp, err, 0, log_lump, log_up
    loss = np.zeros(1)
    logp = np.zeros(1)
    mag = 0.0
    span = 0.0
    for eps, c in items:
        j = np.arange(c + 1, dtype=np.int64)
        jf = j.astype(float)
        lp, lq = float(log_expit(eps)), float(log_expit(-eps))
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        lm = lc + jf * lp + (c - jf) * lq
        mag += 3.0 * math.lgamma(c + 1) + c * (abs(lp) + abs(lq)) + 4.0
        span += c * eps
        loss = (loss[:, None] + ((2 * j - c).astype(float) * eps)[None, :]).ravel()
        logp = (logp[:, None] + lm[None, :]).ravel()
    m = len(items)
    perr = np.full(loss.size, 4.0 * (m + 2) * UNIT * span)
    err = 8.0 * UNIT * (mag + np.abs(logp) + 4.0 * m)
    return loss, perr, logp, err, 0, -math.inf, -math.inf


def _lattice_interval(loss: np.ndarray, perr, h: float):
    """Lattice neighbours lo h <= l - perr <= l <= l + perr <= hi h of every atom (checked on
    the exact products, hi > lo) and the garbling T = rint(l / h) (any function of the atom)."""
    pe = 2.0 * perr + 4.0 * UNIT * np.abs(loss) + 1e-300
    x = loss - pe
    y = loss + pe
    lo = np.floor(x / h)
    lo[lo * h > x] -= 1.0
    hi = np.ceil(y / h)
    hi[hi * h < y] += 1.0
    return lo, np.maximum(hi, lo + 1.0), np.rint(loss / h)


def _leaf_rows(atoms, h: float, theta: float):
    """The three tilted lattice rows of one leaf (see :func:`grouped_pass`): refined P0
    (upper), garbled P0 and garbled P1 (lower).  Returns (rows (3, W), offset, logZ (3,),
    rho (3,), E2 (3,), slack) -- rho a relative and E2 an absolute (2-norm) error bound of
    each row, slack the P0 mass sent to +inf."""
    loss, perr, logp, err, li, log_lump, log_up = atoms
    n = loss.size
    lo, hi, tg = _lattice_interval(loss, perr, h)
    # upper: the lumped mass joins atom li (P0 only: a loss raised at fixed P0 only raises H)
    logp0 = logp.copy()
    err0 = err.copy()
    if log_lump > -math.inf:
        logp0[li] = float(np.logaddexp(logp0[li], log_lump))
        err0[li] = err0[li] + 4.0 * UNIT * (abs(logp0[li]) + 1.0)
    D = (hi - lo) * h  # exact
    d_hi = (hi * h - loss) + perr + 4.0 * UNIT * (np.abs(hi * h) + np.abs(loss))  # >= hi h - l
    d_lo = (loss - lo * h) + perr + 4.0 * UNIT * (np.abs(lo * h) + np.abs(loss))  # >= l - lo h
    d_hi = np.minimum(d_hi, D)
    d_lo = np.minimum(d_lo, D)
    with np.errstate(divide="ignore"):
        # P0 mass at lo: P0 (e^{hi - l} - 1)/(e^D - 1), at hi: P0 (1 - e^{-(l - lo)})/(1 - e^{-D});
        # each increases in its distance, so the widened distances give upper bounds
        l_lo = np.log(np.expm1(d_hi)) - np.log(np.expm1(D))
        l_hi = np.log(-np.expm1(-d_lo)) - np.log(-np.expm1(-D))
    fin_lo, fin_hi = np.isfinite(l_lo), np.isfinite(l_hi)
    e_lo = err0 + 8.0 * UNIT * (np.abs(np.where(fin_lo, l_lo, 0.0)) + np.abs(np.log(np.expm1(D))) + 4.0)
    e_hi = err0 + 8.0 * UNIT * (np.abs(np.where(fin_hi, l_hi, 0.0)) + np.abs(np.log(-np.expm1(-D))) + 4.0)
    th = theta * h
    base = int(min(lo.min(), tg.min()))
    W = int(max(hi.max(), tg.max())) - base + 1
    batches = [
        ([lo, hi], [logp0 + l_lo, logp0 + l_hi], [e_lo, e_hi], th),
        ([tg], [logp], [err], th),
        ([tg], [logp - loss], [err + perr + 4.0 * UNIT * (np.abs(loss) + np.abs(logp))], th + h),
    ]
    rows = np.zeros((3, W))
    logZ = np.zeros(3)
    rho = np.zeros(3)
    E2 = np.zeros(3)
    for b, (poss, lms, errs, tb) in enumerate(batches):
        lws = [lm + tb * p for p, lm in zip(poss, lms)]
        mx = max(float(np.max(lw[np.isfinite(lw)])) for lw in lws if np.any(np.isfinite(lw)))
        for p, lw in zip(poss, lws):
            with np.errstate(under="ignore"):
                rows[b] += np.bincount((p - base).astype(np.int64), weights=np.exp(lw - mx), minlength=W)
        Z = float(np.sum(rows[b]))
        rows[b] /= Z
        logZ[b] = mx + math.log(Z)
        r = 0.0
        for p, lm, lw, er in zip(poss, lms, lws, errs):
            ok = np.isfinite(lw)
            if np.any(ok):  # the row constants added after the max (as in _bundle_leaves)
                r = max(r, float(np.max(er[ok] + 8.0 * UNIT * (np.abs(lm[ok]) + np.abs(lw[ok]))))
                        + 8.0 * UNIT * (abs(mx) + abs(logZ[b]) + 4.0))
        rho[b] = r + (2 * n + 8) * UNIT
        E2[b] = 2.0 * n * 2.0**-1070
    slack = math.exp(log_up) * (1.0 + 1e-9) if log_up > -math.inf else 0.0
    return rows, base, logZ, rho, E2, slack


def _bundle_leaves(eps2d: np.ndarray, counts: tuple, h: float, theta: float, S: np.ndarray):
    """:func:`_leaf_atoms`, :func:`_leaf_rows` and :func:`_leaf_mgf` for n bundles of the same
    shape at once (one NumPy pass instead of 3n Python calls): bundle i composes groups
    (eps2d[i, g], counts[g]), g = 0..m-1, every combination exactly (no window, no lump).

    Every quantity is the elementwise formula of the per-leaf functions, evaluated in the
    same order (the same float operations), so each leaf's rows, logZ, rho, E2 and K are
    those of the per-leaf path up to the order of a few summations (bincount's per-bin
    sums, the normaliser Z), whose error is the same (2n + 8) u charged there; the tests
    check both paths against each other and against exact references.  Returns
    (rows (3, n, Wmax), widths (n,), bases (n,), logZ (3, n), rho (3, n), E2 (3, n),
    K (n, |S|)); row i of leaf i is rows[:, i, :widths[i]]."""
    nl, m = eps2d.shape
    loss = np.zeros((nl, 1))
    logp = np.zeros((nl, 1))
    mag = np.zeros(nl)
    span = np.zeros(nl)
    lps, lqs = log_expit(eps2d), log_expit(-eps2d)
    for g, c in enumerate(counts):
        c = int(c)
        eps = eps2d[:, g]
        j = np.arange(c + 1, dtype=np.int64)
        jf = j.astype(float)
        lp, lq = lps[:, g], lqs[:, g]
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        lm = lc[None, :] + jf[None, :] * lp[:, None] + (c - jf)[None, :] * lq[:, None]
        mag += 3.0 * math.lgamma(c + 1) + c * (np.abs(lp) + np.abs(lq)) + 4.0
        span += c * eps
        loss = (loss[:, :, None] + ((2 * j - c).astype(float)[None, :] * eps[:, None])[:, None, :]).reshape(nl, -1)
        logp = (logp[:, :, None] + lm[:, None, :]).reshape(nl, -1)
    n = loss.shape[1]
    perr = (4.0 * (m + 2) * UNIT * span)[:, None]
    err = 8.0 * UNIT * (mag[:, None] + np.abs(logp) + 4.0 * m)
    # ---- _leaf_rows, elementwise (no lump: li, log_lump unused)
    lo, hi, tg = _lattice_interval(loss, perr, h)
    D = (hi - lo) * h
    d_hi = (hi * h - loss) + perr + 4.0 * UNIT * (np.abs(hi * h) + np.abs(loss))
    d_lo = (loss - lo * h) + perr + 4.0 * UNIT * (np.abs(lo * h) + np.abs(loss))
    d_hi = np.minimum(d_hi, D)
    d_lo = np.minimum(d_lo, D)
    # the same values as there, computed once per distinct width k = hi - lo (D = k h exactly)
    kk = (hi - lo).astype(np.int64)
    k0 = int(kk.min())
    Dk = np.arange(k0, int(kk.max()) + 1).astype(float) * h
    kk -= k0
    lD1 = np.log(np.expm1(Dk))[kk]
    lD2 = np.log(-np.expm1(-Dk))[kk]
    with np.errstate(divide="ignore"):
        l_lo = np.log(np.expm1(d_hi)) - lD1
        l_hi = np.log(-np.expm1(-d_lo)) - lD2
    fin_lo, fin_hi = np.isfinite(l_lo), np.isfinite(l_hi)
    e_lo = err + 8.0 * UNIT * (np.abs(np.where(fin_lo, l_lo, 0.0)) + np.abs(lD1) + 4.0)
    e_hi = err + 8.0 * UNIT * (np.abs(np.where(fin_hi, l_hi, 0.0)) + np.abs(lD2) + 4.0)
    th = theta * h
    base = np.minimum(lo.min(axis=1), tg.min(axis=1))
    top = np.maximum(hi.max(axis=1), tg.max(axis=1))
    widths = (top - base).astype(np.int64) + 1
    Wm = int(widths.max())
    # flat bin of every position in the (nl, Wm) rows, computed once per position array
    shift = (np.arange(nl, dtype=np.int64) * Wm)[:, None] - base.astype(np.int64)[:, None]
    i_lo, i_hi, i_tg = ((p.astype(np.int64) + shift).ravel() for p in (lo, hi, tg))
    batches = [
        ([lo, hi], [i_lo, i_hi], [logp + l_lo, logp + l_hi], [e_lo, e_hi], th),
        ([tg], [i_tg], [logp], [err], th),
        ([tg], [i_tg], [logp - loss], [err + perr + 4.0 * UNIT * (np.abs(loss) + np.abs(logp))], th + h),
    ]
    rows = np.empty((3, nl, Wm))
    logZ = np.zeros((3, nl))
    rho = np.zeros((3, nl))
    E2 = np.full((3, nl), 2.0 * n * 2.0**-1070)
    for b, (poss, bins, lms, errs, tb) in enumerate(batches):
        lws = [lm + tb * p for p, lm in zip(poss, lms)]
        mx = np.max([np.max(np.where(np.isfinite(lw), lw, -np.inf), axis=1) for lw in lws], axis=0)
        for t, (ib, lw) in enumerate(zip(bins, lws)):
            with np.errstate(under="ignore"):
                row = np.bincount(ib, weights=np.exp(lw - mx[:, None]).ravel(), minlength=nl * Wm).reshape(nl, Wm)
            if t == 0:
                rows[b] = row
            else:
                rows[b] += row
        Z = rows[b].sum(axis=1)
        rows[b] /= Z[:, None]
        logZ[b] = mx + np.array([math.log(z) for z in Z.tolist()])
        r = np.zeros(nl)
        for lm, lw, er in zip(lms, lws, errs):
            # _leaf_rows' charge: the per-atom terms, the row constants added after the max
            v = er + 8.0 * UNIT * (np.abs(lm) + np.abs(lw))
            v[~np.isfinite(lw)] = 0.0
            r = np.maximum(r, np.max(v, axis=1) + 8.0 * UNIT * (np.abs(mx) + np.abs(logZ[b]) + 4.0))
        rho[b] = r + (2 * n + 8) * UNIT
    # ---- _leaf_mgf (no lump): the far-end masses exceed the exact split by <= 2 (2 perr + rounding)/h
    extra = np.log1p(8.0 * (perr[:, 0] + 4.0 * UNIT * np.max(np.abs(loss), axis=1) + 1e-300) / h) + rho[0]
    K = np.zeros((nl, S.size))
    for g, c in enumerate(counts):
        K += int(c) * np.logaddexp(lps[:, g][:, None] + S[None, :] * eps2d[:, g][:, None],
                                   lqs[:, g][:, None] - S[None, :] * eps2d[:, g][:, None])
    K = K + np.abs(S)[None, :] * 2.0 * h + extra[:, None]
    K = K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300
    return rows, widths, base.astype(np.int64), logZ, rho, E2, K


class _Node:
    """A composed part of the streamed tree: rows (3, W) at lattice offset ``off``, 2-norm
    error bounds E (3,), the sums over its leaves of logZ and rho, and ``K``: upper bounds
    on log E_P0[e^{s L}] of its (true, refined, lumped) upper-bound row at the tilts s of
    :func:`_mgf_grid` (what the window bounds of :func:`_cut` rest on)."""

    __slots__ = ("rows", "off", "E", "lz", "rho", "K", "level")

    def __init__(self, rows, off, E, lz, rho, K, level=0):
        self.rows, self.off, self.E, self.lz, self.rho, self.K, self.level = rows, off, E, lz, rho, K, level


def _mgf_grid(theta: float) -> np.ndarray:
    """Tilts s at which every node carries a bound on its log-MGF: negative ones bound the
    lower tail (s <= 0), positive ones the upper tail."""
    pos = [theta * f for f in (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0)] + [2.0**k for k in range(-4, 9)]
    neg = [0.0] + [-(2.0**k) for k in range(-4, 9)] + [-theta * f for f in (0.25, 0.5, 1.0, 2.0)]
    return np.array(sorted(set(v for v in pos + neg if math.isfinite(v))))


def _leaf_mgf(items, S: np.ndarray, h: float, log_lump: float, l_lump: float, extra: float = 0.0) -> np.ndarray:
    """Upper bounds on log E_P0[e^{s L}] of a leaf's refined (upper) row at the tilts S: the
    exact leaf (sum_i c_i log(p_i e^{s eps_i} + q_i e^{-s eps_i})), times e^{2 |s| h} for the
    refinement (every atom's mass goes to lattice points within 2h of it: lo and hi are
    chosen outside the atom's position interval), times e^extra for the masses being
    evaluated at the far end of that interval and their rounding (``extra`` bounds the
    log of the row's total mass over the exact refined one), plus the lumped mass moved up
    to l_lump (for s > 0 it can raise the MGF by at most lump e^{s l_lump})."""
    K = np.zeros(S.size)
    for eps, c in items:
        K += c * np.logaddexp(float(log_expit(eps)) + S * eps, float(log_expit(-eps)) - S * eps)
    K = K + np.abs(S) * 2.0 * h + extra
    if log_lump > -math.inf:
        K = np.logaddexp(K, log_lump + S * l_lump)
    return K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300


def _cut(node: _Node, theta: float, h: float, S: np.ndarray, log_slack: float) -> float:
    """Truncate ``node`` to a window; returns the P0 mass (an upper bound) sent to +inf.

    Both edges come from Chernoff bounds on the node's true upper-bound row (log-MGF bounds
    ``node.K``), never from the computed entries (whose error bounds are absolute):

    * above index hi: P0[L > l] <= E[e^{sL}] e^{-s l} (s > 0) <= e^log_slack -- that mass
      goes to +inf in the upper row (H only grows) and is dropped from the garbled rows (a
      garbling to a symbol dropped at the end: the lower curve only shrinks);
    * below index lo: the upper row's mass is lumped at lo (loss raised at fixed P0: H only
      grows); in the row's tilted units it weighs e^{theta l - lz} P0[L < l] <=
      e^{theta l - lz} E[e^{sL}] e^{-s l} (s <= 0) <= 2^-60 sum(row); the value charged is
      that bound, and since the true lump lies anywhere below it, it also joins the row's
      error bound.  The garbled rows' mass below lo is dropped.

    The node's log-MGF bounds are updated for the lump (mass moved up to l_lo)."""
    r = node.rows
    W = r.shape[1]
    if W < 256:
        return 0.0
    mode = int(np.argmax(r[0]))
    K = node.K
    lz_lo = float(node.lz[0]) - 1e-12 * (1.0 + abs(float(node.lz[0])))
    # upper edge: the least index hi with min_s K(s) - s h (off + hi + 1) <= log_slack
    pos = S > 0.0
    need = (K[pos] - log_slack) / (S[pos] * h)  # off + hi + 1 >= need
    hi = int(math.ceil(float(np.min(need)))) - node.off - 1 + 1
    hi = min(W - 1, max(mode, hi))
    # lower edge: the largest lo with  K(s) - s h idx + theta h idx - lz <= log(2^-60 sum r0)
    target = WINDOW_LOG + math.log(float(np.sum(r[0])) + 1e-300)
    neg = S <= 0.0
    bound_idx = (target + lz_lo - K[neg]) / ((theta - S[neg]) * h) if theta > 0.0 else None
    if bound_idx is None:
        lo = 0
    else:
        lo = int(math.floor(float(np.max(bound_idx)))) - node.off - 1
        lo = max(0, min(mode, lo))
    if lo == 0 and hi == W - 1:
        return 0.0
    slack = 0.0
    if hi < W - 1:
        l_cut = h * float(node.off + hi + 1)
        slack = math.exp(float(np.min(K[pos] - S[pos] * l_cut))) * (1.0 + 1e-9)
    lump = 0.0
    if lo > 0:
        idx = float(node.off + lo)
        log_lump = float(np.min(K[neg] - S[neg] * h * idx)) + theta * h * idx - lz_lo
        lump = math.exp(log_lump) * (1.0 + 1e-9)
        # the lumped P0 mass (<= e^{log_lump + lz - theta h idx}) now sits at l = h idx
        lz_hi = float(node.lz[0]) + 1e-12 * (1.0 + abs(float(node.lz[0])))
        node.K = np.logaddexp(K, log_lump + lz_hi - theta * h * idx + S * h * idx) + 1e-12 * (np.abs(K) + 1.0)
    node.rows = r[:, lo: hi + 1].copy()
    node.rows[0, 0] += lump
    node.E = node.E.copy()
    # the true lumped mass lies anywhere in [0, lump]: charged to the row's error bound
    node.E[0] += lump + 4.0 * UNIT * float(node.rows[0, 0])
    node.off += lo
    return slack


def _merge(a: _Node, b: _Node, workers: int, final: bool) -> _Node:
    blocks = [(a.rows[:, None, :], np.array([a.rows.shape[1]]), np.array([a.off]), a.E[:, None]),
              (b.rows[:, None, :], np.array([b.rows.shape[1]]), np.array([b.off]), b.E[:, None])]
    root, w, off, E = _fft_tree(blocks, workers, max_norm=final)
    return _Node(np.ascontiguousarray(root), off, np.asarray(E, dtype=float), a.lz + b.lz, a.rho + b.rho,
                 a.K + b.K, max(a.level, b.level) + 1)


def leaf_plan(vals: np.ndarray, cnts: np.ndarray) -> list:
    """The leaves: each group with c + 1 > BUNDLE_ATOMS alone (a binomial window), the others
    bundled (in eps order) while the product of their (c + 1) stays <= BUNDLE_ATOMS."""
    plan, cur, size = [], [], 1
    for e, c in zip(vals.tolist(), cnts.tolist()):
        c = int(c)
        if c + 1 > BUNDLE_ATOMS:
            plan.append([(e, c)])
            continue
        if size * (c + 1) > BUNDLE_ATOMS:
            plan.append(cur)
            cur, size = [], 1
        cur.append((e, c))
        size *= c + 1
    if cur:
        plan.append(cur)
    return plan


VECTOR_LEAVES = True  # bundles of equal shape built together (:func:`_bundle_leaves`); False: one by one
LEAF_SLICE_ATOMS = 2**16  # atoms per vectorised slice of bundles (its arrays stay in a core's cache)
LEAF_SLICE_POINTS = 2**21  # leaves x widest leaf per slice (the slice's rows are 3 x this)


def _leaf_one(items, h: float, theta: float, log_slack: float, S: np.ndarray):
    """One leaf by the per-leaf functions: (rows (3, W), base, logZ, rho, E2, K, slack)."""
    leaf = _leaf_atoms(items, theta, log_slack)
    rows, base, logZ, rho, E2, s_leaf = _leaf_rows(leaf, h, theta)
    # the far-end masses exceed the exact split by <= 2 (2 perr + rounding)/h relative
    extra = math.log1p(8.0 * float(np.max(leaf[1]) + 4.0 * UNIT * np.max(np.abs(leaf[0])) + 1e-300) / h) \
        + float(rho[0])
    K = _leaf_mgf(items, S, h, leaf[5], float(leaf[0][leaf[4]]) if leaf[5] > -math.inf else 0.0, extra)
    return rows, base, logZ, rho, E2, K, s_leaf


def _leaves(plan, h: float, theta: float, log_slack: float, S: np.ndarray):
    """The leaves of ``plan`` in order, as (rows (3, W), base, logZ (3,), rho (3,), E2 (3,),
    K, slack): binomial windows one by one (:func:`_leaf_one`), runs of bundles of the same
    shape (the same counts) in slices by :func:`_bundle_leaves` (``VECTOR_LEAVES``)."""
    i, n = 0, len(plan)
    while i < n:
        items = plan[i]
        if not VECTOR_LEAVES or (len(items) == 1 and items[0][1] + 1 > BUNDLE_ATOMS):
            yield _leaf_one(items, h, theta, log_slack, S)
            i += 1
            continue
        shape = tuple(int(c) for _, c in items)
        natoms = math.prod(c + 1 for c in shape)
        wmax = 2.0 * sum(c * e for e, c in items) / h + 4.0
        j = i + 1
        while j < n and (j - i + 1) * natoms <= LEAF_SLICE_ATOMS:
            nxt = plan[j]
            if tuple(int(c) for _, c in nxt) != shape:
                break
            w = max(wmax, 2.0 * sum(c * e for e, c in nxt) / h + 4.0)
            if (j - i + 1) * w > LEAF_SLICE_POINTS:
                break
            wmax = w
            j += 1
        eps2d = np.array([[e for e, _ in plan[t]] for t in range(i, j)], dtype=float)
        rows, widths, bases, logZ, rho, E2, K = _bundle_leaves(eps2d, shape, h, theta, S)
        for t in range(j - i):
            yield rows[:, t, : int(widths[t])], int(bases[t]), logZ[:, t], rho[:, t], E2[:, t], K[t], 0.0
        i = j


PARALLEL_LEAVES = 64  # passes with at least this many leaves run as two halves (two threads)


def _halves(plan) -> list:
    """``plan`` cut in two at half its total width (sum of c eps) when it has at least
    PARALLEL_LEAVES leaves, else whole: the tree's shape depends on the plan only, never
    on the number of threads that run it."""
    if len(plan) < PARALLEL_LEAVES:
        return [plan]
    w = np.cumsum([sum(c * e for e, c in items) for items in plan])
    cut = int(np.searchsorted(w, 0.5 * w[-1]))
    cut = min(max(cut, 1), len(plan) - 1)
    return [plan[:cut], plan[cut:]]


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    """The two threads that run the halves of a pass: one pool per process, made on first
    use (threads made per call would each leave a malloc arena reserved, which adds up
    against an address-space limit), made anew in a forked child."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(2, thread_name_prefix="optcomp-lattice")
        return _POOL


def _forget_pool():
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class _Ticker:
    """Leaves done, counted by the streams (possibly in threads), reported to ``progress``
    at most once a second from the calling thread; ``stop`` asks the streams to end."""

    def __init__(self, progress, h: float, total: int):
        self.progress, self.h, self.total = progress, h, total
        self.done = 0
        self.stop = False
        self.t_last = time.perf_counter()

    def report(self):
        if self.progress is not None and time.perf_counter() - self.t_last > 1.0:
            self.t_last = time.perf_counter()
            self.progress(dict(stage="lattice pass", step=self.h, done=self.done, total=self.total))


def _stream(plan, h: float, theta: float, log_slack: float, S: np.ndarray, workers: int, final: bool,
            ticker: _Ticker, report: bool = False):
    """The streamed tree of :func:`grouped_pass` over the leaves of ``plan``: returns (root
    node, P0 mass sent to +inf, the leaves' logZ per row).  ``final``: the last merge is
    the root of the whole pass (max-norm bound, no cut); otherwise it is cut too."""
    lz_leaves: list[list[float]] = [[], [], []]
    slack = 0.0
    stack: list[_Node] = []
    pending = []
    pending_pts = 0

    def flush():
        nonlocal slack, pending, pending_pts
        if not pending:
            return
        rows = [p[0] for p in pending]
        widths = np.array([r.shape[1] for r in rows], dtype=np.int64)
        offs = np.array([p[1] for p in pending], dtype=np.int64)
        E = np.array([p[4] for p in pending]).T
        blocks = _row_blocks([tuple(r) for r in rows], widths, offs, E)
        root, w, off, Er = _fft_tree(blocks, workers, max_norm=False)
        node = _Node(np.ascontiguousarray(root), off, np.asarray(Er, dtype=float),
                     np.sum([p[2] for p in pending], axis=0), np.sum([p[3] for p in pending], axis=0),
                     np.sum([p[5] for p in pending], axis=0))
        pending, pending_pts = [], 0
        slack += _cut(node, theta, h, S, log_slack)
        stack.append(node)
        while len(stack) >= 2 and stack[-1].level == stack[-2].level:
            b_, a_ = stack.pop(), stack.pop()
            m = _merge(a_, b_, workers, False)
            slack += _cut(m, theta, h, S, log_slack)
            stack.append(m)

    for rows, base, logZ, rho, E2, atoms_k, s_leaf in _leaves(plan, h, theta, log_slack, S):
        if ticker.stop:
            raise RuntimeError("lattice pass stopped")
        ticker.done += 1
        if report:
            ticker.report()
        slack += s_leaf
        for b in range(3):
            lz_leaves[b].append(float(logZ[b]))
        pending.append((rows, base, logZ, rho, E2, atoms_k))
        pending_pts += rows.shape[1]
        npend = len(pending)
        if pending_pts >= CHUNK_POINTS or (CHUNK_POW2 and npend & (npend - 1) == 0 and 2 * pending_pts >= CHUNK_POINTS):
            flush()
    flush()
    while len(stack) >= 2:
        b_, a_ = stack.pop(), stack.pop()
        last = len(stack) == 0
        m = _merge(a_, b_, workers, final and last)
        if not (final and last):
            slack += _cut(m, theta, h, S, log_slack)
        stack.append(m)
    return stack[0], slack, lz_leaves


def grouped_pass(vals: np.ndarray, cnts: np.ndarray, h: float, theta: float, log_slack: float,
                 workers: int = -1, plan: list | None = None, progress=None) -> LatticePass:
    """Certified upper- and lower-bound loss distributions on the lattice hZ, built from one
    leaf per group (or per bundle of small groups), each truncated to a window, composed by
    a streamed FFT tree whose every node is truncated to a window.

    Leaves.  A leaf is the *exact* loss distribution of its mechanisms (a window of the
    group's binomial (2j - c) eps, j ~ Bin(c, p), or every combination of a bundle), as
    atoms l with P0 masses.  Upper bound (refinement, as in :func:`lattice_pass` but per
    atom of the leaf): atom l is split under P1 between lattice points lo <= l <= hi with
    (1 - pi) e^{lo} + pi e^{hi} = e^{l}, i.e. P0 masses P0 (e^{hi - l} - 1)/(e^{hi - lo} - 1)
    at lo and P0 (1 - e^{lo - l})/(1 - e^{lo - hi}) at hi; forgetting the split gives back
    the leaf, so by data processing H_true <= H_refined at every x.  The float position of
    l is only known within perr: lo and hi are chosen outside the interval, and each mass,
    monotone in its distance, is evaluated at the far end (an upper bound).  Lower bound
    (garbling): T(atom) = the lattice point nearest its float position (a function of the
    outcome), P0 and P1 = P0 e^{-l} pushed forward.  The gap is second order per *leaf*,
    not per mechanism: a group of c mechanisms costs what one mechanism costs.  Runs of
    bundles of the same shape (the same counts, e.g. bundles of 10 singletons) are built
    together, in slices, by :func:`_bundle_leaves`: the formulas of :func:`_leaf_atoms`,
    :func:`_leaf_rows` and :func:`_leaf_mgf` evaluated elementwise, so the same atoms,
    lattice points, masses and charges as one leaf at a time (``VECTOR_LEAVES = False``).

    Windows.  Every bound below only ever raises the upper curve / lowers the lower one:
    the upper side is a function H(x) = sum_L P0(L)(1 - e^{x-L})_+ of lattice P0 masses,
    nondecreasing in every node's P0 entries and in their losses, so mass may be added,
    moved up or sent to +inf (slack); the lower side may drop any outcomes of any node (a
    garbling to a symbol that is dropped at the end, where its term is >= 0).  Leaf tails
    come from Chernoff bounds (:func:`_group_window`), node tails from the computed rows
    with their error bounds (:func:`_cut`): tilted mass lumped or dropped below the window
    <= 2^-60, untilted P0 mass sent to +inf above it <= e^log_slack per node (the driver
    gives SLACK_REL times the target over the number of nodes).  So the lattice covers a
    few tilted standard deviations around the answer, not [-sum eps, sum eps].

    Stream.  Leaves are built chunk by chunk (a power-of-two number of leaves holding >=
    CHUNK_POINTS / 2 points, or >= CHUNK_POINTS points: a balanced chunk tree has no level
    that only carries an odd leaf), each chunk composed by :func:`_fft_tree` (2-norm bounds)
    and cut; chunk roots are merged pairwise as in a binary counter (equal levels first),
    each merge cut again, the last merge with the max-norm bound.  A plan of at least
    PARALLEL_LEAVES leaves is streamed as two halves of equal width (sum of c eps), run in
    two threads when ``workers != 1`` (NumPy and scipy.fft release the GIL; ~1.7x on two
    cores), their roots merged last: the tree, hence every bit of the result, is the same
    either way.  Memory: per stream one slice of leaves, one chunk plus O(log) nodes.
    Steps h = m 2^j, m <= 15 (:func:`_step_below`): every lattice index n here has
    |n| <= sum c eps / h + 8 < 2^49 (checked), so h n is exact."""
    plan = plan if plan is not None else leaf_plan(vals, cnts)
    # every lattice index n below has |n| <= sum c eps / h + 4: h n exact needs m |n| < 2^53
    mant = math.frexp(h)[0]
    if mant * 16.0 != math.floor(mant * 16.0):
        raise ValueError(f"lattice step {h!r} is not m 2^j with an integer m <= 15")
    if float(np.sum(cnts * vals)) / h + 8.0 >= 2.0**49:
        raise ValueError(f"lattice step {h!r} too small for exact positions (sum eps / h >= 2^49)")
    th = theta * h
    S = _mgf_grid(theta)
    parts = _halves(plan)
    ticker = _Ticker(progress, h, len(plan))
    if len(parts) == 2 and workers != 1 and (os.cpu_count() or 1) >= 2:
        # the two halves' streams in two threads (NumPy and scipy.fft release the GIL in
        # their loops), each with one FFT worker; the tree is the same as run in sequence
        from concurrent.futures import FIRST_EXCEPTION, wait

        futs = [_pool().submit(_stream, part, h, theta, log_slack, S, 1, False, ticker) for part in parts]
        try:
            while True:
                done, not_done = wait(futs, timeout=0.5, return_when=FIRST_EXCEPTION)
                failed = [f.exception() for f in futs if f in done and f.exception() is not None]
                if failed:
                    raise failed[0]
                if not not_done:
                    break
                ticker.report()
            halves = [f.result() for f in futs]
        finally:
            ticker.stop = True  # the other stream ends at its next leaf (on an error or interrupt)
            wait(futs)
    else:
        halves = [_stream(part, h, theta, log_slack, S, workers, len(parts) == 1, ticker, report=True)
                  for part in parts]
    slack = sum(hv[1] for hv in halves)
    lz_leaves = [[z for hv in halves for z in hv[2][b]] for b in range(3)]
    node = halves[0][0] if len(halves) == 1 else _merge(halves[0][0], halves[1][0], workers, True)
    root, w, off, Eroot = node.rows, node.rows.shape[1], node.off, node.E
    logZ = [math.fsum(lz) for lz in lz_leaves]
    J = np.arange(w, dtype=float)
    idx = J + off
    thetas = (theta, theta, theta + 1.0)
    rho = []
    for b in range(3):
        mag_w = float(np.sum(np.abs(lz_leaves[b]))) + abs(logZ[b]) + abs(thetas[b] * h) * (abs(off) + w)
        rho.append(math.expm1(float(node.rho[b]) + 4.0 * UNIT * (mag_w + 4.0)) + 4.0 * UNIT)
    loss = h * idx  # exact: an integer (|idx| < 2^49, checked above) times h = m 2^j, m <= 15
    # ---- upper
    keep = loss > 0.0
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        p_up = np.exp(logZ[0] - th * idx[keep]) * (root[0, keep] + Eroot[0]) * (1.0 + rho[0])
    p_up[np.isnan(p_up)] = 1.0
    np.minimum(p_up, 1.0, out=p_up)
    nz = p_up > 0.0
    slack_all = slack * (1.0 + 1e-9) + TINY * float(np.count_nonzero(~nz))
    upper = LossDistribution(loss[keep][nz], p_up[nz], slack=slack_all, exact_from=0.0)
    # ---- lower (as in lattice_pass)
    p0t = root[1] - Eroot[1]
    ok = p0t > 0.0
    Jk = idx[ok]
    with np.errstate(divide="ignore", over="ignore"):
        log_p0 = logZ[1] - th * Jk + np.log(p0t[ok]) + math.log1p(-rho[1])
        log_p1 = logZ[2] - (th + h) * Jk + np.log(root[2, ok] + Eroot[2]) + math.log1p(rho[2])
    ell = log_p0 - log_p1
    err = 4.0 * UNIT * (np.abs(log_p0) + np.abs(log_p1) + abs(logZ[1]) + abs(logZ[2]) + (2 * abs(th) + h) * np.abs(Jk) + 4.0)
    ell = ell - err
    pos = ell > 0.0
    mag0 = abs(logZ[1]) + abs(th * Jk[pos]) + np.abs(np.log(p0t[ok][pos])) + np.abs(log_p0[pos]) + 4.0
    with np.errstate(under="ignore"):
        p_lo = np.exp(log_p0[pos]) * (1.0 - 4.0 * UNIT * mag0)
    ell = ell[pos]
    order = np.argsort(ell, kind="stable")
    return LatticePass(h=h, theta=theta, upper=upper, lower_loss=ell[order], lower_p0=p_lo[order], points=w)
