r"""The lattice path of the drivers: grouped passes refined until the bracket meets the tolerance.

:func:`lattice_epsilon` (eps direction) and :func:`lattice_delta` (delta direction) run the
one refine loop :func:`refine` on a :class:`~optcomp._lattice.workload.Workload`: a
grouped lattice pass (:func:`~optcomp._lattice.grouped.grouped_pass`) at step h and tilt
theta, its certified bracket, then the next step from the measured gaps -- every bound
comes from the pass, whose proofs live with it; this module only chooses.

* steps h = m 2^j, 8 <= m <= 15 (:func:`step_below`): the first is the one whose gap is
  predicted ~0.75 tol (:func:`initial_step`; in the delta direction the eps gap times
  lambda = |d log H/dx|, :func:`log_slope`), usually the only pass; then
  :func:`next_step` from the measured gaps and their measured order in h;
* the tilt is re-aimed at the middle of the bracket;
* a pass past ``max_points`` or the memory budget (:mod:`optcomp._memory`), or six steps
  without progress, is a size limit (:class:`~optcomp._types.ApproxTooCostly` carrying the
  best bracket so far), whose upper end :func:`chernoff_fallback` lowers to the certified
  Chernoff bound when that is smaller.

Only the cost depends on these choices, never the bounds.  Both drivers return a
:class:`~optcomp._types.Bracket` (path "lattice", the passes run).
"""

from __future__ import annotations

import gc
import math
import time

from ._types import ApproxTooCostly, Bounds, Bracket
from ._lattice.grouped import POWER_COPIES, SLACK_REL, grouped_pass, squared_powers, squaring_cap
from ._lattice.leaves import Power
from ._lattice.passes import LatticePass
from ._lattice.workload import Workload
from ._laws import REACH
from .loss import excess_lower


DELTA_FLOOR = 2.0**-1000  # absolute delta accuracy always accepted (~1e-301: float's own floor)


DELTA_FLOAT_GAP = 2.0**-40  # accepted only when refining the lattice no longer helps (see lattice_delta_bounds)


FLOOR_AIM = 0.25  # a floored direction's first gap: this fraction of its estimated distance to the floor


MEMORY_RETRIES = 3  # coarser first passes tried when the first one does not fit the memory budget


COARSE_SHARE = 16  # the coarse pass after a size limit aims at max_points / this (its leaves' and squarings' points)


SQUARED_SHARE = 64  # the squared retry's squarings stay within max_points / this (~40 long-double levels at most)


FLOOR_CHERNOFF_SOURCES = 8  # a floored direction of at least this many sources (each a Power node of more than
# POWER_COPIES copies: a pass pays ~10 ms a node, an exact MGF bound ~4 ms a source) tries :func:`floor_chernoff`
FLOOR_CHERNOFF_MARGIN = 0.9  # first, when its estimate is at most this fraction of the floor (the bound is
# ~8 % above the optimum for DP-SGD's subsampled Gaussians at delta 1e-5: one that cannot answer costs its MGFs)
FLOOR_CHERNOFF_TILTS = 16  # its tilt rounded to a grid 2^(1/16) apart (a pure function of the grid point: cached)


STEP_MANTISSA_BITS = 4  # steps h = m 2^j with an integer 8 <= m <= 15: consecutive steps 1/8 apart at most


def lattice_epsilon(work: Workload, t_low: float, t_high: float, tol: float, top: float, *, max_points: int,
                     workers: int, progress, floor: float = -math.inf, estimate: float | None = None) -> Bracket:
    """The grouped lattice path of the eps direction for any workload (randomized-response
    groups and mechanism leaves): passes at steps h refined until the bracket on the least
    x with H(x) <= t (``t_low`` <= t <= ``t_high``) is at most ``tol`` wide, or its upper end
    is at most ``floor`` (a lower bound of another global direction's answer: this one then
    cannot be the larger); ``top`` caps the upper bound (the largest finite loss, or inf).
    ``estimate``: a float estimate of this direction's answer (only the first step depends
    on it: a gap of FLOOR_AIM times its distance below ``floor`` settles the direction)."""
    within_reach(work, "eps_g")
    x_est = work.chernoff_guess(t_low)
    # a direction floored by another's lower end need only fall below it: its first pass
    # aims at a gap of a fraction of the estimated distance (the refinement goes on from
    # the measured gap at tol when that does not settle it)
    first_tol = max(tol, FLOOR_AIM * (floor - estimate)) if math.isfinite(floor) and estimate is not None else tol
    h = initial_step(work.weight(work.tilt_for(x_est)), first_tol)
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
            raise with_bracket(exc, best, "eps_g") from None
        b = Bounds(min(lp.epsilon_bounds(t_low, t_high).lower, top), top)
        if b.gap <= tol:
            return Bracket(*b, "lattice", [dict(h=h, points=lp.points, lower=b.lower, upper=b.upper, theta=lp.theta)])
        raise ApproxTooCostly(
            f"the residual target t = 1 - (1 - delta_g)/prod(1 - delta_i) is positive but below the float "
            f"range (delta_g within ~1e-308 of 1 - prod(1 - delta_i)): the lattice's float64 masses cannot "
            f"resolve it, so its upper bound is the largest loss (tol={tol:g}); best bounds {b.lower!r} <= eps_g "
            f"<= {b.upper!r}. method='optimal' settles such targets with scaled masses where it is exact.", b)
    if math.isfinite(floor) and estimate is not None and 0.0 < estimate <= FLOOR_CHERNOFF_MARGIN * floor \
            and len(work.sources) >= FLOOR_CHERNOFF_SOURCES and all(s.count > POWER_COPIES for s in work.sources):
        # a floored direction well below its floor: one certified Chernoff bound from the steps'
        # exact MGFs may already show it (no lattice pass: ~0.4 s against ~1 s for 100 groups of
        # subsampled Gaussian steps), else the passes as below
        x = floor_chernoff(work, t_low, work.tilt_for(floor))
        if x <= floor:
            return Bracket(0.0, min(x, top), "Chernoff bound")
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

    memo = {}

    def chernoff() -> float:
        if "c" not in memo:
            memo["c"] = least_chernoff(work, h, work.tilt_for(x_est),
                                       lambda th, step: work.chernoff_epsilon(t_low, th, step))
        return memo["c"]

    def useless() -> float:
        # a first pass whose predicted gap (0.75 first_tol at h, second order) reaches the
        # certified Chernoff end brackets nothing it does not ([~0, >= that]): the size limit
        # then answers at once (the float guess x_est is no scale: it can be negative)
        c = chernoff()
        return h * math.sqrt(c / (0.75 * first_tol)) if c < math.inf else math.inf

    return chernoff_fallback(
        lambda: refine(work, h, log_slack, tol, lambda: work.tilt_for(aim["x"]), evaluate, finished,
                        lambda b: b.gap, ("certified gap", "eps_g"), stalled, best, max_points=max_points,
                        workers=workers, progress=progress, useless_step=useless),
        chernoff, "eps_g", Bounds(0.0, top))


def floor_chernoff(work: Workload, t: float, theta: float) -> float:
    """:meth:`~optcomp._lattice.workload.Workload.exact_chernoff_epsilon` at ``theta`` rounded
    to a grid FLOOR_CHERNOFF_TILTS per octave (any tilt gives a bound; the grid's tilts repeat
    across calls, and the steps' exact MGF bounds are cached by tilt)."""
    if not 0.0 < theta < math.inf:
        return math.inf
    theta = 2.0 ** (round(FLOOR_CHERNOFF_TILTS * math.log2(theta)) / FLOOR_CHERNOFF_TILTS)
    if not 0.0 < theta < math.inf:
        return math.inf
    return work.exact_chernoff_epsilon(t, theta)


def lattice_delta(work: Workload, eps_g: float, tol: float, to_delta, *, max_points: int, workers: int,
                  progress, floor: float = -math.inf) -> Bracket:
    """The grouped lattice path of the delta direction for any workload: passes at steps h
    refined until ``to_delta`` of the bracket on H(eps_g) meets the tolerance of
    :func:`lattice_delta_bounds`, or its upper end is at most ``floor`` (another global
    direction's lower bound)."""
    within_reach(work, "delta_g")
    theta = work.tilt_for(eps_g)
    # relative gap of H ~ lambda x the gap in eps (lambda = |d log H / dx| ~ theta at the tilt)
    lam = min(log_slope(work, theta), 1.0 + theta)
    h = initial_step(work.weight(theta), tol / lam)
    log_h = work.cgf(theta)[0] - theta * eps_g  # the float Chernoff estimate of log H(eps_g)
    # H(eps_g) below float's floor (eps_g = 1e308): the certified Chernoff bound, no lattice
    # (tried only where the float estimate of log H says so: it builds every leaf once)
    if log_h < math.log(DELTA_FLOOR) - 8.0:
        near_zero = to_delta(0.0, work.chernoff_delta(eps_g, theta, chernoff_step(work, h)))
        if near_zero.gap <= DELTA_FLOOR:
            return near_zero
    # the untilted mass sent to +inf: a tiny fraction of the Chernoff estimate of H(eps_g)
    log_slack = (log_h + math.log(1e-6 * max(SLACK_REL, min(2.0**-20, tol / 64.0)) / (4 * work.leaves_count() + 4)))

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
    # a first pass whose predicted gap in eps (0.75 tol / lam at h, second order) is 16 / lam
    # or more brackets H within a factor ~e^16 at best: the size limit answers at once (Chernoff)
    def useless() -> float:
        return h * math.sqrt(16.0 / (0.75 * tol))

    try:
        return chernoff_fallback(
            lambda: refine(work, h, log_slack, tol, lambda: theta, evaluate, finished,
                            lambda b: b.gap / b.upper, ("delta gap", "delta_g"), stalled, best, max_points=max_points,
                            workers=workers, progress=progress, useless_step=useless),
            lambda: to_delta(0.0, least_chernoff(work, h, theta, lambda th, step: work.chernoff_delta(eps_g, th, step))
                             ).upper, "delta_g",
            to_delta(0.0, 1.0))
    except ApproxTooCostly as exc:
        # a size limit whose (Chernoff) bracket is within float's own floor of 0 is an answer
        if exc.bounds is not None and exc.bounds.gap <= DELTA_FLOOR:
            return Bracket(*exc.bounds, "Chernoff bound")
        raise


def refine(work: Workload, h: float, log_slack: float, tol: float, theta_for, evaluate, finished, measure,
            names: tuple, stalled, best: Bounds, *, max_points: int, workers: int, progress,
           useless_step=lambda: math.inf) -> Bracket:
    """The one refine loop of both drivers: a grouped lattice pass at step h and tilt
    ``theta_for()``, its certified bracket ``evaluate(pass, best)``, until
    ``finished(bracket, pass)`` (True: return it, with the passes run; "again": the same step, re-aimed); else the
    next step from the measured gaps (``measure``: absolute in eps, relative in delta;
    second order in h, :func:`next_step`), ``stalled(...)`` after six steps without
    progress or when a step twice finer or more narrowed the gap by less than 10%,
    :class:`ApproxTooCostly` (with ``best``; ``names`` for its message) when a pass would
    exceed ``max_points`` or the memory budget (:mod:`optcomp._memory`; when no pass has
    answered yet, up to ``MEMORY_RETRIES`` coarser ones are tried first, for a bracket).  The
    coarse pass after a size limit is not run when its step exceeds ``useless_step()``, the
    caller's estimate of the step whose bracket would say nothing (10^9 subsampled steps: 15 s
    a direction for [0, 3573] beside a Chernoff end of 2169.5).  (Memory retries are cheap
    beside the refused pass and are run: 10^8 subsampled steps, refused at the root after
    ~17 s, get their lower end 7.18 from a 0.5 s retry.)

    A size limit or a stall met after a bracket, in a workload with a Power of more than
    POWER_COPIES copies, is first retried once at the first pass's step with every Power
    squared (:func:`~optcomp._lattice.grouped.squared_powers`, long double; its squarings
    within max_points / SQUARED_SHARE points): the one-FFT power's error bound, k times its transform's,
    can be what holds the bracket (a subsampled Gaussian, q = 1e-4, sigma 0.8, 100 steps at
    delta_g 1e-12: [0.244, 0.365] as a size limit, [0.3609, 0.3615] squared).  The first step,
    not the last: where float error holds the bracket, a finer step (more points, each charged)
    is worse.  The refinement then goes on squared; the retry's bracket is intersected with the
    best so far."""
    gaps: list[float] = []
    steps: list[float] = []
    passes: list[dict] = []
    coarser, refused = 0, 0.0
    limit = None  # the size limit met before any pass: raised after one coarse pass, with its bracket
    squared, pending, first_h = False, None, None  # (the squared retry: its mode, the error it answers, its step)
    powered = any(isinstance(item, Power) and item.count > POWER_COPIES for item in work.plan(h))

    def squared_retry(exc: ApproxTooCostly) -> bool:
        # the one retry with every Power squared, at the first pass's step (the docstring)
        nonlocal squared, pending, h
        if squared or first_h is None or not powered:
            return False
        squared, pending, h = True, exc, first_h
        return True

    def beyond_positions(h: float) -> bool:
        # lattice positions h n are exact only for |n| < 2^49: a step this fine against
        # sum c eps is the same size limit as max_points, never an internal error
        return work.span(h) / h + 8.0 >= 2.0**49

    while True:
        theta = theta_for()
        points = work.points(theta, h)
        if points > max_points or beyond_positions(h):
            gap, quantity = names
            limit = (f"a {gap} <= tol={tol:g} needs a lattice step h={h:g} with about {points:,} points "
                     f"(> max_points={max_points:,}, or positions beyond 2^49 steps)")
            coarse = None
            if not gaps:  # no bracket yet: one pass at ~1/COARSE_SHARE of the budget gives one
                step = h
                for _ in range(64):
                    if step > useless_step():
                        break
                    if work.points(theta, step) <= max_points / COARSE_SHARE and not beyond_positions(step):
                        coarse = step
                        break
                    step = step_below(step * 2.0)
            if coarse is None:
                exc = ApproxTooCostly(f"{limit}; best bounds so far {best.lower!r} <= {quantity} <= {best.upper!r}. "
                                      "Raise tol (or eta) or max_points.", best)
                if squared_retry(exc):
                    limit = None
                    continue
                raise exc
            h = coarse
        t0 = time.perf_counter()
        lp = None  # (the previous pass's arrays are not kept during this one)
        failure = None  # (memory, message) of a pass refused by the budget
        try:
            # the coarse pass after a size limit: no squaring beyond its own aim (its workload
            # estimate does not see the bias of coarse leaves)
            cap = max_points / SQUARED_SHARE if squared else (max_points / COARSE_SHARE if limit is not None
                                                              else math.inf)
            with squaring_cap(cap), squared_powers(squared):
                lp = grouped_pass(work.vals, work.cnts, h, theta, log_slack, workers, work.plan(h), progress)
        except ApproxTooCostly as exc:  # the memory budget (or a leaf too large): the best bracket so far
            if exc.bounds is not None:
                raise
            failure = (getattr(exc, "memory", None), str(exc))
        if failure is not None:
            memory, message = failure
            if pending is not None:  # the squared retry refused (its cap, or memory): the error it answered
                raise pending
            if memory is not None:
                refused = max(refused, h)
                # the refused pass's arrays (a slice of leaves held by its suspended generator,
                # nodes) are held by a reference cycle (the exception's traceback, through the
                # pass's frames and futures) until the cyclic collector runs: freed now, once
                # the exception is gone (collected inside its except block, the cycle was
                # still reachable), before a coarser pass allocates its own
                gc.collect()
            if not gaps and memory is not None and coarser < MEMORY_RETRIES:
                # no bracket yet: a coarser pass that fits the budget gives one (the memory of a
                # pass grows like 1/h or faster -- 10^9 subsampled steps: 10^9 points at h = 3.3e-6,
                # 2.7e5 at 5.7e-5, where the bias of coarse leaves, ~k h, spreads the law -- so at
                # most 8x coarser at a time: far coarser, that bias leaves a bracket that says little)
                coarser += 1
                h = step_below(h * min(8.0, 4.0 * memory[0] / memory[1]))
                continue
            gap, quantity = names
            if limit is not None:  # the coarse pass after a size limit, refused too
                raise ApproxTooCostly(f"{limit}; a coarse pass at h={h:g} was refused too ({message}); best bounds "
                                      f"so far {best.lower!r} <= {quantity} <= {best.upper!r}. Raise tol (or eta) "
                                      "or max_points.", best)
            raise ApproxTooCostly(f"a {gap} <= tol={tol:g} needs a lattice step h={h:g}, at which {message}; best "
                                  f"bounds so far {best.lower!r} <= {quantity} <= {best.upper!r}. Raise tol (or "
                                  "eta) or max_memory.", best)
        b = evaluate(lp, best)
        if pending is not None:  # the squared retry: both brackets are certified
            b = Bounds(max(b.lower, best.lower), min(b.upper, best.upper))
            pending = None
        first_h = h if first_h is None else first_h
        passes.append(dict(h=h, points=lp.points, lower=b.lower, upper=b.upper, theta=lp.theta,
                           seconds=time.perf_counter() - t0))
        if progress is not None:
            progress(dict(stage="lattice", step=h, points=lp.points, lower=b.lower, upper=b.upper, gap=b.gap,
                          tol=tol, seconds=time.perf_counter() - t0))
        best = b
        verdict = finished(b, lp)
        if verdict is True:
            return Bracket(*b, "lattice", passes)
        if limit is not None:  # the coarse pass's bracket: the best the size limit allows
            gap, quantity = names
            raise ApproxTooCostly(f"{limit}; best bounds (a pass at h={h:g}) {b.lower!r} <= {quantity} <= "
                                  f"{b.upper!r}. Raise tol (or eta) or max_points.", b)
        if verdict == "again":
            continue
        gap = measure(b)
        gaps.append(gap)
        # the pass's own step: a self-composition pass aligns it to its law's unit u
        # (selfcompose._pass_step), so every step asked above u gives one and the same pass
        # -- refining the asked step would then seem to bring no progress
        steps.append(lp.h)
        # a step at least twice finer that left the gap where it was: not the lattice's gap
        # (second order in h, first for tiny eps), so finer passes -- each dearer in time and
        # memory -- would not narrow it either (e.g. a continuous law's leaf whose bracket near
        # a point mass does not depend on h); or six steps without progress
        if (len(gaps) > 6 and gap > 0.9 * gaps[-7]) or \
                (len(gaps) >= 2 and steps[-2] >= 2.0 * steps[-1] and gap > 0.9 * gaps[-2]):
            try:
                return Bracket(*stalled(b, gap, h), "lattice", passes)
            except ApproxTooCostly as exc:
                if squared_retry(exc):
                    continue
                raise
        h = next_step(steps, gaps, tol)
        if h <= refused:  # a finer step than one the memory budget refused: the bracket so far
            gap, quantity = names
            raise ApproxTooCostly(f"a {gap} <= tol={tol:g} needs a lattice step h={h:g}, finer than h={refused:g} "
                                  f"which exceeds the memory budget; best bounds so far {b.lower!r} <= {quantity} "
                                  f"<= {b.upper!r}. Raise tol (or eta) or max_memory.", b)


def step_below(x: float) -> float:
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


def next_step(steps, gaps, tol) -> float:
    """The next lattice step (:func:`step_below`): the gap is second order in h (refinement
    and garbling of every mechanism with eps_i >> h) but first order in the contribution
    of mechanisms with eps_i < h/4 (the garbling drops them); the local order is measured
    from the last two passes.  At least a factor 4/3 and at most 16 per pass."""
    h, gap = steps[-1], gaps[-1]
    if not gap < math.inf:  # a pass with no finite upper end (e.g. delta_g ~1e-320): refine all the way
        return step_below(h / 16.0)
    order = 2.0
    if len(gaps) >= 2 and steps[-2] > h:
        ratio = gaps[-2] / gap if gap > 0 else math.inf
        order = min(2.0, max(0.5, math.log(max(ratio, 1.0)) / math.log(steps[-2] / h)))
    target = h * (0.6 * tol / gap) ** (1.0 / order)
    return max(step_below(h / 16.0), min(step_below(0.75 * h), step_below(target)))


def initial_step(n: float, tol: float) -> float:
    """A step (:func:`step_below`) whose predicted gap is ~0.75 tol for n refined leaves:
    each leaf's refinement and garbling cost ~0.14-0.24 h^2 (measured: 0.14 for binomial
    group leaves, 0.17-0.2 for bundles of singletons, 0.23 for bundles of small groups;
    second order, one per leaf whatever its mechanisms), so one pass usually suffices;
    otherwise the next step comes from the measured gap (:func:`next_step`)."""
    h = min(math.sqrt(0.75 * tol / max(n, 0.2)), 0.25)
    return step_below(h)


def log_slope(work: Workload, theta: float) -> float:
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


def within_reach(work: Workload, quantity: str) -> None:
    """A size limit (no bracket: the caller's frame) when a leaf's losses exceed
    :data:`~optcomp._laws.REACH` (2^40): no lattice step places them."""
    reach = work.reach()
    if not reach <= REACH:
        raise ApproxTooCostly(f"losses up to {reach:g} lie beyond the lattice's reach ({REACH:g}): {quantity} is "
                              "bracketed from the ends of the law only", None)


def with_bracket(exc: ApproxTooCostly, bounds: Bounds, quantity: str, note: str = "") -> ApproxTooCostly:
    """``exc`` (a size limit) again, carrying ``bounds`` (its message's bracket rewritten)."""
    return ApproxTooCostly(f"{str(exc).split('; best bounds')[0]}; best bounds {bounds.lower!r} <= {quantity} "
                           f"<= {bounds.upper!r}{note}", bounds)


def chernoff_step(work: Workload, h: float) -> float:
    """The step the Chernoff fallback builds mechanism leaves at: h, or coarser so that the
    widest leaf has at most ~2^12 cells (any step gives a certified bound)."""
    widest = max((s.width for s in work.sources), default=0.0)
    return max(h, step_below(widest / 4096.0)) if widest > 0.0 else h


CHERNOFF_CELLS = (2**12, 2**14, 2**16, 2**18)  # the leaves' cells, all together, at the steps the fallback tries
CHERNOFF_TILTS = (0.5, 0.7, 1.0, 1.4, 2.0)  # and the multiples of the driver's tilt
CHERNOFF_SPAN = 8  # then, at the best step, tilts 2^-8..2^8 times the best
CHERNOFF_GOLDEN = 12  # and golden-section steps between the neighbours of the least


def least_chernoff(work: Workload, h: float, theta: float, bound) -> float:
    """The least certified Chernoff bound ``bound(tilt, step)`` over a few steps and tilts:
    every pair gives a certified bound, and neither the driver's tilt (aimed at a float
    estimate) nor one step is the best -- a leaf's MGF bound charges its cells' mass errors
    and garbling, which for 10^9 subsampled Gaussians move the bound from 2636 (2^12 cells)
    to 2169.5 (2^18 cells; the same Chernoff inequality from the exact per-step MGF gives
    2164.9 at its best tilt, tests/test_chernoff.py; with the search below, 2166.7).  The steps:
    :func:`chernoff_step`'s and those at which the leaves have CHERNOFF_CELLS cells in all
    (builds ~2^19 cells; without mechanism leaves the step plays no part and one is tried).
    Then, at the best step, tilts 2^-CHERNOFF_SPAN..2^CHERNOFF_SPAN of the best grid tilt and a
    golden section between the least's neighbours (a source whose mechanism bounds its exact
    MGF, :meth:`~optcomp._lattice.workload.Workload._mgf_bound`, makes far tilts worth trying:
    10^12 subsampled Gaussian steps at q = 1e-8 and delta_g 1e-10, 4.38 on the grid, 0.6596 after,
    the exact-MGF minimum)."""
    widths = sum(s.width for s in work.sources)
    steps = {chernoff_step(work, h)}
    if widths > 0.0:
        steps |= {step_below(widths / cells) for cells in CHERNOFF_CELLS}
    best, at = math.inf, None
    for step in sorted(steps, reverse=True):
        for f in CHERNOFF_TILTS:
            b = bound(theta * f, step)
            if b < best:
                best, at = b, (theta * f, step)
    if at is None or not at[0] > 0.0:
        return best
    # the driver's tilt is aimed at a float estimate that can be far off (10^12 subsampled
    # Gaussian steps at q = 1e-8: 4.38 at its best grid tilt, 0.66 at a tilt 1/8 of it): at the
    # best step, tilts a factor 2 apart over 2^-8..2^8 of the best, then a golden section between
    # the neighbours of the least -- every evaluation a certified bound, whatever the search finds
    th, step = at
    grid = [th * 2.0**j for j in range(-CHERNOFF_SPAN, CHERNOFF_SPAN + 1)]
    vals = [bound(t, step) if t != th else best for t in grid]
    i = min(range(len(grid)), key=vals.__getitem__)
    best = min(best, vals[i])
    lo, hi = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, len(grid) - 1)])
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = bound(math.exp(a), step), bound(math.exp(b), step)
    for _ in range(CHERNOFF_GOLDEN):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = bound(math.exp(a), step)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = bound(math.exp(b), step)
    return min(best, fa, fb)


def chernoff_fallback(run, chernoff, quantity: str, trivial: Bounds) -> Bounds:
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
        raise with_bracket(exc, Bounds(min(b.lower, c), c), quantity, " (the upper end a certified Chernoff bound)") from None

