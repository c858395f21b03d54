r"""Exact optimal composition: KOV Thm 3.3 / MV Thm 1.4 (homogeneous) and MV Thm 1.5
(heterogeneous), computed far beyond the papers' 2^k brute force.

All producers build the finite privacy-loss distribution of the composed randomized
responses (see :mod:`optcomp.loss`) and hand it to the same segment solver:

* **homogeneous** (all eps_i equal): the loss is ``(2m - k) eps`` with ``m ~ Bin(k, p)``,
  ``p = e^eps/(1+e^eps)``.  Only a window of ``m`` around the answer matters; the window
  is chosen from the binomial's mean and spread, its upper tail is bounded rigorously by
  a geometric series (the pmf ratio decreases) and charged as slack, and it is widened
  if the answer falls outside.  O(window) = O(sqrt(k log(1/delta_g))) work, so k = 10^6
  takes about a millisecond; all exponents are differences of losses (no e^{k eps}).
* **few distinct eps values** (groups of sizes n_j): a product of binomials with
  prod(n_j + 1) atoms, enumerated exactly.
* **arbitrary reals**, k up to ~48: *meet in the middle* — the mechanisms are split in
  two halves whose 2^{k/2} subset sums are enumerated and sorted; H(x) is a sum over
  the first half of the second half's suffix sums (binary search), and eps_g is found
  by Newton's method in e^x, where H is convex, from below.  O(2^{k/2} k) per step.
* :func:`optimal_epsilon_bruteforce`: Theorem 1.5 exactly as written, a sum over all
  2^k subsets (the paper's algorithm; kept as the reference the tests compare with).

When neither fits in ``max_atoms`` atoms per half, :class:`ExactTooLarge` (a ValueError)
says so and points to ``method="approx"`` instead of starting an hours-long run.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
from scipy.special import expit

from ._inputs import Mechanisms
from ._rounding import TINY, UNIT, sum_up, up
from .loss import (
    LossDistribution,
    WindowTooNarrow,
    rounding_bound,
    delta_from_excess,
    residual_target,
    solve_segments,
)

__all__ = [
    "optimal_epsilon",
    "optimal_delta",
    "optimal_epsilon_bruteforce",
    "ExactTooLarge",
    "binomial_window",
    "binomial_atoms",
    "product_atoms",
    "MAX_ATOMS",
]

MAX_ATOMS = 2**24  # atoms per half of meet-in-the-middle (k = 48 distinct values)
FULL_ENUMERATION = 2**15  # up to this many atoms, list the whole distribution (else meet in the middle)
_TAIL = 2.0**-64  # truncated tails are kept below this fraction of the target


class ExactTooLarge(ValueError):
    """Exact optimal composition is out of reach for this input (MV Thm 1.6: #P-complete)."""


# --------------------------------------------------------------------------- helpers


def _groups(m: Mechanisms) -> list[tuple[float, int]]:
    """(eps, multiplicity) of the mechanisms with eps > 0, sorted by eps."""
    if m.homogeneous:
        e = float(m.eps[0])
        return [(e, m.k)] if e > 0 else []
    counts = Counter(float(e) for e in m.eps if e > 0)
    return sorted(counts.items())


def _max_loss(m: Mechanisms) -> float:
    """sum_i eps_i rounded up: the largest finite privacy loss (basic composition)."""
    if m.homogeneous:
        e = float(m.eps[0])
        s = m.k * e
        return s if Fraction(e) * m.k == Fraction(s) else up(s, 1)
    return sum_up(m.eps)


def binomial_atoms(eps: float, k: int, m_lo: int, m_hi: int):
    """Atoms m in [m_lo, m_hi] of M ~ Bin(k, p), p = e^eps/(1+e^eps): the losses
    (2m - k) eps, lower and upper bounds on P0[M = m], and a bound on P0[M > m_hi].

    The pmf is scipy's (Boost), evaluated as Bin(k, q)(k - m) with q = 1/(1+e^eps) <= 1/2
    so that neither p nor q loses digits.  Two sources of error: q is a float (relative
    error <= 2^-53), which moves log P0[m] by up to |m - kp| 2^-53 / p, and the pmf
    evaluation itself.  Both are charged as ``32 u |m - kp| + 512 u`` (u = 2^-53) in each
    direction, a factor >= 4 above the worst error seen against 50-digit mpmath
    (tests/test_optimal.py::test_binomial_mass_error_bound).  The error tilts the
    distribution smoothly, so it moves eps_g by only about 64 u eps k p q (1e-14 at
    k = 10^6, eps = 0.01).  The tail bound uses that the pmf ratio
    r(m) = (k-m)/(m+1) e^eps decreases in m: P0[M > m_hi] <= pmf(m_hi) r/(1 - r).
    """
    from scipy.stats import binom  # imported here: scipy.stats costs ~0.7 s at start-up

    m_idx = np.arange(m_lo, m_hi + 1)
    q = float(expit(-eps))
    pmf = binom.pmf(k - m_idx, k, q)
    rel = (32.0 * np.abs(m_idx - k * (1.0 - q)) + 512.0) * UNIT
    p_up = pmf * (1.0 + rel)
    loss = (2 * m_idx - k).astype(float) * eps  # one rounding: <= u |loss|
    tail = 0.0
    if m_hi < k:
        r = (k - m_hi) / (m_hi + 1.0) * math.exp(eps)
        tail = math.inf if r >= 1.0 else float(p_up[-1]) * r / (1.0 - r) * (1.0 + 1e-12)
    return loss, pmf * (1.0 - rel), p_up, tail


def binomial_window(eps: float, k: int, m_lo: int, m_hi: int) -> LossDistribution:
    """The homogeneous loss distribution restricted to m in [m_lo, m_hi].

    The mass above m_hi is bounded and charged as slack; the atoms below m_lo are
    omitted, so H(x) is exact for x >= (2 m_lo - k - 2) eps (``exact_from``).
    """
    loss, _, p0, tail = binomial_atoms(eps, k, m_lo, m_hi)
    underflow = TINY * int(np.count_nonzero(p0 < 1e-300))
    exact_from = -math.inf if m_lo == 0 else (2 * (m_lo - 1) - k) * eps
    return LossDistribution(loss, p0, slack=tail + underflow, exact_from=exact_from)


def _homogeneous_epsilon(eps: float, k: int, t: float) -> float:
    p = float(expit(eps))
    mean = k * p
    sd = math.sqrt(k * p * (1.0 - p)) + 1.0
    z = math.sqrt(2.0 * (math.log(1.0 / max(t, 1e-300)) + 50.0))
    half = (k + 1) // 2 - 1  # highest m with loss (2m - k) eps <= 0 ... or -1
    m_floor = max(half, 0)
    m_lo = max(m_floor, int(mean - 12.0 * sd))
    m_hi = min(k, int(math.ceil(mean + (z + 4.0) * sd)) + 2)
    while True:
        dist = binomial_window(eps, k, m_lo, m_hi)
        if dist.slack > _TAIL * t and m_hi < k:
            m_hi = min(k, m_hi + max(16, m_hi - int(mean)))
            continue
        try:
            return solve_segments(dist, t)
        except WindowTooNarrow:
            if m_lo == m_floor:  # pragma: no cover - window already reaches loss <= 0
                raise
            m_lo = max(m_floor, m_lo - max(16, m_hi - m_lo))


def _homogeneous_excess(eps: float, k: int, x: float) -> float:
    """Upper bound on H(x) for k identical mechanisms."""
    # first atom strictly above x: (2m - k) eps > x
    m_first = int(math.floor((k + x / eps) / 2.0))
    m_first = min(max(m_first, 0), k)
    p = float(expit(eps))
    mean = k * p
    sd = math.sqrt(k * p * (1.0 - p)) + 1.0
    m_hi = min(k, max(m_first, int(math.ceil(mean))) + int(40 * sd) + 16)
    while True:
        dist = binomial_window(eps, k, m_first, m_hi)
        scale = float(np.max(dist.p0[-min(dist.p0.size, 3):])) if m_hi < k else 0.0
        h = dist.excess(max(x, dist.exact_from))
        if m_hi >= k or dist.slack <= _TAIL * max(h, 1e-300) or scale == 0.0:
            return h
        m_hi = min(k, m_hi + max(16, m_hi - m_first))


def product_atoms(groups, *, lower: bool = False):
    """All atoms of a product of binomial factors (eps, n), sorted by loss: the losses,
    lower bounds on their masses (``None`` unless ``lower``), upper bounds (each a product
    of len(groups) rounded factor bounds, charged 2 u per factor), and a bound on the mass
    lost to underflow."""
    loss = np.zeros(1)
    p_lo = np.ones(1) if lower else None
    p_up = np.ones(1)
    for eps, n in groups:
        fl, flo, fup, _ = binomial_atoms(eps, n, 0, n)
        loss = (loss[:, None] + fl[None, :]).ravel()
        if lower:
            p_lo = (p_lo[:, None] * np.maximum(flo, 0.0)[None, :]).ravel()
        p_up = (p_up[:, None] * fup[None, :]).ravel()
    order = np.argsort(loss, kind="stable")
    products = 2.0 * len(groups) * UNIT
    if lower:
        p_lo = p_lo[order] * (1.0 - products)
    p_up = p_up[order] * (1.0 + products)
    underflow = TINY * int(np.count_nonzero(p_up < 1e-290))
    return loss[order], p_lo, p_up, underflow


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


class _MeetInTheMiddle:
    """H(x) of the product of two listed distributions A (queries) and B (sorted, suffix sums)."""

    def __init__(self, half_a, half_b):
        la, _, pa, ua = product_atoms(half_a)
        lb, _, pb, ub = product_atoms(half_b)
        if la.size > lb.size:
            la, pa, ua, lb, pb, ub = lb, pb, ub, la, pa, ua
        keep = pa > 0
        self.la, self.pa = la[keep], pa[keep]
        self.B = LossDistribution(lb, pb)
        S, W = self.B.suffix()
        self.S, self.W = S, W
        self.lb_ext = np.append(lb, math.inf)
        self.rel = rounding_bound(la.size * lb.size)
        self.slack = ua + ub + self.B.slack  # B moved its tiny masses to +inf
        self.max_loss = float(la[-1] + lb[-1]) if la.size else 0.0

    def terms(self, x: float) -> tuple[float, float]:
        """(A, B) with H(x) = A - B: A = sum pa S_B, B = sum pa e^{y - lb_j} W_B (y = x - la)."""
        y = x - self.la
        j = np.searchsorted(self.lb_ext[:-1], y, side="right")
        a = float(np.sum(self.pa * self.S[j]))
        with np.errstate(under="ignore"):
            b = float(np.sum(self.pa * np.exp(y - self.lb_ext[j]) * self.W[j]))
        return a, b

    def excess(self, x: float) -> float:
        a, b = self.terms(x)
        return max(a - b, 0.0) + self.rel * (a + b) + self.slack

    def epsilon(self, t: float) -> float:
        """Least x >= 0 with the charged bound on H(x) <= t: safeguarded Newton in e^x."""
        rel = self.rel
        target = t - self.slack
        if target < 0.0:
            return math.inf

        def g(x):
            a, b = self.terms(x)
            return a * (1.0 + rel) - b * (1.0 - rel) - target, b * (1.0 - rel)

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


def optimal_epsilon(m: Mechanisms, delta_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g): MV Thm 1.5 (KOV Thm 3.3).

    The least eps_g >= 0 such that
    ``1/prod(1+e^{eps_i}) sum_S max(e^{sum_S eps} - e^{eps_g} e^{sum_{not S} eps}, 0)
    <= 1 - (1 - delta_g)/prod(1 - delta_i)``, returned rounded *up* (never below the
    optimum; a few ulps above it).  ``math.inf`` when delta_g < 1 - prod(1 - delta_i).
    Raises :class:`ExactTooLarge` when no exact algorithm fits in ``max_atoms``.
    """
    max_atoms = _check_max_atoms(max_atoms)
    t = residual_target(m, delta_g)
    if t < 0.0:
        return math.inf
    top = _max_loss(m)
    if t == 0.0:
        return top
    groups = _groups(m)
    if not groups:
        return 0.0
    if len(groups) == 1:
        eps, n = groups[0]
        return min(_homogeneous_epsilon(eps, n, t), top)
    kind, info = _distribution_kind(groups, max_atoms)
    if kind == "full":
        loss, _, mass, underflow = product_atoms(groups)
        return min(solve_segments(LossDistribution(loss, mass, slack=underflow), t), top)
    return min(_MeetInTheMiddle(*info[0]).epsilon(t), top)


def optimal_delta(m: Mechanisms, eps_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """The least delta_g with (eps_g, delta_g)-DP of the composition (MV Thm 1.5 solved for
    delta_g): ``1 - prod(1 - delta_i) (1 - H(eps_g))``, rounded up (never below)."""
    max_atoms = _check_max_atoms(max_atoms)
    groups = _groups(m)
    if not groups or eps_g >= _max_loss(m):
        return delta_from_excess(m, 0.0)
    if len(groups) == 1:
        eps, n = groups[0]
        return delta_from_excess(m, _homogeneous_excess(eps, n, eps_g))
    kind, info = _distribution_kind(groups, max_atoms)
    if kind == "full":
        loss, _, mass, underflow = product_atoms(groups)
        return delta_from_excess(m, LossDistribution(loss, mass, slack=underflow).excess(eps_g))
    return delta_from_excess(m, _MeetInTheMiddle(*info[0]).excess(eps_g))


def optimal_epsilon_bruteforce(m: Mechanisms, delta_g: float, *, max_k: int = 22) -> float:
    """MV Theorem 1.5 exactly as written: a sum over all 2^k subsets S, eps_g by bisection.

    The paper's exponential-time algorithm, kept as the reference the tests compare the
    fast algorithms with.  Bisection to adjacent floats on the left-hand side of (1.2)
    ``f(eps_g) = sum_S max(e^{sum_S eps} - e^{eps_g} e^{sum_{not S} eps}, 0) / prod(1+e^{eps_i})``.
    """
    k = m.k
    if k > max_k:
        raise ExactTooLarge(f"brute force over 2^k subsets is limited to k <= {max_k}, got k={k}")
    eps = m.eps.astype(float)
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
