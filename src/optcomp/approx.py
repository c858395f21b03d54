r"""Certified approximation of optimal heterogeneous composition: Murtagh-Vadhan Thm 1.7.

Computing OptComp((eps_1, delta_1), ..., (eps_k, delta_k), delta_g) exactly is #P-complete
(MV Thm 1.6).  MV Theorem 1.7 gives a polynomial-time eps* with

    OptComp(..., delta_g)  <=  eps*  <=  OptComp(..., e^{-eta/2} delta_g) + eta.        (1.7)

This module holds the public entry points (:func:`approx_epsilon`, :func:`approx_delta`:
``method="approx"`` of :func:`optcomp.epsilon_g`; :func:`epsilon_bounds`,
:func:`delta_bounds`) and the algorithm as published; the default algorithm is in
:mod:`optcomp.lattice`.  Two algorithms (``algorithm=``), both returning an upper bound
that is never below the optimum, floating point included:

``"paper"`` -- the algorithm as published (MV Sec. 5, the pseudocode after Lemma 5.3),
    default ``eta = 0.1``: beta = eta / (k (1 + eps_bar) + 1), eps_0 = ln(1 + beta),
    a_i = ceil(eps_i (1/beta + 1)), eps'_i = a_i eps_0 >= eps_i; binary search for the least
    integer a* with OptComp(eps', delta_g) <= a* eps_0, each test being the knapsack
    dynamic program of Lemmas 5.1/5.2 (O(k sum_i a_i) per test; O(k^3 eps_bar (1 + eps_bar)
    / eta log(...)) in all -- the cost the runtime figure plots; the DP is vectorised over
    the knapsack capacity, which changes the constant, not the complexity).  Output: a* eps_0
    rounded *up* to a float (the paper's "Taylor approximation" step).  The DP runs in
    probability space (P0 and P1 masses of the randomized responses, never e^{sum eps}).
    Its work grows like k^3/eta; before running, it estimates that work and raises
    ``ApproxTooCostly`` above ``PAPER_MAX_WORK`` cell updates (at eta = 0.1 and eps_i ~
    U[0.05, 0.2]: k = 2000 runs, k = 2500 is refused).  Measured times:
    ``benchmarks/results/bench_approx.md`` and the runtime figure's reference run.

``"fast"`` (default, default ``eta = 1e-3``) -- certified lower *and* upper bounds from
    lattice computations, refined until ``upper - lower <= tol`` (``tol`` defaults to
    ``eta``).  Since lower <= OptComp(delta_g) <= upper, the returned upper bound satisfies

        OptComp(..., delta_g) <= eps* <= OptComp(..., delta_g) + tol,

    which implies (1.7) whenever tol <= eta (OptComp decreases in delta_g).  The
    construction (a refinement and a garbling of every mechanism on a lattice, composed by
    a tilted FFT tree), its proofs and its floating-point model are in
    :mod:`optcomp.lattice`; :func:`epsilon_bounds` / :func:`delta_bounds` return both bounds.

Soundness of the paper's algorithm in floating point (the paper assumes exact rational
arithmetic): eps'_i >= eps_i is checked in exact rationals (:func:`paper_grid`); each test
of the DP charges the relative error (1 + u)^(2k) of k products and sums of positive terms
and of the inputs p_i, q_i, an absolute underflow bound, and the rounding of
e^{a* eps_0}; the residual target t = 1 - (1 - delta_g)/prod(1 - delta_i) is rounded down
(:func:`optcomp.loss.residual_target`) and the output a* eps_0 rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
from scipy.special import log_expit

from . import _memory, _progress, optimal
from ._directions import EPS_FLOAT_GAP
from ._inputs import Mechanisms, check_delta_g, check_eps_g, check_unit_open, mechanisms
from ._laws import REACH
from ._refine import with_bracket
from ._rounding import UNIT, down, exact_dir, up
from ._types import ExactTooLarge
from .lattice import MAX_POINTS, ApproxTooCostly, Bounds, lattice_bounds, lattice_delta_bounds
from .loss import delta_from_excess, residual_target

__all__ = [
    "OPTIONS",
    "ALGORITHMS",
    "DEFAULT_ETA",
    "Bounds",
    "ApproxTooCostly",
    "approx_epsilon",
    "approx_delta",
    "epsilon_bounds",
    "delta_bounds",
    "paper_epsilon",
    "paper_delta",
    "paper_grid",
]

OPTIONS = ("eta", "algorithm", "tol", "max_points", "max_memory", "progress")
ALGORITHMS = ("fast", "paper")
DEFAULT_ETA = {"fast": 1e-3, "paper": 0.1}


# --------------------------------------------------------------------------- small helpers


def _check_algorithm(algorithm) -> str:
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(map(repr, ALGORITHMS))}; got {algorithm!r}")
    return algorithm


def _check_options(eta, algorithm, tol, max_points):
    algorithm = _check_algorithm(algorithm)
    eta = DEFAULT_ETA[algorithm] if eta is None else check_unit_open("eta", eta)
    if tol is None:
        tol = eta
    else:
        if isinstance(tol, bool):
            raise ValueError(f"tol must be a positive real number, got {tol!r}")
        try:
            tol = float(tol)
        except (TypeError, ValueError):
            raise ValueError(f"tol must be a positive real number, got {tol!r}") from None
        if not (tol > 0.0 and math.isfinite(tol)):
            raise ValueError(f"tol must be a positive real number, got {tol!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) or max_points < 16:
        raise ValueError(f"max_points must be an integer >= 16, got {max_points!r}")
    return eta, algorithm, tol, int(max_points)


def _run(fn, progress, max_memory=None):
    """fn(callback) with the progress callback (:mod:`optcomp._progress`), closing a stderr
    bar however fn ends, within the memory budget ``max_memory`` (:mod:`optcomp._memory`)."""
    cb = _progress.callback(progress)
    try:
        with _memory.limit(max_memory):
            return fn(cb)
    finally:
        _progress.close(cb)


# --------------------------------------------------------------------------- the paper's algorithm


@dataclass(frozen=True)
class PaperGrid:
    """The discretisation of MV Thm 1.7's proof: eps'_i = a_i eps_0 >= eps_i."""

    beta: float
    eps0: float
    a: np.ndarray  # int64, a_i = ceil(eps_i (1/beta + 1)), bumped if a_i eps0 < eps_i in exact arithmetic

    @property
    def total(self) -> int:
        return int(self.a.sum())


def paper_grid(eps: np.ndarray, eta: float) -> PaperGrid:
    """beta = eta/(k(1 + eps_bar) + 1), eps_0 = ln(1 + beta), a_i = ceil(eps_i (1/beta + 1)).

    The proof's eps'_i = a_i eps_0 >= eps_i uses eps_0 >= beta/(1 + beta), true for the
    real logarithm; with eps_0 the float log1p(beta) (an exact binary number, the one
    the computation uses) the inequality is re-checked exactly and a_i bumped if
    rounding broke it, so OptComp(eps') >= OptComp(eps) holds exactly (monotonicity)."""
    eps = np.asarray(eps, dtype=float)
    k = eps.size
    eps_bar = math.fsum(eps.tolist()) / k
    beta = eta / (k * (1.0 + eps_bar) + 1.0)
    eps0 = math.log1p(beta)
    a = np.ceil(eps * (1.0 / beta + 1.0))
    prod = a * eps0
    suspicious = np.nonzero(prod <= eps * (1.0 + 8.0 * UNIT))[0]
    f0 = Fraction(eps0)
    for i in suspicious:
        while Fraction(int(a[i])) * f0 < Fraction(float(eps[i])):
            a[i] += 1
    return PaperGrid(beta, eps0, a.astype(np.int64))


def _knapsack(a: np.ndarray, p: np.ndarray, q: np.ndarray, B: int) -> tuple[float, float]:
    """MV Lemma 5.1 in probability space, for both P0 and P1 at once.

    F(r, s) = sum over T subset [r] with sum_{i in T} a_i <= s of prod_{i in T} w_i^- prod_{i in [r]\\T} w_i^+,
    F(r, s) = w_r^+ F(r-1, s) + w_r^- F(r-1, s - a_r),  F(0, s) = 1:
    row 0 with (w^+, w^-) = (p, q) (P0 masses: T = the mechanisms whose sign is -), row 1
    with (q, p) (P1 masses).  O(k B) operations, vectorised over s.  Returns F(k, B) for
    both rows (P0[L >= (A - 2B) eps_0], P1[...] of the grid mechanisms)."""
    F = np.ones((2, B + 1))
    wp = np.empty((2, 1))
    wm = np.empty((2, 1))
    with np.errstate(under="ignore"):
        for ai, pi, qi in zip(a.tolist(), p.tolist(), q.tolist()):
            if ai == 0:
                continue  # eps_i = 0: p = q = 1/2, F unchanged
            wp[0, 0], wp[1, 0] = pi, qi
            wm[0, 0], wm[1, 0] = qi, pi
            if ai <= B:
                tmp = F[:, : B + 1 - ai] * wm
                F *= wp
                F[:, ai:] += tmp
            else:
                F *= wp
    return float(F[0, B]), float(F[1, B])


class _PaperTest:
    """Lemma 5.2: decides OptComp(eps', delta_g) <= x for the grid mechanisms (certified)."""

    def __init__(self, grid: PaperGrid):
        self.grid = grid
        a = grid.a
        keep = a > 0
        self.a = a[keep]
        epsp = self.a * grid.eps0  # eps'_i, each with relative rounding error <= u
        self.p = np.exp(log_expit(epsp))
        self.q = np.exp(log_expit(-epsp))
        self.A = int(self.a.sum())
        k = max(int(self.a.size), 1)
        # relative error of every DP cell: k products and k sums of positive terms (2k
        # roundings), and the p/q inputs: eps' = a eps0 rounded (relative u, so an absolute
        # u eps' in the argument of log_expit), log_expit and exp (a few ulps each)
        self.gamma = 1.01 * (2 * k + float(np.sum(epsp + 8.0)) + 16) * UNIT
        self.absolute = 4.0 * (k + 1) * 2.0**-1074  # underflow of subnormal partial sums

    def excess(self, x: float) -> float:
        """Upper bound on H(x) for the grid mechanisms: F0 - e^x F1 of Lemma 5.2 (5.1)."""
        g = self.grid
        # T with loss (A - 2 a(T)) eps0 > x  <=>  a(T) < (A - x/eps0)/2; loss == x contributes 0
        bound = (Fraction(self.A) - Fraction(x) / Fraction(g.eps0)) / 2
        B = math.floor(bound)
        if B < 0:
            return 0.0
        f0, f1 = _knapsack(self.a, self.p, self.q, B)
        hi0 = f0 * (1.0 + self.gamma) + self.absolute
        if f1 > 0.0:
            lo1 = math.exp(x + math.log(f1)) * (1.0 - self.gamma) * (1.0 - (abs(x) + 4.0) * 2.0 * UNIT)
        else:
            lo1 = 0.0
        return max(hi0 - lo1, 0.0) * (1.0 + 4.0 * UNIT)

    def feasible(self, astar: int, t: float) -> bool:
        if astar >= self.A:
            return True  # no loss above the maximum: H = 0 <= t, certified
        # x = a* eps0 exactly (as a real); the float product is within 1/2 ulp, handled by
        # computing the knapsack bound B with the exact rational a* (loss > a* eps0)
        B = (self.A - astar) // 2  # a(T) <= B  <=>  loss (A - 2 a(T)) eps0 >= a* eps0
        f0, f1 = _knapsack(self.a, self.p, self.q, B)
        x = astar * self.grid.eps0
        hi0 = f0 * (1.0 + self.gamma) + self.absolute
        if f1 > 0.0:
            lo1 = math.exp(x + math.log(f1)) * (1.0 - self.gamma) * (1.0 - (abs(x) + 4.0) * 2.0 * UNIT)
        else:
            lo1 = 0.0
        return max(hi0 - lo1, 0.0) * (1.0 + 4.0 * UNIT) <= t


def paper_epsilon(m: Mechanisms, delta_g: float, eta: float = DEFAULT_ETA["paper"], *, info: dict | None = None) -> float:
    """MV Theorem 1.7 as published: the least grid point a* eps_0 with OptComp(eps') <= a* eps_0.

    Binary search over the integers a* in [0, sum a_i]; each test is Lemma 5.2's knapsack
    dynamic program (Lemma 5.1) run in probability space (P0 and P1 masses, never
    e^{sum eps}), at cost O(k sum_i a_i).  Returns a* eps_0 rounded up to a float, with

        OptComp(..., delta_g) <= eps* <= OptComp(..., e^{-eta/2} delta_g) + eta.

    The left inequality holds exactly in floating point (eps'_i >= eps_i exactly; every
    feasibility test is a certified upper bound on the left-hand side of (5.1)).  The
    right one is the paper's argument; rounding perturbs it only by relative ~k u in
    delta_g, far inside the slack (eta - c >= beta) of the proof.  ``info`` (a dict), if
    given, receives beta, eps0, sum_a and the number of tests."""
    t = residual_target(m, delta_g)
    if t < 0.0:
        return math.inf
    grid = paper_grid(m.expanded(PAPER_MAX_K, "algorithm='paper'"), eta)
    _check_paper_work(grid, m.k, eta)
    test = _PaperTest(grid)
    lo, hi = -1, test.A  # invariant: hi feasible (certified), lo infeasible or -1
    tests = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        tests += 1
        if test.feasible(mid, t):
            hi = mid
        else:
            lo = mid
    if info is not None:
        info.update(beta=grid.beta, eps0=grid.eps0, sum_a=test.A, tests=tests, astar=hi)
    return up(hi * grid.eps0, 1) if hi > 0 else 0.0


def paper_delta(m: Mechanisms, eps_g: float, eta: float = DEFAULT_ETA["paper"]) -> float:
    """delta_g of the paper's grid mechanisms eps'_i = a_i eps_0 >= eps_i at eps_g: one run of
    the Lemma 5.1/5.2 dynamic program (with the knapsack bound B for eps_g), rounded up.

    An upper bound on the optimal delta_g(eps_g) (monotonicity in each eps_i); by Lemma 5.3
    it is at most e^{c/2} delta_opt(eps_g - c) with c = beta k (1 + eps_bar) <= eta."""
    grid = paper_grid(m.expanded(PAPER_MAX_K, "algorithm='paper'"), eta)
    _check_paper_work(grid, m.k, eta)
    test = _PaperTest(grid)
    return delta_from_excess(m, test.excess(eps_g))


PAPER_MAX_K = 100_000  # mechanisms the published algorithm is ever asked to expand (its cost is k^3)
PAPER_MAX_WORK = 2e11  # DP cell updates (k sum_a/2 per test x tests); k = 1000, eta = 0.1: 1.5e10; k = 2000: 1.3e11


def _check_paper_work(grid: PaperGrid, k: int, eta: float) -> None:
    # the dynamic program's table: two rows of up to sum a_i / 2 + 1 cells, and a shifted copy
    _memory.current().need(4 * 8.0 * (grid.total // 2 + 2), f"algorithm='paper' at k={k}, eta={eta:g} "
                           f"(a dynamic-programming table of {grid.total // 2 + 1:,} cells per row)")
    work = 0.5 * k * grid.total * max(1.0, math.log2(grid.total + 2))
    if work > PAPER_MAX_WORK:
        raise ApproxTooCostly(
            f"algorithm='paper' at k={k}, eta={eta:g} needs about {work:.2g} dynamic-programming cell updates "
            f"(sum a_i = {grid.total:,}; O(k^3 eps_bar (1 + eps_bar)/eta log ...)), i.e. hours; "
            "use algorithm='fast' (the same guarantee, certified bounds) or a larger eta"
        )


# --------------------------------------------------------------------------- registry entry points


def approx_epsilon(
    m: Mechanisms,
    delta_g: float,
    *,
    eta=None,
    algorithm: str = "fast",
    tol=None,
    max_points: int = MAX_POINTS,
    max_memory=None,
    progress=None,
) -> float:
    """Certified approximation of OptComp(m, delta_g) in the sense of MV Theorem 1.7.

    Returns eps* with OptComp(..., delta_g) <= eps* <= OptComp(..., e^{-eta/2} delta_g) + eta;
    an upper bound, never below the optimum, including floating-point effects (see the
    module docstrings of this module and of :mod:`optcomp.lattice`).
    ``algorithm="paper"``: the published algorithm (default eta 0.1);
    ``"fast"`` (default, eta 1e-3): certified lattice bounds refined until
    upper - lower <= tol (default tol = eta), which gives eps* <= OptComp(delta_g) + tol.
    ``max_memory``: the call's memory budget in bytes (default 1.5 GiB, :mod:`optcomp._memory`).
    ``math.inf`` when delta_g < 1 - prod(1 - delta_i)."""
    eta, algorithm, tol, max_points = _check_options(eta, algorithm, tol, max_points)
    if algorithm == "paper":
        _progress.callback(progress)  # validated; the published algorithm reports nothing
        with _memory.limit(max_memory):
            return paper_epsilon(m.black_box_only("approx (algorithm='paper')"), delta_g, eta)
    return _run(lambda cb: lattice_bounds(m, delta_g, tol, max_points=max_points, progress=cb), progress,
                max_memory).upper


def approx_delta(
    m: Mechanisms,
    eps_g: float,
    *,
    eta=None,
    algorithm: str = "fast",
    tol=None,
    max_points: int = MAX_POINTS,
    max_memory=None,
    progress=None,
) -> float:
    """Certified upper bound on the optimal delta_g at eps_g (never below it).

    ``"fast"``: lattice bounds refined until upper - lower <= tol * upper (relative; default
    tol = eta = 1e-3) or upper <= delta_opt(eps_g - tol), so the result is at most
    max(delta_opt(eps_g) / (1 - tol), delta_opt(eps_g - tol)) (see
    :func:`optcomp.lattice.lattice_delta_bounds`).  ``"paper"``: the
    delta of the paper's grid mechanisms (Lemma 5.2's DP at eps_g), at most
    e^{eta/2} delta_opt(eps_g - eta) by Lemma 5.3."""
    eta, algorithm, tol, max_points = _check_options(eta, algorithm, tol, max_points)
    if algorithm == "paper":
        _progress.callback(progress)  # validated; the published algorithm reports nothing
        with _memory.limit(max_memory):
            return paper_delta(m.black_box_only("approx (algorithm='paper')"), eps_g, eta)
    return _run(lambda cb: lattice_delta_bounds(m, eps_g, tol, max_points=max_points, progress=cb), progress,
                max_memory).upper


def epsilon_bounds(
    eps,
    delta=0.0,
    *,
    delta_g,
    k=None,
    counts=None,
    eta=None,
    tol=None,
    max_points: int = MAX_POINTS,
    max_memory=None,
    progress=None,
) -> Bounds:
    """Certified bounds ``lower <= OptComp((eps_i, delta_i)_i, delta_g) <= upper`` with
    ``upper - lower <= tol`` (default ``tol = eta = 1e-3``).  Inputs as for
    :func:`optcomp.epsilon_g`.  ``upper`` is what ``epsilon_g(..., method="approx")``
    returns; it satisfies MV Thm 1.7 for every eta >= tol.  ``progress``: True for a status
    line on stderr, or a callable receiving one status dict per lattice pass.
    ``max_memory``: the call's memory budget in bytes (default 1.5 GiB, :mod:`optcomp._memory`);
    a lattice beyond it (or beyond ``max_points``) raises :class:`ApproxTooCostly` with the
    best certified bracket reached."""
    m = mechanisms(eps, delta, k, counts)
    return bracket_epsilon(m, check_delta_g(delta_g), eta=eta, tol=tol, max_points=max_points, max_memory=max_memory,
                           progress=progress)


def delta_bounds(
    eps,
    delta=0.0,
    *,
    eps_g,
    k=None,
    counts=None,
    eta=None,
    tol=None,
    max_points: int = MAX_POINTS,
    max_memory=None,
    progress=None,
) -> Bounds:
    """Certified bounds ``lower <= delta_opt(eps_g) <= upper`` with
    ``upper - lower <= tol * upper`` (relative; default ``tol = eta = 1e-3``) or, where a
    relative gap is out of reach (eps_g within rounding distance of an atom of the loss
    distribution), ``upper <= delta_opt(eps_g - tol)``."""
    m = mechanisms(eps, delta, k, counts)
    return bracket_delta(m, check_eps_g(eps_g), eta=eta, tol=tol, max_points=max_points, max_memory=max_memory,
                         progress=progress)


def bracket_epsilon(m: Mechanisms, delta_g: float, *, eta=None, tol=None, max_points: int = MAX_POINTS,
                    max_memory=None, progress=None) -> Bounds:
    """:func:`epsilon_bounds` of a validated multiset ``m`` (``delta_g`` checked)."""
    eta, _, tol, max_points = _check_options(eta, "fast", tol, max_points)
    return _with_exact(m, lambda cb: lattice_bounds(m, delta_g, tol, max_points=max_points, progress=cb),
                       lambda: optimal.mechanism_epsilon_bounds(m, delta_g),
                       lambda b: b.gap <= tol or b.gap <= EPS_FLOAT_GAP * b.upper < math.inf,
                       progress, max_memory, "eps_g",
                       lambda: _split_epsilon(m, delta_g, tol=tol, max_points=max_points, max_memory=max_memory))


def bracket_delta(m: Mechanisms, eps_g: float, *, eta=None, tol=None, max_points: int = MAX_POINTS,
                  max_memory=None, progress=None) -> Bounds:
    """:func:`delta_bounds` of a validated multiset ``m`` (``eps_g`` checked)."""
    eta, _, tol, max_points = _check_options(eta, "fast", tol, max_points)
    return _with_exact(m, lambda cb: lattice_delta_bounds(m, eps_g, tol, max_points=max_points, progress=cb),
                       lambda: optimal.mechanism_delta_bounds(m, eps_g),
                       lambda b: b.upper - b.lower <= tol * b.upper + 2.0**-1000, progress, max_memory, "delta_g",
                       lambda: _split_delta(m, eps_g, tol=tol, max_points=max_points, max_memory=max_memory))


def _with_exact(m: Mechanisms, lattice, exact, met, progress, max_memory, quantity: str, split=None) -> Bounds:
    """For finite mechanisms (and black boxes beside them), the exact finite composition's
    bracket (:mod:`optcomp._exact.finite`, the ``optimal`` method's, within its own size
    limits) where it meets the tolerance; else the lattice's bracket, intersected with the
    exact one where that exists -- which also decides ties (delta_g equal to the optimum's
    value on a flat stretch, which no float approximation can).  Both brackets are certified,
    so is their intersection; a size limit stands only if the intersection still misses the
    tolerance -- and the bracket ``split()`` gives (:func:`_split_epsilon`: mechanisms beyond
    any lattice and the rest, composed as two groups) does not narrow it enough."""
    finite = bool(m.others) and all(mech.kind == "atoms" for mech, _ in m.others)
    first = None
    if finite:
        # finite mechanisms: the exact composition first, as ``auto`` does -- within 1e-12 where it
        # answers, and far cheaper than a lattice whose absolute tol on a large eps_g is a tiny
        # relative one (10^7 subsampled randomized response steps: eps_g ~1.2e6, 2 s against 60 s)
        try:
            with _memory.limit(max_memory):  # (its own budget: optimal.mechanism_*_bounds open none)
                first = Bounds(*exact())
        except (ExactTooLarge, ApproxTooCostly):
            pass
        if first is not None and met(first):
            return first
    try:
        b, limit = _run(lattice, progress, max_memory), None
    except ApproxTooCostly as exc:
        b, limit = exc.bounds, exc
    if (b is not None and met(b)) or first is None:
        if limit is None:
            return Bounds(b.lower, b.upper)  # (the facade's result: no diagnostics)
        out = None if b is None else Bounds(b.lower, b.upper)
    else:
        lo, hi = first
        if b is not None:
            lo, hi = max(lo, b.lower), min(hi, b.upper)
        out = Bounds(lo, hi)
        if limit is None or met(out):
            return out
    narrowed = split() if split is not None else None
    if narrowed is None:
        if out is None or (b is not None and out == Bounds(b.lower, b.upper)):
            raise limit
        raise with_bracket(limit, out, quantity) from None
    out = narrowed if out is None else Bounds(max(out.lower, narrowed.lower), min(out.upper, narrowed.upper))
    if met(out):
        return out
    raise with_bracket(limit, out, quantity, " (two groups: the mechanisms beyond any lattice and the rest)") from None


def _far_groups(m: Mechanisms):
    """(far, rest): the finite mechanisms of ``m`` whose losses reach beyond any lattice
    (:data:`~optcomp._laws.REACH`: a subsampled Gaussian of mu beyond ~1.5e6, a randomized
    response of eps 1e100) and the rest (black boxes included) as two multisets; None unless
    both hold something."""
    def far(mech) -> bool:
        return mech.kind == "atoms" and any(math.isfinite(v) and abs(v) > REACH
                                            for d in mech.directions() for v in mech.loss_range(d))

    groups = ([], [])
    for mech, c in m.others:
        groups[0 if far(mech) else 1].append((mech, c))
    if not groups[0] or not (groups[1] or m.count.size):
        return None
    none = np.zeros(0)
    return (replace(m, eps=none, delta=none, count=np.zeros(0, dtype=np.int64), others=tuple(groups[0]),
                    arrival=None, others_arrival=None),
            replace(m, others=tuple(groups[1]), arrival=None, others_arrival=None))


def _sub_bounds(fn):
    """A sub-multiset's certified bracket, also a size limit's (None when it has none)."""
    try:
        return fn()
    except ApproxTooCostly as exc:
        return exc.bounds


def _two_groups(m: Mechanisms, at, value: float, splits, combine, start: float) -> Bounds | None:
    """The bracket of :func:`_split_epsilon` / :func:`_split_delta`: ``at(group, v)`` a group's
    bracket at ``v``; the lower end either group's at ``value``, the upper end the least
    ``combine`` of the two groups' upper ends over ``splits`` ((v_far, v_rest) pairs)."""
    groups = _far_groups(m)
    if groups is None:
        return None
    sub = [_sub_bounds(lambda g=g: at(g, value)) for g in groups]
    lower = max((b.lower for b in sub if b is not None), default=0.0)
    upper = start
    for v_far, v_rest in splits:
        a = _sub_bounds(lambda: at(groups[0], v_far))
        b = _sub_bounds(lambda: at(groups[1], v_rest))
        if a is not None and b is not None:
            upper = min(upper, combine(a.upper, b.upper))
    return Bounds(lower, upper) if lower <= upper else None


def _split_epsilon(m: Mechanisms, delta_g: float, **kw) -> Bounds | None:
    """eps_g of ``m`` bracketed from its two groups of :func:`_far_groups` (None without
    them): each group is a marginal of the composition, so the optimum is at least either
    group's at delta_g (lower end); and a group (eps_1, delta_1)-DP beside one (eps_2,
    delta_2)-DP composes to (eps_1 + eps_2, delta_1 + delta_2) (basic composition, Dwork and
    Roth 2014, Thm 3.16; each group is dominated by the randomized response of its pair), for
    splits delta_1 + delta_2 <= delta_g (upper end).  Where the far group's eps_g is ~1e200,
    the rest's few units vanish against it: the bracket is then a few ulps wide."""
    splits = []
    for frac in (0.5, 2.0**-10, 1.0 - 2.0**-10):
        d1 = down(delta_g * frac, 1)
        d2 = down(delta_g - d1, 1)  # d1 + d2 <= delta_g
        if d1 > 0.0 and d2 > 0.0:
            splits.append((d1, d2))
    return _two_groups(m, lambda g, d: bracket_epsilon(g, d, **kw), delta_g, splits, lambda a, b: up(a + b, 1),
                       math.inf)


def _split_delta(m: Mechanisms, eps_g: float, **kw) -> Bounds | None:
    """:func:`_split_epsilon` for delta_g(eps_g): at least either group's delta at eps_g, at
    most 1 - (1 - delta_1(x_1))(1 - delta_2(x_2)) for x_1 + x_2 <= eps_g (delta_g nonincreasing;
    the composition of two randomized responses (x_i, delta_i) at x_1 + x_2, KOV Thm 3.3)."""
    splits = []
    for frac in (0.0, 2.0**-10, 0.5, 1.0):
        x1 = down(eps_g * frac, 1) if frac else 0.0
        splits.append((x1, max(down(eps_g - x1, 1), 0.0)))  # x1 + x2 <= eps_g
    return _two_groups(m, lambda g, x: bracket_delta(g, x, **kw), eps_g, splits,
                       lambda a, b: exact_dir(1 - (1 - Fraction(a)) * (1 - Fraction(b)), True), 1.0)
