"""The mechanisms with a finite privacy loss law: black boxes, randomized response, the
geometric and staircase mechanisms, finite pairs and privacy profiles (the discrete Gaussian,
finite or not by its sigma, has its own module).

Each gives its atoms in mpmath (``_atoms``); the profile, the certified discrete pairs and
the :class:`~optcomp._laws.AtomLaw` the engine reads come from
:class:`~optcomp.mechanisms._base.AtomMechanism`.  The noise-adding mechanisms assume a
query of the given sensitivity and the worst pair of neighbours (outputs that far apart);
their laws are those of P = noise at 0 against Q = noise at the sensitivity, the same in
both directions."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import mpmath

from .._inputs import ParameterTypeError, _describe, _integer
from .._laws import FORWARD
from .._pairs import mpf_err
from ._base import AtomMechanism, _atom, _real

@dataclass(frozen=True)
class BlackBox(AtomMechanism):
    """A mechanism known only to be (eps, delta)-DP, composed through its dominating pair,
    the randomized response of MV Def. 3.1 / KOV Thm 3.3 (today's model of optcomp).

    PLD (either direction, any neighbouring relation): loss +∞ with probability delta, +eps
    with (1 − delta)·e^eps/(1 + e^eps), −eps with (1 − delta)/(1 + e^eps).
    Profile: delta(x) = delta + (1 − delta)(e^eps − e^x)_+/(1 + e^eps) for x ≥ 0."""

    family = "black_box"
    relation = "any: the (eps, delta) guarantee holds for every pair of neighbours the user's relation admits"

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

    def _neg_q(self, direction):
        return mpmath.mpf(self.delta), mpmath.mpf(0)  # the mirror of the +inf atom

    def black_box(self):
        return (self.eps, self.delta)


@dataclass(frozen=True)
class RandomizedResponse(AtomMechanism):
    """k-ary randomized response (Warner 1965; Kairouz–Oh–Viswanath's k-RR): report the true
    value among ``values`` = k with probability e^eps/(e^eps + k − 1), else one of the other
    k − 1 values uniformly.  eps-DP.

    Neighbouring relation: the one input changes its value (x ≠ x').  PLD (either direction):
    +eps with e^eps/(e^eps + k − 1), 0 with (k − 2)/(e^eps + k − 1), −eps with
    1/(e^eps + k − 1).  Profile: delta(x) = (e^eps − e^x)_+/(e^eps + k − 1) for x ≥ 0."""

    family = "randomized_response"
    relation = "one input's value changes (x != x')"
    aliases = ("rr",)

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


_TRUNCATE_FROM = 4096  # sensitivities up to this list every atom of Geometric (exact laws)


@dataclass(frozen=True)
class Geometric(AtomMechanism):
    """The two-sided geometric mechanism (discrete Laplace; Ghosh–Roughgarden–Sundararajan
    2009): integer noise Z with P[Z = z] = (1 − r)/(1 + r)·r^|z|, r = e^{−eps}, added to an
    integer query of sensitivity Δ = ``sensitivity`` (a positive integer).

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction; the output
    y = noise at 0 against noise at Δ): loss Δ·eps with 1/(1 + r) (y ≤ 0), (Δ − 2j)·eps with
    (1 − r)/(1 + r)·r^j for 0 < j = y < Δ, and −Δ·eps with r^Δ/(1 + r) (y ≥ Δ).  With Δ = 1
    this is the two-atom loss of randomized response: Geometric(eps) has exactly the
    profile of BlackBox(eps, 0), delta(x) = (e^eps − e^x)_+/(1 + e^eps) (KOV Thm 4.4)."""

    family = "geometric"
    noise_parameter = "eps"

    @classmethod
    def with_privacy(cls, x, sensitivity):
        return cls(x, sensitivity)
    relation = "integer query outputs differing by at most the sensitivity"

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
        """The atoms j = 0 .. Δ (y ≤ 0, 0 < y < Δ, y ≥ Δ).  With Δ > ``_TRUNCATE_FROM`` the
        atoms j > J of negligible mass are cut: their total is exactly r^{J+1}/(1 + r) (the
        masses (1 − r)/(1 + r) r^j, j = J+1 .. Δ−1, telescope with the bottom atom's
        r^Δ/(1 + r)), below 2^-1200 by the choice of J, and it is put at +∞ as an error
        bracket [0, that bound]: P-mass moved up (or dropped, for lower bounds) only.  A
        Geometric(1000, sensitivity=2^20) then has one atom, not 2^20 + 1."""
        with mpmath.workprec(prec):
            e = Fraction(self.eps)
            dlt = self.sensitivity
            eps = mpmath.mpf(self.eps)
            r = mpmath.exp(-eps)
            c = -mpmath.expm1(-eps) / (1 + r)
            last = dlt - 1  # the last middle atom listed
            cut = mpmath.mpf(0)
            bound = 1200.0 * math.log(2.0) * (1.0 + 2.0**-40)  # (covers the float roundings here)
            if dlt > _TRUNCATE_FROM and self.eps * dlt > bound:
                # r^(J+1) <= 2^-1200 once (J + 1) eps >= 1200 log 2 (J + 1 < dlt here)
                last = math.ceil(bound / self.eps) - 1
                cut = mpmath.ldexp(1, -1200)  # >= r^(last + 1)/(1 + r), exactly the mass cut
            atoms = [_atom(dlt * e, 1 / (1 + r))]
            if cut == 0:
                atoms.append(_atom(-dlt * e, r**dlt / (1 + r)))
            # the middle masses c r^j by successive products at 32 more bits: relative error
            # at most j 2^-(prec + 30) < 2^-(prec - 8) (the charge of mpf_err) for j < 2^36
            masses = []
            with mpmath.workprec(prec + 32):
                rr = mpmath.exp(-eps)
                m = c * rr
                for _ in range(last):
                    masses.append(m)
                    m = m * rr
            unit, unit8 = mpmath.ldexp(1, 2 - prec), mpmath.ldexp(1, 8 - prec)  # (mpf_err's charges)
            for j, m in enumerate(masses, 1):
                p = eps * (dlt - 2 * j)  # exact: a float times an integer below 2^21
                mass = +m
                atoms.append((Fraction(e.numerator * (dlt - 2 * j), e.denominator), p, abs(p) * unit, mass,
                              mass * unit8))
            return atoms, mpmath.mpf(0), cut

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def black_box(self):
        """With sensitivity 1 the loss has the two atoms of randomized response (KOV Thm 4.4:
        the k-fold geometric mechanism achieves exactly the optimal privacy region)."""
        return (self.eps, 0.0) if self.sensitivity == 1 else None


@dataclass(frozen=True)
class Staircase(AtomMechanism):
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

    family = "staircase"
    noise_parameter = "eps"

    @classmethod
    def with_privacy(cls, x, sensitivity):
        """The staircase with Geng--Viswanath's variance-optimal gamma."""
        return cls(x, cls.optimal_gamma(x), sensitivity)
    relation = "query outputs differing by at most the sensitivity"

    eps: float
    gamma: float
    sensitivity: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "eps", _real("eps", self.eps))
        object.__setattr__(self, "gamma", _real("gamma", self.gamma, lo_open=False, hi=1.0, hi_open=False))
        object.__setattr__(self, "sensitivity", _real("sensitivity", self.sensitivity))

    @classmethod
    def from_spec(cls, values: dict):
        """Without ``gamma``: Geng--Viswanath's variance-optimal gamma = 1/(1 + e^{eps/2})."""
        if "gamma" not in values and "eps" in values:
            values = dict(values, gamma=cls.optimal_gamma(values["eps"]))
        return super().from_spec(values)

    @staticmethod
    def optimal_gamma(eps) -> float:
        """Geng--Viswanath's variance-optimal gamma* = 1/(1 + e^{eps/2}) (nearest float)."""
        eps = _real("eps", eps)
        return 1.0 / (1.0 + math.exp(eps / 2.0)) if eps < 1400 else 0.0

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


def _sum_err(total, terms):
    """The error of an mpmath sum of the floats ``terms``: 0 when it is exact (a sum of a few
    floats usually is, at 192 bits: a Pair's +inf mass 0.5 stays 0.5, so a delta_g of
    exactly 1 - (1 - 0.5)^k is attainable), else a few ulps."""
    from .._rounding import mpf_exact

    exact = sum((Fraction(float(t)) for t in terms), Fraction(0))
    return mpmath.mpf(0) if mpf_exact(total) == exact else mpf_err(total, bits=2)


@dataclass(frozen=True)
class Pair(AtomMechanism):
    """A mechanism given by its two output distributions on the same finite outcomes: ``p``
    on one dataset and ``q`` on its neighbour (any neighbouring relation; the pair is the
    worst case the user vouches for).  Each must sum to 1 within 1e-9; the distributions are
    p/Σp and q/Σq, the sums taken exactly (floats such as 0.1, 0.4, 0.5 sum to 1 + 2^-55, and
    masses taken as given would then be a measure of more than 1, whose "delta" exceeds the
    one of any pair of distributions).  Floats that sum to exactly 1 are used as they are.

    PLD, direction ``"forward"`` (P, Q) = (p, q): loss log(p_i/q_i) with mass p_i (+∞ where
    q_i = 0 < p_i); ``"reverse"`` swaps p and q.  Not symmetric in general: ``profile`` is the
    larger of the two directions, delta(x) = max(Σ(p_i − e^x q_i)_+, Σ(q_i − e^x p_i)_+)."""

    family = "pair"
    list_keys = ("p", "q")
    relation = "as the user vouches: p is the output law on D (holding the record), q on its neighbour D'"

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
    def _sums(self, direction):
        """(Σp, Σq) of ``direction`` (forward (p, q), reverse (q, p)), the floats summed exactly."""
        p, q = (self.p, self.q) if direction == FORWARD else (self.q, self.p)
        return sum(map(Fraction, p), Fraction(0)), sum(map(Fraction, q), Fraction(0))

    @lru_cache(maxsize=64)
    def _distributions(self, direction):
        """The two output distributions (P, Q) = (p/Σp, q/Σq) of ``direction`` as exact
        rationals outcome by outcome: the one place a Pair is normalised (its atoms, and the
        exact path's :func:`optcomp._exact.finite.exact_pair`, read them)."""
        p, q = (self.p, self.q) if direction == FORWARD else (self.q, self.p)
        sp, sq = self._sums(direction)
        return tuple(Fraction(a) / sp for a in p), tuple(Fraction(b) / sq for b in q)

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        p, q = (self.p, self.q) if direction == FORWARD else (self.q, self.p)
        sp, sq = self._sums(direction)
        if sp != 1 or sq != 1:
            return self._normalised_atoms(prec, p, q, self._distributions(direction)[0], sq / sp)
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
            return atoms, inf, _sum_err(inf, [a for a, b in zip(p, q) if b == 0 and a != 0])

    @staticmethod
    def _normalised_atoms(prec, p, q, P, ratio: Fraction):
        """The atoms of (P, Q) = (p/sp, q/sq) (:meth:`_distributions`; sp and sq the exact sums,
        not both 1, ``ratio`` = sq/sp): masses P_a = a/sp and positions log(a/b) + log(sq/sp),
        each with an error bound (a quotient within 2 ulps; a log of a rational within 4 ulps
        of its argument's magnitude); the +inf mass is the sum of its P_a, an exact rational
        rounded once."""
        with mpmath.workprec(prec):
            shift_exact = Fraction(0) if ratio == 1 else None
            # log(sq/sp) = log1p(r), r = sq/sp - 1 an exact rational (sums 1 + 1e-300 apart keep
            # their shift): r rounded once, log1p within a few ulps of its result
            r = ratio - 1
            shift = mpmath.log1p(mpmath.mpf(r.numerator) / r.denominator)
            shift_err = mpf_err(shift, bits=6) if shift_exact is None else mpmath.mpf(0)

            def mass(r: Fraction):
                m = mpmath.mpf(r.numerator) / r.denominator
                return m, mpf_err(m, bits=2)

            atoms = []
            inf = Fraction(0)
            for a, b, pa in zip(p, q, P):
                if a == 0:
                    continue
                if b == 0:
                    inf += pa
                    continue
                m, m_err = mass(pa)
                if a == b and shift_exact is not None:
                    atoms.append((Fraction(0), mpmath.mpf(0), mpmath.mpf(0), m, m_err))
                    continue
                base = mpmath.log(mpmath.mpf(a)) - mpmath.log(mpmath.mpf(b)) if a != b else mpmath.mpf(0)
                base_err = mpf_err(base, abs(mpmath.log(a)), bits=4) if a != b else mpmath.mpf(0)
                pos = base + shift
                atoms.append((None, pos, base_err + shift_err + mpf_err(pos, bits=2), m, m_err))
            inf_m, inf_e = mass(inf) if inf else (mpmath.mpf(0), mpmath.mpf(0))
            return atoms, inf_m, inf_e

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def _neg_q(self, direction):
        p, q = (self.p, self.q) if direction == "forward" else (self.q, self.p)
        terms = [b for a, b in zip(p, q) if a == 0]
        if self._sums(direction)[1] != 1:  # (the normalised Q-mass, as :meth:`_normalised_atoms`)
            r = sum((qb for a, qb in zip(p, self._distributions(direction)[1]) if a == 0), Fraction(0))
            m = mpmath.mpf(r.numerator) / r.denominator
            return m, (mpf_err(m, bits=2) if r else mpmath.mpf(0))
        s = mpmath.fsum(mpmath.mpf(b) for b in terms)
        return s, _sum_err(s, terms)


@dataclass(frozen=True)
class Profile(AtomMechanism):
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

    family = "profile"
    list_keys = ("eps", "delta")
    relation = "any: each (eps_j, delta_j) guarantee holds for every pair of neighbours the user's relation admits"

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
        # and the slopes -e^{+-eps_j} must stay apart: e^eps - e^-eps ~ 2 eps, so as many more
        # bits as eps_j is below 1 (else a tiny eps_j's two lines merge with each other or with
        # eps = 0's, and its pair of atoms at +-eps_j loses the 1/2 - eps/4 split: delta(0)
        # reported as eps instead of tanh(eps/2), found by the domain sweep at eps 1e-98)
        tiny = max((-math.frexp(e)[1] for e, _ in self.guarantees if e > 0), default=0)
        with mpmath.workprec(prec + 64 + max(0, below) + max(0, tiny)):
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

    def _neg_q(self, direction):
        _, inf_mass, inf_err = self._atoms(direction)
        return inf_mass, inf_err  # f is symmetric: Q's mass at -inf mirrors P's at +inf

    @classmethod
    def spec_keys(cls) -> list[str]:
        return ["eps", "delta"]

    @classmethod
    def from_spec(cls, values: dict):
        """``eps`` and ``delta``: equally long lists (delta 0 for every eps by default)."""
        eps, delta = values.get("eps"), values.get("delta")
        if eps is None:
            raise ValueError("profile needs eps=E1/E2/.. (and delta=D1/D2/.., one per eps; default 0)")
        eps = list(eps) if isinstance(eps, (list, tuple)) else [eps]
        delta = [0.0] * len(eps) if delta is None else (list(delta) if isinstance(delta, (list, tuple)) else [delta])
        if len(delta) != len(eps):
            raise ValueError(f"profile: delta has {len(delta)} values but eps has {len(eps)}")
        return cls(list(zip(eps, delta)))

    def spec_values(self) -> dict:
        return {"eps": tuple(e for e, _ in self.guarantees), "delta": tuple(d for _, d in self.guarantees)}

    def black_box(self):
        """One guarantee: the dominating pair of a black box (eps, delta)."""
        return self.guarantees[0] if len(self.guarantees) == 1 else None
