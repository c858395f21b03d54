r"""The two global directions of a workload of mechanisms, and the larger of their answers.

Every mechanism of a composition sees the same two neighbouring datasets, so an asymmetric
pair (add/remove, subsampled) is composed in each *global* direction and the larger answer
reported -- never the worst direction of one step.

* :func:`direction_workloads` -- per direction, the lattice workload and the delta events
  of each side (a P-mass at +inf is a delta event; Gaussians merged by their closed form);
* :func:`epsilon_direction` / :func:`delta_direction` -- one direction's bracket: the frame
  from the ends of the law first (exact above the top atoms, or when t is far below their
  mass), else the lattice of the mechanisms that matter (those of negligible loss left out,
  :func:`~optcomp._splits.split_negligible_sources`) intersected with the frame;
* :func:`worst_direction` -- the larger bracket, every direction evaluated before a size
  limit is reported (:func:`narrowed` and :func:`attempt` carry a size limit's bracket);
* one mechanism in one copy is its certified privacy profile (:func:`single_mechanism`,
  :func:`profile_epsilon`); where the lattice cannot finish, basic composition of the
  mechanisms' profiles may still frame the answer (:func:`basic_epsilon`, :func:`basic_delta`).

Every bracket is a :class:`~optcomp._types.Bracket` (its path and passes), or the
ApproxTooCostly carrying one.
"""

from __future__ import annotations

import math
import sys

from ._inputs import Mechanisms
from ._laws import DIRECTIONS, FORWARD
from ._rounding import LIBM_ULPS, down, up
from ._types import ApproxTooCostly, Bounds, Bracket, combined
from ._lattice.workload import Source, Workload, beyond_floats, gaussian_part, inf_mass
from ._refine import DELTA_FLOOR, lattice_delta, lattice_epsilon
from ._splits import raised_by, split_negligible_sources
from .gdp import composed_mu, split_gaussians
from .loss import delta_from_excess, residual_target

EPS_FLOAT_GAP = 2.0**-48  # an eps_g bracket this narrow (relative: a few ulps) is the float floor, whatever tol


def direction_workloads(m: Mechanisms, others, tail: float = 1e-300,
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

        # (only a finite law with no finite atom is left out: a law with a continuous part
        # always has finite mass, whatever its guide shows)
        sources = tuple(s for s in (Source(mech, c, d, cut(mech)) for mech, c in rest)
                        if s.loss.size or s.mech.kind != "atoms")
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


def worst_direction(out) -> Bracket:
    """The larger of the global directions' brackets (every direction is evaluated before a
    size limit is reported: raising on the first would report a bracket of that direction
    only, possibly below the other's -- an under-report), with their diagnostics."""
    bounds = [b.bounds if isinstance(b, ApproxTooCostly) else b for b in out]
    worst = combined(max(b.lower for b in bounds), max(b.upper for b in bounds), bounds)
    failed = [b for b in out if isinstance(b, ApproxTooCostly)]
    if failed and worst.gap > 0.0 and not math.isinf(worst.lower):
        chernoff = "; its upper end a certified Chernoff bound" if "Chernoff" in str(failed[0]) else ""
        raise ApproxTooCostly(str(failed[0]).split("; best bounds")[0] + f"; best bounds {worst.lower!r} <= ... "
                              f"<= {worst.upper!r} (the larger of the two global directions{chernoff})", Bounds(*worst))
    return worst


def attempt(run, top: float):
    """A direction's bracket, or the ApproxTooCostly it raised (its bracket, or [0, top])."""
    try:
        return run()
    except ApproxTooCostly as exc:
        return exc if exc.bounds is not None else ApproxTooCostly(str(exc), Bounds(0.0, top))


def narrowed(b, frame: Bounds, met=None):
    """A direction's bracket (or the ApproxTooCostly carrying one) intersected with a
    certified ``frame``; a size limit whose narrowed bracket meets the tolerance (``met``)
    is a result, else it stays a size limit (the caller's worst_direction decides)."""
    if isinstance(b, ApproxTooCostly):
        inner = Bounds(max(b.bounds.lower, frame.lower), min(b.bounds.upper, frame.upper))
        return Bracket(*inner, "ends of the law") if met is not None and met(inner) \
            else ApproxTooCostly(str(b), inner)
    return b._replace(lower=max(b.lower, frame.lower), upper=min(b.upper, frame.upper))


def horizontal(work: Workload, eps_g: float, tol: float, b: Bounds, to_delta) -> bool:
    """Whether ``b.upper`` is at most a certified lower bound of delta_opt(eps_g - tol) from
    the ends of the law (the horizontal tolerance of :func:`lattice_delta_bounds`)."""
    if eps_g - tol < 0.0:
        return False
    return b.upper <= to_delta(work.near_top_excess(eps_g - tol)[0], 1.0).lower


def single_mechanism(m: Mechanisms, others):
    """The one mechanism of a multiset that holds nothing else (one copy, no black box that
    adds a loss or a delta), else None: its privacy profile is the optimum itself."""
    if len(others) == 1 and int(others[0][1]) == 1 and not (m.eps > 0).any() and not (m.delta > 0).any():
        return others[0][0]
    return None


def profile_epsilon(mech, delta_g: float) -> Bounds | None:
    """Certified (lower, upper) on the least x with delta(x) <= delta_g for one mechanism, by
    bisection on its certified profile (``profile_side``: each decision at the least working
    precision that makes it), over the floats' bit patterns
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

    def bounds_side(x: float, d: float) -> int:
        b = mech.profile_bounds(x)  # (once: each evaluation may cost a quadrature)
        return 1 if b.lower > d else (-1 if b.upper <= d else 0)

    side = getattr(mech, "profile_side", None) or bounds_side
    if side(0.0, delta_g) < 0:
        return Bounds(0.0, 0.0)
    if mech.kind == "atoms" and any(law.inf_lo - law.beyond_lo > delta_g
                                    for law in (mech.law(1.0, d) for d in mech.directions())):
        return Bounds(math.inf, math.inf)
    fmax = sys.float_info.max
    at_max = side(fmax, delta_g)
    if at_max > 0:
        return Bounds(fmax, math.inf)
    if at_max == 0:  # undecided at every x (delta_g = the mass at +inf): the engine's frames
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

    upper = search(lambda x: side(x, delta_g) < 0)
    # the lower end: galloping down from the upper one (a few ulps where the profile is tight)
    top, step = bits(upper), 1
    while True:
        cand = max(top - step, 0)
        if cand == 0 or side(flt(cand), delta_g) > 0:
            break
        step *= 4
    lo, hi = cand, top  # lower(flt(lo)) > delta_g (or lo = 0), and not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if side(flt(mid), delta_g) > 0:
            lo = mid
        else:
            hi = mid
    return Bounds(flt(lo), upper)



def epsilon_direction(work: Workload, m_up: Mechanisms, m_lo: Mechanisms, delta_g: float, tol: float, *,
                      floor: float, estimate, negligible: float, kw: dict):
    """One global direction's bracket on eps_g (or the ApproxTooCostly carrying it): the
    workload ``work`` with the delta events ``m_up`` (upper side) and ``m_lo`` (lower side).

    The ends of the law alone are exact when t = 0 or far below the mass of the top atoms,
    at the float floor of an answer near 1e308, and the only bracket for losses beyond the
    lattice's reach; else a frame for the lattice's bracket.  Mechanisms whose losses stay
    below a sliver sigma (sum <= ``negligible``) are left out: H_rest(x) <= H(x) <=
    H_rest(x - sigma) (a mechanism added only raises delta; L <= L_rest + sigma), so eps_g
    lies in [eps_rest, eps_rest + sigma].  ``floor``: another direction's lower end (this one
    need only fall below it); ``estimate``: a float estimate of this direction's answer."""
    t_low = residual_target(m_up, delta_g)
    t_high = residual_target(m_lo, delta_g, round_up=True)
    if t_high < 0.0:
        return Bracket(sys.float_info.max if work.beyond else math.inf, math.inf, "closed form")
    if t_low < 0.0:  # the upper side's delta events exceed delta_g; the lower side's frame
        return Bracket(work.near_top_epsilon(t_high, t_high)[0], math.inf, "ends of the law")
    tails = work.tail_events()
    t_fin = residual_target(m_up.with_events(tails), delta_g) if tails else t_low
    near = Bracket(*work.near_top_epsilon(t_fin, t_high), "ends of the law") if t_fin >= 0.0 \
        else Bracket(0.0, math.inf, "ends of the law")
    if near.lower > near.upper:  # (t_fin < t_low: the lower end from t_high stays valid)
        near = near._replace(lower=near.upper)
    if near.gap <= tol or t_high == 0.0 or near.gap <= EPS_FLOAT_GAP * near.upper < math.inf \
            or (near.upper == math.inf and near.lower >= down(sys.float_info.max, 4)):
        return near
    rest, sigma, extra = split_negligible_sources(work, negligible)
    run, t_run = (work, t_low) if rest is None else \
        (rest, residual_target(m_up.with_events(extra), delta_g) if extra else t_low)
    if run.leaves_count() == 0:  # nothing left: H_rest(x) = 0 for x >= 0
        b = Bracket(0.0, 0.0 if t_run >= 0.0 else math.inf, "closed form")
    elif t_run < 0.0:
        b = Bracket(0.0, math.inf, "closed form")
    else:
        b = attempt(lambda: lattice_epsilon(run, t_run, t_high, tol, run.top_bound(), floor=floor - sigma,
                                            estimate=estimate, **kw), run.top_bound())
    out = narrowed(raised_by(b, sigma), near, lambda r: r.gap <= tol or r.gap <= EPS_FLOAT_GAP * r.upper < math.inf)
    if isinstance(out, Bracket) and out.upper == math.inf and out.lower < down(sys.float_info.max, 4):
        # (the truncation tails alone reach delta_g, say: no finite end) a size limit, which
        # basic composition of the profiles may still narrow (:func:`basic_epsilon`)
        return ApproxTooCostly(f"the lattice found no finite upper end at delta_g={delta_g!r}; "
                               f"best bounds {out.lower!r} <= eps_g <= inf", Bounds(out.lower, out.upper))
    return out


def delta_direction(work: Workload, m_up: Mechanisms, m_lo: Mechanisms, eps_g: float, tol: float, *,
                    floor: float, estimate: float, kw: dict):
    """One global direction's bracket on delta_g(eps_g) (or the ApproxTooCostly carrying it),
    as :func:`epsilon_direction`: the ends of the law alone (exact above the top, tight one
    ulp below it; the truncation tails above the tops as delta events), else the lattice of
    the mechanisms that matter -- those whose losses stay below sigma, with 1 - e^{-sigma}
    far below tol x ``estimate`` (of H), left out: H_rest(x) <= H(x) <= H_rest(x - sigma) <=
    H_rest(x) + (1 - e^{-sigma}) -- intersected with the frame."""
    def to_delta(lo: float, hi: float) -> Bounds:
        return Bounds(delta_from_excess(m_lo, lo, round_up=False), delta_from_excess(m_up, hi))

    tails = work.tail_events()
    lo_h, hi_h = work.near_top_excess(eps_g)
    near = Bracket(to_delta(lo_h, hi_h).lower, delta_from_excess(m_up.with_events(tails) if tails else m_up, hi_h),
                   "ends of the law")
    if near.upper <= near.lower * (1.0 + tol) + DELTA_FLOOR or horizontal(work, eps_g, tol, near, to_delta):
        return near
    rest, sigma, extra = split_negligible_sources(work, max(DELTA_FLOOR, tol * estimate * 2.0**-6))
    run = work if rest is None else rest
    if rest is not None:
        m_up2, add = m_up.with_events(extra) if extra else m_up, up(-math.expm1(-sigma), LIBM_ULPS)

        def to_delta(lo: float, hi: float, m_up=m_up2, add=add) -> Bounds:  # the rest's
            return Bounds(delta_from_excess(m_lo, lo, round_up=False),
                          delta_from_excess(m_up, min(1.0, up(hi + add, 1))))

    if run.leaves_count() == 0:  # nothing left: H_rest(x) = 0 for x >= 0
        return narrowed(Bracket(*to_delta(0.0, 0.0), "closed form"), near)
    return narrowed(attempt(lambda: lattice_delta(run, eps_g, tol, to_delta, floor=floor, **kw), 1.0), near,
                    lambda r: r.upper <= r.lower * (1.0 + tol) + DELTA_FLOOR)


def basic_epsilon(exc: ApproxTooCostly, m: Mechanisms, others, delta_g: float, tol: float) -> Bracket:
    """The size limit ``exc`` of a composition of mechanisms alone (black boxes (0, 0) aside)
    whose bracket's upper end is inf, narrowed by basic composition of the mechanisms'
    certified profiles (:func:`profile_epsilon`): [max_i eps_i(delta_g), sum_i c_i
    eps_i(delta_g / n)] for n copies in all -- each global direction marginalises to one
    copy's, so delta only grows with copies (left end), and basic composition holds direction
    by direction (right end: Dwork, Kenthapadi, McSherry, Mironov and Naor 2006; Dwork and
    Roth 2014, Thm 3.16).  Black boxes (eps_j, delta_j) beside them add c_j eps_j to the
    right end and take c_j delta_j of delta_g first (the n copies share the rest), and each
    one's own least eps at delta_g joins the left end.  The narrowed bracket is the answer when it meets ``tol``; else
    ``exc`` is raised again, carrying it.  A size limit with a finite upper end keeps only the
    left end (:func:`_marginal_epsilon`)."""
    if exc.bounds is None:
        raise exc
    if exc.bounds.upper != math.inf:
        return _marginal_epsilon(exc, m, others, delta_g, tol)
    vals, cnts = m.eps.tolist(), [int(c) for c in m.count.tolist()]
    # the black boxes' own share of delta_g (sum c_j delta_j, rounded up); the rest is split
    # over the mechanisms' n copies, rounded down
    boxes = up(math.fsum(up(dj * c, 1) for dj, c in zip(m.delta.tolist(), cnts)), len(cnts) + 1)
    n = sum(int(c) for _, c in others)
    d = max(down(down(delta_g - boxes, 1) / n, 1), 0.0)
    if not d > 0.0:
        raise exc
    lower, told = _own_lower(m, others, delta_g)
    if not told:
        raise exc
    uppers = [up(e * c, 1) for e, c in zip(vals, cnts)]
    for mech, c in others:
        share = profile_epsilon(mech, d)
        if share is None:
            raise exc
        uppers.append(up(share.upper * int(c), 1))
    return _basic(exc, Bounds(lower, up(math.fsum(uppers), len(uppers))), lambda b: b.gap <= tol)


def _own_lower(m: Mechanisms, others, delta_g: float) -> tuple[float, bool]:
    """The largest single mechanism's own least eps at delta_g, from below (its certified
    profile, :func:`profile_epsilon`; each black box's, :func:`_black_box_epsilon_lower`): one
    copy is a marginal of the composition, so the optimum can only be larger.  And whether
    every profile could tell (False where one is undecided: delta_g at a mass at +inf)."""
    lower = max([_black_box_epsilon_lower(e, d, delta_g) for e, d in zip(m.eps.tolist(), m.delta.tolist())],
                default=0.0)
    told = True
    for mech, _ in others:
        one = profile_epsilon(mech, delta_g)
        if one is None:
            told = False
        else:
            lower = max(lower, one.lower)
    return lower, told


def _marginal_epsilon(exc: ApproxTooCostly, m: Mechanisms, others, delta_g: float, tol: float) -> Bracket:
    """The size limit ``exc`` (a finite bracket) with its lower end raised to every single
    mechanism's own least eps at delta_g (:func:`profile_epsilon`, and each black box's): one
    copy is a marginal of the composition, so the optimum can only be larger.  Two steps of
    Subsampled(Gaussian(10), 0.01) at delta_g 1e-300: [0.023, 0.351] -> [0.327, 0.351]."""
    lower, _ = _own_lower(m, others, delta_g)
    return _basic(exc, Bounds(lower, math.inf), lambda b: b.gap <= tol or b.gap <= EPS_FLOAT_GAP * b.upper,
                  "one mechanism's own profile as the lower end")


def _black_box_epsilon_lower(eps: float, delta: float, delta_g: float) -> float:
    """A lower bound on the least x with delta(x) <= delta_g for one black box (eps, delta)
    alone (one copy is a marginal of the composition: its optimum can only be larger).  Its
    profile is that of randomized response (Kairouz, Oh and Viswanath 2015, Thm 3.3 with one
    mechanism): delta(x) = delta + (1 - delta) (e^eps - e^x)_+ / (1 + e^eps), so the least
    x is eps + log(1 - w), w = (delta_g - delta)(1 + e^-eps)/(1 - delta); 0 where w >= 1.
    Floats: w is formed rounded up (every step up by an ulp or two) and the result charged
    LIBM_ULPS + 4 ulps down (log1p's and the sum's errors; w's own enter through log1p's
    slope 1/(1 - w) <= 2 for w <= 1/2, taken only there)."""
    if eps <= 0.0 or delta_g <= delta:
        return 0.0
    w = up(up(up(delta_g - delta, 1) * up(1.0 + up(math.exp(-eps), LIBM_ULPS), 1), 1) / down(1.0 - delta, 1), 1)
    if not w <= 0.5:
        return 0.0
    w = up(w * (1.0 + 2.0**-50), 1)  # (w's relative error, through the slope <= 2)
    return max(down(eps + math.log1p(-w), LIBM_ULPS + 4), 0.0)


def basic_delta(exc: ApproxTooCostly, m: Mechanisms, others, eps_g: float, tol: float) -> Bracket:
    """:func:`basic_epsilon` in the delta direction: [max_i delta_i(eps_g), sum_i c_i
    delta_i(eps_g / n)] from the mechanisms' certified profiles (n (eps_g / n rounded down)
    <= eps_g)."""
    if exc.bounds is None:
        raise exc
    lower = max(mech.profile_bounds(eps_g).lower for mech, _ in others)

    def met(b):
        return b.upper <= b.lower * (1.0 + tol) + DELTA_FLOOR

    if (m.eps > 0).any() or (m.delta > 0).any():  # black boxes beside: the mechanisms' own profiles, a lower end
        return _basic(exc, Bounds(lower, 1.0), met, "one mechanism's own profile as the lower end")
    n = sum(int(c) for _, c in others)
    x = max(down(eps_g / n, 1), 0.0)
    upper = min(1.0, up(math.fsum(up(mech.profile_bounds(x).upper * int(c), 1) for mech, c in others), n))
    return _basic(exc, Bounds(lower, upper), met)


_BASIC = "basic composition of the mechanisms' profiles"


def _basic(exc: ApproxTooCostly, frame: Bounds, met, note: str = _BASIC) -> Bracket:
    b = Bounds(max(exc.bounds.lower, frame.lower), min(exc.bounds.upper, frame.upper))
    if met(b):
        return Bracket(*b, "basic composition" if note == _BASIC else "marginal")
    if b == exc.bounds and note != _BASIC:  # (not narrowed: the size limit as it was)
        raise exc
    head, _, tail = str(exc).partition("; best bounds")
    if note != _BASIC and "(" in tail:  # (the bracket's own account kept: its upper end's)
        note = f"{note}; {tail[tail.index('(') + 1:].rstrip(')')}"
    raise ApproxTooCostly(head + f"; best bounds {b.lower!r} <= ... <= {b.upper!r} ({note})", b) from None
