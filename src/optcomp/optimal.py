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
  exactly, each atom's exact position recoverable from its indices.  Beyond
  ``FULL_ENUMERATION`` atoms each factor is narrowed to a window of its binomial whose two
  tails weigh at most 2^-50 t / (2 groups) (Chernoff quantiles, checked by the geometric
  series of the pmf ratio): the mass below a window is lumped at its lowest atom, the mass
  above it put at +inf (upper bounds; both dropped for lower bounds), so the root moves by
  what a 2^-50 relative change of t moves it -- as the one-group window's tail does.  In the
  delta direction the windows are aimed at a Chernoff estimate of H(eps_g) and narrowed
  until their mass is below 2^-50 of the H found.  A window's lower edge is then raised to
  where its lumped mass adds nothing to H at eps_g (delta direction), or at a guess under
  the root checked after solving (:func:`_mitm_epsilon`): 10^12 mechanisms of 1e-6 beside
  one of 0.5 list 4.6 M atoms, not 10.6 M.  Then the windows are listed, or go to
  meet in the middle: 10^7 mechanisms of eps 20 beside 10^7 of eps 30 (n_j - M_j is
  ~Poisson(0.02)) list 12 x 6 atoms instead of meeting 10^7 x 10^7 in the middle (47 s).
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

import numpy as np

from ._inputs import Mechanisms
from ._memory import budgeted, current as _memory_budget
from ._rounding import dot_dir, down
from ._types import ExactTooLarge
from ._exact.atoms import (  # noqa: F401  (binomial_*, product_*, exact_*_bounds, BIG_EPS: re-exported)
    UNDERFLOW_SCALE,
    BIG_EPS,
    _LOG_FLOOR,
    _TAIL,
    _atom_count,
    _full_count,
    _homogeneous_epsilon,
    _homogeneous_excess,
    _point_mass,
    _product_below_bulk,
    _range,
    _scale_for,
    _split_groups,
    binomial_atoms,
    binomial_window,
    exact_epsilon_bounds,
    exact_excess_bounds,
    log_excess_guess,
    product_atoms,
    product_distribution,
    _product,
    raise_lower_edges,
    solved_near_the_root,
    window_charges,
    window_groups,
)
from ._exact.mitm import _MeetInTheMiddle, _split

_REEXPORTED = (BIG_EPS,)  # optcomp.region reads optimal.BIG_EPS
from ._exact.finite import SMALL_ATOMS, SmallLaw, compositions
from ._exact.precise import _exact_distance_excess, _precise_epsilon, _precise_excess
from .loss import delta_event_bounds, delta_from_excess, residual_target, solve_segments

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
MITM_BYTES = 96  # memory per atom of the two halves of meet in the middle (~80 measured at 2^20-2^24 atoms)
FULL_ENUMERATION = 2**15  # up to this many atoms, list the whole distribution (else meet in the middle)


# --------------------------------------------------------------------------- helpers


def _max_loss(m: Mechanisms) -> float:
    """sum_i eps_i rounded up: the largest finite privacy loss (basic composition)."""
    return dot_dir(m.count, m.eps, True)


# --------------------------------------------------------------------------- public


def _distribution_kind(groups, max_atoms: int):
    log2_total = sum(math.log2(_range(g)[1] - _range(g)[0] + 1) for g in groups)  # (windows as windows)
    if log2_total > 2.0 * math.log2(max_atoms) + 1.0:  # no split can fit: say so at once
        raise ExactTooLarge(
            f"exact optimal composition of these {sum(g[1] for g in groups)} mechanisms "
            f"({len(groups)} distinct eps values) needs about 2^{log2_total:.0f} loss atoms, beyond "
            f"meet in the middle with max_atoms={max_atoms} per half; computing it exactly is "
            "#P-complete (MV Thm 1.6) — use method='approx' (MV Thm 1.7, certified bounds) instead"
        )
    total = _atom_count(groups)
    if total <= FULL_ENUMERATION:
        return "full", total
    halves, sizes = _split(groups)
    if max(sizes) <= max_atoms:
        _memory_budget().need(MITM_BYTES * (sizes[0] + sizes[1]), f"exact optimal composition of these "
                              f"{sum(g[1] for g in groups)} mechanisms by meet in the middle (two halves of "
                              f"{sizes[0]:.3g} and {sizes[1]:.3g} loss atoms)", ExactTooLarge)
        return "mitm", (halves, sizes)
    raise ExactTooLarge(
        f"exact optimal composition of these {sum(g[1] for g in groups)} mechanisms "
        f"({len(groups)} distinct eps values) needs about {total:.3g} loss atoms "
        f"(meet in the middle: two halves of {sizes[0]:.3g} and {sizes[1]:.3g} > max_atoms={max_atoms}); "
        "computing it exactly is #P-complete (MV Thm 1.6) — use method='approx' "
        "(MV Thm 1.7, certified upper bound) instead"
    )


def _check_max_atoms(max_atoms) -> int:
    if isinstance(max_atoms, bool) or not isinstance(max_atoms, (int, np.integer)) or max_atoms < 2:
        raise ValueError(f"max_atoms must be an integer >= 2, got {max_atoms!r}")
    return int(max_atoms)


def _exact_solver(m: Mechanisms, max_atoms: int, log_t: float | None = None):
    """('homogeneous' | 'full' | 'mitm' | 'none', payload, shift, slack) for the positive
    part of the multiset (raises ExactTooLarge before any allocation); with ``log_t`` (the
    log of the target t), a product beyond FULL_ENUMERATION atoms is narrowed to windows
    (:func:`window_groups`) before the choice."""
    groups, shift, slack = _split_groups(m)
    if not groups:
        return "none", None, shift, slack
    if len(groups) == 1:
        return "homogeneous", groups[0], shift, slack
    if log_t is not None and _full_count(groups, FULL_ENUMERATION) > FULL_ENUMERATION:
        groups = window_groups(groups, log_t, 2 * max_atoms**2)
    kind, info = _distribution_kind(groups, max_atoms)
    return kind, (groups if kind == "full" else info[0]), shift, slack


@budgeted
def optimal_epsilon(m: Mechanisms, delta_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g): MV Thm 1.5 (KOV Thm 3.3).

    The least eps_g >= 0 such that
    ``1/prod(1+e^{eps_i}) sum_S max(e^{sum_S eps} - e^{eps_g} e^{sum_{not S} eps}, 0)
    <= 1 - (1 - delta_g)/prod(1 - delta_i)``, returned rounded *up* (never below the
    optimum; a few ulps above it).  ``math.inf`` when delta_g < 1 - prod(1 - delta_i).
    Raises :class:`ExactTooLarge` when no exact algorithm fits in ``max_atoms`` or in the
    memory budget ``max_memory`` (bytes, default 1.5 GiB: :mod:`optcomp._memory`).

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
    if delta_event_bounds(m)[1] + top <= delta_g * (1.0 - 1e-9):
        # a tiny total loss (e.g. 10^12 x 5e-324): delta(x0) <= A + H(0) <= A + (1 - e^{-top})
        # <= A + top, below delta_g by far more than optimal_delta's float charges (~1e-13
        # relative), so the check below would pass; skip its 10^7-atom evaluation
        return x0
    excess = optimal_delta(m, x0, max_atoms=max_atoms) - delta_g
    if excess <= 0.0:
        return x0
    t = residual_target(m, delta_g)
    a_lo = delta_event_bounds(m)[0]
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
        return min(_underflowed_root(m, delta_g, max_atoms, shrink), top)
    if top <= t:  # H(0) <= 1 - e^{-top} <= top <= t: the root is 0, exactly (tiny total loss)
        return 0.0
    try:
        kind, info, shift, slack = _exact_solver(m, max_atoms, math.log(t))
    except ExactTooLarge:
        from ._lattice.commensurable import commensurable_bounds  # eps_i = n_i u: the lattice u Z is exact

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
        return min(_mitm_epsilon(info, shift, slack, t, max_atoms), top)
    if 0.0 < x < math.inf and _full_count(groups, REFINE_ATOMS) <= REFINE_ATOMS:  # (never a windowed product)
        # a small distribution whose root sits where H is flat (delta_g near the mass above
        # it) amplifies the float64 error bounds: settle it in 40 digits when they are loose
        t_high = residual_target(m, delta_g, round_up=True)
        lower = _homogeneous_epsilon(eps, n, t_high, shift, slack, upward=False) if kind == "homogeneous" \
            else dist.epsilon_lower(t_high)
        if x - lower > REFINE_REL * x:
            x = min(x, _precise_epsilon(m, groups, shift, slack, delta_g, shrink))
    return min(x, top)




def _mitm_epsilon(halves, shift, slack: float, t: float, max_atoms: int) -> float:
    """The root of the charged H(x) = t of a product beyond FULL_ENUMERATION atoms, met in the
    middle -- first with every factor's lower edge raised to where its lumped mass sits at or
    below a guess under the root (:func:`raise_lower_edges`): the Chernoff point x_c with
    P0[L > x_c] <= t (above the root, since H(x) <= P0[L > x]) less two standard deviations
    of the loss.  That root r bounds the optimum from above (lumping only raises H) and is
    the same root when r >= the lumps' threshold (H unchanged from there on, and above t
    just left of r); else the unraised windows are met in the middle."""
    def met(raised):
        kind, info = _distribution_kind(raised, max_atoms)
        if kind == "full":
            return solve_segments(product_distribution(raised, shift, slack, lower=True,
                                                       log2_scale=_scale_for(t)), t)
        return _MeetInTheMiddle(*info[0], shift=shift, slack=slack, log2_scale=_scale_for(t)).epsilon(t)

    r = solved_near_the_root(list(halves[0]) + list(halves[1]), shift, t, met)
    if r is not None:
        return r
    return _MeetInTheMiddle(*halves, shift=shift, slack=slack, log2_scale=_scale_for(t)).epsilon(t)


def _underflowed_root(m: Mechanisms, delta_g: float, max_atoms: int, shrink: float) -> float:
    """The root of H(x) = t when t > 0 rounds to 0 in float64 (delta_g - (1 - prod(1 -
    delta_i)) ~ 1e-399, say): t 2^S settled in high precision (rounded down) against masses
    scaled by 2^S, for products of binomials (listed or meet in the middle); the top atom
    sum eps_i (H = 0 above it: always an upper bound) otherwise, or when t 2^S underflows
    too, or when t is exactly 0."""
    top = _max_loss(m)
    t = residual_target(m, delta_g, log2_scale=UNDERFLOW_SCALE)
    if shrink:
        t = down(t * (1.0 - shrink), 1)
    if not t > 0.0:
        return top
    try:
        kind, info, shift, slack = _exact_solver(m, max_atoms, math.log(t) - UNDERFLOW_SCALE * math.log(2.0))
    except ExactTooLarge:
        return top
    if kind == "full":
        dist = product_distribution(info, shift, slack, lower=True, log2_scale=UNDERFLOW_SCALE)
        return solve_segments(dist, t, scaled=True)
    if kind == "mitm":
        return _MeetInTheMiddle(*info, shift=shift, slack=slack, log2_scale=UNDERFLOW_SCALE).epsilon(t, scaled=True)
    return top


COMMENSURABLE_REL = 1e-9  # beyond the other exact paths: the commensurable lattice's bracket, if this tight
REFINE_ATOMS = 4096  # up to this many atoms an ill-conditioned root is settled in 40 digits
PRECISE_ATOMS = 2**15  # up to this many atoms a loose delta bracket is settled in 40 digits
PRECISE_SMALL = 256  # ... and up to this many whenever it is wider than 2^-50 (cheap: ~ms)
INVERSE_MOVE = 2e-13  # largest relative move of a root for the inverse law
PRECISE_REL = 2.0**-41  # a product's delta bracket this much wider than its rounding band is settled
REFINE_REL = 2.0**-43  # ... when the float64 bracket is wider than this (relative, ~1.1e-13)


@budgeted
def optimal_delta(m: Mechanisms, eps_g: float, *, max_atoms: int = MAX_ATOMS) -> float:
    """The least delta_g with (eps_g, delta_g)-DP of the composition (MV Thm 1.5 solved for
    delta_g): ``1 - prod(1 - delta_i) (1 - H(eps_g))``, rounded up (never below); options as
    for :func:`optimal_epsilon`."""
    max_atoms = _check_max_atoms(max_atoms)
    top = _max_loss(m)
    if eps_g >= top:
        return delta_from_excess(m, 0.0)
    if top <= 1e-301:  # H(eps_g) <= H(0) <= 1 - e^{-top} <= top: within the 1e-300 absolute accuracy
        return delta_from_excess(m, top)
    try:
        groups, shift, slack = _split_groups(m)
        if len(groups) > 1 and _full_count(groups, FULL_ENUMERATION) > FULL_ENUMERATION:
            bulk = _product_below_bulk(groups, shift, eps_g)  # (eps_g far below the bulk: H = 1 to 2^-50)
            return delta_from_excess(m, bulk[1] if bulk is not None else
                                     _windowed_excess(groups, shift, slack, eps_g, max_atoms))
        kind, info, shift, slack = _exact_solver(m, max_atoms)
    except ExactTooLarge:
        from ._lattice.commensurable import commensurable_excess_bounds

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
        atoms = _full_count(groups, PRECISE_ATOMS)
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


def _windowed_excess(groups, shift, slack: float, x: float, max_atoms: int) -> float:
    """An upper bound on H(x) for a product of binomials beyond FULL_ENUMERATION atoms, from
    windows (:func:`window_groups`) aimed at the Chernoff estimate of H(x) and narrowed to
    the H found until the mass outside them is at most 2^-50 of it (or of 1e-300: the
    delta direction's absolute accuracy) or they are whole; listed (with exact distances
    when the float bracket is loose, as below) or met in the middle."""
    log_h = max(log_excess_guess(groups, shift, x), _LOG_FLOOR)
    while True:
        windowed = window_groups(groups, log_h, 2 * max_atoms**2)
        listed = raise_lower_edges(windowed, shift, x)[0]  # (the atoms at or below x need no listing)
        kind, info = _distribution_kind(listed, max_atoms)
        if kind == "full":
            product = _product(listed, True)
            dist = product_distribution(listed, shift, slack, lower=True, product=product)
            h = dist.excess(x)
            if h - dist.excess_lower(x) > (PRECISE_REL + 2.0 * dist.error) * h:  # (<= PRECISE_ATOMS atoms)
                h = min(h, _exact_distance_excess(listed, shift, slack, x, product))
        else:
            h = _MeetInTheMiddle(*info[0], shift=shift, slack=slack).excess(x)
        charged = window_charges(windowed)  # (the raised edges' lumps add nothing at x: at most this)
        if all(len(g) == 2 for g in windowed) or log_h <= _LOG_FLOOR or charged <= _TAIL * max(h - charged, 1e-300):
            return h
        log_h = max(min(log_h - 16.0, math.log(h - charged) if h > charged else -math.inf), _LOG_FLOOR)


# --------------------------------------------------------------------------- finite mechanisms

EXACT_REL = 1e-12  # the certified bracket of a mechanism composition must be this tight (relative)


def _finite_solver(comp):
    """The exact producer of one global direction: the composition listed tuple by tuple
    (:class:`~optcomp._exact.finite.SmallLaw`) when small; else, when a law has three atoms
    or more and every atom is a multiple of one rational unit, the lattice law
    (:mod:`optcomp._exact.convolution`: direct convolutions, cost-capped); else its multinomial
    rows (:mod:`optcomp._exact.multinomial`, which raises ExactTooLarge beyond them) -- or,
    where the rows are ill-conditioned (black boxes of tiny eps as their pivot pair) or
    estimated costly (their thresholds spread over many pivot steps: ``ROW_TERMS``) and the
    finite mechanisms beside the black boxes are few, the split law
    (:mod:`optcomp._exact.split`: H = sum_a p_a H_B(x - l_a))."""
    if "solver" not in comp.cache:
        if comp.tuples(SMALL_ATOMS) <= SMALL_ATOMS:
            comp.cache["solver"] = SmallLaw(comp)
        else:
            from ._exact.convolution import lattice_law
            from ._exact.multinomial import ROW_TERMS, RowLaw

            law = lattice_law(comp) if any(f.size >= 3 for f, _ in comp.factors) else None
            if law is None:
                law = RowLaw(comp)
                split = _split_solver(comp) if law.ill_conditioned or law.terms() > ROW_TERMS else None
                if split is not None:
                    law = split
            comp.cache["solver"] = law
    return comp.cache["solver"]


def _split_solver(comp):
    """The split law of one direction (:mod:`optcomp._exact.split`), or None when it has no
    black boxes or too many finite count vectors beside them."""
    if "split" not in comp.cache:
        from ._exact.split import split_law

        comp.cache["split"] = split_law(comp)
    return comp.cache["split"]


def _narrowed(comp, solve, wide, meet):
    """``solve(solver)`` of the direction's exact producer; where it is too wide (``wide``)
    or out of reach (ExactTooLarge), the split law's bracket as well, the two met (``meet``:
    both are certified, so is their intersection)."""
    try:
        first, limit = solve(_finite_solver(comp)), None
    except ExactTooLarge as exc:
        first, limit = None, exc
    if first is not None and not wide(first):
        return first
    split = _split_solver(comp)
    if split is None or split is comp.cache.get("solver"):
        if limit is not None:
            raise limit
        return first
    try:
        second = solve(split)
    except ExactTooLarge:
        if limit is not None:
            raise limit from None
        return first
    return second if first is None else meet(first, second)


def _meet(a, b):
    return max(a[0], b[0]), min(a[1], b[1])


def _delta_at(comp, eps_g: float) -> tuple[float, float]:
    """Certified (lower, upper) on one direction's optimal delta_g at eps_g."""
    if eps_g >= comp.top():
        return comp.events.delta_bounds(0.0, 0.0)
    return _narrowed(comp, lambda s: comp.events.delta_bounds(*s.excess_bounds(eps_g)),
                     lambda d: d[1] - d[0] > EXACT_REL * d[1] + 1e-300, _meet)


def mechanism_delta_bounds(m: Mechanisms, eps_g: float) -> tuple[float, float]:
    """Certified (lower, upper) on the optimal delta_g at eps_g of the black-box pairs and the
    finite mechanisms of ``m`` (:mod:`optcomp._exact.finite`): the larger of the two global
    directions' brackets."""
    lo = hi = 0.0
    for comp in compositions(m):
        d_lo, d_hi = _delta_at(comp, eps_g)
        lo, hi = max(lo, d_lo), max(hi, d_hi)
    return lo, hi


def mechanism_epsilon_bounds(m: Mechanisms, delta_g: float) -> tuple[float, float]:
    """Certified (lower, upper) on OptComp(delta_g) of the black-box pairs and the finite
    mechanisms of ``m``: the larger of the two global directions' brackets on the least x >= 0
    with delta(x) <= delta_g.  The upper end's target t_low is lowered by ulps until the delta
    events turn H = t_low into a delta_g <= the given one (so delta_g(eps_g(d)) <= d holds to
    the last ulp: :func:`mechanism_delta_bounds` at the upper end evaluates the same events)."""
    lo = hi = 0.0
    for comp in compositions(m):
        t_low, t_high = comp.events.targets(delta_g)
        if t_high < 0.0:
            return math.inf, math.inf
        if t_low >= 1.0:
            continue
        for _ in range(64):
            if t_low <= 0.0 or comp.events.delta_bounds(0.0, t_low)[1] <= delta_g:
                break
            t_low = down(t_low, 1)
        top = comp.top()
        if t_high == 0.0:  # H(x) = 0 exactly from the top atom on, and only there
            x_lo, x_hi = comp.top(up=False), top
        else:
            x_lo, x_hi = _narrowed(comp, lambda s: s.epsilon_bounds(t_low, t_high, top),
                                   lambda b: b[1] < math.inf and b[1] - b[0] > EXACT_REL * b[1], _meet)
            if x_lo == 0.0 < x_hi and t_low >= 0.0 and _delta_at(comp, 0.0)[1] <= delta_g:
                # the least x >= 0 is 0 itself (delta_g above the direction's delta at 0), which a
                # search over the atoms leaves open below the first one: 1000 subsampled steps of
                # randomized response at q = 1e-6, delta_g = 0.5 bracketed [0, 4.4e-27]
                x_hi = 0.0
        lo, hi = max(lo, x_lo), max(hi, min(x_hi, top) if t_low >= 0.0 else math.inf)
    return lo, hi


def optimal_mechanisms_delta(m: Mechanisms, eps_g: float) -> float:
    """``method="optimal"``'s delta_g(eps_g) for a multiset with finite mechanisms: the upper
    end of :func:`mechanism_delta_bounds` when the bracket is within EXACT_REL (1e-12)
    relative or 1e-300 absolute, else ExactTooLarge."""
    lo, hi = mechanism_delta_bounds(m, eps_g)
    if hi - lo > EXACT_REL * hi + 1e-300:
        raise ExactTooLarge(f"the exact composition's bracket [{lo!r}, {hi!r}] on delta_g is wider than "
                            f"{EXACT_REL:g} relative; use method='approx' or 'auto'")
    return hi


def optimal_mechanisms_epsilon(m: Mechanisms, delta_g: float) -> float:
    """``method="optimal"``'s eps_g(delta_g) for a multiset with finite mechanisms: the upper
    end of :func:`mechanism_epsilon_bounds` when the bracket is within EXACT_REL relative,
    else ExactTooLarge."""
    lo, hi = mechanism_epsilon_bounds(m, delta_g)
    if hi < math.inf and hi - lo > EXACT_REL * hi:
        raise ExactTooLarge(f"the exact composition's bracket [{lo!r}, {hi!r}] on eps_g is wider than "
                            f"{EXACT_REL:g} relative; use method='approx' or 'auto'")
    return hi


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
