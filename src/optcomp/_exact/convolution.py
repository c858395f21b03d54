r"""Finite laws on one lattice (layer L3): the exact composition of finite mechanisms whose
loss atoms are, up to float rounding, integer multiples of one rational unit, by direct
convolution of nonnegative rows in long double.

**The lattice.**  Every atom of every factor has an exact rational position l_a (black
boxes, randomized response, geometric, staircase, profiles); :func:`rational_unit` finds a
unit u (a rational with denominator <= 10^12, then moved so that the heaviest atom is an
exact multiple) and integers n_a with |l_a - n_a u| <= 2^-45 |l_a|.  Composing the laws with
every atom moved to n_a u (masses unchanged) moves the composed loss of each outcome tuple by
at most D = sum_f c_f max_a |l_a - n_a u| (exact rationals), and H(x) = E[(1 - e^{x - L})_+]
is nondecreasing in L, so

    H_lat(x + D) <= H(x) <= H_lat(x - D),

H_lat the excess of the lattice law (the composition's own positions are exact lattice
points: no rounding of sums of positions).  D is sharpened by splitting each factor's atoms
into heavy ones (small residuals) and light ones (:func:`_shift_options`: the tuples with j
light copies or more weigh at most a union bound, charged).  For floats like 0.01 ... 0.2
with 10^4 copies, D ~ 1e-17.  Where x is within D of a heavy lattice point (a delta asked
exactly on a sum of decimal eps), the multinomial rows' exact positions are asked as well.

**Tilting.**  Each factor's masses are tilted to p_a e^{theta n_a u} / Z_f (in ``PREC``-bit
arithmetic, then rounded to long double), theta >= 0 aimed at x (the saddle point K'(theta)
= x of the composed law), so the region that decides H(x) carries the bulk of the tilted
mass; the composed lattice law is G(l) = G~(l) e^{K - theta l}, K = sum_f c_f log Z_f.

**Rows.**  A factor's c_f copies by binary powering (squarings and products), then the
factors' rows convolved together, every convolution a direct sum of nonnegative products
(:func:`numpy.convolve`): an entry of n terms is within gamma_{n+1} = (n+1) u / (1 - (n+1)
u) relative of the exact convolution of the rows as stored (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., eq. 3.5: for nonnegative terms the absolute bound is a
relative one, whatever the summation order).  A row carries (i) its relative error bound r
(entries within (1 +- r) of G~'s kept part; r composes as (1 + r_a)(1 + r_b)(1 + gamma) - 1),
(ii) the tilted mass m it has lost (the kept part G~ plus a nonnegative rest of mass <= m:
a product's rest is at most m_a + m_b, both rows being sub-probabilities), and (iii) a
power-of-two scale (each row is normalised to its largest entry, exactly; entries below
2^-8000 of it are cut and charged, so no product underflows).  After each convolution the
two ends whose tilted mass is within the window budget are cut and charged to m.

**H.**  H(x) = sum_{l > x} G(l) (1 - e^{x - l}): the distances d = l - y (y = x -+ D) from
the exact rational y / u (the nearest atom's from an exact Fraction), -expm1 within
``LIBM_ULPS``, e^{K - theta l} as e^{K0 - theta (l - l0)} (l0 the lattice point at y, K0 in
``PREC`` bits) with each term's rounding charged to it, summed as nonnegative terms.  The
rest of mass <= m contributes at most m e^{K - theta y} to the upper bound (it lies above y:
only there is (1 - e^{y - l})_+ > 0, where e^{-theta l} <= e^{-theta y}); the lower bound
drops it.  When that charge exceeds 2^-52 of H (a coarse law whose tilted mass above x is
small), the rows are rebuilt with narrower cuts (budgets down to 2^-15000, long double).
Roots (eps_g) as in :class:`optcomp._exact.finite.SmallLaw`: a closed form on the lattice
segment, then checked (and moved by ulps) against the certified bounds, never assumed.

Cost: the last squarings dominate, (window width)^2 multiply-adds; :func:`lattice_law` takes
a composition only when its estimate is at most ``LATTICE_MACS`` (~0.3 s), the rows of each
tilt and depth are refused (ExactTooLarge) when their estimate exceeds ``ROW_MACS``, and every
convolution is checked against ``CONV_MAX`` and the memory budget before it is allocated
(rows of at most a few thousand long doubles).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from .._lattice.commensurable import rational_unit
from .._memory import current as _memory_budget
from .._rounding import LIBM_ULPS, down, mpf_dir, up
from .._types import ExactTooLarge
from .finite import PREC, Composition, LawSolver, _mp_ld

__all__ = ["LatticeLaw", "lattice_law"]

_LD = np.longdouble
_U = float(np.finfo(_LD).epsneg) if np.finfo(_LD).nmant > 52 else 2.0**-53  # long double unit roundoff
LATTICE_MACS = 2**26  # estimated multiply-adds up to which a composition is taken by the lattice
ROW_MACS = 2**28  # estimated multiply-adds of the rows at one tilt and depth at most, else ExactTooLarge
CONV_MAX = 2**27  # multiply-adds of one convolution at most (~1 s in long double), else ExactTooLarge
CUT = 2.0**-72  # tilted mass the windows cut in all (x 2^-depth: LatticeLaw._one_side goes deeper if needed)
MAX_DEPTH = 15000  # CUT 2^-depth stays a normal long double
LAW_REL = 2.0**-40  # the laws' relative mass errors, times the counts, at most this (else no lattice)
FLOOR_BITS = 8000  # entries below 2^-8000 of a row's largest are cut (charged): no product underflows
SIGMAS = 16.0  # the window estimate: this many standard deviations each side
TIGHT = 2.0**-42  # a delta bracket wider than this (relative) asks the multinomial rows (shift D > 0)
SHIFT_COUNTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # light-atom counts j tried for the shift (see _shift_options)


def _gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u) for long double's u, rounded up."""
    return up(n * _U / (1.0 - n * _U), 1)


def _ld_fraction(f: Fraction):
    """A Fraction as a long double (two doubles): relative error <= 2^-63."""
    hi = float(f)
    return _LD(hi) + _LD(float(f - Fraction(hi)))


class _Row:
    """A tilted law on the lattice: entries ``vals`` 2^``scale`` at indices off, off + 1, ...,
    within relative ``rel`` of the kept part of the exact tilted law, whose rest has mass
    <= ``miss``."""

    __slots__ = ("vals", "off", "scale", "rel", "miss")

    def __init__(self, vals, off: int, scale: int, rel: float, miss: float):
        self.vals, self.off, self.scale, self.rel, self.miss = vals, off, scale, rel, miss


def _trim(v, off: int, scale: int, rel: float, miss: float, budget: float) -> _Row:
    """Normalise ``v`` to its largest entry (exactly), cut entries below 2^-FLOOR_BITS of it
    and the two ends of mass within ``budget`` (tilted, at most half each), charging what was
    cut (at most sum / (1 - rel) of the exact law, the sums' own rounding included)."""
    mx = v.max()
    if not mx > 0:
        raise ExactTooLarge("the lattice composition lost all its mass (underflow); use method='approx' or 'auto'")
    e = int(np.frexp(mx)[1])
    v = np.ldexp(v, -e)
    scale += e
    charged = _LD(0)
    tiny = (v > 0) & (v < np.ldexp(_LD(1), -FLOOR_BITS))
    if np.any(tiny):
        charged += np.sum(v[tiny])
        v[tiny] = 0
    allowed = np.ldexp(_LD(budget) * _LD(0.5 * (1.0 - rel) / (1.0 + _gamma(v.size))), -scale)
    cs = np.cumsum(v)
    left = int(np.searchsorted(cs, allowed, side="right"))
    rs = np.cumsum(v[::-1])
    right = int(np.searchsorted(rs, allowed, side="right"))
    left = min(left, int(np.argmax(v)))
    right = min(right, v.size - 1 - int(np.argmax(v)))
    if left:
        charged += cs[left - 1]
    if right:
        charged += rs[right - 1]
    if charged > 0:
        c = float(np.ldexp(charged, scale)) * (1.0 + _gamma(v.size)) / (1.0 - rel) * (1.0 + 4.0 * 2.0**-52)
        miss = up(miss + max(c, 5e-324), 1)
    return _Row(v[left:v.size - right], off + left, scale, rel, miss)


def _convolve(a: _Row, b: _Row, budget: float) -> _Row:
    na, nb = a.vals.size, b.vals.size
    if na * nb > CONV_MAX:
        raise ExactTooLarge(f"the lattice composition needs a convolution of {na:,} x {nb:,} entries (> "
                            f"{CONV_MAX:,}); use method='approx' or 'auto'")
    _memory_budget().need(4.0 * 16.0 * (na + nb), f"a lattice convolution of {na + nb:,} entries", ExactTooLarge)
    v = np.convolve(a.vals, b.vals)
    g = _gamma(min(na, nb) + 1)
    # (1 + r_a)(1 + r_b)(1 + g) - 1, expanded (1 + r in floats would lose r below 2^-53)
    rel = up(a.rel + b.rel + g + (a.rel * b.rel + (a.rel + b.rel) * g) * (1.0 + g), 2)
    return _trim(v, a.off + b.off, a.scale + b.scale, rel, up(a.miss + b.miss, 1), budget)


class LatticeLaw(LawSolver):
    """The composition on the lattice u Z (see the module docstring): ``excess_bounds`` and
    ``epsilon_bounds`` as :class:`optcomp._exact.finite.SmallLaw`'s."""

    def __init__(self, comp: Composition, unit: Fraction, factors: list, resid: list):
        self.unit = unit
        self.u_ld = _ld_fraction(unit)
        self.u = float(unit)
        self.factors = factors  # (index array, mpmath masses, count)
        self.options = _shift_options(resid)  # (D, tail) pairs, the first with tail 0
        self.shift = self.options[0][0]  # the shift with no tail charge (exact)
        self.slack = comp.slack
        self.comp = comp
        self._fallback = None
        # the laws' relative errors, c copies each: (1 + rel)^c - 1 <= e^{c rel} - 1
        self.law_rel = up(math.expm1(sum(c * law.rel for law, c in comp.factors)) * (1.0 + 1e-9), 2)
        self.copies = sum(c for _, _, c in factors)
        self.span = 0  # the largest one-copy span (lattice_law sets it)
        self._rows = {}
        self._depth = {}  # theta -> the depth of cuts its rows needed so far
        self._cgf_laws = [(idx.astype(float) * self.u, np.array([float(mpmath.log(m)) for m in ms]), c)
                          for idx, ms, c in factors]

    # ------------------------------------------------------------------ the tilted rows
    def _row(self, theta: float, depth: int = 0):
        """(row, K) for the tilt theta, the windows cutting at most CUT 2^-depth of tilted
        mass in all (cached)."""
        key = (theta, depth)
        if key in self._rows:
            return self._rows[key]
        # the window at this tilt and depth (a Gaussian's tails below CUT 2^-depth, and the
        # laws' spans): refused before any convolution when it would cost beyond ROW_MACS
        sd = math.sqrt(self._cgf(theta)[2]) / self.u
        width = 2.0 * math.sqrt(2.0 * math.log(2.0) * (92.0 + depth)) * sd + 2.0 * self.span + 1.0
        if 4.0 * width * width > ROW_MACS:
            raise ExactTooLarge(f"the lattice composition needs rows of ~{width:,.0f} points at this eps_g "
                                f"(> {math.sqrt(ROW_MACS / 4):,.0f}); use method='approx' or 'auto'")
        n_conv = sum(2 * max(1, int(c).bit_length()) for _, _, c in self.factors) + len(self.factors)
        budget = np.ldexp(_LD(CUT / (n_conv * self.copies)), -depth)  # (long double: depth up to MAX_DEPTH)
        total = None
        K = mpmath.mpf(0)
        with mpmath.workprec(PREC):
            th = mpmath.mpf(theta) * (mpmath.mpf(self.unit.numerator) / self.unit.denominator)
            for idx, ms, c in self.factors:
                w = [m * mpmath.exp(th * int(i)) for i, m in zip(idx.tolist(), ms)]
                Z = mpmath.fsum(w)
                K += c * mpmath.log(Z)
                lo = int(idx.min())
                vals = np.zeros(int(idx.max()) - lo + 1, dtype=_LD)
                gone = mpmath.mpf(0)  # tilted masses below long double's normal range: charged
                for i, x in zip(idx.tolist(), w):
                    if x / Z < mpmath.ldexp(1, -16000):
                        gone += x / Z
                    else:
                        vals[i - lo] = _mp_ld(x / Z)
                base = _trim(vals, lo, 0, 2.0**-62, mpf_dir(gone, True) if gone else 0.0, 0.0)
                power = None
                p, k = base, int(c)
                while True:
                    if k & 1:
                        power = p if power is None else _convolve(power, p, budget)
                    k >>= 1
                    if not k:
                        break
                    p = _convolve(p, p, budget)
                total = power if total is None else _convolve(total, power, budget)
            self._rows[key] = (total, K)
        return self._rows[key]

    def _tilt(self, x: float, rel: float = 1e-4) -> float:
        """theta >= 0 with K'(theta) = x, to three digits (an estimate: any theta >= 0 is
        certified, and the rows are cached per theta)."""
        return float(f"{super()._tilt(x, rel):.3g}")

    # ------------------------------------------------------------------ H
    def _choose(self, h: float) -> tuple:
        """The (D, tail) option of least D whose tail is at most 2^-60 of ``h`` (an estimate
        of H where it is used: only a choice)."""
        for D, tail in self.options[1:]:  # (ascending D)
            if tail <= 2.0**-60 * h:
                return D, tail
        return self.options[0]

    def _one_side(self, x: float, upper: bool, option=None) -> float:
        """A certified bound on H(x) for the shift option (D, tail) (:func:`_shift_options`):
        upper at y = x - D with the lost mass and the tail charged, lower at y = x + D less
        the tail."""
        D, tail_j = self.options[0] if option is None else option
        theta = self._tilt(x)
        depth = self._depth.get(theta, 0)
        while True:
            out, v, cut, miss = self._evaluate(x, upper, D, tail_j, theta, depth)
            # the windows' charge too large beside H (the tilted mass above x small: a coarse
            # lattice law): narrower cuts, deep enough for 2^-60 of H (the lower bound drops
            # what the upper one charges: both ask)
            if cut <= 2.0**-52 * v or cut <= 5e-324 or depth >= MAX_DEPTH:  # (5e-324: below the floats)
                return out
            # a budget below the mass cut so far by the factor (charge / H) 2^60
            want = math.log2(miss) - math.log2(cut / max(v, 1e-300)) - 60.0
            depth = min(MAX_DEPTH, max(depth + 16, math.ceil(math.log2(CUT) - want)))
            self._depth[theta] = depth

    def _evaluate(self, x: float, upper: bool, D: Fraction, tail_j: float, theta: float, depth: int):
        """(bound, the sum's value, the windows' charge, the mass they cut) of :meth:`_one_side`
        at one depth."""
        row, K = self._row(theta, depth)
        y = Fraction(x) - D if upper else Fraction(x) + D
        z = y / self.unit
        j0 = math.floor(z)
        frac = z - j0
        s = max(0, j0 + 1 - row.off)
        h = _LD(0)
        n = row.vals.size - s
        ulp = _U
        if n > 0:
            idx = np.arange(row.off + s, row.off + row.vals.size, dtype=np.int64)
            k = (idx - j0).astype(_LD)  # >= 1, exact
            dk = k - _ld_fraction(frac)
            if idx[0] - j0 == 1:
                dk[0] = _ld_fraction(1 - frac)
            d = dk * self.u_ld  # relative error <= 6 u (k >= 2: |frac error| <= u, dk >= 1)
            e1 = -np.expm1(-d)
            # e^{K - theta l} as e^{K0 - theta (l - l0)}, l0 = j0 u (K0 in PREC bits): the
            # exponent's error grows with theta (l - l0), small where the terms are large
            with mpmath.workprec(PREC):
                K0 = K - mpmath.mpf(theta) * j0 * (mpmath.mpf(self.unit.numerator) / self.unit.denominator)
            K0_ld = _mp_ld(K0)
            th = _LD(theta) * (k * self.u_ld)
            lw = K0_ld - th
            with np.errstate(under="ignore", over="ignore"):
                terms = row.vals[s:] * np.exp(lw) * e1
            # per term: e1 (d within 6u relative, and so e1; expm1 within LIBM_ULPS), e^{lw} (lw
            # within |K0| 2u (two doubles) + |theta (l - l0)| 4u + |lw| u; exp within LIBM_ULPS),
            # two products; the row's and the laws' relative errors.  Each term's factor
            # e^{sum} - 1 (the product of (1 + each), each log1p(r) <= r)
            base = row.rel + self.law_rel + (6.0 + 2 * LIBM_ULPS + 2.0) * ulp
            err = base + 2.0 * ulp * abs(float(K0)) + 4.0 * ulp * np.abs(th.astype(float)) \
                + ulp * np.abs(lw.astype(float))
            f_i = np.expm1(err * (1.0 + 1e-9)) * (1.0 + 1e-9)
            g = _gamma(n + 3)  # (the sums of n nonnegative terms, the products by 1 +- f_i)
            if upper:
                h = np.sum(terms * (_LD(1) + f_i.astype(_LD))) * _LD(1.0 + g)
            else:
                h = np.sum(terms * (_LD(1) - np.minimum(f_i, 1.0).astype(_LD))) * _LD(1.0 - g)
        with np.errstate(under="ignore", over="ignore"):
            hv = np.ldexp(h, row.scale)
        with mpmath.workprec(64):  # (rounded up, never to 0: the bound holds below the floats too)
            tail = mpf_dir(row.miss * mpmath.exp(K - mpmath.mpf(theta) * mpmath.mpf(y.numerator) / y.denominator)
                           * (1 + mpmath.ldexp(1, -40)), True)
        if upper:
            v = float(hv) * (1.0 + 2.0**-50)
            out = up(v + tail + tail_j + self.slack, 2)
            if hv > 0 and out == 0.0:
                out = 5e-324
            return min(out, 1.0), v, tail, row.miss
        return max(0.0, down(float(hv) * (1.0 - 2.0**-50) - tail_j, 2)), float(hv), tail, row.miss

    def excess_bounds(self, x: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around H(x).  When the shift D is not 0 and x lies
        within it of a heavy lattice point (its outcome tuples' true positions straddle x: a
        bracket wider than ``TIGHT``), the multinomial rows' exact positions are asked too
        (:class:`optcomp._exact.multinomial.RowLaw`; kept if they answer) and the two
        brackets intersected."""
        lo, hi = self._one_side(x, False), self._one_side(x, True)
        if self.shift and hi - lo > TIGHT * hi:
            opt = self._choose(lo if lo > 0.0 else hi)
            if opt[0] < self.shift:
                lo, hi = max(lo, self._one_side(x, False, opt)), min(hi, self._one_side(x, True, opt))
        if self.shift and hi - lo > TIGHT * hi:
            from .multinomial import RowLaw

            try:
                if self._fallback is None:
                    self._fallback = RowLaw(self.comp)
                r_lo, r_hi = self._fallback.excess_bounds(x)
            except ExactTooLarge:
                return lo, hi
            lo, hi = max(lo, r_lo), min(hi, r_hi)
        return lo, hi

    # ------------------------------------------------------------------ eps_g
    def _root(self, t: float, upper: bool, top: float) -> float:
        if t < 0.0:
            return math.inf
        opt = self._choose(t)
        if self._one_side(0.0, upper, opt) <= t:
            return 0.0
        if upper and t <= self.slack:
            return top
        def holds(v: float) -> bool:  # the upper end: H's upper bound <= t; the lower: H's lower > t
            h = self._one_side(v, upper, opt)
            return h <= t if upper else (h > t or v == 0.0)

        x = self._guess(t)
        step = max(abs(x) * 2.0**-60, 5e-324)
        prev = None  # the last point where it did not hold
        for _ in range(80):
            if holds(x):
                break
            prev = x
            step *= 2.0
            x = up(x + step, 1) if upper else max(0.0, down(x - step, 1))
        else:  # pragma: no cover - the closed-form root is far closer
            return top if upper else 0.0
        # a far guess (the rows it came from cut too coarsely) overshoots by up to the last
        # step: bisection back toward the point where it did not hold
        while prev is not None and abs(x - prev) > 2.0**-46 * abs(x):
            mid = 0.5 * (x + prev)
            if mid == x or mid == prev:
                break
            if holds(mid):
                x = mid
            else:
                prev = mid
        return min(x, top) if upper else x

    def _guess(self, t: float) -> float:
        """The root of H = t on the rows (long double, approximate: only a starting point),
        re-aiming the tilt at it until it stays."""
        x = self._saddle_x(t)
        for _ in range(4):
            theta = self._tilt(x)
            row, K = self._row(theta, self._depth.get(theta, 0))
            idx = np.arange(row.off, row.off + row.vals.size)
            lpos = idx.astype(_LD) * self.u_ld
            with np.errstate(divide="ignore", under="ignore", over="ignore"):
                lm = np.log(row.vals) + _LD(row.scale * math.log(2.0)) + _mp_ld(K) - _LD(theta) * lpos
                m = np.exp(lm)
                A = np.cumsum(m[::-1])[::-1]
                L = np.logaddexp.accumulate((lm - lpos)[::-1])[::-1]  # log sum_{i >= j} m_i e^{-l_i}
                Hk = np.empty(idx.size, dtype=_LD)
                Hk[:-1] = A[1:] - np.exp(lpos[:-1] + L[1:])
                Hk[-1] = 0
            below = np.nonzero(Hk <= _LD(t))[0]
            j = int(below[0]) if below.size else idx.size - 1
            if j == 0 or not A[j] > _LD(t):
                nx = float(lpos[j])
            else:
                nx = float(np.log(A[j] - _LD(t)) - L[j])
            nx = max(nx, 0.0)
            if self._tilt(nx) == theta:
                return nx
            x = nx
        return x



def _float_sorted(values) -> list:
    """Rationals ordered by their floats (20x faster than comparing Fractions; the float of a
    larger value is never smaller, so only values of one float may stand out of order), or
    exactly when one lies beyond the float range."""
    try:
        return sorted(values, key=float)
    except OverflowError:
        return sorted(values)


def lattice_law(comp: Composition, max_macs: float = LATTICE_MACS) -> LatticeLaw | None:
    """The composition as a :class:`LatticeLaw` when every atom of every factor has an exact
    rational position, the laws' masses are known within LAW_REL (times the counts), they share a unit (:func:`rational_unit`) and the estimated cost (the
    window of SIGMAS standard deviations each side, squared, four times) is at most
    ``max_macs`` multiply-adds; else None."""
    if not comp.factors or any(e is None for law, _ in comp.factors for e in law.exact):
        return None
    if sum(c * law.rel for law, c in comp.factors) > LAW_REL:
        return None  # (masses known too loosely for a 1e-12 bracket, whatever the composition)
    values = {e for law, _ in comp.factors for e in law.exact if e != 0}
    if not values:
        return None
    values = _float_sorted(values)
    # a lower bound of the cost first, so that no unit is sought for a lattice that could not
    # be afforded (Geometric(0.1, sensitivity=2^14): 7,602 atoms, 0.6 s for None).  Every value
    # v is within 2^-46 |v| of n u (:func:`rational_unit`; 0 is 0 u): two consecutive values
    # (0 among them) more than 2^-40 big apart (big = max |v|) have distinct n, so u <= their
    # gap + 2^-44 big -- any two values, so neighbours in an order only nearly sorted (by
    # float) serve as well; a law's span in units is then at least (its range - 2^-44 big) / u
    pts = _float_sorted(values + [Fraction(0)])
    big = max(abs(pts[0]), abs(pts[-1])) * Fraction(1 + 2.0**-40)  # (float ties: within an ulp of the ends)
    gaps = [b - a for a, b in zip(pts, pts[1:]) if b - a > big * Fraction(2.0**-40)]
    if gaps:
        u_hi = min(gaps) + big * Fraction(2.0**-44)
        span_lo = max(float((max(law.exact) - min(law.exact) - big * Fraction(2.0**-44)) / u_hi)
                      for law, _ in comp.factors)
        if 4.0 * (2.0 * span_lo + 1.0) ** 2 > max_macs * (1.0 + 1e-9):
            return None
    ru = rational_unit(values)
    if ru is None:
        return None
    unit, ns = ru
    n_of = dict(zip(values, ns))
    # the unit refined so that the heaviest atom is an exact multiple (its copies then add no
    # shift): u = l / n, still within 2^-45 of every other n_a u (checked)
    heavy = max(((c * float(m), e) for law, c in comp.factors for e, m in zip(law.exact, law.mass) if e != 0),
                key=lambda t: t[0])[1]
    ref = heavy / n_of[heavy]
    if all(abs(v - n * ref) <= abs(v) * Fraction(2.0**-45) for v, n in n_of.items()):
        unit = ref
    factors, resid, var, span = [], [], 0.0, 0
    for law, c in comp.factors:
        idx = np.array([n_of[e] if e != 0 else 0 for e in law.exact], dtype=np.int64)
        resid.append((int(c), [(abs(e - int(i) * unit), up(float(m) * (1.0 + 1e-9), 1))
                               for e, i, m in zip(law.exact, idx.tolist(), law.mass)]))
        factors.append((idx, law.mass, int(c)))
        p = np.array([float(m) for m in law.mass])
        fi = idx.astype(float)
        var += c * max(float(np.sum(p * fi * fi) - np.sum(p * fi) ** 2), 0.0)
        span = max(span, int(idx.max() - idx.min()))
    width = 2.0 * SIGMAS * math.sqrt(var) + 2.0 * span + 1.0
    if 4.0 * width * width > max_macs:
        return None
    law = LatticeLaw(comp, unit, factors, resid)
    law.span = span
    return law


def _shift_options(resid: list) -> list:
    """(D, tail) pairs, D ascending after the first: the composed loss of every outcome tuple
    is within D of its lattice position except on tuples of P-mass at most ``tail``.

    ``resid``: per factor (c, [(|l_a - n_a u|, an upper bound on p_a)]).  The first option is
    D = sum_f c_f max_a |l_a - n_a u| with no tail.  For j in SHIFT_COUNTS: each factor's atoms
    split at a residual tau into heavy ones (residual <= tau) and light ones of total mass p_L
    <= 1/(8 c_f) (the least such tau); a tuple with fewer than j light copies per factor moves
    by at most sum_f (c_f tau_f + (j - 1) max light residual), and the tuples with j or more
    light copies of some factor weigh at most sum_f C(c_f, j) p_L^j (a union bound over the
    j-subsets of copies).  The upper bound on H charges the tail (a P-mass, (1 - e^{x - L})_+
    <= 1), the lower bound subtracts it."""
    full = sum((c * max(d for d, _ in at) for c, at in resid), Fraction(0))
    out = []
    for j in SHIFT_COUNTS:
        D, tail = Fraction(0), 0.0
        for c, at in resid:
            tau = max(d for d, _ in at)
            for cand in sorted({d for d, _ in at}):
                if sum(m for d, m in at if d > cand) <= 1.0 / (8.0 * c):
                    tau = cand
                    break
            light = [d for d, _ in at if d > tau]
            if not light or j >= c:
                D += c * max(d for d, _ in at)
                continue
            p_l = up(math.fsum(m for d, m in at if d > tau) * (1.0 + 1e-9), 1)
            D += c * tau + (j - 1) * max(light)
            lg = math.lgamma(c + 1) - math.lgamma(j + 1) - math.lgamma(c - j + 1) + j * math.log(p_l)
            lg += 1e-9 * (3.0 * math.lgamma(c + 1) + j * abs(math.log(p_l)) + 10.0)  # (lgamma, log: ulps)
            tail = up(tail + math.exp(lg) * (1.0 + 1e-9), 1)
        if D < full:
            out.append((D, tail))
    return [(full, 0.0)] + sorted(out, key=lambda o: o[0])
