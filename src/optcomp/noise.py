"""Mechanism-aware calibration: the least noise of a Laplace, Gaussian, geometric,
staircase or discrete Gaussian mechanism whose k copies, composed *as that mechanism* (its
privacy-loss distribution, not a black-box (eps, delta)), meet a global budget.

:func:`noise_for` -- documented, and imported by users, as :func:`optcomp.calibrate.noise_for`
-- runs the certified search of :mod:`optcomp._search` over the mechanism's privacy
parameter (its scale, sigma or eps), started from a cheap guide (KOV's black-box bound for
the pure-DP mechanisms, the Gaussian closed form for the Gaussians).  Certified as every
answer of that search: the mechanism returned is the one at which the composition was
evaluated and passed.  :func:`optcomp.calibrate.noise_table` puts a row of it beside the
black-box rows.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

import optcomp

from ._inputs import _describe, _integer, check_delta_g, check_eps_g, check_k, check_sensitivity
from ._search import _MAX, _check_rtol, _largest_below
from .methods import check_method

__all__ = ["noise_for", "NOISE_MECHANISMS"]


#: the mechanisms :func:`noise_for` calibrates, by the name it takes
NOISE_MECHANISMS = ("laplace", "gaussian", "geometric", "staircase", "discrete_gaussian")
_INTEGER_SENSITIVITY = ("geometric", "discrete_gaussian")
_PURE = ("laplace", "geometric", "staircase")  # x is a pure-DP eps of the mechanism (times the sensitivity for geometric)
_RESOLUTION = {"auto": 1e-4, "approx": 1e-3}  # the certified gap (absolute, in eps_g) of the methods' default tol


class _NoNoise(ValueError):
    """No finite noise of the mechanism meets the budget."""


def _check_noise_mechanism(name, what: str = "mechanism") -> str:
    if not isinstance(name, str) or name not in NOISE_MECHANISMS:
        raise ValueError(f"{what} must be one of {', '.join(NOISE_MECHANISMS)}; got {_describe(name)}")
    return name


def _make(name: str, x: float, sensitivity):
    """The mechanism of privacy parameter x > 0 (``with_privacy`` of the registered family):
    Laplace / Gaussian / discrete Gaussian with scale or sigma sensitivity / x, geometric or
    staircase with eps = x (the staircase with Geng--Viswanath's variance-optimal gamma)."""
    from .mechanisms import REGISTRY

    return REGISTRY[name].with_privacy(x, sensitivity)


def _pure_eps(name: str, m) -> float:
    """The pure-DP eps of a calibrated mechanism: inf for the Gaussians (their privacy loss
    is unbounded, so they are (eps, 0)-DP for no finite eps)."""
    if name == "laplace":
        return m.sensitivity / m.scale
    if name == "geometric":
        return m.eps * m.sensitivity
    if name == "staircase":
        return m.eps
    return math.inf


def _noise_std(m) -> float:
    """The standard deviation of the mechanism's noise (the discrete Gaussian's summed
    directly: its variance is a little below sigma^2)."""
    var = getattr(m, "variance", None)
    if var is not None:
        return math.sqrt(var())
    sigma = m.sigma
    w = int(math.ceil(40.0 * sigma)) + 1
    z = np.arange(-w, w + 1, dtype=float)
    weights = np.exp(-(z * z) / (2.0 * sigma * sigma))
    return math.sqrt(float(np.dot(z * z, weights) / weights.sum()))


def _guide(name: str, k: int, delta_g: float, sensitivity) -> Callable[[float], float] | None:
    """A cheap stand-in for the mechanism-aware eps_g as a function of x, to place the
    search's first point: KOV's bound on k x-DP black boxes for the pure-DP mechanisms (it is
    >= their optimum), the Gaussian closed form (method optimal) for the Gaussians."""
    if name in _PURE:
        scale = sensitivity if name == "geometric" else 1.0
        return lambda x: optcomp.epsilon_g(x * scale, k=k, delta_g=delta_g, method="kov")
    from .mechanisms import Gaussian

    return lambda x: optcomp.epsilon_g(Gaussian(sensitivity / x, sensitivity), k=k, delta_g=delta_g,
                                       method="optimal") if x > 0.0 else 0.0


def noise_for(mechanism, k, eps_g, delta_g, *, sensitivity=1.0, method="auto", rtol=1e-6, progress=None):
    """The least noise of a mechanism whose k copies meet (eps_g, delta_g), mechanism-aware.

    ``mechanism`` is one of :data:`NOISE_MECHANISMS`: ``"laplace"``, ``"gaussian"``,
    ``"geometric"``, ``"staircase"``, ``"discrete_gaussian"``.  Searched is the largest
    privacy parameter x -- ``sensitivity / scale`` (Laplace), ``sensitivity / sigma``
    (Gaussian, discrete Gaussian), ``eps`` (geometric, staircase; the staircase with its
    variance-optimal gamma = 1/(1 + e^{eps/2})) -- such that

        optcomp.epsilon_g(m, k=k, delta_g=delta_g, method=method) <= eps_g

    for the mechanism object m of that x: the k copies composed *as that mechanism* (its
    privacy-loss distribution), not as the black box (eps, delta) it also is.  The search is
    :func:`optcomp._search._largest_below`'s (started from a cheap guide: KOV's black-box bound for the
    pure-DP mechanisms, the Gaussian closed form for the Gaussians), to relative precision
    ``rtol`` in x.

    Args:
        mechanism: the mechanism's name (above).
        k: the number of queries, each answered by one copy (an integer in [1, 10^12]).
        eps_g, delta_g: the global budget.
        sensitivity: the query's sensitivity (> 0; a positive integer for ``"geometric"``
            and ``"discrete_gaussian"``, whose noise is on the integers).
        method: ``"auto"`` (default: the exact optimum for Gaussians -- their closed form --,
            approx's certified upper bound otherwise), ``"approx"``, or ``"optimal"`` (Gaussians
            only: else :class:`optcomp.ExactTooLarge`); the theorems about (eps, delta) pairs
            refuse these mechanisms (``ValueError`` naming the method), except the geometric
            mechanism with sensitivity 1, which *is* the black box (eps, 0) (KOV Thm 4.4).
        rtol: relative precision of the search in x (0: to adjacent floats), never finer
            than the method's own: where the values are approx's certified upper bounds
            (method approx, and auto for all but the Gaussians) the search stops once the
            bracket is within tol / eps_g (auto: tol = 1e-4, approx: 1e-3 absolute in eps_g)
            -- finer steps would chase the lattice's rounding, not the optimum.
        progress: True for a status line on stderr when the search takes more than 2 s, or a
            callable receiving a status dict per evaluation.

    Returns:
        The mechanism object (``optcomp.mechanisms.Laplace(scale, sensitivity)``, ``Gaussian``,
        ``Geometric``, ``Staircase``, ``DiscreteGaussian``), certified: the check above was
        evaluated for exactly this object and passed, so its k copies are (eps_g, delta_g)-DP.

    Raises:
        ValueError: bad input (naming the parameter), or no finite noise meets the budget
            (e.g. a Gaussian with delta_g = 0, or eps_g = delta_g = 0).
    """
    name = _check_noise_mechanism(mechanism)
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    if name in _INTEGER_SENSITIVITY:
        sensitivity = _integer("sensitivity", sensitivity, 1, 2**20)
    else:
        sensitivity = check_sensitivity(sensitivity)
    rtol = _check_rtol(rtol)
    check_method(method, {})

    def value(x: float) -> float:
        if x == 0.0:  # infinite noise: no privacy loss at all
            return 0.0
        try:
            m = _make(name, x, sensitivity)
        except ValueError:  # no such mechanism (a scale rounding to 0 at huge x): nothing certified
            return math.inf
        return optcomp.epsilon_g(m, k=k, delta_g=delta_g, method=method)

    # approx's values (auto's for all but the Gaussians) are upper bounds within its tolerance
    # of the optimum, rounded on a lattice that moves with x: steps in x finer than that chase
    # the rounding (k = 2 Laplace: 130 evaluations instead of 6), so the search stops there
    # (the geometric mechanism with sensitivity 1 is the black box (x, 0): auto searches it as
    # per_query_epsilon does, exactly where the optimum is feasible)
    exact = method == "optimal" or (method == "auto" and (name == "gaussian" or (name == "geometric"
                                                                                  and sensitivity == 1)))
    resolution = 0.0 if exact else _RESOLUTION.get(method, 0.0)
    if eps_g > 0.0:
        rtol = max(rtol, resolution / eps_g)
    start, slope = max(eps_g, 1e-3) / math.sqrt(k), 1.0
    guide = _guide(name, k, delta_g, sensitivity)
    try:
        guess = _largest_below(guide, eps_g, start, rtol=1e-6)
        if guess is not None and 0.0 < guess < _MAX / 2:
            start = guess * (1.0 - min(rtol, 0.5))  # just below: the search starts from a passing point
            a, b = guide(guess), guide(guess * 1.001)  # the local slope of log eps_g against log x
            if 0.0 < a < b < math.inf:
                slope = min(max(math.log(b / a) / math.log(1.001), 0.5), 4.0)
    except ValueError:  # pragma: no cover - a first guess only
        pass
    x = _largest_below(value, eps_g, start, rtol=rtol, progress=progress, known={0.0: 0.0}, slope=slope,
                       what=f"noise_for({name!r}) under {method}")
    if x is None or x == 0.0:
        raise _NoNoise(f"no finite {name} noise meets (eps_g={eps_g!r}, delta_g={delta_g!r}) for k={k} "
                       f"queries under {method!r}")
    return _make(name, x, sensitivity)
