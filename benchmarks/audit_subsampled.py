#!/usr/bin/env python
"""Independent audit of optcomp.mechanisms.Subsampled at the edges of its domain.

The references are written from the definitions only (never from optcomp's implementation):

* Poisson sampling, add/remove neighbours (Zhu, Dong and Wang, AISTATS 2022, Thm 11): with
  (P, Q) the base's pair (with / without the record), remove = ((1-q)Q + qP, Q) and
  add = (Q, (1-q)Q + qP).  The optimal delta of a k-fold composition at eps is the larger of
  the two *global* directions of E_P[(1 - e^{eps - L_k})_+].
* Gaussian(sigma) base: (P, Q) = (N(1, s^2), N(0, s^2)); Laplace(b) base: (Lap(1, b), Lap(0, b)).
  k = 1: the hockey-stick divergence in closed form from Phi (Gaussian) / the Laplace cdf,
  derived here from (a Q + b P - e^t Q)_+ on the half-line where the base loss exceeds the
  threshold, in mpmath at 50 digits.  k = 2: the one-dimensional integral
  E_{x ~ P1}[H_{e^{eps - L1(x)}}(P2 || Q2)] by mpmath.quad, split at the kinks of the inner
  profile and over the bulk, the tails beyond +-50 sigma charged to the error.
* Finite bases (RandomizedResponse, BlackBox, Pair): the subsampled pair is a finite pair;
  k-fold compositions by exact multinomial enumeration (or, for two outcomes, binomial tails
  summed outward from the threshold) in mpmath at 60 digits.
* Nested Subsampled(Subsampled(M, q1), q2) is Subsampled(M, q1 q2) (the mixtures compose);
  without_replacement + replace_one of BlackBox(e, d) is BlackBox(log(1 + q(e^e - 1)), q d)
  (Balle-Barthe-Gaboardi 2018 Thm 9), composed by the KOV/MV formula.

Checks per call: an upper bound >= truth (security), a lower bound <= truth, no exception
besides ValueError/TypeError/ApproxTooCostly, no warning (warnings are errors), no call over
10 s, inf only where unattainable; bad input names the parameter.

Usage: python benchmarks/audit_subsampled.py [--quick] [--json out.json]
"""
from __future__ import annotations

import argparse
import math
import signal
import sys
import time
import traceback
import warnings
from fractions import Fraction
from itertools import product

import mpmath as mp

DPS = 50
K2_DPS = 30  # the k = 2 quadratures (checked against the q = 1 closed form to ~1e-25)
LIMIT_S = 10.0  # a call over this is a finding
HARD_S = 60.0  # a call is interrupted after this

TINY = mp.mpf(10) ** -10000  # stands for a positive truth below the float range
ONE_MINUS = math.nextafter(1.0, 0.0)  # 1 - 2^-53


def _phibar(z):
    return mp.erfc(z / mp.sqrt(2)) / 2


def _phi_cdf(z):
    return mp.erfc(-z / mp.sqrt(2)) / 2


# ----------------------------------------------------------------------------------------
# continuous bases: one step's hockey-stick divergence in both directions, any real threshold t
# ----------------------------------------------------------------------------------------
class _Continuous:
    """Subsampled continuous base: H_rem(t) = H_{e^t}((1-q)Q + qP || Q),
    H_add(t) = H_{e^t}(Q || (1-q)Q + qP); L(l) = log(1 - q + q e^l) the remove loss of base loss l."""

    def __init__(self, q):
        self.q = mp.mpf(q)

    def L(self, l):
        q = self.q
        return mp.log(1 - q + q * mp.exp(l))

    def Linv(self, y):
        """base loss l with L(l) = y (None if y <= log(1 - q))."""
        q = self.q
        a = mp.expm1(y) + q
        if a <= 0:
            return None
        return mp.log(a / q)

    def H(self, t, direction):
        q = self.q
        et = mp.exp(t)
        if direction == "rem":
            c = et - 1 + q
            if c <= 0:
                return 1 - et
            # region: base loss l > log(c/q); there (1-q)Q + qP - e^t Q = qP - cQ
            return self._upper(mp.log(c / q), q, c)
        C = 1 - et * (1 - q)
        if C <= 0:
            return mp.mpf(0)
        # region: l < log(C/(e^t q)); there C Q - e^t q P
        if q == 0:
            return C
        return self._lower(mp.log(C / (et * q)), C, et * q)

    def delta1(self, eps, direction):
        return self.H(mp.mpf(eps), direction)

    def delta(self, eps, k):
        """(max over directions, per direction dict) for k in {1, 2}."""
        eps = mp.mpf(eps)
        out = {}
        for d in ("rem", "add"):
            if k == 1:
                out[d] = self.delta1(eps, d)
            else:
                with mp.workdps(K2_DPS):
                    out[d] = +self.delta2(eps, d)
        return max(out.values()), out


class GaussRef(_Continuous):
    def __init__(self, q, sigma):
        super().__init__(q)
        self.s = mp.mpf(sigma)

    def _x_of_l(self, l):
        return self.s ** 2 * l + mp.mpf(1) / 2

    def _upper(self, tl, a, c):  # a P[l > tl] - c Q[l > tl]
        x = self._x_of_l(tl)
        s = self.s
        if x / s > 1e6:  # beyond 1e6 sigma: positive, far below every positive float
            return TINY
        return a * _phibar((x - 1) / s) - c * _phibar(x / s)

    def _lower(self, tl, C, b):  # C Q[l < tl] - b P[l < tl]
        x = self._x_of_l(tl)
        s = self.s
        if x / s < -1e6:
            return TINY
        return C * _phi_cdf(x / s) - b * _phi_cdf((x - 1) / s)

    def base_loss(self, x):
        return (2 * x - 1) / (2 * self.s ** 2)

    def delta2(self, eps, direction):
        q, s = self.q, self.s
        if direction == "rem":
            dens = lambda x: ((1 - q) * mp.npdf(x, 0, s) + q * mp.npdf(x, 1, s))
            inner = lambda x: self.H(eps - self.L(self.base_loss(x)), "rem")
            kinks = [eps - mp.log(1 - q)] if q < 1 else []
        else:
            dens = lambda x: mp.npdf(x, 0, s)
            inner = lambda x: self.H(eps + self.L(self.base_loss(x)), "add")
            # add kink: the inner threshold eps + L(x) equals -log(1 - q)
            kinks = [-mp.log(1 - q) - eps] if q < 1 else []
        lo, hi = -50 * s, 1 + 50 * s
        if direction == "rem":  # the mass may sit where the one-step loss is near eps
            l = self.Linv(eps)
            if l is not None:
                hi = max(hi, self._x_of_l(l) + 50 * s)
        pts = set()
        for y in kinks:
            l = self.Linv(y)
            if l is not None:
                x = self._x_of_l(l)
                if lo < x < hi:
                    pts.add(x)
        f = lambda x: dens(x) * inner(x)
        # beyond [lo, hi] the integrand is below P'-tails of 50 sigma (< 1e-540): neglected
        return _integrate(f, lo, hi, sorted(pts), max(24, int((hi - lo) / (2 * s))))


def _integrate(f, lo, hi, kinks, n=48):
    """integral of f >= 0 over [lo, hi]: f on a grid of 4n + 1 points locates the mass; each
    grid cell where f exceeds 1e-40 of the peak (and its neighbours), split at the kinks, gets a
    24-point Gauss-Legendre rule (nodes in mpmath at the working precision)."""
    grid = [lo + (hi - lo) * i / (4 * n) for i in range(4 * n + 1)]
    vals = [f(x) for x in grid]
    peak = max(vals)
    if peak == 0:
        return mp.mpf(0)
    cut = peak * mp.mpf(10) ** -34
    keep = set()
    for i in range(len(grid) - 1):
        if max(vals[i], vals[i + 1]) > cut:
            keep.update((i - 1, i, i + 1))
    keep = sorted(i for i in keep if 0 <= i < len(grid) - 1)
    nodes = _gl_nodes()
    tot = mp.mpf(0)
    for i in keep:
        a, b = grid[i], grid[i + 1]
        pts = [a] + sorted(x for x in kinks if a < x < b) + [b]
        for u, v in zip(pts, pts[1:]):
            if len(pts) > 2:  # next to a kink f is not analytic (log of the threshold): tanh-sinh
                tot += mp.quad(f, [u, v])
                continue
            h, m = (v - u) / 2, (u + v) / 2
            tot += h * mp.fsum(w * f(m + h * t) for t, w in nodes)
    return tot


_GL = {}


def _gl_nodes():
    prec = mp.mp.prec
    if prec not in _GL:
        from mpmath.calculus.quadrature import GaussLegendre

        _GL[prec] = GaussLegendre(mp.mp).calc_nodes(4, prec)  # 24 points on [-1, 1]
    return _GL[prec]


class LaplaceRef(_Continuous):
    """base pair (Lap(1, b), Lap(0, b)); base loss l(x) = (|x| - |x - 1|)/b in [-1/b, 1/b]."""

    def __init__(self, q, b):
        super().__init__(q)
        self.b = mp.mpf(b)
        self.a = 1 / self.b

    def _x_of_l(self, l):
        return (self.b * l + 1) / 2

    def _SP(self, x):  # P[X > x], X ~ Lap(1, b)
        b = self.b
        return mp.exp(-(x - 1) / b) / 2 if x >= 1 else 1 - mp.exp((x - 1) / b) / 2

    def _SQ(self, x):
        b = self.b
        return mp.exp(-x / b) / 2 if x >= 0 else 1 - mp.exp(x / b) / 2

    def _upper(self, tl, a_, c):
        if tl >= self.a:
            return mp.mpf(0)
        if tl < -self.a:
            return a_ - c
        x = self._x_of_l(tl)
        return a_ * self._SP(x) - c * self._SQ(x)

    def _lower(self, tl, C, bb):
        if tl <= -self.a:
            return mp.mpf(0)
        if tl > self.a:
            return C - bb
        x = self._x_of_l(tl)
        return C * (1 - self._SQ(x)) - bb * (1 - self._SP(x))

    def delta2(self, eps, direction):
        q, b, a = self.q, self.b, self.a
        e1 = mp.exp(-1 / b)
        if direction == "rem":
            m_lo = (1 - q) / 2 + q * e1 / 2  # P'[x < 0]
            m_hi = (1 - q) * e1 / 2 + q / 2  # P'[x > 1]
            dens = lambda x: ((1 - q) * mp.exp(-x / b) + q * mp.exp(-(1 - x) / b)) / (2 * b)
            inner = lambda l: self.H(eps - self.L(l), "rem")
            kink_t = [mp.log(1 - q)] if q < 1 else []
            kink_t += [self.L(a), self.L(-a)]
        else:
            m_lo, m_hi = mp.mpf(1) / 2, e1 / 2
            dens = lambda x: mp.exp(-x / b) / (2 * b)
            inner = lambda l: self.H(eps + self.L(l), "add")
            kink_t = [-mp.log(1 - q)] if q < 1 else []
            kink_t += [-self.L(a), -self.L(-a)]
        sign = 1 if direction == "rem" else -1
        pts = set()
        for t in kink_t:
            # inner threshold eps - sign*L(l) == t  <=>  L(l) = sign*(eps - t)
            l = self.Linv(sign * (eps - t))
            if l is not None:
                x = self._x_of_l(l)
                if 0 < x < 1:
                    pts.add(x)
        lx = lambda x: (2 * x - 1) / b
        mid = mp.quad(lambda x: dens(x) * inner(lx(x)), sorted({mp.mpf(0), mp.mpf(1)} | pts | {mp.mpf(i) / 16 for i in range(1, 16)}))
        return m_lo * inner(-a) + m_hi * inner(a) + mid


# ----------------------------------------------------------------------------------------
# finite pairs
# ----------------------------------------------------------------------------------------
class FiniteRef:
    """A subsampled finite pair.  P, Q: lists of mpf (or Fractions) on the same outcomes."""

    def __init__(self, P, Q, q):
        q, P, Q = _mpf(q), [_mpf(x) for x in P], [_mpf(x) for x in Q]
        Pm = [(1 - q) * b + q * a for a, b in zip(P, Q)]
        self.dirs = {"rem": (Pm, Q), "add": (Q, Pm)}

    @staticmethod
    def _delta_pair(P, Q, eps, k):
        ee = mp.exp(mp.mpf(eps))
        n = len(P)
        if n == 2:
            return _binom_delta(P, Q, ee, mp.mpf(eps), k)
        tot = mp.mpf(0)
        for c in _compositions(k, n):
            p = mp.mpf(math.factorial(k))
            qq = p
            for ci, pi, qi in zip(c, P, Q):
                f = math.factorial(ci)
                p = p * pi ** ci / f
                qq = qq * qi ** ci / f
            d = p - ee * qq
            if d > 0:
                tot += d
        return tot

    def delta(self, eps, k):
        out = {d: self._delta_pair(P, Q, eps, k) for d, (P, Q) in self.dirs.items()}
        return max(out.values()), out


def _mpf(x):
    if isinstance(x, Fraction):
        return mp.mpf(x.numerator) / x.denominator
    return mp.mpf(x)


def _compositions(k, n):
    if n == 1:
        yield (k,)
        return
    for i in range(k + 1):
        for rest in _compositions(k - i, n - 1):
            yield (i,) + rest


def _binom_delta(P, Q, ee, eps, k):
    """sum_j C(k, j) (P0^j P1^(k-j) - e^eps Q0^j Q1^(k-j))_+ for a two-outcome pair."""
    (p0, p1), (q0, q1) = P, Q
    # outcomes with P-mass 0 contribute nothing; Q-mass 0 with P-mass > 0 is an infinite loss
    if k <= 64 or min(P + Q) <= 0:
        tot = mp.mpf(0)
        lp = [mp.log(x) if x > 0 else None for x in P]
        lq = [mp.log(x) if x > 0 else None for x in Q]
        for j in range(k + 1):
            lc = mp.loggamma(k + 1) - mp.loggamma(j + 1) - mp.loggamma(k - j + 1)
            pt = _term(lc, lp, j, k)
            if pt == 0:
                continue
            qt = _term(lc, lq, j, k)
            d = pt - ee * qt
            if d > 0:
                tot += d
        return tot
    # large k: losses monotone in j; delta = P[J >= j*] - e^eps Q[J >= j*]
    assert min(P + Q) > 0
    l0, l1 = mp.log(p0 / q0), mp.log(p1 / q1)
    if l0 < l1:  # relabel so the loss increases with j
        (p0, p1), (q0, q1), (l0, l1) = (p1, p0), (q1, q0), (l1, l0)
    if l0 == l1:
        return max(mp.mpf(0), 1 - ee)
    jstar = int(mp.floor((eps - k * l1) / (l0 - l1))) + 1
    jstar = min(max(jstar, 0), k + 1)
    return _btail(k, p0, jstar) - ee * _btail(k, q0, jstar)


def _term(lc, lw, j, k):
    a, b = lw
    if (j > 0 and a is None) or (k - j > 0 and b is None):
        return mp.mpf(0)
    s = lc
    if j:
        s += j * a
    if k - j:
        s += (k - j) * b
    return mp.exp(s)


def _btail(k, p, j0):
    """P[Bin(k, p) >= j0], summing outward from j0 on the small side."""
    if j0 <= 0:
        return mp.mpf(1)
    if j0 > k:
        return mp.mpf(0)
    mean = k * p

    def t(j):
        return mp.exp(mp.loggamma(k + 1) - mp.loggamma(j + 1) - mp.loggamma(k - j + 1) + j * mp.log(p) + (k - j) * mp.log1p(-p))

    r = p / (1 - p)
    if j0 >= mean:
        j, term, s = j0, t(j0), mp.mpf(0)
        while j <= k:
            s += term
            if term < s * mp.mpf(10) ** -(DPS + 5):
                break
            term = term * (k - j) / (j + 1) * r
            j += 1
        return s
    j, term, s = j0 - 1, t(j0 - 1), mp.mpf(0)
    while j >= 0:
        s += term
        if term < s * mp.mpf(10) ** -(DPS + 5):
            break
        term = term * j / (k - j + 1) / r
        j -= 1
    return 1 - s


def pair_masses(p):
    """A Pair's distribution: the floats normalised by their exact sum (Pair's docstring)."""
    f = [Fraction(x) for x in p]
    t = sum(f)
    return [x / t for x in f]


def rr_pair(e0):
    e = mp.exp(mp.mpf(e0))
    return [e / (1 + e), 1 / (1 + e)], [1 / (1 + e), e / (1 + e)]


def bb_pair(e0, d0):
    e, d = mp.exp(mp.mpf(e0)), mp.mpf(d0)
    return ([d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), mp.mpf(0)],
            [mp.mpf(0), (1 - d) / (1 + e), (1 - d) * e / (1 + e), d])


def bb_delta(e0, d0, eps, k):
    """k-fold (e0, d0) black box at eps (exact e0, d0 as mpf): 1 - (1-d)^k + (1-d)^k delta_RR."""
    e0, d0 = mp.mpf(e0), mp.mpf(d0)
    P, Q = rr_pair(e0)
    rr = _binom_delta(P, Q, mp.exp(mp.mpf(eps)), mp.mpf(eps), k)
    return 1 - (1 - d0) ** k + (1 - d0) ** k * rr


# ----------------------------------------------------------------------------------------
# the harness
# ----------------------------------------------------------------------------------------
class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


class Audit:
    def __init__(self, verbose=False):
        self.n = 0
        self.fam = {}
        self.violations = []
        self.slow = []
        self.notes = []
        self.verbose = verbose

    def call(self, family, repro, fn):
        """run fn() with warnings as errors and a timer; returns (ok, value)."""
        import optcomp

        self.n += 1
        self.fam[family] = self.fam.get(family, 0) + 1
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, HARD_S)
        t = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                v = fn()
            dt = time.perf_counter() - t
        except _Timeout:
            self.violations.append((family, repro, "TIMEOUT", f">{HARD_S}s"))
            print("VIOLATION", *self.violations[-1], flush=True)
            return False, None
        except (optcomp.ApproxTooCostly, optcomp.ExactTooLarge) as e:
            self.notes.append((family, repro, type(e).__name__, str(e)[:200]))
            return False, None
        except Exception as e:  # noqa: BLE001
            self.violations.append((family, repro, "EXCEPTION", f"{type(e).__name__}: {str(e)[:200]}"))
            print("VIOLATION", *self.violations[-1], flush=True)
            if self.verbose:
                traceback.print_exc()
            return False, None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if dt > 5.0:
            self.slow.append((family, repro, round(dt, 2)))
            if dt > LIMIT_S:
                self.violations.append((family, repro, "SLOW", f"{dt:.1f}s"))
                print("VIOLATION", *self.violations[-1], flush=True)
        return True, v

    def bad(self, family, repro, what, truth, got):
        self.violations.append((family, repro, what, f"truth {truth}; optcomp {got}"))
        print("VIOLATION", family, repro, what, truth, got, flush=True)

    # -- generic checks against a reference delta function dref(eps) -> mpf --------------
    def check_eps(self, family, repro, fn, dref, D, kind, tol, unattainable=False):
        """fn() -> float (upper) or Bounds; D the delta_g target."""
        ok, v = self.call(family, repro, fn)
        if not ok:
            return
        lo, up = (None, v) if kind == "g" else (v.lower, v.upper)
        Dm = mp.mpf(D)
        if up is None or (isinstance(up, float) and math.isnan(up)):
            self.bad(family, repro, "NaN upper", "-", up)
            return
        if math.isinf(up):
            if not unattainable:
                self.bad(family, repro, "inf upper where attainable", "finite", up)
        else:
            d = dref(up)
            if d > Dm * (1 + tol):
                self.bad(family, repro, "UNDER-REPORT eps upper", f"delta(eps_up)={mp.nstr(d, 12)} > {D}", up)
        if lo is not None:
            if lo > up:
                self.bad(family, repro, "lower > upper", "-", (lo, up))
            if math.isinf(lo):
                if not unattainable:
                    self.bad(family, repro, "lower inf where attainable", "-", lo)
            elif lo > 0:
                d = dref(lo)
                if d < Dm * (1 - tol):
                    self.bad(family, repro, "eps lower too high", f"delta(eps_lo)={mp.nstr(d, 12)} < {D}", lo)

    def check_delta(self, family, repro, fn, truth, kind, tol):
        ok, v = self.call(family, repro, fn)
        if not ok:
            return
        lo, up = (None, v) if kind == "g" else (v.lower, v.upper)
        if up is None or math.isnan(up) or up > 1:
            self.bad(family, repro, "delta upper out of [0,1]", mp.nstr(truth, 12), up)
            return
        if mp.mpf(up) < truth * (1 - tol):
            self.bad(family, repro, "UNDER-REPORT delta upper", mp.nstr(truth, 17), up)
        if lo is not None:
            if lo > up or lo < 0:
                self.bad(family, repro, "delta lower out of order", "-", (lo, up))
            if mp.mpf(lo) > truth * (1 + tol):
                self.bad(family, repro, "delta lower above truth", mp.nstr(truth, 17), lo)

    def report(self, t0):
        print(f"\ncalls checked: {self.n} in {time.perf_counter() - t0:.1f} s")
        for f, c in sorted(self.fam.items()):
            print(f"  {f}: {c}")
        print(f"violations: {len(self.violations)}")
        for v in self.violations:
            print("  VIOLATION", *v)
        print(f"calls over 5 s: {len(self.slow)}")
        for s in self.slow:
            print("  SLOW", *s)
        print(f"notes (documented ApproxTooCostly/ExactTooLarge, reference remarks): {len(self.notes)}")
        for s in self.notes[:40]:
            print("  NOTE", *s)


# ----------------------------------------------------------------------------------------
# families
# ----------------------------------------------------------------------------------------
QS = [1e-6, 1e-4, 1e-2, 0.5, ONE_MINUS, 1.0]
SIGMAS = [0.3, 0.5, 1.0, 10.0, 100.0, 1e3]
DGS = [1e-300, 1e-100, 1e-10, 0.5, 1 - 1e-16]
EGS = [0.0, 1e-8, 0.01, 1.0, 10.0, 100.0, 1e4, 1e300]


def fam_gauss(A, quick, k):
    import optcomp
    from optcomp.mechanisms import Gaussian, Subsampled

    if k == 1:
        qs = QS if not quick else [1e-6, 1e-2, 0.5, ONE_MINUS, 1.0]
        ss = SIGMAS if not quick else [0.3, 1.0, 100.0]
        dgs, egs = DGS, EGS
    else:  # each k = 2 reference is a quadrature of ~1 s
        qs = [1e-6, 1e-2, 0.5, 1.0] if not quick else [1e-4, 0.5]
        ss = [0.3, 1.0, 10.0] if not quick else [0.5]
        dgs = [1e-300, 1e-10, 0.5] if not quick else [1e-100, 0.5]
        egs = [0.0, 1.0, 100.0] if not quick else [0.0, 1e4]
    tol = mp.mpf(10) ** -30 if k == 1 else mp.mpf(10) ** -9
    for q, s in product(qs, ss):
        R = GaussRef(q, s)
        M = Subsampled(Gaussian(s), q)
        dref = lambda e, R=R: R.delta(e, k)[0]
        for D in dgs:
            rep = f"epsilon_g(Subsampled(Gaussian({s}), {q!r}), k={k}, delta_g={D!r})"
            A.check_eps(f"gauss_k{k}", rep, lambda: optcomp.epsilon_g(M, k=k, delta_g=D), dref, D, "g", tol)
            rep = f"epsilon_bounds(Subsampled(Gaussian({s}), {q!r}), k={k}, delta_g={D!r})"
            A.check_eps(f"gauss_k{k}", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol)
        edge = []
        if q < 1 and k == 1:  # the add loss's supremum -log(1 - q), and its float neighbours
            top = -math.log1p(-q)
            edge = [math.nextafter(top, 0), top, math.nextafter(top, math.inf)]
        for E in egs + edge:
            tr = dref(E)
            rep = f"delta_g(Subsampled(Gaussian({s}), {q!r}), k={k}, eps_g={E!r})"
            A.check_delta(f"gauss_k{k}", rep, lambda: optcomp.delta_g(M, k=k, eps_g=E), tr, "g", tol)
            rep = f"delta_bounds(Subsampled(Gaussian({s}), {q!r}), k={k}, eps_g={E!r})"
            A.check_delta(f"gauss_k{k}", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), tr, "b", tol)
        if k == 1:  # the mechanism's own profile
            for E in egs[:6]:
                tr = dref(E)
                rep = f"Subsampled(Gaussian({s}), {q!r}).profile_bounds({E!r})"
                A.check_delta("gauss_profile", rep, lambda: M.profile_bounds(E), tr, "b", tol)


def fam_laplace(A, quick, k):
    import optcomp
    from optcomp.mechanisms import Laplace, Subsampled

    qs = [1e-6, 1e-2, 0.5, ONE_MINUS, 1.0] if k == 1 else ([1e-3, 0.5] if quick else [1e-4, 0.1, 0.5, 1.0])
    bs = [0.3, 1.0, 5.0, 100.0] if not quick or k == 1 else [5.0]
    tol = mp.mpf(10) ** -30 if k == 1 else mp.mpf(10) ** -9
    for q, b in product(qs, bs):
        R = LaplaceRef(q, b)
        M = Subsampled(Laplace(b), q)
        dref = lambda e, R=R: R.delta(e, k)[0]
        a = 1 / b
        # eps: 0, at / next to the one-step loss bound log(1 - q + q e^a), bulk, huge
        top = float(R.L(mp.mpf(a)))
        egs = [0.0, 0.01, top, math.nextafter(top, 0), math.nextafter(top, math.inf), k * top, 1e4]
        if quick and k == 2:
            egs = [0.0, 0.01, top, 2 * top]
        for E in egs:
            tr = dref(E)
            rep = f"delta_bounds(Subsampled(Laplace({b}), {q!r}), k={k}, eps_g={E!r})"
            A.check_delta(f"laplace_k{k}", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), tr, "b", tol)
        for D in ([1e-300, 1e-10, 0.5] if k == 1 or not quick else [1e-10]):
            unatt = False  # Laplace: delta(eps) = 0 beyond k*a, never unattainable
            rep = f"epsilon_bounds(Subsampled(Laplace({b}), {q!r}), k={k}, delta_g={D!r})"
            A.check_eps(f"laplace_k{k}", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol, unatt)


def fam_random(A, quick):
    """Random points on log scales, one step, Gaussian and Laplace bases: q in [1e-6, 1],
    sigma / scale in [0.3, 1e3], delta_g in [1e-300, 0.9]; then delta at the eps found."""
    import random

    import optcomp
    from optcomp.mechanisms import Gaussian, Laplace, Subsampled

    rnd = random.Random(20261128)
    tol = mp.mpf(10) ** -30
    for i in range(12 if quick else 120):
        q = 10 ** rnd.uniform(-6, 0)
        s = 10 ** rnd.uniform(math.log10(0.3), 3)
        D = 10 ** rnd.uniform(-300, math.log10(0.9))
        for name, R, M in [("Gaussian", GaussRef(q, s), Subsampled(Gaussian(s), q)),
                           ("Laplace", LaplaceRef(q, s), Subsampled(Laplace(s), q))]:
            dref = lambda e, R=R: R.delta(e, 1)[0]
            rep = f"epsilon_bounds(Subsampled({name}({s!r}), {q!r}), k=1, delta_g={D!r})"
            A.check_eps("random_k1", rep, lambda: optcomp.epsilon_bounds(M, k=1, delta_g=D), dref, D, "b", tol)
            E = rnd.choice([0.0, 10 ** rnd.uniform(-8, 3)])
            rep = f"delta_bounds(Subsampled({name}({s!r}), {q!r}), k=1, eps_g={E!r})"
            A.check_delta("random_k1", rep, lambda: optcomp.delta_bounds(M, k=1, eps_g=E), dref(E), "b", tol)


def fam_laplace_direction(A):
    """The issue's own case: Laplace(5), q = 0.5: add exceeds remove at k = 2."""
    import optcomp
    from optcomp.mechanisms import Laplace, Subsampled

    R = LaplaceRef(0.5, 5.0)
    M = Subsampled(Laplace(5.0), 0.5)
    for E in [0.05, 0.1, 0.15]:
        tr, per = R.delta(E, 2)
        rep = f"delta_bounds(Subsampled(Laplace(5.0), 0.5), k=2, eps_g={E})"
        A.check_delta("laplace_dirs", rep, lambda: optcomp.delta_bounds(M, k=2, eps_g=E), tr, "b", mp.mpf(10) ** -12)
        if per["add"] <= per["rem"]:
            A.notes.append(("laplace_dirs", rep, "reference: add does not exceed remove", str(per)))


def fam_finite(A, quick):
    import optcomp
    from optcomp.mechanisms import BlackBox, Pair, RandomizedResponse, Subsampled

    tol = mp.mpf(10) ** -30
    # Subsampled RR: two outcomes, any k (binomial tails)
    ks = [1, 2, 10, 1000, 10 ** 5] + ([] if quick else [10 ** 7])
    if quick:
        ks = [1, 10, 1000]
    for e0, q in product([0.1, 1.0, 5.0], [1e-6, 1e-2, 0.5, ONE_MINUS]):
        if quick and (e0, q) not in [(1.0, 1e-2), (5.0, 1e-6), (0.1, 0.5), (5.0, ONE_MINUS)]:
            continue
        P, Q = rr_pair(e0)
        R = FiniteRef(P, Q, q)
        M = Subsampled(RandomizedResponse(e0), q)
        l1 = float(mp.log(((1 - mp.mpf(q)) * Q[0] + mp.mpf(q) * P[0]) / Q[0]))
        for k in ks:
            if quick and k == 10 ** 5 and q != 1e-2:
                continue
            dref = lambda e, R=R, k=k: R.delta(e, k)[0]
            egs = [0.0, l1, math.nextafter(l1, math.inf), k * l1, math.nextafter(k * l1, 0), 1e4]
            for E in egs:
                tr = dref(E)
                rep = f"delta_bounds(Subsampled(RandomizedResponse({e0}), {q!r}), k={k}, eps_g={E!r})"
                A.check_delta("rr", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), tr, "b", tol)
            for D in [1e-300, 1e-10, 0.5]:
                rep = f"epsilon_bounds(Subsampled(RandomizedResponse({e0}), {q!r}), k={k}, delta_g={D!r})"
                A.check_eps("rr", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol)
                if k <= 1000 and not (quick and k == 1000):
                    rep = f"epsilon_g(Subsampled(RandomizedResponse({e0}), {q!r}), k={k}, delta_g={D!r}, method='optimal')"
                    A.check_eps("rr", rep, lambda: optcomp.epsilon_g(M, k=k, delta_g=D, method="optimal"), dref, D, "g", tol)
    # Subsampled BlackBox (4 outcomes): small k
    for (e0, d0), q in product([(1.0, 1e-6), (0.5, 0.0), (3.0, 0.01)], [1e-4, 0.1, ONE_MINUS]):
        P, Q = bb_pair(e0, d0)
        R = FiniteRef(P, Q, q)
        M = Subsampled(BlackBox(e0, d0), q)
        for k in ([1, 3] if quick else [1, 2, 5, 12]):
            dref = lambda e, R=R, k=k: R.delta(e, k)[0]
            unatt = lambda D: d0 > 0 and dref(mp.inf if False else 1e6) > D
            for E in [0.0, 0.01, 1.0, 30.0]:
                tr = dref(E)
                rep = f"delta_bounds(Subsampled(BlackBox({e0}, {d0}), {q!r}), k={k}, eps_g={E!r})"
                A.check_delta("blackbox", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), tr, "b", tol)
            for D in [1e-300, 1e-10, 0.3]:
                # unattainable iff the mass at +inf, 1 - (1 - q d0)^k, exceeds D
                atinf = 1 - (1 - mp.mpf(q) * mp.mpf(d0)) ** k
                rep = f"epsilon_bounds(Subsampled(BlackBox({e0}, {d0}), {q!r}), k={k}, delta_g={D!r})"
                A.check_eps("blackbox", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol,
                            unattainable=atinf > D)
    # Subsampled Profile of one guarantee: the black box's pair (Dong-Roth-Su trade-off f_{e,d})
    from optcomp.mechanisms import Profile
    for (e0, d0), q in product([(1.0, 1e-6), (2.0, 0.0)], [1e-3, 0.5]):
        P, Q = bb_pair(e0, d0)
        R = FiniteRef(P, Q, q)
        M = Subsampled(Profile(((e0, d0),)), q)
        for k in [1, 3]:
            dref = lambda e, R=R, k=k: R.delta(e, k)[0]
            atinf = 1 - (1 - mp.mpf(q) * mp.mpf(d0)) ** k
            for E in [0.0, 0.5, 30.0]:
                rep = f"delta_bounds(Subsampled(Profile((({e0}, {d0}),)), {q!r}), k={k}, eps_g={E!r})"
                A.check_delta("profile", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), dref(E), "b", tol)
            for D in [1e-300, 1e-8]:
                rep = f"epsilon_bounds(Subsampled(Profile((({e0}, {d0}),)), {q!r}), k={k}, delta_g={D!r})"
                A.check_eps("profile", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol, atinf > D)
    # Subsampled Pair (3 outcomes, asymmetric, a zero)
    pairs = [((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), ((0.7, 0.3, 0.0), (0.1, 0.4, 0.5)), ((0.25, 0.75, 0.0), (0.0, 0.5, 0.5))]
    for (p, qq), q in product(pairs, [1e-3, 0.3, 1.0]):
        R = FiniteRef(pair_masses(p), pair_masses(qq), Fraction(q))
        M = Subsampled(Pair(p, qq), q)
        for k in ([1, 4] if quick else [1, 2, 4, 9]):
            dref = lambda e, R=R, k=k: R.delta(e, k)[0]
            atinf = max(R.delta(1e6, k)[1].values())
            # an atom of the composed loss: k times the one-step remove loss of outcome 0
            Pm, Qd = R.dirs["rem"]
            l0 = max(float(mp.log(a / b)) for a, b in zip(Pm, Qd) if a > 0 and b > 0)
            for E in [0.0, k * l0, math.nextafter(k * l0, 0), math.nextafter(k * l0, math.inf), 40.0]:
                if E < 0:
                    continue
                tr = dref(E)
                rep = f"delta_bounds(Subsampled(Pair({p}, {qq}), {q!r}), k={k}, eps_g={E!r})"
                A.check_delta("pair", rep, lambda: optcomp.delta_bounds(M, k=k, eps_g=E), tr, "b", tol)
            for D in [1e-300, 1e-10, 0.3]:
                rep = f"epsilon_bounds(Subsampled(Pair({p}, {qq}), {q!r}), k={k}, delta_g={D!r})"
                A.check_eps("pair", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D), dref, D, "b", tol,
                            unattainable=atinf > D)


def fam_nested_wor(A, quick):
    import optcomp
    from optcomp.mechanisms import BlackBox, Gaussian, Subsampled

    tol = mp.mpf(10) ** -30
    for q1, q2, s in [(0.5, 0.02, 1.0), (1e-3, 1e-3, 0.5), (ONE_MINUS, 0.5, 2.0)]:
        qe = Fraction(q1) * Fraction(q2)
        R = GaussRef(mp.mpf(qe.numerator) / qe.denominator, s)
        rep0 = f"Subsampled(Subsampled(Gaussian({s}), {q1!r}), {q2!r})"
        ok, M = A.call("nested", rep0, lambda: Subsampled(Subsampled(Gaussian(s), q1), q2))
        if not ok:
            continue
        dref = lambda e, R=R: R.delta(e, 1)[0]
        for E in [0.0, 0.1, 3.0]:
            A.check_delta("nested", f"delta_bounds({rep0}, k=1, eps_g={E})",
                          lambda: optcomp.delta_bounds(M, k=1, eps_g=E), dref(E), "b", tol)
        for D in [1e-300, 1e-6]:
            A.check_eps("nested", f"epsilon_bounds({rep0}, k=1, delta_g={D})",
                        lambda: optcomp.epsilon_bounds(M, k=1, delta_g=D), dref, D, "b", tol)
    # without replacement, replace-one: BlackBox(e, d) -> BlackBox(log(1 + q(e^e - 1)), q d)
    for (e0, d0), q, k in product([(1.0, 1e-6), (0.2, 0.0)], [1e-6, 0.01, ONE_MINUS], [1, 10, 1000]):
        ee = mp.log(1 + mp.mpf(q) * mp.expm1(e0))
        dd = mp.mpf(q) * d0
        dref = lambda e, ee=ee, dd=dd, k=k: bb_delta(ee, dd, e, k)
        rep0 = f"Subsampled(BlackBox({e0}, {d0}), {q!r}, scheme='without_replacement', relation='replace_one')"
        ok, M = A.call("wor", rep0, lambda: Subsampled(BlackBox(e0, d0), q, scheme="without_replacement", relation="replace_one"))
        if not ok:
            continue
        for E in [0.0, 0.5, 5.0]:
            A.check_delta("wor", f"delta_bounds({rep0}, k={k}, eps_g={E})",
                          lambda: optcomp.delta_bounds(M, k=k, eps_g=E), dref(E), "b", mp.mpf(10) ** -12)
        for D in [1e-300, 1e-8, 0.5]:
            atinf = 1 - (1 - dd) ** k
            A.check_eps("wor", f"epsilon_g({rep0}, k={k}, delta_g={D})",
                        lambda: optcomp.epsilon_g(M, k=k, delta_g=D), dref, D, "g", mp.mpf(10) ** -12, atinf > D)


def fam_entry(A, quick):
    """Other entry points against the same references: counts=, mixtures with black boxes,
    Accountant (+ JSON), privacy_curve, dpsgd, the dp_accounting adapter."""
    import optcomp
    from optcomp.mechanisms import BlackBox, Gaussian, RandomizedResponse, Subsampled
    from optcomp import dpsgd

    tol = mp.mpf(10) ** -12
    for q, s in ([(1e-2, 1.0), (0.5, 0.5), (1e-4, 0.3)] if not quick else [(1e-2, 1.0)]):
        R = GaussRef(q, s)
        M = Subsampled(Gaussian(s), q)
        d2 = lambda e, R=R: R.delta(e, 2)[0]
        for D in [1e-300, 1e-8]:
            rep = f"epsilon_bounds([Subsampled(Gaussian({s}), {q!r})], counts=[2], delta_g={D})"
            A.check_eps("entry_counts", rep, lambda: optcomp.epsilon_bounds([M], counts=[2], delta_g=D), d2, D, "b", tol)
            rep = f"epsilon_bounds([M, M]) for M = Subsampled(Gaussian({s}), {q!r}), delta_g={D}"
            A.check_eps("entry_counts", rep, lambda: optcomp.epsilon_bounds([M, M], delta_g=D), d2, D, "b", tol)
            rep = f"Accountant().compose(Subsampled(Gaussian({s}), {q!r}), count=2).get_epsilon({D})"
            A.check_eps("entry_accountant", rep, lambda: optcomp.Accountant().compose(M, count=2).get_epsilon(D), d2, D, "g", tol)
            rep = f"Accountant.from_dict(Accountant().compose(Subsampled(Gaussian({s}), {q!r}), count=2).to_dict()).get_epsilon({D})"
            A.check_eps("entry_accountant", rep,
                        lambda: optcomp.Accountant.from_dict(optcomp.Accountant().compose(M, count=2).to_dict()).get_epsilon(D),
                        d2, D, "g", tol)
        # dp_accounting adapter
        try:
            import dp_accounting as dpa
            from optcomp.integrations.dp_accounting import OptcompAccountant
        except ImportError:
            dpa = None
        if dpa is not None:
            ev = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s))
            for D in [1e-300, 1e-8]:
                rep = f"OptcompAccountant().compose(PoissonSampledDpEvent({q!r}, GaussianDpEvent({s})), 2).get_epsilon({D})"
                A.check_eps("entry_dp_accounting", rep,
                            lambda: OptcompAccountant().compose(ev, 2).get_epsilon(D), d2, D, "g", tol)
            for E in [0.5, 5.0]:
                rep = f"OptcompAccountant().compose(PoissonSampledDpEvent({q!r}, GaussianDpEvent({s})), 2).get_delta({E})"
                A.check_delta("entry_dp_accounting", rep, lambda: OptcompAccountant().compose(ev, 2).get_delta(E), d2(E), "g", tol)
        # privacy_curve at k = 1: every grid point's delta >= truth, delta_lower <= truth
        R1 = lambda e, R=R: R.delta(e, 1)[0]
        rep = f"privacy_curve(Subsampled(Gaussian({s}), {q!r}), k=1, num=9)"
        ok, c = A.call("entry_curve", rep, lambda: optcomp.privacy_curve(M, k=1, num=9))
        if ok:
            for i, e in enumerate(c.eps_g):
                tr = R1(float(e))
                if mp.mpf(float(c.delta[i])) < tr * (1 - tol):
                    A.bad("entry_curve", rep + f" at eps_g={float(e)!r}", "UNDER-REPORT curve delta", mp.nstr(tr, 17), float(c.delta[i]))
                if c.delta_lower is not None and mp.mpf(float(c.delta_lower[i])) > tr * (1 + tol):
                    A.bad("entry_curve", rep + f" at eps_g={float(e)!r}", "curve delta_lower above truth", mp.nstr(tr, 17), float(c.delta_lower[i]))
    # mixture: Subsampled RR + black boxes, exact reference (enumeration of the product pair)
    for q, e0, (be, bd) in [(0.01, 1.0, (0.3, 1e-7)), (0.5, 2.0, (1.0, 0.0))]:
        P, Q = rr_pair(e0)
        Rr = FiniteRef(P, Q, q)
        Pb, Qb = bb_pair(be, bd)
        M = Subsampled(RandomizedResponse(e0), q)

        def dmix(e, Rr=Rr, Pb=Pb, Qb=Qb):
            best = mp.mpf(0)
            for d in ("rem", "add"):
                Pr, Qr = Rr.dirs[d]
                # product of 3 subsampled RR steps and 2 black boxes (black box symmetric)
                P3 = [a * b * c for a, b, c in product(Pr, Pr, Pr)]
                Q3 = [a * b * c for a, b, c in product(Qr, Qr, Qr)]
                PB = [a * b for a, b in product(Pb, Pb)]
                QB = [a * b for a, b in product(Qb, Qb)]
                ee = mp.exp(mp.mpf(e))
                tot = mp.mpf(0)
                for (p1, q1), (p2, q2) in product(zip(P3, Q3), zip(PB, QB)):
                    v = p1 * p2 - ee * q1 * q2
                    if v > 0:
                        tot += v
                best = max(best, tot)
            return best

        atinf = 1 - (1 - mp.mpf(bd)) ** 2
        for D in [1e-12, 1e-4]:
            rep = f"epsilon_bounds([Subsampled(RandomizedResponse({e0}), {q}), {be}], [0, {bd}], counts=[3, 2], delta_g={D})"
            A.check_eps("entry_mixed", rep, lambda: optcomp.epsilon_bounds([M, be], [0, bd], counts=[3, 2], delta_g=D),
                        dmix, D, "b", mp.mpf(10) ** -30, atinf > D)
            rep = f"epsilon_bounds([Subsampled(RandomizedResponse({e0}), {q}), BlackBox({be}, {bd})], counts=[3, 2], delta_g={D})"
            A.check_eps("entry_mixed", rep,
                        lambda: optcomp.epsilon_bounds([M, BlackBox(be, bd)], counts=[3, 2], delta_g=D),
                        dmix, D, "b", mp.mpf(10) ** -30, atinf > D)
        for E in [0.0, 1.0, 4.0]:
            rep = f"delta_bounds([Subsampled(RandomizedResponse({e0}), {q}), {be}], [0, {bd}], counts=[3, 2], eps_g={E})"
            A.check_delta("entry_mixed", rep, lambda: optcomp.delta_bounds([M, be], [0, bd], counts=[3, 2], eps_g=E),
                          dmix(E), "b", mp.mpf(10) ** -30)
    # dpsgd inverse problems checked at 1 and 2 steps
    for q, E, D, steps in [(0.01, 1.0, 1e-5, 1), (0.3, 2.0, 1e-10, 2), (1e-4, 0.01, 1e-6, 1), (1.0, 1.0, 1e-5, 2)]:
        rep = f"dpsgd.noise_multiplier({q}, {steps}, {E}, {D})"
        ok, c = A.call("entry_dpsgd", rep, lambda: dpsgd.noise_multiplier(q, steps, E, D))
        if ok:
            tr = GaussRef(q, c.value).delta(E, steps)[0]
            if tr > D * (1 + tol):
                A.bad("entry_dpsgd", rep, "UNDER-REPORT calibrated sigma", f"delta(sigma={c.value!r})={mp.nstr(tr, 12)} > {D}", c.value)
            s2 = c.value / 1.01
            tr2 = GaussRef(q, s2).delta(E, steps)[0]
            if tr2 <= D:
                A.notes.append(("entry_dpsgd", rep, "sigma/1.01 also within budget (not tight to 1%)", f"{c.value}"))
    for s, q, E, D in [(1.0, 0.01, 0.05, 1e-5), (2.0, 0.5, 0.9, 1e-6)]:
        rep = f"dpsgd.max_steps({s}, {q}, {E}, {D})"
        ok, c = A.call("entry_dpsgd", rep, lambda: dpsgd.max_steps(s, q, E, D))
        if ok:
            n = c.value
            R = GaussRef(q, s)
            if 1 <= n <= 2 and R.delta(E, n)[0] > D * (1 + tol):
                A.bad("entry_dpsgd", rep, "UNDER-REPORT max_steps", f"delta at {n} steps > {D}", n)
            if n < 2 and R.delta(E, n + 1)[0] <= D * (1 - tol):
                A.notes.append(("entry_dpsgd", rep, f"{n + 1} steps fit (reference)", n))
            if n > 2:
                A.notes.append(("entry_dpsgd", rep, "max_steps > 2: not checked against a reference", n))
    for s, E, D in [(1.0, 1.0, 1e-5), (0.5, 0.5, 1e-8)]:
        rep = f"dpsgd.max_sampling_rate({s}, 1, {E}, {D})"
        ok, c = A.call("entry_dpsgd", rep, lambda: dpsgd.max_sampling_rate(s, 1, E, D))
        if ok:
            tr = GaussRef(c.value, s).delta(E, 1)[0]
            if tr > D * (1 + tol):
                A.bad("entry_dpsgd", rep, "UNDER-REPORT max_sampling_rate", f"delta(q={c.value!r})={mp.nstr(tr, 12)}", c.value)


def fam_large_k(A, quick):
    """No reference beyond k = 2 for continuous bases: monotonicity cross-checks (the optimum is
    nondecreasing in k and in q, nonincreasing in sigma), so upper(k2) >= lower(k1) for k2 >= k1."""
    import optcomp
    from optcomp.mechanisms import Gaussian, Subsampled

    ks = [1, 2, 100, 10 ** 4, 10 ** 6, 10 ** 9, 10 ** 12] if not quick else [1, 100, 10 ** 6]
    cases = [(1e-6, 1.0), (1e-3, 0.8), (0.01, 10.0), (0.5, 100.0)] if not quick else [(1e-3, 0.8)]
    for q, s in cases:
        M = Subsampled(Gaussian(s), q)
        for D in ([1e-300, 1e-10, 0.5] if not quick else [1e-10]):
            prev = None
            for k in ks:
                rep = f"epsilon_bounds(Subsampled(Gaussian({s}), {q!r}), k={k}, delta_g={D})"
                ok, b = A.call("large_k", rep, lambda: optcomp.epsilon_bounds(M, k=k, delta_g=D, tol=1e-2))
                if not ok:
                    continue
                if not (0 <= b.lower <= b.upper) or math.isinf(b.upper):
                    A.bad("large_k", rep, "bounds out of order / inf", "-", b)
                if prev is not None and b.upper < prev[1].lower:
                    A.bad("large_k", rep, "UNDER-REPORT (not monotone in k)", f"k={prev[0]} lower {prev[1].lower}", b.upper)
                prev = (k, b)


def fam_bad_input(A):
    from optcomp.mechanisms import Gaussian, Subsampled, Laplace

    cases = [
        ("q", lambda: Subsampled(Gaussian(1.0), 0.0), ValueError),
        ("q", lambda: Subsampled(Gaussian(1.0), -0.1), ValueError),
        ("q", lambda: Subsampled(Gaussian(1.0), 1.0000001), ValueError),
        ("q", lambda: Subsampled(Gaussian(1.0), float("nan")), ValueError),
        ("q", lambda: Subsampled(Gaussian(1.0), float("inf")), ValueError),
        ("q", lambda: Subsampled(Gaussian(1.0), "0.1"), TypeError),
        ("q", lambda: Subsampled(Gaussian(1.0), None), TypeError),
        ("sigma", lambda: Subsampled(Gaussian(-1.0), 0.1), ValueError),
        ("sigma", lambda: Subsampled(Gaussian(0.0), 0.1), ValueError),
        ("sigma", lambda: Subsampled(Gaussian(float("nan")), 0.1), ValueError),
        ("mechanism", lambda: Subsampled(1.0, 0.1), TypeError),
        ("mechanism", lambda: Subsampled("gaussian", 0.1), TypeError),
        ("scheme", lambda: Subsampled(Gaussian(1.0), 0.1, scheme="shuffle"), ValueError),
        ("relation", lambda: Subsampled(Gaussian(1.0), 0.1, relation="swap"), ValueError),
        ("replace_one", lambda: Subsampled(Gaussian(1.0), 0.1, relation="replace_one"), ValueError),
        ("without_replacement", lambda: Subsampled(Laplace(1.0), 0.1, scheme="without_replacement", relation="replace_one"), ValueError),
        ("without_replacement", lambda: Subsampled(Gaussian(1.0), 0.1, scheme="without_replacement"), ValueError),
    ]
    # k and targets on a subsampled mechanism
    import optcomp
    M = Subsampled(Gaussian(1.0), 0.1)
    cases += [
        ("k", lambda: optcomp.epsilon_g(M, k=0, delta_g=1e-5), ValueError),
        ("k", lambda: optcomp.epsilon_g(M, k=10 ** 13, delta_g=1e-5), ValueError),
        ("delta_g", lambda: optcomp.epsilon_g(M, k=1, delta_g=-1e-300), ValueError),
        ("delta_g", lambda: optcomp.epsilon_g(M, k=1, delta_g=1.5), ValueError),
        ("delta_g", lambda: optcomp.epsilon_g(M, k=1, delta_g=float("nan")), ValueError),
        ("eps_g", lambda: optcomp.delta_g(M, k=1, eps_g=-1.0), ValueError),
        ("eps_g", lambda: optcomp.delta_g(M, k=1, eps_g=float("nan")), ValueError),
    ]
    for name, fn, exc in cases:
        A.n += 1
        A.fam["bad_input"] = A.fam.get("bad_input", 0) + 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fn()
        except exc as e:
            if name not in str(e):
                A.notes.append(("bad_input", name, f"{type(e).__name__} does not name {name!r}", str(e)[:160]))
        except Exception as e:  # noqa: BLE001
            A.bad("bad_input", name, f"expected {exc.__name__}", "-", f"{type(e).__name__}: {str(e)[:160]}")
        else:
            A.bad("bad_input", name, f"expected {exc.__name__}", "-", "accepted")


FAMILIES = {
    "gauss1": lambda A, q: fam_gauss(A, q, 1),
    "gauss2": lambda A, q: fam_gauss(A, q, 2),
    "laplace1": lambda A, q: fam_laplace(A, q, 1),
    "laplace2": lambda A, q: fam_laplace(A, q, 2),
    "laplace_dirs": lambda A, q: fam_laplace_direction(A),
    "random": fam_random,
    "finite": fam_finite,
    "nested_wor": fam_nested_wor,
    "entry": fam_entry,
    "large_k": fam_large_k,
    "bad_input": lambda A, q: fam_bad_input(A),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a subset (< 3 min)")
    ap.add_argument("--only", nargs="*", choices=sorted(FAMILIES), help="families to run")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    global HARD_S
    if a.quick:
        HARD_S = 20.0
    mp.mp.dps = DPS
    A = Audit(a.verbose)
    t0 = time.perf_counter()
    for name in a.only or FAMILIES:
        t = time.perf_counter()
        n0 = A.n
        FAMILIES[name](A, a.quick)
        print(f"[{name}] {A.n - n0} calls, {time.perf_counter() - t:.1f} s, violations so far {len(A.violations)}", flush=True)
    A.report(t0)
    return 1 if A.violations else 0


if __name__ == "__main__":
    sys.exit(main())
