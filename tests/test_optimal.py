"""Exact optimal composition (KOV Thm 3.3, MV Thms 1.4/1.5) against independent references.

The references here are written from the papers' statements, not from the code under test:
brute force over the outcomes {0,1,2,3}^k of the randomized responses of MV Def. 3.1,
KOV Theorem 3.3's corner formula, and mpmath at 60-digit precision.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import optimal as opt
from optcomp._inputs import mechanisms
from optcomp.loss import LossDistribution, residual_target, solve_segments



@pytest.fixture(autouse=True)
def _precision():
    """60 digits for every reference here (other test modules may change mpmath's global)."""
    with mp.workdps(60):
        yield


# ----------------------------------------------------------------------------- references


def rr_delta_bruteforce(eps, delta, eps_g):
    """max_Q P0(Q) - e^{eps_g} P1(Q) over the product of MV Def. 3.1 randomized responses
    (outcomes {0,1,2,3}^k), in mpmath: the definition of (eps_g, delta_g)-DP itself."""
    eg = mp.e ** mp.mpf(eps_g)
    singles = []
    for e, d in zip(eps, delta):
        e, d = mp.mpf(float(e)), mp.mpf(float(d))
        a = 1 - d
        p0 = [d, a * mp.e**e / (1 + mp.e**e), a / (1 + mp.e**e), mp.mpf(0)]
        p1 = [mp.mpf(0), a / (1 + mp.e**e), a * mp.e**e / (1 + mp.e**e), d]
        singles.append((p0, p1))
    total = mp.mpf(0)
    for x in itertools.product(range(4), repeat=len(eps)):
        q0 = mp.fprod(s[0][xi] for s, xi in zip(singles, x))
        q1 = mp.fprod(s[1][xi] for s, xi in zip(singles, x))
        if q0 > eg * q1:
            total += q0 - eg * q1
    return total


def least_eps(delta_fn, delta_g, hi):
    """Least eps_g >= 0 with delta_fn(eps_g) <= delta_g, by mpmath bisection."""
    if delta_fn(0) <= delta_g:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), mp.mpf(hi)
    if delta_fn(hi) > delta_g:
        return mp.inf
    for _ in range(90):
        mid = (lo + hi) / 2
        if delta_fn(mid) <= delta_g:
            hi = mid
        else:
            lo = mid
    return hi


def mp_homogeneous(eps, k, delta_g, delta=0.0):
    """OptComp for k identical (eps, delta) mechanisms in mpmath: MV Thm 1.4 solved on the
    segment between consecutive breakpoints (k - 2i) eps, with all atoms of positive loss."""
    e = mp.mpf(eps)
    p = mp.e**e / (1 + mp.e**e)
    q = 1 / (1 + mp.e**e)
    t = 1 - (1 - mp.mpf(delta_g)) / (1 - mp.mpf(delta)) ** k
    if t < 0:
        return mp.inf
    m0 = k // 2 + 1 if k % 2 == 0 else (k + 1) // 2
    masses = []
    pm = mp.binomial(k, m0) * p**m0 * q ** (k - m0)
    for m in range(m0, k + 1):
        masses.append(((2 * m - k) * e, pm))
        pm = pm * (k - m) / (m + 1) * p / q
    # H(x) for x in [l_{j-1}, l_j): A_j - e^x B_j with suffix sums over atoms >= j
    n = len(masses)
    A = [mp.mpf(0)] * (n + 1)
    B = [mp.mpf(0)] * (n + 1)
    for j in range(n - 1, -1, -1):
        A[j] = A[j + 1] + masses[j][1]
        B[j] = B[j + 1] + masses[j][1] * mp.e ** (-masses[j][0])
    losses = [mp.mpf(0)] + [l for l, _ in masses]  # breakpoint 0 then the atoms
    # find the segment: H(losses[j]) uses atoms with loss > losses[j]
    for j in range(n + 1):
        x = losses[j]
        idx = j  # atoms masses[j:] have loss > losses[j]
        h = A[idx] - mp.e**x * B[idx]
        if h <= t:
            if j == 0:
                return mp.mpf(0)
            seg = j - 1  # root in (losses[j-1], losses[j]]: atoms masses[j-1:]
            return mp.log((A[seg] - t) / B[seg])
    raise AssertionError("unreachable")


def mp_heterogeneous(eps, delta, delta_g):
    """OptComp by MV Thm 1.5 written in probabilities, all 2^k atoms in mpmath."""
    E = [mp.mpf(float(e)) for e in eps]
    P = [mp.e**e / (1 + mp.e**e) for e in E]
    t = 1 - (1 - mp.mpf(delta_g)) / mp.fprod(1 - mp.mpf(float(d)) for d in delta)
    if t < 0:
        return mp.inf
    atoms = []
    for bits in itertools.product((0, 1), repeat=len(E)):
        loss = mp.fsum(e if b else -e for e, b in zip(E, bits))
        if loss > 0:
            atoms.append((loss, mp.fprod(p if b else 1 - p for p, b in zip(P, bits))))

    def H(x):
        return mp.fsum(pm * (1 - mp.e ** (x - l)) for l, pm in atoms if l > x)

    return least_eps(H, t, sum(E))


def check_upper(value, ref, rtol=1e-12, atol=1e-14):
    """value is a certified upper bound of ref and within tolerance of it."""
    ref = float(ref) if ref != mp.inf else math.inf
    if math.isinf(ref):
        assert math.isinf(value)
        return
    assert value >= ref, (value, ref)
    assert value - ref <= rtol * abs(ref) + atol, (value, ref, (value - ref) / max(ref, 1e-300))


# ----------------------------------------------------------------------------- Thm 1.5 vs Def 3.1


@pytest.mark.parametrize(
    "eps, delta, delta_g",
    [
        ([0.5, 0.5, 0.5], [0.0, 0.0, 0.0], 0.01),
        ([0.3, 0.7, 1.1], [0.01, 0.0, 0.02], 0.05),
        ([0.1, 0.2, 0.4, 0.8], [0.001, 0.002, 0.0, 0.003], 0.02),
        ([1.0, 0.25, 0.6, 0.05, 0.9], [0.0, 0.01, 0.0, 0.0, 0.005], 0.03),
        ([0.2] * 5, [0.01] * 5, 0.1),
    ],
)
def test_theorem_1_5_matches_randomized_response_product(eps, delta, delta_g):
    m = mechanisms(eps, delta)
    ref = least_eps(lambda x: rr_delta_bruteforce(eps, delta, x), mp.mpf(delta_g), sum(eps))
    check_upper(optcomp.epsilon_g(eps, delta, delta_g=delta_g), ref)
    # the paper's own 2^k formula (float) agrees to float accuracy
    assert opt.optimal_epsilon_bruteforce(m, delta_g) == pytest.approx(float(ref), rel=1e-12, abs=1e-13)
    # and the delta direction is the hockey-stick divergence itself
    for eg in (0.0, 0.3 * sum(eps), 0.8 * sum(eps)):
        d = optcomp.delta_g(eps, delta, eps_g=eg)
        ref_d = rr_delta_bruteforce(eps, delta, eg)
        assert d >= ref_d
        assert d - float(ref_d) <= 1e-12 * float(ref_d) + 1e-16


# ----------------------------------------------------------------------------- KOV Thm 3.3 corners


@pytest.mark.parametrize("eps, delta, k", [(0.4, 0.0, 5), (0.4, 0.1, 5), (0.1, 0.001, 30), (1.0, 0.0, 12), (0.05, 0.0, 200)])
def test_kov_theorem_3_3_corners(eps, delta, k):
    e = mp.mpf(eps)
    for i in range(0, k // 2 + 1, max(1, k // 20)):
        delta_i = mp.fsum(
            mp.binomial(k, l) * (mp.e ** ((k - l) * e) - mp.e ** ((k - 2 * i + l) * e)) for l in range(i)
        ) / (1 + mp.e**e) ** k
        delta_corner = 1 - (1 - mp.mpf(delta)) ** k * (1 - delta_i)
        corner = (k - 2 * i) * eps
        d = optcomp.delta_g(eps, delta, k=k, eps_g=corner)
        assert d >= delta_corner and d - float(delta_corner) <= 1e-12 * float(delta_corner) + 1e-15
        if i > 0 and float(delta_corner) < 1:
            # at delta_g = delta_corner the optimum is the corner (k - 2i) eps exactly
            # (with delta > 0, rounding delta_corner to a float perturbs the residual
            # delta_i by ~1e-16 delta_corner: a conditioning the tolerance has to allow)
            cond = 1e-15 * float(delta_corner) / float(delta_i)
            eg = optcomp.epsilon_g(eps, delta, k=k, delta_g=float(delta_corner))
            assert eg == pytest.approx(corner, rel=max(1e-10, 100 * cond), abs=1e-11)


def test_corner_i0_is_basic_composition():
    # delta_g = 1 - (1 - delta)^k exactly (0.75 = 1 - 0.5^2): the optimum is k*eps
    assert optcomp.epsilon_g(0.3, 0.5, k=2, delta_g=0.75) == pytest.approx(0.6, rel=1e-15)
    assert optcomp.epsilon_g(0.3, 0.5, k=2, delta_g=0.7499999999) == math.inf


# ----------------------------------------------------------------------------- mpmath, hard cases


HARD = [
    (1e-4, 1000, 2.0**-25),
    pytest.param(1e-4, 100_000, 1e-30, marks=pytest.mark.slow),  # k = 20000 and 5000 at 1e-30 stay in the default run
    (0.01, 1000, 2.0**-25),
    (0.01, 20_000, 1e-30),
    (0.1, 5000, 1e-30),
    (0.5, 3000, 2.0**-25),
    (1.0, 777, 1e-12),
    (5.0, 400, 1e-30),
    (5.0, 2000, 2.0**-25),
    (0.005, 1000, 2.0**-40),
    (0.2, 1, 0.05),
    (3.0, 2, 1e-9),
]


@pytest.mark.parametrize("eps, k, delta_g", HARD)
def test_homogeneous_against_mpmath(eps, k, delta_g):
    ref = mp_homogeneous(eps, k, delta_g)
    check_upper(optcomp.epsilon_g(eps, k=k, delta_g=delta_g), ref)


@pytest.mark.parametrize("eps, delta, k, delta_g", [(0.1, 1e-4, 300, 1e-2), (0.02, 1e-7, 2000, 1e-3), (1.0, 0.01, 50, 0.9)])
def test_homogeneous_with_delta_against_mpmath(eps, delta, k, delta_g):
    ref = mp_homogeneous(eps, k, delta_g, delta)
    check_upper(optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g), ref)


@pytest.mark.slow
@pytest.mark.parametrize("eps, k, delta_g", [(0.01, 1_000_000, 1e-30), (1e-4, 1_000_000, 2.0**-25), (0.5, 200_000, 1e-10)])
def test_homogeneous_million_against_mpmath(eps, k, delta_g):
    ref = mp_homogeneous(eps, k, delta_g)
    check_upper(optcomp.epsilon_g(eps, k=k, delta_g=delta_g), ref)


def test_homogeneous_huge_k_eps_no_overflow():
    # k * eps = 5e6: no e^{k eps} anywhere; the answer is below basic and inverts
    for eps, k in [(5.0, 1_000_000), (2.0, 300_000), (40.0, 1000)]:
        v = optcomp.epsilon_g(eps, k=k, delta_g=1e-9)
        assert math.isfinite(v) and 0 < v <= k * eps
        d = optcomp.delta_g(eps, k=k, eps_g=v)
        assert 0 < d <= 1e-9 * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_heterogeneous_against_mpmath(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 11))
    eps = rng.uniform(1e-4, 2.0, k) * rng.choice([0.01, 1.0], k)
    delta = rng.uniform(0, 0.01, k) * (seed % 2)
    delta_g = float(10 ** rng.uniform(-30, -1)) + float(1 - np.prod(1 - delta))
    ref = mp_heterogeneous(eps, delta, delta_g)
    check_upper(optcomp.epsilon_g(eps, delta, delta_g=delta_g), ref, rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- algorithms agree


def _equal_as_distinct(eps, k):
    """k identical mechanisms listed as k separate two-point factors (not merged)."""
    return [(eps, 1)] * k


# k = 20 (2^20 brute-force products, the same check as k = 16 and 18) behind -m slow
@pytest.mark.parametrize("eps, k, delta_g", [(0.1, 16, 1e-6), pytest.param(0.5, 20, 2.0**-25, marks=pytest.mark.slow),
                                             (0.03, 18, 1e-3)])
def test_homogeneous_closed_form_equals_heterogeneous_algorithms(eps, k, delta_g):
    m = mechanisms(eps, 0.0, k)
    t = residual_target(m, delta_g)
    closed = optcomp.epsilon_g(eps, k=k, delta_g=delta_g)
    groups = _equal_as_distinct(eps, k)
    loss, _, mass, slack = opt.product_atoms(groups)
    full = solve_segments(LossDistribution(loss, mass, slack=slack), t)
    halves, _ = opt._split(groups)
    mitm = opt._MeetInTheMiddle(*halves).epsilon(t)
    brute = opt.optimal_epsilon_bruteforce(m, delta_g)
    for v in (full, mitm, brute):
        assert v == pytest.approx(closed, rel=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_meet_in_the_middle_matches_full_enumeration(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(10, 21))
    eps = rng.uniform(0.001, 1.5, k)
    delta = rng.uniform(0, 1e-3, k)
    delta_g = float(10 ** rng.uniform(-12, -0.5)) + float(1 - np.prod(1 - delta))
    full = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    full_d = optcomp.delta_g(eps, delta, eps_g=0.5 * full)
    monkeypatch.setattr(opt, "FULL_ENUMERATION", 4)
    mitm = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    mitm_d = optcomp.delta_g(eps, delta, eps_g=0.5 * full)
    assert mitm == pytest.approx(full, rel=1e-12)
    assert mitm_d == pytest.approx(full_d, rel=1e-12)
    brute = opt.optimal_epsilon_bruteforce(mechanisms(eps, delta), delta_g)
    assert full == pytest.approx(brute, rel=1e-12)


def test_grouped_matches_meet_in_the_middle_and_bruteforce(monkeypatch):
    eps = np.repeat([0.05, 0.2, 0.7], [6, 5, 4])
    delta_g = 1e-5
    grouped = optcomp.epsilon_g(eps, delta_g=delta_g)
    brute = opt.optimal_epsilon_bruteforce(mechanisms(eps), delta_g)
    assert grouped == pytest.approx(brute, rel=1e-12)
    big = np.repeat([0.01, 0.05, 0.1], 300)
    g1 = optcomp.epsilon_g(big, delta_g=1e-6)
    monkeypatch.setattr(opt, "FULL_ENUMERATION", 4)
    g2 = optcomp.epsilon_g(big, delta_g=1e-6)
    assert g1 == pytest.approx(g2, rel=1e-12)
    assert g1 < optcomp.epsilon_g(big, delta_g=1e-6, method="kov")


def _product_excess_mp(groups, x):
    """H(x) = sum_{l > x} P0[L = l] (1 - e^{x - l}) for the product of binomials (eps, n) of
    MV Def. 3.1 randomized responses, from the definition: exact rational positions, masses
    C(n, j) p^j q^(n-j) in mpmath."""
    from fractions import Fraction

    atoms = {Fraction(0): mp.mpf(1)}
    for eps, n in groups:
        p = mp.e ** mp.mpf(eps) / (1 + mp.e ** mp.mpf(eps))
        masses = [mp.binomial(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
        new = {}
        for pos, w in atoms.items():
            for j in range(n + 1):
                key = pos + Fraction(eps) * (2 * j - n)
                new[key] = new.get(key, 0) + w * masses[j]
        atoms = new
    fx = Fraction(x)
    return mp.fsum(w * -mp.expm1(-(mp.mpf((pos - fx).numerator) / (pos - fx).denominator))
                   for pos, w in atoms.items() if pos > fx)


WINDOWED = [(0.5, 40, 15, 30), (1.0, 30, 18, 28)]  # narrow: ~3 % of the mass outside, charged visibly


@pytest.mark.parametrize("x", [0.0, 5.0, 12.0, 20.0, 30.0, 41.0])
def test_windowed_product_brackets_the_definition(x):
    """Windows of the factors (the mass below lumped at the window's first atom, the mass
    above at +inf; both dropped by lower bounds) bracket H(x) of the whole product, listed or
    met in the middle, and the bracket is no wider than the mass outside the windows."""
    groups = [g[:2] for g in WINDOWED]
    h = _product_excess_mp(groups, x)
    dist = opt.product_distribution(WINDOWED, lower=True)
    upper, lower = dist.excess(x), dist.excess_lower(x)
    assert lower <= h <= upper
    outside = opt.window_charges(WINDOWED)
    assert 0.01 < outside < 0.1  # the charges are not negligible here: the test can see them
    assert upper - lower <= outside * (1 + 1e-9) + 1e-12
    halves, _ = opt._split(WINDOWED)
    assert opt._MeetInTheMiddle(*halves).excess(x) >= h


@pytest.mark.parametrize("t", [0.5, 0.2, 0.05])  # above the mass put at +inf (0.039)
def test_windowed_product_roots_bracket_the_definition(t):
    groups = [g[:2] for g in WINDOWED]
    dist = opt.product_distribution(WINDOWED, lower=True)
    upper, lower = solve_segments(dist, t), dist.epsilon_lower(t)
    halves, _ = opt._split(WINDOWED)
    mitm = opt._MeetInTheMiddle(*halves).epsilon(t)
    assert _product_excess_mp(groups, upper) <= t  # the least x with H(x) <= t is <= upper
    assert _product_excess_mp(groups, mitm) <= t
    assert lower == 0.0 or _product_excess_mp(groups, lower) >= t  # ... and >= lower
    assert lower <= upper


def test_zero_eps_mechanisms_only_contribute_delta():
    assert optcomp.epsilon_g([0.0, 0.0], [0.1, 0.2], delta_g=0.3) == 0.0
    assert optcomp.epsilon_g([0.0, 0.0], [0.1, 0.2], delta_g=0.27) == math.inf
    a = optcomp.epsilon_g([0.3, 0.0, 0.5], [0.0, 0.01, 0.0], delta_g=0.02)
    b = optcomp.epsilon_g([0.3, 0.5], [0.0, 0.0], delta_g=1 - 0.98 / 0.99)
    assert a == pytest.approx(b, rel=1e-12)


def test_out_of_reach_raises_and_points_to_approx():
    eps = np.linspace(0.01, 0.2, 60) + 1e-7 * np.arange(60) ** 2
    with pytest.raises(opt.ExactTooLarge, match="approx"):
        optcomp.epsilon_g(eps, delta_g=1e-6, method="optimal")  # ("auto", the default, falls back)
    with pytest.raises(ValueError, match="max_atoms"):
        optcomp.epsilon_g([0.1, 0.2], delta_g=1e-6, max_atoms=0)


# ----------------------------------------------------------------------------- laws (Hypothesis)

eps_lists = st.lists(st.floats(0.0, 2.0), min_size=1, max_size=10)
deltas = st.floats(0.0, 0.05)
delta_gs = st.floats(1e-12, 0.5)


@settings(max_examples=150, deadline=None)
@given(eps=eps_lists, delta=deltas, delta_g=delta_gs)
def test_optimal_below_every_bound(eps, delta, delta_g):
    v = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    for method in ("basic", "drv", "kov", "advanced_pure"):
        b = optcomp.epsilon_g(eps, delta, delta_g=delta_g, method=method)
        if math.isfinite(b):
            assert v <= b * (1 + 1e-12) + 1e-15, method


@settings(max_examples=100, deadline=None)
@given(eps=eps_lists, delta=deltas, delta_g=delta_gs, i=st.integers(0, 9), bump=st.floats(1e-6, 0.5))
def test_monotone_in_each_eps_and_delta(eps, delta, delta_g, i, bump):
    i %= len(eps)
    base = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    more = list(eps)
    more[i] += bump
    assert optcomp.epsilon_g(more, delta, delta_g=delta_g) >= base * (1 - 1e-12)
    deltas_more = [delta] * len(eps)
    deltas_more[i] = min(delta + bump / 10, 0.5)
    assert optcomp.epsilon_g(eps, deltas_more, delta_g=delta_g) >= base * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(eps=eps_lists, delta=deltas, d1=delta_gs, d2=delta_gs)
def test_monotone_in_delta_g(eps, delta, d1, d2):
    lo, hi = sorted((d1, d2))
    assert optcomp.epsilon_g(eps, delta, delta_g=hi) <= optcomp.epsilon_g(eps, delta, delta_g=lo) * (1 + 1e-12)


@settings(max_examples=150, deadline=None)
@given(eps=eps_lists, delta=deltas, delta_g=delta_gs)
def test_epsilon_and_delta_are_inverse(eps, delta, delta_g):
    v = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    if math.isinf(v):
        assert delta_g < -math.expm1(len(eps) * math.log1p(-delta)) * (1 + 1e-9)
        return
    # the reported eps_g is certified at delta_g ...
    assert optcomp.delta_g(eps, delta, eps_g=v) <= delta_g * (1 + 1e-11) + 1e-16
    # ... and is (nearly) the least: slightly below it, delta exceeds delta_g
    if v > 1e-9:
        below = v * (1 - 1e-7)
        assert optcomp.delta_g(eps, delta, eps_g=below) >= delta_g * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(1e-4, 3.0), k=st.integers(1, 3000), delta=st.floats(0, 1e-3), log_dg=st.floats(-30, -0.5))
def test_homogeneous_epsilon_delta_inverse(eps, k, delta, log_dg):
    delta_g = 10**log_dg
    v = optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g)
    if math.isinf(v):
        assert delta_g <= -math.expm1(k * math.log1p(-delta)) * (1 + 1e-9)
        return
    # delta_g(eps_g) is an upper bound whose charged rounding is relative to the tail
    # mass S, not to H: for dense lattices (small eps) S/H ~ z/(sqrt(k) eps) ~ 10^3 here
    assert optcomp.delta_g(eps, delta, k=k, eps_g=v) <= delta_g * (1 + 1e-10)
    assert v <= k * eps * (1 + 1e-15)


@pytest.mark.parametrize("k, eps", [(1, 0.3), (37, 0.3), (1000, 0.1), (10**5, 5.0), (10**6, 0.01), (10**6, 1e-4), (10**6, 1.0), (100, 40.0), (2000, 12.0)])
def test_binomial_mass_error_bound(k, eps):
    """The binomial masses used by the exact algorithms are upper bounds of the true
    P0[M = m] (true p = e^eps/(1+e^eps) in 50 digits), and within 1e-11 of them."""
    e = mp.mpf(eps)
    p = mp.e**e / (1 + mp.e**e)
    ms = np.unique(np.linspace(k // 2, k, 80).astype(int))
    _, lower, values, _, _ = opt.binomial_atoms(eps, k, k // 2, k)
    lower, values = lower[ms - k // 2], values[ms - k // 2]
    for m, lo, v in zip(ms, lower, values):
        ref = mp.binomial(k, int(m)) * p ** int(m) * (1 - p) ** (k - int(m))
        if ref > mp.mpf("1e-290"):
            assert lo <= ref <= v, (m, lo, v, ref)
            assert (v - ref) / ref < 1e-11 * (1 + abs(int(m) - k * float(p)) / 1e3)
