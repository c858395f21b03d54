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

from . import _evaluate
from ._inputs import ParameterTypeError, _as_vector, _check_real, _describe, _integer, mechanisms
from .methods import check_method

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
MAX_NUM = 10**6  # the largest ``num`` (grid points) accepted


def _first_bad(name: str, arr: np.ndarray, bad: np.ndarray, what: str) -> None:
    """Raise a ValueError naming ``name`` and its first entry where ``bad`` holds."""
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
        where = f"{name}[{', '.join(map(str, i))}]" if i else name
        raise ValueError(f"{name} must {what}, got {where}={float(arr[i])!r}")


def _reals(name: str, value) -> np.ndarray:
    """A float array of any shape (no NaN) from a number or a (nested, rectangular) sequence."""
    arr = _as_vector(name, value, max_ndim=None)
    _first_bad(name, arr, np.isnan(arr), "not be NaN")
    return arr


def _alpha(alpha, name: str = "alpha") -> np.ndarray:
    """False-alarm probabilities: a number or an array of any shape, entries in [0, 1]."""
    a = _reals(name, alpha)
    _first_bad(name, a, ~((a >= 0.0) & (a <= 1.0)), "lie in [0, 1]")
    return a


def _num(num, lo: int) -> int:
    return _integer("num", num, lo, MAX_NUM)


def _family(eps, delta) -> tuple[np.ndarray, np.ndarray]:
    """A family of guarantees: eps >= 0 (inf allowed: a vacuous constraint), delta in [0, 1],
    a number each or equal-length 1-D sequences (a number delta applies to every eps)."""
    e = np.atleast_1d(_as_vector("eps", eps))
    d = _as_vector("delta", delta)
    _first_bad("eps", e, ~(e >= 0), "be >= 0 (inf allowed)")  # also rejects NaN
    _first_bad("delta", d, ~((d >= 0) & (d <= 1)), "lie in [0, 1]")
    if d.ndim == 0:
        d = np.full(e.shape, float(d))
    elif d.size != e.size:
        raise ValueError(f"delta has length {d.size} but eps has {e.size} entries (give one number or one per eps)")
    return e + 0.0, d + 0.0


def tradeoff(alpha, eps, delta=0.0) -> np.ndarray:
    """Lower boundary beta(alpha) of the privacy region of a family of (eps_j, delta_j)-DP
    guarantees (KOV Thm 2.1; intersection of the R(eps_j, delta_j)).

    ``beta(alpha) = max_j max(0, 1 - delta_j - e^{eps_j} alpha, e^{-eps_j} (1 - delta_j - alpha))``.
    ``alpha`` is an array of false-alarm probabilities in [0, 1]; ``eps``/``delta`` are a
    pair of numbers or equal-length arrays (one guarantee each).  Pairs with eps = inf
    constrain nothing.
    """
    return _tradeoff(_alpha(alpha), *_family(eps, delta))


def _tradeoff(a: np.ndarray, e: np.ndarray, d: np.ndarray) -> np.ndarray:
    """:func:`tradeoff` on validated arrays (``a`` may leave [0, 1]: the lines extended)."""
    finite = np.isfinite(e)
    e, d = e[finite], d[finite]
    if e.size == 0:
        return np.zeros_like(a)
    flat = a.reshape(-1, 1)
    one = 1.0 - d[None, :]
    # e^eps overflows to inf for eps > 709: the line is then vertical, e^eps alpha = 0 at
    # alpha = 0 exactly (not inf * 0 = NaN) and -inf beyond
    with np.errstate(over="ignore", invalid="ignore"):
        slope = np.exp(e)[None, :] * flat
    line1 = one - np.where(flat == 0.0, 0.0, slope)
    line2 = np.exp(-e)[None, :] * (one - flat)
    beta = np.maximum(np.maximum(line1, line2).max(axis=1), 0.0)
    return beta.reshape(a.shape)


def upper_boundary(alpha, eps, delta=0.0) -> np.ndarray:
    """Upper boundary of the same region: 1 - beta(1 - alpha) (the region's point symmetry)."""
    return 1.0 - _tradeoff(1.0 - _alpha(alpha), *_family(eps, delta))


def contains(p_fa, p_md, eps, delta=0.0, *, tol: float = 0.0) -> np.ndarray:
    """Whether (P_FA, P_MD) lies in the intersection of the R(eps_j, delta_j) (up to ``tol``).

    ``p_fa``/``p_md``: numbers or arrays of the same (or broadcastable) shape; points outside
    the unit square are not contained.  ``tol``: a finite number >= 0."""
    a = _reals("p_fa", p_fa)
    b = _reals("p_md", p_md)
    tol = _check_real("tol", tol)
    if not (math.isfinite(tol) and tol >= 0.0):
        raise ValueError(f"tol must be finite and >= 0, got {tol!r}")
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(f"p_fa and p_md must have the same shape, got shapes {a.shape} and {b.shape}") from None
    e, d = _family(eps, delta)
    inside = (a >= -tol) & (a <= 1 + tol) & (b >= -tol) & (b <= 1 + tol)
    return inside & (b >= _tradeoff(a, e, d) - tol) & (b <= 1.0 - _tradeoff(1.0 - a, e, d) + tol)


def boundary_alphas(eps, delta=0.0, num: int = 1001) -> np.ndarray:
    """A sorted grid of P_FA values for drawing the boundary: ``num`` equispaced points in
    [0, 1] plus every alpha where one of the family's lines has a kink (where
    e^eps alpha = 1 - delta, where alpha = 1 - delta, and the symmetric point
    (1 - delta)/(1 + e^eps)), and their mirror images 1 - alpha.  ``num``: an integer in
    [2, 10^6]."""
    num = _num(num, 2)
    e, d = _family(eps, delta)
    finite = np.isfinite(e)
    e, d = e[finite], d[finite]
    with np.errstate(over="ignore"):  # e^eps = inf for eps > 709: the kink at 0, as it should be
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
    (the same quantity, computed stably and rounded up).  ``eps`` and ``delta`` are single
    numbers (for a list of mechanisms use :func:`family_from_eps_grid`).
    """
    for name, value in (("eps", eps), ("delta", delta)):
        if _as_vector(name, value).ndim != 0:
            raise ParameterTypeError(f"{name} must be a single number here (k identical mechanisms; for a list use "
                                     f"family_from_eps_grid), got {_describe(value)}")
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
        delta_g = np.array([_evaluate.delta(m, float(x)) for x in eps_g])
        return eps_g, delta_g
    # one pass over all k + 1 atoms: H at every corner (each within ulps of an atom: the
    # distance to the first atom above it is taken exactly, see optcomp.loss)
    from .loss import delta_from_excess
    from .optimal import BIG_EPS, binomial_window

    if e >= BIG_EPS:
        delta_g = np.array([_evaluate.delta(m, float(x)) for x in eps_g])
        return eps_g, delta_g
    h = binomial_window(e, k, 0, k).excess_many(eps_g)
    delta_g = np.array([delta_from_excess(m, float(x)) for x in h])
    return eps_g, delta_g


def basic_family(eps, delta=0.0, *, k=None, counts=None) -> tuple[np.ndarray, np.ndarray]:
    """Basic composition (KOV Thm 3.1, MV Thm 1.2): the single pair (sum eps_i, sum delta_i),
    both from ``optcomp`` (method "basic"; delta_g capped at 1)."""
    m = mechanisms(eps, delta, k, counts)
    # basic composition needs delta_g >= sum delta_i; just below 1 it certifies sum eps_i
    eps_g = _evaluate.epsilon(m, _BELOW_ONE, "basic")
    if not math.isfinite(eps_g):  # sum delta_i >= 1: nothing certified
        return np.array([]), np.array([])
    delta_g = _evaluate.delta(m, eps_g, "basic")
    return np.array([eps_g]), np.array([delta_g])


def drv_family(eps, delta=0.0, *, k=None, counts=None, num: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Advanced composition (KOV Thm 3.2, MV Thm 1.3): for every delta' > 0 the composition is
    (eps_g(delta'), sum delta_i + delta')-DP.  Returns the pairs for ``num`` values of delta'
    spaced geometrically from 1e-20 (or 2^-45 sum delta_i, below which delta' vanishes in
    the rounding of sum delta_i + delta') to 1 - sum delta_i (exclusive), eps_g from
    ``optcomp.epsilon_g(method="drv")``; pairs the theorem cannot certify are dropped.
    ``num``: an integer in [1, 10^6]."""
    num = _num(num, 1)
    m = mechanisms(eps, delta, k, counts)
    base = float(np.dot(m.count, m.delta))
    room = 1.0 - base
    if room <= 0:
        return np.array([]), np.array([])
    smallest = max(1e-20, base * 2.0**-45)
    primes = np.geomspace(smallest, room, num + 1)[:-1]
    dg = np.unique(np.minimum(base + primes, _BELOW_ONE))
    eg = np.array([_evaluate.epsilon(m, float(x), "drv") for x in dg])
    keep = np.isfinite(eg)
    return eg[keep], dg[keep]


def family_from_eps_grid(eps, delta=0.0, *, k=None, counts=None, method: str = "auto", eps_g=None, num: int = 200, **options) -> tuple[np.ndarray, np.ndarray]:
    """Any composition theorem: the pairs (x, delta_g(x)) for x over ``eps_g`` (default:
    ``num`` equispaced values in [0, sum eps_i]), delta_g from ``optcomp.delta_g(method=...)``.
    Pairs with delta_g >= 1 (nothing certified) are dropped.  ``eps_g``: a number or a 1-D
    sequence of finite numbers >= 0; ``num``: an integer in [1, 10^6]."""
    num = _num(num, 1)
    m = mechanisms(eps, delta, k, counts)
    check_method(method, options)
    if eps_g is None:
        xs = np.linspace(0.0, float(np.dot(m.count, m.eps)), num)
    else:
        xs = np.atleast_1d(_as_vector("eps_g", eps_g))
        _first_bad("eps_g", xs, ~(np.isfinite(xs) & (xs >= 0)), "be finite and >= 0")
    dg = np.array([_evaluate.delta(m, float(x), method, **options) for x in xs])
    keep = dg < 1.0
    return xs[keep], dg[keep]


def composition_family(method: str, eps, delta=0.0, *, k=None, counts=None, num: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """The family of guarantees a theorem gives for a composition: "optimal" (exact corners
    for identical mechanisms, KOV Thm 3.3), "basic" (one pair), "drv" (a delta' grid), any
    other method through :func:`family_from_eps_grid`."""
    check_method(method, {})
    num = _num(num, 1)
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
    a = _alpha(alpha)
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
    return np.maximum(np.interp(a, fa, md), 0.0)
