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
    free of scipy: ~0.3 s of start-up for the command line)."""

    __slots__ = ("module", "name", "_function")

    def __init__(self, module: str, name: str):
        self.module, self.name, self._function = module, name, None

    def __call__(self, *args, **kwargs):
        if self._function is None:
            self._function = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.name)
        return self._function(*args, **kwargs)

    def __repr__(self):
        return f"<function optcomp.{self.module}.{self.name}>"


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
