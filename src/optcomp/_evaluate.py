"""One way from a validated multiset to a method's answer.

The public functions (:func:`optcomp.epsilon_g`, :func:`optcomp.delta_g`,
:func:`optcomp.epsilon_bounds`, :func:`optcomp.delta_bounds`) validate their arguments into
a :class:`~optcomp._inputs.Mechanisms` multiset and call these; the toolkit
(:class:`optcomp.Accountant`, :mod:`optcomp.curves`, :mod:`optcomp.region`, the command
line), which holds a validated multiset already, calls them directly -- once per
evaluation, without turning the multiset back into lists and validating it again.

``m`` must come from :func:`optcomp._inputs.mechanisms` or :meth:`Mechanisms.plus` (pairs
sorted by (eps, delta), mechanism objects in their canonical order: a multiset has one
answer whatever the order it was listed or composed in) with at most 10^12 mechanisms.
The target (``delta_g``/``eps_g``) and the method's options are checked here.
"""

from __future__ import annotations

from . import methods
from ._inputs import Mechanisms, check_delta_g, check_eps_g

__all__ = ["epsilon", "delta", "epsilon_bounds", "delta_bounds"]


def epsilon(m: Mechanisms, delta_g, method: str = "auto", **options) -> float:
    """What :func:`optcomp.epsilon_g` returns for the multiset ``m``."""
    info = methods.check_method(method, options)
    return float(info.epsilon(m, check_delta_g(delta_g), **options))


def delta(m: Mechanisms, eps_g, method: str = "auto", **options) -> float:
    """What :func:`optcomp.delta_g` returns for the multiset ``m``."""
    info = methods.check_method(method, options)
    return float(info.delta(m, check_eps_g(eps_g), **options))


def epsilon_bounds(m: Mechanisms, delta_g, **options):
    """What :func:`optcomp.epsilon_bounds` returns for the multiset ``m``."""
    from .approx import bracket_epsilon

    return bracket_epsilon(m, check_delta_g(delta_g), **options)


def delta_bounds(m: Mechanisms, eps_g, **options):
    """What :func:`optcomp.delta_bounds` returns for the multiset ``m``."""
    from .approx import bracket_delta

    return bracket_delta(m, check_eps_g(eps_g), **options)
