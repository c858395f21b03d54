"""optcomp — optimal composition of differential privacy.

Public API::

    optcomp.epsilon_g(eps, delta=0.0, *, delta_g, k=None, method="optimal", **options) -> float
    optcomp.delta_g(eps, delta=0.0, *, eps_g, k=None, method="optimal", **options) -> float
    optcomp.METHODS   # the method names accepted above
    optcomp.epsilon_bounds(eps, delta=0.0, *, delta_g, k=None, ...) -> Bounds(lower, upper)
    optcomp.delta_bounds(eps, delta=0.0, *, eps_g, k=None, ...) -> Bounds(lower, upper)

``eps``/``delta`` are either numbers together with ``k=`` (k mechanisms, each
(eps, delta)-DP) or 1-D sequences of per-mechanism values (a scalar ``delta``
applies to every mechanism).  Every value returned is a *certified* guarantee:
the composition is (epsilon_g(...), delta_g)-DP and (eps_g, delta_g(...))-DP.  For
``method="optimal"`` the value is the optimum of Murtagh-Vadhan Thm 1.5 / KOV Thm 3.3
rounded upward by at most a few units in the last place; the other methods return
their theorem's bound.  See :data:`METHOD_INFO` for the theorem behind each name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import approx, bounds, optimal
from ._inputs import check_delta_g, check_eps_g, mechanisms
from .approx import delta_bounds, epsilon_bounds

__version__ = "0.1.0"

__all__ = [
    "epsilon_g",
    "delta_g",
    "epsilon_bounds",
    "delta_bounds",
    "METHODS",
    "METHOD_INFO",
    "Method",
    "__version__",
]


@dataclass(frozen=True)
class Method:
    """A composition theorem: how it maps (mechanisms, delta_g) to eps_g and back."""

    name: str
    theorem: str
    epsilon: Callable[..., float]
    delta: Callable[..., float]
    options: tuple[str, ...] = ()


_REGISTRY = (
    Method("basic", "Basic composition, MV Thm 1.2 (heterogeneous: sums)", bounds.basic_epsilon, bounds.basic_delta),
    Method("drv", "Advanced composition, Dwork-Rothblum-Vadhan, MV Thm 1.3 / KOV Thm 3.2", bounds.drv_epsilon, bounds.drv_delta),
    Method("kov", "KOV closed-form bound, KOV Thm 3.4 = MV Thm 6.1 (homogeneous), KOV Thm 3.5 (heterogeneous)",
           bounds.kov_epsilon, bounds.kov_delta),
    Method("advanced_pure", "Advanced composition starting from pure DP (Steinke, Composition Basics)",
           bounds.advanced_pure_epsilon, bounds.advanced_pure_delta),
    Method("optimal", "Exact optimal composition, KOV Thm 3.3 / MV Thm 1.4 (homogeneous), MV Thm 1.5 (heterogeneous)",
           optimal.optimal_epsilon, optimal.optimal_delta, ("max_atoms",)),
    Method("approx", "Certified approximation of the optimum, MV Thm 1.7 (algorithm='paper' as published)",
           approx.approx_epsilon, approx.approx_delta, approx.OPTIONS),
)

METHOD_INFO: dict[str, Method] = {m.name: m for m in _REGISTRY}
METHODS: tuple[str, ...] = tuple(METHOD_INFO)


def _method(method, options) -> Method:
    if not isinstance(method, str) or method not in METHOD_INFO:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    info = METHOD_INFO[method]
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        allowed = ", ".join(info.options) or "none"
        raise ValueError(f"unknown option {unknown[0]!r} for method {method!r} (accepted: {allowed})")
    return info


def epsilon_g(eps, delta=0.0, *, delta_g, k=None, counts=None, method: str = "optimal", **options) -> float:
    """Least eps_g >= 0 for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    Returns ``math.inf`` when the method certifies no finite eps_g at this delta_g
    (e.g. ``optimal`` with delta_g < 1 - prod(1 - delta_i), ``basic`` with
    delta_g < sum(delta_i)).  Raises ``ValueError`` naming the parameter on bad input.
    """
    info = _method(method, options)
    mech = mechanisms(eps, delta, k, counts)
    return float(info.epsilon(mech, check_delta_g(delta_g), **options))


def delta_g(eps, delta=0.0, *, eps_g, k=None, counts=None, method: str = "optimal", **options) -> float:
    """Least delta_g for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    Returns 1.0 when the method certifies nothing better.  Raises ``ValueError`` naming
    the parameter on bad input.
    """
    info = _method(method, options)
    mech = mechanisms(eps, delta, k, counts)
    return float(info.delta(mech, check_eps_g(eps_g), **options))
