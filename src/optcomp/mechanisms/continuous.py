"""The mechanisms whose privacy loss law has a continuous part: Laplace and Gaussian.

Each gives its closed-form profile, its support, vectorised certified masses of the loss on
any intervals under P and under Q, its point masses and its tails; the
:class:`~optcomp._laws.CellLaw` on the engine's lattice comes from
:class:`~optcomp.mechanisms._base.CellMechanism`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np

from .._laws import Points
from .._pairs import mpf_err
from ._base import CellMechanism, _mp, _real


@dataclass(frozen=True)
class Laplace(CellMechanism):
    """The Laplace mechanism (Dwork–McSherry–Nissim–Smith 2006): noise of density
    e^{−|z|/b}/(2b), b = ``scale``, added to a real query of sensitivity Δ; (Δ/b)-DP.

    Neighbouring relation: query outputs differing by Δ.  PLD (either direction), a = Δ/b:
    an atom +a of mass 1/2, an atom −a of mass e^{−a}/2 and density e^{(l − a)/2}/4 on
    (−a, a); P[L > l] = 1 − e^{(l − a)/2}/2 there.
    Profile: delta(x) = 1 − e^{(x − a)/2} for 0 ≤ x < a, 0 for x ≥ a."""

    family = "laplace"
    noise_parameter = "scale"

    @classmethod
    def with_privacy(cls, x, sensitivity):
        return cls(sensitivity / x, sensitivity)
    relation = "real query outputs differing by at most the sensitivity"

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

    def _support(self, direction, tail):
        return -self._a, self._a

    def loss_range(self, direction: str = "forward", *, tail=None) -> tuple[float, float]:
        """(-a, a) rounded outward exactly: the atoms +-a are the ends of the law."""
        from .._rounding import exact_dir

        return exact_dir(-self._a, False), exact_dir(self._a, True)

    def _interval_masses(self, l0, l1, direction):
        """Vectorised in floats (the mpmath path costs ~50 us a cell).  P-mass of [l0, l1]:
        F(hi) - F(lo) with F(l) = e^{(l - a)/2}/2, lo = max(l0, -a), hi = min(l1, a),
        evaluated as e^{(hi - a)/2} (1 - e^{-(hi - lo)/2})/2 with the float a_f
        (|a_f - a| <= u a).  Error: exp and expm1 within 1 ulp (``_rounding``'s libm
        assumption), their arguments within u (|hi| + a_f) + |a_f - a|/2, so a relative
        u (4 (|hi| + a_f) + 16); the clipped edges and a itself move by <= u a, at density
        <= 1/4 and dF/da = -F/2: an absolute u a (1/2 + m).  Q-mass: the law is symmetric,
        Q[L in [l0, l1]] = P[L in [-l1, -l0]] (both directions alike)."""
        a = float(self._a)
        u = 2.0**-53

        def masses(x0, x1):
            lo, hi = np.maximum(x0, -a), np.minimum(x1, a)
            ok = hi > lo
            with np.errstate(under="ignore"):
                m = np.where(ok, np.exp((hi - a) / 2.0) * -np.expm1(-(hi - lo) / 2.0) / 2.0, 0.0)
            err = m * u * (4.0 * (np.abs(hi) + a) + 16.0) + u * a * (0.5 + m) + np.where(ok, 5e-324, 0.0)
            return np.maximum(m - err, 0.0), np.minimum(m + err, 1.0)

        l0, l1 = np.asarray(l0, float), np.asarray(l1, float)
        return (*masses(l0, l1), *masses(-l1, -l0))

    def _points(self, direction):
        """The atoms +a (P-mass 1/2, Q-mass e^{-a}/2) and -a (P-mass e^{-a}/2, Q-mass 1/2)."""
        a_fr = self._a
        a = float(a_fr)
        u = 2.0**-53
        d = abs(Fraction(a) - a_fr)
        perr = float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0)
        e_a = math.exp(-a)
        e_err = e_a * (2.0 * u + 2.0 * u * a) + perr * e_a  # exp within 1 ulp, a within perr
        lo, hi = max(0.0, (e_a - e_err) / 2.0), min(1.0, (e_a + e_err) / 2.0)
        return Points([a, -a], [perr, perr], [0.5, lo], [0.5, hi], [lo, 0.5], [hi, 0.5])

    def _tails(self, e0, e1, direction):
        return 0.0, 0.0  # the support is [-a, a]: nothing outside


@dataclass(frozen=True)
class Gaussian(CellMechanism):
    """The Gaussian mechanism: noise N(0, sigma²) added to a real (or vector, ℓ2) query of
    sensitivity Δ.

    Neighbouring relation: query outputs Δ apart (ℓ2).  PLD (either direction), mu = Δ/sigma:
    L ~ N(mu²/2, mu²).  Profile (the analytic Gaussian mechanism, Balle and Wang, ICML 2018,
    Thm. 8; mu-GDP of Dong–Roth–Su): delta(x) = Φ(mu/2 − x/mu) − e^x Φ(−mu/2 − x/mu),
    evaluated in mpmath with its cancellation charged and the precision raised until the
    bracket is tight."""

    family = "gaussian"
    noise_parameter = "sigma"

    @classmethod
    def with_privacy(cls, x, sensitivity):
        return cls(sensitivity / x, sensitivity)
    relation = "real or vector query outputs at most the sensitivity apart (l2)"

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

    def gaussian(self):
        return (self.sigma, self.sensitivity)

    def _support(self, direction, tail):
        return self._continuous(tail)[:2]

    def _z(self, x):
        """z = (l - mu^2/2)/mu of float losses, with a bound of its rounding error."""
        u = 2.0**-53
        mu = float(Fraction(self.sensitivity) / Fraction(self.sigma))
        mean = mu * mu / 2.0
        z = (x - mean) / mu
        return z, 4.0 * u * (np.abs(z) + np.abs(x) / mu + mu + 1.0)

    def _interval_masses(self, l0, l1, direction):
        """Vectorised in floats (the mpmath path costs ~250 us an edge).  In z = (l -
        mu^2/2)/mu units a cell is Phi(z1) - Phi(z0), certified by
        :func:`optcomp.mechanisms._normal.phi_interval` (log_ndtr, SPECIAL_ABS, the
        arguments' rounding eps_z <= 4u(|z| + |l|/mu + mu + 1) charged through the slope).
        Q-mass: the law is symmetric, Q[L in [l0, l1]] = P[L in [-l1, -l0]] (both
        directions alike)."""
        from ._normal import phi_interval

        def masses(x0, x1):
            z0, e0 = self._z(x0)
            z1, e1 = self._z(x1)
            return phi_interval(z0, e0, z1, e1)

        l0, l1 = np.asarray(l0, float), np.asarray(l1, float)
        return (*masses(l0, l1), *masses(-l1, -l0))

    def _points(self, direction):
        return Points.none()

    def _tails(self, e0, e1, direction):
        """Upper bounds Phi(z(e0)) below e0 and Phi(-z(e1)) above e1."""
        from scipy.special import log_ndtr

        from .._rounding import SPECIAL_ABS

        u = 2.0**-53
        (zf, ef), (zl, el) = self._z(np.array([e0])), self._z(np.array([e1]))
        with np.errstate(over="ignore", under="ignore"):
            below = float(np.exp(log_ndtr(zf) + SPECIAL_ABS + (np.abs(zf) + 1.0) * ef)[0]) * (1.0 + 8.0 * u)
            above = float(np.exp(log_ndtr(-zl) + SPECIAL_ABS + (np.abs(zl) + 1.0) * el)[0]) * (1.0 + 8.0 * u)
        return min(below, 1.0), min(above, 1.0)
