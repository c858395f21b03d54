r"""Budget splitting: how much privacy each of k queries may use under a global budget.

The inverse problem of composition (KOV Section 4; the "budget-splitting" use of MV's
optimal composition): given a global budget (eps_g, delta_g) and k queries, find the
largest per-query eps such that the composition theorem certifies

    epsilon_g(eps, delta, k=k, delta_g=delta_g, method=method) <= eps_g,

and from it the Laplace noise each query needs (sensitivity s: scale b = s / eps, standard
deviation sqrt(2) b).  A tighter theorem certifies a larger per-query eps, hence less
noise for the same global guarantee: that difference is what the optimal composition
theorem buys in practice (:func:`noise_table`).

Functions:

* :func:`per_query_epsilon` -- the largest eps for k identical (eps, delta)-DP queries;
* :func:`largest_scale` / :func:`split_budget` -- the largest common scale c for given
  weights (query i gets eps_i = c w_i);
* :func:`laplace_scale` -- the Laplace scale per query for a given sensitivity;
* :func:`kov_recipe` -- the closed-form recipe of KOV Corollary 4.1 / Theorem 4.2;
* :func:`noise_for` -- mechanism-aware: the least noise of a Laplace, Gaussian, geometric,
  staircase or discrete Gaussian mechanism whose k-fold composition, composed *as that
  mechanism* (its privacy-loss distribution, not a black-box (eps, delta)), meets the budget;
* :func:`noise_table` -- per-query eps and Laplace noise under basic / DRV / KOV /
  optimal composition, with the KOV recipe beside them (and mechanism-aware rows on request).

How it is computed: a bracketing search over eps_g (what :func:`optcomp.epsilon_g` returns,
computed on the multiset validated once and rescaled per evaluation), which is nondecreasing
in eps for every method -- regula falsi on log eps_g against log eps inside the bracket [last eps that passed, first that failed], safeguarded by bisection
(:mod:`optcomp._search`), started for ``optimal``/``approx`` from the answer of the KOV bound
(cheap, and just below the optimal answer): typically under ten exact evaluations
instead of ~70 for a bisection (k = 10^12 identical queries: 8 evaluations, ~9 s at load 6
on 2 cores where the bisection took ~2 min; ``benchmarks/bench_inverse.py``).  The answer
is *certified on the safe side*: the returned eps is always one at which the check above was
evaluated and passed (the library's eps_g values are themselves rounded up), so using it
never exceeds the budget under that method; the search runs until the bracket is narrower
than ``rtol`` relative to the answer (default 0: until its ends are adjacent floats, the
upper one evaluated and failing), so the answer is the largest admissible value to that
precision.  ``progress=True`` shows a status line on stderr for searches longer than 2 s.
Identical queries are passed to the library as one (eps, delta) pair with its count, never
as k copies.

Setting: the composition theorems (and so every split here) assume that the per-query
parameters are fixed in advance, before any query runs; the queries themselves may be chosen
adaptively.  Choosing the parameters adaptively (e.g. spending more on a query because of
an earlier answer) needs a privacy filter (Rogers et al. 2016; Whitehouse et al. 2023),
which optcomp does not provide.

Modules: this one holds the black-box splits and the tables; the search they all run is
:mod:`optcomp._search`, and the mechanism-aware noise (:func:`noise_for`,
:data:`NOISE_MECHANISMS`) is :mod:`optcomp.noise`, both read here.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from . import _evaluate
from ._inputs import (MAX_K, ParameterTypeError, _as_vector, _describe, _integer, check_count,
                      check_delta_g, check_eps_g, check_k, check_probability, check_sensitivity, mechanisms)
from ._search import _RTOL, _check_rtol, _search, largest_passing  # largest_passing: public here
from .methods import METHOD_INFO, METHODS, check_method
from .noise import NOISE_MECHANISMS, noise_for  # public here (their documented place)
from .noise import _INTEGER_SENSITIVITY, _check_noise_mechanism, _noise_std, _NoNoise, _pure_eps

__all__ = [
    "per_query_epsilon",
    "largest_scale",
    "split_budget",
    "laplace_scale",
    "kov_recipe",
    "noise_table",
    "NoiseRow",
    "Recipe",
    "TABLE_METHODS",
    "largest_passing",
    "noise_for",
    "NOISE_MECHANISMS",
]

TABLE_METHODS = ("basic", "drv", "kov", "optimal")  # the default rows of noise_table


def _check_delta(delta) -> float:
    """A per-query delta: one number in [0, 1)."""
    return check_probability("delta", delta)


def _check_weights(weights, counts=None) -> tuple[np.ndarray, np.ndarray | None]:
    w = _as_vector("weights", weights)
    if w.ndim != 1 or w.size < 1:
        raise ParameterTypeError(f"weights must be a non-empty 1-D sequence of numbers, got {_describe(weights)}")
    bad = ~((w > 0) & np.isfinite(w))
    if bad.any():
        raise ValueError(f"weights must be finite and > 0, got weights[{int(np.argmax(bad))}]={float(w[bad][0])!r}")
    if counts is None:
        return w, None
    if not isinstance(counts, (list, tuple, np.ndarray)) or np.ndim(counts) == 0:
        raise ParameterTypeError(f"counts must be a sequence of integers >= 1, one per weight, got {_describe(counts)}")
    c = [check_count(x, f"counts[{i}]") for i, x in enumerate(counts)]  # each a number of queries
    if len(c) != w.size:
        raise ValueError(f"counts has length {len(c)} but weights has {w.size}")
    if sum(c) > MAX_K:
        raise ValueError(f"counts must sum to at most {MAX_K:.0e} queries, got {sum(c)}")
    return w, np.array(c, dtype=np.int64)


def _check_deltas(delta, size: int) -> np.ndarray:
    """Per-query delta: one number in [0, 1) for all, or one per weight."""
    d = _as_vector("delta", delta)
    if d.ndim == 0:
        d = np.full(size, _check_delta(float(d)))
    elif d.size != size:
        raise ValueError(f"delta has length {d.size} but weights has {size} (give one number or one per weight)")
    bad = ~((d >= 0) & (d < 1))
    if bad.any():
        raise ValueError(f"delta must lie in [0, 1), got delta[{int(np.argmax(bad))}]={float(d[bad][0])!r}")
    return d + 0.0


def largest_scale(weights, eps_g: float, delta_g: float, *, delta=0.0, counts=None, method: str = "auto",
                  rtol: float = _RTOL, progress=None, **options) -> float:
    """Largest c such that queries with eps_i = c * weights[i] (and per-query ``delta``)
    compose to (eps_g, delta_g)-DP under ``method``.

    Args:
        weights: positive relative budgets, one per query (or per kind of query with
            ``counts``).
        eps_g, delta_g: the global budget.
        delta: per-query delta_i (a number, or one per weight); 0 for pure-DP mechanisms
            such as Laplace.
        counts: optional multiplicities: ``weights[i]`` stands for ``counts[i]`` queries.
        method: a name of :data:`optcomp.METHODS`; ``options`` are passed on to it.
        rtol: relative precision of the search (0: to adjacent floats).
        progress: True for a status line on stderr when the search takes more than 2 s,
            or a callable receiving a status dict per evaluation (as ``optcomp.approx``).

    Returns:
        c, certified: ``optcomp.epsilon_g(c * weights, delta, counts=counts,
        delta_g=delta_g, method=method) <= eps_g`` was evaluated at exactly this c.
        0.0 if not even c = 0 fits (delta_g too small for the delta_i).
    """
    w, c = _check_weights(weights, counts)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    d = _check_deltas(delta, w.size)
    rtol = _check_rtol(rtol)
    check_method(method, options)
    weighted = mechanisms(w, d, counts=c)  # the multiset of (weight, delta) pairs, equal ones grouped
    _evaluate.epsilon(weighted, delta_g, method, **options)  # the method's options checked once

    def value_for(method: str, opts: dict) -> Callable[[float], float]:
        def value(scale: float) -> float:
            m = weighted.scaled(scale)  # the queries at this scale, never validated again
            if m is None:  # beyond the float range: nothing is certified
                return math.inf
            return _evaluate.epsilon(m, delta_g, method, **opts)
        return value

    start = max(eps_g, 1e-3) / float(np.dot(weighted.eps, weighted.count.astype(float)))  # basic composition's answer
    scale = _search(value_for, method, options, eps_g, start, rtol=rtol, progress=progress,
                    what=f"largest_scale under {method}")
    return 0.0 if scale is None else scale


def split_budget(weights, eps_g: float, delta_g: float, *, delta=0.0, method: str = "auto",
                 rtol: float = _RTOL, progress=None, **options) -> np.ndarray:
    """Per-query eps_i = c * weights[i] with the largest c of :func:`largest_scale`.

    Returns the array of eps_i (all zeros if even eps_i = 0 does not fit, i.e. delta_g is
    too small for the delta_i).  Certified: ``optcomp.epsilon_g(result, delta,
    delta_g=delta_g, method=method) <= eps_g`` was checked for exactly this c.
    ``progress``: as for :func:`largest_scale`.
    """
    w, _ = _check_weights(weights)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    _check_deltas(delta, w.size)
    rtol = _check_rtol(rtol)
    return largest_scale(w, eps_g, delta_g, delta=delta, method=method, rtol=rtol, progress=progress, **options) * w


def per_query_epsilon(k: int, eps_g: float, delta_g: float, *, delta: float = 0.0, method: str = "auto",
                      rtol: float = _RTOL, progress=None, **options) -> float:
    """Largest eps such that k (eps, delta)-DP queries compose to (eps_g, delta_g)-DP.

    Args:
        k: number of queries (an integer >= 1).
        eps_g, delta_g: the global budget.
        delta: the per-query delta (0 for pure-DP mechanisms such as Laplace).
        method: a name of :data:`optcomp.METHODS`; ``options`` are passed on to it.
        rtol: relative precision of the search (0: to adjacent floats).
        progress: True for a status line on stderr when the search takes more than 2 s,
            or a callable receiving a status dict per evaluation (as ``optcomp.approx``).

    Returns:
        The largest eps to precision ``rtol``, certified: ``optcomp.epsilon_g(eps, delta,
        k=k, delta_g=delta_g, method=method) <= eps_g`` was evaluated at this value.  0.0
        when no eps works (delta_g < 1 - (1 - delta)^k for the optimal method, < k delta
        for the others; or a zero budget).
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    delta = _check_delta(delta)
    rtol = _check_rtol(rtol)
    check_method(method, options)

    unit = mechanisms(1.0, delta, k=k)  # k identical (1, delta) queries: scaled by eps below

    def value_for(method: str, opts: dict) -> Callable[[float], float]:
        return lambda e: _evaluate.epsilon(unit.scaled(e), delta_g, method, **opts)

    eps = _search(value_for, method, options, eps_g, max(eps_g, 1e-3) / k, rtol=rtol, progress=progress,
                  what=f"per-query eps under {method}")
    return 0.0 if eps is None else eps


def _noise(sensitivity: float, eps: float, what: str) -> float:
    """sensitivity / eps, refusing an infinite or zero scale (no usable noise level)."""
    scale = sensitivity / eps if eps > 0 else math.inf
    if not (0.0 < scale < math.inf):
        raise ValueError(f"no finite, nonzero Laplace scale for {what}: per-query eps = {eps!r}, "
                         f"sensitivity = {sensitivity!r}")
    return scale


def laplace_scale(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0, method: str = "auto",
                  progress=None, **options) -> float:
    """Laplace noise scale b = sensitivity / eps per query (variance 2 b^2).

    k queries of that sensitivity, each answered with Lap(b) noise (an (eps, 0)-DP
    mechanism), are (eps_g, delta_g)-DP under ``method``; eps from
    :func:`per_query_epsilon` (certified).  Raises ``ValueError`` when the budget admits no
    positive per-query eps under the method (e.g. eps_g = 0 with delta_g = 0, or DRV with
    delta_g = 0): no finite noise level suffices.
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = check_sensitivity(sensitivity)
    eps = per_query_epsilon(k, eps_g, delta_g, delta=0.0, method=method, progress=progress, **options)
    return _noise(sensitivity, eps, f"k={k} queries within (eps_g={eps_g!r}, delta_g={delta_g!r}) under {method!r}")


class Recipe(NamedTuple):
    """A per-query (eps, delta) and the Laplace noise that realises it."""

    eps: float
    delta: float
    laplace_scale: float
    laplace_std: float


def kov_recipe(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0) -> Recipe:
    """KOV Corollary 4.1 and Theorem 4.2: a closed-form per-query budget.

    For eps_g in (0, 0.9] and delta_g in (0, 1], k queries, each
    (sqrt(eps_g^2 / (4 k log(e + eps_g/delta_g))), delta_g/(2k))-DP, compose to
    (eps_g, delta_g)-DP; Laplace noise of variance 8 k sensitivity^2 log(e + eps_g/delta_g)
    / eps_g^2 per query (scale sensitivity / eps) achieves it.  The eps is rounded down
    (a few ulps) so that floating point never leaves the corollary's guarantee.

    Raises ``ValueError`` outside the corollary's range (eps_g > 0.9, eps_g = 0 or
    delta_g = 0).
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = check_sensitivity(sensitivity)
    if not 0.0 < eps_g <= 0.9:
        raise ValueError(f"eps_g must lie in (0, 0.9] for KOV Corollary 4.1, got {eps_g!r}")
    if not delta_g > 0.0:
        raise ValueError(f"delta_g must be > 0 for KOV Corollary 4.1, got {delta_g!r}")
    eps = eps_g / math.sqrt(4.0 * k * math.log(math.e + eps_g / delta_g))
    for _ in range(4):  # round down: sqrt, log, division and product each err by <= 1 ulp
        eps = math.nextafter(eps, 0.0)
    scale = _noise(sensitivity, eps, f"KOV Cor. 4.1 with k={k}")
    return Recipe(eps, delta_g / (2 * k), scale, math.sqrt(2.0) * scale)


class NoiseRow(NamedTuple):
    """One row of :func:`noise_table`.

    ``eps``/``delta``: the per-query budget, always a float (never None or NaN).  A
    mechanism-aware row gives the mechanism's own pure-DP guarantee: its eps with delta 0.0
    -- eps = inf for the Gaussians, whose privacy loss is unbounded (no finite eps at
    delta 0: their guarantee is the composed one the row was calibrated to) -- and, where no
    finite noise fits, eps = delta = 0.0 as for a method that certifies no positive eps
    (only infinite noise, i.e. no output, meets the budget); ``laplace_scale``/``laplace_std``:
    the Laplace noise per query (None where the method certifies no positive eps, and in the
    rows of other mechanisms); ``vs_optimal``: noise relative to the optimal row (its
    standard deviation; None without one); ``noise_std``: the standard deviation of the
    row's noise per query; ``mechanism``: a mechanism-aware row's mechanism object (of
    :func:`noise_for`), else None.
    """

    method: str
    theorem: str
    eps: float
    delta: float
    laplace_scale: float | None
    laplace_std: float | None
    vs_optimal: float | None
    noise_std: float | None = None
    mechanism: object | None = None


def noise_table(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0, delta: float = 0.0,
                methods=TABLE_METHODS, recipe: bool = True, mechanisms=(), progress=None,
                **options) -> list[NoiseRow]:
    """What tighter accounting buys: per-query eps and Laplace noise under each method.

    One row per name in ``methods`` (:func:`per_query_epsilon` with per-query ``delta``,
    certified) and, with ``recipe=True`` and where it applies (eps_g <= 0.9, delta_g > 0),
    a row ``"kov_cor4.1"`` for KOV Corollary 4.1 (:func:`kov_recipe`, its per-query delta is
    delta_g/(2k)).  Options are passed to every method that accepts them.  A method that
    certifies no positive eps gets eps 0.0 and no noise (None).

    ``mechanisms``: names of :data:`NOISE_MECHANISMS` (e.g. ``("laplace", "gaussian")``), one
    mechanism-aware row each, ``"laplace-aware"``, ``"gaussian-aware"`` ...: the least noise
    of that mechanism whose k copies, composed as that mechanism, meet the budget
    (:func:`noise_for` with method auto: the optimum where exact -- Gaussians --, else
    approx's certified upper bound), with its standard deviation ``noise_std`` and the
    ``mechanism`` object; no noise (None) where no finite noise fits.  (Each Laplace-aware
    row runs a search over the mechanism engine: ~10 s at k = 10^4.)  ``progress``: as for
    :func:`per_query_epsilon`, for each row's search.
    """
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    sensitivity = check_sensitivity(sensitivity)
    delta = _check_delta(delta)
    if isinstance(methods, str):
        methods = (methods,)
    if not isinstance(methods, (list, tuple)):
        raise ParameterTypeError(f"methods must be a method name or a list of them, got {_describe(methods)}")
    for i, m in enumerate(methods):
        if not isinstance(m, str) or m not in METHOD_INFO:
            raise ValueError(f"methods[{i}] must be one of {', '.join(METHODS)}; got {_describe(m)}")
    if not isinstance(recipe, (bool, np.bool_)):
        raise ParameterTypeError(f"recipe must be True or False, got {_describe(recipe)}")
    if isinstance(mechanisms, str):
        mechanisms = (mechanisms,)
    if not isinstance(mechanisms, (list, tuple)):
        raise ParameterTypeError(f"mechanisms must be a mechanism name or a list of them, got {_describe(mechanisms)}")
    for i, name in enumerate(mechanisms):
        _check_noise_mechanism(name, f"mechanisms[{i}]")
    for key in options:
        if not any(key in METHOD_INFO[m].options for m in methods):
            raise ValueError(f"unknown option {key!r}: accepted by none of the methods {', '.join(methods)}")
    rows = []
    for m in methods:
        info = check_method(m, {})
        opts = {key: v for key, v in options.items() if key in info.options}
        eps = per_query_epsilon(k, eps_g, delta_g, delta=delta, method=m, progress=progress, **opts)
        scale = sensitivity / eps if eps > 0 and math.isfinite(sensitivity / eps) else None
        std = None if scale is None else math.sqrt(2.0) * scale
        rows.append(NoiseRow(m, info.theorem, eps, float(delta), scale, std, None, std))
    if recipe and 0.0 < eps_g <= 0.9 and delta_g > 0.0:
        r = kov_recipe(k, eps_g, delta_g, sensitivity=sensitivity)
        rows.append(NoiseRow("kov_cor4.1", "KOV Cor. 4.1 / Thm 4.2 (closed-form recipe, eps_g <= 0.9)",
                             r.eps, r.delta, r.laplace_scale, r.laplace_std, None, r.laplace_std))
    for name in mechanisms:
        rows.append(_mechanism_row(name, k, eps_g, delta_g, sensitivity, progress))
    best = next((r for r in rows if r.method == "optimal" and r.laplace_scale is not None), None)
    if best is not None:
        rows = [r._replace(vs_optimal=r.laplace_scale / best.laplace_scale if r.laplace_scale is not None
                           else None if r.noise_std is None else r.noise_std / best.laplace_std) for r in rows]
    return rows


def _mechanism_row(name: str, k: int, eps_g: float, delta_g: float, sensitivity: float, progress) -> NoiseRow:
    """The mechanism-aware row of :func:`noise_table` for ``name`` (no noise where none fits)."""
    from .mechanisms import REGISTRY

    cls = REGISTRY[name].__name__
    theorem = (f"{k} {cls} mechanisms composed as such (their privacy-loss distribution), least noise "
               f"certified by method auto (exact for Gaussians, else approx's upper bound within 1e-4)")
    sens = _integer("sensitivity", sensitivity, 1, 2**20) if name in _INTEGER_SENSITIVITY else sensitivity
    try:
        mech = noise_for(name, k, eps_g, delta_g, sensitivity=sens, progress=progress)
    except _NoNoise:
        return NoiseRow(f"{name}-aware", theorem, 0.0, 0.0, None, None, None, None, None)
    scale = mech.scale if name == "laplace" else None
    std = _noise_std(mech) if scale is None else math.sqrt(2.0) * scale  # Laplace: as the black-box rows
    return NoiseRow(f"{name}-aware", theorem, _pure_eps(name, mech), 0.0, scale,
                    None if scale is None else std, None, std, mech)
