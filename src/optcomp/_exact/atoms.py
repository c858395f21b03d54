r"""Exact producers (layer L3): the loss distribution of a multiset listed exactly --
a window of one binomial (homogeneous, k up to 10^12), a product of binomials (each factor
whole, or a window of it: :func:`window_groups`), one atom (every eps 0 or >= BIG_EPS) --
with its masses' error bounds, and the bracket functions
the lattice driver calls before any lattice (:func:`exact_epsilon_bounds`,
:func:`exact_excess_bounds`).  Never searches: the drivers choose.

Length (~680 lines): the windows of one binomial and of a product (their edges, tails and
the edges raised near the root, :func:`raise_lower_edges`) are charged by the same tail
bounds, which every window's certificate reads, so they stay in one module."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
from scipy.special import log_expit

from .._binomial import binomial_log_pmf, binomial_masses
from .._cgf import binomial_quantile, cgf_terms, tilt_for
from .._inputs import Mechanisms
from .._memory import current as _memory_budget
from .._rounding import LIBM_ULPS, TINY, UNIT, down, exact_dir, up
from .._types import ExactTooLarge
from ..loss import LossDistribution, WindowTooNarrow, solve_segments


_TAIL = 2.0**-50  # truncated tails are kept below this fraction of the target (a 1e-15 relative effect)


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


UNDERFLOW_SCALE = 1000  # masses x 2^this when the residual target is below the float range
WINDOW_BYTES = 64  # memory per atom of a binomial window (masses, positions, the solvers' sums; ~25 measured)


def binomial_atoms(eps: float, k: int, m_lo: int, m_hi: int, log2_scale: int | None = 0):
    """Atoms m in [m_lo, m_hi] of M ~ Bin(k, p), p = e^eps/(1+e^eps): the losses
    (2m - k) eps (floats, for display), lower and upper bounds on 2^s P0[M = m], a bound on
    2^s P0[M > m_hi], and s (``log2_scale``; None: chosen so the largest mass is ~1).

    The masses are computed in log space with rigorous-by-construction error bounds
    (:mod:`optcomp._binomial`, checked against mpmath).  The tail bound uses that the pmf
    ratio r(m) = (k-m)/(m+1) e^eps decreases in m: P0[M > m_hi] <= pmf(m_hi) r/(1 - r).
    """
    _memory_budget().need(WINDOW_BYTES * (m_hi - m_lo + 1), f"a window of {m_hi - m_lo + 1:,} binomial atoms "
                          f"(k={k})", ExactTooLarge)
    p_lo, p_up, s = binomial_masses(eps, k, m_lo, m_hi, log2_scale)
    loss = (2 * np.arange(m_lo, m_hi + 1, dtype=np.int64) - k).astype(float) * eps
    return loss, p_lo, p_up, _binomial_tail(eps, k, m_hi, p_up), s


def _binomial_tail(eps: float, k: int, m_hi: int, p_up: np.ndarray) -> float:
    """Bound on (scaled) P0[M > m_hi]: the pmf ratio r(m) = (k-m)/(m+1) e^eps decreases in m,
    so the tail is at most pmf(m_hi) r/(1 - r)."""
    if m_hi >= k:
        return 0.0
    return _geometric(float(p_up[-1]), (k - m_hi) / (m_hi + 1.0) * math.exp(min(eps, 700.0)))


def _geometric(p: float, r: float) -> float:
    """An upper bound on p r/(1 - r) (= p (r + r^2 + ...)) for a pmf ratio r computed with
    one exp (within LIBM_ULPS ulps, 2 L u) and two roundings: r is raised by (2 L + 4) u
    first (r/(1 - r) increases in r, and its error grows like 1/(1 - r): not a fixed
    factor), then the three roundings of the quotient are covered by 1e-12; inf when r
    reaches 1."""
    r = r * (1.0 + (2.0 * LIBM_ULPS + 4.0) * UNIT)
    return math.inf if r >= 1.0 else p * r / (1.0 - r) * (1.0 + 1e-12)


def binomial_window(eps: float, k: int, m_lo: int, m_hi: int, shift: Fraction = Fraction(0),
                    slack: float = 0.0, log2_scale: int | None = None, refine: bool = True) -> LossDistribution:
    """The homogeneous loss distribution (plus an exact ``shift``) restricted to m in
    [m_lo, m_hi], atoms at ``shift + (2 m - k) eps`` listed as integers m - m_lo in units of
    2 eps (exact gaps whatever k), masses scaled by a power of two (``log2_scale``).  The
    mass above m_hi is bounded and charged as slack (with ``slack``, an unscaled absolute
    amount); the atoms below m_lo are omitted, so H(x) is exact for x >= the loss of m_lo - 1."""
    _memory_budget().need(WINDOW_BYTES * (m_hi - m_lo + 1), f"a window of {m_hi - m_lo + 1:,} binomial atoms "
                          f"(k={k})", ExactTooLarge)
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


def _chernoff_m(k: int, eps: float, log_tail: float) -> int:
    """The least m (plus one) with the Chernoff bound P0[M >= m] <= e^log_tail for
    M ~ Bin(k, expit(eps)) (:func:`optcomp._cgf.binomial_quantile`); a window heuristic:
    correctness never rests on it -- the callers check the rigorous tail bound."""
    log_tail = min(log_tail, math.log(0.5))
    return min(k, binomial_quantile(k, float(log_expit(eps)), float(log_expit(-eps)), log_tail) + 1)


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
    m_root = _chernoff_m(k, eps, log_t + math.log(4.0))
    # the root lies at most one unit of loss (1/(2 eps) atoms) below m_root, and in practice
    # within a few standard deviations (a narrower first guess: the callers widen on
    # WindowTooNarrow, so this only decides the speed -- tiny eps at k = 10^12 would
    # otherwise list 10^7 deep-tail atoms)
    m_lo = max(m_floor, m_root - int(math.ceil(min(1.0 / (2.0 * eps), 2.0 * k, 3.0 * sd + 64.0) + sd)) - 2)
    m_hi = min(k, max(_chernoff_m(k, eps, log_t + math.log(_TAIL * 2.0**-8)) + 2, m_lo + 64))
    return m_floor, m_lo, m_hi


def _reach(x: float, eps: float, k: int, shift: Fraction) -> float:
    """f >= 1 - e^{y - top} for every y >= x: every loss is at most top = shift + k eps, so a
    unit of mass charged at +inf adds at most f to H(y) -- the truncated tails of a window of
    tiny eps count ~top, not 1 (BlackBox(1e-300) x 10^12: H ~ 4e-295, a tail below 2^-50 of
    H as a whole mass took ~40 standard deviations, beyond the memory budget)."""
    return min(1.0, max(0.0, up(-math.expm1(down(x - _to_float(shift + Fraction(eps) * k, True), 1)), LIBM_ULPS + 1)))


def _homogeneous_epsilon(eps: float, k: int, t: float, shift: Fraction = Fraction(0), slack: float = 0.0,
                         upward: bool = True) -> float:
    """Least x >= 0 with H(x) <= t for k identical mechanisms (plus an exact shift): rounded
    up (``upward``) or a certified lower bound."""
    f = _reach(0.0, eps, k, shift)  # (x >= 0; the root needs P0[L > x] >= t/f: the window's aim)
    m_floor, m_lo, m_hi = _homogeneous_window(eps, k, t if f >= 1.0 else min(1.0, t / max(f, 1e-300)))
    if shift:
        m_floor = 0  # the shift may move negative-loss atoms above 0
    scale = _scale_for(t)
    while True:
        # masses in double precision: the root moves by (relative mass error) x H / |H'|,
        # below 1e-12 x the root wherever the masses are deep in the tail (H / |H'| is then
        # the mean excess of the loss over x, small against x); small distributions whose
        # root sits where H is flat are settled in 40 digits by the caller
        dist = binomial_window(eps, k, m_lo, m_hi, shift, slack, scale, refine=False)
        tail = _binomial_tail(eps, k, m_hi, dist.p0)
        if f < 1.0:  # (the tail at +inf counts f of its mass)
            tail = up(tail * f, 1)
            dist = replace(dist, slack=up(tail + up(math.ldexp(slack, dist.log2_scale), 1), 1), _cache={})
        # the truncated tail against 2^-50 t, both in the window's scaled units (no underflow)
        if tail > math.ldexp(t, dist.log2_scale) * _TAIL and m_hi < k:
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
    return _geometric(float(top[0]), r)


def _homogeneous_excess(eps: float, k: int, x: float, shift: Fraction = Fraction(0), slack: float = 0.0,
                        upward: bool | None = True):
    """Upper (or lower) bound on H(x) for k identical mechanisms (plus an exact shift);
    ``upward=None``: both, (lower, upper), from one window (the upper bound's).

    The window starts at the first atom above x, or -- when that lies far below the bulk
    (eps large, k huge) -- at m_cut (first guess 12 standard deviations below the mean,
    widened while its tail exceeds 2^-50 of H), the atoms between being charged with their whole
    mass (a geometric bound on the lower tail) for the upper bound and dropped for the
    lower bound; it ends where the upper tail is below 2^-50 of H."""
    bulk = _excess_below_bulk(eps, k, x, shift)
    if bulk is not None:
        return bulk if upward is None else bulk[1] if upward else bulk[0]
    # first atom strictly above x: shift + (2m - k) eps > x
    rel = (Fraction(x) - shift) / Fraction(eps)
    m_first = min(max(math.floor((k + rel) / 2) - 1, 0), k)
    p = 1.0 / (1.0 + math.exp(-eps))
    mean = k * p
    sd = math.sqrt(k * p * (1.0 - p)) + 1.0
    m_cut = max(m_first, int(mean - 12.0 * sd) - 64)  # widened below when its tail matters
    near = math.log(0.5) if m_first < mean else float(binomial_log_pmf(eps, k, np.array([min(m_first + 1, k)]))[0][0])
    m_hi = min(k, max(m_cut + 64, _chernoff_m(k, eps, near + math.log(_TAIL * 2.0**-8)) + 2))
    f = _reach(x, eps, k, shift)  # (a unit of mass at +inf adds at most f to H(x))
    while True:
        dist = binomial_window(eps, k, m_cut, m_hi, shift, slack)
        low = _low_tail(eps, k, m_cut, dist.log2_scale) if m_cut > m_first else 0.0
        if f < 1.0:
            tail = _binomial_tail(eps, k, m_hi, dist.p0)
            dist = replace(dist, slack=up(up(tail * f, 1) + up(math.ldexp(slack, dist.log2_scale), 1), 1), _cache={})
            low = up(low * f, 1)
        lower = dist
        if upward is not False:
            dist = replace(dist, slack=dist.slack + low, exact_from=-math.inf, _cache={})
        xx = max(x, dist.exact_from)
        h = dist.excess(xx) if upward is not False else dist.excess_lower(xx)
        low_true = math.ldexp(low, -dist.log2_scale)
        if m_cut > m_first and low_true > _TAIL * max(h, 1e-300):
            m_cut = max(m_first, m_cut - max(64, 2 * (m_hi - m_cut)))
            continue
        scale = float(np.max(dist.p0[-min(dist.p0.size, 3):])) if m_hi < k else 0.0
        if m_hi >= k or dist.tail_slack() - slack - low_true <= _TAIL * max(h, 1e-300) or scale == 0.0:
            # (the lower bound of any window is one: the atoms it omits only raise H)
            return (lower.excess_lower(max(x, lower.exact_from)), h) if upward is None else h
        m_hi = min(k, m_hi + max(64, m_hi - m_cut))


def _product_below_bulk(groups, shift: Fraction, x: float):
    """:func:`_excess_below_bulk` for a product of groups: the group of the largest mean
    loss against the others' whole range S = sum_j c_j eps_j (their loss lies in [-S, S]):
    P0[L <= x] <= P0[L_big <= x + S] and e^x Q0[L > x] <= e^x Q0[L_big > x - S], so 1 - H(x)
    is bounded by the big group's two tails at x + S and x - S (with e^{x - shift} as
    there).  None unless those make H(x) 1 to within 2^-50."""
    if len(groups) < 2:
        return None
    j = max(range(len(groups)), key=lambda i: groups[i][1] * groups[i][0] * math.tanh(groups[i][0] / 2.0))
    spread = sum((Fraction(g[0]) * g[1] for i, g in enumerate(groups) if i != j), Fraction(0))
    return _excess_below_bulk(groups[j][0], groups[j][1], x, shift, spread)


def _excess_below_bulk(eps: float, k: int, x: float, shift: Fraction = Fraction(0), spread: Fraction = Fraction(0)):
    """(lower, 1.0) on H(x) for k identical mechanisms (plus an exact shift) when x lies so far
    below the bulk of the loss that H(x) is 1 to within 2^-50, else None -- two tails instead
    of a window of ~20 standard deviations (10^7 atoms at k = 10^12).

    Every atom m >= m_a (the first with loss shift + (2m - k) eps > x) counts in full:
    H(x) = P0[M >= m_a] - e^{x - shift} Q0[M >= m_a], Q0(m) = P0(m) e^{-(2m - k) eps} the
    pmf of Bin(k, 1 - p), so Q0[M >= m_a] = P0[M <= k - m_a] (MV Thm 1.5's binomial read
    from both ends); both lower tails are bounded geometrically (:func:`_low_tail`), so
    1 - H(x) <= P0[M < m_a] + e^{x - shift} P0[M < k - m_a + 1].  The mass of the big
    groups away from the shift only lowers H by a relative e^-800 (charged nowhere: below
    every float, as in :func:`_homogeneous_excess`).  ``spread`` S >= 0: other losses in
    [-S, S] beside these (:func:`_product_below_bulk`): the P-tail is taken at x + S, the
    Q-tail at x - S."""
    m_a = math.floor((k + (Fraction(x) + spread - shift) / Fraction(eps)) / 2) + 1
    m_q = math.floor((k + (Fraction(x) - spread - shift) / Fraction(eps)) / 2) + 1
    if not (0 < m_a <= k and 0 < m_q <= k):
        return None
    z = _to_float(Fraction(x) - shift, True)
    if not z < 1e5:
        return None
    n2 = max(0, math.ceil(z / math.log(2.0) * (1.0 + 1e-12)) + 1)  # e^{x - shift} <= 2^n2
    below = _low_tail(eps, k, m_a, 0)  # P0[M < m_a]
    q_tail = _low_tail(eps, k, k - m_q + 1, n2) if k - m_q + 1 > 0 else 0.0  # 2^n2 Q0[M >= m_q]
    miss = up(below + q_tail, 1)
    if not miss <= _TAIL:
        return None
    return down(1.0 - miss, 1), 1.0


def exact_epsilon_bounds(m: Mechanisms, t_low: float, t_high: float, max_atoms: int = 2**15, log2_scale: int = 0):
    """Certified (lower, upper) on eps_g from the exact producers when the multiset is one
    group or a product of at most ``max_atoms`` atoms, whole or windowed at t_low
    (:func:`window_groups`), else None: the float64 floor.  ``log2_scale`` s > 0: the targets
    are t 2^s (a t below the float range, e.g. delta_g ~ delta_i ~ 1e-200), and a product
    (windowed at t) is listed with its masses scaled by 2^s as well (one group: None)."""
    groups, shift, slack = _split_groups(m)
    if log2_scale:
        if len(groups) < 2 or not t_low > 0.0:
            return None
        groups = window_groups(groups, math.log(t_low) - log2_scale * math.log(2.0), max_atoms)
        if _atom_count(groups, max_atoms) > max_atoms:
            return None
        dist = product_distribution(groups, shift, slack, lower=True, log2_scale=log2_scale)
        return dist.epsilon_lower(t_high, scaled=True), solve_segments(dist, t_low, scaled=True)
    if not groups:  # every eps_i is 0 or >= BIG_EPS: one atom at the exact shift
        dist = _point_mass(shift, slack)
        return dist.epsilon_lower(t_high), solve_segments(dist, t_low)
    if len(groups) == 1:
        eps, n = groups[0]
        return (_homogeneous_epsilon(eps, n, t_high, shift, slack, upward=False),
                _homogeneous_epsilon(eps, n, t_low, shift, slack))
    if _atom_count(groups, max_atoms) > max_atoms and t_low > 0.0:
        groups = window_groups(groups, math.log(t_low), max_atoms)
        if _atom_count(groups, max_atoms) > max_atoms:
            def listed(raised):  # (its lower end is the root checked against the lumps)
                if _atom_count(raised, max_atoms) > max_atoms:
                    return None
                dist = product_distribution(raised, shift, slack, lower=True, log2_scale=_scale_for(t_low))
                return dist, dist.epsilon_lower(t_high)

            near = solved_near_the_root(groups, shift, t_low, listed, root=lambda r: r[1])
            if near is not None:
                return near[1], solve_segments(near[0], t_low)
    if _atom_count(groups, max_atoms) <= max_atoms:
        dist = product_distribution(groups, shift, slack, lower=True, log2_scale=_scale_for(t_low))
        return dist.epsilon_lower(t_high), solve_segments(dist, t_low)
    return None


def exact_excess_bounds(m: Mechanisms, x: float, max_atoms: int = 2**15):
    """Certified (lower, upper) on H(x) from the exact producers (see
    :func:`exact_epsilon_bounds`), or None; a product beyond ``max_atoms`` is windowed at the
    Chernoff estimate of H(x) (:func:`log_excess_guess`), aimed once more at the lower bound
    found when the mass outside the windows exceeds 2^-50 of it, and given up (None) when
    that does not hold either (the bracket would not be the float64 floor)."""
    groups, shift, slack = _split_groups(m)
    if not groups:  # every eps_i is 0 or >= BIG_EPS: one atom at the exact shift
        dist = _point_mass(shift, slack)
        return dist.excess_lower(x), dist.excess(x)
    if len(groups) == 1:
        eps, n = groups[0]
        return _homogeneous_excess(eps, n, x, shift, slack, upward=None)
    if _atom_count(groups, max_atoms) <= max_atoms:
        dist = product_distribution(groups, shift, slack, lower=True)
        return dist.excess_lower(x), dist.excess(x)
    bulk = _product_below_bulk(groups, shift, x)
    if bulk is not None:
        return bulk
    log_h = max(log_excess_guess(groups, shift, x), _LOG_FLOOR)
    for _ in range(2):
        windowed = window_groups(groups, log_h, max_atoms)
        listed = raise_lower_edges(windowed, shift, x)[0]  # (the atoms at or below x need no listing)
        if _atom_count(listed, max_atoms) > max_atoms:
            return None
        dist = product_distribution(listed, shift, slack, lower=True)
        lower = dist.excess_lower(x)
        if window_charges(windowed) <= _TAIL * lower:
            return lower, dist.excess(x)
        if not lower > 0.0 or math.log(lower) >= log_h:
            return None
        log_h = max(math.log(lower), _LOG_FLOOR)
    return None


_LOG_FLOOR = math.log(1e-300)  # windows are never aimed below this H (the delta direction's floor)


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
    """(losses, lower masses or None, upper masses, unlisted mass, sort order) of the product
    of the binomial factors ``groups``, masses x 2^log2_scale (carried by the first factor).

    A factor (eps, n) is listed whole; a windowed one (eps, n, lo, hi) (see
    :func:`window_groups`) lists m in [lo, hi] only.  Its mass below lo is lumped into the
    upper mass of its atom lo (every such outcome moves up to a larger loss: an upper bound
    on H) and dropped from the lower masses; its mass above hi, bounded by the geometric
    series of :func:`_binomial_tail`, is not listed: it is added to the unlisted mass (put
    at +inf by upper bounds -- the true mass of every outcome with M_j > hi_j is at most
    P0[M_j > hi_j] times the other factors' true total, 1 -- and dropped by lower bounds),
    together with the mass lost to underflow."""
    loss = np.zeros(1)
    p_lo = np.ones(1) if lower else None
    p_up = np.ones(1)
    cut = 0.0  # the windows' upper tails, x 2^log2_scale
    for i, g in enumerate(groups):  # the first factor carries the 2^s scale
        eps, n = g[0], g[1]
        lo, hi = _range(g)
        s = log2_scale if i == 0 else 0
        fl, flo, fup, _, _ = binomial_atoms(eps, n, lo, hi, s)
        if lo > 0:
            # (a window raised above the mode, :func:`raise_lower_edges`: its whole mass, <= 1)
            fup = fup.copy()
            fup[0] = up(float(fup[0]) + min(_low_tail(eps, n, lo, s), math.ldexp(1.0, s)), 1)
        if hi < n:
            cut = up(cut + _upper_tail(eps, n, hi, log2_scale), 1)
        loss = (loss[:, None] + fl[None, :]).ravel()
        if lower:
            p_lo = (p_lo[:, None] * np.maximum(flo, 0.0)[None, :]).ravel()
        p_up = (p_up[:, None] * fup[None, :]).ravel()
    # (one factor: its atoms ascend already -- no sort of a window of millions)
    order = np.arange(loss.size) if len(groups) == 1 else np.argsort(loss, kind="stable")
    products = 2.0 * len(groups) * UNIT
    if len(groups) != 1:
        loss = loss[order]
        p_up = p_up[order]
        p_lo = p_lo[order] if lower else None
    if lower:
        p_lo = p_lo * (1.0 - products)
    p_up = p_up * (1.0 + products)
    underflow = TINY * int(np.count_nonzero(p_up < 1e-300))  # products may underflow
    return loss, p_lo, p_up, (up(underflow + cut, 1) if cut else underflow), order


def _range(g) -> tuple[int, int]:
    """The listed range [lo, hi] of M for a factor (eps, n) or a window (eps, n, lo, hi)."""
    return (g[2], g[3]) if len(g) > 2 else (0, g[1])


def _upper_tail(eps: float, n: int, hi: int, log2_scale: int) -> float:
    """Bound on 2^s P0[M > hi], M ~ Bin(n, expit(eps)) (:func:`_binomial_tail` from the
    pmf at hi)."""
    if hi >= n:
        return 0.0
    _, top, _ = binomial_masses(eps, n, hi, hi, log2_scale)
    return _binomial_tail(eps, n, hi, top)


def _log_geometric_tail(eps: float, n: int, m: int, upper: bool) -> float:
    """log of a bound on P0[M > m] (``upper``) or P0[M < m]: the pmf at m (its log with its
    error bound, :mod:`optcomp._binomial`) times r/(1 - r), r the pmf ratio at m (the series
    of :func:`_binomial_tail` / :func:`_low_tail`, in log space: no underflow); +inf when
    r >= 1 (m not beyond the mode)."""
    if upper:
        log_r = math.log(n - m) - math.log(m + 1.0) + eps
    else:
        log_r = math.log(m) - math.log(n - m + 1.0) - eps
    if log_r >= -1e-12:
        return math.inf
    lv, le = binomial_log_pmf(eps, n, np.array([m]))
    return float(lv[0] + le[0]) + log_r - math.log(-math.expm1(log_r)) + 1e-9


def _window_edge(eps: float, n: int, log_tail: float, upper: bool) -> int:
    """The window's upper edge hi with P0[M > hi] <= e^log_tail (``upper``), or its lower
    edge lo with P0[M < lo] <= e^log_tail: first guessed by the Chernoff quantile (aimed
    below by the geometric series' factor ~ sd), then checked by
    :func:`_log_geometric_tail` and moved out until it holds (n or 0 at worst)."""
    lp, lq = float(log_expit(eps)), float(log_expit(-eps))
    p = math.exp(lp)
    aim = log_tail - math.log(math.sqrt(n * p * (1.0 - p)) + 2.0)
    for _ in range(8):
        if upper:  # P0[M >= m] <= e^aim at the quantile m, so P0[M > m] is too
            m = min(n, binomial_quantile(n, lp, lq, aim))
            if m >= n:
                return n
        else:  # n - M ~ Bin(n, q): P0[n - M >= j] <= e^aim, so P0[M < n - j] is too
            m = max(0, n - binomial_quantile(n, lq, lp, aim))
            if m <= 0:
                return 0
        if _log_geometric_tail(eps, n, m, upper) <= log_tail:
            return m
        aim -= 16.0
    return n if upper else 0


def window_groups(groups, log_t: float, limit: int | None = None):
    """The factors (eps, n) of a product of binomials narrowed to windows (eps, n, lo, hi) of
    their M ~ Bin(n, expit(eps)) whose 2 len(groups) tails P0[M < lo], P0[M > hi] each weigh
    at most _TAIL e^log_t / (2 len(groups)) (a factor kept whole stays (eps, n)).  The mass
    outside is charged by :func:`_product` (lumped at lo, put at +inf above hi; dropped for
    lower bounds), so the bracket widens by at most 2^-50 e^log_t: with e^log_t the target
    t, or an estimate of H(x) that the caller checks against the H found
    (:func:`window_charges`), the products stay effectively
    exact while listing, e.g., 12 x 6 atoms instead of (10^7 + 1)^2 (eps 20 and 30, 10^7
    each, delta_g = 1e-9: n - M is ~Poisson(0.02)).  Once the atoms of the windows so far
    exceed ``limit``, the remaining factors are kept whole (every factor has an atom: the
    product is out of reach anyway; 10^6 distinct eps_i cost ~50 windows, not 10^6)."""
    log_each = log_t + math.log(_TAIL / (2 * len(groups)))
    out = []
    size = 1
    for g in groups:
        eps, n = g[0], g[1]
        if limit is not None and size > limit:
            out.append(g)
            continue
        lo, hi = _window_edge(eps, n, log_each, False), _window_edge(eps, n, log_each, True)
        out.append((eps, n, lo, hi) if lo > 0 or hi < n else (eps, n))
        size *= hi - lo + 1
    return out


def raise_lower_edges(groups, shift: Fraction, x: float):
    """(groups, threshold): each factor's listed range [lo, hi] with lo raised to the largest
    m for which every outcome with M_j <= m has loss at most x - margin, whatever the other
    factors' listed atoms (shift + (2m - n_j) eps_j + sum_{i != j} (2 hi_i - n_i) eps_i, in
    rationals); threshold is the largest such loss over the raised factors (None: none raised).

    :func:`_product` lumps a factor's mass below lo at lo (the upper masses; dropped from the
    lower ones), so those outcomes sit at losses <= threshold: for every y >= threshold they
    add nothing to H(y) = sum_{l > y} m_l (1 - e^{y - l}), upper or lower -- H there is what
    the unraised windows give, from the atoms above alone (a window of 10^12 mechanisms of
    1e-6 starts near the root instead of 9 standard deviations below the mean).  The margin
    (1e-9 (1 + |x|), at least 8 times the float positions' error bound) keeps the lumped
    atoms clear of the error bands in which a distance is widened."""
    margin = max(1e-9 * (1.0 + abs(x)), 8.0 * _position_error(groups))
    fx = Fraction(x) - Fraction(margin) - shift
    tops = [Fraction(g[0]) * (2 * _range(g)[1] - g[1]) for g in groups]
    total = sum(tops, Fraction(0))
    out, threshold = [], None
    for g, top in zip(groups, tops):
        eps, n = g[0], g[1]
        lo, hi = _range(g)
        rest = total - top
        m = math.floor((n + (fx - rest) / Fraction(eps)) / 2)  # (2m - n) eps + rest <= fx
        if m <= lo:
            out.append(g)
            continue
        m = min(m, hi)
        out.append((eps, n, m, hi))
        loss = shift + Fraction(eps) * (2 * m - n) + rest
        threshold = loss if threshold is None else max(threshold, loss)
    return out, threshold


def solved_near_the_root(groups, shift, t: float, solve, root=lambda r: r):
    """``solve(raised)`` of the factors with their lower edges raised to a guess under the
    root of H(x) = t (:func:`chernoff_point`, :func:`raise_lower_edges`), kept only when its
    root (``root(result)``) is at or past the lumps' threshold, else None (no guess, nothing
    raised, ``solve`` returned None, or the root fell among the lumps).  Whatever the guess,
    the raised factors' answers are certified (lumping raises the upper H, dropping lowers
    the lower one); from the threshold on H is the unraised windows' own, so a root there is
    theirs too."""
    guess = chernoff_point(groups, shift, t)
    if guess is None:
        return None
    raised, threshold = raise_lower_edges(groups, shift, guess)
    if threshold is None:
        return None
    result = solve(raised)
    if result is None or Fraction(root(result)) < threshold:
        return None
    return result


def chernoff_point(groups, shift, t: float) -> float | None:
    """A guess under the root of H(x) = t of a product of binomials: x_c - 2 sd, (bisection on the Chernoff bound of
    :func:`log_excess_guess`; sd of the loss sum_j 4 n_j eps_j^2 p_j (1 - p_j)), None
    when it is not above the loss's mean (nothing to raise).  x_c, where the Chernoff bound of
    P0[L > x] reaches t, lies above the root (H(x) <= P0[L > x]); the root lay 0.4-1 sd below
    x_c for 10^6-10^12 mechanisms beside a few.  A guess only: the callers check it."""
    e = np.array([g[0] for g in groups], dtype=float)
    c = np.array([float(g[1]) for g in groups])
    p = 1.0 / (1.0 + np.exp(-e))
    mean = float(np.sum(c * e * (2.0 * p - 1.0))) + float(shift)
    sd = float(np.sqrt(np.sum(4.0 * c * e * e * p * (1.0 - p))))
    lo, hi = mean, float(np.sum(c * e)) + float(shift)
    log_t = math.log(t)
    if not lo < hi:
        return None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if log_excess_guess(groups, shift, mid) > log_t:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-3 * sd:
            break
    guess = hi - 2.0 * sd
    return guess if guess > mean else None


def window_charges(groups) -> float:
    """Bound on the (unscaled) mass outside the windows of ``groups`` (both tails of every
    windowed factor): what :func:`_product` lumps or leaves unlisted, at most."""
    total = 0.0
    for g in groups:
        lo, hi = _range(g)
        if lo > 0:
            total = up(total + _low_tail(g[0], g[1], lo, 0), 1)
        total = up(total + _upper_tail(g[0], g[1], hi, 0), 1)
    return total


def log_excess_guess(groups, shift: Fraction, x: float) -> float:
    """log of the Chernoff bound P0[L > x] <= e^{K(theta) - theta (x - shift)} at the tilt
    theta >= 0 centring the loss at x (0 when x is below the mean): an estimate from above
    of log H(x), only to aim the windows of the delta direction."""
    e = np.array([g[0] for g in groups], dtype=float)
    c = np.array([g[1] for g in groups], dtype=float)
    y = float(Fraction(x) - shift)
    theta = tilt_for(e, y, c)
    if theta <= 0.0:
        return 0.0
    k = float(np.sum(c * cgf_terms(log_expit(e), log_expit(-e), e, theta)))
    return min(0.0, k - theta * y)


def _position_error(groups) -> float:
    """Bound on |float loss - exact loss| of the atoms built by :func:`_product`: each factor
    loss f_i = (2m - n) eps is one rounding (<= u |f_i| <= u M_i, M_i = max(|2 lo - n|,
    |2 hi - n|) eps over the factor's listed range [lo, hi]: a window of 10^6 mechanisms of
    0.01 lists losses up to ~400, not 10^4) -- none when every multiple j eps, |j| <= M_i / eps,
    is a float (j times eps's odd mantissa below 2^53: one black box, ±eps) -- and each of the
    g - 1 sums another (the first adds to 0; <= u times the partial sum, <= u sum M): at most
    u (sum over inexact factors of M_i + (g - 1) sum_i M_i), g = len(groups) (charged with
    1e-12 to spare for the products' own rounding).  (An exact black box beside 2.3 10^7 of
    1e-8 was charged u at its ±1, 1e-11 of H at eps_g ~1 + 1.5e-4: method='optimal' was that
    far off its 1e-12.)"""
    total = inexact = 0.0
    for g in groups:
        lo, hi = _range(g)
        j = max(abs(2 * lo - g[1]), abs(2 * hi - g[1]))
        m = j * g[0]
        total += m
        if j * Fraction(g[0]).numerator >= 2**53:
            inexact += m
    return UNIT * (inexact + max(len(groups) - 1, 0) * total) * (1.0 + 1e-12)


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


def _atom_count(groups, cap: int | None = None) -> int:
    """Atoms listed by :func:`_product` (windows counted as windows); with ``cap``, any
    value above it once the count passes it (the product of 10^6 factors of two atoms is a
    million-bit integer: 13 s)."""
    return _count((_range(g)[1] - _range(g)[0] + 1 for g in groups), cap)


def _full_count(groups, cap: int | None = None) -> int:
    """Atoms of the whole product (windows ignored); ``cap`` as for :func:`_atom_count`."""
    return _count((g[1] + 1 for g in groups), cap)


def _count(widths, cap: int | None) -> int:
    total = 1
    for w in widths:
        total *= w
        if cap is not None and total > cap:
            break
    return total


def _point_mass(shift: Fraction, slack: float) -> LossDistribution:
    """The loss distribution of mechanisms that are all eps = 0 or eps >= BIG_EPS: one atom
    at the exact ``shift`` with mass <= 1 and >= 1 - slack (the rest, <= slack, at +inf)."""
    return LossDistribution(np.zeros(1), np.ones(1), slack=slack, origin=shift,
                            p0_lower=np.array([max(0.0, down(1.0 - slack, 1))]))


def _exact_positions(groups, order):
    """A callable giving the exact (rational) loss of atom i of :func:`_product`'s listing."""
    shape = [_range(g)[1] - _range(g)[0] + 1 for g in groups]
    fe = [(Fraction(g[0]), g[1], _range(g)[0]) for g in groups]

    def exact(i: int) -> Fraction:
        idx = np.unravel_index(int(order[i]), shape)
        return sum((f * (2 * (lo + int(mi)) - n) for (f, n, lo), mi in zip(fe, idx)), Fraction(0))

    return exact
