r"""Privacy regions: differential privacy as hypothesis testing (KOV Section 2).

An adversary sees the output of a mechanism and tests H0 "the database is D0" against H1
"the database is D1" (neighbours).  Any test has a false-alarm probability P_FA (rejects
H0 under H0) and a missed-detection probability P_MD (accepts H0 under H1).  KOV Thm 2.1:
a mechanism is (eps, delta)-DP exactly when every test's (P_FA, P_MD) lies in

    R(eps, delta) = { P_FA + e^eps P_MD >= 1 - delta,   e^eps P_FA + P_MD >= 1 - delta,
                      1 - P_FA + e^eps (1 - P_MD) >= 1 - delta,
                      e^eps (1 - P_FA) + 1 - P_MD >= 1 - delta } ∩ [0, 1]^2.

A mechanism that is (eps_j, delta_j)-DP for a *family* of pairs has privacy region inside
the intersection of the R(eps_j, delta_j).  The region is symmetric under
(P_FA, P_MD) -> (1 - P_FA, 1 - P_MD), so it is described by its lower boundary, the
*trade-off curve*

    beta(alpha) = max_j max(0, 1 - delta_j - e^{eps_j} alpha, e^{-eps_j} (1 - delta_j - alpha)),

the least P_MD of any test with P_FA = alpha; the upper boundary is 1 - beta(1 - alpha).
A smaller region (a larger beta) means more privacy.

Families produced here, for the k-fold composition of (eps, delta)-DP mechanisms:

* :func:`optimal_family` — KOV Thm 3.3: the ((k - 2i) eps, delta_g((k - 2i) eps)) corners,
  i = 0..floor(k/2), with delta_g from ``optcomp.delta_g(method="optimal")``.  The region
  is exactly their intersection and it is achieved (tight).  Heterogeneous inputs use
  :func:`family_from_eps_grid` with the optimal method (MV Thm 1.5).
* :func:`basic_family` — KOV Thm 3.1 / MV Thm 1.2: the single pair (sum eps_i, sum delta_i).
* :func:`drv_family` — KOV Thm 3.2 / MV Thm 1.3: the pairs
  (eps_g(delta'), sum delta_i + delta') over a geometric grid of delta'.
* :func:`family_from_eps_grid` — any method of :data:`optcomp.METHODS`: the pairs
  (x, delta_g(x)) over a grid of eps_g values x.

Every pair of every family is a certified (eps_g, delta_g)-DP guarantee (delta_g rounded
up by the library), so intersecting over a *finite* subset of a theorem's family gives a
region that contains the theorem's exact region: drawn regions err on the safe side
(never smaller than what the theorem proves).
"""

from __future__ import annotations

import math

import numpy as np

import optcomp

from ._inputs import mechanisms

__all__ = [
    "tradeoff",
    "upper_boundary",
    "contains",
    "boundary_alphas",
    "optimal_family",
    "basic_family",
    "drv_family",
    "family_from_eps_grid",
    "composition_family",
    "randomized_response_tradeoff",
]

_BELOW_ONE = math.nextafter(1.0, 0.0)


def _family(eps, delta) -> tuple[np.ndarray, np.ndarray]:
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    d = np.broadcast_to(np.asarray(delta, dtype=float), e.shape).astype(float)
    if e.ndim != 1:
        raise ValueError(f"eps must be a number or a 1-D array, got shape {e.shape}")
    if np.any(~(e >= 0)):  # also rejects NaN; +inf is allowed (a vacuous constraint)
        raise ValueError(f"eps must be >= 0, got {e[~(e >= 0)][0]!r}")
    if np.any(~((d >= 0) & (d <= 1))):
        raise ValueError(f"delta must lie in [0, 1], got {d[~((d >= 0) & (d <= 1))][0]!r}")
    return e, d


def tradeoff(alpha, eps, delta=0.0) -> np.ndarray:
    """Lower boundary beta(alpha) of the privacy region of a family of (eps_j, delta_j)-DP
    guarantees (KOV Thm 2.1; intersection of the R(eps_j, delta_j)).

    ``beta(alpha) = max_j max(0, 1 - delta_j - e^{eps_j} alpha, e^{-eps_j} (1 - delta_j - alpha))``.
    ``alpha`` is an array of false-alarm probabilities in [0, 1]; ``eps``/``delta`` are a
    pair of numbers or equal-length arrays (one guarantee each).  Pairs with eps = inf
    constrain nothing.
    """
    a = np.asarray(alpha, dtype=float)
    e, d = _family(eps, delta)
    finite = np.isfinite(e)
    e, d = e[finite], d[finite]
    if e.size == 0:
        return np.zeros_like(a)
    flat = a.reshape(-1, 1)
    one = 1.0 - d[None, :]
    line1 = one - np.exp(e)[None, :] * flat
    line2 = np.exp(-e)[None, :] * (one - flat)
    beta = np.maximum(np.maximum(line1, line2).max(axis=1), 0.0)
    return beta.reshape(a.shape)


def upper_boundary(alpha, eps, delta=0.0) -> np.ndarray:
    """Upper boundary of the same region: 1 - beta(1 - alpha) (the region's point symmetry)."""
    a = np.asarray(alpha, dtype=float)
    return 1.0 - tradeoff(1.0 - a, eps, delta)


def contains(p_fa, p_md, eps, delta=0.0, *, tol: float = 0.0) -> np.ndarray:
    """Whether (P_FA, P_MD) lies in the intersection of the R(eps_j, delta_j) (up to ``tol``)."""
    a = np.asarray(p_fa, dtype=float)
    b = np.asarray(p_md, dtype=float)
    inside = (a >= -tol) & (a <= 1 + tol) & (b >= -tol) & (b <= 1 + tol)
    return inside & (b >= tradeoff(a, eps, delta) - tol) & (b <= upper_boundary(a, eps, delta) + tol)


def boundary_alphas(eps, delta=0.0, num: int = 1001) -> np.ndarray:
    """A sorted grid of P_FA values for drawing the boundary: ``num`` equispaced points in
    [0, 1] plus every alpha where one of the family's lines has a kink (where
    e^eps alpha = 1 - delta, where alpha = 1 - delta, and the symmetric point
    (1 - delta)/(1 + e^eps)), and their mirror images 1 - alpha."""
    if num < 2:
        raise ValueError(f"num must be >= 2, got {num!r}")
    e, d = _family(eps, delta)
    finite = np.isfinite(e)
    e, d = e[finite], d[finite]
    kinks = np.concatenate([(1 - d) * np.exp(-e), 1 - d, (1 - d) / (1 + np.exp(e))])
    pts = np.concatenate([np.linspace(0.0, 1.0, num), kinks, 1.0 - kinks])
    pts = pts[(pts >= 0.0) & (pts <= 1.0)]
    return np.unique(pts)


# ---------------------------------------------------------------------------------------
# families of guarantees of a composition


MAX_CORNERS = 10**6  # KOV Thm 3.3 lists floor(k/2) + 1 corners


def optimal_family(eps: float, delta: float = 0.0, *, k: int) -> tuple[np.ndarray, np.ndarray]:
    """KOV Thm 3.3 (MV Thm 1.4): the k-fold composition of (eps, delta)-DP mechanisms is
    ((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i))-DP for i = 0, ..., floor(k/2), with
    delta_i = sum_{l<i} C(k, l) (e^{(k-l) eps} - e^{(k-2i+l) eps}) / (1 + e^eps)^k, and its
    privacy region is exactly the intersection of these floor(k/2) + 1 regions.

    Returns ``(eps_g, delta_g)`` arrays, delta_g from ``optcomp.delta_g(..., method="optimal")``
    (the same quantity, computed stably and rounded up).
    """
    m = mechanisms(eps, delta, k)
    if not m.homogeneous:  # pragma: no cover - mechanisms() with a scalar eps is homogeneous
        raise ValueError("optimal_family needs k identical mechanisms; use family_from_eps_grid")
    k = m.k
    if k > MAX_CORNERS:
        raise ValueError(f"optimal_family lists floor(k/2) + 1 corners and is limited to k <= {MAX_CORNERS:,}, "
                         f"got k={k:,}; use optcomp.privacy_curve (a grid of eps_g) instead")
    e = float(m.eps[0])
    i = np.arange(k // 2 + 1)
    eps_g = ((k - 2 * i) * e).astype(float)
    if e == 0.0:
        delta_g = np.array([optcomp.delta_g(e, float(m.delta[0]), k=k, eps_g=float(x)) for x in eps_g])
        return eps_g, delta_g
    # one pass over all k + 1 atoms: H at every corner (each within ulps of an atom: the
    # distance to the first atom above it is taken exactly, see optcomp.loss)
    from .loss import delta_from_excess
    from .optimal import BIG_EPS, binomial_window

    if e >= BIG_EPS:
        delta_g = np.array([optcomp.delta_g(e, float(m.delta[0]), k=k, eps_g=float(x)) for x in eps_g])
        return eps_g, delta_g
    h = binomial_window(e, k, 0, k).excess_many(eps_g)
    delta_g = np.array([delta_from_excess(m, float(x)) for x in h])
    return eps_g, delta_g


def basic_family(eps, delta=0.0, *, k=None, counts=None) -> tuple[np.ndarray, np.ndarray]:
    """Basic composition (KOV Thm 3.1, MV Thm 1.2): the single pair (sum eps_i, sum delta_i),
    both from ``optcomp`` (method "basic"; delta_g capped at 1)."""
    m = mechanisms(eps, delta, k, counts)
    # basic composition needs delta_g >= sum delta_i; just below 1 it certifies sum eps_i
    eps_g = optcomp.epsilon_g(m.eps, m.delta, counts=m.count, delta_g=_BELOW_ONE, method="basic")
    if not math.isfinite(eps_g):  # sum delta_i >= 1: nothing certified
        return np.array([]), np.array([])
    delta_g = optcomp.delta_g(m.eps, m.delta, counts=m.count, eps_g=eps_g, method="basic")
    return np.array([eps_g]), np.array([delta_g])


def drv_family(eps, delta=0.0, *, k=None, counts=None, num: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Advanced composition (KOV Thm 3.2, MV Thm 1.3): for every delta' > 0 the composition is
    (eps_g(delta'), sum delta_i + delta')-DP.  Returns the pairs for ``num`` values of delta'
    spaced geometrically from 1e-20 (or 2^-45 sum delta_i, below which delta' vanishes in
    the rounding of sum delta_i + delta') to 1 - sum delta_i (exclusive), eps_g from
    ``optcomp.epsilon_g(method="drv")``; pairs the theorem cannot certify are dropped."""
    m = mechanisms(eps, delta, k, counts)
    base = float(np.dot(m.count, m.delta))
    room = 1.0 - base
    if room <= 0:
        return np.array([]), np.array([])
    smallest = max(1e-20, base * 2.0**-45)
    primes = np.geomspace(smallest, room, num + 1)[:-1]
    dg = np.unique(np.minimum(base + primes, _BELOW_ONE))
    eg = np.array([optcomp.epsilon_g(m.eps, m.delta, counts=m.count, delta_g=float(x), method="drv") for x in dg])
    keep = np.isfinite(eg)
    return eg[keep], dg[keep]


def family_from_eps_grid(eps, delta=0.0, *, k=None, counts=None, method: str = "optimal", eps_g=None, num: int = 200, **options) -> tuple[np.ndarray, np.ndarray]:
    """Any composition theorem: the pairs (x, delta_g(x)) for x over ``eps_g`` (default:
    ``num`` equispaced values in [0, sum eps_i]), delta_g from ``optcomp.delta_g(method=...)``.
    Pairs with delta_g >= 1 (nothing certified) are dropped."""
    m = mechanisms(eps, delta, k, counts)
    if eps_g is None:
        eps_g = np.linspace(0.0, float(np.dot(m.count, m.eps)), num)
    xs = np.asarray(eps_g, dtype=float)
    dg = np.array([optcomp.delta_g(m.eps, m.delta, counts=m.count, eps_g=float(x), method=method, **options) for x in xs])
    keep = dg < 1.0
    return xs[keep], dg[keep]


def composition_family(method: str, eps, delta=0.0, *, k=None, counts=None, num: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """The family of guarantees a theorem gives for a composition: "optimal" (exact corners
    for identical mechanisms, KOV Thm 3.3), "basic" (one pair), "drv" (a delta' grid), any
    other method through :func:`family_from_eps_grid`."""
    m = mechanisms(eps, delta, k, counts)
    if method == "basic":
        return basic_family(m.eps, m.delta, counts=m.count)
    if method == "drv":
        return drv_family(m.eps, m.delta, counts=m.count, num=num)
    if method == "optimal" and m.homogeneous:
        return optimal_family(float(m.eps[0]), float(m.delta[0]), k=m.k)
    return family_from_eps_grid(m.eps, m.delta, counts=m.count, method=method, num=num)


# ---------------------------------------------------------------------------------------
# an independent reference: the Neyman-Pearson curve of composed randomized responses


def randomized_response_tradeoff(alpha, eps, delta=0.0, *, k=None) -> np.ndarray:
    """Trade-off curve of the product of the randomized responses of MV Def. 3.1, computed
    directly by the Neyman-Pearson lemma (no composition theorem involved).

    Each mechanism outputs one of four symbols with probabilities
    P0 = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) and P1 the mirror image.
    The product distribution's outcomes are sorted by likelihood ratio P1/P0; the optimal
    (randomized) tests trace the piecewise-linear curve through the cumulative
    (P0(reject H0), 1 - P1(reject H0)) points.  Exponential in k (4^k outcomes, merged by
    likelihood ratio when homogeneous); a reference for tests, not for production.
    """
    m = mechanisms(eps, delta, k)
    if m.k > 10:
        raise ValueError(f"randomized_response_tradeoff is a brute-force reference limited to k <= 10, got k={m.k}")
    p0 = np.array([1.0])
    p1 = np.array([1.0])
    llr = np.array([0.0])  # log(P1/P0); +-inf for the delta atoms
    for e, d in zip(np.repeat(m.eps, m.count).tolist(), np.repeat(m.delta, m.count).tolist()):
        q = 1.0 / (1.0 + math.exp(e))
        a0 = np.array([d, (1 - d) * (1 - q), (1 - d) * q, 0.0])
        a1 = a0[::-1].copy()
        with np.errstate(divide="ignore"):
            step = np.array([-math.inf, -e, e, math.inf])
        p0 = np.outer(p0, a0).ravel()
        p1 = np.outer(p1, a1).ravel()
        with np.errstate(invalid="ignore"):
            llr = np.add.outer(llr, step).ravel()
        llr = np.where(np.isnan(llr), 0.0, llr)  # -inf + inf: both probabilities are 0
    keep = (p0 > 0) | (p1 > 0)
    p0, p1, llr = p0[keep], p1[keep], llr[keep]
    order = np.argsort(-llr, kind="stable")  # reject H0 on the most H1-like outcomes first
    fa = np.concatenate([[0.0], np.cumsum(p0[order])])
    md = 1.0 - np.concatenate([[0.0], np.cumsum(p1[order])])
    fa[-1] = 1.0
    md[-1] = 0.0
    a = np.asarray(alpha, dtype=float)
    return np.maximum(np.interp(a, fa, md), 0.0)
