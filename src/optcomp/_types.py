"""Vocabulary shared by the engine's layers: the certified bracket :class:`Bounds`, the
documented size limits (:class:`ApproxTooCostly`, :class:`ExactTooLarge`, both
``ValueError``), the lattice drivers' diagnostics and their point budget.

Re-exported under their historical homes (``optcomp.lattice.Bounds``,
``optcomp.optimal.ExactTooLarge``, ...); pickles of the old paths load through them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["MAX_POINTS", "Bounds", "ApproxTooCostly", "ExactTooLarge", "BracketInfo"]


MAX_POINTS = 2**23  # lattice points of the composed distribution (memory ~ 1 GiB at the cap)


class ApproxTooCostly(ValueError):
    """The requested tolerance needs a finer lattice than ``max_points`` allows (or, for
    ``algorithm="paper"`` of :mod:`optcomp.approx`, hours of dynamic programming).

    ``bounds`` holds the certified (lower, upper) bracket reached before giving up (None
    when there is none)."""

    def __init__(self, message: str, bounds: "Bounds | None" = None):
        super().__init__(message)
        self.bounds = bounds


class Bounds(NamedTuple):
    """Certified bounds: ``lower <= optimum <= upper``."""

    lower: float
    upper: float

    @property
    def gap(self) -> float:
        """``upper - lower``; ``math.inf`` whenever ``upper`` is infinite (never NaN)."""
        return math.inf if self.upper == math.inf else self.upper - self.lower


@dataclass
class BracketInfo:
    """Diagnostics of :func:`lattice_bounds`: the passes run (h, points, bounds, seconds)."""

    passes: list = field(default_factory=list)
    path: str = "lattice"


class ExactTooLarge(ValueError):
    """Exact optimal composition is out of reach for this input (MV Thm 1.6: #P-complete)."""
