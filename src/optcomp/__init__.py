"""optcomp — optimal composition of differential privacy.

Public API::

    optcomp.epsilon_g(eps, delta=0.0, *, delta_g, k=None, counts=None, method="auto", **options) -> float
    optcomp.delta_g(eps, delta=0.0, *, eps_g, k=None, counts=None, method="auto", **options) -> float
    optcomp.METHODS   # the method names accepted above
    optcomp.epsilon_bounds(eps, delta=0.0, *, delta_g, k=None, ...) -> Bounds(lower, upper)
    optcomp.delta_bounds(eps, delta=0.0, *, eps_g, k=None, ...) -> Bounds(lower, upper)
    optcomp.Accountant()                     # a ledger that composes as you go
    optcomp.privacy_curve(eps, delta=0.0, *, k=None, ...) -> PrivacyCurve
    optcomp.calibrate                        # budget splitting: per-query eps and noise

``eps``/``delta`` are either numbers together with ``k=`` (k mechanisms, each
(eps, delta)-DP) or 1-D sequences of per-mechanism values (a scalar ``delta``
applies to every mechanism); ``counts[i]`` is the multiplicity of the pair
(eps[i], delta[i]).  Every value returned is a *certified* guarantee:
the composition is (epsilon_g(...), delta_g)-DP and (eps_g, delta_g(...))-DP.  For
``method="optimal"`` the value is the optimum of Murtagh-Vadhan Thm 1.5 / KOV Thm 3.3
rounded upward by at most a few units in the last place; the other methods return
their theorem's bound.  See :data:`METHOD_INFO` for the theorem behind each name.

Setting: the composition theorems hold for k mechanisms whose parameters
(eps_i, delta_i) are fixed in advance; the mechanisms themselves may be chosen
adaptively (each may depend on the outputs of the earlier ones).  When the
*parameters* are chosen adaptively, a privacy filter is needed (Rogers, Roth, Ullman
and Vadhan 2016; Whitehouse, Ramdas, Rogers and Wu 2023); optcomp does not provide one.

The core modules (and scipy) are imported on first use, so ``import optcomp`` and the
command line start quickly.
"""

import importlib as _importlib
from dataclasses import dataclass as _dataclass
from typing import Callable as _Callable

from . import _inputs  # module-qualified: the submodule optcomp.mechanisms would shadow a bare name
from ._version import __version__

__all__ = [
    "epsilon_g",
    "delta_g",
    "epsilon_bounds",
    "delta_bounds",
    "METHODS",
    "METHOD_INFO",
    "Method",
    "Bounds",
    "Accountant",
    "privacy_curve",
    "PrivacyCurve",
    "ExactTooLarge",
    "ApproxTooCostly",
    "__version__",
]

# public names defined in a submodule, imported when first used (PEP 562)
_LAZY = {
    "epsilon_bounds": "approx",
    "delta_bounds": "approx",
    "Bounds": "lattice",
    "ApproxTooCostly": "lattice",
    "ExactTooLarge": "optimal",
    "Accountant": "accountant",
    "privacy_curve": "curves",
    "PrivacyCurve": "curves",
}
# modules a user may reach as optcomp.<name> (imported on first use); the pipeline's
# experiments and figures (which need the `pipeline` extra) are reachable but not listed
_SUBMODULES = ("accountant", "approx", "auto", "bounds", "calibrate", "cli", "curves", "hardness", "lattice", "loss", "optimal", "region")
_PIPELINE = ("experiments", "figures")


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES or name in _PIPELINE:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(__all__) | set(_SUBMODULES))


class _Lazy:
    """A function of a core module, imported on its first call (keeps ``import optcomp``
    free of scipy: ~0.3 s of start-up for the command line)."""

    __slots__ = ("module", "name", "_function")

    def __init__(self, module: str, name: str):
        self.module, self.name, self._function = module, name, None

    def __call__(self, *args, **kwargs):
        if self._function is None:
            self._function = getattr(_importlib.import_module(f"{__name__}.{self.module}"), self.name)
        return self._function(*args, **kwargs)

    def __repr__(self):
        return f"<function optcomp.{self.module}.{self.name}>"


@_dataclass(frozen=True)
class Method:
    """A composition theorem: how it maps (mechanisms, delta_g) to eps_g and back."""

    name: str
    theorem: str
    epsilon: _Callable[..., float]
    delta: _Callable[..., float]
    options: tuple[str, ...] = ()


_REGISTRY = (
    Method("basic", "Basic composition, MV Thm 1.2 (heterogeneous: sums)",
           _Lazy("bounds", "basic_epsilon"), _Lazy("bounds", "basic_delta")),
    Method("drv", "Advanced composition, Dwork-Rothblum-Vadhan, MV Thm 1.3 / KOV Thm 3.2",
           _Lazy("bounds", "drv_epsilon"), _Lazy("bounds", "drv_delta")),
    Method("kov", "KOV closed-form bound, KOV Thm 3.4 = MV Thm 6.1 (homogeneous), KOV Thm 3.5 (heterogeneous)",
           _Lazy("bounds", "kov_epsilon"), _Lazy("bounds", "kov_delta")),
    Method("advanced_pure", "Advanced composition starting from pure DP (Steinke, Composition Basics)",
           _Lazy("bounds", "advanced_pure_epsilon"), _Lazy("bounds", "advanced_pure_delta")),
    Method("optimal", "Exact optimal composition, KOV Thm 3.3 / MV Thm 1.4 (homogeneous), MV Thm 1.5 (heterogeneous)",
           _Lazy("optimal", "optimal_epsilon"), _Lazy("optimal", "optimal_delta"), ("max_atoms",)),
    Method("approx", "Certified approximation of the optimum, MV Thm 1.7 "
                     "(default: fast lattice algorithm; algorithm='paper': as published)",
           _Lazy("approx", "approx_epsilon"), _Lazy("approx", "approx_delta"),
           ("eta", "algorithm", "tol", "max_points", "progress")),  # = optcomp.approx.OPTIONS (tests/test_approx.py)
    Method("auto", "The default: optimal where exact is feasible, else approx's certified upper bound "
                   "(within 1e-4 absolute in eps_g, relative in delta_g)",
           _Lazy("auto", "auto_epsilon"), _Lazy("auto", "auto_delta"), ("tol", "progress")),  # = optcomp.auto.OPTIONS
)

#: The registry: method name -> :class:`Method` (theorem, functions, accepted options).
METHOD_INFO: dict[str, Method] = {m.name: m for m in _REGISTRY}
#: The method names accepted by ``method=``, in order of increasing tightness (then ``approx``,
#: and ``auto``, the default: ``optimal`` where exact is feasible, else ``approx``).
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


def epsilon_g(eps, delta=0.0, *, delta_g, k=None, counts=None, method: str = "auto", **options) -> float:
    """Least eps_g >= 0 for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    The default ``method="auto"`` returns the exact optimum (``"optimal"``) wherever it can
    be computed and otherwise a certified upper bound within 1e-4 of it
    (:mod:`optcomp.auto`); ``method="optimal"`` raises :class:`ExactTooLarge` instead.

    Returns ``math.inf`` when the method certifies no finite eps_g at this delta_g
    (e.g. ``optimal`` with delta_g < 1 - prod(1 - delta_i), ``basic`` with
    delta_g < sum(delta_i)).  Raises ``ValueError`` naming the parameter on bad input.
    """
    info = _method(method, options)
    mech = _inputs.mechanisms(eps, delta, k, counts)
    return float(info.epsilon(mech, _inputs.check_delta_g(delta_g), **options))


def delta_g(eps, delta=0.0, *, eps_g, k=None, counts=None, method: str = "auto", **options) -> float:
    """Least delta_g for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    The default ``method="auto"``: the exact optimum where it can be computed, otherwise a
    certified upper bound within 1e-4 (relative) of it (:mod:`optcomp.auto`).

    Returns 1.0 when the method certifies nothing better.  Raises ``ValueError`` naming
    the parameter on bad input.
    """
    info = _method(method, options)
    mech = _inputs.mechanisms(eps, delta, k, counts)
    return float(info.delta(mech, _inputs.check_eps_g(eps_g), **options))


del _dataclass, _Callable
