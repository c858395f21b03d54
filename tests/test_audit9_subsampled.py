"""Audit of beab9fd (Subsampled at tiny rates and huge eps), against references written from the
definitions in mpmath at 4000-6000 bits:

* ``_delta_mp``: the forward threshold x - log s beyond x = 4 prec and the add direction's
  zero once x + log(1 - s) > 1, against the hockey-stick sum of the mixed pair
  ((1 - s)Q + sP, Q) / (Q, (1 - s)Q + sP) of randomized response;
* ``_points`` (the float path of a base with point masses, a Laplace): the bracket
  [y - yerr, y + yerr] of each moved position must hold g([l - e, l + e]),
  g(l) = log(1 - s + s e^l).  At s = 1 - 2^-53 and l = -50 the 128-bit log1p(s expm1(l))
  loses ~2^-128 / (1 - s + s e^l) ~ 2^-75 of its value to the rounding of s expm1(l), charged
  only (1 + |y|) 2^-122: the bracket missed the truth by ~1.5e-23 (now the sum of two positive
  terms where s expm1(l) < -1/2);
* ``loss._solve`` (black boxes' enumerated path): at delta_g = 8.3e-317 the root's offset y is
  subnormal, its division's rounding absolute (2^-1075), which a relative charge missed: the
  upper end of RandomizedResponse(1e-300) was one float below the root;
* end to end: delta_bounds, delta_g(method="optimal") and epsilon_bounds of 1-2 copies of small
  subsampled finite laws at rates 1e-300 .. 1 - 2^-53, on and next to atoms, against the
  outcome-by-outcome enumeration of the k-fold product.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import pytest
from mpmath import mpf

import optcomp
from optcomp.mechanisms import FORWARD, REVERSE, BlackBox, Laplace, Pair, RandomizedResponse, Subsampled

TIE = mpmath.ldexp(1, -3900)  # the reference's own rounding at 4000 bits, absolute (exact ties at atoms)


def _rr(eps):
    e = mpf(eps)
    hi, lo = 1 / (1 + mpmath.exp(-e)), 1 / (1 + mpmath.exp(e))
    return [hi, lo], [lo, hi]


def _bb(eps, d):
    e, d = mpf(eps), mpf(d)
    hi, lo = (1 - d) / (1 + mpmath.exp(-e)), (1 - d) / (1 + mpmath.exp(e))
    return [d, hi, lo, mpf(0)], [mpf(0), lo, hi, d]


def _pair(p, q):
    sp, sq = sum(map(Fraction, p)), sum(map(Fraction, q))

    def mp(r):
        return mpf(r.numerator) / r.denominator

    return [mp(Fraction(a) / sp) for a in p], [mp(Fraction(b) / sq) for b in q]


def _directions(P, Q, s, k):
    s = mpf(s)
    mix = [(1 - s) * b + s * a for a, b in zip(P, Q)]
    out = []
    for pp, qq in ((mix, Q), (Q, mix)):  # remove, add
        outs = []
        for idx in itertools.product(range(len(pp)), repeat=k):
            a = b = mpf(1)
            for i in idx:
                a, b = a * pp[i], b * qq[i]
            outs.append((a, b))
        out.append(outs)
    return out


def _delta(dirs, x):
    ex = mpmath.exp(mpf(x))
    return max(mpmath.fsum(max(a - ex * b, 0) for a, b in outs) for outs in dirs)


def _atoms(dirs):
    xs = set()
    for outs in dirs:
        for a, b in outs:
            if a > 0 and b > 0:
                lv = mpmath.log(a) - mpmath.log(b)
                if 0 <= lv < mpf(1.7e308):
                    v = float(lv)
                    xs |= {v, math.nextafter(v, math.inf), math.nextafter(v, 0.0)}
    return sorted(xs)


@pytest.mark.parametrize("eps", [520.0, 1e4, 1e308])
@pytest.mark.parametrize("s", [1e-300, 1e-10, 0.5, 1 - 2**-53])
def test_delta_mp_far_thresholds(eps, s):
    m = Subsampled(RandomizedResponse(eps), s)
    for x in [512.0, 512.0 + 2**-40, 519.0, eps - 1.0, eps + 10.0, 1e300]:
        for d in (FORWARD, REVERSE):
            with mpmath.workprec(128):
                v, e = m._delta_mp(mpf(x), d)
            with mpmath.workprec(6000):
                P, Q = _rr(eps)  # (at 6000 bits)
                S = mpf(s)
                mix = [(1 - S) * b + S * a for a, b in zip(P, Q)]
                pp, qq = (mix, Q) if d == FORWARD else (Q, mix)
                ex = mpmath.exp(mpf(x))
                t = mpmath.fsum(max(a - ex * b, 0) for a, b in zip(pp, qq))
                assert v - e <= t <= v + e, (eps, s, x, d, v, e, t)


def test_points_position_brackets_hold_the_moved_atom():
    s = 1 - 2**-53
    m = Subsampled(Laplace(0.02), s)
    base = Laplace(0.02)._points(FORWARD)
    moved = m._points(FORWARD)
    with mpmath.workprec(3000):
        S = mpf(s)

        def g(v):
            return mpmath.log(1 - S + S * mpmath.exp(v))

        for y, ye, lv, le in zip(moved.loss, moved.perr, base.loss, base.perr):
            lo, hi = g(mpf(lv) - mpf(le)), g(mpf(lv) + mpf(le))
            assert mpf(y) - mpf(ye) <= lo and hi <= mpf(y) + mpf(ye), (lv, y, ye, lo, hi)


CASES = [  # (mechanism, its pair from the definitions (built at 4000 bits), rate)
    (Subsampled(RandomizedResponse(1.0), 1e-300), lambda: _rr(1.0), 1e-300),
    (Subsampled(RandomizedResponse(1e300), 1e-10), lambda: _rr(1e300), 1e-10),
    (Subsampled(BlackBox(2.0, 1e-6), 1e-150), lambda: _bb(2.0, 1e-6), 1e-150),
    (Subsampled(BlackBox(1e-300, 1e-300), 0.25), lambda: _bb(1e-300, 1e-300), 0.25),
    (Subsampled(Pair((0.25, 0.25, 0.5), (0.5, 0.25, 0.25)), 1 - 2**-53),
     lambda: _pair((0.25, 0.25, 0.5), (0.5, 0.25, 0.25)), 1 - 2**-53),
    (Subsampled(Pair((1e-300, 1 - 1e-300), (2e-300, 1 - 2e-300)), 3.2693271715561115e-284),
     lambda: _pair((1e-300, 1 - 1e-300), (2e-300, 1 - 2e-300)), 3.2693271715561115e-284),
]


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_subsampled_brackets_hold_the_enumeration(case, k):
    mech, pair, s = CASES[case]
    with mpmath.workprec(4000):
        dirs = _directions(*pair(), s, k)
        xs = [0.0, 1.0] + _atoms(dirs)[:6]
    for x in xs:
        try:
            b = optcomp.delta_bounds([mech], counts=[k], eps_g=x)
        except optcomp.ApproxTooCostly as exc:
            b = exc.bounds
        try:
            v = optcomp.delta_g([mech], counts=[k], eps_g=x, method="optimal")
        except optcomp.ExactTooLarge:
            v = math.inf
        with mpmath.workprec(4000):
            t = _delta(dirs, x)
            assert mpf(b.lower) <= t + TIE and t - TIE <= mpf(b.upper), (x, b, t)
            assert t - TIE <= mpf(v), (x, v, t)
    for d in [1e-300, 1e-12, 0.3 * s]:
        try:
            b = optcomp.epsilon_bounds([mech], counts=[k], delta_g=d)
        except optcomp.ApproxTooCostly as exc:
            b = exc.bounds
        with mpmath.workprec(4000):
            if b.upper < math.inf:
                assert _delta(dirs, b.upper) - TIE <= mpf(d), (d, b)
            if b.lower == math.inf:
                assert _delta(dirs, 1.7e308) > mpf(d), (d, b)
            elif b.lower > 0:
                assert _delta(dirs, b.lower) + TIE >= mpf(d), (d, b)


def test_epsilon_upper_end_at_a_subnormal_delta():
    # randomized response (= the black box (1e-300, 0), and Subsampled(., 1.0)): delta(x) =
    # (e^eps - e^x)_+ / (1 + e^eps); at x one float below eps it is ulp(eps)/2 (1 + ~5e-301), of
    # which the float d is the part ulp/2: the least x with delta(x) <= d lies strictly between
    # that float and eps, so the upper end must be eps itself
    eps = 1e-300
    x = math.nextafter(eps, 0.0)
    with mpmath.workprec(3000):
        E = mpf(eps)

        def delta(v):
            return max((mpmath.exp(E) - mpmath.exp(mpf(v))) / (1 + mpmath.exp(E)), mpf(0))

        d = float(delta(x))
    for mech in (RandomizedResponse(eps), BlackBox(eps, 0.0), Subsampled(RandomizedResponse(eps), 1.0)):
        b = optcomp.epsilon_bounds([mech], delta_g=d)
        with mpmath.workprec(3000):
            assert delta(b.upper) <= mpf(d), (mech, d, b)
