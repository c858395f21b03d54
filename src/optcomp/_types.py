"""Vocabulary shared by the engine's layers: the certified bracket :class:`Bounds`, the
documented size limits (:class:`ApproxTooCostly`, :class:`ExactTooLarge`, both
``ValueError``), the drivers' result type :class:`Bracket` (a Bounds with its diagnostics) and
their point budget.

Re-exported under their historical homes (``optcomp.lattice.Bounds``,
``optcomp.optimal.ExactTooLarge``, ...); pickles of the old paths load through them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["MAX_POINTS", "Bounds", "Bracket", "ApproxTooCostly", "ExactTooLarge", "BracketInfo", "combined"]


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


class Bracket(Bounds):
    """The result of every producer of the drivers (:mod:`optcomp.lattice`): certified bounds
    -- a :class:`Bounds`, unpacked and compared as one -- with their diagnostics: ``path``,
    the producer that answered ("enumerated", "commensurable", "lattice", "closed form",
    "ends of the law", ...), and ``passes``, the lattice passes it ran (dicts of the step h,
    points, lower, upper, tilt theta and seconds).  ``_replace`` (a cap, a shift, a frame)
    keeps them."""

    path: str = "lattice"
    passes: tuple = ()

    def __new__(cls, lower: float, upper: float, path: str, passes=()):
        self = super().__new__(cls, lower, upper)
        self.path, self.passes = path, tuple(passes)
        return self

    def _replace(self, **bounds) -> "Bracket":
        return Bracket(bounds.pop("lower", self.lower), bounds.pop("upper", self.upper), self.path, self.passes)

    def __getnewargs__(self):
        return self.lower, self.upper, self.path, self.passes


def combined(lower: float, upper: float, parts) -> Bracket:
    """Bounds drawn from the brackets ``parts`` (Bracket, or Bounds without diagnostics): their
    paths (each once, in order, joined by " + ") and their passes."""
    traced = [b for b in parts if isinstance(b, Bracket)]
    paths = list(dict.fromkeys(b.path for b in traced))
    return Bracket(lower, upper, " + ".join(paths) or "lattice", [p for b in traced for p in b.passes])


@dataclass
class BracketInfo:
    """Diagnostics of :func:`optcomp.lattice.lattice_bounds` and its siblings (which return
    them as a :class:`Bracket` too): the path taken and the passes run (h, points, bounds,
    tilt, seconds)."""

    passes: list = field(default_factory=list)
    path: str = "lattice"

    def fill(self, b: Bracket) -> None:
        """This record set to the diagnostics of ``b``."""
        self.path, self.passes[:] = b.path, list(b.passes)


class ExactTooLarge(ValueError):
    """Exact optimal composition is out of reach for this input (MV Thm 1.6: #P-complete)."""
