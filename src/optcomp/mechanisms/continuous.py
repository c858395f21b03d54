"""The mechanisms whose privacy loss law has a continuous part: Laplace and Gaussian.

Each gives its closed-form profile, its support, vectorised certified masses of the loss on
any intervals under P and under Q, its point masses and its tails; the
:class:`~optcomp._laws.CellLaw` on the engine's lattice comes from
:class:`~optcomp.mechanisms._base.CellMechanism`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import mpmath
import numpy as np

from .._laws import FORWARD, Points
from .._pairs import mpf_err
from .._rounding import mpf_exact
from ._base import CellMechanism, _atom, _mp, _real


_TRUNCATE_A = 1000  # beyond this loss parameter a Laplace law's support starts at its tail
_FAR_Z = 10**6  # beyond this many standard deviations the Gaussian profile's terms are bounded, not evaluated
_SERIES_MU = 2.0**-20  # below this mu the Gaussian profile takes the series of _small_mu_delta
_CRAMER = mpmath.mpf("1.0865")  # Cramér: |He_n(t)| e^{-t^2/4} <= 1.086435 sqrt(n!) for every real t


def _small_mu_delta(mu, x, b):
    """(value, error) of the Gaussian profile Phi(a) - e^x Phi(b) (a = b + mu) at mu < 2^-20,
    or None where the series' remainder is not below the working precision.

    The direct form loses every digit to cancellation at mu = 1e-135 (Phi(a) - Phi(b) ~ mu
    phi), and its decisions then need ~1000 bits (3-10 s a search).  Instead
    delta = I - expm1(x) Phi(b) with I = Phi(a) - Phi(b) = int_{m-w}^{m+w} phi, m = -x/mu,
    w = mu/2, by Taylor's theorem at m: I = 2 phi(m) sum_{n<4} He_{2n}(m) w^{2n+1}/(2n+1)!
    + R, |R| <= max |phi^{(8)}| 2 w^9/9! on [m - w, m + w], with |phi^{(8)}(t)| = |He_8(t)|
    phi(t) <= C sqrt(8!) e^{-t^2/4}/sqrt(2 pi) (Cramér).  Errors charged: R; the terms'
    rounding (the Hermite polynomials' by their absolute coefficients); m's rounding
    (2^-prec |m|) through |dI/dm| = |phi(m + w) - phi(m - w)| <= 2 w (|m| + w) phi(|m| - w);
    b's through expm1(x) phi(b); and mu's through d delta/d mu = phi(a) <= 1 (exact: e^x
    phi(b) = phi(a))."""
    w = mu / 2
    m = -x / mu
    m2 = m * m
    he = (mpmath.mpf(1), m2 - 1, (m2 - 6) * m2 + 3, ((m2 - 15) * m2 + 45) * m2 - 15)
    he_abs = (mpmath.mpf(1), m2 + 1, (m2 + 6) * m2 + 3, ((m2 + 15) * m2 + 45) * m2 + 15)
    pm = mpmath.npdf(m)
    w2 = w * w
    terms, mags, wp = mpmath.mpf(0), mpmath.mpf(0), w
    for n in range(4):
        c = wp / mpmath.factorial(2 * n + 1)
        terms += he[n] * c
        mags += he_abs[n] * c
        wp *= w2
    main = 2 * pm * terms
    t = max(abs(m) - w, mpmath.mpf(0))
    rem = _CRAMER * mpmath.sqrt(mpmath.factorial(8)) * mpmath.exp(-t * t / 4) / mpmath.sqrt(2 * mpmath.pi) \
        * 2 * wp / mpmath.factorial(9)
    if not rem <= main * mpmath.ldexp(1, -mpmath.mp.prec):
        return None
    nb = mpmath.ncdf(b)
    em = mpmath.expm1(x)
    second = em * nb
    v = main - second
    err = rem + mpf_err(main, second, 2 * pm * mags, bits=10) \
        + mpf_err(2 * w * (abs(m) + w) * mpmath.npdf(t) * (abs(m) + 1), bits=8) \
        + mpf_err(abs(em) * mpmath.npdf(b) * (abs(b) + 1), bits=8) + mpf_err(mu * mpmath.npdf(b + mu), bits=10)
    return max(v, mpmath.mpf(0)), err


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

    @cached_property
    def _a(self) -> Fraction:
        """a = sensitivity / scale, exact (kept: every law and bound reads it, often)."""
        return Fraction(self.sensitivity) / Fraction(self.scale)

    @cached_property
    def _beyond_floats(self) -> bool:
        """a exceeds the largest float by more than half its ulp: every loss below a − 1500
        carries P-mass e^{-750}... and every float x lies below a − 2^969."""
        from ._base import _FLOAT_EDGE

        return self._a > _FLOAT_EDGE

    @cached_property
    def _truncated(self) -> bool:
        """a > 1000: the atom −a (P-mass e^{−a}/2 < 1e-434, below every float tail) joins the
        lower tail, and the support starts where the tail does (:meth:`_support`)."""
        return self._a > _TRUNCATE_A

    @property
    def kind(self) -> str:
        """``"cells"``; ``"atoms"`` when a lies beyond the float range (its law is then all
        at +inf to within e^{-2^968}: :meth:`law`)."""
        return "atoms" if self._beyond_floats else "cells"

    def _atoms(self, direction):
        """(The finite-law interface of :class:`~optcomp.mechanisms._base.AtomMechanism`, read
        by the exact paths when ``kind`` is ``"atoms"``: a beyond the float range.)  The atom
        +a (P-mass 1/2, exact) and the continuous part on [a - 1488, a] as one atom of
        position a - 744 +- 744 and P-mass 1/2 within 2^-1000; the P-mass below a - 1488,
        e^{-744}/2 < 2^-1000, at +inf (upper side only).  Every position lies beyond the
        floats or straddles their edge (``_base._law_from`` counts the first at +inf on both
        sides, the second on the upper side), and a subsampled Laplace maps them through g
        as finite losses (an eps_g beyond the floats, not unattainable)."""
        if not self._beyond_floats:
            raise AttributeError("_atoms: a Laplace law within the float range has a continuous part")
        a = self._a
        half = mpmath.mpf(1) / 2
        tiny = mpmath.ldexp(1, -1001)
        mid = _mp(a - 744)
        return ([_atom(a, half, mpmath.mpf(0)), (None, mid, 744 + mpf_err(mid, bits=2), half, 2 * tiny)],
                tiny, tiny)

    def _neg_q(self, direction):
        """The Q-mass at loss -inf of a beyond the float range (read by a mixture: a subsampled
        Laplace): Q-mass 1 within 2^-1000 at -a, which lies beyond every float (the mirror of
        :meth:`_atoms`' P-mass at +inf; a position e^{-a} from log(1 - s) once subsampled)."""
        if not self._beyond_floats:
            raise AttributeError("_neg_q: a Laplace law within the float range has a continuous part")
        return mpmath.mpf(1), mpmath.ldexp(1, -1000)

    def law(self, h, direction: str = "forward", *, tail=None, max_atoms=None):
        """The cell law on the lattice h Z (:class:`~optcomp.mechanisms._base.CellMechanism`);
        when a lies beyond the float range, an :class:`~optcomp._laws.AtomLaw` with no finite
        atom and P-mass in [1 − 2^-52, 1] at +inf: P[L <= max float] = e^{(max float − a)/2}/2
        < e^{-2^968}, and a loss beyond the float range exceeds every float x by more than
        2^969 (so it counts as +inf on the lower side too, see ``_base._law_from``)."""
        from .._laws import MAX_ATOMS, TAIL, AtomLaw

        tail = TAIL if tail is None else tail
        max_atoms = MAX_ATOMS if max_atoms is None else max_atoms
        if self._beyond_floats:
            from ._base import _law_args

            _, direction, _, _ = _law_args(h, direction, tail, max_atoms)
            e = np.zeros(0)
            return AtomLaw(direction, e, e, e, e, 1.0 - 2.0**-52, 1.0, beyond_lo=1.0 - 2.0**-52)
        return super().law(h, direction, tail=tail, max_atoms=max_atoms)

    def variance(self) -> float:
        """The noise variance 2b² (nearest float)."""
        return 2.0 * self.scale * self.scale

    def _delta_mp(self, x, direction):
        a = self._a
        if mpf_exact(mpmath.mpf(x)) >= a:  # exact: x may carry more bits than a float
            return mpmath.mpf(0), mpmath.mpf(0)
        am = _mp(a)
        v = -mpmath.expm1((x - am) / 2)
        return v, mpf_err(v, x, am)

    def _continuous(self, tail):
        """(lo_loss, hi_loss, cell masses, tails, point atoms) of the loss law under P."""
        a = self._a
        lo_s, hi_s = self._support(FORWARD, tail)

        def masses(edges):
            # m = e^{x1} (1 - e^{-x2})/2 with x1 = (hi - a)/2 and x2 = (hi - lo)/2 formed exactly
            # and rounded once (at a = 1e100 the differences of rounded edges cancel every
            # digit): exp moves m by |x1| 2^-prec relative, 1 - e^{-x2} by 2^-prec
            out = []
            for e0, e1 in zip(edges[:-1], edges[1:]):
                lo_, hi_ = max(e0, -a), min(e1, a)
                if hi_ <= lo_:
                    out.append((mpmath.mpf(0), mpmath.mpf(0)))
                    continue
                x1, x2 = _mp((hi_ - a) / 2), _mp((hi_ - lo_) / 2)
                m = mpmath.exp(x1) * -mpmath.expm1(-x2) / 2
                out.append((m, mpf_err(m * (abs(x1) + 4))))
            return out

        zero = (mpmath.mpf(0), mpmath.mpf(0))
        if self._truncated:
            # the support [a - W, a] of :meth:`_support`: the atom -a joins the tail below,
            # P[L < e0] = e^{(e0 - a)/2}/2 (e0 <= a - W); nothing lies above a
            def tails(e0, e1):
                x = _mp((Fraction(e0) - a) / 2)
                below = mpmath.exp(x) / 2
                return (below, mpf_err(below * (abs(x) + 4))), zero

            return lo_s, hi_s, masses, tails, [(a, mpmath.mpf(1) / 2, mpmath.mpf(0))]
        # the cells cover the continuous part; the atoms at ±a are placed exactly
        with mpmath.workprec(128):
            am = _mp(a)
            atoms = [(a, mpmath.mpf(1) / 2, mpmath.mpf(0)), (-a, mpmath.exp(-am) / 2, mpf_err(mpmath.exp(-am), am))]
        return -a, a, masses, lambda e0, e1: (zero, zero), atoms

    def _support(self, direction, tail):
        """[-a, a]; for a > 1000, [a - W, a] with W = 2 ceil(log(1/(2 tail))): the P-mass below
        a - W, the atom -a included, is e^{-W/2}/2 <= tail (:meth:`_tails` charges it)."""
        a = self._a
        if not self._truncated:
            return -a, a
        w = 2 * math.ceil(-math.log(tail) - math.log(2.0) + 1e-9)  # (1/(2 tail) overflows at tail 2^-1074)
        return max(a - w, -a), a

    def loss_range(self, direction: str = "forward", *, tail=None) -> tuple[float, float]:
        """The support's ends rounded outward exactly (:meth:`_support`: (-a, a), the atoms
        +-a its ends; (a - W, a) for a > 1000)."""
        from .._laws import TAIL
        from .._rounding import exact_dir

        lo, hi = self._support(direction, TAIL if tail is None else tail)
        return exact_dir(lo, False), exact_dir(hi, True)

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
        """The atoms +a (P-mass 1/2, Q-mass e^{-a}/2) and -a (P-mass e^{-a}/2, Q-mass 1/2; left
        to the lower tail when a > 1000): the same in both directions, built once."""
        return self._point_masses

    @cached_property
    def _point_masses(self):
        a_fr = self._a
        a = float(a_fr)
        u = 2.0**-53
        d = abs(Fraction(a) - a_fr)
        perr = float(d) * (1.0 + 2.0**-50) + (5e-324 if d else 0.0)
        with np.errstate(under="ignore"):
            e_a = math.exp(-a) if a < 745.2 else 0.0
        e_err = e_a * (2.0 * u + 2.0 * u * a) + perr * e_a + (5e-324 if a >= 708.0 else 0.0)
        lo, hi = max(0.0, (e_a - e_err) / 2.0), min(1.0, (e_a + e_err) / 2.0)
        if self._truncated:
            return Points([a], [perr], [0.5], [0.5], [lo], [hi])
        return Points([a, -a], [perr, perr], [0.5, lo], [0.5, hi], [lo, 0.5], [hi, 0.5])

    def _tails(self, e0, e1, direction):
        """Nothing above a; below e0 (a > 1000 only) P[L < e0] = e^{(e0 - a)/2}/2, the atom -a
        included (e0 - a formed exactly, rounded up; exp within LIBM_ULPS ulps)."""
        if not self._truncated:
            return 0.0, 0.0  # the support is [-a, a]: nothing outside
        from .._rounding import LIBM_ULPS, exact_dir, up

        y = exact_dir((Fraction(e0) - self._a) / 2, True)
        if y >= 0.0:
            return 1.0, 0.0
        return (min(1.0, up(math.exp(y) / 2.0, LIBM_ULPS)) if y > -745.0 else 5e-324), 0.0


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
        a, b = mu / 2 - x / mu, -mu / 2 - x / mu
        if a < -_FAR_Z:  # (mpmath's erfc refuses such arguments) delta <= Phi(a) <= phi(a)/|a|,
            # which decreases in |a|: taken at |a| <= 2^16 (phi at a ~ -1e621 took mpmath seconds)
            a = max(a, mpmath.mpf(-2**16))
            return mpmath.mpf(0), mpmath.npdf(a) / abs(a)
        if b < -_FAR_Z:  # e^x Phi(b) = phi(a) Phi(b)/phi(b) (e^x phi(b) = phi(a))
            if a < _FAR_Z:
                t1, e1 = mpmath.ncdf(a), mpf_err(mpmath.ncdf(a), bits=10)
            else:  # 1 - phi(a)/a <= Phi(a) <= 1
                t1, e1 = 1 - mpmath.npdf(a) / (2 * a), mpmath.npdf(a) / (2 * a) + mpf_err(1, bits=10)
            # Mills' ratio: 1/t - 1/t^3 < Phi(-t)/phi(t) < 1/t (t = |b| > 0)
            t2_hi = mpmath.npdf(a) / abs(b)
            t2_lo = t2_hi * (1 - 1 / b**2)
            return max(t1 - (t2_hi + t2_lo) / 2, mpmath.mpf(0)), (t2_hi - t2_lo) / 2 + e1 + mpf_err(t2_hi, bits=10)
        if mu < _SERIES_MU:
            series = _small_mu_delta(mu, x, b)
            if series is not None:
                return series
        t1 = mpmath.ncdf(a)
        t2 = mpmath.exp(x) * mpmath.ncdf(b)
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
            """Per edge: z = (e − mean)/mu (formed exactly, then rounded once: at mu = 1e100
            the float sum e − mean would cancel every digit), the density bound φ(z) and the
            tail Φ(−|z|)."""
            r2, c = mpmath.sqrt(2), 1 / mpmath.sqrt(2 * mpmath.pi)
            out = []
            for e in edges:
                z = _mp((Fraction(e) - mean) / mu_f)
                if abs(z) > _FAR_Z:
                    # (mpmath's erfc refuses z ~ 1e155) the tail Phi(-|z|) <= phi(z)/|z|, below
                    # e^{-10^11}, is taken as 0: the density bound phi(2^16) >= phi(z) that every
                    # error term multiplies by |z| and 2^-prec covers it many times over
                    out.append((z, c * mpmath.exp(-mpmath.mpf(2)**31), mpmath.mpf(0)))
                    continue
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
        # (mu beyond ~1e154 or below ~1e-300 -- the base of a Subsampled, composed through its
        # cells -- overflows z, mean or the bound: an infinite bound, the cell bracketed [0, 1])
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            mean = mu * mu / 2.0
            z = (x - mean) / mu
            err = 4.0 * u * (np.abs(z) + np.abs(x) / mu + mu + 1.0)
        bad = ~np.isfinite(err)
        if np.any(bad):
            z = np.where(np.isnan(z), 0.0, z)
            err = np.where(bad, np.inf, err)
        return z, err

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

    def _cell_masses(self, n0, n1, h, e, direction):
        """:meth:`_interval_masses` of the lattice cells, bit for bit, with the work shared: each
        edge's log Phi once (:func:`~optcomp.mechanisms._normal.phi_cells`), and the Q-masses,
        the P-masses of the mirrored cells [-(n + 1) h, -n h] (the float -(n h) is (-n) h
        exactly, so their z are those the mirrored call computes), read from one grid over both
        ranges when it is at most twice as long as one (the loss range [m - t mu, m + t mu]
        and its mirror overlap unless the mean m = mu^2/2 exceeds 2 t mu)."""
        from ._normal import phi_cells

        def cells(a, b):  # P-mass brackets of the cells [n h, (n + 1) h], a <= n < b
            z, ez = self._z(np.arange(a, b + 1, dtype=np.int64).astype(float) * h)
            return phi_cells(z, ez)

        a, b = min(n0, -n1), max(n1, -n0)
        if b - a <= 2 * (n1 - n0):
            lo, hi = cells(a, b)
            p_lo, p_hi = lo[n0 - a:n1 - a], hi[n0 - a:n1 - a]
            q_lo, q_hi = lo[-n1 - a:-n0 - a][::-1], hi[-n1 - a:-n0 - a][::-1]
        else:
            p_lo, p_hi = cells(n0, n1)
            q_lo, q_hi = cells(-n1, -n0)
            q_lo, q_hi = q_lo[::-1], q_hi[::-1]
        return p_lo, p_hi, np.ascontiguousarray(q_lo), np.ascontiguousarray(q_hi)

    def _points(self, direction):
        return Points.none()

    def _tails(self, e0, e1, direction):
        """Upper bounds Phi(z(e0)) below e0 and Phi(-z(e1)) above e1 (positive: a tail below the
        normal range is charged two least floats, never 0)."""
        from scipy.special import log_ndtr

        from .._rounding import log_ndtr_error

        u = 2.0**-53
        (zf, ef), (zl, el) = self._z(np.array([e0])), self._z(np.array([e1]))
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            lf, ll = log_ndtr(zf), log_ndtr(-zl)
            below = float(np.exp(lf + log_ndtr_error(lf) + (np.abs(zf) + 1.0) * ef)[0]) * (1.0 + 8.0 * u) + 1e-323
            above = float(np.exp(ll + log_ndtr_error(ll) + (np.abs(zl) + 1.0) * el)[0]) * (1.0 + 8.0 * u) + 1e-323
        # (an unbounded argument error, :meth:`_z`: the whole mass)
        return (min(below, 1.0) if below == below else 1.0), (min(above, 1.0) if above == above else 1.0)
