r"""The drivers' exact splits: parts of a workload settled by monotonicity, not by the lattice.

* :func:`split_big` -- groups with eps_i >= BIG_EPS (or 2 c e^-eps_i below a cap) are a
  deterministic shift of the others' loss, up to a P0-mass ``slack``;
* :func:`split_negligible` / :func:`split_negligible_sources` -- groups (black boxes) or
  mechanism leaves whose largest losses sum to sigma far below tol are left out: without
  them H is a lower bound (data processing; Jensen for the leaves, in the docstring) and
  H(x) <= H_rest(x - sigma) an upper one (L <= L_rest + sigma pointwise);
* :func:`log_tail_bound` -- the Markov bound log H(x) <= K(theta) - theta x, errors charged up.

Each returns the smaller multiset and the exact shift; the drivers compose the rest.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy.special import log_expit

from ._cgf import cgf_terms, tilt_for
from ._inputs import Mechanisms
from ._rounding import UNIT, down, exact_dir, up
from ._types import ApproxTooCostly, Bounds
from ._lattice.workload import Workload
from ._exact.atoms import _split_groups
from .loss import delta_from_excess


def split_big(m: Mechanisms, cap: float = 0.0):
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


def split_negligible(vals: np.ndarray, cnts: np.ndarray, budget: float):
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


def split_negligible_sources(work: Workload, budget: float):
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


def log_tail_bound(vals: np.ndarray, cf: np.ndarray, x: float) -> float:
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


def plus_shift(x: float, shift: Fraction, upward: bool) -> float:
    """x + shift (exact), rounded to the requested side (+-inf stay)."""
    if not math.isfinite(x):
        return x
    return exact_dir(Fraction(x) + shift, upward)


def raised_by(b, sigma: float):
    """A bracket (or the ApproxTooCostly carrying one) with its upper end raised by sigma."""
    if not sigma:
        return b
    if isinstance(b, ApproxTooCostly):
        return ApproxTooCostly(str(b), raised_by(b.bounds, sigma))
    return b._replace(upper=up(b.upper + sigma, 1) if math.isfinite(b.upper) else b.upper)  # (its diagnostics kept)



def shifted_excess(m: Mechanisms, eps_g: float, shift: Fraction, slack: float):
    """(z, to_delta): H(eps_g) of ``m`` from H_s(z) of its part left after :func:`split_big`
    (``shift``, ``slack``), ``to_delta(lo, hi)`` turning bounds on H_s(z) into certified
    delta bounds of ``m``.

    L = shift + L_s but for P0-mass <= slack: H(x) <= H_s(y) + slack and H(x) >= (1 - slack)
    H_s(y), y = x - shift exact.  For y < 0, H_s(y) = 1 - e^y + e^y H_s(-y) exactly (P0(l) =
    e^l P0(-l) for products of randomized responses, and E_P0[e^{-L_s}] = 1).  H_s is
    1-Lipschitz (slope -E[e^{z - L}; L > z]), so evaluating at the float z <= |y| costs
    |y| - z on the lower side."""
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
        lo = max(down(lo * down(1.0 - slack, 1), 1), 0.0)
        hi = min(1.0, up(up(one_hi + up(e_hi * hi, 1), 1) + slack, 1))
        return Bounds(delta_from_excess(m, lo, round_up=False), delta_from_excess(m, hi))

    return z, to_delta
