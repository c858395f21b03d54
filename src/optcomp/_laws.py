"""The mechanism contract (layer L0): what a mechanism tells every layer of optcomp.

A *mechanism* of :mod:`optcomp.mechanisms` is a frozen value object deriving from
:class:`Mechanism`.  Everything the engine, the exact paths and the toolkit learn about it
goes through the methods below -- never through attribute checks or class names:

* **directions.**  Two neighbouring datasets D (holding the record the relation is about)
  and D'.  The *global direction* ``"forward"`` is the ordered pair (M(D), M(D')) -- under
  add/remove neighbours the *remove* direction -- and ``"reverse"`` is (M(D'), M(D)), the
  *add* direction.  Every mechanism of a composition sees the same two datasets, so a
  composition is evaluated once per global direction (all mechanisms forward, or all
  reverse) and reports the larger: never the worst direction of one step.
  :meth:`Mechanism.directions` lists the directions whose laws differ (one for a symmetric
  mechanism).
* **the privacy loss law of one direction** (:meth:`Mechanism.law`): L = log(dP/dQ) under P,
  (P, Q) the ordered pair of that direction, given either as finitely many atoms
  (:class:`AtomLaw`) or, for a law with a continuous part, as certified P- and Q-masses of
  the cells [n h, (n + 1) h] of the engine's lattice plus point masses (:class:`CellLaw`).
  Every number is a float bracket that holds the true value; masses at loss +inf (an outcome
  that Q never produces) are a separate bracket, and the P-mass a truncated law leaves
  outside its cells is bounded from above (``below_hi``/``above_hi``: its *tail charges*).
* **the exact profile** delta(x) = max over the directions of E_P[(1 - e^{x - L})_+]
  (:meth:`Mechanism.profile_bounds`, certified).
* **a coarse picture** of a law (:meth:`Mechanism.guide`): positions and P-masses the engine
  aims its tilt, step and window with -- an estimate, never a bound;
* **closed-form hooks**: :meth:`Mechanism.black_box` -- the (eps, delta) whose randomized
  response *is* the mechanism's dominating pair (it then composes through every exact path of
  the black boxes); :meth:`Mechanism.gaussian` -- (sigma, sensitivity) of a Gaussian, which
  composes in closed form (mu-GDP).
* **its neighbouring relation**, in words (``relation``), and its **family** name, the key of
  :data:`optcomp.mechanisms.REGISTRY` that the JSON ledger, the command line, calibrate and the
  docs read.

The law objects are small frozen dataclasses; their factories validate shapes and ranges
once, so a layer that receives one may trust it.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ._rounding import exact_dir
from ._types import Bounds

__all__ = ["FORWARD", "REVERSE", "DIRECTIONS", "TAIL", "MAX_ATOMS", "REACH", "AtomLaw", "Points", "CellLaw", "Mechanism", "loss_end"]

FORWARD = "forward"  # (M(D), M(D')): D holds the record -- the remove direction under add/remove
REVERSE = "reverse"  # (M(D'), M(D)): the add direction
DIRECTIONS = (FORWARD, REVERSE)
TAIL = 1e-300  # default P-mass an unbounded law may leave outside its cells (charged, never dropped)
MAX_ATOMS = 2**22  # default cap on the atoms / cells of one law (a size limit beyond)
#: losses beyond this are placed by no lattice (positions n h need |n| < 2^49): the engine leaves
#: such leaves to its certified frames, and a subsampled law reaching it is given as atoms
REACH = 2.0**40


def _array(name: str, value) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array")
    return a


def _check_masses(lo: np.ndarray, hi: np.ndarray, what: str) -> None:
    if lo.shape != hi.shape or not (np.all(0.0 <= lo) and np.all(lo <= hi) and np.all(hi <= 1.0)):
        raise ValueError(f"{what}: need 0 <= lo <= hi <= 1, arrays of one length")


@dataclass(frozen=True, eq=False)
class AtomLaw:
    """One direction's privacy loss law as finitely many atoms (float brackets).

    Atom i lies within ``perr[i]`` of the float ``loss[i]`` and has P-mass in
    [``p_lo[i]``, ``p_hi[i]``]; the P-mass at loss +inf lies in [``inf_lo``, ``inf_hi``]
    (an atom beyond the float range counts there: above it on both sides -- it exceeds every
    float x by more than 2^969 --, below it on the upper side only);
    ``neg_q_lo``/``neg_q_hi`` bracket the Q-mass at loss -inf (outcomes P never produces:
    they never enter delta, but a mixture such as a subsampled mechanism needs them)."""

    direction: str
    loss: np.ndarray
    perr: np.ndarray
    p_lo: np.ndarray
    p_hi: np.ndarray
    inf_lo: float = 0.0
    inf_hi: float = 0.0
    neg_q_lo: float = 0.0
    neg_q_hi: float = 0.0
    #: the part of ``inf_lo`` held by atoms beyond the float range (finite losses: an eps_g they
    #: decide is finite, above the largest float, not unattainable)
    beyond_lo: float = 0.0

    def __post_init__(self):
        for name in ("loss", "perr", "p_lo", "p_hi"):
            object.__setattr__(self, name, _array(name, getattr(self, name)))
        if not (self.loss.shape == self.perr.shape == self.p_lo.shape) or not np.all(np.isfinite(self.loss)) \
                or not np.all(self.perr >= 0.0):
            raise ValueError("AtomLaw: loss, perr, p_lo, p_hi must be finite, of one length, perr >= 0")
        _check_masses(self.p_lo, self.p_hi, "AtomLaw P-masses")
        _check_masses(np.array([self.inf_lo]), np.array([self.inf_hi]), "AtomLaw +inf mass")
        _check_masses(np.array([self.neg_q_lo]), np.array([self.neg_q_hi]), "AtomLaw -inf Q-mass")

    def top(self) -> float:
        """An upper bound of the largest finite loss held with positive P-mass (p_hi > 0):
        max(loss + perr) rounded up exactly, so an exact top atom is its own float (-inf
        when there is none)."""
        keep = self.p_hi > 0.0
        return loss_end(self.loss[keep], self.perr[keep], True)

    def bottom(self) -> float:
        """A lower bound of the smallest finite loss held with positive P-mass (``p_hi``;
        +inf when there is none)."""
        keep = self.p_hi > 0.0
        return loss_end(self.loss[keep], self.perr[keep], False)


def loss_end(loss: np.ndarray, perr: np.ndarray, up: bool) -> float:
    """max(loss + perr) rounded up (``up``) or min(loss - perr) rounded down, exactly (the
    float sum may round either way: the candidates within an ulp are summed in rationals);
    -inf / +inf for no atoms."""
    if not loss.size:
        return -math.inf if up else math.inf
    sign = 1.0 if up else -1.0
    with np.errstate(over="ignore"):
        s = sign * loss + perr
    m = float(np.max(s))
    if not math.isfinite(m):
        return sign * m
    cand = np.flatnonzero(s >= math.nextafter(m, -math.inf) - 2.0 * math.ulp(m))
    best = max(Fraction(float(loss[i])) * int(sign) + Fraction(float(perr[i])) for i in cand)
    return exact_dir(best * int(sign), up)


@dataclass(frozen=True, eq=False)
class Points:
    """Point masses beside a continuous part: position within ``perr`` of ``loss``, P-mass in
    [``p_lo``, ``p_hi``], Q-mass in [``q_lo``, ``q_hi``]."""

    loss: np.ndarray
    perr: np.ndarray
    p_lo: np.ndarray
    p_hi: np.ndarray
    q_lo: np.ndarray
    q_hi: np.ndarray

    def __post_init__(self):
        for name in ("loss", "perr", "p_lo", "p_hi", "q_lo", "q_hi"):
            object.__setattr__(self, name, _array(name, getattr(self, name)))
        if not (self.loss.shape == self.perr.shape) or not np.all(np.isfinite(self.loss)):
            raise ValueError("Points: loss and perr must be finite arrays of one length")
        _check_masses(self.p_lo, self.p_hi, "Points P-masses")
        _check_masses(self.q_lo, self.q_hi, "Points Q-masses")

    @classmethod
    def none(cls) -> "Points":
        e = np.zeros(0)
        return cls(e, e, e, e, e, e)


@dataclass(frozen=True, eq=False)
class CellLaw:
    """One direction's privacy loss law with a continuous part, on the lattice h Z.

    Cell j is C_j = [(n0 + j) h, (n0 + j + 1) h] (n h exact); ``p_lo``/``p_hi`` bracket the
    P-mass of the continuous part with loss in C_j and ``q_lo``/``q_hi`` its Q-mass -- the
    true Q of this direction, never assumed to mirror P; ``points`` are the point masses;
    ``below_hi``/``above_hi`` bound the P-mass below the first cell / above the last one
    (the truncation's tail charges: the upper side raises the first to the first edge and
    sends the second to +inf)."""

    direction: str
    h: float
    n0: int
    p_lo: np.ndarray
    p_hi: np.ndarray
    q_lo: np.ndarray
    q_hi: np.ndarray
    points: Points
    below_hi: float = 0.0
    above_hi: float = 0.0

    def __post_init__(self):
        for name in ("p_lo", "p_hi", "q_lo", "q_hi"):
            object.__setattr__(self, name, _array(name, getattr(self, name)))
        if not (self.h > 0.0 and math.isfinite(self.h)) or self.p_lo.size == 0:
            raise ValueError("CellLaw: need h > 0 and at least one cell")
        _check_masses(self.p_lo, self.p_hi, "CellLaw P-masses")
        _check_masses(self.q_lo, self.q_hi, "CellLaw Q-masses")
        if self.q_lo.shape != self.p_lo.shape:
            raise ValueError("CellLaw: P- and Q-mass arrays must have one length")
        if not (0.0 <= self.below_hi <= 1.0 and 0.0 <= self.above_hi <= 1.0):
            raise ValueError("CellLaw: tail charges must lie in [0, 1]")


def cell_guide(law: "CellLaw") -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Mechanism.guide` of a cell law: its cells' midpoints and point masses, with
    their P-masses (upper ends)."""
    pts = law.points
    loss = np.concatenate([(np.arange(law.p_hi.size) + law.n0 + 0.5) * law.h, pts.loss])
    return loss, np.concatenate([law.p_hi, pts.p_hi])


class Mechanism(abc.ABC):
    """The contract of a mechanism (see the module docstring).  Concrete mechanisms are the
    frozen dataclasses of :mod:`optcomp.mechanisms`; each class states ``family`` (its
    registry name), ``relation`` (its neighbouring relation) and ``kind`` (``"atoms"`` or
    ``"cells"``: which law :meth:`law` returns)."""

    family: ClassVar[str] = ""
    relation: ClassVar[str] = ""
    kind: ClassVar[str] = "atoms"
    symmetric: ClassVar[bool] = True  # both directions have the same loss law

    def directions(self) -> tuple[str, ...]:
        """The global directions whose loss laws differ: ``("forward",)`` for a symmetric
        mechanism, else ``("forward", "reverse")``."""
        return (FORWARD,) if self.symmetric else DIRECTIONS

    @abc.abstractmethod
    def law(self, h: float, direction: str = FORWARD, *, tail: float = TAIL,
            max_atoms: int = MAX_ATOMS) -> AtomLaw | CellLaw:
        """The privacy loss law of ``direction``: an :class:`AtomLaw` (``kind == "atoms"``,
        independent of ``h``) or a :class:`CellLaw` on the lattice h Z (``kind == "cells"``),
        truncated so that at most ``tail`` of P-mass lies outside its cells; ValueError
        naming h when it would exceed ``max_atoms``."""

    @abc.abstractmethod
    def loss_range(self, direction: str = FORWARD, *, tail: float = TAIL) -> tuple[float, float]:
        """Floats (lo, hi) around every finite loss the law of ``direction`` (truncated at
        ``tail``) holds: lo rounded down, hi rounded up."""

    @abc.abstractmethod
    def profile_bounds(self, eps) -> Bounds:
        """Certified ``Bounds(lower, upper)`` of the exact privacy profile delta(eps), the
        larger of the directions' hockey-stick divergences."""

    def profile(self, eps) -> float:
        """The exact privacy profile delta(eps), rounded up: never below the true value."""
        return self.profile_bounds(eps).upper

    def inf_mass(self, direction: str = FORWARD) -> tuple[float, float]:
        """Bracket of the P-mass at loss +inf in ``direction`` ((0, 0) for a cell law: its
        truncation tail stays in the law, charged to its upper side)."""
        if self.kind != "atoms":
            return 0.0, 0.0
        law = self.law(1.0, direction)
        return law.inf_lo, law.inf_hi

    def guide(self, direction: str = FORWARD, *, tail: float = TAIL, cells: int = 512) -> tuple[np.ndarray, np.ndarray]:
        """A coarse float picture of the finite part of the loss law of ``direction``:
        (positions, P-masses), for the engine's *estimates* only (tilt, step, window; never a
        bound).  A finite law: its atoms; a law with a continuous part: the midpoints of the
        cells of its law at a step giving about ``cells`` cells over :meth:`loss_range`, and
        its point masses.  A mechanism whose mass sits in a small part of a long range (a
        subsampled one) overrides it with a finer picture where the mass is."""
        if self.kind == "atoms":
            law = self.law(1.0, direction)
            return law.loss, law.p_hi
        lo_loss, hi_loss = self.loss_range(direction, tail=tail)
        hg = 2.0 ** math.floor(math.log2(max((hi_loss - lo_loss) / cells, 2.0**-40)))
        return cell_guide(self.law(hg, direction, tail=tail))

    def black_box(self) -> tuple[float, float] | None:
        """(eps, delta) when the mechanism's dominating pair *is* the randomized response of a
        black box (eps, delta) (it then composes exactly as that pair), else None."""
        return None

    def gaussian(self) -> tuple[float, float] | None:
        """(sigma, sensitivity) when the mechanism is a Gaussian (it composes in closed form,
        mu-GDP), else None."""
        return None

    def log_mgf_bound(self, theta: float, direction: str = FORWARD) -> float | None:
        """A certified upper bound of log E_P[e^{theta L}] (theta >= 0) of one copy's loss in
        ``direction``, from the exact law (no lattice, no truncation), when the mechanism has
        one tighter than its lattice leaf's (math.inf where it certifies none); None when it
        offers none.  The engine's Chernoff end uses it where it is the smaller."""
        return None
