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
   :func:`lattice_pass` of :mod:`optcomp._lattice.passes` (the construction the grouped
   one generalises) is kept as a reference and for the tests.

Refinement.  The drivers (this module) only choose: the producer, the step h = m 2^j of
each pass, its tilt, when to stop; every bound comes from a producer --
:mod:`optcomp._exact.atoms`, :mod:`optcomp._lattice.commensurable`,
:mod:`optcomp._lattice.grouped` -- whose construction and floating-point proofs live with it
(:mod:`optcomp._lattice.passes` for refinement and garbling, :mod:`optcomp._lattice.tree`
for the FFT error bound).  Two decisions are the drivers' own, both exact by monotonicity:

* mechanisms with eps_i >= 800 are a deterministic shift of the others' loss (up to P0-mass
  <= 2 c e^-800 charged as slack), composed exactly as a rational offset;
* groups of tiny eps whose sum sigma is <= tol/8 are left out: without them H is a lower
  bound, and H(x) <= H_rest(x - sigma) an upper one (L <= L_rest + sigma pointwise).

One refine loop (:func:`_refine`) serves both directions:

* delta direction (:func:`lattice_delta_bounds`): the same passes at x = eps_g, until
  upper - lower <= tol * upper or upper <= delta_opt(eps_g - tol) (certified).
* steps (h = m 2^j, 8 <= m <= 15): a first pass at the step whose gap is predicted ~0.75 tol
  (measured per-leaf coefficients; in the delta direction the eps gap times an estimate
  of |d log H/dx|), usually the only one; otherwise the step predicted from the measured
  gap and its measured order in h; the tilt is re-aimed at the bracket.  ``max_points``
  caps the lattice (:class:`ApproxTooCostly` carries the best bracket).  Homogeneous inputs (one distinct eps) are solved exactly instead
  (binomial atoms with their pmf error charged both ways), upward and downward.

Length (~1100 lines; its outline, a driver of ~450 lines, is the next cut): one refine loop (:func:`_refine`) serves both directions, for black
boxes and for mechanisms (:func:`mechanism_bounds`, with the frames from the ends of the law,
the mechanisms of negligible loss left out, one mechanism by its profile); the drivers share
its step control and the exact splits (big eps, negligible eps), and split into modules they
would import each other, which the layer rule forbids for drivers; the certified Chernoff
fallback of a size limit (:func:`_chernoff_fallback`) wraps both.
"""

from __future__ import annotations

import math
import sys
import time
from fractions import Fraction

import numpy as np
from scipy.special import log_expit

from ._cgf import cgf_terms, chernoff_guess, tilt_for
from ._inputs import Mechanisms
from ._laws import DIRECTIONS, FORWARD
from ._rounding import LIBM_ULPS, UNIT, dot_dir, down, exact_dir, up
from ._types import MAX_POINTS, ApproxTooCostly, Bounds, BracketInfo, ExactTooLarge
from ._lattice.commensurable import commensurable_bounds, commensurable_excess_bounds
from ._lattice.grouped import SLACK_REL, grouped_pass
from ._lattice.passes import LatticePass, lattice_pass
from ._lattice.workload import REACH, Source, Workload, beyond_floats, gaussian_part, inf_mass
from .gdp import composed_mu, gaussians_alone, split_gaussians
from .gdp import delta_bounds as gdp_delta, epsilon_bounds as gdp_epsilon
from .loss import delta_from_excess, excess_lower, residual_target, solve_segments
from ._exact.atoms import UNDERFLOW_SCALE, _point_mass, _split_groups, exact_epsilon_bounds, exact_excess_bounds

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
    "mechanism_bounds",
    "mechanism_delta_bounds",
]

DELTA_FLOOR = 2.0**-1000  # absolute delta accuracy always accepted (~1e-301: float's own floor)
DELTA_FLOAT_GAP = 2.0**-40  # accepted only when refining the lattice no longer helps (see lattice_delta_bounds)
EPS_FLOAT_GAP = 2.0**-48  # an eps_g bracket this narrow (relative: a few ulps) is the float floor, whatever tol


# --------------------------------------------------------------------------- drivers (tilt, steps, homogeneous)


def _log_slope(work: Workload, theta: float) -> float:
    """An estimate of lambda = |d log H / dx| at the x the tilt ``theta`` centres (only used to
    choose the first step of :func:`lattice_delta_bounds`: the relative gap of H is about
    lambda times the gap in eps).  Normal approximation of the tilted loss (sd sigma):
    H ~ int_0^inf e^{-theta u} (1 - e^{-u}) phi_sigma(u) du and -H' ~ int_0^inf
    e^{-(theta + 1) u} phi_sigma(u) du, with int_0^inf e^{-a u} phi_sigma(u) du =
    erfcx(a sigma / sqrt 2) / 2; lambda -> theta for sigma theta >> 1 and ~0.8/sigma at
    theta = 0."""
    from scipy.special import erfcx

    sigma = math.sqrt(work.cgf(theta)[2])
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


FLOOR_AIM = 0.25  # a floored direction's first gap: this fraction of its estimated distance to the floor
ENUMERATED_ATOMS = 2**15  # up to this many atoms, list the distribution exactly (no lattice)
NEGLIGIBLE_TOL = 0.125  # groups of tiny eps summing to <= this x tol are bounded by monotonicity


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
    if m.others:  # mechanisms beyond black boxes: every one a leaf (issue 18)
        return mechanism_bounds(m, m.others, delta_g, tol, max_points=max_points, info=info, workers=workers,
                                progress=progress)
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
    if t_low <= 0.0:
        # t > 0 below the float range (delta_g ~ 1 - prod(1 - delta_i) ~ 1e-200): the product
        # windowed at t, its masses and t scaled by 2^UNDERFLOW_SCALE (the lattice's float64
        # masses cannot resolve t: :func:`_lattice_epsilon` says so when this does not answer)
        s = UNDERFLOW_SCALE
        exact = _exact_or_none(lambda: exact_epsilon_bounds(m, residual_target(m, delta_g, log2_scale=s),
                                                            residual_target(m, delta_g, round_up=True, log2_scale=s),
                                                            ENUMERATED_ATOMS, s))
        if exact is not None:
            info.path = "enumerated"
            return Bounds(exact[0], min(exact[1], top))
    small, shift, big_slack = _split_big(m, max(t_low, 0.0) * 2.0**-40)
    if small is not None:
        # L = shift + L_s except with probability <= big_slack (then anywhere): H(x) <=
        # H_s(x - shift) + big_slack and H(x) >= (1 - big_slack) H_s(x - shift)
        t_small = up(t_high / down(1.0 - big_slack, 1), 1)
        if small.eps.size == 0:  # every group (nearly) deterministic: one atom at the shift
            dist = _point_mass(shift, big_slack)
            return Bounds(dist.epsilon_lower(t_small), min(solve_segments(dist, t_low), top))

        def shifted(b: Bounds) -> Bounds:
            return Bounds(_shifted(b.lower, shift, False), min(_shifted(b.upper, shift, True), top))

        try:
            b = _epsilon_bounds_t(small, down(t_low - big_slack, 1), t_small, tol, max_points=max_points,
                                  info=info, workers=workers, progress=progress)
        except ApproxTooCostly as exc:
            raise ApproxTooCostly(str(exc), None if exc.bounds is None else shifted(exc.bounds)) from None
        return shifted(b)
    return _epsilon_bounds_t(m, t_low, t_high, tol, max_points=max_points, info=info, workers=workers,
                             progress=progress)


def _exact_or_none(run):
    """The exact producers' bracket, or None when they are out of reach (a binomial window
    beyond the memory budget: the lattice paths follow)."""
    try:
        return run()
    except ExactTooLarge:
        return None


def _split_big(m: Mechanisms, cap: float = 0.0):
    """(small, shift, slack): the mechanisms that are not (nearly) deterministic, as a
    multiset without delta events (None when nothing is shifted, or -- for the BIG_EPS
    groups alone -- nothing remains; possibly empty otherwise), the exact sum of the
    deterministic eps_i, and ``slack`` >= the P0-mass of their other outcomes.  A group is
    deterministic when eps_i >= BIG_EPS, or when 2 c e^-eps_i (>= c q_i >= P0[some s_i = -1])
    is <= ``cap``."""
    groups, shift, slack = _split_groups(m)
    if cap > 0.0 and groups:
        # only groups whose float 2 c e^-eps is within 1e-9 of the cap can pass the rounded-up
        # test below (up() moves it by a few ulps): the others are kept without it
        ge = np.array([e for e, _ in groups])
        gc = np.array([float(c) for _, c in groups])
        with np.errstate(over="ignore", under="ignore"):
            near = 2.0 * gc * np.exp(-ge) <= cap * (1.0 + 1e-9)
        if not near.any():
            cap = 0.0
    if cap > 0.0:
        kept = []
        for e, c in groups:
            s = up(2.0 * c * math.exp(-e), 2)
            if s <= cap:
                shift += Fraction(e) * c
                slack = up(slack + s, 1)
            else:
                kept.append((e, c))
        if len(kept) < len(groups):
            groups = kept
            if not groups:
                return Mechanisms(eps=np.zeros(0), delta=np.zeros(0), count=np.zeros(0, dtype=np.int64)), shift, slack
    if not shift or not groups:
        return None, shift, slack
    eps = np.array([g[0] for g in groups], dtype=float)
    cnt = np.array([g[1] for g in groups], dtype=np.int64)
    return Mechanisms(eps=eps, delta=np.zeros(eps.size), count=cnt), shift, slack


def _log_tail_bound(vals: np.ndarray, cf: np.ndarray, x: float) -> float:
    """An upper bound on log H(x) <= log P0[L > x] <= K(theta) - theta x (Markov, at the tilt
    theta that centres the loss at x), every float error of K and of theta x charged upward
    (each term of K within a few ulps of its inputs' magnitudes)."""
    with np.errstate(over="ignore", invalid="ignore"):  # huge eps: no bound (inf), never a wrong one
        theta = tilt_for(vals, x, cf)
        lp, lq = log_expit(vals), log_expit(-vals)
        terms = cf * cgf_terms(lp, lq, vals, theta)
        mag = float(np.sum(np.abs(terms))) + float(np.sum(cf * (np.abs(lp) + np.abs(lq) + theta * vals + 1.0)))
        bound = float(np.sum(terms)) - theta * x + 64.0 * UNIT * (mag + abs(theta * x)) + 1e-300
    return bound if bound == bound else math.inf


def _split_negligible(vals: np.ndarray, cnts: np.ndarray, budget: float):
    """(rest, sigma): the multiset without its smallest-eps groups whose sum sigma = sum c eps
    (rounded up) stays <= ``budget`` (None when there are none, or nothing would remain)."""
    total = 0.0
    n = 0
    for e, c in zip(vals.tolist(), cnts.tolist()):  # ascending eps
        nxt = up(total + up(e * c, 1), 1)
        if nxt > budget:
            break
        total, n = nxt, n + 1
    if n == 0 or n == vals.size:
        return None, 0.0
    return Mechanisms(eps=vals[n:].copy(), delta=np.zeros(vals.size - n), count=cnts[n:].copy()), total


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
    rest, sigma = _split_negligible(vals, cnts, tol * NEGLIGIBLE_TOL)
    if rest is not None:
        # groups of tiny eps whose sum sigma = sum c eps is far below tol: the optimum without
        # them is a lower bound (H only grows with a mechanism added: data processing) and
        # that plus sigma an upper one (L <= L_rest + sigma pointwise, so H(x) <=
        # H_rest(x - sigma)); their tilt would otherwise be astronomical (1e-9 beside 20)
        def shifted(b: Bounds) -> Bounds:
            return Bounds(b.lower, min(up(b.upper + sigma, 1) if math.isfinite(b.upper) else b.upper, top))

        try:
            b = _epsilon_bounds_t(rest, t_low, t_high, tol - 2.0 * sigma, max_points=max_points, info=info,
                                  workers=workers, progress=progress)
        except ApproxTooCostly as exc:  # its bracket is the rest's: shifted like a result
            if exc.bounds is None:
                raise
            raise _limit(exc, shifted(exc.bounds), "eps_g") from None
        return shifted(b)
    exact = _exact_or_none(lambda: exact_epsilon_bounds(m, t_low, t_high, ENUMERATED_ATOMS))
    if exact is not None:  # one group (binomial) or a small product: listed exactly
        info.path = "enumerated"
        return Bounds(exact[0], min(exact[1], top))
    comm = commensurable_bounds(m, t_low, t_high, max_points=max_points, workers=workers, info=info,
                                progress=progress)
    if comm is not None and comm.gap <= tol:  # eps_i = n_i u: the lattice at step u is exact
        return Bounds(comm.lower, min(comm.upper, top))
    return _lattice_epsilon(Workload(vals, cnts), t_low, t_high, tol, top, max_points=max_points, info=info,
                            workers=workers, progress=progress)


def _lattice_epsilon(work: Workload, t_low: float, t_high: float, tol: float, top: float, *, max_points: int,
                     info: BracketInfo, workers: int, progress, floor: float = -math.inf,
                     estimate: float | None = None) -> Bounds:
    """The grouped lattice path of the eps direction for any workload (randomized-response
    groups and mechanism leaves): passes at steps h refined until the bracket on the least
    x with H(x) <= t (``t_low`` <= t <= ``t_high``) is at most ``tol`` wide, or its upper end
    is at most ``floor`` (a lower bound of another global direction's answer: this one then
    cannot be the larger); ``top`` caps the upper bound (the largest finite loss, or inf).
    ``estimate``: a float estimate of this direction's answer (only the first step depends
    on it: a gap of FLOOR_AIM times its distance below ``floor`` settles the direction)."""
    info.passes.clear()
    info.path = "lattice"
    _within_reach(work, "eps_g")
    x_est = work.chernoff_guess(t_low)
    # a direction floored by another's lower end need only fall below it: its first pass
    # aims at a gap of a fraction of the estimated distance (the refinement goes on from
    # the measured gap at tol when that does not settle it)
    first_tol = max(tol, FLOOR_AIM * (floor - estimate)) if math.isfinite(floor) and estimate is not None else tol
    h = _initial_step_n(work.weight(work.tilt_for(x_est)), first_tol)
    # mass sent to +inf: a fraction <= min(2^-40, tol/64) of t in all (H moves by less
    # than that relative, eps by about that / theta: far inside tol)
    log_slack = math.log(max(t_low, 1e-300) * max(SLACK_REL, min(2.0**-20, tol / 64.0))
                         / (4 * work.leaves_count() + 4))
    best = Bounds(0.0, top)
    if t_low <= 0.0 < t_high:
        # t is positive but below the float range (rounded down to 0): no upper bound below
        # the top atom can be certified in float64 masses, and refining cannot change that;
        # one pass gives the lower bound (its target t_high >= t is the safe side)
        try:
            lp = grouped_pass(work.vals, work.cnts, h, work.tilt_for(x_est), log_slack, workers, work.plan(h),
                              progress)
        except ApproxTooCostly as exc:  # the memory budget: the trivial bracket
            raise _limit(exc, best, "eps_g") from None
        b = Bounds(min(lp.epsilon_bounds(t_low, t_high).lower, top), top)
        if b.gap <= tol:
            return b
        raise ApproxTooCostly(
            f"the residual target t = 1 - (1 - delta_g)/prod(1 - delta_i) is positive but below the float "
            f"range (delta_g within ~1e-308 of 1 - prod(1 - delta_i)): the lattice's float64 masses cannot "
            f"resolve it, so its upper bound is the largest loss (tol={tol:g}); best bounds {b.lower!r} <= eps_g "
            f"<= {b.upper!r}. method='optimal' settles such targets with scaled masses where it is exact.", b)
    aim = {"x": x_est, "reaimed": False}

    def evaluate(lp: LatticePass, best: Bounds) -> Bounds:
        b = lp.epsilon_bounds(t_low, t_high)
        return Bounds(max(b.lower, best.lower), min(b.upper, best.upper, top))

    def finished(b: Bounds, lp: LatticePass):
        if b.gap <= tol or b.upper <= floor:
            return True
        if not aim["reaimed"] and 0.0 < b.lower and (b.gap >= 64.0 * tol or b.gap >= 0.1 * b.upper) \
                and math.isfinite(b.upper):
            # a bracket this wide at a step aimed at ~0.75 tol is a misaimed tilt (the
            # Chernoff guess overshoots to the top atom when delta_g is near its mass, and
            # the windows then cut what matters), not the step: the same step again, aimed
            # at the middle of the bracket
            aim["reaimed"] = True
            aim["x"] = 0.5 * (b.lower + b.upper)
            return "again"
        if math.isfinite(b.upper):
            aim["x"] = 0.5 * (b.lower + b.upper) if b.gap < 0.1 * b.upper else b.upper
        return False

    def stalled(b: Bounds, gap: float, h: float) -> Bounds:
        # six halvings of h without progress: not a discretisation gap (should not happen)
        raise ApproxTooCostly(
            f"the certified gap stopped shrinking at {gap:g} (tol={tol:g}; h={h:g}); "
            f"best bounds {b.lower!r} <= eps_g <= {b.upper!r}",
            b,
        )

    def chernoff() -> float:
        return work.chernoff_epsilon(t_low, work.tilt_for(x_est), _chernoff_step(work, h))

    return _chernoff_fallback(
        lambda: _refine(work, h, log_slack, tol, lambda: work.tilt_for(aim["x"]), evaluate, finished,
                        lambda b: b.gap, ("certified gap", "eps_g"), stalled, best, max_points=max_points, info=info,
                        workers=workers, progress=progress),
        chernoff, "eps_g", Bounds(0.0, top))


def _within_reach(work: Workload, quantity: str) -> None:
    """A size limit (no bracket: the caller's frame) when a leaf's losses exceed
    :data:`~optcomp._lattice.workload.REACH` (2^40): no lattice step places them."""
    reach = work.reach()
    if not reach <= REACH:
        raise ApproxTooCostly(f"losses up to {reach:g} lie beyond the lattice's reach ({REACH:g}): {quantity} is "
                              "bracketed from the ends of the law only", None)


def _limit(exc: ApproxTooCostly, bounds: Bounds, quantity: str, note: str = "") -> ApproxTooCostly:
    """``exc`` (a size limit) again, carrying ``bounds`` (its message's bracket rewritten)."""
    return ApproxTooCostly(f"{str(exc).split('; best bounds')[0]}; best bounds {bounds.lower!r} <= {quantity} "
                           f"<= {bounds.upper!r}{note}", bounds)


def _chernoff_step(work: Workload, h: float) -> float:
    """The step the Chernoff fallback builds mechanism leaves at: h, or coarser so that the
    widest leaf has at most ~2^12 cells (any step gives a certified bound)."""
    widest = max((s.width for s in work.sources), default=0.0)
    return max(h, _step_below(widest / 4096.0)) if widest > 0.0 else h


def _chernoff_fallback(run, chernoff, quantity: str, trivial: Bounds) -> Bounds:
    """``run()``; if it raises :class:`ApproxTooCostly`, the bracket it carries (``trivial``
    if none: a leaf too large to build) with its upper end lowered to the certified Chernoff
    bound ``chernoff()`` when that is smaller (a size limit then still reports a useful
    bound: e.g. delta ~1e-400, below float, as 2^-1074 instead of 1)."""
    try:
        return run()
    except ApproxTooCostly as exc:
        b = exc.bounds if exc.bounds is not None else trivial
        c = chernoff()
        if not c < b.upper:
            raise
        raise _limit(exc, Bounds(min(b.lower, c), c), quantity, " (the upper end a certified Chernoff bound)") from None


def _refine(work: Workload, h: float, log_slack: float, tol: float, theta_for, evaluate, finished, measure,
            names: tuple, stalled, best: Bounds, *, max_points: int, info: BracketInfo, workers: int,
            progress) -> Bounds:
    """The one refine loop of both drivers: a grouped lattice pass at step h and tilt
    ``theta_for()``, its certified bracket ``evaluate(pass, best)``, until
    ``finished(bracket, pass)`` (True: return it; "again": the same step, re-aimed); else the
    next step from the measured gaps (``measure``: absolute in eps, relative in delta;
    second order in h, :func:`_next_step`), ``stalled(...)`` after six steps without
    progress or when a step twice finer or more narrowed the gap by less than 10%,
    :class:`ApproxTooCostly` (with ``best``; ``names`` for its message) when a pass would
    exceed ``max_points`` or the memory budget (:mod:`optcomp._memory`; when no pass has
    answered yet, up to ``MEMORY_RETRIES`` coarser ones are tried first, for a bracket)."""
    gaps: list[float] = []
    steps: list[float] = []
    coarser, refused = 0, 0.0
    while True:
        theta = theta_for()
        points = work.points(theta, h)
        if points > max_points or work.span(h) / h + 8.0 >= 2.0**49:
            # (the second: lattice positions h n are exact only for |n| < 2^49 -- a step this
            # fine against sum c eps is the same size limit, never an internal error)
            gap, quantity = names
            raise ApproxTooCostly(
                f"a {gap} <= tol={tol:g} needs a lattice step h={h:g} with about {points:,} points "
                f"(> max_points={max_points:,}, or positions beyond 2^49 steps); best bounds so far "
                f"{best.lower!r} <= {quantity} <= {best.upper!r}. Raise tol (or eta) or max_points.",
                best,
            )
        t0 = time.perf_counter()
        lp = None  # (the previous pass's arrays are not kept during this one)
        try:
            lp = grouped_pass(work.vals, work.cnts, h, theta, log_slack, workers, work.plan(h), progress)
        except ApproxTooCostly as exc:  # the memory budget (or a leaf too large): the best bracket so far
            if exc.bounds is not None:
                raise
            memory = getattr(exc, "memory", None)
            if memory is not None:
                refused = max(refused, h)
            if not gaps and memory is not None and coarser < MEMORY_RETRIES:
                # no bracket yet: a coarser pass that fits the budget gives one (the memory of a
                # pass grows like 1/h; the levels after the one refused are larger still)
                coarser += 1
                h = _step_below(h * 4.0 * memory[0] / memory[1])
                continue
            gap, quantity = names
            raise ApproxTooCostly(f"a {gap} <= tol={tol:g} needs a lattice step h={h:g}, at which {exc}; best "
                                  f"bounds so far {best.lower!r} <= {quantity} <= {best.upper!r}. Raise tol (or "
                                  "eta) or max_memory.", best) from None
        b = evaluate(lp, best)
        info.passes.append(dict(h=h, points=lp.points, lower=b.lower, upper=b.upper, theta=lp.theta,
                                seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="lattice", step=h, points=lp.points, lower=b.lower, upper=b.upper, gap=b.gap,
                          tol=tol, seconds=time.perf_counter() - t0))
        best = b
        verdict = finished(b, lp)
        if verdict is True:
            return b
        if verdict == "again":
            continue
        gap = measure(b)
        gaps.append(gap)
        steps.append(h)
        if len(gaps) > 6 and gap > 0.9 * gaps[-7]:
            return stalled(b, gap, h)
        if len(gaps) >= 2 and steps[-2] >= 2.0 * steps[-1] and gap > 0.9 * gaps[-2]:
            # a step at least twice finer left the gap where it was: not the lattice's gap
            # (second order in h, first for tiny eps), so finer passes -- each dearer in time
            # and memory -- would not narrow it either (e.g. a continuous law's leaf whose
            # bracket near a point mass does not depend on h)
            return stalled(b, gap, h)
        h = _next_step(steps, gaps, tol)
        if h <= refused:  # a finer step than one the memory budget refused: the bracket so far
            gap, quantity = names
            raise ApproxTooCostly(f"a {gap} <= tol={tol:g} needs a lattice step h={h:g}, finer than h={refused:g} "
                                  f"which exceeds the memory budget; best bounds so far {b.lower!r} <= {quantity} "
                                  f"<= {b.upper!r}. Raise tol (or eta) or max_memory.", b)


MEMORY_RETRIES = 2  # coarser first passes tried when the first one does not fit the memory budget

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
    if not gap < math.inf:  # a pass with no finite upper end (e.g. delta_g ~1e-320): refine all the way
        return _step_below(h / 16.0)
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
    if m.others:  # mechanisms beyond black boxes: every one a leaf (issue 18)
        return mechanism_delta_bounds(m, m.others, eps_g, tol, max_points=max_points, info=info, workers=workers,
                                      progress=progress)
    vals, cnts = m.positive()
    if vals.size == 0 or eps_g >= dot_dir(cnts, vals, True):
        return Bounds(delta_from_excess(m, 0.0, round_up=False), delta_from_excess(m, 0.0))
    kw = dict(max_points=max_points, info=info, workers=workers, progress=progress)
    split = _split_big(m, DELTA_SHIFT_CAP)
    if split[0] is not None and split[2] > _split_groups(m)[2]:
        # groups of eps >> log c shifted too: kept when their slack does not matter
        b = _delta_split(m, eps_g, tol, *split, **kw)
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
        split = _split_big(m)
    return _delta_split(m, eps_g, tol, *split, **kw)


DELTA_SHIFT_CAP = 2.0**-70  # slack of the nearly deterministic groups tried in the delta direction


def _delta_split(m: Mechanisms, eps_g: float, tol: float, small, shift: Fraction, big_slack: float, *,
                 max_points: int, info: BracketInfo, workers: int, progress) -> Bounds:
    """:func:`lattice_delta_bounds` with the deterministic groups (``shift``, ``big_slack``) split
    off (``small`` None: nothing split)."""
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

    if small.eps.size == 0:  # every group (nearly) deterministic: H_s is the point mass at 0
        dist = _point_mass(Fraction(0), 0.0)
        return to_delta(dist.excess_lower(z), dist.excess(z))
    return _delta_bounds_x(small, z, tol, to_delta, max_points=max_points, info=info, workers=workers,
                           progress=progress)


def _delta_bounds_x(m: Mechanisms, eps_g: float, tol: float, to_delta, *, max_points: int, info: BracketInfo,
                    workers: int, progress) -> Bounds:
    """:func:`lattice_delta_bounds` from bounds (lo, hi) on H(eps_g), which ``to_delta``
    turns into certified delta bounds."""
    vals, cnts = m.positive()
    if eps_g >= dot_dir(cnts, vals, True):
        return to_delta(0.0, 0.0)
    log_tail = _log_tail_bound(vals, cnts.astype(float), eps_g)
    if log_tail < math.log(DELTA_FLOOR):  # H(eps_g) <= P0[L > eps_g] below the float floor: no lattice
        return to_delta(0.0, max(up(math.exp(log_tail), 1), 5e-324))  # H > 0 below the top atom
    rest, sigma = _split_negligible(vals, cnts, tol * NEGLIGIBLE_TOL)
    if rest is not None and eps_g >= 2.0 * sigma:
        # tiny-eps groups of sum sigma << tol (as in the eps direction): H_rest(x) <= H(x) <=
        # H_rest(x - sigma) (data processing; L <= L_rest + sigma), each from its own bracket
        # of the rest (their tilt would otherwise be astronomical and the leaves huge)
        kw = dict(max_points=max_points, info=info, workers=workers, progress=progress)
        x_up = exact_dir(Fraction(eps_g) - Fraction(sigma), False)
        parts = []
        for x in (x_up, eps_g):  # a size limit's bracket is of the rest at x: used as a result is
            try:
                parts.append(_delta_bounds_x(rest, x, tol - 2.0 * sigma, to_delta, **kw))
            except ApproxTooCostly as exc:
                if exc.bounds is None:
                    raise
                parts.append(exc)
        brackets = [b.bounds if isinstance(b, ApproxTooCostly) else b for b in parts]
        b = Bounds(brackets[1].lower, brackets[0].upper)
        failed = [e for e in parts if isinstance(e, ApproxTooCostly)]
        if failed:
            raise _limit(failed[0], b, "delta_g") from None
        return b
    exact = _exact_or_none(lambda: exact_excess_bounds(m, eps_g, ENUMERATED_ATOMS))
    if exact is not None:  # one group (binomial) or a small product: the float64 floor
        info.path = "enumerated"
        return to_delta(exact[0], exact[1])
    comm = commensurable_excess_bounds(m, eps_g, rel_gap=max(tol, 1e-12), max_points=max_points,
                                       workers=workers, info=info, progress=progress)
    if comm is not None:  # eps_i = n_i u: the lattice at step u is exact
        b = to_delta(comm[0], comm[1])
        if b.gap <= tol * b.upper + DELTA_FLOOR:
            return b
    return _lattice_delta(Workload(vals, cnts), eps_g, tol, to_delta, max_points=max_points, info=info,
                          workers=workers, progress=progress)


def _lattice_delta(work: Workload, eps_g: float, tol: float, to_delta, *, max_points: int, info: BracketInfo,
                   workers: int, progress, floor: float = -math.inf) -> Bounds:
    """The grouped lattice path of the delta direction for any workload: passes at steps h
    refined until ``to_delta`` of the bracket on H(eps_g) meets the tolerance of
    :func:`lattice_delta_bounds`, or its upper end is at most ``floor`` (another global
    direction's lower bound)."""
    info.passes.clear()
    info.path = "lattice"
    _within_reach(work, "delta_g")
    theta = work.tilt_for(eps_g)
    # relative gap of H ~ lambda x the gap in eps (lambda = |d log H / dx| ~ theta at the tilt)
    lam = min(_log_slope(work, theta), 1.0 + theta)
    h = _initial_step_n(work.weight(theta), tol / lam)
    # the untilted mass sent to +inf: a tiny fraction of the Chernoff estimate of H(eps_g)
    log_slack = (work.cgf(theta)[0] - theta * eps_g
                 + math.log(1e-6 * max(SLACK_REL, min(2.0**-20, tol / 64.0)) / (4 * work.leaves_count() + 4)))

    def finished(b: Bounds, lp: LatticePass) -> bool:
        if b.gap <= tol * b.upper + DELTA_FLOOR or b.upper <= floor:
            return True
        if eps_g - tol >= 0.0:  # horizontal: upper <= a certified lower bound on delta_opt(eps_g - tol)
            return b.upper <= to_delta(excess_lower(lp.lower_loss, lp.lower_p0, eps_g - tol), 1.0).lower
        return False

    def stalled(b: Bounds, rel: float, h: float) -> Bounds:
        if b.gap <= DELTA_FLOAT_GAP:
            # the hockey-stick sums charge rounding relative to the masses summed, not to
            # H: when H is far below them (e.g. eps_i ~ 1e-200) this absolute gap is the
            # floor of float64, reached and reported
            return b
        raise ApproxTooCostly(f"the certified delta gap stopped shrinking at {rel:g} relative (tol={tol:g})", b)

    def evaluate(lp: LatticePass, best) -> Bounds:
        return to_delta(*lp.excess_bounds(eps_g))

    best = to_delta(0.0, 1.0)  # certified before any pass: 0 <= H <= 1
    try:
        return _chernoff_fallback(
            lambda: _refine(work, h, log_slack, tol, lambda: theta, evaluate, finished,
                            lambda b: b.gap / b.upper, ("delta gap", "delta_g"), stalled, best, max_points=max_points,
                            info=info, workers=workers, progress=progress),
            lambda: to_delta(0.0, work.chernoff_delta(eps_g, theta, _chernoff_step(work, h))).upper, "delta_g",
            to_delta(0.0, 1.0))
    except ApproxTooCostly as exc:
        # a size limit whose (Chernoff) bracket is within float's own floor of 0 is an answer
        if exc.bounds is not None and exc.bounds.gap <= DELTA_FLOOR:
            return exc.bounds
        raise


# --------------------------------------------------------------------------- mechanisms (issue 18)


def _workloads(m: Mechanisms, others, tail: float = 1e-300,
               atom_tail: float = 0.0) -> list[tuple[Workload, Mechanisms, Mechanisms]]:
    """Per global direction: (workload, delta events for the upper side, for the lower side).

    The black-box groups of ``m`` are symmetric; the mechanisms ``others`` ((mechanism,
    count) pairs) are all seen in the same direction -- every mechanism sees the same two
    neighbouring datasets, so an asymmetric pair takes the larger of the two *global*
    directions, never a choice per mechanism.  A mechanism's P-mass at +inf joins the delta
    events as a black box (0, delta_m) per copy (its bracket's upper end for the upper side,
    lower end for the lower; :func:`optcomp._lattice.workload.mechanism_leaf`).  ``tail``: the
    P-mass an unbounded law (Gaussian) may leave beyond its leaf's cells, per copy (charged
    to the upper side); ``atom_tail``: the P-mass a finite law's extreme atoms may have and
    be cut (:func:`optcomp._lattice.workload.atom_law`; no float floor: its masses are
    exact)."""
    vals, cnts = m.positive()
    dirs = DIRECTIONS if any(len(mech.directions()) > 1 for mech, _ in others) else (FORWARD,)
    gauss, rest = split_gaussians(others)
    merged, gauss_event = (), None
    if gauss:  # all Gaussians as one (exact composition; symmetric)
        mu = composed_mu(gauss)
        merged, gauss_event = gaussian_part(mu.lower, mu.upper, tail)
    out = []
    for d in dirs:
        # a mechanism with no finite P-mass (all at +inf) is only its delta event
        def cut(mech):
            return atom_tail if mech.kind == "atoms" else tail

        sources = tuple(s for s in (Source(mech, c, d, cut(mech)) for mech, c in rest) if s.loss.size)
        work = Workload(vals, cnts, merged + sources)
        # losses beyond the float range count at +inf on both sides: an eps_g they decide is
        # finite (above the largest float), not unattainable (mu_hi = inf: mu^2 overflowed)
        work.beyond = any(beyond_floats(mech, d, cut(mech)) for mech, _ in rest) or gauss_event is not None
        events = [(inf_mass(mech, d, cut(mech)), c) for mech, c in rest]
        if gauss_event is not None:
            events.append((gauss_event, 1))
        sides = [m.with_events([(b[j], c) for b, c in events if b[j] > 0.0]) for j in (1, 0)]
        out.append((work, sides[0], sides[1]))
    return out


def mechanism_bounds(m: Mechanisms, others, delta_g: float, tol: float, *, max_points: int = MAX_POINTS,
                     info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bounds:
    """Certified (lower, upper) on the optimal eps_g of the black-box pairs ``m`` composed with
    the mechanisms ``others`` ((mechanism, count) pairs of :mod:`optcomp.mechanisms`), with
    upper - lower <= tol: the grouped lattice with each mechanism as a leaf
    (:mod:`optcomp._lattice.workload`), the black-box delta_i through the residual target
    t = 1 - (1 - delta_g)/prod(1 - delta_i) (a delta event is independent of everything
    else: delta(x) = 1 - prod(1 - delta_i)(1 - H(x))).

    One mechanism in one copy is its certified profile (:func:`_profile_epsilon`).  Else,
    per global direction: the frame from the ends of the law first (exact when t = 0 or far
    below the top atoms' mass, at the float floor of an answer near 1e308, and the only
    bracket for losses beyond the lattice's reach); else the lattice of the mechanisms that
    matter -- those whose losses stay below a sliver sigma (sum <= tol/8) left out, the
    answer's upper end raised by sigma -- intersected with the frame.  A bracket wider than
    tol (and than the float floor, 2^-48 relative) is a size limit (ApproxTooCostly)."""
    info = info if info is not None else BracketInfo()
    kw = dict(max_points=max_points, info=info, workers=workers, progress=progress)
    mu = gaussians_alone(m, others)
    if mu is not None:  # Gaussians alone: the closed form
        info.path = "closed form (GDP)"
        return gdp_epsilon(mu.lower, mu.upper, delta_g)
    single = _single(m, others)
    if single is not None:  # one mechanism: its certified profile
        b = _profile_epsilon(single, delta_g)
        if b is not None:
            info.path = "profile"
            return b
    out = []
    # truncation tails: a 2^-44 fraction of the target in all (far inside any tolerance)
    n = sum(int(c) for _, c in others) + 1
    target = max(residual_target(m, delta_g), 0.0)
    tail = min(1e-30, max(1e-300, target * 2.0**-44 / n))
    works = _workloads(m, others, tail, min(1e-30, target * 2.0**-44 / n))
    guesses: dict = {}
    if len(works) > 1 and all(w[0].reach() <= REACH for w in works):
        # the larger direction first (Chernoff estimates): its lower end floors the other
        guesses = {id(w[0]): w[0].chernoff_guess(max(residual_target(w[1], delta_g), 1e-300)) for w in works}
        works.sort(key=lambda w: -guesses[id(w[0])])
    for i, (work, m_up, m_lo) in enumerate(works):
        t_low = residual_target(m_up, delta_g)
        t_high = residual_target(m_lo, delta_g, round_up=True)
        floor = max((b.lower for b in out if isinstance(b, Bounds)), default=-math.inf)
        if t_high < 0.0:
            out.append(Bounds(sys.float_info.max if work.beyond else math.inf, math.inf))
        elif t_low < 0.0:  # the upper side's delta events exceed delta_g; the lower side's frame
            out.append(Bounds(work.near_top_epsilon(t_high, t_high)[0], math.inf))
        else:
            # the ends of the law alone: exact when t is far below the mass of the top atoms
            # (t = 0: H(x) <= 0 from the largest loss on), else a frame for the lattice's bracket
            tails = work.tail_events()
            t_fin = residual_target(m_up.with_events(tails), delta_g) if tails else t_low
            near = Bounds(*work.near_top_epsilon(t_fin, t_high)) if t_fin >= 0.0 else Bounds(0.0, math.inf)
            if near.lower > near.upper:  # (t_fin < t_low: the lower end from t_high stays valid)
                near = Bounds(near.upper, near.upper)
            if near.gap <= tol or t_high == 0.0 or near.gap <= EPS_FLOAT_GAP * near.upper < math.inf \
                    or (near.upper == math.inf and near.lower >= down(sys.float_info.max, 4)):
                out.append(near)
                continue
            # mechanisms whose losses stay below a sliver sigma (tiny scales, huge sigmas) are
            # left out: H_rest(x) <= H(x) <= H_rest(x - sigma) (a mechanism added only raises
            # delta; L <= L_rest + sigma), so eps_g lies in [eps_rest, eps_rest + sigma]
            rest, sigma, extra = _split_negligible_sources(work, tol * NEGLIGIBLE_TOL)
            t_rest = residual_target(m_up.with_events(extra), delta_g) if extra else t_low
            if rest is None:
                run, t_run = work, t_low
            else:
                run, t_run = rest, t_rest
            if run.leaves_count() == 0:  # nothing left: H_rest(x) = 0 for x >= 0
                b = Bounds(0.0, 0.0) if t_run >= 0.0 else Bounds(0.0, math.inf)
            elif t_run < 0.0:
                b = Bounds(0.0, math.inf)
            else:
                # this direction's answer estimated from the first's: its Chernoff guess scaled
                # by the first's certified lower end over the first's guess (the guesses share
                # their bias)
                g0, g = guesses.get(id(works[0][0])), guesses.get(id(work))
                est = None
                if i > 0 and g0 and g and math.isfinite(floor) and isinstance(out[0], Bounds) and g0 > 0.0:
                    est = g * out[0].lower / g0
                b = _attempt(lambda: _lattice_epsilon(run, t_run, t_high, tol, run.top_bound(),
                                                      floor=floor - sigma, estimate=est, **kw), run.top_bound())
            out.append(_narrowed(_shifted_up(b, sigma), near,
                                 lambda r: r.gap <= tol or r.gap <= EPS_FLOAT_GAP * r.upper < math.inf))
    return _worst_direction(out)


def _single(m: Mechanisms, others):
    """The one mechanism of a multiset that holds nothing else (one copy, no black box that
    adds a loss or a delta), else None: its privacy profile is the optimum itself."""
    if len(others) == 1 and int(others[0][1]) == 1 and not (m.eps > 0).any() and not (m.delta > 0).any():
        return others[0][0]
    return None


def _profile_epsilon(mech, delta_g: float) -> Bounds | None:
    """Certified (lower, upper) on the least x with delta(x) <= delta_g for one mechanism, by
    bisection on its certified profile (``profile_bounds``), over the floats' bit patterns
    (at most ~64 evaluations to adjacent floats): the upper end a float x with upper(x) <=
    delta_g, the lower end one with lower(x) > delta_g (delta decreases; where the
    profile's bracket straddles delta_g the two ends part by its width).  [inf, inf] when
    a P-mass at +inf alone exceeds delta_g; [max float, inf] when delta stays above delta_g
    at the largest float (a loss beyond the float range); None when the profile cannot tell
    (delta_g equal to the mass at +inf: the drivers' frames decide it exactly)."""
    import struct

    def bits(x: float) -> int:
        return struct.unpack("<q", struct.pack("<d", x))[0]

    def flt(i: int) -> float:
        return struct.unpack("<d", struct.pack("<q", i))[0]

    if mech.profile_bounds(0.0).upper <= delta_g:
        return Bounds(0.0, 0.0)
    if mech.kind == "atoms" and any(law.inf_lo - law.beyond_lo > delta_g
                                    for law in (mech.law(1.0, d) for d in mech.directions())):
        return Bounds(math.inf, math.inf)
    fmax = sys.float_info.max
    at_max = mech.profile_bounds(fmax)
    if at_max.lower > delta_g:
        return Bounds(fmax, math.inf)
    if at_max.upper > delta_g:  # undecided at every x (delta_g = the mass at +inf): the engine's frames
        return None

    def search(passes) -> float:
        """The least float x with passes(x) (passes monotone: False below, True above)."""
        lo, hi = 0, bits(fmax)  # passes(flt(hi)) holds, passes(flt(lo)) does not (0 checked above)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if passes(flt(mid)):
                hi = mid
            else:
                lo = mid
        return flt(hi)

    upper = search(lambda x: mech.profile_bounds(x).upper <= delta_g)
    # the lower end: galloping down from the upper one (a few ulps where the profile is tight)
    top, step = bits(upper), 1
    while True:
        cand = max(top - step, 0)
        if cand == 0 or mech.profile_bounds(flt(cand)).lower > delta_g:
            break
        step *= 4
    lo, hi = cand, top  # lower(flt(lo)) > delta_g (or lo = 0), and not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mech.profile_bounds(flt(mid)).lower > delta_g:
            lo = mid
        else:
            hi = mid
    return Bounds(flt(lo), upper)


def _split_negligible_sources(work: Workload, budget: float):
    """(rest, sigma, events): the workload without its mechanism sources whose largest losses
    sum to sigma = sum count max(top, 0) <= ``budget`` (smallest first; ``rest`` None when
    none qualifies), and the delta events their truncation tails add on the upper side (a
    law with a continuous part leaves at most its tail above its support's top, per copy).

    Why the rest is a lower bound: a source's loss law P_s has E_P[e^{-L_s}] = Q(p > 0) <= 1,
    and g(z) = (1 - c z)_+ is convex and decreasing, so by Jensen E[g(e^{-L_s})] >= g(1): H
    only grows when a source is added.  A leaf conditioned on no +inf event (a Pair with q = 0
    outcomes, a Profile's delta) has E[e^{-L}] = Q(finite)/(1 - a), possibly above 1, and is
    never left out (Pair((0.708, 0.292), (1, 0)) beside a black box: H fell from 0.35 to ...
    the black box's 0.46, a lower bound 15 % above the optimum)."""
    sized = []
    for s in work.sources:
        top = s.finite_top
        if math.isfinite(top) and not s.conditional:
            sized.append((up(s.count * max(top, 0.0), 1), s))
    sized.sort(key=lambda t: t[0])
    total, gone = 0.0, []
    for size, s in sized:
        nxt = up(total + size, 1)
        if nxt > budget:
            break
        total = nxt
        gone.append(s)
    if not gone:
        return None, 0.0, []
    rest = Workload(work.vals, work.cnts, tuple(s for s in work.sources if s not in gone))
    events = [(s.tail, s.count) for s in gone if s.inf_mass > 0.0]
    return rest, total, events


def _shifted_up(b, sigma: float):
    """A bracket (or the ApproxTooCostly carrying one) with its upper end raised by sigma."""
    if not sigma:
        return b
    if isinstance(b, ApproxTooCostly):
        return ApproxTooCostly(str(b), _shifted_up(b.bounds, sigma))
    return Bounds(b.lower, up(b.upper + sigma, 1) if math.isfinite(b.upper) else b.upper)


def _narrowed(b, frame: Bounds, met=None):
    """A direction's bracket (or the ApproxTooCostly carrying one) intersected with a
    certified ``frame``; a size limit whose narrowed bracket meets the tolerance (``met``)
    is a result, else it stays a size limit (the caller's _worst_direction decides)."""
    if isinstance(b, ApproxTooCostly):
        inner = Bounds(max(b.bounds.lower, frame.lower), min(b.bounds.upper, frame.upper))
        return inner if met is not None and met(inner) else ApproxTooCostly(str(b), inner)
    return Bounds(max(b.lower, frame.lower), min(b.upper, frame.upper))


def _attempt(run, top: float):
    """A direction's bracket, or the ApproxTooCostly it raised (its bracket, or [0, top])."""
    try:
        return run()
    except ApproxTooCostly as exc:
        return exc if exc.bounds is not None else ApproxTooCostly(str(exc), Bounds(0.0, top))


def _worst_direction(out) -> Bounds:
    """The larger of the global directions' brackets (every direction is evaluated before a
    size limit is reported: raising on the first would report a bracket of that direction
    only, possibly below the other's -- an under-report)."""
    bounds = [b.bounds if isinstance(b, ApproxTooCostly) else b for b in out]
    worst = Bounds(max(b.lower for b in bounds), max(b.upper for b in bounds))
    failed = [b for b in out if isinstance(b, ApproxTooCostly)]
    if failed and worst.gap > 0.0 and not math.isinf(worst.lower):
        chernoff = "; its upper end a certified Chernoff bound" if "Chernoff" in str(failed[0]) else ""
        raise ApproxTooCostly(str(failed[0]).split("; best bounds")[0] + f"; best bounds {worst.lower!r} <= ... "
                              f"<= {worst.upper!r} (the larger of the two global directions{chernoff})", worst)
    return worst


def mechanism_delta_bounds(m: Mechanisms, others, eps_g: float, tol: float, *, max_points: int = MAX_POINTS,
                           info: BracketInfo | None = None, workers: int = -1, progress=None) -> Bounds:
    """Certified (lower, upper) on the optimal delta_g(eps_g) of the black-box pairs ``m``
    composed with the mechanisms ``others``, to the tolerance of
    :func:`lattice_delta_bounds` (the frame from the ends of the law, then the lattice of
    the mechanisms that matter, as in :func:`mechanism_bounds`; a mechanism left out adds
    1 - e^{-sigma} to the upper end, far below tol x the Chernoff estimate of delta)."""
    info = info if info is not None else BracketInfo()

    kw = dict(max_points=max_points, info=info, workers=workers, progress=progress)
    mu = gaussians_alone(m, others)
    if mu is not None:  # Gaussians alone: the closed form
        info.path = "closed form (GDP)"
        return gdp_delta(mu.lower, mu.upper, eps_g)
    single = _single(m, others)
    if single is not None:  # one mechanism: its certified profile is the optimum
        info.path = "profile"
        return single.profile_bounds(eps_g)
    out = []
    # truncation tails: 2^-44 of the Chernoff estimate of H(eps_g) in all
    n = sum(int(c) for _, c in others) + 1
    works = _workloads(m, others)
    est = 1.0  # (the estimate needs losses a lattice could place)
    if works[0][0].reach() <= REACH:
        theta = works[0][0].tilt_for(eps_g)
        est = math.exp(min(0.0, works[0][0].cgf(theta)[0] - theta * eps_g))
    tail = min(1e-30, max(1e-300, est * 2.0**-44 / n))
    atom_tail = min(1e-30, est * 2.0**-44 / n)
    if atom_tail > 0.0 and any(mech.kind == "atoms" for mech, _ in others):
        works = _workloads(m, others, tail, atom_tail)  # finite laws cut at their own tail
    if len(works) > 1 and all(w[0].reach() <= REACH for w in works):
        # the larger direction first (Chernoff estimates): its lower end floors the other
        def estimate(w):
            th = w[0].tilt_for(eps_g)
            return w[0].cgf(th)[0] - th * eps_g
        works.sort(key=lambda w: -estimate(w))
    for work, m_up, m_lo in works:
        for source in work.sources:  # the leaves' truncation (the guides, estimates only, keep theirs)
            if source.mech.kind != "atoms":
                source.tail = tail

        def to_delta(lo: float, hi: float, m_up=m_up, m_lo=m_lo) -> Bounds:
            return Bounds(delta_from_excess(m_lo, lo, round_up=False), delta_from_excess(m_up, hi))

        floor = max((b.lower for b in out if isinstance(b, Bounds)), default=-math.inf)
        # the ends of the law alone (exact above the top, tight one ulp below it), a frame
        # for the lattice's bracket otherwise (the truncation tails above the tops: delta events)
        tails = work.tail_events()
        lo_h, hi_h = work.near_top_excess(eps_g)
        near = Bounds(to_delta(lo_h, hi_h).lower,
                      delta_from_excess(m_up.with_events(tails) if tails else m_up, hi_h))
        if near.upper <= near.lower * (1.0 + tol) + DELTA_FLOOR or _horizontal(work, eps_g, tol, near, to_delta):
            out.append(near)
            continue
        # mechanisms whose losses stay below sigma, with 1 - e^{-sigma} far below tol x the
        # estimate of H, are left out: H_rest(x) <= H(x) <= H_rest(x - sigma) <= H_rest(x) +
        # (1 - e^{-sigma}) (a mechanism added only raises delta; L <= L_rest + sigma)
        rest, sigma, extra = _split_negligible_sources(work, max(DELTA_FLOOR, tol * est * 2.0**-6))
        run = work if rest is None else rest
        if rest is not None:
            add = up(-math.expm1(-sigma), LIBM_ULPS)
            m_up2 = m_up.with_events(extra) if extra else m_up

            def to_delta(lo: float, hi: float, m_up=m_up2, m_lo=m_lo, add=add) -> Bounds:
                return Bounds(delta_from_excess(m_lo, lo, round_up=False),
                              delta_from_excess(m_up, min(1.0, up(hi + add, 1))))

        if run.leaves_count() == 0:  # nothing left: H_rest(x) = 0 for x >= 0
            out.append(_narrowed(to_delta(0.0, 0.0), near))
        else:
            out.append(_narrowed(_attempt(lambda: _lattice_delta(run, eps_g, tol, to_delta, floor=floor, **kw), 1.0),
                                 near,
                                 lambda r: r.upper <= r.lower * (1.0 + tol) + DELTA_FLOOR))
    return _worst_direction(out)


def _horizontal(work: Workload, eps_g: float, tol: float, b: Bounds, to_delta) -> bool:
    """Whether ``b.upper`` is at most a certified lower bound of delta_opt(eps_g - tol) from
    the ends of the law (the horizontal tolerance of :func:`lattice_delta_bounds`)."""
    if eps_g - tol < 0.0:
        return False
    return b.upper <= to_delta(work.near_top_excess(eps_g - tol)[0], 1.0).lower


# --------------------------------------------------------------------------- commensurable eps: exact lattice
