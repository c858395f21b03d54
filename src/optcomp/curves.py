r"""Privacy curves: delta(eps_g) of a composition and its hypothesis-testing region.

A composition is (eps_g, delta(eps_g))-DP for every eps_g at once; the function
eps_g -> delta(eps_g) is its *privacy curve* (for the optimal method, the hockey-stick
divergence of MV Thm 1.5 / KOV Thm 3.3).  By KOV Thm 2.1 the same information is the
*privacy region*: the set of (false alarm P_FA, missed detection P_MD) pairs any test of
"D0 vs D1" can reach, the intersection of the regions R(eps_g, delta(eps_g)); its lower
boundary is the *trade-off curve* beta(alpha), the least P_MD at P_FA = alpha
(:mod:`optcomp.region`).

:func:`privacy_curve` evaluates both for any method of :data:`optcomp.METHODS`, for (eps, delta)
pairs and for mechanism objects of :mod:`optcomp.mechanisms` (``privacy_curve(Laplace(10.0),
k=100)``; the theorems about pairs refuse those, naming the method):

* ``delta``: the certified delta at each eps_g (an upper bound: the composition *is*
  (eps_g, delta[i])-DP; for ``method="optimal"`` the optimum rounded up by a few ulps);
* ``delta_lower``: certified lower bounds on the optimal delta where the method brackets
  the optimum (``method="approx"`` with the default ``algorithm="fast"``), else None;
* ``alpha``, ``beta``, ``beta_upper``: the trade-off curve and the upper boundary of the
  privacy region implied by the pairs (eps_g[i], delta[i]).  Every pair is a certified
  guarantee, so the region drawn from finitely many of them *contains* the method's region
  (errs on the safe side).  For ``method="optimal"`` with identical mechanisms the default
  grid includes KOV Thm 3.3's corners (k - 2i) eps when there are at most ``num`` of them
  in range, and the region is then exactly the optimal one.

The default ``method="auto"`` is decided once per curve: ``optimal`` where the exact
computation is feasible -- for mechanism objects only Gaussians alone (their closed form) --,
else ``approx``'s certified brackets at every point.

Setting: as for every result of optcomp, the (eps_i, delta_i) are fixed in advance (the
mechanisms may be adaptive); adaptively chosen parameters need a privacy filter, which
optcomp does not provide.
"""

from __future__ import annotations

import math
import sys
import time
from typing import NamedTuple

import numpy as np

from . import _evaluate, region
from ._inputs import _as_vector, _integer, mechanisms
from .methods import check_method

__all__ = ["privacy_curve", "privacy_curve_of", "PrivacyCurve", "default_grid"]

_BRACKETING = ("eta", "tol", "max_points", "max_memory")


class PrivacyCurve(NamedTuple):
    """The result of :func:`privacy_curve` (arrays of floats).

    Attributes:
        method: the method that certified the curve.
        eps_g: the grid of global eps values (sorted).
        delta: certified delta at each eps_g (1.0 where the method certifies nothing).
        delta_lower: certified lower bounds on the optimal delta (``method="approx"``),
            else None.
        alpha: false-alarm probabilities in [0, 1] (sorted).
        beta: the trade-off curve: least missed-detection probability at each alpha.
        beta_upper: the region's upper boundary, 1 - beta(1 - alpha).
    """

    method: str
    eps_g: np.ndarray
    delta: np.ndarray
    delta_lower: np.ndarray | None
    alpha: np.ndarray
    beta: np.ndarray
    beta_upper: np.ndarray


# 1 - delta(x) <= 2^-54 puts the optimal delta above the largest float below 1 (1 - 2^-53):
# its least upper float is 1.0; log(2^-54) = -37.4, one nat of margin
_LOG_ONE_MINUS = -38.4
_LAMBDAS = np.logspace(-16.0, 0.0, 129)  # Chernoff exponents tried (ratio 1.33)


def certainly_one(eps, counts, grid) -> np.ndarray:
    """Grid points x where the optimal delta(x) lies within 2^-54 of 1, so that 1.0 -- the
    least float >= it -- is the optimal delta rounded up and every method's certified delta.

    A Chernoff bound on MV Thm 1.5's H(x) = E_P0[(1 - e^{x - L})_+]: for every lambda in
    [0, 1], P0[L <= x] <= e^{lambda x} E_P0[e^{-lambda L}] and E_P0[e^{x - L} 1{L > x}] <=
    e^{lambda x} E_P0[e^{-lambda L}] (e^{x - L} <= e^{lambda (x - L)} there), so
    1 - delta(x) <= 1 - H(x) = E_P0[min(1, e^{x - L})] <= 2 e^{lambda x} prod_i M_i(lambda)^{c_i}
    with log M_i(lambda) = log E[e^{-lambda L_i}] = K_i(-lambda), the cumulant generating
    function of the randomized response of MV Def. 3.1 (:func:`optcomp._cgf.cgf_terms`; the
    delta_i only lower 1 - delta further).  Mechanisms composed beside the pairs (objects of
    :mod:`optcomp.mechanisms`) are left out of the product, which only raises the bound: each
    of their factors E_P[e^{-lambda L}] = E_P[(dQ/dP)^lambda] <= (E_P[dQ/dP])^lambda <= 1
    (Jensen, lambda in [0, 1]; an infinite loss contributes 0), in either direction.  The log of the bound is charged 1e-13 of the
    magnitudes of K's arguments for float error (a few ulps each).  Costs O(#pairs x 129)
    -- it spares the exact evaluation of the points far below the bulk of the loss
    (k = 10^12: a binomial window of ~10^7 atoms each).
    """
    from scipy.special import log_expit

    from ._cgf import cgf_terms

    e = np.asarray(eps, dtype=float)
    c = np.asarray(counts, dtype=float)
    x = np.asarray(grid, dtype=float)
    keep = e > 0.0
    e, c = e[keep], c[keep]
    if e.size == 0 or x.size == 0:
        return np.zeros(x.shape, dtype=bool)
    lam = _LAMBDAS[:, None]
    lp, lq = log_expit(e)[None, :], log_expit(-e)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        s = (c[None, :] * cgf_terms(lp, lq, e[None, :], -lam)).sum(axis=1)  # (lambdas,), <= 0
        scale = (c[None, :] * (np.maximum(-lp, -lq) + lam * e[None, :] + 1.0)).sum(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        lx = _LAMBDAS[:, None] * x[None, :]
        exponent = lx + s[:, None] + 1e-13 * (np.abs(lx) + scale[:, None]) + math.log(2.0)
    return np.nanmin(np.where(np.isfinite(exponent), exponent, np.inf), axis=0) <= _LOG_ONE_MINUS


_GRID_TOL = 1e-3  # certified gap of the approx evaluation placing the grid's right end (any upper bound will do)


def default_grid(eps, delta, counts, method: str, num: int, *, others=()) -> np.ndarray:
    """The default eps_g grid: ``num`` equispaced points from 0 to where the curve ends.

    The right end is sum_i eps_i (basic composition's point; the largest float where the
    sum overflows) for ``"basic"``, otherwise
    the smaller of sum_i eps_i and the KOV bound's eps_g at delta~ = 1e-12 (beyond it the
    curve is below ~1e-12 above its floor).  For ``"optimal"`` with one distinct pair,
    KOV Thm 3.3's corners (k - 2i) eps in range are added when there are at most ``num``.
    With mechanism objects (``others``: ((mechanism, count), ...) beside the pairs) the
    right end is the eps_g ``method`` certifies at delta~ = 1e-12 (``approx`` with
    tol = 1e-3 for ``approx``/``auto``; delta~ raised to 1e-6, 1e-3, 0.1 while nothing is
    certified), or sum_i eps_i (1 without pairs) when none of them is.
    """
    e = list(np.asarray(eps, dtype=float).tolist()) + [mech for mech, _ in others]
    d = list(np.asarray(delta, dtype=float).tolist()) + [0.0] * len(others)
    c = [int(n) for n in np.asarray(counts).tolist()] + [int(n) for _, n in others]
    return _grid(mechanisms(e, d, counts=c), method, num)


def _grid(m, method: str, num: int) -> np.ndarray:
    """:func:`default_grid` of the validated multiset ``m``."""
    eps, delta, counts = m.eps, m.delta, m.count
    log_keep = float(np.dot(np.log1p(-delta), counts.astype(float)))
    if m.others:
        return np.linspace(0.0, _mechanism_end(m, log_keep, method), num)
    total = _total(eps, counts)
    upper = total
    if method != "basic" and total > 0:
        target = -math.expm1(math.log1p(-1e-12) + log_keep)
        if target < 1.0:
            cap = _evaluate.epsilon(m, target, "kov")
            if math.isfinite(cap) and cap > 0:
                upper = min(total, cap)
    grid = np.linspace(0.0, upper, num)
    if method == "optimal" and eps.size == 1 and eps[0] > 0:
        k, e = int(counts[0]), float(eps[0])
        i_lo = max(0, math.ceil((k - upper / e) / 2))
        if k // 2 + 1 - i_lo <= num:
            corners = (k - 2 * np.arange(i_lo, k // 2 + 1)) * e
            grid = np.union1d(grid, corners[(corners >= 0) & (corners <= upper)])
    return grid


def _mechanism_end(m, log_keep: float, method: str) -> float:
    """The right end of :func:`default_grid` for the multiset ``m`` holding mechanism objects
    (``log_keep``: log prod_i (1 - delta_i) of its pairs): where ``method`` certifies delta ~
    1e-12 above the floor."""
    how = {"method": "approx", "tol": _GRID_TOL} if method in ("approx", "auto") else {"method": method}
    for above in (1e-12, 1e-6, 1e-3, 0.1):
        target = -math.expm1(math.log1p(-above) + log_keep)
        if target < 1.0:
            cap = _evaluate.epsilon(m, target, **how)
            if math.isfinite(cap) and cap > 0:
                return cap
    total = _total(m.eps, m.count)
    return total if total > 0 else 1.0


def _total(eps, counts) -> float:
    """sum_i count_i eps_i, the largest float where it overflows (a grid's right end: the
    curve is then 1.0 to the last bit up to there, e.g. for eps = 1e308)."""
    with np.errstate(over="ignore"):
        total = float(np.dot(np.asarray(eps, dtype=float), np.asarray(counts, dtype=float)))
    return min(total, sys.float_info.max)


def _resolve_auto(m, options):
    """``method="auto"`` for a whole curve: ``optimal`` when the exact computation is
    feasible for these mechanisms (one probe at eps_g = 0, where the exact solvers do the
    most work; mechanism objects other than Gaussians alone are refused at once), else
    ``approx`` with ``tol`` = :data:`optcomp.auto.AUTO_TOL` (its certified brackets: the curve
    then carries ``delta_lower`` too).  ``m``: the validated multiset."""
    from ._types import ExactTooLarge
    from .auto import AUTO_TOL

    memory = {key: v for key, v in options.items() if key == "max_memory"}  # every method's
    try:
        _evaluate.delta(m, 0.0, "optimal", **memory)
        return "optimal", memory  # auto's other option, tol, is the fallback's
    except ExactTooLarge:
        return "approx", {"tol": AUTO_TOL, **options}


def privacy_curve(eps, delta=0.0, *, k=None, counts=None, eps_g=None, num: int = 101, method: str = "auto",
                  num_alpha: int = 1001, progress=None, **options) -> PrivacyCurve:
    """Certified privacy curve delta(eps_g) and privacy region of a composition.

    Args:
        eps, delta, k, counts: the mechanisms, as for :func:`optcomp.epsilon_g` (a number
            or a mechanism object with ``k=``, or per-entry sequences -- numbers and
            mechanism objects of :mod:`optcomp.mechanisms` mixed -- with optional ``counts=``).
        eps_g: the grid of global eps values (finite, >= 0); default :func:`default_grid`
            with ``num`` points.
        num: number of grid points when ``eps_g`` is not given (an integer in [2, 10^6]).
        method: a name of :data:`optcomp.METHODS`; ``options`` are passed on to it.  The
            default ``"auto"`` is decided once per curve: ``"optimal"`` where the exact
            computation is feasible (with mechanism objects: Gaussians alone), else
            ``"approx"`` with ``tol=1e-4`` (certified brackets); the curve's ``method`` says
            which ran.
        num_alpha: equispaced false-alarm points of the trade-off curve (the kinks of
            every (eps_g, delta) pair are added; an integer in [2, 10^6]).
        progress: True for a status line on stderr once the curve has taken more than 2 s,
            or a callable receiving a status dict per grid point evaluated (``stage``,
            ``evaluated``, ``to_evaluate``, ``seconds``), as ``optcomp.calibrate``.

    Returns:
        :class:`PrivacyCurve`.  Cost: one library call per grid point (the exact method
        for identical mechanisms: ~1 ms each, up to ~0.5 s at k = 10^12; ``approx``: ~0.1 s
        each), except points where a Chernoff bound shows delta = 1.0 to the last bit
        (:func:`certainly_one`: far below the bulk of the privacy loss), which cost nothing.

    Raises:
        ValueError: bad input (naming the parameter), or, for ``method="optimal"``, an exact
            computation too large (``optcomp.ExactTooLarge``; the default ``"auto"`` then
            uses ``"approx"``).
    """
    num = _integer("num", num, 2, region.MAX_NUM)
    num_alpha = _integer("num_alpha", num_alpha, 2, region.MAX_NUM)
    check_method(method, options)
    m = mechanisms(eps, delta, k, counts)  # validated as by the public API: errors name the parameter
    return privacy_curve_of(m, eps_g=eps_g, num=num, method=method, num_alpha=num_alpha, progress=progress,
                            **options)


def privacy_curve_of(m, *, eps_g=None, num: int = 101, method: str = "auto", num_alpha: int = 1001,
                     progress=None, **options) -> PrivacyCurve:
    """:func:`privacy_curve` of a validated multiset ``m`` (``optcomp.Accountant(...).multiset``,
    or :func:`optcomp._inputs.mechanisms`' result), which is not read again: the command line's
    curves and a ledger's come from here.  The other arguments are checked as there."""
    num = _integer("num", num, 2, region.MAX_NUM)
    num_alpha = _integer("num_alpha", num_alpha, 2, region.MAX_NUM)
    check_method(method, options)
    if m.k == 0:
        raise ValueError("m must hold at least one mechanism, got an empty multiset")
    m.check_total("m")  # (a ledger may hold more than the library composes)
    if m.others and method not in ("optimal", "approx", "auto"):
        m.black_box_only(method)  # a theorem about (eps, delta) pairs: refused before any work
    e, c = m.eps, m.count  # the (eps, delta) pairs' eps and counts
    if method == "auto":  # decided once for the whole curve: exact if feasible, else approx's brackets
        method, options = _resolve_auto(m, options)
    if eps_g is None:
        grid = _grid(m, method, num)
    else:
        grid = np.atleast_1d(_as_vector("eps_g", eps_g))
        if grid.size < 1:
            raise ValueError(f"eps_g must be a non-empty 1-D sequence, got shape {grid.shape}")
        bad = ~(np.isfinite(grid) & (grid >= 0))
        if bad.any():
            raise ValueError(f"eps_g must be finite and >= 0, got eps_g[{int(np.argmax(bad))}]={float(grid[bad][0])!r}")
        grid = np.unique(grid)
    bracket = method == "approx" and options.get("algorithm", "fast") == "fast"
    upper = np.empty(grid.size)
    lower = np.empty(grid.size) if bracket else None
    one = certainly_one(e, c, grid)  # delta = 1.0 to the last bit (the pairs alone show it): no evaluation needed
    from . import _progress

    callback = _progress.callback(progress, delayed=True)
    t0, todo = time.perf_counter(), int(np.count_nonzero(~one))
    try:
        done = 0
        for i, x in enumerate(grid.tolist()):
            if one[i]:
                upper[i] = 1.0
                if bracket:
                    lower[i] = math.nextafter(1.0, 0.0)  # the optimum is >= 1 - 2^-54
                continue
            if bracket:
                b = _evaluate.delta_bounds(m, x, **{key: v for key, v in options.items() if key in _BRACKETING})
                lower[i], upper[i] = b.lower, b.upper
            else:
                upper[i] = _evaluate.delta(m, x, method, **options)
            done += 1
            if callback is not None:
                callback(dict(stage=f"privacy curve under {method} ({done}/{todo} points)", evaluated=done,
                              to_evaluate=todo, seconds=time.perf_counter() - t0))
    finally:
        _progress.close(callback)
    keep = upper < 1.0
    if keep.any():
        alpha = region.boundary_alphas(grid[keep], upper[keep], num=num_alpha)
        beta = region.tradeoff(alpha, grid[keep], upper[keep])
        beta_upper = region.upper_boundary(alpha, grid[keep], upper[keep])
    else:  # nothing certified: the region is the whole square
        alpha = np.linspace(0.0, 1.0, num_alpha)
        beta, beta_upper = np.zeros_like(alpha), np.ones_like(alpha)
    return PrivacyCurve(method, grid, upper, lower, alpha, beta, beta_upper)
