"""The method registry: one :class:`Method` per composition theorem, by name.

``method=`` of :func:`optcomp.epsilon_g` / :func:`optcomp.delta_g` (and of the toolkit:
:class:`optcomp.Accountant`, :mod:`optcomp.calibrate`, :mod:`optcomp.curves`,
:mod:`optcomp.region`, the command line) is looked up here: :data:`METHOD_INFO` maps each
name to its theorem, its pair of functions ``epsilon(mechanisms, delta_g, **options)`` /
``delta(mechanisms, eps_g, **options)`` and the options it accepts, and
:func:`check_method` validates a name and its options once, naming the bad one.  Adding a
theorem is one function pair and one line here.

The functions are named, not imported: each core module (and scipy) is imported on its
function's first call, so ``import optcomp`` and the command line start quickly.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

__all__ = ["Method", "METHOD_INFO", "METHODS", "check_method"]


class _Lazy:
    """A function of a core module, imported on its first call (keeps ``import optcomp``
    free of scipy: ~0.3 s of start-up for the command line).

    ``pairs_only``: the theorem speaks of (eps, delta) pairs only -- a multiset holding
    mechanisms of :mod:`optcomp.mechanisms` that are not black boxes is refused with a
    ``ValueError`` naming the method; ``exact``: the exact method, which composes such
    mechanisms by the closed form of Gaussians alone (:mod:`optcomp.gdp`) or exactly when
    they are finite (:mod:`optcomp._exact.finite`) and raises :class:`~optcomp.ExactTooLarge`
    otherwise (``auto`` then falls back to ``approx``)."""

    __slots__ = ("module", "name", "_function", "pairs_only", "exact")

    def __init__(self, module: str, name: str, *, pairs_only: str | None = None, exact: str | None = None):
        self.module, self.name, self._function = module, name, None
        self.pairs_only, self.exact = pairs_only, exact

    def __call__(self, m, *args, **kwargs):
        if m.others:
            if self.pairs_only is not None:
                m.black_box_only(self.pairs_only)
            if self.exact is not None:
                return _exact_mechanisms(self.exact, m, *args)  # (max_atoms: the black boxes' option)
        if self._function is None:
            self._function = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.name)
        return self._function(m, *args, **kwargs)

    def __repr__(self):
        return f"<function optcomp.{self.module}.{self.name}>"


def _exact_mechanisms(direction: str, m, target):
    """``method="optimal"`` for a multiset with mechanisms: the closed form of composed
    Gaussians (:mod:`optcomp.gdp`, a bracket 1e-12 wide: its upper end) when the multiset is
    Gaussians only (black boxes (0, 0) aside); else the exact composition of finite
    mechanisms and black boxes (:func:`optcomp.optimal.optimal_mechanisms_epsilon` /
    ``_delta``), which raises ExactTooLarge for a continuous law beside others or a
    composition beyond its exact producers."""
    from . import gdp

    mu = gdp.gaussians_alone(m, m.others)
    if mu is None:
        from . import optimal

        if direction == "epsilon":
            return optimal.optimal_mechanisms_epsilon(m, target)
        return optimal.optimal_mechanisms_delta(m, target)
    if direction == "epsilon":
        return gdp.epsilon_bounds(mu[0], mu[1], target).upper
    return gdp.delta_bounds(mu[0], mu[1], target).upper


@dataclass(frozen=True)
class Method:
    """A composition theorem: how it maps (mechanisms, delta_g) to eps_g and back."""

    name: str
    theorem: str
    epsilon: Callable[..., float]
    delta: Callable[..., float]
    options: tuple[str, ...] = ()


_REGISTRY = (
    Method("basic", "Basic composition, MV Thm 1.2 (heterogeneous: sums)",
           _Lazy("bounds", "basic_epsilon", pairs_only="basic"), _Lazy("bounds", "basic_delta", pairs_only="basic")),
    Method("drv", "Advanced composition, Dwork-Rothblum-Vadhan, MV Thm 1.3 / KOV Thm 3.2",
           _Lazy("bounds", "drv_epsilon", pairs_only="drv"), _Lazy("bounds", "drv_delta", pairs_only="drv")),
    Method("kov", "KOV closed-form bound, KOV Thm 3.4 = MV Thm 6.1 (homogeneous), KOV Thm 3.5 (heterogeneous)",
           _Lazy("bounds", "kov_epsilon", pairs_only="kov"), _Lazy("bounds", "kov_delta", pairs_only="kov")),
    Method("advanced_pure", "Advanced composition starting from pure DP (Steinke, Composition Basics)",
           _Lazy("bounds", "advanced_pure_epsilon", pairs_only="advanced_pure"),
           _Lazy("bounds", "advanced_pure_delta", pairs_only="advanced_pure")),
    Method("optimal", "Exact optimal composition, KOV Thm 3.3 / MV Thm 1.4 (homogeneous), MV Thm 1.5 (heterogeneous)",
           _Lazy("optimal", "optimal_epsilon", exact="epsilon"), _Lazy("optimal", "optimal_delta", exact="delta"),
           ("max_atoms", "max_memory")),
    Method("approx", "Certified approximation of the optimum, MV Thm 1.7 "
                     "(default: fast lattice algorithm; algorithm='paper': as published)",
           _Lazy("approx", "approx_epsilon"), _Lazy("approx", "approx_delta"),
           ("eta", "algorithm", "tol", "max_points", "max_memory", "progress")),  # = optcomp.approx.OPTIONS
    Method("auto", "The default: optimal where exact is feasible, else approx's certified upper bound "
                   "(within 1e-4 absolute in eps_g, relative in delta_g)",
           _Lazy("auto", "auto_epsilon"), _Lazy("auto", "auto_delta"),
           ("tol", "max_memory", "progress")),  # = optcomp.auto.OPTIONS
)

#: The registry, method name -> :class:`Method` (theorem, functions, accepted options).
METHOD_INFO: dict[str, Method] = {m.name: m for m in _REGISTRY}
#: The method names accepted by ``method=``, in order of increasing tightness (then ``approx``,
#: and ``auto``, the default: ``optimal`` where exact is feasible, else ``approx``).
METHODS: tuple[str, ...] = tuple(METHOD_INFO)


def check_method(method, options) -> Method:
    """The :class:`Method` named ``method``, after checking that it accepts every key of
    ``options``; else ``ValueError`` naming the method or the first unknown option."""
    if not isinstance(method, str) or method not in METHOD_INFO:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    info = METHOD_INFO[method]
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        allowed = ", ".join(info.options) or "none"
        raise ValueError(f"unknown option {unknown[0]!r} for method {method!r} (accepted: {allowed})")
    return info
