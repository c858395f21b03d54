"""Audit of the size-limit path: the O(1) many-ulp nudges of optcomp._rounding and the
Chernoff end the fallback searches over tilts and lattice steps (optcomp._refine.least_chernoff).

References are written here from the definitions, never from optcomp:

* n ulps: a float's position in the ordered sequence of floats (its bit pattern, sign folded,
  +-0 one point) -- n nextafter steps are that position plus n, computed exactly in O(1);
* log-MGFs of one copy's privacy loss under P, at 40 digits in mpmath: randomized response
  / black box (two atoms, the +inf mass left out), Laplace (atoms +-a and the density on
  (-a, a)), finite pairs (sum p^(1 + theta) q^-theta over the common support), Poisson-
  subsampled Laplace (quadrature of E_Q[(1 - q + q r)^(theta + 1)] forward, ^-theta reverse);
  a certified bound K(theta, step) of the composition's log-MGF must be >= their count-
  weighted sum at every (tilt, step) the search tries (these laws have no truncation tails);
* Gaussians beside randomized responses: H(x) = E_R[H_G(x - R)], R the binomial sum of the
  responses' losses and H_G the mu-GDP profile Phi(-x/mu + mu/2) - e^x Phi(-x/mu - mu/2);
  the size-limit bracket (max_points tiny) must contain it.
"""

from __future__ import annotations

import functools
import math
import struct
from fractions import Fraction

import mpmath
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp._directions import direction_workloads
from optcomp._inputs import mechanisms
from optcomp._refine import least_chernoff
from optcomp._rounding import down, up
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Pair, Subsampled

# ---------------------------------------------------------------- many-ulp nudges

_INF_KEY = struct.unpack("<q", struct.pack("<d", math.inf))[0]


def _key(x: float) -> int:
    """x's position among the floats (+-0 both 0): one nextafter step is +-1."""
    b = struct.unpack("<q", struct.pack("<d", x))[0]
    return b if b >= 0 else -(b & 0x7FFFFFFFFFFFFFFF)


def _unkey(k: int) -> float:
    if abs(k) >= _INF_KEY:
        return math.copysign(math.inf, k)
    f = struct.unpack("<d", struct.pack("<q", abs(k)))[0]
    return f if k >= 0 else -f


def test_the_position_reference_is_nextafter_stepping():
    for x in (0.0, -0.0, 5e-324, -5e-324, -3e-323, 1.0, -1.0, 2.0**-1022, -(2.0**-1022), 1.7976931348623157e308):
        for to in (math.inf, -math.inf):
            y = x
            for n in range(1, 150):
                y = math.nextafter(y, to)
                assert _unkey(_key(x) + (n if to > 0 else -n)) == y, (x, n, to)


def _floats():
    signed = st.floats(-1074.0, 1023.99).flatmap(
        lambda e: st.floats(1.0, 2.0).map(lambda m: m * 2.0**e if e < 1023 else m * 2.0**1023 / 2.0))
    return st.one_of(signed, signed.map(lambda v: -v), st.sampled_from(
        [0.0, -0.0, 5e-324, -5e-324, -1e-322, 2.0**-1022, -(2.0**-1022), 1.7976931348623157e308,
         -1.7976931348623157e308]))


@settings(max_examples=400, deadline=None)
@given(x=_floats(), n=st.one_of(st.integers(60, 70), st.integers(65, 2**52).map(int),
                                 st.sampled_from([10**9, 10**12, 2**50, 2**50 + 1, 2**60])))
@example(x=-5e-324 * 30, n=65)        # a tiny negative moved up across 0
@example(x=1.7976931348623157e308, n=65)
@example(x=-1.7976931348623157e308, n=10**12)
def test_up_and_down_move_at_least_n_ulps(x, n):
    """up(x, n) >= x after n nextafter steps toward +inf (the float position plus n), and
    down likewise toward -inf -- subnormals, 0 crossed, the float range's ends."""
    if not math.isfinite(x):
        x = 0.0
    assert up(x, n) >= _unkey(_key(x) + n), (x, n, up(x, n))
    assert down(x, n) <= _unkey(_key(x) - n), (x, n, down(x, n))


def test_up_and_down_every_n_near_the_stepping_threshold_and_across_zero():
    for n in range(60, 72):
        for k in range(0, 140, 3):
            x = -k * 5e-324
            assert up(x, n) >= _unkey(_key(x) + n), (x, n)
            assert down(-x, n) <= _unkey(_key(-x) - n), (x, n)
    # an infinity: +inf stays, -inf leaves it at least n ulps (at once, not one step at a time)
    assert up(math.inf, 65) == math.inf and down(-math.inf, 65) == -math.inf
    assert _unkey(_key(-math.inf) + 65) <= up(-math.inf, 65) < -1.79e308
    assert 1.79e308 < down(math.inf, 65) <= _unkey(_key(math.inf) - 65)


# ---------------------------------------------------------------- exact log-MGFs (40 digits)

def _m(x) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def _rr_cgf(e, th):
    e, th = _m(e), _m(th)
    return mpmath.log((mpmath.exp(e * (1 + th)) + mpmath.exp(-e * th)) / (1 + mpmath.exp(e)))


def _laplace_cgf(scale, th):
    """P = Lap(0, b), Q = Lap(1, b): L = 1/b on z <= 0 (mass 1/2), -1/b on z >= 1 (e^{-1/b}/2),
    (1 - 2z)/b between."""
    a, th = 1 / _m(scale), _m(th)
    return mpmath.log(mpmath.exp(th * a) / 2 + mpmath.exp(-a - th * a) / 2
                      + mpmath.exp(th * a) * -mpmath.expm1(-(1 + 2 * th) * a) / (2 * (1 + 2 * th)))


def _pair_cgf(p, q, th):
    sp, sq = sum(Fraction(x) for x in p), sum(Fraction(x) for x in q)
    th = _m(th)
    return mpmath.log(mpmath.fsum(
        (_m(a) / _m(sp)) ** (1 + th) * (_m(b) / _m(sq)) ** (-th) for a, b in zip(p, q) if a > 0 and b > 0))


@functools.lru_cache(maxsize=None)
def _subsampled_laplace_cgf(q, scale, th, direction):
    """Q = Lap(0, b), P = Lap(1, b), r = dP/dQ = e^{(|z| - |z - 1|)/b}, P' = (1 - q) Q + q P;
    forward (P', Q): E_Q[(1 - q + q r)^{theta + 1}]; reverse (Q, P'): E_Q[(1 - q + q r)^-theta]."""
    q, b, th = _m(q), _m(scale), _m(th)
    power = th + 1 if direction == "forward" else -th

    def f(z):
        return mpmath.exp(-abs(z) / b) / (2 * b) * (1 - q + q * mpmath.exp((abs(z) - abs(z - 1)) / b)) ** power

    return mpmath.log(mpmath.quad(f, [-mpmath.inf, -40 * b, 0, 1, 40 * b + 1, mpmath.inf]))


def _exact_cgf(spec, th, direction):
    """The composition's log E_P[e^{theta L}; L finite] (spec: (kind, parameters, count))."""
    with mpmath.workdps(40):
        total = mpmath.mpf(0)
        for kind, par, c in spec:
            if kind == "rr":
                total += c * _rr_cgf(par, th)
            elif kind == "bb":
                total += c * (_rr_cgf(par[0], th) + mpmath.log1p(-_m(par[1])))
            elif kind == "lap":
                total += c * _laplace_cgf(par, th)
            elif kind == "pair":
                p, q = par if direction == "forward" else par[::-1]
                total += c * _pair_cgf(p, q, th)
            elif kind == "sl":
                total += c * _subsampled_laplace_cgf(par[0], par[1], th, direction)
        return total


def _mechanism(kind, par):
    return {"rr": lambda: par, "bb": lambda: BlackBox(*par), "lap": lambda: Laplace(par),
            "pair": lambda: Pair(*par), "sl": lambda: Subsampled(Laplace(par[1]), par[0]),
            "gauss": lambda: Gaussian(par)}[kind]()


def _tried(spec, t):
    """Every (direction, tilt, step, K, I) least_chernoff tries for the eps direction at t."""
    items = [_mechanism(kind, par) for kind, par, _ in spec]
    counts = [c for _, _, c in spec]
    others = [(m, c) for m, c in zip(items, counts) if not isinstance(m, float)]
    out = []
    for work, _, _ in direction_workloads(mechanisms(items, 0.0, None, counts), others):
        dirs = {s.direction for s in work.sources} or {"forward"}
        assert len(dirs) == 1
        direction = dirs.pop()
        theta = work.tilt_for(work.chernoff_guess(t))

        def bound(th, step, work=work, direction=direction):
            K, inf = work._mgf_bound(th, step)
            out.append((direction, th, step, K, inf))
            return work.chernoff_epsilon(t, th, step)

        least_chernoff(work, 2.0**-10, theta, bound)
    return out


FAMILIES = [
    [("rr", 0.1, 1000), ("lap", 2.0, 50)],
    [("rr", 0.01, 10**9)],
    [("bb", (0.5, 1e-6), 20), ("lap", 1.0, 20), ("rr", 0.3, 7)],
    [("lap", 1.0, 1)],
    [("lap", 0.3, 10**6)],
    [("lap", 30.0, 10**9)],
    [("pair", ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), 200)],
    [("pair", ((0.6, 0.4), (0.1, 0.9)), 10**6), ("lap", 5.0, 10**5)],
    [("pair", ((0.9, 0.1, 0.0), (0.1, 0.4, 0.5)), 3), ("rr", 0.2, 40)],
]
SUBSAMPLED = [
    [("sl", (0.05, 1.0), 1000)],
    [("sl", (0.01, 0.5), 10**6), ("pair", ((0.7, 0.3), (0.3, 0.7)), 1000)],
    [("sl", (0.2, 2.0), 10**9), ("bb", (1.0, 1e-9), 5)],
]


@pytest.mark.parametrize("spec", FAMILIES + [pytest.param(f, marks=pytest.mark.slow) for f in SUBSAMPLED], ids=lambda s: "+".join(f"{k}x{c}" for k, _, c in s))
@pytest.mark.parametrize("t", [1e-300, 1e-10, pytest.param(0.3, marks=pytest.mark.slow)])
def test_every_tilt_and_step_tried_bounds_the_exact_moment_generating_function(spec, t):
    """Each (tilt, step) the search tries, in each global direction: its certified K is >= the
    exact count-weighted log-MGF (so its Chernoff end is >= the exact-MGF Chernoff end >=
    the optimum)."""
    tried = _tried(spec, t)
    assert tried
    checked = 0
    for direction, th, step, K, _ in tried:
        if th > 0.0 and math.isfinite(K):
            exact = _exact_cgf(spec, th, direction)
            assert K >= exact, (spec, direction, th, step, K, float(exact))
            checked += 1
    assert checked or all(th == 0.0 for _, th, _, _, _ in tried)


# ---------------------------------------------------------------- Gaussians beside responses


def _gdp(mu, x):
    return mpmath.ncdf(-x / mu + mu / 2) - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2)


def _two_atom_delta(sigma, l1, p1, l2, n, x, box=0):
    """H(x) of Gaussian(sigma) (sensitivity 1) beside n copies of a two-atom loss (l1 with
    P-mass p1, else l2; each copy also at +inf with P-mass ``box``): 1 - (1 - box)^n +
    (1 - box)^n E_R[H_G(x - R)], R = J l1 + (n - J) l2, J ~ Binomial(n, p1), at 30 digits."""
    with mpmath.workdps(30):
        mu, x, box = 1 / _m(sigma), _m(x), _m(box)
        finite = mpmath.fsum(mpmath.binomial(n, j) * p1 ** j * (1 - p1) ** (n - j) * _gdp(mu, x - j * l1 - (n - j) * l2)
                             for j in range(n + 1))
        return 1 - (1 - box) ** n + (1 - box) ** n * finite


def _mix_delta(sigma, e0, n, x, box=0.0):
    """Gaussian(sigma) beside n black boxes (e0, box) (randomized responses when box = 0)."""
    with mpmath.workdps(30):
        e = _m(e0)
        return _two_atom_delta(sigma, e, mpmath.exp(e) / (1 + mpmath.exp(e)), -e, n, x, box)


def _pair_mix_delta(sigma, a, b, n, x):
    """Gaussian(sigma) beside n copies of Pair((a, 1 - a), (b, 1 - b)): the larger global direction."""
    with mpmath.workdps(30):
        a, b = _m(a), _m(b)
        fwd = _two_atom_delta(sigma, mpmath.log(a / b), a, mpmath.log((1 - a) / (1 - b)), n, x)
        rev = _two_atom_delta(sigma, mpmath.log(b / a), b, mpmath.log((1 - b) / (1 - a)), n, x)
        return max(fwd, rev)


def _size_limited(fn, items, counts, **kw):
    """The bracket at max_points 2^10: a size limit's (mostly), or the answer when the ends
    of the law or the closed forms decide it without a lattice."""
    try:
        return fn(items, counts=counts, max_points=2**10, **kw)
    except optcomp.ApproxTooCostly as exc:
        assert exc.bounds is not None
        return exc.bounds


MIXES = [(2.0, 0.1, 60), (0.5, 0.05, 100), (5.0, 1.0, 12), (1.0, 0.01, 200)]
SLOW = pytest.mark.slow


@pytest.mark.parametrize("sigma, e0, n", MIXES + [pytest.param(3.0, 0.02, 1500, marks=SLOW)])
@pytest.mark.parametrize("x", [0.3, 2.0, 8.0, pytest.param(25.0, marks=SLOW)])
def test_a_size_limited_delta_bracket_contains_the_exact_delta(sigma, e0, n, x):
    b = _size_limited(optcomp.delta_bounds, [e0, Gaussian(sigma)], [n, 1], eps_g=x)
    truth = _mix_delta(sigma, e0, n, x)
    assert b.lower <= truth <= b.upper, (b, float(truth))


@pytest.mark.parametrize("sigma, e0, box, n", [(2.0, 0.1, 1e-7, 60), (0.7, 0.5, 1e-3, 30),
                                               pytest.param(1.0, 0.05, 1e-12, 400, marks=SLOW)])
@pytest.mark.parametrize("x", [0.5, 4.0, 20.0])
def test_black_boxes_beside_a_gaussian(sigma, e0, box, n, x):
    b = _size_limited(optcomp.delta_bounds, [BlackBox(e0, box), Gaussian(sigma)], [n, 1], eps_g=x)
    truth = _mix_delta(sigma, e0, n, x, box)
    assert b.lower <= truth <= b.upper, (b, float(truth))


@pytest.mark.parametrize("sigma, a, b, n", [(2.0, 0.6, 0.3, 40), (1.0, 0.9, 0.6, 80),
                                            pytest.param(4.0, 0.55, 0.45, 600, marks=SLOW)])
@pytest.mark.parametrize("x", [0.5, 3.0, 12.0])
def test_an_asymmetric_pair_beside_a_gaussian_both_global_directions(sigma, a, b, n, x):
    got = _size_limited(optcomp.delta_bounds, [Pair((a, 1 - a), (b, 1 - b)), Gaussian(sigma)], [n, 1], eps_g=x)
    truth = _pair_mix_delta(sigma, a, b, n, x)
    assert got.lower <= truth <= got.upper, (got, float(truth))


def _mix_epsilon(sigma, e0, n, t):
    """(lo, hi) with H(lo) > t >= H(hi), hi - lo <= 1e-9 (1 + hi): eps_opt in [lo, hi]."""
    lo, hi = 0.0, 1.0
    if _mix_delta(sigma, e0, n, 0.0) <= t:
        return 0.0, 0.0
    while _mix_delta(sigma, e0, n, hi) > t:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-9 * (1.0 + hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _mix_delta(sigma, e0, n, mid) > t else (lo, mid)
    return lo, hi


@pytest.mark.parametrize("sigma, e0, n", [MIXES[0], pytest.param(*MIXES[1], marks=SLOW)])
@pytest.mark.parametrize("t", [pytest.param(1e-300, marks=SLOW), 1e-10, 0.5])
def test_a_size_limited_epsilon_bracket_contains_the_exact_epsilon(sigma, e0, n, t):
    b = _size_limited(optcomp.epsilon_bounds, [e0, Gaussian(sigma)], [n, 1], delta_g=t)
    lo, hi = _mix_epsilon(sigma, e0, n, t)
    assert b.lower <= hi and b.upper >= lo, (b, lo, hi)


def _binomial_pair(n, a, b):
    """Pair of Binomial(n, a) and Binomial(n, b) laws (masses down to the float floor; scipy
    only builds the input, the reference sums the masses as given)."""
    import numpy as np
    from scipy.stats import binom

    k = np.arange(n + 1)
    return tuple(binom.pmf(k, n, a).tolist()), tuple(binom.pmf(k, n, b).tolist())


@pytest.mark.parametrize("n, a, b, count, t", [
    (200, 0.3, 0.6, 10**9, 1e-10),
    pytest.param(400, 0.5, 0.55, 1000, 1e-300, marks=SLOW),
    pytest.param(3000, 0.5, 0.51, 10**6, 1e-10, marks=SLOW),
])
def test_many_outcome_pairs_every_tilt_and_step(n, a, b, count, t):
    """Pairs with hundreds of outcomes (their leaves built cell by cell at the fine steps)."""
    spec = [("pair", _binomial_pair(n, a, b), count)]
    checked = 0
    for direction, th, step, K, _ in _tried(spec, t):
        if th > 0.0 and math.isfinite(K):
            exact = _exact_cgf(spec, th, direction)
            assert K >= exact, (direction, th, step, K, float(exact))
            checked += 1
    assert checked >= 10


def _laplace_gaussian_delta(sigma, scale, x):
    """H(x) of Gaussian(sigma) beside one Laplace(scale) (sensitivity 1, a = 1/scale): the
    Laplace loss is +a (P-mass 1/2), -a (e^{-a}/2) and density e^{(l - a)/2}/4 on (-a, a)
    (z = (1 - l/a)/2 under P = Lap(0, b)); H = E_R[H_G(x - R)] by quadrature, 30 digits."""
    with mpmath.workdps(30):
        mu, a, x = 1 / _m(sigma), 1 / _m(scale), _m(x)

        def g(l):
            return _gdp(mu, x - l)

        return (g(a) / 2 + mpmath.exp(-a) / 2 * g(-a)
                + mpmath.quad(lambda l: mpmath.exp((l - a) / 2) / 4 * g(l), [-a, 0, a]))


@pytest.mark.parametrize("sigma, scale, x", [(1.0, 0.5, 10.0)] + [
    pytest.param(s, b, x, marks=SLOW) for s, b in [(1.0, 0.5), (3.0, 0.1), (0.3, 2.0)] for x in (0.2, 10.0, 30.0)
    if (s, b, x) != (1.0, 0.5, 10.0)])
def test_a_laplace_beside_a_gaussian(sigma, scale, x):
    b = _size_limited(optcomp.delta_bounds, [Laplace(scale), Gaussian(sigma)], [1, 1], eps_g=x)
    truth = _laplace_gaussian_delta(sigma, scale, x)
    assert b.lower <= truth <= b.upper, (b, float(truth))


def _discrete_gaussian_cgf(sigma, th):
    """log E_P[e^{theta L}] of one discrete Gaussian copy (sensitivity 1): outcome z with
    P-mass e^{-z^2/(2 sigma^2)}/Z, loss (1 - 2z)/(2 sigma^2); the sum over a window whose
    left-out terms are below 40 digits."""
    with mpmath.workdps(40):
        s2, th = 2 * _m(sigma) ** 2, _m(th)
        w = int(40 * sigma + 40 * float(th) + 50)
        z = mpmath.fsum(mpmath.exp(-k * k / s2) for k in range(-w, w + 1))
        m = mpmath.fsum(mpmath.exp(-k * k / s2 + th * (1 - 2 * k) / s2) for k in range(-w, w + 1))
        return mpmath.log(m / z)


@pytest.mark.parametrize("sigma, count, t", [(2.0, 1000, 1e-10), pytest.param(0.5, 100, 1e-300, marks=SLOW),
                                             pytest.param(30.0, 10**9, 1e-300, marks=SLOW)])
def test_discrete_gaussians_every_tilt_and_step(sigma, count, t):
    """Discrete Gaussians (a window of outcomes for small sigma, cells for large) at every
    (tilt, step) tried: K >= count x the exact log-MGF."""
    from optcomp.mechanisms import DiscreteGaussian

    mech = DiscreteGaussian(sigma)
    checked = 0
    for work, _, _ in direction_workloads(mechanisms([mech], 0.0, None, [count]), [(mech, count)]):
        tried = []

        def bound(th, step, work=work):
            tried.append((th, step, *work._mgf_bound(th, step)))
            return work.chernoff_epsilon(t, th, step)

        theta0 = work.tilt_for(work.chernoff_guess(t))
        least_chernoff(work, 2.0**-10, theta0, bound)
        for th, step, K, _ in tried:
            # (the driver's grid, 0.5-2x its tilt: far beyond it the search's tilts may put a
            # leaf's truncated tail -- a delta event, I, not in K -- above K's share of the MGF)
            if th > 0.0 and th <= 2.0 * theta0 and math.isfinite(K):
                exact = count * _discrete_gaussian_cgf(sigma, th)
                assert K >= exact, (th, step, K, float(exact))
                checked += 1
    assert checked >= 10
