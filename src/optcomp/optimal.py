r"""Exact optimal composition: KOV Thm 3.3 / MV Thm 1.4 (homogeneous) and MV Thm 1.5
(heterogeneous), computed far beyond the papers' 2^k brute force.

The input is the mechanism multiset (distinct (eps, delta) pairs with counts; see
:mod:`optcomp._inputs`).  Mechanisms with eps = 0 do not move the loss; those with eps >=
``BIG_EPS`` (800) put all but e^-800 of their mass on +eps and are an exact deterministic
shift of the loss (the rest charged as slack).  The others are grouped by eps, and every
producer builds the finite privacy-loss distribution of the composed randomized responses
and hands it to the segment solver of :mod:`optcomp.loss` (cancellation-free, exact atom
positions next to eps_g):

* **one group** (k identical mechanisms, k up to 10^12): the loss is ``(2m - k) eps`` with
  ``m ~ Bin(k, p)``, ``p = e^eps/(1+e^eps)``, listed in units of 2 eps from an exact origin.
  Only a window of ``m`` matters: from about one unit of loss below the root (located by
  Chernoff quantiles) to where the upper tail falls below 2^-50 t; the tail beyond is
  bounded rigorously by a geometric series (the pmf ratio decreases) and charged as slack,
  and the window is widened when the root falls outside.  Masses in log space with an error
  bound (:mod:`optcomp._binomial`), scaled by 2^s for tiny targets.  O(sqrt(k log 1/t)) work.
* **few groups** (sizes n_j): a product of binomials with prod(n_j + 1) atoms, enumerated
  exactly, each atom's exact position recoverable from its indices.
* **arbitrary reals**, k up to ~48: *meet in the middle* — the mechanisms are split in
  two halves whose 2^{k/2} subset sums are enumerated and sorted; H(x) is a sum over
  the first half of the second half's suffix quantities (binary search), and eps_g is found
  by Newton's method in e^x, where H is convex, from below.  O(2^{k/2} k) per step.
* a loose float64 bracket is settled in 40-digit arithmetic from the exact rational
  positions: an ill-conditioned root (H flat) of at most ``REFINE_ATOMS`` = 4096 atoms;
  delta_g of products of at most ``PRECISE_ATOMS`` = 2^15 atoms when eps_g (or atoms) lie
  closer together than the float positions' error (a large eps_i beside tiny ones), and of
  at most ``PRECISE_SMALL`` = 256 atoms always (so the inverse law needs no moved root).
* :func:`optimal_epsilon_bruteforce`: Theorem 1.5 exactly as written, a sum over all
  2^k subsets (the paper's algorithm; kept as the reference the tests compare with).

When neither fits in ``max_atoms`` atoms per half, :class:`ExactTooLarge` (a ValueError)
says so and points to ``method="approx"`` instead of starting an hours-long run.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from fractions import Fraction

import numpy as np

from ._inputs import Mechanisms
from ._rounding import TINY, UNIT, dot_dir, down, exact_dir, fraction_mpf, mpf_dir, up
from ._binomial import binomial_log_pmf, binomial_masses
from .loss import (
    _no_event,
    LossDistribution,
    WindowTooNarrow,
    delta_from_excess,
    residual_target,
    rounding_bound,
    solve_segments,
    suffix_dw,
)

__all__ = [
    "optimal_epsilon",
    "optimal_delta",
    "optimal_epsilon_bruteforce",
    "ExactTooLarge",
    "binomial_window",
    "binomial_atoms",
    "product_atoms",
    "product_distribution",
    "exact_epsilon_bounds",
    "exact_excess_bounds",
    "MAX_ATOMS",
]

MAX_ATOMS = 2**24  # atoms per half of meet-in-the-middle (k = 48 distinct values)
FULL_ENUMERATION = 2**15  # up to this many atoms, list the whole distribution (else meet in the middle)
_TAIL = 2.0**-50  # truncated tails are kept below this fraction of the target (a 1e-15 relative effect)


class ExactTooLarge(ValueError):
    """Exact optimal composition is out of reach for this input (MV Thm 1.6: #P-complete)."""


# --------------------------------------------------------------------------- helpers

BIG_EPS = 800.0  # a mechanism with eps >= this has P0[s = -1] <= e^-800: a deterministic +eps


def _to_float(x: Fraction, up: bool) -> float:
    """A Fraction to the float on the requested side (+-inf beyond the float range)."""
    return exact_dir(x, up)


def _split_groups(m: Mechanisms):
    """((eps, count) groups with 0 < eps < BIG_EPS, exact shift sum of the big ones, slack).

    A group of c mechanisms with eps >= BIG_EPS puts all but P0[some s_i = -1] <= c e^-eps
    of its mass at the single loss c eps (a shift of the whole distribution); that mass is
    charged as slack (upper bounds) or dropped (lower bounds)."""
    e, c = m.positive()
    big = e >= BIG_EPS
    shift = sum((Fraction(float(x)) * int(n) for x, n in zip(e[big].tolist(), c[big].tolist())), Fraction(0))
    slack = float(np.sum(c[big].astype(float))) * math.exp(-BIG_EPS) * 2.0 if np.any(big) else 0.0
    return list(zip(e[~big].tolist(), [int(n) for n in c[~big].tolist()])), shift, slack


def _max_loss(m: Mechanisms) -> float:
    """sum_i eps_i rounded up: the largest finite privacy loss (basic composition)."""
    return dot_dir(m.count, m.eps, True)


def binomial_atoms(eps: float, k: int, m_lo: int, m_hi: int, log2_scale: int | None = 0):
    """Atoms m in [m_lo, m_hi] of M ~ Bin(k, p), p = e^eps/(1+e^eps): the losses
    (2m - k) eps (floats, for display), lower and upper bounds on 2^s P0[M = m], a bound on
    2^s P0[M > m_hi], and s (``log2_scale``; None: chosen so the largest mass is ~1).

    The masses are computed in log space with rigorous-by-construction error bounds
    (:mod:`optcomp._binomial`, checked against mpmath).  The tail bound uses that the pmf
    ratio r(m) = (k-m)/(m+1) e^eps decreases in m: P0[M > m_hi] <= pmf(m_hi) r/(1 - r).
    """
    p_lo, p_up, s = binomial_masses(eps, k, m_lo, m_hi, log2_scale)
    loss = (2 * np.arange(m_lo, m_hi + 1, dtype=np.int64) - k).astype(float) * eps
    return loss, p_lo, p_up, _binomial_tail(eps, k, m_hi, p_up), s


def _binomial_tail(eps: float, k: int, m_hi: int, p_up: np.ndarray) -> float:
    """Bound on (scaled) P0[M > m_hi]: the pmf ratio r(m) = (k-m)/(m+1) e^eps decreases in m,
    so the tail is at most pmf(m_hi) r/(1 - r)."""
    if m_hi >= k:
        return 0.0
    r = (k - m_hi) / (m_hi + 1.0) * math.exp(min(eps, 700.0))
    return math.inf if r >= 1.0 else float(p_up[-1]) * r / (1.0 - r) * (1.0 + 1e-12)


def binomial_window(eps: float, k: int, m_lo: int, m_hi: int, shift: Fraction = Fraction(0),
                    slack: float = 0.0, log2_scale: int | None = None, refine: bool = True) -> LossDistribution:
    """The homogeneous loss distribution (plus an exact ``shift``) restricted to m in
    [m_lo, m_hi], atoms at ``shift + (2 m - k) eps`` listed as integers m - m_lo in units of
    2 eps (exact gaps whatever k), masses scaled by a power of two (``log2_scale``).  The
    mass above m_hi is bounded and charged as slack (with ``slack``, an unscaled absolute
    amount); the atoms below m_lo are omitted, so H(x) is exact for x >= the loss of m_lo - 1."""
    p_lo, p0, s = binomial_masses(eps, k, m_lo, m_hi, log2_scale, refine)
    tail = _binomial_tail(eps, k, m_hi, p0)
    fe = Fraction(eps)
    origin = shift + fe * (2 * m_lo - k)
    exact_from = -math.inf if m_lo == 0 else _to_float(shift + fe * (2 * (m_lo - 1) - k), True)
    return LossDistribution(
        np.arange(m_hi - m_lo + 1, dtype=float), p0, slack=tail + up(math.ldexp(slack, s), 1),
        exact_from=exact_from, unit=2.0 * eps, origin=origin, p0_lower=p_lo, step=1.0, log2_scale=s,
        exact=lambda i: origin + 2 * fe * int(i),
    )


def _chernoff_m(k: int, p: float, log_tail: float) -> int:
    """The least m = ceil(k a) with the Chernoff bound exp(-k KL(a || p)) <= e^log_tail, so
    P0[M >= m] <= e^log_tail for M ~ Bin(k, p); a log, so tails far below the float range
    are reachable.  Up to the rounding of KL: a window heuristic, correctness never rests
    on it -- the callers check the rigorous tail bound."""
    log_tail = min(log_tail, math.log(0.5))
    q = 1.0 - p

    def rate(a):  # k KL(a || p), a in [p, 1]
        r = a * math.log(a / p) if a > 0 else 0.0
        if a < 1.0:
            r += (1.0 - a) * math.log((1.0 - a) / q)
        return k * r

    lo, hi = p, 1.0
    if rate(hi) < -log_tail:
        return k
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if rate(mid) >= -log_tail:
            hi = mid
        else:
            lo = mid
    return min(k, int(math.ceil(k * hi)) + 1)


def _homogeneous_window(eps: float, k: int, t: float):
    """(m_floor, m_lo, m_hi): the atoms m >= m_floor have loss > 0 (m_floor - 1 does not);
    [m_lo, m_hi] is a first guess of the window holding the root of H(x) = t and all mass
    above it that matters: the root lies below the loss where P0[L > x] = t and above about
    one unit of loss below where P0[L > x] = t/(1 - 1/e) (H(x) >= P0[L > x + 1](1 - 1/e)),
    and the mass above m_hi is at most ~2^-58 t.  Widened by the callers when it is off."""
    p = 1.0 / (1.0 + math.exp(-eps))
    sd = math.sqrt(k * p * (1.0 - p))
    m_floor = min(k // 2 + 1, k)  # first m with (2m - k) eps > 0
    log_t = math.log(t) if t > 0.0 else -745.0
    m_root = _chernoff_m(k, p, log_t + math.log(4.0))
    # the root lies at most one unit of loss (1/(2 eps) atoms) below m_root, and in practice
    # within a few standard deviations (a narrower first guess: the callers widen on
    # WindowTooNarrow, so this only decides the speed -- tiny eps at k = 10^12 would
    # otherwise list 10^7 deep-tail atoms)
    m_lo = max(m_floor, m_root - int(math.ceil(min(1.0 / (2.0 * eps), 2.0 * k, 3.0 * sd + 64.0) + sd)) - 2)
    m_hi = min(k, max(_chernoff_m(k, p, log_t + math.log(_TAIL * 2.0**-8)) + 2, m_lo + 64))
    return m_floor, m_lo, m_hi


def _homogeneous_epsilon(eps: float, k: int, t: float, shift: Fraction = Fraction(0), slack: float = 0.0,
                         upward: bool = True) -> float:
    """Least x >= 0 with H(x) <= t for k identical mechanisms (plus an exact shift): rounded
    up (``upward``) or a certified lower bound."""
    m_floor, m_lo, m_hi = _homogeneous_window(eps, k, t)
    if shift:
        m_floor = 0  # the shift may move negative-loss atoms above 0
    scale = _scale_for(t)
    while True:
        # masses in double precision: the root moves by (relative mass error) x H / |H'|,
        # below 1e-12 x the root wherever the masses are deep in the tail (H / |H'| is then
        # the mean excess of the loss over x, small against x); small distributions whose
        # root sits where H is flat are settled in 40 digits by the caller
        dist = binomial_window(eps, k, m_lo, m_hi, shift, slack, scale, refine=False)
        # the truncated tail against 2^-50 t, both in the window's scaled units (no underflow)
        if _binomial_tail(eps, k, m_hi, dist.p0) > math.ldexp(t, dist.log2_scale) * _TAIL and m_hi < k:
            m_hi = min(k, m_hi + max(64, m_hi - m_lo))
            continue
        try:
            if upward:
                return solve_segments(dist, t)
            x = dist.epsilon_lower(t)
            if x > dist.exact_from or m_lo <= m_floor:
                return x
        except WindowTooNarrow:
            if m_lo <= m_floor:  # pragma: no cover - the window already reaches loss <= 0
                raise
        m_lo = max(m_floor, m_lo - max(64, 2 * (m_hi - m_lo)))


def _low_tail(eps: float, k: int, m_lo: int, log2_scale: int) -> float:
    """Bound on 2^s P0[M < m_lo]: below the mode the pmf ratio pmf(m - 1)/pmf(m) =
    m/(k - m + 1) e^-eps decreases as m does, so the lower tail is at most
    pmf(m_lo) r/(1 - r); inf when m_lo is not below the mode."""
    if m_lo <= 0:
        return 0.0
    r = m_lo / (k - m_lo + 1.0) * math.exp(-eps)
    if r >= 1.0:
        return math.inf
    _, top, _ = binomial_masses(eps, k, m_lo, m_lo, log2_scale)
    return float(top[0]) * r / (1.0 - r) * (1.0 + 1e-12)


def _homogeneous_excess(eps: float, k: int, x: float, shift: Fraction = Fraction(0), slack: float = 0.0,
                        upward: bool = True) -> float:
    """Upper (or lower) bound on H(x) for k identical mechanisms (plus an exact shift).

    The window starts at the first atom above x, or -- when that lies far below the bulk
    (eps large, k huge) -- at m_cut (first guess 12 standard deviations below the mean,
    widened while its tail exceeds 2^-50 of H), the atoms between being charged with their whole
    mass (a geometric bound on the lower tail) for the upper bound and dropped for the
    lower bound; it ends where the upper tail is below 2^-50 of H."""
    # first atom strictly above x: shift + (2m - k) eps > x
    rel = (Fraction(x) - shift) / Fraction(eps)
    m_first = min(max(math.floor((k + rel) / 2) - 1, 0), k)
    p = 1.0 / (1.0 + math.exp(-eps))
    mean = k * p
    sd = math.sqrt(k * p * (1.0 - p)) + 1.0
    m_cut = max(m_first, int(mean - 12.0 * sd) - 64)  # widened below when its tail matters
    near = math.log(0.5) if m_first < mean else float(binomial_log_pmf(eps, k, np.array([min(m_first + 1, k)]))[0][0])
    m_hi = min(k, max(m_cut + 64, _chernoff_m(k, p, near + math.log(_TAIL * 2.0**-8)) + 2))
    while True:
        dist = binomial_window(eps, k, m_cut, m_hi, shift, slack)
        low = _low_tail(eps, k, m_cut, dist.log2_scale) if m_cut > m_first else 0.0
        if upward:
            dist = replace(dist, slack=dist.slack + low, exact_from=-math.inf, _cache={})
        xx = max(x, dist.exact_from)
        h = dist.excess(xx) if upward else dist.excess_lower(xx)
        low_true = math.ldexp(low, -dist.log2_scale)
        if m_cut > m_first and low_true > _TAIL * max(h, 1e-300):
            m_cut = max(m_first, m_cut - max(64, 2 * (m_hi - m_cut)))
            continue
        scale = float(np.max(dist.p0[-min(dist.p0.size, 3):])) if m_hi < k else 0.0
        if m_hi >= k or dist.tail_slack() - slack - low_true <= _TAIL * max(h, 1e-300) or scale == 0.0:
            return h
        m_hi = min(k, m_hi + max(64, m_hi - m_cut))


def exact_epsilon_bounds(m: Mechanisms, t_low: float, t_high: float, max_atoms: int = 2**15):
    """Certified (lower, upper) on eps_g from the exact producers when the multiset is one
    group or a product of at most ``max_atoms`` atoms (else None): the float64 floor."""
    groups, shift, slack = _split_groups(m)
    if not groups:  # every eps_i is 0 or >= BIG_EPS: one atom at the exact shift
        dist = _point_mass(shift, slack)
        return dist.epsilon_lower(t_high), solve_segments(dist, t_low)
    if len(groups) == 1:
        eps, n = groups[0]
        return (_homogeneous_epsilon(eps, n, t_high, shift, slack, upward=False),
                _homogeneous_epsilon(eps, n, t_low, shift, slack))
    if 1 < len(groups) and _atom_count(groups) <= max_atoms:
        dist = product_distribution(groups, shift, slack, lower=True, log2_scale=_scale_for(t_low))
        return dist.epsilon_lower(t_high), solve_segments(dist, t_low)
    return None


def exact_excess_bounds(m: Mechanisms, x: float, max_atoms: int = 2**15):
    """Certified (lower, upper) on H(x) from the exact producers (see
    :func:`exact_epsilon_bounds`), or None."""
    groups, shift, slack = _split_groups(m)
    if not groups:  # every eps_i is 0 or >= BIG_EPS: one atom at the exact shift
        dist = _point_mass(shift, slack)
        return dist.excess_lower(x), dist.excess(x)
    if len(groups) == 1:
        eps, n = groups[0]
        return (_homogeneous_excess(eps, n, x, shift, slack, upward=False),
                _homogeneous_excess(eps, n, x, shift, slack))
    if 1 < len(groups) and _atom_count(groups) <= max_atoms:
        dist = product_distribution(groups, shift, slack, lower=True)
        return dist.excess_lower(x), dist.excess(x)
    return None


def product_atoms(groups, *, lower: bool = False):
    """All atoms of a product of binomial factors (eps, n), sorted by loss: the losses,
    lower bounds on their masses (``None`` unless ``lower``), upper bounds (each a product
    of len(groups) rounded factor bounds, charged 2 u per factor), and a bound on the mass
    lost to underflow."""
    loss, p_lo, p_up, underflow, _ = _product(groups, lower)
    return loss, p_lo, p_up, underflow


def _scale_for(t: float) -> int:
    """2^s making masses near the target t about 2^-80 (masses <= 1 stay below 2^1000)."""
    return int(min(1000, max(0, -math.ceil(math.log2(t)) - 80))) if t > 0.0 else 0


def _product(groups, lower: bool, log2_scale: int = 0):
    loss = np.zeros(1)
    p_lo = np.ones(1) if lower else None
    p_up = np.ones(1)
    for i, (eps, n) in enumerate(groups):  # the first factor carries the 2^s scale
        fl, flo, fup, _, _ = binomial_atoms(eps, n, 0, n, log2_scale if i == 0 else 0)
        loss = (loss[:, None] + fl[None, :]).ravel()
        if lower:
            p_lo = (p_lo[:, None] * np.maximum(flo, 0.0)[None, :]).ravel()
        p_up = (p_up[:, None] * fup[None, :]).ravel()
    order = np.argsort(loss, kind="stable")
    products = 2.0 * len(groups) * UNIT
    if lower:
        p_lo = p_lo[order] * (1.0 - products)
    p_up = p_up[order] * (1.0 + products)
    underflow = TINY * int(np.count_nonzero(p_up < 1e-300))  # products may underflow
    return loss[order], p_lo, p_up, underflow, order


def _position_error(groups) -> float:
    """Bound on |float loss - exact loss| of the atoms built by :func:`_product`: each factor
    loss (2m - n) eps is one rounding, each of the len(groups) - 1 sums another."""
    total = sum(n * e for e, n in groups)
    return 2.0 * (len(groups) + 1) * UNIT * total * (1.0 + 1e-12)


def product_distribution(groups, shift: Fraction = Fraction(0), slack: float = 0.0, *, lower: bool = False,
                         log2_scale: int = 0, product=None) -> LossDistribution:
    """The full product-of-binomials distribution (plus an exact shift) with exact atom
    positions on demand (each atom's (m_1, ..., m_g) is recovered from the sort order),
    masses scaled by 2^log2_scale (``slack`` is unscaled); ``product``: the output of
    :func:`_product` for these arguments, when the caller has it already."""
    loss, p_lo, p_up, underflow, order = product if product is not None else _product(groups, lower, log2_scale)
    unshifted = _exact_positions(groups, order)

    def exact(i: int) -> Fraction:
        return shift + unshifted(i)

    return LossDistribution(loss, p_up, slack=underflow + (up(math.ldexp(slack, log2_scale), 1) if slack else 0.0),
                            origin=shift, pos_err=_position_error(groups), exact=exact, p0_lower=p_lo,
                            log2_scale=log2_scale)


def _atom_count(groups) -> int:
    return math.prod(n + 1 for _, n in groups)


def _split(groups):
    """Two halves of the factors with atom counts as balanced as possible (greedy)."""
    halves: list[list] = [[], []]
    sizes = [1, 1]
    for g in sorted(groups, key=lambda g: -g[1]):
        i = 0 if sizes[0] <= sizes[1] else 1
        halves[i].append(g)
        sizes[i] *= g[1] + 1
    return halves, sizes


def _exact_positions(groups, order):
    """A callable giving the exact (rational) loss of atom i of :func:`_product`'s listing."""
    shape = [n + 1 for _, n in groups]
    fe = [(Fraction(e), n) for e, n in groups]

    def exact(i: int) -> Fraction:
        idx = np.unravel_index(int(order[i]), shape)
        return sum((f * (2 * int(mi) - n) for (f, n), mi in zip(fe, idx)), Fraction(0))

    return exact


_MITM_EXACT_PAIRS = 20_000  # ambiguous (query, atom) pairs settled exactly per evaluation


class _MeetInTheMiddle:
    """H(x) of the product of two listed distributions A (queries) and B (suffix D, W):
    ``H(x) = sum_a pa H_B(x - la)`` with ``H_B(y) = D_j + W_j (1 - e^{-(lb_j - y)})``,
    lb_j the first atom of B above y; every term non-negative.  Positions are floats
    within ``pos_err`` of the truth and distances are widened by it (upper bounds), except
    for the pairs where that matters -- y within 2 pos_err of an atom of B (eps_g on or next
    to an atom, e.g. the float sum of all eps_i) -- whose distance is formed exactly from
    the rational positions (up to ``_MITM_EXACT_PAIRS`` of them)."""

    def __init__(self, half_a, half_b, shift: Fraction = Fraction(0), slack: float = 0.0):
        la, _, pa, ua, oa = _product(half_a, False)
        lb, _, pb, ub, ob = _product(half_b, False)
        if la.size > lb.size:
            la, pa, ua, oa, lb, pb, ub, ob = lb, pb, ub, ob, la, pa, ua, oa
            half_a, half_b = half_b, half_a
        keep = np.flatnonzero(pa > 0)
        self.la, self.pa = la[keep], pa[keep]
        exact_a = _exact_positions(half_a, oa)
        self.exact_a = lambda i: exact_a(int(keep[i]))
        self.exact_b = _exact_positions(half_b, ob)
        self.lb = lb
        self.exact_budget = 4 * _MITM_EXACT_PAIRS
        self.D, self.W = suffix_dw(pb, lb, pos_err=_position_error(half_b))
        self.rel = rounding_bound(lb.size) + 4.0 * rounding_bound(self.la.size)
        self.shift = shift
        self.slack = ua + ub + slack + 16.0 * (la.size + lb.size) * 2.0**-1070
        groups = list(half_a) + list(half_b)
        self.pos_err = _position_error(groups) + 4.0 * UNIT * float(np.max(np.abs(lb))) + 8.0 * UNIT * float(
            np.max(np.abs(la)))
        self.max_loss = _to_float(shift + sum((Fraction(e) * n for e, n in groups), Fraction(0)), True)

    def terms(self, x: float) -> tuple[float, float]:
        """(h, b): h >= H(x) before the relative charge, b = -dH/dx (both before charging)."""
        xs = _to_float(Fraction(x) - self.shift, False) if self.shift else x  # down: H decreases in x
        y = xs - self.la
        nb = self.lb.size
        j = np.searchsorted(self.lb, y - self.pos_err, side="right")  # ambiguous atoms count as above
        jj = np.minimum(j, nb - 1)
        v = np.maximum(self.lb[jj] - y, 0.0) + self.pos_err
        inside = j < nb
        ambiguous = np.flatnonzero(inside & (self.lb[jj] - y <= 2.0 * self.pos_err))
        if ambiguous.size:
            # what the widening can add on these pairs: pa W (1 - e^{-3 pos_err}); settle them
            # exactly only where that is not negligible next to H (e.g. x at the top atom)
            h_est = float(np.sum(np.where(inside, self.pa * (self.D[jj] + self.W[jj] * -np.expm1(-v)), 0.0)))
            extra = 3.0 * self.pos_err * float(np.sum(self.pa[ambiguous] * self.W[jj[ambiguous]]))
            if extra <= 2.0**-42 * h_est:  # a 2e-13 relative excess at most
                ambiguous = ambiguous[:0]
        if 0 < ambiguous.size <= min(_MITM_EXACT_PAIRS, self.exact_budget):
            self.exact_budget -= ambiguous.size  # bounded work per solve: then widening (safe) only
            fx = Fraction(x) - self.shift
            jj = jj.copy()
            for i in ambiguous.tolist():
                yi = fx - self.exact_a(i)
                k = int(jj[i])
                while k < nb and self.exact_b(k) <= yi:
                    k += 1
                if k >= nb:
                    inside[i] = False
                    continue
                jj[i] = k
                v[i] = max(exact_dir(self.exact_b(k) - yi, up=True), 0.0)
        with np.errstate(under="ignore", over="ignore"):
            e = np.exp(-v)
            h = float(np.sum(np.where(inside, self.pa * (self.D[jj] + self.W[jj] * -np.expm1(-v)), 0.0)))
            b = float(np.sum(np.where(inside, self.pa * self.W[jj] * e, 0.0)))
        return h, b

    def excess(self, x: float) -> float:
        h, _ = self.terms(x)
        return h * (1.0 + self.rel) + self.slack

    def epsilon(self, t: float) -> float:
        """Least x >= 0 with the charged bound on H(x) <= t: safeguarded Newton in e^x."""
        rel = self.rel
        target = t - self.slack
        if target < 0.0:
            return math.inf

        def g(x):
            h, b = self.terms(x)
            return h * (1.0 + rel) - target, b * (1.0 - rel)

        lo, hi = 0.0, self.max_loss  # g(hi) <= 0 since H(max_loss) = 0: certified
        g_lo, b_lo = g(lo)
        if g_lo <= 0.0:
            return 0.0
        h_hi = 0.0  # charged H at hi
        for _ in range(200):
            h_lo = g_lo + target
            # Newton in y = e^x: H is convex and decreasing in y, so from a point with
            # g > 0 the tangent's root never passes the root:  x' = x + log1p(g / b).
            cands = [lo + math.log1p(g_lo / b_lo) if b_lo > 0.0 else hi]
            if h_hi > 0.0 and h_lo > h_hi:
                # secant on log H (concave in the Gaussian-like tail: stays left of the root)
                r = math.log(h_lo / target) / math.log(h_lo / h_hi)
                cands.append(lo + r * (hi - lo))
            elif b_lo > 0.0 and h_lo > 2.0 * target:
                # no bracket yet: Newton on log H takes long strides (may overshoot)
                cands.append(lo + math.log(h_lo / target) * h_lo / b_lo)
            mid = 0.5 * (lo + hi)
            cand = max(c if c < hi else mid for c in cands)
            cand = max(cand, lo + 16.0 * UNIT * max(abs(lo), 1.0))
            if not lo < cand < hi:
                break
            g_c, b_c = g(cand)
            if g_c <= 0.0:
                hi, h_hi = cand, g_c + target
            else:
                lo, g_lo, b_lo = cand, g_c, b_c
            if hi - lo <= 64.0 * UNIT * max(abs(hi), 1.0):
                break
        return up(hi, 2)  # hi always satisfies the charged bound: a certified eps_g


# --------------------------------------------------------------------------- public


def _distribution_kind(groups, max_atoms: int):
    log2_total = sum(math.log2(n + 1) for _, n in groups)
    if log2_total > 2.0 * math.log2(max_atoms) + 1.0:  # no split can fit: say so at once
        raise ExactTooLarge(
            f"exact optimal composition of these {sum(n for _, n in groups)} mechanisms "
            f"({len(groups)} distinct eps values) needs about 2^{log2_total:.0f} loss atoms, beyond "
            f"meet in the middle with max_atoms={max_atoms} per half; computing it exactly is "
            "#P-complete (MV Thm 1.6) — use method='approx' (MV Thm 1.7, certified bounds) instead"
        )
    total = _atom_count(groups)
    if total <= FULL_ENUMERATION:
        return "full", total
    halves, sizes = _split(groups)
    if max(sizes) <= max_atoms:
        return "mitm", (halves, sizes)
    raise ExactTooLarge(
        f"exact optimal composition of these {sum(n for _, n in groups)} mechanisms "
        f"({len(groups)} distinct eps values) needs about {total:.3g} loss atoms "
        f"(meet in the middle: two halves of {sizes[0]:.3g} and {sizes[1]:.3g} > max_atoms={max_atoms}); "
        "computing it exactly is #P-complete (MV Thm 1.6) — use method='approx' "
        "(MV Thm 1.7, certified upper bound) instead"
    )


def _check_max_atoms(max_atoms) -> int:
    if isinstance(max_atoms, bool) or not isinstance(max_atoms, (int, np.integer)) or max_atoms < 2:
        raise ValueError(f"max_atoms must be an integer >= 2, got {max_atoms!r}")
    return int(max_atoms)


def _point_mass(shift: Fraction, slack: float) -> LossDistribution:
    """The loss distribution of mechanisms that are all eps = 0 or eps >= BIG_EPS: one atom
    at the exact ``shift`` with mass <= 1 and >= 1 - slack (the rest, <= slack, at +inf)."""
    return LossDistribution(np.zeros(1), np.ones(1), slack=slack, origin=shift,
                            p0_lower=np.array([max(0.0, down(1.0 - slack, 1))]))


def _exact_solver(m: Mechanisms, max_atoms: int):
    """('homogeneous' | 'full' | 'mitm' | 'none', payload, shift, slack) for the positive
    part of the multiset (raises ExactTooLarge before any allocation)."""
    groups, shift, slack = _split_groups(m)
    if not groups:
        return "none", None, shift, slack
    if len(groups) == 1:
        return "homogeneous", groups[0], shift, slack
    kind, info = _distribution_kind(groups, max_atoms)
    return kind, (groups if kind == "full" else info[0]), shift, slack


def optimal_epsilon(m: Mechanisms, delta_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g): MV Thm 1.5 (KOV Thm 3.3).

    The least eps_g >= 0 such that
    ``1/prod(1+e^{eps_i}) sum_S max(e^{sum_S eps} - e^{eps_g} e^{sum_{not S} eps}, 0)
    <= 1 - (1 - delta_g)/prod(1 - delta_i)``, returned rounded *up* (never below the
    optimum; a few ulps above it).  ``math.inf`` when delta_g < 1 - prod(1 - delta_i).
    Raises :class:`ExactTooLarge` when no exact algorithm fits in ``max_atoms``.

    The inverse law: :func:`optimal_delta` at the returned eps_g is <= delta_g.  The two
    directions charge their float errors differently (and small ill-conditioned roots are
    settled in 40 digits, tighter than the float delta), so the root is checked with the
    other direction (one more evaluation of H) and, where that fails, solved again for the
    target t shrunk by what the excess asks (twice, four times that if needed), as long as
    the root moves by at most ``INVERSE_MOVE`` (2e-13) relative.  Where nothing helps --
    delta_g within a few ulps of 1 - prod(1 - delta_i) (t far below delta_g: an ulp of
    delta_g is more than a millionth of t), or a root so ill-conditioned (H flat) that the
    float charges of delta_g would move it further -- the unmoved root is returned: it is
    still an upper bound on the optimum, and ``optimal_delta`` there exceeds delta_g by at
    most its own float charges (~1e-13 relative; distributions of up to 256 atoms are
    settled in 40 digits).
    """
    max_atoms = _check_max_atoms(max_atoms)
    x0 = _optimal_epsilon(m, delta_g, max_atoms)
    if not x0 < math.inf:
        return x0
    top = _max_loss(m)
    if x0 >= top:
        return top
    if _no_event(m)[1] + top <= delta_g * (1.0 - 1e-9):
        # a tiny total loss (e.g. 10^12 x 5e-324): delta(x0) <= A + H(0) <= A + (1 - e^{-top})
        # <= A + top, below delta_g by far more than optimal_delta's float charges (~1e-13
        # relative), so the check below would pass; skip its 10^7-atom evaluation
        return x0
    excess = optimal_delta(m, x0, max_atoms=max_atoms) - delta_g
    if excess <= 0.0:
        return x0
    t = residual_target(m, delta_g)
    a_lo = _no_event(m)[0]
    for attempt in range(3):
        # H must drop by the excess over (1 - A), plus two ulps of delta_g for the roundings
        need = (excess + 2.0 * math.ulp(delta_g)) / max((1.0 - a_lo) * t, 1e-300) * 2.0**attempt
        if need > 1e-6:
            break  # delta_g within a few ulps of A: no smaller target helps
        x = _optimal_epsilon(m, delta_g, max_atoms, max(need, 2.0**-52))
        if x - x0 > INVERSE_MOVE * x0:
            break  # an ill-conditioned root: accuracy first (x0 is above the true root)
        if x >= top:
            return top
        excess = optimal_delta(m, x, max_atoms=max_atoms) - delta_g
        if excess <= 0.0:
            return x
    return x0


def _optimal_epsilon(m: Mechanisms, delta_g: float, max_atoms: int, shrink: float = 0.0) -> float:
    """The root of H(x) = t (1 - shrink), t the residual target of delta_g, rounded up."""
    t = residual_target(m, delta_g)
    if t < 0.0:
        return math.inf
    if shrink:
        t = down(t * (1.0 - shrink), 1)
    top = _max_loss(m)
    if t == 0.0:
        return top
    if top <= t:  # H(0) <= 1 - e^{-top} <= top <= t: the root is 0, exactly (tiny total loss)
        return 0.0
    try:
        kind, info, shift, slack = _exact_solver(m, max_atoms)
    except ExactTooLarge:
        from .lattice import commensurable_bounds  # eps_i = n_i u: the lattice u Z is exact

        b = commensurable_bounds(m, t, residual_target(m, delta_g, round_up=True))
        if b is not None and b.upper - b.lower <= COMMENSURABLE_REL * b.upper:
            return min(b.upper, top)
        raise
    if kind == "none":
        return min(solve_segments(_point_mass(shift, slack), t), top)
    groups = [info] if kind == "homogeneous" else info
    if kind == "homogeneous":
        eps, n = info
        x = _homogeneous_epsilon(eps, n, t, shift, slack)
    elif kind == "full":
        dist = product_distribution(info, shift, slack, lower=True, log2_scale=_scale_for(t))
        x = solve_segments(dist, t)
    else:
        return min(_MeetInTheMiddle(*info, shift=shift, slack=slack).epsilon(t), top)
    if 0.0 < x < math.inf and _atom_count(groups) <= REFINE_ATOMS:
        # a small distribution whose root sits where H is flat (delta_g near the mass above
        # it) amplifies the float64 error bounds: settle it in 40 digits when they are loose
        t_high = residual_target(m, delta_g, round_up=True)
        lower = _homogeneous_epsilon(eps, n, t_high, shift, slack, upward=False) if kind == "homogeneous" \
            else dist.epsilon_lower(t_high)
        if x - lower > REFINE_REL * x:
            x = min(x, _precise_epsilon(m, groups, shift, slack, delta_g, shrink))
    return min(x, top)


COMMENSURABLE_REL = 1e-9  # beyond the other exact paths: the commensurable lattice's bracket, if this tight
REFINE_ATOMS = 4096  # up to this many atoms an ill-conditioned root is settled in 40 digits
PRECISE_ATOMS = 2**15  # up to this many atoms a loose delta bracket is settled in 40 digits
PRECISE_SMALL = 256  # ... and up to this many whenever it is wider than 2^-50 (cheap: ~ms)
INVERSE_MOVE = 2e-13  # largest relative move of a root for the inverse law
PRECISE_REL = 2.0**-41  # a product's delta bracket this much wider than its rounding band is settled
REFINE_REL = 2.0**-43  # ... when the float64 bracket is wider than this (relative, ~1.1e-13)


@lru_cache(maxsize=4)
def _precise_atoms(groups: tuple, shift: Fraction):
    """The product-of-binomials distribution in 40-digit arithmetic: exact rational atom
    positions (sorted) and their P0 masses (mpmath, 40 digits; cached: bisections over
    eps_g evaluate the same distribution again)."""
    import itertools

    import mpmath as mp

    with mp.workdps(40):
        one = mp.mpf(1)
        factors = []
        for eps, n in groups:
            q = one / (1 + mp.exp(mp.mpf(eps)))
            r = (1 - q) / q  # C(n, j+1) p^(j+1) q^(n-j-1) = C(n, j) p^j q^(n-j) (n - j)/(j + 1) p/q
            fe = Fraction(eps)
            masses = [q**n]
            for j in range(n):
                masses.append(masses[-1] * r * (n - j) / (j + 1))
            factors.append([(fe * (2 * j - n), masses[j]) for j in range(n + 1)])
        atoms = {}
        for combo in itertools.product(*factors):
            pos = shift + sum((c[0] for c in combo), Fraction(0))
            atoms[pos] = atoms.get(pos, 0) + mp.fprod(c[1] for c in combo)
    pos = sorted(atoms)
    return pos, [atoms[x] for x in pos]


def _precise_epsilon(m: Mechanisms, groups, shift: Fraction, slack: float, delta_g: float,
                     shrink: float = 0.0) -> float:
    """OptComp from the definition in 40-digit arithmetic, for at most REFINE_ATOMS atoms:
    exact rational positions, binomial masses and the target t = 1 - (1 - delta_g) /
    prod(1 - delta_i) in mpmath, the root of H(x) = t on its segment in closed form, and
    the result moved up by a margin far above the 40-digit rounding (1e-30 relative, plus
    the mass ``slack`` of huge-eps mechanisms charged to the target).  An upper bound."""
    import mpmath as mp

    with mp.workdps(40):
        lnd = mp.fsum(int(c) * mp.log1p(-mp.mpf(float(d))) for d, c in zip(m.delta.tolist(), m.count.tolist()) if d)
        t = -mp.expm1(mp.log1p(-mp.mpf(delta_g)) - lnd) * (1 - mp.mpf(shrink))
        t = t - abs(t) * mp.mpf("1e-32") - mp.mpf(slack) - mp.mpf("1e-320")
        if t <= 0:
            return math.inf if t < 0 else _to_float(shift + sum((Fraction(e) * n for e, n in groups), Fraction(0)), True)
        lmp, D, W = _precise_table(tuple(groups), shift)
        J = next(j for j in range(len(lmp)) if D[j] <= t)
        # on [l_{J-1}, l_J]: H(x) = D_J + W_J (1 - e^{x - l_J}) = t
        y = (t - D[J]) / W[J]
        x = lmp[J] + mp.log1p(-y) if y < 1 else (lmp[J - 1] if J > 0 else mp.mpf(0))
        if J > 0:
            x = max(x, lmp[J - 1])
        if x <= 0:
            return 0.0
        return mpf_dir(x + abs(x) * mp.mpf("1e-30") + mp.mpf("1e-300"), True)


@lru_cache(maxsize=4)
def _precise_table(groups: tuple, shift: Fraction):
    """Positions l_j, D_j = H(l_j) and W_j of :func:`_precise_atoms` in 40 digits, by the
    module's recurrences W_j = p_j + e^{-g_j} W_{j+1}, D_j = D_{j+1} + W_{j+1} (1 - e^{-g_j})
    (positive terms, no cancellation; cached: the inverse law may solve the same
    distribution again for a slightly smaller target)."""
    import mpmath as mp

    with mp.workdps(40):
        pos, mass = _precise_atoms(groups, shift)
        lmp = [fraction_mpf(x) for x in pos]
        D, W = [mp.mpf(0)] * len(pos), [mp.mpf(0)] * len(pos)
        W[-1] = mass[-1]
        for j in range(len(pos) - 2, -1, -1):
            g = fraction_mpf(pos[j + 1] - pos[j])
            D[j] = D[j + 1] + W[j + 1] * -mp.expm1(-g)
            W[j] = mass[j] + W[j + 1] * mp.exp(-g)
    return lmp, D, W


def _exact_distance_excess(groups, shift: Fraction, slack: float, x: float, product) -> float:
    """An upper bound on H(x) for a product of binomials with exact distances: every atom's
    position is an integer over a common power-of-two denominator (so l - x is exact and
    rounded once, up), each term p (1 - e^{-(l - x)}) is formed from the masses' upper
    bounds (expm1 within 2 u, the distance's rounding and the product: 6 u), and the terms are
    summed exactly (``math.fsum``).  No position error at all: the remedy for atoms closer to
    x, or to each other, than the float positions' error (a large eps_i beside tiny ones),
    in O(atoms) with Python integers.  ``product``: :func:`_product` of ``groups`` (unscaled)."""
    _, _, p_up, underflow, order = product
    den = max([Fraction(e).denominator for e, _ in groups] + [Fraction(shift).denominator, Fraction(x).denominator])
    pos = np.zeros(1, dtype=object)
    for e, n in groups:
        f = Fraction(e)
        unit = f.numerator * (den // f.denominator)
        pos = np.add.outer(pos, np.array([(2 * j - n) * unit for j in range(n + 1)], dtype=object)).ravel()
    rel = int(Fraction(shift) * den) - int(Fraction(x) * den)  # exact: den is a multiple of both denominators
    diff = pos[order] + rel
    above = np.flatnonzero(diff > 0)
    d = np.array([int(v) / den for v in diff[above]], dtype=float)  # correctly rounded
    terms = p_up[above] * -np.expm1(-d * (1.0 + 2.0 * UNIT))
    h = math.fsum(terms.tolist()) * (1.0 + 8.0 * UNIT) + underflow + slack + 2.0**-1070 * (above.size + 1)
    return up(h, 1)


def _precise_excess(groups, shift: Fraction, slack: float, x: float) -> float:
    """An upper bound on H(x) from the definition in 40-digit arithmetic (at most
    PRECISE_ATOMS atoms): exact distances l - x, sum_{l > x} p (1 - e^{-(l - x)}) (positive
    terms), moved up by 1e-30 relative, plus ``slack`` (mass at +inf)."""
    import mpmath as mp

    fx = Fraction(x)
    with mp.workdps(40):
        pos, mass = _precise_atoms(tuple(groups), shift)
        h = mp.fsum(p * -mp.expm1(-fraction_mpf(l - fx)) for l, p in zip(pos, mass) if l > fx)
        return mpf_dir(h * (1 + mp.mpf("1e-30")) + mp.mpf(slack) + mp.mpf("1e-320"), True)


def optimal_delta(m: Mechanisms, eps_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """The least delta_g with (eps_g, delta_g)-DP of the composition (MV Thm 1.5 solved for
    delta_g): ``1 - prod(1 - delta_i) (1 - H(eps_g))``, rounded up (never below)."""
    max_atoms = _check_max_atoms(max_atoms)
    top = _max_loss(m)
    if eps_g >= top:
        return delta_from_excess(m, 0.0)
    if top <= 1e-301:  # H(eps_g) <= H(0) <= 1 - e^{-top} <= top: within the 1e-300 absolute accuracy
        return delta_from_excess(m, top)
    try:
        kind, info, shift, slack = _exact_solver(m, max_atoms)
    except ExactTooLarge:
        from .lattice import commensurable_excess_bounds

        ex = commensurable_excess_bounds(m, eps_g, rel_gap=COMMENSURABLE_REL)
        if ex is not None and ex[1] - ex[0] <= COMMENSURABLE_REL * ex[1]:
            return delta_from_excess(m, ex[1])
        raise
    if kind == "none":
        return delta_from_excess(m, _point_mass(shift, slack).excess(eps_g))
    groups = [info] if kind == "homogeneous" else info
    if kind == "homogeneous":
        eps, n = info
        h = _homogeneous_excess(eps, n, eps_g, shift, slack)
        lower = (lambda: _homogeneous_excess(eps, n, eps_g, shift, slack, upward=False))
    elif kind == "full":
        product = _product(info, True)
        dist = product_distribution(info, shift, slack, lower=True, product=product)
        h = dist.excess(eps_g)
        lower = (lambda: dist.excess_lower(eps_g))
    if kind in ("homogeneous", "full"):
        atoms = _atom_count(groups)
        # small distributions are settled from the exact positions whenever the float
        # bracket is wider than 2^-50 (then delta_g(epsilon_g(d)) <= d never needs the root
        # moved); products of up to 2^15 atoms when the bracket is wider than its rounding
        # band by more than PRECISE_REL (4.5e-13: the float answer could otherwise miss the
        # documented 1e-12) -- atoms closer to eps_g (or to each other) than their float
        # positions' error (homogeneous atoms are exact lattice points)
        if atoms <= PRECISE_SMALL:
            if h - lower() > 2.0**-50 * h:
                h = min(h, _precise_excess(groups, shift, slack, eps_g))
        elif kind == "full" and atoms <= PRECISE_ATOMS:
            if h - lower() > (PRECISE_REL + 2.0 * dist.error) * h:
                h = min(h, _exact_distance_excess(info, shift, slack, eps_g, product))
        return delta_from_excess(m, h)
    return delta_from_excess(m, _MeetInTheMiddle(*info, shift=shift, slack=slack).excess(eps_g))


def optimal_epsilon_bruteforce(m: Mechanisms, delta_g: float, *, max_k: int = 22) -> float:
    """MV Theorem 1.5 exactly as written: a sum over all 2^k subsets S, eps_g by bisection.

    The paper's exponential-time algorithm, kept as the reference the tests compare the
    fast algorithms with.  Bisection to adjacent floats on the left-hand side of (1.2)
    ``f(eps_g) = sum_S max(e^{sum_S eps} - e^{eps_g} e^{sum_{not S} eps}, 0) / prod(1+e^{eps_i})``.
    """
    k = m.k
    if k > max_k:
        raise ExactTooLarge(f"brute force over 2^k subsets is limited to k <= {max_k}, got k={k}")
    eps = m.expanded(max_k, "the brute force").astype(float)
    rhs = 1.0 - math.exp(math.log1p(-delta_g) - m.log_no_delta)
    if rhs < 0:
        return math.inf
    subsets = ((np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)
    in_s = subsets @ eps
    out_s = (~subsets) @ eps
    log_norm = float(np.sum(np.log1p(np.exp(eps))))

    def f(eps_g: float) -> float:
        terms = np.maximum(np.exp(in_s - log_norm) - np.exp(eps_g + out_s - log_norm), 0.0)
        return float(math.fsum(terms.tolist()))

    if f(0.0) <= rhs:
        return 0.0
    lo, hi = 0.0, float(eps.sum()) * (1 + 1e-15) + 1e-300
    if f(hi) > rhs:
        return math.inf
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return hi
        if f(mid) <= rhs:
            hi = mid
        else:
            lo = mid
