"""The discrete Gaussian mechanism (Canonne, Kamath and Steinke, NeurIPS 2020), for every
sigma > 0: its finite law summed directly (small sigma), in vectorised floats (moderate
sigma) or as cells of the engine's lattice (large sigma), and its profile by direct sums or
Euler--Maclaurin (:mod:`optcomp.mechanisms._normal`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import mpmath
import numpy as np

from .._inputs import _integer
from .._laws import FORWARD, MAX_ATOMS, TAIL, AtomLaw, Points
from .._pairs import mpf_err
from .._rounding import LIBM_ULPS, UNIT, down, mpf_exact, up
from ._base import AtomMechanism, CellMechanism, _atom, _law_args, _mp, _real

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

    Every sigma > 0 is supported, certified:

    * sigma <= 16: the outcomes of a window |z| <= W are summed in mpmath, positions exact
      rationals; the mass beyond W (at most the requested tail) is charged -- to +inf above
      the window, onto the lowest atom below it;
    * sigma > 16: the law is given as cells of the engine's lattice (``kind`` is
      ``"cells"``; each cell holds the outcomes z of an integer range).  Up to sigma = 2^12
      a cell's P- and Q-masses are direct sums of the window's kernel in vectorised floats
      (each term within ~1e-13 relative: exp within LIBM_ULPS ulps, its argument within a
      few ulps; the sums' rounding charged); beyond, the kernel's sum over an integer range
      is sigma sqrt(2 pi)(Phi((b + 1/2)/sigma) − Phi((a − 1/2)/sigma)) within the midpoint
      rule's relative error max(1, u²)/(24 sigma²) (u = the range's largest |z|/sigma; at
      most 3.4e-6 at sigma = 2^12, in the window's far tail), normalised by Z = sigma
      sqrt(2 pi) (1 + η), 0 <= η <= 3 e^{−2 pi² sigma²} (Poisson summation).

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
        """``"atoms"`` up to sigma = 16, ``"cells"`` beyond (the law given on the engine's
        lattice: thousands of atoms compose better as cells, and the exact paths of finite
        laws leave it to the lattice)."""
        return "cells" if self.sigma > DIRECT_SIGMA else "atoms"

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
        return self._law_from(self._atoms_at(192, direction, w), direction)

    # -- 16 < sigma <= 2^12: the window's kernel in vectorised floats ----------------------------
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

    @lru_cache(maxsize=4)
    def _window_sums(self):
        """(W, kernel, its errors, Z_lo, Z_hi, beyond) of :meth:`_float_terms` over the
        profile's window (2^-1100 of mass beyond it), with ``beyond`` an upper bound of the
        P-mass of the outcomes past it on one side."""
        w = self._window(_PROFILE_BITS)
        _, t, t_err, tail = self._float_terms(w)
        z_lo, z_hi = self._float_norm(t, t_err, tail)
        return w, t, t_err, z_lo, z_hi, max(up(tail / z_lo * (1.0 + 2.0 * UNIT), 1), 5e-324)

    def _summed_masses(self, a: np.ndarray, b: np.ndarray):
        """Certified (lo, hi) of the masses of the integer ranges [a_i, b_i] -- consecutive
        cells' ranges, contiguous and descending -- as direct sums of the window's kernel
        (np.add.reduceat: n terms of one sign summed within (n - 1)u, each term within its
        own error), normalised by [Z_lo, Z_hi]; a range reaching past the window gains the
        mass beyond it on its upper end."""
        w, t, t_err, z_lo, z_hi, beyond = self._window_sums()
        ca = np.clip(a, -w, w + 1).astype(np.int64) + w  # window indices, clipped
        cb = np.clip(b, -w - 1, w).astype(np.int64) + w
        full = cb >= ca
        lo, hi = np.zeros(a.size), np.zeros(a.size)
        if full.any():
            order = np.flatnonzero(full)[::-1]  # ascending indices
            starts = ca[order]
            first, last = int(starts[0]), int(cb[order[-1]])
            s_hi = np.add.reduceat((t + t_err)[first:last + 1], starts - first)
            s_lo = np.add.reduceat(np.maximum(t - t_err, 0.0)[first:last + 1], starts - first)
            n = (cb[order] - ca[order] + 1).astype(float)
            hi[order] = s_hi * (1.0 + (n + 2.0) * UNIT) / z_lo * (1.0 + 2.0 * UNIT)
            lo[order] = s_lo * (1.0 - (n + 2.0) * UNIT) / z_hi * (1.0 - 2.0 * UNIT)
        past = (a < -w) | (b > w)
        hi = np.where(past & (b >= a), hi + beyond, hi)
        return np.maximum(lo, 0.0), np.minimum(hi, 1.0)

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

    def _z_floors(self, edges: np.ndarray):
        """:meth:`_z_floor` of many edges: a float array of the integers when every one lies
        below 2^51 -- zc = Δ/2 − l (σ²/Δ) formed in floats within 4u (|l σ²/Δ| + |zc|) (σ²/Δ,
        the product and the difference each rounded once), floor decided exactly (integers)
        only for the edges within that error of an integer --, else a list of Python ints."""
        dl = self.sensitivity
        with np.errstate(over="ignore", invalid="ignore"):
            prod = edges * (self.sigma * self.sigma / dl)
            zc = dl / 2.0 - prod
            err = 4.0 * UNIT * (np.abs(prod) + np.abs(zc)) + 1e-300
        if not (np.all(np.isfinite(zc)) and np.all(np.abs(zc) < 2.0**51)):
            return self._z_floor(edges.tolist())
        k = np.floor(zc)
        near = (zc - k <= err) | (k + 1.0 - zc <= err)
        if near.any():
            idx = np.flatnonzero(near)
            k[idx] = np.array(self._z_floor(edges[idx].tolist()), dtype=float)
        return k

    def _range_masses(self, a, b):
        """Certified (lo, hi) of sum_{z=a}^{b} e^{-z²/(2σ²)}/Z (integers: float arrays below
        2^51, else lists of Python integers; a > b: empty): the midpoint rule sum = I (1 + θ),
        |θ| <= c = 1.01 max(1, u²)/(24 σ²), I = σ sqrt(2π) (Phi((b + 1/2)/σ) − Phi((a − 1/2)/σ)),
        over Z = σ sqrt(2π)(1 + η).  The standardised ends: (a − 1/2)/σ in floats (the
        difference exact below 2^51, the quotient within u), or from rationals, rounded once;
        beyond 10^6 they are clipped there (Phi moves by < 2^-10^11: the upper end adds
        5e-324)."""
        from ._normal import phi_interval

        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            za = np.clip((a - 0.5) / self.sigma, -1e6, 1e6)
            zb = np.clip((b + 0.5) / self.sigma, -1e6, 1e6)
            empty = a > b
        else:
            sig = Fraction(self.sigma)

            def std(v: Fraction) -> float:
                return float(max(min(v / sig, Fraction(10**6)), Fraction(-10**6)))

            a, b = [int(v) for v in a], [int(v) for v in b]
            za = np.array([std(Fraction(2 * v - 1, 2)) for v in a])
            zb = np.array([std(Fraction(2 * v + 1, 2)) for v in b])
            empty = np.array([x > y for x, y in zip(a, b)], dtype=bool)
        ea = 2.0 * UNIT * np.abs(za) + 5e-324
        eb = 2.0 * UNIT * np.abs(zb) + 5e-324
        i_lo, i_hi = phi_interval(za, ea, zb, eb)
        u = np.maximum(np.abs(za), np.abs(zb)) + 1.0 / self.sigma
        c = 1.01 * np.maximum(1.0, u * u) / (24.0 * self.sigma * self.sigma) * (1.0 + 4.0 * UNIT)
        lo = i_lo / (1.0 + c) * (1.0 - 4.0 * UNIT)
        hi = np.minimum(i_hi / (1.0 - c) * (1.0 + 4.0 * UNIT) + 5e-324, 1.0)
        return np.where(empty, 0.0, np.maximum(lo, 0.0)), np.where(empty, 0.0, hi)

    def _interval_masses(self, l0, l1, direction):
        """P- and Q-masses of the outcomes with loss in [l0, l1) (half-open: each atom counted
        once): the integers z in (floor(zc(l1)), floor(zc(l0))], zc(l) = Δ/2 − l σ²/Δ; under Q
        the same integers shifted by −Δ (Q(z) = f(z − Δ)/Z)."""
        l0, l1 = np.asarray(l0, float), np.asarray(l1, float)
        consecutive = l0.size > 0 and np.array_equal(l0[1:], l1[:-1])
        if consecutive:  # (the lattice's cells: one floor per edge)
            k = self._z_floors(np.concatenate([l0, l1[-1:]]))
            b, a1 = k[:-1], k[1:]
        else:
            b, a1 = self._z_floors(l0), self._z_floors(l1)
        dl = self.sensitivity
        if isinstance(b, np.ndarray) and isinstance(a1, np.ndarray):
            a = a1 + 1.0
            masses = self._summed_masses if consecutive and self.sigma <= CELL_SIGMA else self._range_masses
            p_lo, p_hi = masses(a, b)
            q_lo, q_hi = masses(a - dl, b - dl)
            return p_lo, p_hi, q_lo, q_hi
        b, a = [int(v) for v in b], [int(v) + 1 for v in a1]
        p_lo, p_hi = self._range_masses(a, b)
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
        # every term P(z)(1 - e^{x - L(z)}) lies in [0, P(z)]: delta <= S(m)/Z, whatever e^x
        cap = (s1 + e1) / (zt - zt_err) * (1 + mpf_err(1, bits=4))
        if v + err > cap:
            return cap / 2, cap / 2
        return max(v, mpmath.mpf(0)), err

    def _pair(self, h, side, direction, tail, max_atoms):
        if self.kind == "cells":
            return CellMechanism._pair(self, h, side, direction, tail, max_atoms)
        return super()._pair(h, side, direction, tail, max_atoms)

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
