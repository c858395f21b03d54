"""The two implementations of the mechanism contract (:mod:`optcomp._laws`) that every
family builds on, and the registry of families.

* :class:`AtomMechanism` -- a finite privacy loss law: the family gives its atoms in mpmath
  (``_atoms(direction)``: exact rational positions where they are rational), and everything
  else -- the profile, the certified discrete pairs, the :class:`~optcomp._laws.AtomLaw` --
  follows here.
* :class:`CellMechanism` -- a law with a continuous part: the family gives its closed-form
  profile (``_delta_mp``), its support, certified float masses of the loss on arbitrary
  intervals under P *and* Q (``_interval_masses``), its point masses and its tails; the
  :class:`~optcomp._laws.CellLaw` on the engine's lattice follows here.

Every family registers itself in :data:`REGISTRY` under its ``family`` name by subclassing
one of them (see :mod:`optcomp.mechanisms` for how to add one)."""

from __future__ import annotations

import dataclasses
import math
import sys
from fractions import Fraction
from typing import ClassVar

import mpmath
import numpy as np

from .._inputs import ParameterTypeError, _check_real, _describe, _integer
from .._laws import DIRECTIONS, FORWARD, MAX_ATOMS, TAIL, AtomLaw, CellLaw, Mechanism, Points, loss_end
from .._rounding import mpf_exact
from .._pairs import LOWER, PRECISIONS, UPPER, DiscretePair, bracket, lattice_index, lattice_index_mp, lattice_pair, mpf_err, settle
from .._types import Bounds

#: family name -> class, in the order the families were defined (read by the JSON ledger, the
#: command line, calibrate and the docs; tests/test_registry.py checks every consumer)
REGISTRY: dict[str, type] = {}


# ---------------------------------------------------------------------------------------------
# validation (errors name the parameter; bools and non-reals are TypeErrors)

def _real(name, value, *, lo=0.0, lo_open=True, hi=math.inf, hi_open=True) -> float:
    x = _check_real(name, value)
    ok = math.isfinite(x) and (x > lo if lo_open else x >= lo) and (x < hi if hi_open else x <= hi)
    if not ok:
        lo_s = f"{'>' if lo_open else '>='} {lo:g}"
        hi_s = "" if hi == math.inf else f" and {'<' if hi_open else '<='} {hi:g}"
        raise ValueError(f"{name} must be finite and {lo_s}{hi_s}, got {x!r}")
    return x + 0.0


def _eps_arg(eps) -> float:
    return _real("eps", eps, lo_open=False)


def _check_side(side) -> str:
    if side not in (UPPER, LOWER):
        raise ValueError(f"side must be 'upper' or 'lower', got {_describe(side)}")
    return side


def _check_direction(direction) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'forward' or 'reverse', got {_describe(direction)}")
    return direction


def _law_args(h, direction, tail, max_atoms):
    return (_real("h", h), _check_direction(direction), _real("tail", tail, hi=1.0),
            _integer("max_atoms", max_atoms, 1, 2**40))


def _mass_bracket(m, err):
    return bracket(m, err)


def _atom(pos: Fraction, mass, merr=None):
    """An atom at an exactly known (rational) loss position; the mpmath position's error
    charged 4 ulps, none where it is the rational itself (a float eps: 2 ulps of 1e308 on a
    position made e^{-l} of a subsampled mass uncertain by e^{1e250})."""
    with mpmath.workprec(mpmath.mp.prec + 64):
        p = mpmath.mpf(pos.numerator) / pos.denominator
    p = +p
    return (pos, p, mpmath.mpf(0) if mpf_exact(p) == pos else mpf_err(p, bits=2), mass,
            mpf_err(mass) if merr is None else merr)


def _mp(x: Fraction):
    return mpmath.mpf(x.numerator) / x.denominator


_FLOAT_EDGE = Fraction(sys.float_info.max) + Fraction(2) ** 970  # beyond: no float is nearer than inf


def _beyond_floats(pos_exact, pos, pe) -> int:
    """+1 when an atom's position lies beyond the float range above; -1 when it may lie
    beyond it (below, or straddling the edge: +inf for the upper side only); else 0."""
    if pos_exact is not None:
        return 1 if pos_exact > _FLOAT_EDGE else (-1 if pos_exact < -_FLOAT_EDGE else 0)
    with mpmath.workprec(1100):
        edge = mpmath.mpf(_FLOAT_EDGE.numerator)
        if pos - pe > edge:
            return 1
        if pos + pe > edge or pos - pe < -edge:  # straddling the edge, or below it: +inf above only
            return -1
    return 0


def _float_pos(pos_exact, pos, pe) -> tuple[float, float]:
    """(float position, bound of its distance to the true one) of an mpmath atom."""
    if pos_exact is not None:
        f = float(pos_exact)
        d = abs(Fraction(f) - pos_exact)
        return f, float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0)
    f = float(pos)
    return f, float(abs(mpmath.mpf(f) - pos) + pe) * (1.0 + 2.0**-50) + 5e-324


# ---------------------------------------------------------------------------------------------
# the common base: registry, profile through _delta_mp, discrete pairs

class _Registered(Mechanism):
    """Registers every class that states its own ``family`` in :data:`REGISTRY`."""

    #: other names the command line accepts (lower case, '-' and '_' ignored)
    aliases: ClassVar[tuple[str, ...]] = ()
    #: spec keys whose value is a list (the command line joins its values with '/')
    list_keys: ClassVar[tuple[str, ...]] = ()
    #: the field calibrate searches (scale, sigma, eps) for a noise-adding family, else None
    noise_parameter: ClassVar[str | None] = None

    @classmethod
    def with_privacy(cls, x: float, sensitivity):
        """The mechanism of privacy parameter x > 0 (sensitivity/scale, sensitivity/sigma or
        eps) for the given sensitivity: what calibrate searches over (noise families only)."""
        raise ValueError(f"{cls.family} has no noise parameter to calibrate")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("family")
        if name:
            if name in REGISTRY and REGISTRY[name].__name__ != cls.__name__:
                raise TypeError(f"mechanism family {name!r} registered twice")
            REGISTRY[name] = cls

    # -- the spec of the command line and the JSON ledger: the dataclass fields by default
    @classmethod
    def spec_keys(cls) -> list[str]:
        """The KEY names of the command line's ``NAME:KEY=VALUE,...`` spec."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_spec(cls, values: dict):
        """The mechanism of a spec's values (keys of :meth:`spec_keys`)."""
        for f in dataclasses.fields(cls):
            if f.name not in values and f.default is dataclasses.MISSING:
                raise ValueError(f"{cls.family} needs {f.name}=...")
        return cls(**values)

    def spec_values(self) -> dict:
        """The spec's values of this mechanism (what :meth:`from_spec` reads back)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # -- profile ---------------------------------------------------------------------------
    def profile_bounds(self, eps) -> Bounds:
        """Certified ``Bounds(lower, upper)`` of the privacy profile delta(eps) (sup over the
        directions); ``upper`` is what :meth:`profile` returns."""
        x = _eps_arg(eps)
        brackets = [settle(lambda d=d: self._delta_mp(mpmath.mpf(x), d)) for d in self.directions()]
        return Bounds(max(b[0] for b in brackets), max(b[1] for b in brackets))

    def profile_side(self, eps, delta) -> int:
        """Where the privacy profile delta(eps) lies against ``delta``, certified: +1 when it
        is above (its certified lower end exceeds ``delta``), -1 when it is at most ``delta``
        (its upper end is), 0 when even the last working precision cannot tell.  The
        precisions grow only until one of the two holds -- a decision away from ``delta``
        needs far fewer digits than :meth:`profile_bounds`' settled bracket (every
        precision's bracket is valid: ``_delta_mp`` bounds its own error).  A float bracket
        two ulps wide that still straddles ``delta`` at 256 bits or more is left undecided:
        the profile then equals ``delta`` to within the floats, and a tie (a subsampled
        Gaussian of mu 1.5e6 at delta_g = q: delta(0) = q (1 - e^{-10^11})) is decided by no
        precision -- every step of a search climbed to 4096 bits, 377 s a call."""
        x = _eps_arg(eps)
        for prec in PRECISIONS:
            with mpmath.workprec(prec):
                brackets = [bracket(*self._delta_mp(mpmath.mpf(x), d)) for d in self.directions()]
            lo, hi = max(b[0] for b in brackets), max(b[1] for b in brackets)
            if lo > delta:
                return 1
            if hi <= delta:
                return -1
            if prec >= 256 and hi <= math.nextafter(math.nextafter(lo, 2.0), 2.0):
                return 0
        return 0

    def _delta_mp(self, x, direction):  # pragma: no cover - abstract
        raise NotImplementedError

    # -- certified discrete pairs ------------------------------------------------------------
    def discrete_pair(self, h, side: str = UPPER, direction: str = FORWARD, *, tail=TAIL,
                      max_atoms=MAX_ATOMS) -> DiscretePair:
        """A certified :class:`DiscretePair` on the lattice h·ℤ.

        ``side="upper"``: every loss atom rounded up to h·ℤ (mass beyond the truncation at
        +∞): a dominating pair, its composition's delta is an upper bound.  ``side="lower"``:
        rounded down (mass below the truncation dropped): its composition's delta is a lower
        bound.  ``tail`` is the largest P-mass an unbounded loss may leave beyond the
        truncation; ``max_atoms`` caps the pair's size (ValueError naming h beyond)."""
        h, direction, tail, max_atoms = _law_args(h, direction, tail, max_atoms)
        return self._pair(h, _check_side(side), direction, tail, max_atoms)

    def _pair(self, h, side, direction, tail, max_atoms):  # pragma: no cover - abstract
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# finite laws

class AtomMechanism(_Registered):
    """A mechanism with a finite privacy loss law.  Subclasses give ``_atoms(direction)``:
    (atoms, P-mass at +inf, its error) in mpmath at the working precision, each atom
    (exact rational position or None, mpf position, its error, P-mass, its error); and, where
    P leaves Q-mass at loss -inf, ``_neg_q(direction)`` (mass, error)."""

    kind = "atoms"

    def _atoms(self, direction):  # pragma: no cover - abstract
        raise NotImplementedError

    def _neg_q(self, direction):
        return mpmath.mpf(0), mpmath.mpf(0)

    def _delta_mp(self, x, direction):
        """(value, error bound) of the hockey-stick divergence at x: the sum over the atoms."""
        atoms, inf_mass, inf_err = self._atoms(direction)
        xf = mpf_exact(mpmath.mpf(x))  # exact: x may carry more bits than a float
        total = inf_mass
        err = inf_err
        far = -4 * mpmath.mp.prec  # below: e^d < 2^-(5 prec), 1 - e^d is 1 within 2^-prec (mpmath's
        # expm1 of a huge negative d, e.g. -1e308, takes ~25 ms: it forms e^d)
        for pos_exact, pos, perr, m, merr in atoms:
            if pos_exact is not None:
                if pos_exact <= xf:
                    continue
                d = x - pos
                if d < far:
                    total += m
                    err += merr + m * mpmath.ldexp(1, -mpmath.mp.prec)
                    continue
                total += m * -mpmath.expm1(d)
                err += merr + m * mpf_err(x, pos)
            else:
                if pos + perr <= x:
                    continue
                d = x - pos
                if d + perr < far:
                    total += m
                    err += merr + m * mpmath.ldexp(1, -mpmath.mp.prec)
                    continue
                total += m * max(mpmath.mpf(0), -mpmath.expm1(d))
                err += merr + m * (2 * perr + mpf_err(x, pos))
        return total, err + mpf_err(total)

    def _pair(self, h, side, direction, tail, max_atoms):
        up = side == UPPER
        with mpmath.workprec(192):
            atoms, inf_mass, inf_err = self._atoms(direction)
            if len(atoms) > max_atoms:
                raise ValueError(f"h={h!r}: {len(atoms)} atoms exceed max_atoms={max_atoms}")
            idx, lo, hi = [], [], []
            for pos_exact, pos, perr, m, merr in atoms:
                if pos_exact is not None:
                    idx.append(lattice_index(pos_exact, h, up))
                else:
                    idx.append(lattice_index_mp(pos, perr, h, up))
                a, b = _mass_bracket(m, merr)
                lo.append(a)
                hi.append(b)
            ilo, ihi = _mass_bracket(inf_mass, inf_err)
        return lattice_pair(h, side, idx, lo, hi, ilo, ihi)

    def law(self, h=1.0, direction: str = FORWARD, *, tail=TAIL, max_atoms=MAX_ATOMS) -> AtomLaw:
        """The :class:`~optcomp._laws.AtomLaw` of ``direction`` (``h`` and ``tail`` do not
        matter for a finite law)."""
        h, direction, tail, max_atoms = _law_args(h, direction, tail, max_atoms)
        return self._law(direction, max_atoms)

    def _law(self, direction, max_atoms):
        with mpmath.workprec(192):  # (called unbound by mechanisms that borrow it: Subsampled)
            return AtomMechanism._law_from(self, self._atoms(direction), direction, max_atoms)

    def _law_from(self, described, direction, max_atoms=MAX_ATOMS) -> AtomLaw:
        """The :class:`~optcomp._laws.AtomLaw` of ``_atoms``-style atoms (at 192 bits).

        An atom beyond the float range (|position| > the largest float by more than half
        its ulp) has no float position: a positive one is counted at +inf on both sides --
        its loss exceeds every float x by > 2^969, and the rest of a composition lies below
        -y with P-mass <= e^-y (E_P e^{-L} <= 1), so it contributes to every H(x) at least
        its mass times 1 - 2^-1000: the lower side counts p_lo (1 - 2^-52) --; a negative
        one (P-mass < e^{-10^308}) joins +inf on the upper side and is dropped on the lower."""
        atoms, inf_mass, inf_err = described
        with mpmath.workprec(192):
            if len(atoms) > max_atoms:
                raise ValueError(f"{len(atoms)} atoms exceed max_atoms={max_atoms}")
            loss, perr, lo, hi = [], [], [], []
            ilo, ihi = _mass_bracket(inf_mass, inf_err)
            extra_lo, extra_hi = [], []
            for pos_exact, pos, pe, m, merr in atoms:
                a, b = _mass_bracket(m, merr)
                side = _beyond_floats(pos_exact, pos, pe)
                if side:
                    extra_hi.append(b)
                    if side > 0:
                        extra_lo.append(a * (1.0 - 2.0**-52))
                    continue
                f, e = _float_pos(pos_exact, pos, pe)
                loss.append(f)
                perr.append(e)
                lo.append(a)
                hi.append(b)
            beyond = 0.0
            if extra_hi:
                from .._rounding import sum_down, sum_up

                ihi = min(1.0, sum_up([ihi, *extra_hi]))
                beyond = max(0.0, sum_down(extra_lo)) if extra_lo else 0.0
                ilo = min(ihi, max(0.0, sum_down([ilo, *extra_lo])))
            nlo, nhi = _mass_bracket(*self._neg_q(direction))
        return AtomLaw(direction, loss, perr, lo, hi, ilo, ihi, nlo, nhi, min(beyond, ilo))

    def loss_range(self, direction: str = FORWARD, *, tail=TAIL) -> tuple[float, float]:
        law = self.law(1.0, direction)
        if not np.any(law.p_hi > 0.0):
            return 0.0, 0.0
        return law.bottom(), law.top()


# ---------------------------------------------------------------------------------------------
# laws with a continuous part

class CellMechanism(_Registered):
    """A mechanism whose privacy loss law has a continuous part.  Subclasses give:

    * ``_delta_mp(x, direction)`` -- the closed-form profile (value, error) in mpmath;
    * ``_support(direction, tail)`` -- rationals (lo, hi) outside which the continuous part
      has at most ``tail`` of P-mass on each side;
    * ``_interval_masses(l0, l1, direction)`` -- float arrays (p_lo, p_hi, q_lo, q_hi):
      certified brackets of the P- and Q-mass of the continuous part with loss in
      [l0_i, l1_i] (exact float edges, any l0_i <= l1_i);
    * ``_points(direction)`` -- the point masses (:class:`~optcomp._laws.Points`);
    * ``_tails(e0, e1, direction)`` -- upper bounds (below, above) of the continuous part's
      P-mass below e0 and above e1 (float edges);
    * ``_continuous(tail)`` -- the same law in mpmath (positions rational), for the discrete
      pairs of :meth:`discrete_pair`."""

    kind = "cells"

    def law(self, h, direction: str = FORWARD, *, tail=TAIL, max_atoms=MAX_ATOMS) -> CellLaw:
        """The :class:`~optcomp._laws.CellLaw` of ``direction`` on the cells [n h, (n + 1) h]
        covering the support truncated at ``tail``."""
        h, direction, tail, max_atoms = _law_args(h, direction, tail, max_atoms)
        lo, hi = self._support(direction, tail)
        H = Fraction(h)
        n0 = math.floor(Fraction(lo) / H)
        n1 = math.ceil(Fraction(hi) / H)
        n1 = max(n1, n0 + 1)
        points = self._points(direction)
        if n1 - n0 + points.loss.size > max_atoms:
            raise ValueError(f"h={h!r}: {n1 - n0 + points.loss.size} cells exceed max_atoms={max_atoms}; "
                             "choose a larger h")
        if abs(n0) >= 2**49 or abs(n1) >= 2**49:
            raise ValueError(f"h={h!r} is too small for exact lattice positions against the loss range "
                             f"[{float(lo)!r}, {float(hi)!r}]")
        e = np.arange(n0, n1 + 1, dtype=np.int64).astype(float) * h  # exact
        # (called unbound by mechanisms that borrow it, the discrete Gaussian, Subsampled: the
        # default where the class has no _cell_masses of its own)
        cell_masses = getattr(type(self), "_cell_masses", CellMechanism._cell_masses)
        p_lo, p_hi, q_lo, q_hi = cell_masses(self, n0, n1, h, e, direction)
        below, above = self._tails(float(e[0]), float(e[-1]), direction)
        return CellLaw(direction, h, n0, p_lo, p_hi, q_lo, q_hi, points, min(below, 1.0), min(above, 1.0))

    def _cell_masses(self, n0: int, n1: int, h: float, e: np.ndarray, direction: str):
        """(p_lo, p_hi, q_lo, q_hi) of the cells [n h, (n + 1) h], n0 <= n < n1, whose edges are
        ``e`` (``e[i] = (n0 + i) h``): ``_interval_masses`` of consecutive edges, unless the
        family shares work between them."""
        return self._interval_masses(e[:-1], e[1:], direction)

    def loss_range(self, direction: str = FORWARD, *, tail=TAIL) -> tuple[float, float]:
        from .._rounding import exact_dir

        lo, hi = self._support(_check_direction(direction), _real("tail", tail, hi=1.0))
        pts = self._points(direction)
        keep = pts.p_hi > 0.0
        lo_f = min(exact_dir(Fraction(lo), False), loss_end(pts.loss[keep], pts.perr[keep], False))
        hi_f = max(exact_dir(Fraction(hi), True), loss_end(pts.loss[keep], pts.perr[keep], True))
        return lo_f, hi_f

    def _pair(self, h, side, direction, tail, max_atoms):
        lo_loss, hi_loss, masses, tails, atoms = self._continuous(tail)
        return _cells_pair(h, side, tails, max_atoms, lo_loss, hi_loss, masses, atoms)

    def _mp_cells(self, h, tail):
        """The forward law's cell masses at step h from the mpmath description (slow; the
        reference the vectorised ``_interval_masses`` is tested against): (n0, p brackets,
        Q brackets (mirrored: only for the symmetric laws that use it), tails)."""
        lo_loss, hi_loss, masses, tails, _atoms = self._continuous(tail)
        H = Fraction(h)
        n0 = math.floor(lo_loss / H)
        n1 = math.ceil(hi_loss / H)
        edges = [n * H for n in range(n0, n1 + 1)]
        with mpmath.workprec(128):
            pm = masses(edges)
            qm = masses([-e for e in reversed(edges)])[::-1]
            m_lo, m_hi = zip(*(_mass_bracket(m, err) for m, err in pm))
            q_lo, q_hi = zip(*(_mass_bracket(m, err) for m, err in qm))
            (below, b_err), (above, a_err) = tails(edges[0], edges[-1])
        return (n0, (np.array(m_lo), np.array(m_hi)), (np.array(q_lo), np.array(q_hi)),
                (_mass_bracket(below, b_err)[1], _mass_bracket(above, a_err)[1]))


def _cells_pair(h, side, tails, max_atoms, lo_loss, hi_loss, edge_masses, atoms=()):
    """Shared lattice construction for a loss with a continuous part truncated to
    [lo_loss, hi_loss] (rationals): ``edge_masses(edges)`` returns (mass, err) of the loss
    law in each cell between consecutive lattice edges (mpmath), ``atoms`` point masses at
    rational positions, ``tails(e0, e1)`` the (mass, err) below the first edge e0 and above
    the last edge e1 (the cells cover [e0, e1] ⊇ [lo_loss, hi_loss], so nothing is counted
    twice or left out)."""
    up = side == UPPER
    first = lattice_index(lo_loss, h, up)
    last = lattice_index(hi_loss, h, up)
    count = last - first + 1
    if count + len(atoms) > max_atoms:
        raise ValueError(f"h={h!r}: {count + len(atoms)} atoms exceed max_atoms={max_atoms}; choose a larger h")
    idx, lo, hi = [], [], []
    with mpmath.workprec(128):
        # upper: cell n holds ((n-1)h, nh]; lower: cell n holds [nh, (n+1)h)
        ns = list(range(first, last + 1))
        edges = [(n - 1 if up else n) * Fraction(h) for n in ns] + [(last if up else last + 1) * Fraction(h)]
        masses = edge_masses(edges)
        for n, (m, err) in zip(ns, masses):
            a, b = _mass_bracket(m, err)
            idx.append(n)
            lo.append(a)
            hi.append(b)
        for pos, m, err in atoms:
            a, b = _mass_bracket(m, err)
            idx.append(lattice_index(pos, h, up))
            lo.append(a)
            hi.append(b)
        tail_lo, tail_hi = tails(edges[0], edges[-1])
        tlo = _mass_bracket(*tail_lo)
        thi = _mass_bracket(*tail_hi)
    if up:  # mass below: rounded up to the first cell; mass above: +inf
        idx.append(first)
        lo.append(tlo[0])
        hi.append(tlo[1])
        return lattice_pair(h, side, idx, lo, hi, thi[0], thi[1])
    # lower: mass below dropped (-inf); mass above rounded down to the last cell
    idx.append(last)
    lo.append(thi[0])
    hi.append(thi[1])
    return lattice_pair(h, side, idx, lo, hi, 0.0, 0.0)


__all__ = ["REGISTRY", "AtomMechanism", "CellMechanism", "Points", "ParameterTypeError"]
