"""optcomp.kov_noise: KOV Section 4 (Cor 4.1, Thms 4.2-4.4) against independent references.

The Gaussian reference is the hockey-stick integral of N(0, s²) against N(Δ, s²) (k Gaussian
queries compose to one with s = sigma/sqrt(k): the sum of the k outputs is sufficient),
computed in mpmath from the densities, not from the code under test."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import optcomp
from optcomp import kov_noise
from optcomp.mechanisms import BlackBox, Geometric, Laplace
from test_mechanisms import ref_gaussian  # the 60-digit Gaussian profile, written once


def test_variance_formula():
    k, eps, delta, sens = 100, 0.5, 1e-5, 2.0
    expected = 8 * k * sens**2 * math.log(math.e + eps / delta) / eps**2
    v = kov_noise.kov_variance(k, eps, delta, sens)
    assert v >= expected * (1 - 1e-15) and v == pytest.approx(expected, rel=1e-14)
    assert kov_noise.laplace_for(k, eps, delta, sens).variance() == pytest.approx(expected, rel=1e-14)
    assert kov_noise.gaussian_for(k, eps, delta, sens).variance() == pytest.approx(expected, rel=1e-14)


def test_per_query_budget_formula_and_corollary_4_1():
    """Cor 4.1 checked with the exact optimal composition of the engine (KOV Thm 3.3)."""
    for k, eps, delta in [(10, 0.5, 1e-5), (100, 0.9, 1e-6), (1000, 0.1, 1e-3)]:
        e0, d0 = kov_noise.per_query_budget(k, eps, delta)
        assert e0 == pytest.approx(math.sqrt(eps**2 / (4 * k * math.log(math.e + eps / delta))), rel=1e-14)
        assert d0 <= delta / (2 * k) and d0 == pytest.approx(delta / (2 * k), rel=1e-15)
        assert optcomp.delta_g(e0, d0, k=k, eps_g=eps, method="optimal") <= delta


# (k = 10 takes the code path of k = 1 and k = 1000, between them: with `-m slow`)
@pytest.mark.parametrize("k", [1, pytest.param(10, marks=pytest.mark.slow), 1000])
@pytest.mark.parametrize("eps", [0.01, 0.5, 3.0, 30.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-3, 0.5])
def test_theorem_4_3_holds_for_moderate_eps(k, eps, delta):
    g = kov_noise.gaussian_for(k, eps, delta)
    assert kov_noise.kov_gaussian_condition(k, eps, delta, g.sigma)
    assert ref_gaussian(g.sigma / math.sqrt(k), 1.0, eps) <= delta
    # and the library's composed Gaussian says the same, on the safe side of the reference
    comp = kov_noise.gaussian_composition(k, g.sigma)
    assert comp.profile(eps) >= ref_gaussian(g.sigma / math.sqrt(k), 1.0, eps) * (1 - 1e-25)


@pytest.mark.parametrize("k, eps, delta", [(1, 200.0, 1e-6), (10, 500.0, 1e-6), (1, 100.0, 0.5)])
def test_theorem_4_3_fails_for_large_eps(k, eps, delta):
    """Thm 4.3 is stated 'for any eps > 0'; for large eps the stated variance misses
    (eps, delta), and the appendix's own condition does not hold for it."""
    g = kov_noise.gaussian_for(k, eps, delta)
    assert not kov_noise.kov_gaussian_condition(k, eps, delta, g.sigma)
    assert ref_gaussian(g.sigma / math.sqrt(k), 1.0, eps) > delta


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 3.0])
@pytest.mark.parametrize("eps, delta", [(0.5, 1e-6), (5.0, 1e-3), (50.0, 0.1)])
def test_appendix_b_condition_is_sufficient(sigma, eps, delta):
    """Wherever the appendix's condition holds, the Gaussian is (eps, delta)-DP."""
    if kov_noise.kov_gaussian_condition(1, eps, delta, sigma):
        assert ref_gaussian(sigma, 1.0, eps) <= delta


@pytest.mark.parametrize("k, eps, delta", [(1, 0.5, 1e-3), (2, 0.9, 1e-2), (3, 0.3, 1e-4)])
def test_theorem_4_2_laplace_small_k(k, eps, delta):
    """Thm 4.2 for small k, certified: the k-fold composition of the Laplace mechanism's
    *upper* discrete pair (a dominating pair) already meets (eps, delta)."""
    lap = kov_noise.laplace_for(k, eps, delta)
    h = lap.sensitivity / lap.scale / 200
    up = lap.discrete_pair(h, "upper")
    dense = np.zeros(int(up.n[-1] - up.n[0]) + 1)
    dense[up.n - up.n[0]] = up.p_hi
    comp = np.array([1.0])
    for _ in range(k):
        comp = np.convolve(comp, dense)
    n0 = k * int(up.n[0])
    with mpmath.workdps(30):
        tot = mpmath.fsum(w * -mpmath.expm1(mpmath.mpf(eps) - (n0 + i) * mpmath.mpf(h))
                          for i, w in enumerate(comp.tolist()) if (n0 + i) * h > eps and w)
    assert tot * (1 + 1e-12) <= delta


@pytest.mark.parametrize("eps", [0.05, 0.4, 2.0])
def test_theorem_4_4_geometric_is_randomized_response(eps):
    bb = kov_noise.geometric_as_randomized_response(eps)
    assert bb == BlackBox(eps, 0.0)
    for x in (0.0, eps / 3, eps):
        assert Geometric(eps).profile_bounds(x) == bb.profile_bounds(x)
    with pytest.raises(ValueError, match="sensitivity"):
        kov_noise.geometric_as_randomized_response(eps, 2)


def test_staircase_for():
    s = kov_noise.staircase_for(100, 0.5, 1e-5)
    e0, _ = kov_noise.per_query_budget(100, 0.5, 1e-5)
    assert s.eps == e0 and s.gamma == pytest.approx(1 / (1 + math.exp(e0 / 2)), rel=1e-15)


@pytest.mark.parametrize("call, name", [
    (lambda: kov_noise.kov_variance(0, 0.5, 1e-5), "k"), (lambda: kov_noise.kov_variance(10, 0.0, 1e-5), "eps"),
    (lambda: kov_noise.kov_variance(10, 0.5, 0.0), "delta"), (lambda: kov_noise.kov_variance(10, 0.5, 1.5), "delta"),
    (lambda: kov_noise.laplace_for(10, 0.5, 1e-5, -1.0), "sensitivity"),
])
def test_validation(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_laplace_type():
    assert isinstance(kov_noise.laplace_for(10, 0.5, 1e-5), Laplace)
