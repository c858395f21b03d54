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
    optcomp.mechanisms                       # Laplace, Gaussian, ... known by more than (eps, delta)
    optcomp.dpsgd                            # DP-SGD: least noise multiplier, most steps, largest q
    optcomp.integrations                     # adapters for other libraries (dp_accounting)

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

from . import _evaluate, _inputs  # module-qualified: the submodule optcomp.mechanisms would shadow a bare name
from . import methods  # the registry (optcomp.methods); the facade re-exports its public names
from ._version import __version__
from .methods import METHOD_INFO, METHODS, Method

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
# modules a user may reach as optcomp.<name> and sees in dir(optcomp), each imported on first
# use (``optcomp.mechanisms`` loads scipy: ``import optcomp`` does not); the pipeline's
# experiments and figures (which need the `pipeline` extra) are reachable but not listed
_SUBMODULES = ("accountant", "approx", "auto", "bounds", "calibrate", "cli", "curves", "dpsgd", "gdp", "hardness",
               "integrations", "kov_noise", "lattice", "ledger", "loss", "mechanisms", "methods", "optimal", "region")
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


def epsilon_g(eps, delta=0.0, *, delta_g, k=None, counts=None, method: str = "auto", **options) -> float:
    """Least eps_g >= 0 for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    The default ``method="auto"`` returns the exact optimum (``"optimal"``) wherever it can
    be computed and otherwise a certified upper bound within 1e-4 of it
    (:mod:`optcomp.auto`); ``method="optimal"`` raises :class:`ExactTooLarge` instead.

    Returns ``math.inf`` when the method certifies no finite eps_g at this delta_g
    (e.g. ``optimal`` with delta_g < 1 - prod(1 - delta_i), ``basic`` with
    delta_g < sum(delta_i)).  Raises ``ValueError`` naming the parameter on bad input.
    """
    methods.check_method(method, options)
    return _evaluate.epsilon(_inputs.mechanisms(eps, delta, k, counts), delta_g, method, **options)


def delta_g(eps, delta=0.0, *, eps_g, k=None, counts=None, method: str = "auto", **options) -> float:
    """Least delta_g for which ``method`` certifies (eps_g, delta_g)-DP of the composition.

    The default ``method="auto"``: the exact optimum where it can be computed, otherwise a
    certified upper bound within 1e-4 (relative) of it (:mod:`optcomp.auto`).

    Returns 1.0 when the method certifies nothing better.  Raises ``ValueError`` naming
    the parameter on bad input.
    """
    methods.check_method(method, options)
    return _evaluate.delta(_inputs.mechanisms(eps, delta, k, counts), eps_g, method, **options)

