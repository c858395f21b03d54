"""optcomp.mechanisms (issue 18 groundwork): privacy profiles against references written from
the definitions, certified upper/lower discrete pairs, validation.

The references below never call the code under test: each is the hockey-stick divergence
delta(x) = ∫ (p − e^x q)_+ (or the sum over outcomes) of the mechanism's two output
distributions, written from the mechanism's definition and evaluated in mpmath at 40-50
digits (numerical integration split at the density's kinks, or direct summation with the
truncated tail far below the tolerance)."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp.mechanisms import (BlackBox, DiscreteGaussian, DiscretePair, Gaussian, Geometric, Laplace, Pair,
                                Profile, RandomizedResponse, Staircase)

DPS = 40


# ------------------------------------------------------------------------------------------
# references from the definitions

def _hs(p_list, q_list, x):
    """Σ (p − e^x q)_+ over outcomes (mpmath)."""
    ex = mpmath.exp(mpmath.mpf(x))
    return mpmath.fsum(max(mpmath.mpf(0), p - ex * q) for p, q in zip(p_list, q_list))


def ref_laplace(b, sens, x):
    """∫ (Lap(0,b) − e^x Lap(Δ,b))_+ dy, split at the kinks 0, Δ and the crossing."""
    with mpmath.workdps(DPS):
        b, d, x = mpmath.mpf(b), mpmath.mpf(sens), mpmath.mpf(x)
        p = lambda y: mpmath.exp(-abs(y) / b) / (2 * b)
        q = lambda y: mpmath.exp(-abs(y - d) / b) / (2 * b)
        f = lambda y: max(mpmath.mpf(0), p(y) - mpmath.exp(x) * q(y))
        pts = sorted({mpmath.mpf(0), d, (d - x * b) / 2})
        pts = [p_ for p_ in pts if p_ <= d] or [d]
        return mpmath.quad(f, [-mpmath.inf] + pts + [mpmath.inf])


@functools.lru_cache(maxsize=None)  # (a 60-digit quadrature; asked again with the same arguments)
def ref_gaussian(sigma, sens, x):
    """∫_{y < y*} p(y)(1 − e^{x − L(y)}) dy with p = N(0, s²), q = N(Δ, s²),
    L(y) = log p(y)/q(y) = ((y − Δ)² − y²)/(2s²) > x exactly for y < y* (the crossing); the
    integrand is written without cancellation and integrated over 40 pieces below y*, at 60
    digits (mpmath's quadrature at 40 digits was seen 6e-6 off in the far tail)."""
    with mpmath.workdps(60):
        s, d, x = mpmath.mpf(sigma), mpmath.mpf(sens), mpmath.mpf(x)
        ystar = d / 2 - x * s * s / d
        f = lambda y: mpmath.npdf(y, 0, s) * -mpmath.expm1(x - ((y - d) ** 2 - y * y) / (2 * s * s))
        return mpmath.quad(f, [-mpmath.inf] + mpmath.linspace(ystar - 40 * s, ystar, 41))


def ref_geometric(eps, sens, x, n=None):
    with mpmath.workdps(DPS):
        r = mpmath.exp(-mpmath.mpf(eps))
        c = (1 - r) / (1 + r)
        n = n or int(120 / eps) + sens + 10  # r^n < e^-120: the truncated tail is far below 1e-40
        zs = range(-n, n + 1)
        return _hs([c * r ** abs(z) for z in zs], [c * r ** abs(z - sens) for z in zs], x)


def ref_discrete_gaussian(sigma, sens, x):
    with mpmath.workdps(DPS):
        s2 = 2 * mpmath.mpf(sigma) ** 2
        n = int(16 * sigma) + sens + 20
        zs = range(-n, n + 1)
        w = [mpmath.exp(-z * z / s2) for z in zs]
        norm = mpmath.fsum(w)
        p = [t / norm for t in w]
        q = [mpmath.exp(-(z - sens) ** 2 / s2) / norm for z in zs]
        return _hs(p, q, x)


def _staircase_density(eps, gamma, d):
    a = (1 - mpmath.exp(-eps)) / (2 * d * (gamma + mpmath.exp(-eps) * (1 - gamma)))

    def f(y):
        u = abs(y) / d
        k = int(mpmath.floor(u))
        return a * mpmath.exp(-k * eps) if u - k < gamma else a * mpmath.exp(-(k + 1) * eps)

    return f


def ref_staircase(eps, gamma, sens, x):
    """The density is piecewise constant: integrate exactly between consecutive breakpoints
    of f(y) and f(y − Δ) (midpoint value × length), |y| ≤ KΔ with e^{-K eps} < 1e-45."""
    with mpmath.workdps(DPS):
        eps_m, g, d = mpmath.mpf(eps), mpmath.mpf(gamma), mpmath.mpf(sens)
        f = _staircase_density(eps_m, g, d)
        kmax = int(105 / eps) + 3
        pts = set()
        for k in range(-kmax, kmax + 1):
            for off in (0, g, -g, 1 - g, g - 1):
                pts.add((k + off) * d)
        pts = sorted(pts)
        ex = mpmath.exp(mpmath.mpf(x))
        tot = mpmath.mpf(0)
        for a_, b_ in zip(pts[:-1], pts[1:]):
            if b_ <= a_:
                continue
            mid = (a_ + b_) / 2
            tot += max(mpmath.mpf(0), f(mid) - ex * f(mid - d)) * (b_ - a_)
        return tot


def ref_rr(eps, k, x):
    with mpmath.workdps(DPS):
        e = mpmath.exp(mpmath.mpf(eps))
        den = e + k - 1
        p = [e / den] + [1 / den] * (k - 1)  # input 0: outcome 0 is the true value
        q = [1 / den, e / den] + [1 / den] * (k - 2)  # input 1
        return _hs(p, q, x)


def ref_blackbox(eps, delta, x):
    """MV Def. 3.1: the four-outcome randomized response of an (eps, delta)-DP mechanism."""
    with mpmath.workdps(DPS):
        e, d = mpmath.exp(mpmath.mpf(eps)), mpmath.mpf(delta)
        p = [d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), mpmath.mpf(0)]
        q = [mpmath.mpf(0), (1 - d) / (1 + e), (1 - d) * e / (1 + e), d]
        return _hs(p, q, x)


def _normalised(masses):
    """v / Σ, the sum taken exactly (as rationals), each quotient at the working precision."""
    s = sum((Fraction(v) for v in masses), Fraction(0))
    return [mpmath.mpf((Fraction(v) / s).numerator) / (Fraction(v) / s).denominator for v in masses]


def ref_pair(p, q, x):
    """The larger direction of the pair (p/Σp, q/Σq), the sums taken exactly (a Pair's
    distributions: floats such as 0.2 + 0.3 + 0.4 + 0.1 do not sum to exactly 1)."""
    with mpmath.workdps(DPS):
        pm, qm = _normalised(p), _normalised(q)
        return max(_hs(pm, qm, x), _hs(qm, pm, x))


def ref_profile(guarantees, x):
    """sup_α (1 − e^x α − max_j f_{eps_j, delta_j}(α)) by brute force: the objective is
    concave piecewise linear, so its maximum sits at α = 0 or at a crossing of two of the
    lines (including β = 0) -- all pairs are tried, no envelope is built."""
    with mpmath.workdps(DPS):
        lines = [(mpmath.mpf(0), mpmath.mpf(0))]
        for e, d in guarantees:
            E, d = mpmath.exp(mpmath.mpf(e)), mpmath.mpf(d)
            lines += [(-E, 1 - d), (-1 / E, (1 - d) / E)]
        f = lambda a: max(s * a + c for s, c in lines)
        cands = {mpmath.mpf(0), mpmath.mpf(1)}
        for i, (s1, c1) in enumerate(lines):
            for s2, c2 in lines[i + 1:]:
                if s1 != s2:
                    a = (c2 - c1) / (s1 - s2)
                    if 0 <= a <= 1:
                        cands.add(a)
        ex = mpmath.exp(mpmath.mpf(x))
        return max(max(mpmath.mpf(0), 1 - ex * a - f(a)) for a in cands)


def _rel_ok(bounds, ref, rel=1e-12, absolute=1e-300):
    lo, hi = bounds
    ref = mpmath.mpf(ref)
    tol = rel * abs(ref) + absolute
    return lo <= ref + tol and ref - tol <= hi and lo <= hi


def _assert_bracket(mech, x, ref):
    b = mech.profile_bounds(x)
    # the certified bracket contains the reference (up to the reference's own error: 1e-25
    # relative, and 1e-40 absolute for a quadrature whose true value is 0)
    slack = abs(ref) * mpmath.mpf(10) ** -25 + mpmath.mpf(10) ** -40
    assert b.lower <= ref + slack, (mech, x, b, ref)
    assert b.upper >= ref - slack, (mech, x, b, ref)
    assert mech.profile(x) == b.upper
    # and is tight: 1e-12 relative (plus the subnormal floor)
    assert b.upper - b.lower <= 1e-12 * b.upper + 1e-300, (mech, x, b)


# ------------------------------------------------------------------------------------------
# closed forms and sums against the definitions

XS = [0.0, 1e-6, 0.05, 0.3, 1.0, 2.5]


@pytest.mark.parametrize("b, sens", [(1.0, 1.0), (0.7, 2.0), (10.0, 1.0), (0.05, 1.0)])
def test_laplace_against_integral(b, sens):
    m = Laplace(b, sens)
    a = sens / b
    for x in XS + [a, math.nextafter(a, 0), math.nextafter(a, math.inf)]:
        _assert_bracket(m, x, ref_laplace(b, sens, x))


def test_laplace_on_its_atom_is_zero_exactly():
    m = Laplace(3.0, 1.0)  # a = 1/3, not a float: compared exactly
    a = 1.0 / 3.0
    if Fraction(a) >= Fraction(1, 3):
        assert m.profile(a) == 0.0
    else:
        assert m.profile(a) > 0.0 and m.profile(math.nextafter(a, 1)) == 0.0


@pytest.mark.parametrize("sigma, sens", [(1.0, 1.0), (3.0, 2.0), pytest.param(0.1, 1.0, marks=pytest.mark.slow),
                                         pytest.param(0.5, 1.0, marks=pytest.mark.slow),
                                         pytest.param(20.0, 1.0, marks=pytest.mark.slow)])
def test_gaussian_against_integral(sigma, sens):
    m = Gaussian(sigma, sens)
    for x in [0.0, 0.05, 1.0, 10.0, 40.0]:
        _assert_bracket(m, x, ref_gaussian(sigma, sens, x))


@pytest.mark.parametrize("eps, sens", [(0.5, 1), (0.1, 1), (1.3, 3), (2.0, 2)])
def test_geometric_against_sum(eps, sens):
    m = Geometric(eps, sens)
    for x in XS + [sens * eps, math.nextafter(sens * eps, 0)]:
        _assert_bracket(m, x, ref_geometric(eps, sens, x))


@pytest.mark.parametrize("sigma, sens", [(1.0, 1), (0.4, 1), (3.0, 2)])
def test_discrete_gaussian_against_sum(sigma, sens):
    m = DiscreteGaussian(sigma, sens)
    for x in XS:
        _assert_bracket(m, x, ref_discrete_gaussian(sigma, sens, x))


@pytest.mark.parametrize("eps, gamma, sens", [(1.0, 0.3, 1.0), (0.5, 0.5, 2.0), (2.0, 0.8, 1.0),
                                              (1.0, 0.0, 1.0), (1.5, 1.0, 1.0)])
def test_staircase_against_integral(eps, gamma, sens):
    m = Staircase(eps, gamma, sens)
    for x in [0.0, 0.1, 0.5, eps, math.nextafter(eps, 0)]:
        _assert_bracket(m, x, ref_staircase(eps, gamma, sens, x))


def test_staircase_variance_against_integral():
    eps, gamma, d = 1.0, 0.3, 2.0
    with mpmath.workdps(30):
        f = _staircase_density(mpmath.mpf(eps), mpmath.mpf(gamma), mpmath.mpf(d))
        pts = [k * d + o for k in range(0, 80) for o in (0, gamma * d)]
        v = 2 * mpmath.fsum(mpmath.quad(lambda y: y * y * f((a + b) / 2), [a, b]) for a, b in zip(pts[:-1], pts[1:]))
    assert Staircase(eps, gamma, d).variance() == pytest.approx(float(v), rel=1e-12)


@pytest.mark.parametrize("eps, k", [(1.0, 2), (0.5, 3), (2.0, 10), (0.0, 4)])
def test_randomized_response_against_sum(eps, k):
    m = RandomizedResponse(eps, k)
    for x in XS + [eps]:
        _assert_bracket(m, x, ref_rr(eps, k, x))


@pytest.mark.parametrize("eps, delta", [(0.5, 0.0), (1.0, 1e-6), (0.1, 0.3), (0.0, 0.1), (30.0, 1e-9)])
def test_blackbox_against_def31(eps, delta):
    m = BlackBox(eps, delta)
    for x in XS + [eps, math.nextafter(eps, 0)]:
        _assert_bracket(m, x, ref_blackbox(eps, delta, x))


def test_pair_against_sum_both_directions():
    p, q = [0.5, 0.3, 0.2, 0.0], [0.2, 0.3, 0.4, 0.1]
    m = Pair(p, q)
    for x in XS + [math.log(2.5), math.log(2.0)]:
        _assert_bracket(m, x, ref_pair(p, q, x))
    # forward alone is the smaller direction at x = 0.1 here: the sup matters
    with mpmath.workdps(DPS):
        fwd = _hs(_normalised(p), _normalised(q), 0.1)
    assert m.profile(0.1) >= fwd


@pytest.mark.parametrize("guarantees", [
    [(1.0, 0.0), (0.5, 1e-3), (0.2, 0.05)],
    [(0.3, 1e-6)],
    [(2.0, 0.0), (1.0, 0.01), (1.0, 0.02), (0.0, 0.3)],
    [(0.1, 0.2), (0.05, 0.25), (3.0, 1e-9)],
])
def test_profile_against_brute_force_tradeoff(guarantees):
    m = Profile(guarantees)
    eps_list = [e for e, _ in guarantees]
    for x in XS + eps_list:
        _assert_bracket(m, x, ref_profile(guarantees, x))
    # it satisfies each of its guarantees, and the lower bound shows the tightest one is met
    for e, d in guarantees:
        assert m.profile_bounds(e).lower <= d


def test_profile_of_one_guarantee_is_the_black_box():
    for x in XS:
        assert Profile([(0.7, 1e-4)]).profile_bounds(x).upper == pytest.approx(BlackBox(0.7, 1e-4).profile(x), rel=1e-14)


# ------------------------------------------------------------------------------------------
# KOV Thm 4.4: geometric (sensitivity 1) is randomized response

@pytest.mark.parametrize("eps", [0.1, 0.7, 3.0])
def test_geometric_is_randomized_response(eps):
    g, rr = Geometric(eps), BlackBox(eps, 0.0)
    for x in XS:
        assert g.profile_bounds(x) == rr.profile_bounds(x)
    for side in ("upper", "lower"):
        a, b = g.discrete_pair(0.01, side), rr.discrete_pair(0.01, side)
        assert np.array_equal(a.n, b.n) and np.array_equal(a.p_hi, b.p_hi) and np.array_equal(a.p_lo, b.p_lo)


# ------------------------------------------------------------------------------------------
# discrete pairs: upper >= true >= lower, single and composed

def _pair_delta_mp(pair: DiscretePair, x, use_hi: bool):
    """The pair's hockey-stick at x from its own masses (mpmath; exact positions n·h)."""
    with mpmath.workdps(DPS):
        m = pair.p_hi if use_hi else pair.p_lo
        h = mpmath.mpf(pair.h)
        tot = mpmath.mpf(pair.inf_hi if use_hi else pair.inf_lo)
        for n, w in zip(pair.n.tolist(), m.tolist()):
            d = mpmath.mpf(x) - n * h
            if d < 0:
                tot += w * -mpmath.expm1(d)
        return tot


CASES = [
    (Laplace(1.0), ref_laplace, (1.0, 1.0)),
    (Laplace(0.3, 0.5), ref_laplace, (0.3, 0.5)),
    (Gaussian(1.0), ref_gaussian, (1.0, 1.0)),
    pytest.param(Gaussian(0.7), ref_gaussian, (0.7, 1.0), marks=pytest.mark.slow),
    (Geometric(0.37, 2), ref_geometric, (0.37, 2)),
    (DiscreteGaussian(0.8), ref_discrete_gaussian, (0.8, 1)),
    (Staircase(1.0, 0.3), ref_staircase, (1.0, 0.3, 1.0)),
    (RandomizedResponse(0.9, 4), ref_rr, (0.9, 4)),
    (BlackBox(0.25, 1e-3), ref_blackbox, (0.25, 1e-3)),
]


@pytest.mark.parametrize("mech, ref, args", CASES, ids=lambda c: type(c).__name__ if not callable(c) else "")
def test_discrete_pairs_bracket_the_profile(mech, ref, args):
    h = 0.05
    # a Gaussian's unbounded loss is truncated where its tail is 1e-40 (charged to +inf)
    kw = {"tail": 1e-40} if isinstance(mech, Gaussian) else {}
    up, lo = mech.discrete_pair(h, "upper", **kw), mech.discrete_pair(h, "lower", **kw)
    # masses: nothing lost on the upper side, nothing invented on the lower side
    assert math.fsum(up.p_hi.tolist()) + up.inf_hi >= 1 - 1e-14
    assert math.fsum(lo.p_lo.tolist()) + lo.inf_lo <= 1 + 1e-14
    xs = [0.0, 0.2, 1.0, 1.7] if isinstance(mech, Gaussian) else [0.0, 0.01, 0.2, 0.5, 1.0, 1.7]
    xs += [float(n * h) for n in up.n[-3:].tolist()] + [math.nextafter(float(up.n[-1] * h), 0)]
    xs = [x for x in xs if x >= 0]
    for x in xs:
        r = ref(*args, x)
        hi, lw = up.delta(x), lo.delta(x)
        assert hi >= r * (1 - mpmath.mpf(10) ** -25), (x, hi, r)
        assert lw <= r * (1 + mpmath.mpf(10) ** -25) + 1e-320, (x, lw, r)
    # the float evaluation is itself on the safe side of the pair's exact value
    for x in (0.0, 0.5, float(up.n[-1] * h)):
        assert up.delta(x) >= _pair_delta_mp(up, x, True) * (1 - mpmath.mpf(10) ** -30)
        assert lo.delta(x) <= _pair_delta_mp(lo, x, False) * (1 + mpmath.mpf(10) ** -30)


def test_pair_directions():
    m = Pair([0.6, 0.4, 0.0], [0.1, 0.4, 0.5])
    for direction, (p, q) in (("forward", (m.p, m.q)), ("reverse", (m.q, m.p))):
        up = m.discrete_pair(0.1, "upper", direction)
        lo = m.discrete_pair(0.1, "lower", direction)
        for x in (0.0, 0.3, math.log(6.0), 2.0):
            with mpmath.workdps(DPS):
                r = _hs([mpmath.mpf(v) for v in p], [mpmath.mpf(v) for v in q], x)
            assert lo.delta(x) <= r <= up.delta(x)
    rev = m.discrete_pair(0.1, "upper", "reverse")
    assert rev.inf_lo <= 0.5 <= rev.inf_hi <= 0.5 + 1e-15  # q's mass where p = 0


def _compose(pair: DiscretePair, k: int, use_hi: bool):
    """k-fold self-composition of a pair's masses (numpy convolution; indices add)."""
    m = pair.p_hi if use_hi else pair.p_lo
    inf = pair.inf_hi if use_hi else pair.inf_lo
    dense = np.zeros(int(pair.n[-1] - pair.n[0]) + 1)
    dense[(pair.n - pair.n[0])] = m
    out = np.array([1.0])
    for _ in range(k):
        out = np.convolve(out, dense)
    n0 = k * int(pair.n[0])
    fin = (1 - inf) ** k if not use_hi else None
    return n0, out, 1 - (1 - inf) ** k, fin


def _composed_delta(pair, k, x, use_hi):
    n0, masses, inf_mass, _ = _compose(pair, k, use_hi)
    with mpmath.workdps(30):
        h = mpmath.mpf(pair.h)
        tot = mpmath.mpf(inf_mass)
        for i, w in enumerate(masses.tolist()):
            d = mpmath.mpf(x) - (n0 + i) * h
            if d < 0 and w:
                tot += w * -mpmath.expm1(d)
        return tot


@pytest.mark.parametrize("k", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_composed_gaussian_pairs_bracket_the_composed_gaussian(k):
    """k Gaussian(sigma) compose to one Gaussian(sigma/sqrt(k)) (exact reference by
    integration); the composed upper/lower pairs bracket it."""
    sigma = 2.0
    g = Gaussian(sigma)
    up, lo = g.discrete_pair(0.02, "upper", tail=1e-40), g.discrete_pair(0.02, "lower", tail=1e-40)
    for x in (0.0, 0.3, 1.0, 2.0):
        r = ref_gaussian(sigma / math.sqrt(k), 1.0, x)
        assert _composed_delta(lo, k, x, False) <= r * (1 + 1e-10) <= _composed_delta(up, k, x, True) * (1 + 2e-10)


def test_composed_randomized_response_pairs_bracket_the_binomial():
    """k-fold RR(eps): the exact composed delta is a binomial sum (KOV Thm 3.3)."""
    eps, k, h = 0.3, 6, 0.07
    up, lo = BlackBox(eps).discrete_pair(h, "upper"), BlackBox(eps).discrete_pair(h, "lower")
    with mpmath.workdps(DPS):
        p = mpmath.exp(eps) / (1 + mpmath.exp(eps))
        for x in (0.0, 0.3, 0.6, 0.9, 1.2):
            r = mpmath.fsum(mpmath.binomial(k, m) * p**m * (1 - p) ** (k - m) * max(0, -mpmath.expm1(x - (2 * m - k) * eps))
                            for m in range(k + 1))
            assert _composed_delta(lo, k, x, False) <= r * (1 + 1e-12) + 1e-300
            assert _composed_delta(up, k, x, True) >= r * (1 - 1e-12)


def test_lattice_positions_are_exact_on_atoms():
    """eps = 3h exactly: the atom stays at n = 3 on both sides; one ulp above moves the upper
    atom to n = 4 and keeps the lower one at 3."""
    h = 0.125
    up = BlackBox(3 * h).discrete_pair(h, "upper")
    lo = BlackBox(3 * h).discrete_pair(h, "lower")
    assert up.n.tolist() == [-3, 3] and lo.n.tolist() == [-3, 3]
    eps = math.nextafter(3 * h, 1)
    assert BlackBox(eps).discrete_pair(h, "upper").n.tolist() == [-3, 4]
    assert BlackBox(eps).discrete_pair(h, "lower").n.tolist() == [-4, 3]
    # 0.1 is not a multiple of the float 0.1/3 step's real value in general: decided exactly
    e, hh = 0.1, 0.1 / 3
    n_up = BlackBox(e).discrete_pair(hh, "upper").n[-1]
    assert n_up == math.ceil(Fraction(e) / Fraction(hh))


def test_huge_positions_go_to_infinity_on_the_upper_side():
    up = BlackBox(1e300, 1e-3).discrete_pair(1e-3, "upper")
    lo = BlackBox(1e300, 1e-3).discrete_pair(1e-3, "lower")
    assert up.inf_hi >= 1 - 1e-15 and up.n.size <= 1
    assert lo.n[-1] == 2**53 and lo.inf_lo <= 1e-3


def test_gaussian_tail_goes_to_infinity():
    up = Gaussian(1.0).discrete_pair(0.1, "upper", tail=1e-20)
    lo = Gaussian(1.0).discrete_pair(0.1, "lower", tail=1e-20)
    assert 0 < up.inf_hi < 1e-20
    assert lo.inf_hi == 0.0


# ------------------------------------------------------------------------------------------
# property tests over log-scale parameters

@settings(max_examples=25, deadline=None)
@given(st.floats(-2.5, 2.5), st.floats(-4, 1.5), st.booleans())
def test_laplace_profile_property(log_b, log_x, on_atom):
    b = 10.0**log_b
    m = Laplace(b)
    a = 1.0 / b
    x = a if on_atom else 10.0**log_x
    _assert_bracket(m, x, ref_laplace(b, 1.0, x))


@settings(max_examples=8, deadline=None)
@given(st.floats(-1.5, 2.5), st.floats(-4, 1.5))
def test_gaussian_profile_property(log_sigma, log_x):
    s, x = 10.0**log_sigma, 10.0**log_x
    _assert_bracket(Gaussian(s), x, ref_gaussian(s, 1.0, x))


@settings(max_examples=20, deadline=None)
@given(st.floats(-2, 1), st.integers(1, 4), st.floats(-3, 1), st.integers(-1, 1))
def test_geometric_profile_property(log_eps, sens, log_x, atom_shift):
    eps = 10.0**log_eps
    m = Geometric(eps, sens)
    # x on an atom (sens - 2j) eps or next to it, else log-scale
    x = 10.0**log_x if atom_shift == 0 else abs(sens * eps)
    if atom_shift == 1:
        x = math.nextafter(x, math.inf)
    _assert_bracket(m, x, ref_geometric(eps, sens, x))


@settings(max_examples=20, deadline=None)
@given(st.floats(-3, 1.3), st.floats(0, 1), st.floats(-3, 1.3))
def test_staircase_and_rr_profile_property(log_eps, gamma, log_x):
    eps, x = 10.0**log_eps, 10.0**log_x
    # the staircase reference integrates ~200/eps pieces: keep eps >= 0.05 for speed
    if eps >= 0.05:
        _assert_bracket(Staircase(eps, gamma), x, ref_staircase(eps, gamma, 1.0, x))
    _assert_bracket(RandomizedResponse(eps, 3), x, ref_rr(eps, 3, x))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 3), st.floats(-12, -0.5)), min_size=1, max_size=4), st.floats(-3, 0.6))
def test_profile_property(pairs, log_x):
    guarantees = [(e, 10.0**ld) for e, ld in pairs]
    x = 10.0**log_x
    m = Profile(guarantees)
    _assert_bracket(m, x, ref_profile(guarantees, x))
    for e, _ in guarantees:
        _assert_bracket(m, e, ref_profile(guarantees, e))


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.floats(-1, 1), st.floats(-2.5, -0.7), st.floats(0, 2))
def test_gaussian_pair_property(log_sigma, log_h, x):
    """Upper pair ≥ true ≥ lower pair, also for x on and next to a lattice point."""
    s, h = 10.0**log_sigma, 10.0**log_h
    g = Gaussian(s)
    try:
        up, lo = g.discrete_pair(h, "upper", max_atoms=4000), g.discrete_pair(h, "lower", max_atoms=4000)
    except ValueError:
        return  # too fine for the test's budget (the cap itself is tested below)
    on = float(round(x / h) * h)
    for xx in (x, on, math.nextafter(on, math.inf)):
        if xx < 0:
            continue
        r = ref_gaussian(s, 1.0, xx)
        assert lo.delta(xx) <= r * (1 + 1e-25) + 1e-320
        assert up.delta(xx) >= r * (1 - 1e-25)


@settings(max_examples=15, deadline=None)
@given(st.floats(-2, 2), st.floats(-2.5, -0.5), st.floats(0, 3))
def test_laplace_pair_property(log_b, log_h, x):
    b, h = 10.0**log_b, 10.0**log_h
    m = Laplace(b)
    try:
        up, lo = m.discrete_pair(h, "upper", max_atoms=5000), m.discrete_pair(h, "lower", max_atoms=5000)
    except ValueError:
        return
    for xx in (x, 1.0 / b, float(up.n[-1] * h)):
        r = ref_laplace(b, 1.0, xx)
        assert lo.delta(xx) <= r * (1 + 1e-25) + 1e-320
        assert up.delta(xx) >= r * (1 - 1e-25)


# ------------------------------------------------------------------------------------------
# value objects and validation

def test_frozen_hashable_equal():
    assert Laplace(1) == Laplace(1.0) and hash(Laplace(1)) == hash(Laplace(1.0))
    assert Pair([0.5, 0.5], [0.25, 0.75]) == Pair((0.5, 0.5), (0.25, 0.75))
    assert Profile([(1.0, 0.0), (0.5, 0.1)]) == Profile([(0.5, 0.1), (1.0, 0.0)])
    assert len({Gaussian(1.0), Gaussian(1.0), Gaussian(2.0)}) == 2
    with pytest.raises(AttributeError):
        Laplace(1.0).scale = 2.0
    assert BlackBox(0.5, 1e-6).delta == 1e-6  # the parameter; the profile is .profile(eps)


@pytest.mark.parametrize("make, name", [
    (lambda: Laplace(0.0), "scale"), (lambda: Laplace(-1.0), "scale"), (lambda: Laplace(math.inf), "scale"),
    (lambda: Laplace(1.0, 0.0), "sensitivity"), (lambda: Gaussian(float("nan")), "sigma"),
    (lambda: Gaussian(1.0, -2.0), "sensitivity"), (lambda: Geometric(0.0), "eps"),
    (lambda: Geometric(1.0, 0), "sensitivity"), (lambda: Geometric(1.0, 1.5), "sensitivity"),
    (lambda: DiscreteGaussian(-1.0), "sigma"), (lambda: DiscreteGaussian(1.0, 2.5), "sensitivity"),
    (lambda: Staircase(1.0, 1.5), "gamma"), (lambda: Staircase(-1.0, 0.5), "eps"),
    (lambda: RandomizedResponse(-0.1), "eps"), (lambda: RandomizedResponse(1.0, 1), "values"),
    (lambda: BlackBox(-1.0), "eps"), (lambda: BlackBox(1.0, 1.0), "delta"), (lambda: BlackBox(1.0, -0.1), "delta"),
    (lambda: Pair([0.5, 0.6], [0.5, 0.5]), "p"), (lambda: Pair([0.5, 0.5], [1.0]), "q"),
    (lambda: Pair([1.5, -0.5], [0.5, 0.5]), "p[0]"), (lambda: Profile([]), "guarantees"),
    (lambda: Profile([(1.0, 1.0)]), "guarantees[0].delta"), (lambda: Profile([(-1.0, 0.0)]), "guarantees[0].eps"),
    (lambda: Laplace(1.0).discrete_pair(0.0), "h"), (lambda: Laplace(1.0).discrete_pair(0.1, "middle"), "side"),
    (lambda: Laplace(1.0).discrete_pair(0.1, direction="sideways"), "direction"),
    (lambda: Gaussian(1.0).discrete_pair(0.1, tail=0.0), "tail"),
    (lambda: Gaussian(1.0).discrete_pair(1e-4, max_atoms=1000), "h"),
    (lambda: Laplace(1.0).profile(-0.5), "eps"), (lambda: Gaussian(1.0).profile(math.inf), "eps"),
])
def test_invalid_parameters_name_the_parameter(make, name):
    with pytest.raises(ValueError) as info:
        make()
    assert name in str(info.value)


@pytest.mark.parametrize("make, name", [
    (lambda: Laplace(True), "scale"), (lambda: Gaussian("1.0"), "sigma"), (lambda: Geometric(1.0, True), "sensitivity"),
    (lambda: RandomizedResponse(1.0, 2.0 + 0j), "values"), (lambda: BlackBox(None), "eps"),
    (lambda: Pair(0.5, [0.5]), "p"), (lambda: Profile([(1.0, 0.1, 3)]), "guarantees[0]"),
    (lambda: Profile(1.0), "guarantees"), (lambda: Laplace(1.0).profile(False), "eps"),
])
def test_wrong_types_are_type_errors(make, name):
    with pytest.raises(TypeError) as info:
        make()
    assert name in str(info.value)


def test_importing_the_module_keeps_the_facade_working():
    """``import optcomp.mechanisms`` rebinds the package attribute ``mechanisms``; the facade
    must keep calling the multiset validator (``_inputs.mechanisms``), not that name."""
    import optcomp
    import optcomp.mechanisms  # noqa: F401

    assert optcomp.delta_g(0.1, k=10, eps_g=1.0, method="optimal") == pytest.approx(8.83e-20, rel=1e-2)
