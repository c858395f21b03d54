"""The mechanisms with a finite privacy loss law: black boxes, randomized response, the
geometric, staircase and discrete Gaussian mechanisms, finite pairs and privacy profiles.

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
import numpy as np

from .._inputs import ParameterTypeError, _describe, _integer
from .._laws import FORWARD, MAX_ATOMS, TAIL, AtomLaw, Points
from .._pairs import lattice_pair, mpf_err
from .._rounding import LIBM_ULPS, UNIT, down, mpf_exact, up
from .._types import Bounds
from ._base import AtomMechanism, CellMechanism, _atom, _law_args, _mp, _real



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
    worst case the user vouches for).  The masses are used exactly as given (not
    renormalised; they must sum to 1 within 1e-9).

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
            return atoms, inf, _sum_err(inf, [a for a, b in zip(p, q) if b == 0 and a != 0])

    def _atoms(self, direction):
        return self._atoms_at(mpmath.mp.prec, direction)

    def _neg_q(self, direction):
        p, q = (self.p, self.q) if direction == "forward" else (self.q, self.p)
        terms = [b for a, b in zip(p, q) if a == 0]
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




DIRECT_SIGMA = 16.0  # up to this sigma the discrete Gaussian's atoms are summed in mpmath (exact positions)
CELL_SIGMA = 2.0**12  # beyond it the law is given as cells of the engine's lattice (closed-form masses)
_PROFILE_BITS = 1100  # the profile's window leaves out at most 2^-1100 of mass (charged)


@dataclass(frozen=True)
class DiscreteGaussian(AtomMechanism):
    """The discrete Gaussian mechanism (Canonne, Kamath and Steinke, NeurIPS 2020): integer
    noise Z with P[Z = z] ∝ e^{−z²/(2 sigma²)}, added to an integer query of sensitivity Δ
    (a positive integer).

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction; z ↦ Δ − z
    swaps them): the outcome z has P-mass e^{−z²/(2 sigma²)}/Z_sigma and loss
    Δ(Δ − 2z)/(2 sigma²).  Profile: delta(x) = Σ_z P(z)(1 − e^{x − L(z)})_+.

    Three regimes, every one certified (any sigma > 0 is supported):

    * sigma <= 16: the outcomes of a window |z| <= W are summed in mpmath, positions exact
      rationals; the mass beyond W (at most the requested tail) is charged -- to +inf above
      the window, onto the lowest atom below it;
    * 16 < sigma <= 2^12: the same window in vectorised floats (masses and positions with
      proved relative errors of ~1e-13: exp within LIBM_ULPS, its argument within a few
      ulps);
    * sigma > 2^12: the law is given as cells of the engine's lattice (``kind`` is
      ``"cells"``): the P-mass of the integers z in a cell is a sum of the kernel over an
      integer range, sigma sqrt(2 pi)(Phi((b + 1/2)/sigma) − Phi((a − 1/2)/sigma)) within the
      midpoint rule's relative error max(1, u²)/(24 sigma²) (u = the range's largest |z|/sigma;
      at most 3.4e-6 at sigma = 2^12, in the window's far tail), normalised by Z = sigma sqrt(2 pi) (1 + η), 0 <= η <=
      3 e^{−2 pi² sigma²} (Poisson summation).

    The profile beyond sigma = 16 is (S(m) − e^x S(m − Δ))/Z, m the largest z with L(z) > x,
    S(k) = Σ_{z <= k} e^{−z²/(2 sigma²)} by Euler--Maclaurin with a proved remainder
    (:func:`optcomp.mechanisms._normal.kernel_sum`), 2^-64 relative like every profile."""

    family = "discrete_gaussian"
    noise_parameter = "sigma"

    @classmethod
    def with_privacy(cls, x, sensitivity):
        return cls(sensitivity / x, sensitivity)
    relation = "integer query outputs differing by at most the sensitivity"

    sigma: float
    sensitivity: int = 1

    def __post_init__(self):
        object.__setattr__(self, "sigma", _real("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", _integer("sensitivity", self.sensitivity, 1, 2**20))

    @property
    def kind(self) -> str:
        """``"cells"`` beyond sigma = 2^12 (the law given on the engine's lattice), else
        ``"atoms"``."""
        return "cells" if self.sigma > CELL_SIGMA else "atoms"

    # -- the window of outcomes ------------------------------------------------------------
    def _window(self, bits: float) -> int:
        """W with P[|Z| > W] <= 2^-bits: sum_{z > W} f(z) <= f(W + 1)(1 + sigma²/(W + 1)) and
        Z >= 1 (its term z = 0), so f(W + 1) <= 2^-bits/(2 (1 + sigma)) suffices."""
        lam = bits * math.log(2.0) + math.log(2.0 * (1.0 + self.sigma))
        return int(math.ceil(self.sigma * math.sqrt(2.0 * lam))) + self.sensitivity + 1

    @staticmethod
    def _bits(tail: float) -> float:
        return min(-math.log2(tail) if tail > 0.0 else 1100.0, 1100.0)

    @lru_cache(maxsize=16)
    def _atoms_at(self, prec, direction, w=None):
        if w is None:
            w = self._window(_PROFILE_BITS)
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

    def law(self, h=1.0, direction: str = FORWARD, *, tail=TAIL, max_atoms=MAX_ATOMS):
        """The law of ``direction`` (both alike): atoms of the window leaving out at most
        ``tail`` of P-mass (charged), or -- sigma > 2^12 -- cells on the lattice h Z."""
        h, direction, tail, max_atoms = _law_args(h, direction, tail, max_atoms)
        if self.kind == "cells":
            return CellMechanism.law(self, h, direction, tail=tail, max_atoms=max_atoms)
        w = self._window(self._bits(tail))
        if 2 * w + 1 > max_atoms:
            raise ValueError(f"{2 * w + 1} atoms exceed max_atoms={max_atoms}")
        if self.sigma <= DIRECT_SIGMA:
            return self._law_from(self._atoms_at(192, direction, w), direction)
        return self._float_law(direction, w)

    # -- 16 < sigma <= 2^12: vectorised floats --------------------------------------------------
    def _float_terms(self, w: int):
        """(z, t, t_err, tail): the kernel t = e^{-z²/(2 sigma²)} on |z| <= w in floats with a
        bound of each one's error (z² exact below 2^53; z²/(2 sigma²) within 2.01u relative,
        exp within LIBM_ULPS ulps: relative (2.01 q + 2 LIBM_ULPS) u, plus 2^-1074 for a
        subnormal result), and a bound of the kernel's sum over z > w (each side)."""
        z = np.arange(-w, w + 1, dtype=np.int64)
        s2 = 2.0 * self.sigma * self.sigma
        q = (z.astype(float) ** 2) / s2
        with np.errstate(under="ignore"):
            t = np.exp(-q)
        t_err = t * (2.02 * q + 2.0 * LIBM_ULPS + 2.0) * UNIT + 5e-324
        tail = math.exp(_normal_log_tail(w + 1, self.sigma)) if w + 1 > 0 else 1.0
        return z, t, t_err, tail

    def _float_norm(self, t, t_err, tail) -> tuple[float, float]:
        """(Z_lo, Z_hi) around Z = sum over all integers of the kernel (fsum is correctly
        rounded: one ulp outward bounds each sum)."""
        s, e = math.fsum(t.tolist()), math.fsum(t_err.tolist())
        z_lo = down(down(s, 1) - up(e, 1), 1)
        z_hi = up(up(s, 1) + up(e, 1) + 2.0 * tail * (1.0 + 2.0 * UNIT), 2)
        return max(z_lo, 1.0), z_hi  # Z >= 1: its term z = 0

    def _float_law(self, direction, w):
        z, t, t_err, tail = self._float_terms(w)
        z_lo, z_hi = self._float_norm(t, t_err, tail)
        p_hi = np.minimum(np.nextafter((t + t_err) / z_lo * (1.0 + 2.0 * UNIT), 2.0), 1.0)
        p_lo = np.maximum(np.nextafter((t - t_err) / z_hi * (1.0 - 2.0 * UNIT), -1.0), 0.0)
        dl = self.sensitivity
        s2 = 2.0 * self.sigma * self.sigma
        num = (dl * (dl - 2 * z)).astype(float)  # exact integers below 2^53
        loss = num / s2
        perr = 2.02 * UNIT * np.abs(loss) + 5e-324  # s2 and the quotient each rounded once
        beyond = up(tail / z_lo * (1.0 + 2.0 * UNIT), 1)
        p_hi[-1] = min(1.0, up(p_hi[-1] + beyond, 1))  # z > w: below the lowest atom, raised onto it
        return AtomLaw(direction, loss[::-1], perr[::-1], p_lo[::-1], p_hi[::-1], 0.0, min(beyond, 1.0))

    # -- sigma > 2^12: cells ----------------------------------------------------------------
    def _loss_of(self, z) -> Fraction:
        return Fraction(self.sensitivity * (self.sensitivity - 2 * z)) / (2 * Fraction(self.sigma) ** 2)

    def _support(self, direction, tail):
        w = self._window(self._bits(tail))
        return self._loss_of(w), self._loss_of(-w)

    def _z_floor(self, edges) -> list[int]:
        """floor(Δ/2 − l σ²/Δ) for exact float edges l (L(z) >= l <=> z <= that), in integers."""
        dl = self.sensitivity
        sn, sd = (Fraction(self.sigma) ** 2).as_integer_ratio()
        out = []
        for e in edges:
            en, ed = float(e).as_integer_ratio()
            out.append((dl * dl * ed * sd - 2 * en * sn) // (2 * dl * ed * sd))
        return out

    def _range_masses(self, a: list, b: list):
        """Certified (lo, hi) of sum_{z=a}^{b} e^{-z²/(2σ²)}/Z (lists of Python integers; a > b:
        empty): the midpoint rule sum = I (1 + θ), |θ| <= c = 1.01 max(1, u²)/(24 σ²), I =
        σ sqrt(2π) (Phi((b + 1/2)/σ) − Phi((a − 1/2)/σ)), over Z = σ sqrt(2π)(1 + η).  The
        standardised ends are formed exactly (rationals) and rounded once (within u of
        themselves); beyond 10^6 they are clipped there (Phi moves by < 2^-10^11: the upper
        end adds 5e-324)."""
        from ._normal import phi_interval

        sig = Fraction(self.sigma)

        def std(v: Fraction) -> float:
            return float(max(min(v / sig, Fraction(10**6)), Fraction(-10**6)))

        za = np.array([std(Fraction(2 * v - 1, 2)) for v in a])
        zb = np.array([std(Fraction(2 * v + 1, 2)) for v in b])
        ea = 2.0 * UNIT * np.abs(za) + 5e-324
        eb = 2.0 * UNIT * np.abs(zb) + 5e-324
        i_lo, i_hi = phi_interval(za, ea, zb, eb)
        u = np.maximum(np.abs(za), np.abs(zb)) + 1.0 / self.sigma
        c = 1.01 * np.maximum(1.0, u * u) / (24.0 * self.sigma * self.sigma) * (1.0 + 4.0 * UNIT)
        lo = i_lo / (1.0 + c) * (1.0 - 4.0 * UNIT)
        hi = np.minimum(i_hi / (1.0 - c) * (1.0 + 4.0 * UNIT) + 5e-324, 1.0)
        empty = np.array([x > y for x, y in zip(a, b)], dtype=bool)
        return np.where(empty, 0.0, np.maximum(lo, 0.0)), np.where(empty, 0.0, hi)

    def _interval_masses(self, l0, l1, direction):
        """P- and Q-masses of the outcomes with loss in [l0, l1) (half-open: each atom counted
        once): the integers z in (floor(zc(l1)), floor(zc(l0))], zc(l) = Δ/2 − l σ²/Δ; under Q
        the same integers shifted by −Δ (Q(z) = f(z − Δ)/Z)."""
        l0, l1 = np.asarray(l0, float), np.asarray(l1, float)
        b = self._z_floor(l0.tolist())
        a = [v + 1 for v in self._z_floor(l1.tolist())]
        p_lo, p_hi = self._range_masses(a, b)
        dl = self.sensitivity
        q_lo, q_hi = self._range_masses([v - dl for v in a], [v - dl for v in b])
        return p_lo, p_hi, q_lo, q_hi

    def _points(self, direction):
        return Points.none()

    def _tails(self, e0, e1, direction):
        """Upper bounds of the P-mass with loss < e0 (z > zc(e0)) and >= e1 (z <= zc(e1): the
        last cell is half-open), by :func:`_normal_log_tail` (symmetric kernel, Z >= σ sqrt(2π))."""
        (k_hi,), (k_lo,) = self._z_floor([e0]), self._z_floor([e1])
        norm = math.log(self.sigma * math.sqrt(2.0 * math.pi))

        def mass(k):  # sum_{z >= k} f(z)/Z, k an integer
            if k <= 0:
                return 1.0
            return min(1.0, up(math.exp(min(_normal_log_tail(k, self.sigma) - norm, 0.0)), 4))

        return mass(k_hi + 1), mass(-k_lo)

    def _continuous(self, tail):
        """The cell law in mpmath (for :meth:`discrete_pair`): masses S(b) - S(a - 1) over Z."""
        from ._normal import kernel_sum, kernel_total

        lo_loss, hi_loss = self._support(FORWARD, tail)

        def masses(edges):
            zs = [int(v) for v in self._z_floor(edges)]
            zt, zt_err = kernel_total(self.sigma)
            s = [kernel_sum(k, self.sigma) for k in zs]
            out = []
            for (s0, e0), (s1, e1) in zip(s[1:], s[:-1]):  # z in (zc(next edge), zc(edge)]
                m = (s1 - s0) / zt
                out.append((max(m, mpmath.mpf(0)), (e0 + e1) / zt + abs(m) * zt_err / zt + mpf_err(m, s1)))
            return out

        def tails(e0, e1):
            zt, zt_err = kernel_total(self.sigma)
            (k_hi,), (k_lo,) = self._z_floor([e0]), self._z_floor([e1])
            below, b_err = kernel_sum(-int(k_hi) - 1, self.sigma)  # z > k_hi, by symmetry
            above, a_err = kernel_sum(int(k_lo), self.sigma)
            return ((below / zt, (b_err + below * zt_err / zt) / zt + mpf_err(below)),
                    (above / zt, (a_err + above * zt_err / zt) / zt + mpf_err(above)))

        return lo_loss, hi_loss, masses, tails, ()

    # -- the profile, the discrete pairs, the range ------------------------------------------------
    def _delta_mp(self, x, direction):
        if self.sigma <= DIRECT_SIGMA:
            return AtomMechanism._delta_mp(self, x, direction)
        from ._normal import kernel_sum, kernel_total

        c = Fraction(self.sensitivity, 2) - Fraction(self.sigma) ** 2 * mpf_exact(x) / self.sensitivity
        m = math.ceil(c) - 1
        s1, e1 = kernel_sum(m, self.sigma)
        s0, e0 = kernel_sum(m - self.sensitivity, self.sigma)
        zt, zt_err = kernel_total(self.sigma)
        ex = mpmath.exp(x)
        v = (s1 - ex * s0) / zt
        err = (e1 + ex * e0) / zt + abs(v) * zt_err / zt + mpf_err(s1 / zt, ex * s0 / zt, v, bits=8)
        return max(v, mpmath.mpf(0)), err

    def _pair(self, h, side, direction, tail, max_atoms):
        if self.kind == "cells":
            return CellMechanism._pair(self, h, side, direction, tail, max_atoms)
        if self.sigma <= DIRECT_SIGMA:
            return super()._pair(h, side, direction, tail, max_atoms)
        law = self.law(h, direction, tail=tail, max_atoms=max_atoms)
        up_side = side == "upper"
        pos = law.loss + law.perr if up_side else law.loss - law.perr
        idx = np.ceil(pos / h) if up_side else np.floor(pos / h)
        # a float quotient may round across an integer: one more step outward is still safe
        idx = (idx + (1 if up_side else -1)).astype(np.int64)
        return lattice_pair(h, side, idx, law.p_lo, law.p_hi, law.inf_lo, law.inf_hi)

    def loss_range(self, direction: str = FORWARD, *, tail=TAIL) -> tuple[float, float]:
        if self.kind == "cells":
            return CellMechanism.loss_range(self, direction, tail=tail)
        law = self.law(1.0, direction, tail=tail)
        return law.bottom(), law.top()


def _normal_log_tail(k: int, sigma: float) -> float:
    """:func:`optcomp.mechanisms._normal.log_kernel_tail` at the integer k >= 0 (k/sigma
    formed in rationals, rounded down, clipped at 10^6)."""
    from .._rounding import exact_dir
    from ._normal import log_kernel_tail

    u = min(exact_dir(Fraction(k) / Fraction(sigma), False), 1e6)
    return log_kernel_tail(u, sigma)
