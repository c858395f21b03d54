"""The drivers' certified Chernoff fallback (``Workload.chernoff_delta`` / ``chernoff_epsilon``).

When a lattice pass would exceed its size limit, the bracket a driver reports keeps an upper
end from a Chernoff bound, H(x) <= P[L > x] <= P[a leaf at +inf] + E[e^{theta (L - x)}],
instead of the trivial 1 (delta) or the top atom / inf (eps).  Checked here against the
60-digit references written from MV Thm 1.5 / KOV Thm 3.3 (randomized response), the GDP
closed form (Gaussian), Laplace's profile (k = 1), and the engine's own certified lower
bounds (k-fold Laplace), at every tilt theta >= 0 -- the bound must hold at any theta, not
only at the one the driver picks -- and then through the public functions at sizes where
the lattice gives up.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

import optcomp
from optcomp._lattice.workload import GaussianSource, Source, Workload
from optcomp._refine import step_below as _step_below
from optcomp.mechanisms import Gaussian, Laplace, Pair

from reference import ReferenceTooCostly, ref_delta_bounds, ref_epsilon_bounds


def _log(lo, hi):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0**e)


GROUPS = st.lists(st.tuples(_log(1e-4, 5.0), st.integers(1, 150)), min_size=1, max_size=2,
                  unique_by=lambda g: g[0])
THETA = st.one_of(st.just(0.0), _log(1e-3, 1e4))


def _rr_workload(groups):
    groups = sorted(groups)
    return Workload(np.array([e for e, _ in groups]), np.array([c for _, c in groups], dtype=np.int64))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=GROUPS, frac=st.floats(0.0, 1.0), theta=THETA)
@example(groups=[(0.01, 150), (1.0, 3)], frac=0.9, theta=300.0)   # deep tail: H ~ 1e-100
@example(groups=[(5.0, 150)], frac=0.999, theta=1e4)               # next to the top atom
def test_chernoff_delta_is_above_the_optimal_delta_at_every_tilt(groups, frac, theta):
    work = _rr_workload(groups)
    top = sum(c * e for e, c in groups)
    x = frac * top
    bound = work.chernoff_delta(x, theta, 1.0)
    try:
        lo, _, _ = ref_delta_bounds([(e, 0.0, c) for e, c in groups], x)
    except ReferenceTooCostly:
        reject()
    assert 0.0 < bound <= 1.0 and mpmath.mpf(bound) >= lo, (groups, x, theta, bound, lo)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=GROUPS, t=_log(1e-300, 0.5), theta=THETA)
@example(groups=[(0.01, 150)], t=1e-300, theta=50.0)
def test_chernoff_epsilon_is_above_the_optimal_epsilon_at_every_tilt(groups, t, theta):
    work = _rr_workload(groups)
    x = work.chernoff_epsilon(t, theta, 1.0)
    assert x >= 0.0 and not math.isnan(x)
    if theta == 0.0:
        assert x == math.inf
    try:
        lo, _, _ = ref_epsilon_bounds([(e, 0.0, c) for e, c in groups], t)
    except ReferenceTooCostly:
        reject()
    assert mpmath.mpf(x) >= lo, (groups, t, theta, x, lo)


def _gdp_delta(mu, x):
    """delta(x) of mu-GDP: Phi(-x/mu + mu/2) - e^x Phi(-x/mu - mu/2) (Dong, Roth, Su), 40 digits."""
    with mpmath.workdps(40):
        mu, x = mpmath.mpf(mu), mpmath.mpf(x)
        return mpmath.ncdf(-x / mu + mu / 2) - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2)


@pytest.mark.parametrize("mu", [0.01, 0.5, 3.0])
@pytest.mark.parametrize("x_sd", [0.0, 2.0, 8.0, 30.0])
@pytest.mark.parametrize("theta", [0.0, 0.3, 5.0, 200.0])
def test_chernoff_delta_of_a_gaussian_leaf_with_its_truncated_tails(mu, x_sd, theta):
    """The Gaussian leaf sends its tail beyond the cells to +inf: the union bound counts it."""
    work = Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (GaussianSource(mu, mu, 1e-30),))
    x = mu * mu / 2 + x_sd * mu
    h = _step_below(mu / 64)
    bound = work.chernoff_delta(x, theta, h)
    assert mpmath.mpf(bound) >= _gdp_delta(mu, x), (mu, x, theta, bound)
    log_inf = work.sources[0].leaf(h).log_inf
    assert log_inf > -math.inf and bound >= math.exp(log_inf)  # the +inf mass is in it


@pytest.mark.parametrize("scale", [0.3, 1.0, 30.0])
@pytest.mark.parametrize("frac", [0.0, 0.4, 0.8, 0.99])
@pytest.mark.parametrize("theta", [0.0, 0.5, 3.0, 40.0])
def test_chernoff_delta_of_laplace(scale, frac, theta):
    """One Laplace (delta(x) = 1 - e^{(x - a)/2} below a = 1/b, from its profile) and 20
    copies (against the engine's certified lower bound)."""
    a = 1.0 / scale
    one = Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (Source(Laplace(scale), 1),))
    x = frac * a
    assert one.chernoff_delta(x, theta, _step_below(a / 256)) >= -math.expm1((x - a) / 2) * (1 - 1e-12)
    many = Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (Source(Laplace(scale), 20),))
    x = frac * 20 * a
    lower = optcomp.delta_bounds([Laplace(scale)], counts=[20], eps_g=x, tol=1e-3).lower
    assert many.chernoff_delta(x, theta, _step_below(a / 256)) >= lower


def test_a_size_limit_reports_the_chernoff_bound_not_a_trivial_one():
    """10^5 Laplace of scale 6887 at eps_g = 2 (true delta ~1e-400, below float; the lattice
    needs ~9e5 points at tol 1e-3, held to 2^18 here) and 10^6 of them (5.05e-45, needs more
    at tol 1e-4): the bracket carried by the size limit, and auto's answer, are tiny and
    certified -- 1 before; without the limit the lattice answers within the float floor."""
    m = Laplace(6887.489)
    try:  # within the delta tolerance's absolute floor 2^-1000 (a result), or a size limit
        b = optcomp.delta_bounds(m, k=10**5, eps_g=2.0, tol=1e-3)
    except optcomp.ApproxTooCostly as exc:
        assert "Chernoff" in str(exc)
        b = exc.bounds
    assert b.lower == 0.0 and 0.0 < b.upper <= 1e-300
    value = optcomp.delta_g(m, k=10**6, eps_g=2.0)
    assert 5.04e-45 <= value <= 1e-40  # lattice brackets: [5.0457e-45, 5.0622e-45], by one FFT [5.0587e-45, 5.0589e-45]


def test_a_gaussian_beside_another_mechanism_far_below_float_masses_gets_a_finite_epsilon():
    """The known limit of issue 18: a Gaussian beside another mechanism at delta_g ~ 1e-285
    exceeded the leaf size and auto returned inf.  Now a certified finite upper bound, above
    the Gaussian's own eps_g (adding a mechanism never lowers the loss) and near it."""
    g = Gaussian(1.0)
    alone = optcomp.epsilon_g([g], delta_g=1e-285)
    both = optcomp.epsilon_g([g, Laplace(10.0)], delta_g=1e-285)
    assert math.isfinite(both) and alone <= both <= alone + 0.1 + 5.0, (alone, both)


def test_tilts_outside_the_half_line_give_the_trivial_bounds():
    work = _rr_workload([(0.1, 5), (0.37, 7)])
    for theta in (math.inf, math.nan, -1.0):
        assert work.chernoff_epsilon(1e-300, theta, 1.0) == math.inf
        assert work.chernoff_delta(0.5, theta, 1.0) == 1.0


def test_found_by_the_audit_of_the_fallback():
    """Three crashes (a traceback instead of an answer) the audit found beside the fallback:
    a pass with no finite upper end (delta_g = 1e-305 next to a Gaussian's truncated tails)
    asked for log2(0); a mechanism with all its P-mass at +inf had no finite part; and its
    delta event of probability 1 broke the residual target.  A fully distinguishing pair has
    delta = 1 at every eps_g: eps_g is inf for every delta_g < 1."""
    g = Gaussian(1.0)
    alone = optcomp.epsilon_g([g], delta_g=1e-305)
    x = optcomp.epsilon_g([0.1, 0.1 * 2**0.5, g], counts=[100, 100, 1], delta_g=1e-305)
    # adding mechanisms never lowers eps_g; pure ones add at most their sum (basic composition)
    assert alone <= x <= alone + 100 * 0.1 + 100 * 0.1 * 2**0.5 + 1e-9, (alone, x)
    blind = Pair((1.0, 0.0), (0.0, 1.0))
    assert optcomp.delta_bounds([blind], eps_g=0.5).upper == 1.0
    assert optcomp.delta_g([blind, Laplace(1.0)], eps_g=0.5) == 1.0
    assert optcomp.epsilon_g([blind], delta_g=0.5) == math.inf
    assert optcomp.epsilon_g([blind, Laplace(1.0)], counts=[1, 3], delta_g=0.999) == math.inf


def test_a_hopeless_first_pass_is_not_run_and_the_fallback_searches_steps_and_tilts():
    """10^9 subsampled Gaussian steps (q = 1e-3, sigma = 0.8) need ~8e8 lattice points at tol
    1e-3: a first pass at the budget's 1/16 would bracket nothing ([0, 3573] after 15-30 s
    per direction).  The size limit answers at once, from the Chernoff bound searched over
    steps and tilts -- 2636 at the one coarse step before, within 3 % of the mu-GDP
    estimate mu^2/2 + mu sqrt(2 log 1/delta) (mu = q sqrt(k (e^{1/sigma^2} - 1)): 2183) now;
    the mixture's loss has a heavier right tail than the CLT's normal, so that estimate is a
    scale here, not a bound.  In the delta direction, at eps_g 2700, the bracket's upper end
    was 1.0 (a step-by-ulp loop over 10^9 ulps took 90 s before it)."""
    from optcomp.mechanisms import Subsampled

    mech = Subsampled(Gaussian(0.8), 1e-3)
    seen = []
    with pytest.raises(optcomp.ApproxTooCostly) as exc:
        optcomp.epsilon_bounds(mech, k=10**9, delta_g=1e-5, progress=seen.append)
    assert not [s for s in seen if str(s.get("stage", "")).startswith("lattice")], seen
    assert "Chernoff" in str(exc.value)
    mu = 1e-3 * math.sqrt(1e9 * math.expm1(1 / 0.64))
    scale = mu * mu / 2 + mu * math.sqrt(2 * math.log(1e5))
    assert scale * 0.9 <= exc.value.bounds.upper <= scale * 1.03, (exc.value.bounds, scale)
    seen.clear()
    with pytest.raises(optcomp.ApproxTooCostly) as exc:
        optcomp.delta_bounds(mech, k=10**9, eps_g=2700.0, progress=seen.append)
    assert not [s for s in seen if str(s.get("stage", "")).startswith("lattice")], seen
    assert 0.0 < exc.value.bounds.upper <= 1e-20


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(q=_log(1e-3, 0.2), sigma=_log(0.5, 4.0), k=st.integers(2, 400), t=_log(1e-12, 1e-2))
def test_the_searched_chernoff_bound_of_subsampled_gaussians_is_above_the_lattice_lower_bound(q, sigma, k, t):
    """Each step and tilt the fallback tries gives a certified bound: the larger of the two
    global directions' is above the lattice's certified lower end (no size limit at these k)."""
    from optcomp._directions import direction_workloads
    from optcomp._inputs import mechanisms
    from optcomp._refine import least_chernoff
    from optcomp.mechanisms import Subsampled

    mech = Subsampled(Gaussian(sigma), q)
    try:
        lower = optcomp.epsilon_bounds(mech, k=k, delta_g=t, tol=1e-3).lower
    except optcomp.ApproxTooCostly:
        reject()
    uppers, steps = [], []
    for work, _, _ in direction_workloads(mechanisms(mech, 0.0, k, None), [(mech, k)]):
        theta = work.tilt_for(work.chernoff_guess(t))

        def bound(th, step, work=work):
            steps.append(step)
            return work.chernoff_epsilon(t, th, step)

        uppers.append(least_chernoff(work, 2.0**-10, theta, bound))
    assert len(uppers) == 2 and max(uppers) >= lower, (uppers, lower)
    assert len(set(steps)) >= 2


@functools.lru_cache(maxsize=None)
def _subsampled_gaussian_cgf(q, sigma, theta, direction):
    """log E_P[e^{theta L}] of one Poisson-subsampled Gaussian step (sensitivity 1), from the
    definitions at 30 digits (14 beyond float64's; 40 cost twice the time for a difference below
    1e-21 relative): Q = N(0, sigma^2), P = N(1, sigma^2), r = dP/dQ = e^{(2z - 1) /
    (2 sigma^2)}, P' = (1 - q) Q + q P; forward (P', Q): E_Q[(1 - q + q r)^{theta + 1}];
    reverse (Q, P'): E_Q[(1 - q + q r)^{-theta}].

    The integrand is written as one exponential, e^{-z^2 / (2 sigma^2) + power log(1 - q + q r)},
    the density's constant 1 / (sigma sqrt(2 pi)) taken out of the integral: the same function
    as npdf(z, 0, sigma) (1 - q + q r)^power, at less than half the cost (no npdf call, one exp
    fewer a point).  Against that product form at 30 digits the value differs by <= 7e-18 relative on
    every tilt the test below tries (that much is the product form's own cancellation at q =
    1e-6, where E ~ 1 + 1e-12: a 40-digit evaluation agrees with this one to 5e-18); the least
    relative margin the test distinguishes, (x - exact) / exact, is 4.6e-9."""
    with mpmath.workdps(30):
        q, s, th = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(theta)
        power = th + 1 if direction == "forward" else -th
        a = 1 / (s * s)  # (2z - 1) / (2 sigma^2) = a z - b
        b, h, one = a / 2, -a / 2, 1 - q
        exp, log = mpmath.exp, mpmath.log

        def f(z):
            return exp(h * z * z + power * log(one + q * exp(a * z - b)))

        integral = mpmath.quad(f, [-mpmath.inf, -10 * s, -3 * s, 0, 0.5, 3 * s, 10 * s, 40 * s + 40 * th,
                                   mpmath.inf])
        return mpmath.log(integral / (s * mpmath.sqrt(2 * mpmath.pi)))


@pytest.mark.parametrize("q, sigma, k, t", [(1e-3, 0.8, 10**9, 1e-5), (1e-6, 1.0, 10**12, 1e-5),
                                            (0.01, 1.0, 10**5, 1e-8), (0.2, 2.0, 300, 1e-3)])
def test_every_searched_chernoff_bound_is_above_the_exact_moment_generating_functions(q, sigma, k, t):
    """Each (tilt, step) the fallback tries, in each global direction, gives x with
    H(x) <= t from a certified MGF bound K >= k K1(theta): so x >= (k K1(theta) - log t) /
    theta with K1 the step's exact CGF (30-digit quadrature from the definitions, not from
    the leaves).  At 10^9 and 10^12 steps the fine steps the search adds are the ones that
    answer (2169.5 against the exact-MGF optimum 2164.9 over tilts; 36.1 against 7.17).
    (An invariant here, not everywhere: a leaf's truncated tail, P-mass <= 1e-300 a copy, is
    charged as a delta event and leaves K; at these tilts (theta <= ~10) and losses (<= ~40)
    it carries at most e^400 1e-300 of a copy's MGF, far below the margins.)"""
    from optcomp._directions import direction_workloads
    from optcomp._inputs import mechanisms
    from optcomp._refine import least_chernoff
    from optcomp.mechanisms import Subsampled

    mech = Subsampled(Gaussian(sigma), q)
    works = direction_workloads(mechanisms(mech, 0.0, k, None), [(mech, k)])
    assert len(works) == 2
    for (work, _, _), direction in zip(works, ("forward", "reverse")):
        theta = work.tilt_for(work.chernoff_guess(t))
        tried = []

        def bound(th, step, work=work):
            x = work.chernoff_epsilon(t, th, step)
            tried.append((th, x))
            return x

        least_chernoff(work, 2.0**-10, theta, bound)
        for th, x in tried:
            # (the tilts of the driver's grid, 0.5-2x its own, where the argument above holds; the
            # search beyond reaches tilts ~100 whose MGF a leaf's truncated tail -- charged as a
            # delta event, not in K -- may dominate: there x is certified by I + e^{K - theta x}
            # but not above the untruncated law's Chernoff value)
            if th > 2.0 * theta:
                continue
            if th > 0.0 and math.isfinite(x):
                exact = (k * _subsampled_gaussian_cgf(q, sigma, th, direction) - mpmath.log(t)) / th
                assert x >= exact, (direction, th, x, exact)
