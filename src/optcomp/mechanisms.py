"""Mechanisms known by more than (eps, delta): their exact privacy profiles and certified
discrete dominating pairs (issue 18, groundwork; composing them through the engine is the
producer seam's next step).

Every mechanism is a frozen, hashable value object with

* ``profile(eps)`` -- its exact privacy profile delta(eps) = sup over the two directions of
  the hockey-stick divergence H_{e^eps}(M(D) || M(D')) = E_P[(1 − e^{eps − L})_+], rounded
  **up** (never below the true value); ``profile_bounds(eps)`` gives the certified
  ``Bounds(lower, upper)`` around it.  Values are computed in mpmath with an explicit error
  charge and a precision that grows until the bracket is 2^-64 relative (``_pairs.settle``),
  then rounded outward to floats (``_rounding.mpf_dir``); loss positions that are rational
  (eps, k·eps, shifts) are compared with eps exactly, so eps on an atom is exact.
* ``discrete_pair(h, side, direction)`` -- a :class:`~optcomp._pairs.DiscretePair` on the
  lattice h·ℤ: ``side="upper"`` rounds every loss atom up (tails beyond the truncation to
  +∞), a dominating pair whose composition upper-bounds the true delta;
  ``side="lower"`` rounds down (tails dropped), whose composition lower-bounds it.  The
  argument (Meiser–Mohammadi 2018; Doroshenko et al., *Connect the Dots*, PoPETs 2022;
  Zhu–Dong–Wang, AISTATS 2022) is in :mod:`optcomp._pairs`.

Neighbouring relation: unless said otherwise, the noise-adding mechanisms assume a query of
the given sensitivity Δ and the worst pair of neighbours (outputs Δ apart); the loss laws
below are those of P = noise at 0 against Q = noise at Δ.  For these symmetric mechanisms
both directions have the same privacy loss distribution (PLD).  For an asymmetric
:class:`Pair`, ``direction="forward"`` is (P, Q) = (p, q) and ``"reverse"`` is (q, p);
``delta`` is the larger of the two, and a composition must take the larger of the two
*global* directions (every mechanism sees the same two datasets).  (The method is
``profile``, not ``delta``: ``BlackBox(eps, delta).delta`` is its parameter.)

Length (~940 lines): nine parallel sibling classes, one per mechanism, each with its
privacy-loss distribution, exact profile, certified discrete pairs and leaf data (the two
continuous laws with their vectorised cell masses and error derivations) -- wide, not deep
(one concept per class, none reading another's internals).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import mpmath

from ._inputs import ParameterTypeError, _check_real, _describe, _integer
from ._pairs import (LOWER, UPPER, DiscretePair, bracket, lattice_index, lattice_index_mp, lattice_pair, mpf_err,
                     settle)
from ._types import Bounds

__all__ = ["Mechanism", "BlackBox", "Laplace", "Gaussian", "Geometric", "DiscreteGaussian", "Staircase",
           "RandomizedResponse", "Pair", "Profile", "DiscretePair", "FORWARD", "REVERSE"]

FORWARD = "forward"
REVERSE = "reverse"
MAX_ATOMS = 2**22  # default cap on the atoms of one discrete pair (ValueError naming h beyond)
MAX_WINDOW = 2**20  # outcomes summed directly for a discrete Gaussian (sigma up to ~1.4e4)
_TAIL = 1e-300  # default tail mass charged to +inf (upper) / dropped (lower) for unbounded losses


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
    if direction not in (FORWARD, REVERSE):
        raise ValueError(f"direction must be 'forward' or 'reverse', got {_describe(direction)}")
    return direction


# ---------------------------------------------------------------------------------------------
# the base class: profile and pair through the atoms (finite mechanisms) or closed forms

class Mechanism:
    """Base of the mechanisms: ``profile``, ``profile_bounds`` and ``discrete_pair``.

    Subclasses describe their privacy loss either by finitely many atoms (``_atoms``) or by
    a closed-form profile and cell masses (``_delta_mp``, ``_cells``)."""

    symmetric = True  # both directions have the same PLD

    # -- profile ---------------------------------------------------------------------------
    def profile_bounds(self, eps) -> Bounds:
        """Certified ``Bounds(lower, upper)`` of the privacy profile delta(eps) (sup over the
        two directions); ``upper`` is what :meth:`profile` returns."""
        x = _eps_arg(eps)
        dirs = (FORWARD,) if self.symmetric else (FORWARD, REVERSE)
        brackets = [settle(lambda d=d: self._delta_mp(mpmath.mpf(x), d)) for d in dirs]
        return Bounds(max(b[0] for b in brackets), max(b[1] for b in brackets))

    def profile(self, eps) -> float:
        """The exact privacy profile delta(eps) = sup_{directions} E_P[(1 − e^{eps − L})_+]
        (L the privacy loss under P), rounded up: never below the true value."""
        return self.profile_bounds(eps).upper

    def _delta_mp(self, x, direction):
        """(value, error bound) of the hockey-stick divergence at x, at the working precision.
        Default: the sum over the atoms of ``_atoms``."""
        atoms, inf_mass, inf_err = self._atoms(direction)
        xf = Fraction(float(x))
        total = inf_mass
        err = inf_err
        for pos_exact, pos, perr, m, merr in atoms:
            if pos_exact is not None:
                if pos_exact <= xf:
                    continue
                d = x - pos
                total += m * -mpmath.expm1(d)
                err += merr + m * mpf_err(x, pos)
            else:
                if pos + perr <= x:
                    continue
                d = x - pos
                total += m * max(mpmath.mpf(0), -mpmath.expm1(d))
                err += merr + m * (2 * perr + mpf_err(x, pos))
        return total, err + mpf_err(total)

    # -- pairs -----------------------------------------------------------------------------
    def discrete_pair(self, h, side: str = UPPER, direction: str = FORWARD, *, tail=_TAIL,
                      max_atoms=MAX_ATOMS) -> DiscretePair:
        """A certified :class:`DiscretePair` on the lattice h·ℤ.

        ``side="upper"``: every loss atom rounded up to h·ℤ (mass beyond the truncation at
        +∞): a dominating pair, its composition's delta is an upper bound.  ``side="lower"``:
        rounded down (mass below the truncation dropped): its composition's delta is a lower
        bound.  ``tail`` is the largest P-mass an unbounded loss may leave beyond the
        truncation; ``max_atoms`` caps the pair's size (ValueError naming h beyond)."""
        h = _real("h", h)
        side = _check_side(side)
        direction = _check_direction(direction)
        tail = _real("tail", tail, hi=1.0)
        max_atoms = _integer("max_atoms", max_atoms, 1, 2**40)
        return self._pair(h, side, direction, tail, max_atoms)

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

    def _atoms(self, direction):  # pragma: no cover - abstract
        raise NotImplementedError

    def black_box(self):
        """(eps, delta) when this mechanism's dominating pair *is* the randomized response of
        a black-box (eps, delta) (so it composes exactly as that pair, through every exact
        path of the package), else None."""
        return None

    # -- the engine's leaves ---------------------------------------------------------------
    def leaf_data(self, h, direction: str = FORWARD, *, tail=_TAIL, max_atoms=MAX_ATOMS):
        """The numbers a lattice leaf of this mechanism is built from, every one a certified
        float bracket (``optcomp._lattice.leaves`` turns them into a
        :class:`~optcomp._lattice.leaves.Leaf`):

        * finite loss laws: ``("atoms", loss, perr, p_lo, p_hi, inf_lo, inf_hi)`` -- atom i
          within ``perr[i]`` of the float ``loss[i]``, P-mass in [p_lo[i], p_hi[i]], P-mass
          at +inf in [inf_lo, inf_hi];
        * laws with a continuous part (Laplace, Gaussian): ``("cells", n0, m_lo, m_hi, q_lo,
          q_hi, points, below_hi, above_hi)`` -- P- and Q-mass brackets of the continuous
          part on the cells [n h, (n + 1) h], n = n0, ..., the point masses (loss, perr,
          p_lo, p_hi) and the P-mass beyond the cells (at most ``tail`` above; Q-masses from
          the symmetric law: Q[L in [a, b]] = P[L in [-b, -a]])."""
        h = _real("h", h)
        direction = _check_direction(direction)
        tail = _real("tail", tail, hi=1.0)
        max_atoms = _integer("max_atoms", max_atoms, 1, 2**40)
        if hasattr(self, "_continuous"):
            return self._cell_data(h, tail, max_atoms)
        with mpmath.workprec(192):
            atoms, inf_mass, inf_err = self._atoms(direction)
            if len(atoms) > max_atoms:
                raise ValueError(f"h={h!r}: {len(atoms)} atoms exceed max_atoms={max_atoms}")
            loss, perr, lo, hi = [], [], [], []
            for pos_exact, pos, pe, m, merr in atoms:
                if pos_exact is not None:
                    f = float(pos_exact)
                    d = abs(Fraction(f) - pos_exact)
                    perr.append(float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0))
                else:
                    f = float(pos)
                    perr.append(float(abs(mpmath.mpf(f) - pos) + pe) * (1.0 + 2.0**-50) + 5e-324)
                loss.append(f)
                a, b = _mass_bracket(m, merr)
                lo.append(a)
                hi.append(b)
            ilo, ihi = _mass_bracket(inf_mass, inf_err)
        return ("atoms", loss, perr, lo, hi, ilo, ihi)

    def _cell_data(self, h, tail, max_atoms):
        lo_loss, hi_loss, masses, tails, atoms = self._continuous(tail)
        H = Fraction(h)
        n0 = math.floor(lo_loss / H)
        n1 = math.ceil(hi_loss / H)
        if n1 - n0 + len(atoms) > max_atoms:
            raise ValueError(f"h={h!r}: {n1 - n0 + len(atoms)} cells exceed max_atoms={max_atoms}; choose a larger h")
        edges = [n * H for n in range(n0, n1 + 1)]
        with mpmath.workprec(128):
            pm = masses(edges)
            qm = masses([-e for e in reversed(edges)])[::-1]
            m_lo, m_hi = zip(*(_mass_bracket(m, err) for m, err in pm))
            q_lo, q_hi = zip(*(_mass_bracket(m, err) for m, err in qm))
            (below, b_err), (above, a_err) = tails(edges[0], edges[-1])
            below_hi = _mass_bracket(below, b_err)[1]
            above_hi = _mass_bracket(above, a_err)[1]
            pts = [[], [], [], []]
            for pos, m, err in atoms:
                f = float(pos)
                d = abs(Fraction(f) - pos)
                a, b = _mass_bracket(m, err)
                for lst, v in zip(pts, (f, float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0), a, b)):
                    lst.append(v)
        return ("cells", n0, list(m_lo), list(m_hi), list(q_lo), list(q_hi), pts, below_hi, above_hi)


def _mass_bracket(m, err):
    return bracket(m, err)


def _atom(pos: Fraction, mass, merr=None):
    """An atom at an exactly known (rational) loss position."""
    with mpmath.workprec(mpmath.mp.prec + 64):
        p = mpmath.mpf(pos.numerator) / pos.denominator
    return (pos, +p, mpf_err(p, bits=2), mass, mpf_err(mass) if merr is None else merr)


# ---------------------------------------------------------------------------------------------
# the finite mechanisms

@dataclass(frozen=True)
class BlackBox(Mechanism):
    """A mechanism known only to be (eps, delta)-DP, composed through its dominating pair,
    the randomized response of MV Def. 3.1 / KOV Thm 3.3 (today's model of optcomp).

    PLD (either direction, any neighbouring relation): loss +∞ with probability delta, +eps
    with (1 − delta)·e^eps/(1 + e^eps), −eps with (1 − delta)/(1 + e^eps).
    Profile: delta(x) = delta + (1 − delta)(e^eps − e^x)_+/(1 + e^eps) for x ≥ 0."""

    eps: float
    delta: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "eps", _real("eps", self.eps, lo_open=False))
        object.__setattr__(self, "delta", _real("delta", self.delta, lo_open=False, hi=1.0))

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        with mpmath.workprec(prec):
            e = Fraction(self.eps)
            d = mpmath.mpf(self.delta)
            up = (1 - d) / (1 + mpmath.exp(-mpmath.mpf(self.eps)))
            dn = (1 - d) / (1 + mpmath.exp(mpmath.mpf(self.eps)))
            return [_atom(e, up), _atom(-e, dn)], d, mpmath.mpf(0)

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def black_box(self):
        return (self.eps, self.delta)


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """k-ary randomized response (Warner 1965; Kairouz–Oh–Viswanath's k-RR): report the true
    value among ``values`` = k with probability e^eps/(e^eps + k − 1), else one of the other
    k − 1 values uniformly.  eps-DP.

    Neighbouring relation: the one input changes its value (x ≠ x').  PLD (either direction):
    +eps with e^eps/(e^eps + k − 1), 0 with (k − 2)/(e^eps + k − 1), −eps with
    1/(e^eps + k − 1).  Profile: delta(x) = (e^eps − e^x)_+/(e^eps + k − 1) for x ≥ 0."""

    eps: float
    values: int = 2

    def __post_init__(self):
        object.__setattr__(self, "eps", _real("eps", self.eps, lo_open=False))
        object.__setattr__(self, "values", _integer("values", self.values, 2, 2**62))

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        with mpmath.workprec(prec):
            e = Fraction(self.eps)
            r = mpmath.exp(-mpmath.mpf(self.eps))
            den = 1 + (self.values - 1) * r
            atoms = [_atom(e, 1 / den), _atom(-e, r / den)]
            if self.values > 2:
                atoms.append(_atom(Fraction(0), (self.values - 2) * r / den))
            return atoms, mpmath.mpf(0), mpmath.mpf(0)

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def black_box(self):
        """Binary randomized response is the black box (eps, 0) itself."""
        return (self.eps, 0.0) if self.values == 2 else None


@dataclass(frozen=True)
class Geometric(Mechanism):
    """The two-sided geometric mechanism (discrete Laplace; Ghosh–Roughgarden–Sundararajan
    2009): integer noise Z with P[Z = z] = (1 − r)/(1 + r)·r^|z|, r = e^{−eps}, added to an
    integer query of sensitivity Δ = ``sensitivity`` (a positive integer).

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction; the output
    y = noise at 0 against noise at Δ): loss Δ·eps with 1/(1 + r) (y ≤ 0), (Δ − 2j)·eps with
    (1 − r)/(1 + r)·r^j for 0 < j = y < Δ, and −Δ·eps with r^Δ/(1 + r) (y ≥ Δ).  With Δ = 1
    this is the two-atom loss of randomized response: Geometric(eps) has exactly the
    profile of BlackBox(eps, 0), delta(x) = (e^eps − e^x)_+/(1 + e^eps) (KOV Thm 4.4)."""

    eps: float
    sensitivity: int = 1

    def __post_init__(self):
        object.__setattr__(self, "eps", _real("eps", self.eps))
        object.__setattr__(self, "sensitivity", _integer("sensitivity", self.sensitivity, 1, 2**20))

    def variance(self) -> float:
        """The noise variance 2r/(1 − r)^2, r = e^{−eps} (nearest float)."""
        r = math.exp(-self.eps)
        return 2 * r / (-math.expm1(-self.eps)) ** 2

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        with mpmath.workprec(prec):
            e = Fraction(self.eps)
            dlt = self.sensitivity
            r = mpmath.exp(-mpmath.mpf(self.eps))
            c = -mpmath.expm1(-mpmath.mpf(self.eps)) / (1 + r)
            atoms = [_atom(dlt * e, 1 / (1 + r)), _atom(-dlt * e, r**dlt / (1 + r))]
            atoms += [_atom((dlt - 2 * j) * e, c * r**j) for j in range(1, dlt)]
            return atoms, mpmath.mpf(0), mpmath.mpf(0)

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def black_box(self):
        """With sensitivity 1 the loss has the two atoms of randomized response (KOV Thm 4.4:
        the k-fold geometric mechanism achieves exactly the optimal privacy region)."""
        return (self.eps, 0.0) if self.sensitivity == 1 else None


@dataclass(frozen=True)
class Staircase(Mechanism):
    """The staircase mechanism of Geng and Viswanath (*The Optimal Noise-Adding Mechanism in
    Differential Privacy*, IEEE Trans. IT 2016): noise density a·e^{−k·eps} on
    |x| ∈ [kΔ, (k + gamma)Δ) and a·e^{−(k+1)eps} on [(k + gamma)Δ, (k + 1)Δ), k = 0, 1, ...,
    a = (1 − e^{−eps})/(2Δ(gamma + e^{−eps}(1 − gamma))); eps-DP for sensitivity Δ.
    The optimal gamma for variance is 1/(1 + e^{eps/2}).

    Neighbouring relation: query outputs differing by Δ = ``sensitivity``.  PLD (either
    direction): the density ratio f(y)/f(y − Δ) takes the values e^eps, 1, e^{−eps} only, so
    the loss has three atoms: +eps with p = 1/2 + m(1 − e^{−eps})/(2(gamma + e^{−eps}(1 − gamma))),
    m = min(gamma, 1 − gamma); −eps with e^{−eps}·p; 0 with the rest.
    Profile: delta(x) = p(1 − e^{x − eps})_+."""

    eps: float
    gamma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "eps", _real("eps", self.eps))
        object.__setattr__(self, "gamma", _real("gamma", self.gamma, lo_open=False, hi=1.0, hi_open=False))
        object.__setattr__(self, "sensitivity", _real("sensitivity", self.sensitivity))

    def variance(self) -> float:
        """The noise variance (Geng–Viswanath), summed in closed form:
        E X² = (2aΔ³/3)[Σ_k b^k(3γk² + 3γ²k + γ³) + b Σ_k b^k(3(1−γ)k² + 3(1−γ²)k + 1 − γ³)],
        b = e^{−eps} (nearest float, from 30-digit arithmetic)."""
        with mpmath.workdps(30):
            b = mpmath.exp(-mpmath.mpf(self.eps))
            g = mpmath.mpf(self.gamma)
            dl = mpmath.mpf(self.sensitivity)
            om = -mpmath.expm1(-mpmath.mpf(self.eps))
            s0, s1 = 1 / om, b / om**2
            s2 = b * (1 + b) / om**3
            a = om / (2 * dl * (g + b * (1 - g)))
            inner = (3 * g * s2 + 3 * g**2 * s1 + g**3 * s0
                     + b * (3 * (1 - g) * s2 + 3 * (1 - g**2) * s1 + (1 - g**3) * s0))
            return float(2 * a * dl**3 / 3 * inner)

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        with mpmath.workprec(prec):
            e = Fraction(self.eps)
            b = mpmath.exp(-mpmath.mpf(self.eps))
            g = mpmath.mpf(self.gamma)
            ad = -mpmath.expm1(-mpmath.mpf(self.eps)) / (2 * (g + b * (1 - g)))  # a·Δ
            m = min(g, 1 - g)
            p = mpmath.mpf(1) / 2 + ad * m
            mid = ad * (b * (1 - 2 * g) if self.gamma <= 0.5 else (2 * g - 1))
            atoms = [_atom(e, p), _atom(-e, b * p)]
            if mid > 0:
                atoms.append(_atom(Fraction(0), mid))
            return atoms, mpmath.mpf(0), mpmath.mpf(0)

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)


def _pmf(name: str, value) -> tuple[float, ...]:
    if value is None or isinstance(value, (str, bytes, bool, dict, set, numbers.Number)):
        raise ParameterTypeError(f"{name} must be a sequence of probabilities, got {_describe(value)}")
    items = list(value)
    out = tuple(_real(f"{name}[{i}]", v, lo_open=False, hi=1.0, hi_open=False) for i, v in enumerate(items))
    if not out:
        raise ValueError(f"{name} must not be empty")
    s = math.fsum(out)
    if abs(s - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1, got sum {s!r}")
    return out


@dataclass(frozen=True)
class Pair(Mechanism):
    """A mechanism given by its two output distributions on the same finite outcomes: ``p``
    on one dataset and ``q`` on its neighbour (any neighbouring relation; the pair is the
    worst case the user vouches for).  The masses are used exactly as given (not
    renormalised; they must sum to 1 within 1e-9).

    PLD, direction ``"forward"`` (P, Q) = (p, q): loss log(p_i/q_i) with mass p_i (+∞ where
    q_i = 0 < p_i); ``"reverse"`` swaps p and q.  Not symmetric in general: ``profile`` is the
    larger of the two directions, delta(x) = max(Σ(p_i − e^x q_i)_+, Σ(q_i − e^x p_i)_+)."""

    p: tuple
    q: tuple

    symmetric = False

    def __post_init__(self):
        p = _pmf("p", self.p)
        q = _pmf("q", self.q)
        if len(p) != len(q):
            raise ValueError(f"q must have the length of p ({len(p)}), got {len(q)}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        p, q = (self.p, self.q) if direction == FORWARD else (self.q, self.p)
        with mpmath.workprec(prec):
            atoms = []
            inf = mpmath.mpf(0)
            for a, b in zip(p, q):
                if a == 0:
                    continue
                if b == 0:
                    inf += a
                elif a == b:
                    atoms.append((Fraction(0), mpmath.mpf(0), mpmath.mpf(0), mpmath.mpf(a), mpmath.mpf(0)))
                else:
                    pos = mpmath.log(mpmath.mpf(a)) - mpmath.log(mpmath.mpf(b))
                    atoms.append((None, pos, mpf_err(pos, abs(mpmath.log(a)), bits=4), mpmath.mpf(a), mpmath.mpf(0)))
            return atoms, inf, mpf_err(inf, bits=2)

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)


@dataclass(frozen=True)
class Profile(Mechanism):
    """A mechanism known only to satisfy every (eps_j, delta_j)-DP guarantee of the list,
    composed through its tightest dominating pair: the pair whose trade-off function is
    f = max_j f_{eps_j, delta_j}, f_{e,d}(α) = max(0, 1 − d − e^e α, e^{−e}(1 − d − α))
    (Dong–Roth–Su, *Gaussian Differential Privacy*, JRSS-B 2022, Prop. 2.5/Lemma for f-DP;
    f-DP composition is tight for it; Zhu–Dong–Wang 2022 for dominating pairs).

    PLD (either direction, f is symmetric): f is convex and piecewise linear; a segment of
    slope −e^{±eps_j} between α_a < α_b is an outcome with P-mass e^{±eps_j}(α_b − α_a) at
    loss ±eps_j, and the drop at α = 0 is the atom +∞ of mass min_j delta_j.
    Profile: delta(x) = sup_α (1 − e^x α − f(α)), taken at the vertices of f.

    Vertices are computed at the working precision (≥ 192 bits) with a bound of their
    rounding error carried into the masses; crossings closer than that resolution are
    resolved at that precision."""

    guarantees: tuple

    def __post_init__(self):
        g = self.guarantees
        if g is None or isinstance(g, (str, bytes, bool, dict, numbers.Number)):
            raise ParameterTypeError(f"guarantees must be a sequence of (eps, delta) pairs, got {_describe(g)}")
        out = []
        for i, item in enumerate(list(g)):
            if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or len(item) != 2:
                raise ParameterTypeError(f"guarantees[{i}] must be an (eps, delta) pair, got {_describe(item)}")
            e = _real(f"guarantees[{i}].eps", item[0], lo_open=False)
            d = _real(f"guarantees[{i}].delta", item[1], lo_open=False, hi=1.0)
            out.append((e, d))
        if not out:
            raise ValueError("guarantees must not be empty")
        object.__setattr__(self, "guarantees", tuple(sorted(set(out))))

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        # 1 - delta_j must keep delta_j: as many more bits as delta_j is below 1 (up to 1074
        # for a subnormal), else a delta_j < 2^-(prec + 64) vanishes with its +inf mass and
        # its segment of f (found by tests/test_mechanism_k.py: delta 0 reported for 1e-78)
        below = max((-math.frexp(d)[1] for _, d in self.guarantees if d > 0), default=0)
        with mpmath.workprec(prec + 64 + max(0, below)):
            lines = {}  # exact loss (Fraction) -> (slope, intercept, err of intercept)
            for e, d in self.guarantees:
                E = mpmath.exp(mpmath.mpf(e))
                for loss, slope, icpt in ((Fraction(e), -E, 1 - mpmath.mpf(d)),
                                          (-Fraction(e), -1 / E, (1 - mpmath.mpf(d)) / E)):
                    if loss not in lines or icpt > lines[loss][1]:
                        lines[loss] = (slope, icpt)
            zero_line = (None, mpmath.mpf(0), mpmath.mpf(0))
            cand = [(k, s, i) for k, (s, i) in lines.items()] + [zero_line]
            f0 = max(i for _, _, i in cand)
            # start: the line through (0, f0) with the largest slope
            cur = max((c for c in cand if c[2] == f0), key=lambda c: c[1])
            a0, a0_err = mpmath.mpf(0), mpmath.mpf(0)
            atoms = []
            while cur is not zero_line:
                best = None
                for c in cand:
                    if c[1] <= cur[1]:
                        continue
                    num, den = cur[2] - c[2], c[1] - cur[1]
                    a = num / den
                    err = mpf_err(abs(cur[2]) + abs(c[2]) + abs(a) * (abs(c[1]) + abs(cur[1])), bits=6) / den \
                        + mpf_err(a, bits=2)
                    if best is None or a < best[0] or (a == best[0] and c[1] > best[2][1]):
                        best = (a, err, c)
                a1, a1_err, nxt = best
                a1 = max(a1, a0)
                width = a1 - a0
                if width > 0 or a1_err + a0_err > 0:
                    m = -cur[1] * width
                    merr = -cur[1] * (a1_err + a0_err) + mpf_err(m)
                    atoms.append(_atom(cur[0], m, merr))
                cur, a0, a0_err = nxt, a1, a1_err
            inf_mass = 1 - f0
            # exact when some delta_j is 0 (f0 = 1 exactly): a pure-DP profile has no mass at +inf
            return atoms, inf_mass, (mpf_err(1, inf_mass, bits=4) if inf_mass != 0 else mpmath.mpf(0))

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def black_box(self):
        """One guarantee: the dominating pair of a black box (eps, delta)."""
        return self.guarantees[0] if len(self.guarantees) == 1 else None


# ---------------------------------------------------------------------------------------------
# the continuous mechanisms: closed-form profiles, cell masses of the loss law

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


def _mp(x: Fraction):
    return mpmath.mpf(x.numerator) / x.denominator


@dataclass(frozen=True)
class Laplace(Mechanism):
    """The Laplace mechanism (Dwork–McSherry–Nissim–Smith 2006): noise of density
    e^{−|z|/b}/(2b), b = ``scale``, added to a real query of sensitivity Δ; (Δ/b)-DP.

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction), a = Δ/b:
    an atom +a of mass 1/2, an atom −a of mass e^{−a}/2 and density e^{(l − a)/2}/4 on
    (−a, a); P[L > l] = 1 − e^{(l − a)/2}/2 there.
    Profile: delta(x) = 1 − e^{(x − a)/2} for 0 ≤ x < a, 0 for x ≥ a."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "scale", _real("scale", self.scale))
        object.__setattr__(self, "sensitivity", _real("sensitivity", self.sensitivity))

    @property
    def _a(self) -> Fraction:
        return Fraction(self.sensitivity) / Fraction(self.scale)

    def variance(self) -> float:
        """The noise variance 2b² (nearest float)."""
        return 2.0 * self.scale * self.scale

    def _delta_mp(self, x, direction):
        a = self._a
        if Fraction(float(x)) >= a:
            return mpmath.mpf(0), mpmath.mpf(0)
        am = _mp(a)
        v = -mpmath.expm1((x - am) / 2)
        return v, mpf_err(v, x, am)

    def _continuous(self, tail):
        """(lo_loss, hi_loss, cell masses, tails, point atoms) of the loss law under P."""
        a = self._a

        def masses(edges):
            am = _mp(a)
            out = []
            for e0, e1 in zip(edges[:-1], edges[1:]):
                lo_, hi_ = max(e0, -a), min(e1, a)
                if hi_ <= lo_:
                    out.append((mpmath.mpf(0), mpmath.mpf(0)))
                    continue
                l0, l1 = _mp(lo_), _mp(hi_)
                m = mpmath.exp((l1 - am) / 2) * -mpmath.expm1(-(l1 - l0) / 2) / 2
                out.append((m, mpf_err(m, l0, l1, am)))
            return out

        # the cells cover the continuous part; the atoms at ±a are placed exactly
        with mpmath.workprec(128):
            am = _mp(a)
            atoms = [(a, mpmath.mpf(1) / 2, mpmath.mpf(0)), (-a, mpmath.exp(-am) / 2, mpf_err(mpmath.exp(-am), am))]
        zero = (mpmath.mpf(0), mpmath.mpf(0))
        return -a, a, masses, lambda e0, e1: (zero, zero), atoms

    def _pair(self, h, side, direction, tail, max_atoms):
        lo_loss, hi_loss, masses, tails, atoms = self._continuous(tail)
        return _cells_pair(h, side, tails, max_atoms, lo_loss, hi_loss, masses, atoms)

    def _cell_data(self, h, tail, max_atoms):
        """:meth:`Mechanism.leaf_data` for the cells, vectorised in floats (the mpmath path of
        the base class costs ~50 us a cell).  P-mass of a cell [l0, l1]: F(hi) - F(lo) with
        F(l) = e^{(l - a)/2}/2, lo = max(l0, -a), hi = min(l1, a), evaluated as
        e^{(hi - a)/2} (1 - e^{-(hi - lo)/2})/2 with the float a_f (|a_f - a| <= u a).
        Error: exp and expm1 within 1 ulp (``_rounding``'s libm assumption), their arguments
        within u (|hi| + a_f) + |a_f - a|/2, so a relative u (4 (|hi| + a_f) + 16); the clipped
        edges and a itself move by <= u a, at density <= 1/4 and dF/da = -F/2: an absolute
        u a (1/2 + m).  Q-masses: the mirrored cells (the law is symmetric)."""
        import numpy as np

        a_fr = self._a
        H = Fraction(h)
        n0 = math.floor(-a_fr / H)
        n1 = math.ceil(a_fr / H)
        if n1 - n0 + 2 > max_atoms:
            raise ValueError(f"h={h!r}: {n1 - n0 + 2} cells exceed max_atoms={max_atoms}; choose a larger h")
        if abs(n0) >= 2**49 or abs(n1) >= 2**49:
            raise ValueError(f"h={h!r} is too small for exact lattice positions against a={float(a_fr)!r}")
        a = float(a_fr)
        u = 2.0**-53
        e = np.arange(n0, n1 + 1, dtype=np.int64).astype(float) * h  # exact

        def masses(l0, l1):
            lo, hi = np.maximum(l0, -a), np.minimum(l1, a)
            ok = hi > lo
            with np.errstate(under="ignore"):
                m = np.where(ok, np.exp((hi - a) / 2.0) * -np.expm1(-(hi - lo) / 2.0) / 2.0, 0.0)
            err = m * u * (4.0 * (np.abs(hi) + a) + 16.0) + u * a * (0.5 + m) + np.where(ok, 5e-324, 0.0)
            return np.maximum(m - err, 0.0), np.minimum(m + err, 1.0)

        m_lo, m_hi = masses(e[:-1], e[1:])
        q_lo, q_hi = masses(-e[1:], -e[:-1])
        d = abs(Fraction(a) - a_fr)
        perr = float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0)
        e_a = math.exp(-a)
        e_err = e_a * (2.0 * u + 2.0 * u * a) + perr * e_a  # exp within 1 ulp, a within perr
        pts = [[a, -a], [perr, perr], [0.5, max(0.0, (e_a - e_err) / 2.0)], [0.5, min(1.0, (e_a + e_err) / 2.0)]]
        return ("cells", n0, m_lo.tolist(), m_hi.tolist(), q_lo.tolist(), q_hi.tolist(), pts, 0.0, 0.0)


@dataclass(frozen=True)
class Gaussian(Mechanism):
    """The Gaussian mechanism: noise N(0, sigma²) added to a real (or vector, ℓ2) query of
    sensitivity Δ.

    Neighbouring relation: query outputs Δ apart (ℓ2).  PLD (either direction), mu = Δ/sigma:
    L ~ N(mu²/2, mu²).  Profile (the analytic Gaussian mechanism, Balle and Wang, ICML 2018,
    Thm. 8; mu-GDP of Dong–Roth–Su): delta(x) = Φ(mu/2 − x/mu) − e^x Φ(−mu/2 − x/mu),
    evaluated in mpmath with its cancellation charged and the precision raised until the
    bracket is tight."""

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "sigma", _real("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", _real("sensitivity", self.sensitivity))

    def variance(self) -> float:
        """The noise variance sigma² (nearest float)."""
        return self.sigma * self.sigma

    def _mu(self):
        return mpmath.mpf(self.sensitivity) / mpmath.mpf(self.sigma)

    def _delta_mp(self, x, direction):
        mu = self._mu()
        t1 = mpmath.ncdf(mu / 2 - x / mu)
        t2 = mpmath.exp(x) * mpmath.ncdf(-mu / 2 - x / mu)
        v = t1 - t2
        # each term within a few ulps; dδ/dmu = φ(mu/2 − x/mu) ≤ 1/2 times mu's rounding
        err = mpf_err(t1, t2, bits=10) + mpf_err(mu * mpmath.npdf(mu / 2 - x / mu), bits=10) \
            + mpf_err((abs(x) / mu + mu) * mpmath.npdf(mu / 2 - x / mu), bits=10)
        return max(v, mpmath.mpf(0)), err

    def _continuous(self, tail):
        """(lo_loss, hi_loss, cell masses, tails, point atoms) of the loss law under P."""
        mu_f = Fraction(self.sensitivity) / Fraction(self.sigma)
        t = math.sqrt(2.0 * -math.log(tail)) + 1.0  # Φc(t) ≤ e^{-t²/2}/2 < tail
        mean = mu_f * mu_f / 2
        lo_loss = mean - Fraction(t) * mu_f
        hi_loss = mean + Fraction(t) * mu_f

        def edge_values(edges):
            """Per edge: z = (e − mean)/mu, the density bound φ(z) and the tail Φ(−|z|)."""
            mean_m, mu_m = _mp(mean), _mp(mu_f)
            r2, c = mpmath.sqrt(2), 1 / mpmath.sqrt(2 * mpmath.pi)
            out = []
            for e in edges:
                z = (_mp(e) - mean_m) / mu_m
                out.append((z, c * mpmath.exp(-z * z / 2), mpmath.erfc(abs(z) / r2) / 2))
            return out

        def masses(edges):
            vals = edge_values(edges)
            out = []
            for (z0, d0, t0), (z1, d1, t1) in zip(vals[:-1], vals[1:]):
                if z1 <= 0:  # both left of the mean: Φ(z1) − Φ(z0), small terms
                    m, mags, dens = t1 - t0, (t1, t0), max(d0, d1)
                elif z0 >= 0:  # both right: Φc(z0) − Φc(z1)
                    m, mags, dens = t0 - t1, (t0, t1), max(d0, d1)
                else:
                    m, mags, dens = 1 - t0 - t1, (1,), mpmath.mpf(1)
                # rounding of the terms, and of z (relative 2^-prec) times the density
                err = mpf_err(*mags, bits=10) + mpf_err(dens * (abs(z0) + abs(z1) + 1), bits=10)
                out.append((max(m, mpmath.mpf(0)), err))
            return out

        def tails(e0, e1):
            (z0, d0, t0), (z1, d1, t1) = edge_values([e0, e1])
            below = t0 if z0 <= 0 else 1 - t0
            above = t1 if z1 >= 0 else 1 - t1
            return ((below, mpf_err(below, d0 * (abs(z0) + 1), bits=10)),
                    (above, mpf_err(above, d1 * (abs(z1) + 1), bits=10)))

        return lo_loss, hi_loss, masses, tails, ()

    def _pair(self, h, side, direction, tail, max_atoms):
        lo_loss, hi_loss, masses, tails, atoms = self._continuous(tail)
        return _cells_pair(h, side, tails, max_atoms, lo_loss, hi_loss, masses, atoms)

    def _cell_data(self, h, tail, max_atoms):
        """:meth:`Mechanism.leaf_data` for the cells, vectorised in floats (the mpmath path of
        the base class costs ~250 us an edge).  In z = (l - mu^2/2)/mu units a cell [za, zb]
        on one side of 0 has P-mass e^{L(zb)} (1 - e^{L(za) - L(zb)}) (L = log Phi; mirrored
        for za >= 0; a cell across 0 is two), with no cancellation beyond that of the
        difference D = L(za) - L(zb) < 0.  Error: each L(x) within eta(x) = SPECIAL_ABS
        (``_rounding``'s assumption 4 on scipy's log_ndtr) + (|x| + 1) eps_z(x), the second
        term the argument's rounding eps_z <= 4u(|z| + |l|/mu + mu + 1) times the slope
        phi/Phi <= |x| + 1 of L (x <= 0); then the mass is within a relative
        eta_b + (eta_a + eta_b)/|D| + (2 LIBM_ULPS + 4) u (1 + |L(zb)|) (exp's argument error, the
        slope e^D/(1 - e^D) <= 1/|D| of log(-expm1(D)), exp, expm1 and the product), and
        always below e^{L(zb) + eta_b} (|D| + eta_a + eta_b) (1 + 8u).  Q-masses: the mirrored cells."""
        import numpy as np
        from scipy.special import log_ndtr

        from ._rounding import LIBM_ULPS, SPECIAL_ABS

        lo_loss, hi_loss, _masses, _tails, _atoms = self._continuous(tail)
        H = Fraction(h)
        n0 = math.floor(lo_loss / H)
        n1 = math.ceil(hi_loss / H)
        if n1 - n0 + 1 > max_atoms:
            raise ValueError(f"h={h!r}: {n1 - n0 + 1} cells exceed max_atoms={max_atoms}; choose a larger h")
        if abs(n0) >= 2**49 or abs(n1) >= 2**49:
            raise ValueError(f"h={h!r} is too small for exact lattice positions against this sigma")
        u = 2.0**-53
        mu = float(Fraction(self.sensitivity) / Fraction(self.sigma))
        mean = mu * mu / 2.0
        e = np.arange(n0, n1 + 1, dtype=np.int64).astype(float) * h  # exact

        def z_of(x):
            z = (x - mean) / mu
            return z, 4.0 * u * (np.abs(z) + np.abs(x) / mu + mu + 1.0)

        def side_mass(za, ea, zb, eb):
            """za < zb <= 0 (arrays, with argument errors ea, eb): (m_lo, m_hi)."""
            La, Lb = log_ndtr(za), log_ndtr(zb)
            eta_a = SPECIAL_ABS + (np.abs(za) + 1.0) * ea
            eta_b = SPECIAL_ABS + (np.abs(zb) + 1.0) * eb
            D = La - Lb
            with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
                m = np.exp(Lb) * -np.expm1(D)
                rel = eta_b + (eta_a + eta_b) / np.abs(D) + (2 * LIBM_ULPS + 4) * u * (1.0 + np.abs(Lb))
                cap = np.exp(Lb + eta_b) * (np.abs(D) + eta_a + eta_b) * (1.0 + 8.0 * u)
            rel = np.where(np.isfinite(rel), rel, np.inf)
            ok = rel < 1.0
            r = np.where(ok, rel, 0.0)
            m_hi = np.minimum(np.where(ok, m * (1.0 + r), np.inf), cap)
            m_lo = np.where(ok, m * (1.0 - r), 0.0)
            # a mass whose bound underflowed is below 2^-1074 (1 + ...): 2^-1000 bounds it
            m_hi = np.where(m_hi < 2.0**-1000, 2.0**-1000, m_hi)
            return np.maximum(m_lo, 0.0), np.minimum(m_hi, 1.0)

        def masses(x0, x1):
            z0, e0 = z_of(x0)
            z1, e1 = z_of(x1)
            lo, hi = np.zeros(z0.size), np.zeros(z0.size)
            neg = z1 <= 0.0
            pos = z0 >= 0.0
            mid = ~neg & ~pos
            if neg.any():
                lo[neg], hi[neg] = side_mass(z0[neg], e0[neg], z1[neg], e1[neg])
            if pos.any():  # mirrored: [z0, z1] -> [-z1, -z0]
                lo[pos], hi[pos] = side_mass(-z1[pos], e1[pos], -z0[pos], e0[pos])
            if mid.any():  # across 0: [z0, 0] + [0, z1] (0 exact)
                zero = np.zeros(int(mid.sum()))
                a_lo, a_hi = side_mass(z0[mid], e0[mid], zero, zero)
                b_lo, b_hi = side_mass(-z1[mid], e1[mid], zero, zero)
                lo[mid] = (a_lo + b_lo) * (1.0 - 2.0 * u)
                hi[mid] = np.minimum((a_hi + b_hi) * (1.0 + 2.0 * u), 1.0)
            return lo, hi

        m_lo, m_hi = masses(e[:-1], e[1:])
        q_lo, q_hi = masses(-e[1:], -e[:-1])
        # tails beyond the cells: Phi(z_first) below, Phi(-z_last) above (upper bounds)
        (zf, ef), (zl, el) = z_of(e[:1]), z_of(e[-1:])
        below = float(np.exp(log_ndtr(zf) + SPECIAL_ABS + (np.abs(zf) + 1.0) * ef)[0]) * (1.0 + 8.0 * u)
        above = float(np.exp(log_ndtr(-zl) + SPECIAL_ABS + (np.abs(zl) + 1.0) * el)[0]) * (1.0 + 8.0 * u)
        return ("cells", n0, m_lo.tolist(), m_hi.tolist(), q_lo.tolist(), q_hi.tolist(), [[], [], [], []],
                min(below, 1.0), min(above, 1.0))


@dataclass(frozen=True)
class DiscreteGaussian(Mechanism):
    """The discrete Gaussian mechanism (Canonne, Kamath and Steinke, NeurIPS 2020): integer
    noise Z with P[Z = z] ∝ e^{−z²/(2 sigma²)}, added to an integer query of sensitivity Δ
    (a positive integer).

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction; z ↦ Δ − z
    swaps them): the outcome z has P-mass e^{−z²/(2 sigma²)}/Z_sigma and loss
    Δ(Δ − 2z)/(2 sigma²).  Profile: delta(x) = Σ_z P(z)(1 − e^{x − L(z)})_+, summed
    directly over |z| ≤ W with the tail beyond W bounded by a geometric series (charged to
    the upper end of the bracket); supported for windows of up to 2^20 outcomes
    (sigma ≲ 1.4·10^4), beyond which a ValueError says so."""

    sigma: float
    sensitivity: int = 1

    def __post_init__(self):
        object.__setattr__(self, "sigma", _real("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", _integer("sensitivity", self.sensitivity, 1, 2**20))

    def _window(self) -> int:
        w = math.ceil(self.sigma * math.sqrt(2.0 * 760.0 * math.log(2.0))) + self.sensitivity + 1
        if 2 * w + 1 > MAX_WINDOW:
            raise ValueError(f"sigma={self.sigma!r}: the direct sum needs {2 * w + 1} outcomes, more than "
                             f"{MAX_WINDOW} (large sigma is not supported yet)")
        return w

    @lru_cache(maxsize=16)
    def _atoms_at(self, prec, direction):
        w = self._window()
        s2 = 2 * Fraction(self.sigma) ** 2
        dl = self.sensitivity
        with mpmath.workprec(prec):
            c = -1 / _mp(s2)
            terms = [mpmath.exp(c * z * z) for z in range(-w, w + 1)]
            # tail beyond |z| > w: Σ_{z>w} e^{-z²/2σ²} ≤ t(w+1)/(1 − r), r = e^{-(2w+1)/2σ²}
            r = mpmath.exp(c * (2 * w + 1))
            tail_one = mpmath.exp(c * (w + 1) ** 2) / (1 - r)
            total = mpmath.fsum(terms)
            z_lo = total
            z_err = mpf_err(total, bits=4 + max(1, (2 * w + 1).bit_length())) + 2 * tail_one
            atoms = []
            for z, t in zip(range(-w, w + 1), terms):
                pos = Fraction(dl * (dl - 2 * z)) / s2
                m = t / z_lo
                atoms.append(_atom(pos, m, mpf_err(m, bits=4) + m * z_err / z_lo))
            # the mass beyond the window: loss above the top atom (z < -w) -> +inf on the upper
            # side (counted as an error of the inf mass 0), below the bottom (z > w) -> charged
            # as an error of the lowest atom (rounded up onto it)
            tail_mass = tail_one / z_lo
            lowest = atoms[-1]
            atoms[-1] = (lowest[0], lowest[1], lowest[2], lowest[3], lowest[4] + tail_mass)
            return atoms, mpmath.mpf(0), tail_mass

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

