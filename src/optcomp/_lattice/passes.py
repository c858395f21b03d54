r"""One lattice pass (layer L3): :class:`LatticePass`, the certified upper (refined) and
lower (garbled) loss distributions a producer hands to the drivers, and
:func:`lattice_pass`, the per-mechanism construction (kept as the tests' reference; the
grouped producer of :mod:`optcomp._lattice.grouped` generalises it).

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

Soundness in floating point.  Nothing is computed "exactly"; every quantity is bounded
on the safe side:

* residues, lattice positions: exact (h = m 2^j, m <= 15, and |n| < 2^49, so h n is exact and the residue
  eps - h n is exact by Sterbenz's lemma; positions C + h n with the integer n exact and
  C = sum of offsets correctly rounded by fsum); loss values of the upper bound are then
  moved up by 4 ulps of |loss| + |C|;
* leaf masses: computed from logs (log_expit, log(expm1)) with a relative error bound per
  leaf of 8 ulps times the magnitude of every term involved (libm functions within
  ``_rounding.LIBM_ULPS``, the package's one stated library assumption); the k leaves
  multiply these (all terms are positive), and so does the tilt's normaliser
  exp(sum log Z_i - theta h n);
* FFT convolution: per convolution, error <= (40 log2 N + 10) u (|a|_2 |b|_1 + |a|_1 |b|_2)
  in the 2-norm: the per-transform factor F(N) <= (36.98 log2 N - 29.3) u is derived pass
  by pass for scipy's real mixed-radix (4, 2, 3, 5) transforms in
  :func:`optcomp._lattice.tree._fft_error` (Higham, *Accuracy and Stability of Numerical
  Algorithms*, 2nd ed., Thm 24.2, generalised), carried through the pointwise product and
  the inverse transform; the tests recompute its constants and compare with exact integer
  convolutions (actual errors <= 5e-3 of the charge).  Errors propagate by Young's inequality, and at the root
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
from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from .._memory import current as _memory_budget
from .._rounding import TINY, UNIT
from .._types import Bounds
from ..loss import LossDistribution, excess_lower, solve_lower, solve_segments
from .tree import _fft_tree, _leaf_blocks, _tilted_leaves


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
    # lattice values: C + h (off + J) with C = sum c_i correctly rounded (fsum) and
    # h (off + J) exact (an integer times a power of two): error <= u (|loss| + |C|)
    C = math.fsum(c.tolist())
    loss = C + h * (np.arange(w, dtype=np.int64) + off).astype(float)
    loss_up = loss + 4.0 * UNIT * (np.abs(loss) + abs(C))
    # the rows are tilted by e^{theta h J} from their first entry (J = 0, 1, ...)
    return extract(root, Eroot, [lz.tolist() for lz in (lz0, lz1, lz2)],
                   [float(np.sum(rb)) for rb in (r0, r1, r2)], theta, h, np.arange(w, dtype=float), 0, loss, loss_up)


EXTRACT_BYTES = 160  # memory per lattice point of :func:`extract` (its masses, losses and temporaries)


def extract(root: np.ndarray, Eroot, lz_leaves, rho_sums, theta: float, h: float, idx: np.ndarray, off: int,
            loss: np.ndarray, loss_up: np.ndarray, slack: float = 0.0) -> LatticePass:
    """The one extraction of a :class:`LatticePass` from a composed root of three tilted rows
    (refined P0; garbled P0; garbled P1 at tilt theta + 1).

    ``root`` (3, w) with max-norm error bounds ``Eroot``; ``lz_leaves[b]`` the leaves' float
    log-normalisers of row b (exact constants from here on, summed by fsum) and
    ``rho_sums[b]`` the sum of their relative error bounds; entry J of a row carries the
    tilt e^{theta h idx[J]} (``off``: the offset of idx, for the rounding charges); ``loss``
    the lattice values (``loss_up`` >= them: the upper bound's positions); ``slack`` P0
    mass already sent to +inf.

    Upper: P0 masses e^{logZ - theta h idx} (root + E) (1 + rho), clipped at 1, a mass that
    underflowed charged TINY at +inf.  Lower: P0 lowered and P1 raised by the error bounds,
    atoms ell = log(P0/P1) (the privacy loss of the garbled statistic) lowered by their
    rounding charge, kept where > 0, sorted."""
    w = root.shape[1]
    _memory_budget().need(EXTRACT_BYTES * w, f"the bounds of a lattice of {w:,} points")
    th = theta * h
    logZ = [math.fsum(lz) for lz in lz_leaves]
    thetas = (theta, theta, theta + 1.0)
    rho = []
    for b in range(3):
        mag_w = float(np.sum(np.abs(lz_leaves[b]))) + abs(logZ[b]) + abs(thetas[b] * h) * (abs(off) + w)
        rho.append(math.expm1(float(rho_sums[b]) + 4.0 * UNIT * (mag_w + 4.0)) + 4.0 * UNIT)
    # ---- upper
    keep = loss_up > 0.0
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        p_up = np.exp(logZ[0] - th * idx[keep]) * (root[0, keep] + Eroot[0]) * (1.0 + rho[0])
    p_up[np.isnan(p_up)] = 1.0
    np.minimum(p_up, 1.0, out=p_up)
    nz = p_up > 0.0  # a mass that underflowed may hide up to TINY: at +inf
    slack_all = slack * (1.0 + 1e-9) + TINY * float(np.count_nonzero(~nz))
    upper = LossDistribution(loss_up[keep][nz], p_up[nz], slack=slack_all, exact_from=0.0)
    # ---- lower
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
    # exp of a sum whose partial sums reach |logZ| + theta h |idx|: charge their rounding
    mag0 = abs(logZ[1]) + abs(th * Jk[pos]) + np.abs(np.log(p0t[ok][pos])) + np.abs(log_p0[pos]) + 4.0
    with np.errstate(under="ignore"):
        p_lo = np.exp(log_p0[pos]) * (1.0 - 4.0 * UNIT * mag0)
    ell = ell[pos]
    order = np.argsort(ell, kind="stable")
    return LatticePass(h=h, theta=theta, upper=upper, lower_loss=ell[order], lower_p0=p_lo[order], points=w)
