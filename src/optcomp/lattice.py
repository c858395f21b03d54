r"""The certified lattice algorithm: lower and upper bounds on OptComp and on delta_opt.

The default algorithm (``algorithm="fast"``) behind MV Theorem 1.7 in
:mod:`optcomp.approx`.  :func:`lattice_bounds` returns certified bounds

    lower  <=  OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g)  <=  upper

refined until ``upper - lower <= tol``, so OptComp(..., delta_g) <= upper <=
OptComp(..., delta_g) + tol, which implies MV Thm 1.7's guarantee OptComp(...,
e^{-eta/2} delta_g) + eta whenever tol <= eta (OptComp decreases in delta_g).
:func:`lattice_delta_bounds` does the same in the delta direction.  Both bounds follow from
data processing, exactly; only their evaluation is numerical, and it is certified in
floating point by the producer that computes it.

This module is the outline; each step is one call.

1. **split** (:mod:`optcomp._splits`, exact by monotonicity) -- groups with eps_i >= 800 (or
   whose other outcomes have negligible mass) are a deterministic shift, composed as a
   rational offset; groups of tiny eps summing to sigma <= tol/8 are left out (the rest is
   a lower bound, the rest shifted by sigma an upper one);
2. **enumerate** (:mod:`optcomp._exact.atoms`) -- one group (binomial) or a small product:
   the distribution listed exactly;
3. **commensurable** (:mod:`optcomp._lattice.commensurable`) -- every eps_i an integer multiple
   of a common unit up to float rounding: composed exactly on that lattice, from both sides;
4. **lattice, refined** (:mod:`optcomp._refine`) -- grouped lattice passes
   (:func:`~optcomp._lattice.grouped.grouped_pass`: refinement and garbling per leaf, a tilted
   FFT tree cut to certified windows) at steps refined until the bracket meets ``tol``;
   a size limit raises :class:`ApproxTooCostly` carrying the best bracket (its upper end the
   certified Chernoff bound when smaller).

Mechanisms beyond black boxes (:func:`mechanism_bounds`, :func:`mechanism_delta_bounds`):
Gaussians alone by their closed form, one mechanism in one copy by its certified profile,
else each *global* direction (:mod:`optcomp._directions`) from the ends of the law, then the
lattice of the mechanisms that matter, and the larger of the two directions (narrowed by basic
composition of the mechanisms' profiles where the lattice cannot finish).

Every producer returns a :class:`Bracket` -- its certified :class:`Bounds` with the path
taken and the passes run -- or None (out of its reach); the drivers only choose the
producer, the step, the tilt and when to stop, and return the Bracket that answered (a
caller's ``info``, a :class:`BracketInfo`, is filled from it).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ._cgf import chernoff_guess, tilt_for
from ._inputs import Mechanisms
from ._rounding import dot_dir, down, exact_dir, up
from ._types import MAX_POINTS, ApproxTooCostly, Bounds, Bracket, BracketInfo, ExactTooLarge, combined
from ._lattice.commensurable import commensurable_bounds, commensurable_excess_bounds
from ._lattice.passes import LatticePass, lattice_pass
from ._lattice.workload import Workload
from ._laws import REACH
from .gdp import gaussians_alone
from .gdp import delta_bounds as gdp_delta, epsilon_bounds as gdp_epsilon
from .loss import delta_from_excess, residual_target, solve_segments
from ._exact.atoms import BIG_EPS, UNDERFLOW_SCALE, _TAIL, _point_mass, _split_groups, exact_epsilon_bounds, \
    exact_excess_bounds
from ._directions import basic_delta, basic_epsilon, delta_direction, direction_workloads, epsilon_direction, \
    profile_epsilon, single_mechanism, worst_direction
from ._refine import DELTA_FLOAT_GAP, DELTA_FLOOR, lattice_delta, lattice_epsilon, with_bracket
from ._splits import log_tail_bound, plus_shift, shifted_excess, split_big, split_negligible

__all__ = [
    "MAX_POINTS",
    "DELTA_FLOOR",
    "DELTA_FLOAT_GAP",
    "Bounds",
    "Bracket",
    "ApproxTooCostly",
    "BracketInfo",
    "LatticePass",
    "lattice_bounds",
    "lattice_delta_bounds",
    "lattice_pass",
    "tilt_for",
    "chernoff_guess",
    "mechanism_bounds",
    "mechanism_delta_bounds",
]

ENUMERATED_ATOMS = 2**15  # up to this many atoms, list the distribution exactly (no lattice)
NEGLIGIBLE_TOL = 0.125  # groups of tiny eps summing to <= this x tol are bounded by monotonicity
DELTA_SHIFT_CAP = 2.0**-70  # slack of the nearly deterministic groups tried in the delta direction


def _enumerated(run) -> Bracket | None:
    """The exact producers' (lower, upper) as a :class:`Bracket`, or None when out of their
    reach (too many atoms, a binomial window beyond the memory budget: the lattice paths
    follow)."""
    try:
        exact = run()
    except ExactTooLarge:
        return None
    return None if exact is None else Bracket(*exact, "enumerated")


def _beyond_listing(vals, log_t: float) -> bool:
    """True when the exact producers cannot list the product of the groups ``vals`` (eps > 0,
    ascending) within ENUMERATED_ATOMS atoms, aimed at a target e^log_t (<= 1; 0 for any):
    at least bit_length(ENUMERATED_ATOMS) of its factors keep two atoms or more.

    A factor's window (:func:`~optcomp._exact.atoms.window_groups`) is one atom m only if
    its two tails, each at most _TAIL e^log_t / (2 G) for G factors, hold all its mass off
    m, which is at least 1 - max pmf >= P0[s = -1] = expit(-eps) >= e^-eps / 2 (the
    largest atom of a sum of independent terms is at most that of one term).  Raising the
    lower edges (:func:`~optcomp._exact.atoms.raise_lower_edges`) makes a factor one atom
    only when the largest listed loss of the whole product is below the guess, and then
    every factor at once (one atom, at or below the guess); that guess lies under the
    Chernoff point, where the windows' tops (2^-50 deeper in the tail) do not, so the
    product stays beyond the listing (an argument, not a check: were it wrong, the lattice
    would answer in place of the listing, its bracket certified as well).  Saves the
    producers' time (~3.7 s for 10^5 distinct eps, in rationals) where they give up."""
    small = vals[vals < BIG_EPS]
    need = max(2, ENUMERATED_ATOMS.bit_length())  # 2^need > ENUMERATED_ATOMS
    if small.size < need:
        return False
    log_each = min(log_t, 0.0) + math.log(_TAIL / (2 * small.size))
    two = small < -(log_each + 2.0 * math.log(2.0) + 1.0)  # expit(-eps) > 2 e^log_each, with room
    return int(np.count_nonzero(two)) >= need


def _reported(b: Bracket, info: BracketInfo | None) -> Bracket:
    """A driver's answer, its diagnostics copied into the caller's ``info`` when given."""
    if info is not None:
        info.fill(b)
    return b


# --------------------------------------------------------------------------- black boxes, eps direction


def lattice_bounds(m: Mechanisms, delta_g: float, tol: float, *, max_points: int = MAX_POINTS,
                   info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bracket:
    """Certified (lower, upper) on OptComp(m, delta_g) with upper - lower <= tol (the module's
    outline), as a :class:`Bracket` (``info``, if given, receives its diagnostics).  Raises
    :class:`ApproxTooCostly` (with the best bracket) when the lattice would exceed
    ``max_points`` points or the memory budget, or stops improving."""
    kw = dict(max_points=max_points, workers=workers, progress=progress)
    if m.others:  # mechanisms beyond black boxes: every one a leaf
        return _reported(_mechanism_epsilon(m, m.others, delta_g, tol, **kw), info)
    return _reported(_black_box_epsilon(m, delta_g, tol, **kw), info)


def _black_box_epsilon(m: Mechanisms, delta_g: float, tol: float, **kw) -> Bracket:
    """:func:`lattice_bounds` of black boxes: the residual target, the deterministic groups
    split off, then :func:`_epsilon_bounds_t`."""
    t_low = residual_target(m, delta_g)  # t = 1 - (1 - delta_g)/prod(1 - delta_i), both ways
    if t_low < 0.0:
        return Bracket(math.inf if residual_target(m, delta_g, round_up=True) < 0.0 else 0.0, math.inf, "closed form")
    t_high = residual_target(m, delta_g, round_up=True)
    vals, cnts = m.positive()
    if vals.size == 0:
        return Bracket(0.0, 0.0, "closed form")
    top = dot_dir(cnts, vals, True)
    if t_high == 0.0:  # exactly t = 0: H(x) <= 0 iff x >= the largest loss sum eps_i
        return Bracket(dot_dir(cnts, vals, False), top, "closed form")
    if t_low <= 0.0:
        # t > 0 below the float range (delta_g ~ 1 - prod(1 - delta_i) ~ 1e-200): the product
        # windowed at t, its masses and t scaled by 2^UNDERFLOW_SCALE (the lattice's float64
        # masses cannot resolve t: lattice_epsilon says so when this does not answer)
        s = UNDERFLOW_SCALE
        exact = _enumerated(lambda: exact_epsilon_bounds(m, residual_target(m, delta_g, log2_scale=s),
                                                         residual_target(m, delta_g, round_up=True, log2_scale=s),
                                                         ENUMERATED_ATOMS, s))
        if exact is not None:
            return exact._replace(upper=min(exact.upper, top))
    small, shift, big_slack = split_big(m, max(t_low, 0.0) * 2.0**-40)
    if small is None:
        return _epsilon_bounds_t(m, t_low, t_high, tol, **kw)
    # L = shift + L_s except with probability <= big_slack (then anywhere): H(x) <=
    # H_s(x - shift) + big_slack and H(x) >= (1 - big_slack) H_s(x - shift)
    t_small = up(t_high / down(1.0 - big_slack, 1), 1)
    if small.eps.size == 0:  # every group (nearly) deterministic: one atom at the shift
        dist = _point_mass(shift, big_slack)
        return Bracket(dist.epsilon_lower(t_small), min(solve_segments(dist, t_low), top), "enumerated")

    def shifted(b: Bounds) -> Bounds:
        return b._replace(lower=plus_shift(b.lower, shift, False), upper=min(plus_shift(b.upper, shift, True), top))

    try:
        return shifted(_epsilon_bounds_t(small, down(t_low - big_slack, 1), t_small, tol, **kw))
    except ApproxTooCostly as exc:
        raise ApproxTooCostly(str(exc), None if exc.bounds is None else shifted(exc.bounds)) from None


def _epsilon_bounds_t(m: Mechanisms, t_low: float, t_high: float, tol: float, **kw) -> Bracket:
    """:func:`lattice_bounds` at the residual target t (``t_low`` <= t <= ``t_high``):
    negligible groups split off, then enumerated, commensurable, lattice -- the first that
    answers."""
    vals, cnts = m.positive()
    top = dot_dir(cnts, vals, True)
    rest, sigma = split_negligible(vals, cnts, tol * NEGLIGIBLE_TOL)
    if rest is not None:  # tiny-eps groups (their tilt would be astronomical: 1e-9 beside 20)
        def shifted(b: Bounds) -> Bounds:
            return b._replace(upper=min(up(b.upper + sigma, 1) if math.isfinite(b.upper) else b.upper, top))

        try:
            return shifted(_epsilon_bounds_t(rest, t_low, t_high, tol - 2.0 * sigma, **kw))
        except ApproxTooCostly as exc:  # its bracket is the rest's: shifted like a result
            if exc.bounds is None:
                raise
            raise with_bracket(exc, shifted(exc.bounds), "eps_g") from None
    exact = None if _beyond_listing(vals, math.log(t_low) if t_low > 0.0 else 0.0) else \
        _enumerated(lambda: exact_epsilon_bounds(m, t_low, t_high, ENUMERATED_ATOMS))
    if exact is not None:
        return exact._replace(upper=min(exact.upper, top))
    comm = commensurable_bounds(m, t_low, t_high, enough=tol, **kw)
    if comm is not None and comm.gap <= tol:
        return comm._replace(upper=min(comm.upper, top))
    return lattice_epsilon(Workload(vals, cnts), t_low, t_high, tol, top, **kw)


# --------------------------------------------------------------------------- black boxes, delta direction


def lattice_delta_bounds(m: Mechanisms, eps_g: float, tol: float, *, max_points: int = MAX_POINTS,
                         info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bracket:
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
    times lambda = |d log H/dx| (~theta at the tilt; :func:`optcomp._refine.lattice_delta`),
    usually the only pass.  (Only the cost depends on these choices, never the bounds.)
    A :class:`Bracket`, as :func:`lattice_bounds`."""
    kw = dict(max_points=max_points, workers=workers, progress=progress)
    if m.others:  # mechanisms beyond black boxes: every one a leaf
        return _reported(_mechanism_delta(m, m.others, eps_g, tol, **kw), info)
    return _reported(_black_box_delta(m, eps_g, tol, **kw), info)


def _black_box_delta(m: Mechanisms, eps_g: float, tol: float, **kw) -> Bracket:
    """:func:`lattice_delta_bounds` of black boxes: the deterministic groups split off (twice
    at most), then :func:`_delta_bounds_x`."""
    vals, cnts = m.positive()
    if vals.size == 0 or eps_g >= dot_dir(cnts, vals, True):
        return Bracket(delta_from_excess(m, 0.0, round_up=False), delta_from_excess(m, 0.0), "closed form")
    split = split_big(m, DELTA_SHIFT_CAP)
    if split[0] is not None and split[2] > _split_groups(m)[2]:
        # groups of eps >> log c shifted too: kept when their slack does not matter
        b = _delta_split(m, eps_g, tol, *split, **kw)
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
        split = split_big(m)
    return _delta_split(m, eps_g, tol, *split, **kw)


def _delta_split(m: Mechanisms, eps_g: float, tol: float, small, shift: Fraction, slack: float, **kw) -> Bracket:
    """:func:`lattice_delta_bounds` with the deterministic groups (``shift``, ``slack``) split
    off (``small`` None: nothing split; :func:`~optcomp._splits.shifted_excess`)."""
    if small is None:
        def to_delta(lo: float, hi: float) -> Bounds:
            return Bounds(delta_from_excess(m, lo, round_up=False), delta_from_excess(m, hi))

        return _delta_bounds_x(m, eps_g, tol, to_delta, **kw)
    z, to_delta = shifted_excess(m, eps_g, shift, slack)
    if small.eps.size == 0:  # every group (nearly) deterministic: H_s is the point mass at 0
        dist = _point_mass(Fraction(0), 0.0)
        return Bracket(*to_delta(dist.excess_lower(z), dist.excess(z)), "enumerated")
    return _delta_bounds_x(small, z, tol, to_delta, **kw)


def _delta_bounds_x(m: Mechanisms, eps_g: float, tol: float, to_delta, **kw) -> Bracket:
    """:func:`lattice_delta_bounds` from bounds (lo, hi) on H(eps_g), which ``to_delta``
    turns into certified delta bounds: the Markov tail, negligible groups split off, then
    enumerated, commensurable, lattice -- the first that answers."""
    vals, cnts = m.positive()
    if eps_g >= dot_dir(cnts, vals, True):
        return Bracket(*to_delta(0.0, 0.0), "closed form")
    log_tail = log_tail_bound(vals, cnts.astype(float), eps_g)
    if log_tail < math.log(DELTA_FLOOR):  # H(eps_g) <= P0[L > eps_g] below the float floor: no lattice
        return Bracket(*to_delta(0.0, max(up(math.exp(log_tail), 1), 5e-324)), "tail bound")  # H > 0 below the top
    rest, sigma = split_negligible(vals, cnts, tol * NEGLIGIBLE_TOL)
    if rest is not None and eps_g >= 2.0 * sigma:
        # H_rest(x) <= H(x) <= H_rest(x - sigma), each from its own bracket of the rest (a size
        # limit's bracket is of the rest at x: used as a result is)
        parts = []
        for x in (exact_dir(Fraction(eps_g) - Fraction(sigma), False), eps_g):
            try:
                parts.append(_delta_bounds_x(rest, x, tol - 2.0 * sigma, to_delta, **kw))
            except ApproxTooCostly as exc:
                if exc.bounds is None:
                    raise
                parts.append(exc)
        brackets = [b.bounds if isinstance(b, ApproxTooCostly) else b for b in parts]
        failed = [e for e in parts if isinstance(e, ApproxTooCostly)]
        if failed:
            raise with_bracket(failed[0], Bounds(brackets[1].lower, brackets[0].upper), "delta_g") from None
        return combined(brackets[1].lower, brackets[0].upper, brackets)
    exact = None if _beyond_listing(vals, 0.0) else _enumerated(lambda: exact_excess_bounds(m, eps_g, ENUMERATED_ATOMS))
    if exact is not None:  # the float64 floor
        return Bracket(*to_delta(*exact), "enumerated")
    comm = commensurable_excess_bounds(m, eps_g, rel_gap=max(tol, 1e-12), **kw)
    if comm is not None:
        b = Bracket(*to_delta(*comm), comm.path, comm.passes)
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
    return lattice_delta(Workload(vals, cnts), eps_g, tol, to_delta, **kw)


# --------------------------------------------------------------------------- mechanisms


def mechanism_bounds(m: Mechanisms, others, delta_g: float, tol: float, *, max_points: int = MAX_POINTS,
                     info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bracket:
    """Certified (lower, upper) on the optimal eps_g of the black-box pairs ``m`` composed with
    the mechanisms ``others`` ((mechanism, count) pairs of :mod:`optcomp.mechanisms`), with
    upper - lower <= tol: the grouped lattice with each mechanism as a leaf
    (:mod:`optcomp._lattice.workload`), the black-box delta_i through the residual target
    t = 1 - (1 - delta_g)/prod(1 - delta_i) (a delta event is independent of everything
    else: delta(x) = 1 - prod(1 - delta_i)(1 - H(x))).  Gaussians alone: the closed form;
    one mechanism in one copy: its certified profile; else each global direction
    (:func:`~optcomp._directions.epsilon_direction`), the larger first (its lower end floors
    the other), and the larger bracket.  A bracket wider than tol (and than the float floor,
    2^-48 relative) is a size limit (ApproxTooCostly).  A :class:`Bracket`, as
    :func:`lattice_bounds`."""
    return _reported(_mechanism_epsilon(m, others, delta_g, tol, max_points=max_points, workers=workers,
                                        progress=progress), info)


def _mechanism_epsilon(m: Mechanisms, others, delta_g: float, tol: float, **kw) -> Bracket:
    """:func:`mechanism_bounds` (``kw``: max_points, workers, progress)."""
    mu = gaussians_alone(m, others)
    if mu is not None:
        return Bracket(*gdp_epsilon(mu.lower, mu.upper, delta_g), "closed form (GDP)")
    single = single_mechanism(m, others)
    if single is not None:
        b = profile_epsilon(single, delta_g)
        if b is not None:
            return Bracket(*b, "profile")
    # truncation tails: a 2^-44 fraction of the target in all (far inside any tolerance)
    n = sum(int(c) for _, c in others) + 1
    target = max(residual_target(m, delta_g), 0.0)
    tail = min(1e-30, max(1e-300, target * 2.0**-44 / n))
    works = direction_workloads(m, others, tail, min(1e-30, target * 2.0**-44 / n))
    guesses: dict = {}
    if len(works) > 1 and all(w[0].reach() <= REACH for w in works):  # the larger direction first
        guesses = {id(w[0]): w[0].chernoff_guess(max(residual_target(w[1], delta_g), 1e-300)) for w in works}
        works.sort(key=lambda w: -guesses[id(w[0])])
    out = []
    for i, (work, m_up, m_lo) in enumerate(works):
        floor = max((b.lower for b in out if isinstance(b, Bounds)), default=-math.inf)
        # this direction's answer estimated from the first's: its Chernoff guess scaled by the
        # first's certified lower end over the first's guess (the guesses share their bias)
        g0, g = guesses.get(id(works[0][0])), guesses.get(id(work))
        est = g * out[0].lower / g0 if i > 0 and g0 and g and math.isfinite(floor) and isinstance(out[0], Bounds) \
            and g0 > 0.0 else None
        out.append(epsilon_direction(work, m_up, m_lo, delta_g, tol, floor=floor, estimate=est,
                                     negligible=tol * NEGLIGIBLE_TOL, kw=kw))
    try:
        return worst_direction(out)
    except ApproxTooCostly as exc:  # a size limit: basic composition, or one mechanism alone below, if narrower
        return basic_epsilon(exc, m, others, delta_g, tol)


def mechanism_delta_bounds(m: Mechanisms, others, eps_g: float, tol: float, *, max_points: int = MAX_POINTS,
                           info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bracket:
    """Certified (lower, upper) on the optimal delta_g(eps_g) of the black-box pairs ``m``
    composed with the mechanisms ``others``, to the tolerance of
    :func:`lattice_delta_bounds`, as :func:`mechanism_bounds` (each global direction by
    :func:`~optcomp._directions.delta_direction`)."""
    return _reported(_mechanism_delta(m, others, eps_g, tol, max_points=max_points, workers=workers,
                                      progress=progress), info)


def _mechanism_delta(m: Mechanisms, others, eps_g: float, tol: float, **kw) -> Bracket:
    """:func:`mechanism_delta_bounds` (``kw``: max_points, workers, progress)."""
    mu = gaussians_alone(m, others)
    if mu is not None:
        return Bracket(*gdp_delta(mu.lower, mu.upper, eps_g), "closed form (GDP)")
    single = single_mechanism(m, others)
    if single is not None:  # its certified profile is the optimum
        return Bracket(*single.profile_bounds(eps_g), "profile")
    # truncation tails: 2^-44 of the Chernoff estimate of H(eps_g) in all
    n = sum(int(c) for _, c in others) + 1
    works = direction_workloads(m, others)
    est = 1.0  # (the estimate needs losses a lattice could place)
    if works[0][0].reach() <= REACH:
        theta = works[0][0].tilt_for(eps_g)
        est = math.exp(min(0.0, works[0][0].cgf(theta)[0] - theta * eps_g))
    tail = min(1e-30, max(1e-300, est * 2.0**-44 / n))
    atom_tail = min(1e-30, est * 2.0**-44 / n)
    if atom_tail > 0.0 and any(mech.kind == "atoms" for mech, _ in others):
        works = direction_workloads(m, others, tail, atom_tail)  # finite laws cut at their own tail
    if len(works) > 1 and all(w[0].reach() <= REACH for w in works):  # the larger direction first
        def log_estimate(w):
            th = w[0].tilt_for(eps_g)
            return w[0].cgf(th)[0] - th * eps_g
        works.sort(key=lambda w: -log_estimate(w))
    out = []
    for work, m_up, m_lo in works:
        for source in work.sources:  # the leaves' truncation (the guides, estimates only, keep theirs)
            if source.mech.kind != "atoms":
                source.tail = tail
        floor = max((b.lower for b in out if isinstance(b, Bounds)), default=-math.inf)
        out.append(delta_direction(work, m_up, m_lo, eps_g, tol, floor=floor, estimate=est, kw=kw))
    try:
        b = worst_direction(out)
    except ApproxTooCostly as exc:  # a size limit: basic composition, or one mechanism alone below, if narrower
        b = basic_delta(exc, m, others, eps_g, tol)
    if b.upper == 0.0 and any(eps_g < w.top_bound() for w, _, _ in works):
        # a loss above eps_g may hold (an unbounded law): H(eps_g) > 0 may lie below the
        # least float -- its upper end is that float, never 0 (0 only above every loss)
        b = b._replace(upper=5e-324)
    return b
