r"""Commensurable eps (layer L3): every eps_i an integer multiple n_i of a common unit u up
to float rounding, composed *exactly* on the lattice uZ (one binomial leaf per group, one
tilted FFT tree), bracketed by the two instances n_i u_hi >= eps_i >= n_i u_lo.  See
:func:`commensurable_pass` for the construction and its error charges."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.special import log_expit

from .._cgf import chernoff_guess, tilt_for
from .._inputs import Mechanisms
from .._rounding import TINY, UNIT, dot_dir, exact_dir
from .._memory import current as _memory_budget
from .._types import MAX_POINTS, ApproxTooCostly, Bounds, Bracket
from ..loss import LossDistribution
from .passes import EXTRACT_BYTES, LatticePass
from .tree import _fft_tree, _row_blocks


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


def rational_unit(values) -> tuple[Fraction, list[int]] | None:
    """A common unit u of the nonzero rationals ``values`` (Fractions, either sign): each
    within 2^-46 relative of a rational a_i/b_i with b_i <= 10^6 (the nearest such by
    continued fractions), u = gcd of the a_i/b_i > 0, and the integers n_i = (a_i/b_i)/u (signed).
    None when some value is not of that form or the common denominator exceeds 10^12.  The
    values are multiples of u only up to |v_i - n_i u| (callers charge it, exactly)."""
    nums, dens = [], []
    for fv in values:
        f = fv.limit_denominator(COMMENSURABLE_MAX_DEN)
        if f == 0 or abs(fv - f) > abs(fv) * Fraction(COMMENSURABLE_REL):
            return None
        nums.append(f.numerator)
        dens.append(f.denominator)
    if not nums:
        return None
    L = math.lcm(*dens)
    if L > COMMENSURABLE_MAX_LCM:
        return None
    scaled = [a * (L // b) for a, b in zip(nums, dens)]
    g = math.gcd(*scaled)
    return Fraction(g, L), [s // g for s in scaled]


def common_unit(eps: np.ndarray, count: np.ndarray, max_points: int = MAX_POINTS) -> CommonUnit | None:
    """A common unit u of the positive ``eps`` (distinct, with multiplicities ``count``):
    :func:`rational_unit` of the floats, n_i = eps_i/u.  None when there is none or the
    composed lattice would exceed ``max_points`` points.  Only a *choice* of lattice: the
    bounds built on it (:func:`commensurable_pass`) are certified whatever u is."""
    if np.any(eps <= 0.0):
        return None
    ru = rational_unit(Fraction(v) for v in eps.tolist())  # (lazily: the first value not of the form ends it)
    if ru is None:
        return None
    unit, n = ru
    total = 2 * sum(int(c) * ni for c, ni in zip(count.tolist(), n)) + 1
    if total > max_points:
        return None
    return CommonUnit(unit, np.array(n, dtype=np.int64), eps, count)


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
    from .._binomial import binomial_log_pmf

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
    # the leaves' rows (two instances) and their copies into the tree's blocks; the largest
    # group's binomial table; the extraction (:data:`~optcomp._lattice.passes.EXTRACT_BYTES`
    # per root point, one parity: half the points); the tree checks its own levels
    _memory_budget().need(4 * 8.0 * cu.points + 160.0 * int(np.max(cu.count)) + EXTRACT_BYTES * cu.points / 2,
                          f"the commensurable lattice of {cu.points:,} points")
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


def commensurable_bounds(m: Mechanisms, t_low: float, t_high: float, *, rel_gap: float = COMMENSURABLE_GAP,
                         enough: float = 0.0, max_points: int = MAX_POINTS, workers: int = -1,
                         progress=None) -> Bracket | None:
    """Certified (lower, upper) on OptComp at residual target t (``t_low`` its value rounded
    down, ``t_high`` rounded up; see :func:`optcomp.loss.residual_target`) when the positive
    eps_i are commensurable (:func:`common_unit`), else None.

    The bracket is exact up to the float residues of the eps_i and the FFT error charges:
    a first pass in float64 (relative gap ~1e-11 typically); if its relative gap exceeds
    ``rel_gap`` (default 1e-9), the tilt is re-aimed at the bracket and the tree run in
    long double (gap ~1e-13), at most three passes -- or none more once the gap is at most
    ``enough`` (the caller's tolerance).  Cost: one FFT tree over sum_i c_i n_i + 1 points
    per pass.  The :class:`~optcomp._types.Bracket` carries the passes run."""
    cu = _positive_unit(m, max_points)
    if cu is None:
        return None
    vals, cnts = cu.eps, cu.count
    top = dot_dir(cnts, vals, True)
    x_est = chernoff_guess(vals, t_low, cnts.astype(float))
    best, passes = Bounds(0.0, top), []
    for i in range(3):
        t0 = time.perf_counter()
        try:
            lp = commensurable_pass(cu, tilt_for(vals, x_est, cnts.astype(float)), workers, extended=i > 0)
        except ApproxTooCostly:  # beyond the memory budget: this path is not taken (or stops here)
            return None if i == 0 else Bracket(*best, "commensurable", passes)
        b = lp.epsilon_bounds(t_low, t_high)
        before, best = best, Bounds(max(b.lower, best.lower), min(b.upper, best.upper))
        passes.append(_record(progress, lp, best.lower, best.upper, t0))
        if not math.isfinite(best.upper) or best.gap <= max(rel_gap * best.upper, enough) or t_low <= 0.0:
            break  # (t_low <= 0: the upper end is the top atom whatever the pass)
        if i > 0 and best.gap > 0.5 * before.gap:  # long double did not narrow it: nor would a third pass
            break
        x_est = 0.5 * (best.lower + best.upper) if best.gap < 0.1 * best.upper else best.upper
    return Bracket(*best, "commensurable", passes)


def commensurable_excess_bounds(m: Mechanisms, x: float, *, rel_gap: float = COMMENSURABLE_GAP,
                                max_points: int = MAX_POINTS, workers: int = -1,
                                progress=None) -> Bracket | None:
    """Certified (lower, upper) on H(x) = E_P0[(1 - e^{x - L})_+] (no delta event) when the
    positive eps_i are commensurable (:func:`common_unit`), else None; one tilted FFT tree
    aimed at x (float64; again in long double when the relative gap exceeds ``rel_gap``).
    ``optcomp.loss.delta_from_excess`` turns them into delta bounds."""
    cu = _positive_unit(m, max_points)
    if cu is None:
        return None
    vals, cnts = cu.eps, cu.count
    theta = tilt_for(vals, x, cnts.astype(float))
    passes = []
    for extended in (False, True):
        t0 = time.perf_counter()
        try:
            lp = commensurable_pass(cu, theta, workers, extended=extended)
        except ApproxTooCostly:  # beyond the memory budget: this path is not taken (or stops here)
            return None if not extended else Bracket(lo, hi, "commensurable", passes)
        lo, hi = lp.excess_bounds(x)
        passes.append(_record(progress, lp, lo, hi, t0))
        if hi - lo <= rel_gap * hi:
            break
    return Bracket(lo, hi, "commensurable", passes)


def _record(progress, lp: LatticePass, lower: float, upper: float, t0: float) -> dict:
    """A commensurable pass reported to ``progress``, and its diagnostics."""
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress(dict(stage="commensurable", step=lp.h, points=lp.points, lower=lower, upper=upper,
                      gap=Bounds(lower, upper).gap, seconds=seconds))
    return dict(h=lp.h, points=lp.points, lower=lower, upper=upper, theta=lp.theta, seconds=seconds)


def _positive_unit(m: Mechanisms, max_points: int) -> CommonUnit | None:
    """:func:`common_unit` of the positive eps of ``m`` (None when there are none)."""
    vals, cnts = m.positive()
    return common_unit(vals, cnts, max_points) if vals.size else None
