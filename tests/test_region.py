"""Tests of optcomp.region: privacy regions / hypothesis-testing trade-off curves.

The reference is computed independently of every composition theorem: the Neyman-Pearson
trade-off curve of the product of the randomized responses of MV Def. 3.1 (which achieve
the optimal composition, KOV Thm 3.3), by sorting outcomes by likelihood ratio.  KOV Thm
3.3's delta_i is also recomputed from its closed form with exact rationals.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import region

ALPHA = np.linspace(0.0, 1.0, 401)


def kov_delta_i(eps: float, delta: float, k: int, i: int) -> float:
    """KOV Thm 3.3 (papers' README): delta_g of the ((k-2i) eps)-corner,
    1 - (1-delta)^k (1 - delta_i), delta_i = sum_{l<i} C(k,l)(e^{(k-l)eps} - e^{(k-2i+l)eps})/(1+e^eps)^k,
    evaluated with 60-digit-accurate rationals of the exponentials."""
    import mpmath as mp

    with mp.workdps(60):
        e = mp.mpf(eps)
        s = mp.fsum(mp.binomial(k, l) * (mp.e ** ((k - l) * e) - mp.e ** ((k - 2 * i + l) * e)) for l in range(i))
        di = s / (1 + mp.e**e) ** k
        return float(1 - (1 - mp.mpf(delta)) ** k * (1 - di))


# ------------------------------------------------------------------------------ single regions


@pytest.mark.parametrize("eps, delta", [(0.0, 0.0), (0.4, 0.0), (0.4, 0.1), (1.5, 0.01), (3.0, 0.3)])
def test_tradeoff_of_one_guarantee_is_the_kov_region(eps, delta):
    """beta(alpha) is the lower boundary of R(eps, delta) from the four inequalities."""
    beta = region.tradeoff(ALPHA, eps, delta)
    # on the boundary: two of the inequalities hold with equality or beta = 0 ...
    lhs1 = ALPHA + math.exp(eps) * beta
    lhs2 = math.exp(eps) * ALPHA + beta
    on_edge = np.isclose(np.minimum(lhs1, lhs2), 1 - delta) | (beta == 0)
    assert on_edge.all()
    # ... and every point of R has P_MD >= beta
    assert (lhs1 >= 1 - delta - 1e-12).all() and (lhs2 >= 1 - delta - 1e-12).all()
    # just below the boundary is outside, just above is inside
    inside = region.contains(ALPHA, beta + 1e-9, eps, delta)
    assert inside[region.upper_boundary(ALPHA, eps, delta) > beta + 1e-6].all()
    assert region.contains(ALPHA, beta, eps, delta, tol=1e-12).all()
    assert not region.contains(ALPHA, beta - 1e-6, eps, delta)[beta > 1e-6].any()


def test_region_is_point_symmetric():
    e, d = region.optimal_family(0.3, 0.01, k=7)
    assert np.allclose(region.upper_boundary(ALPHA, e, d), 1 - region.tradeoff(1 - ALPHA, e, d))
    # the upper boundary is above the lower one, and both are within [0, 1]
    lo, hi = region.tradeoff(ALPHA, e, d), region.upper_boundary(ALPHA, e, d)
    assert (lo <= hi + 1e-15).all() and lo.min() >= 0 and hi.max() <= 1


@pytest.mark.parametrize("eps, delta", [(0.4, 0.0), (0.4, 0.1), (0.1, 0.001), (2.0, 0.05)])
def test_k1_optimal_region_equals_r_eps_delta(eps, delta):
    e, d = region.optimal_family(eps, delta, k=1)
    assert e.tolist() == [eps]
    assert np.allclose(region.tradeoff(ALPHA, e, d), region.tradeoff(ALPHA, eps, delta), atol=1e-13)


@pytest.mark.parametrize("eps, delta, k", [(0.4, 0.0, 5), (0.4, 0.1, 4), (0.1, 0.001, 30), (1.0, 0.02, 9)])
def test_optimal_family_is_kov_theorem_3_3(eps, delta, k):
    e, d = region.optimal_family(eps, delta, k=k)
    assert len(e) == k // 2 + 1
    for i in range(k // 2 + 1):
        assert e[i] == pytest.approx((k - 2 * i) * eps, rel=1e-15)
        ref = kov_delta_i(eps, delta, k, i)
        assert d[i] >= ref * (1 - 1e-12)  # rounded up, never below
        assert d[i] == pytest.approx(ref, rel=1e-9, abs=1e-15)


# ------------------------------------------------------------------------- against Neyman-Pearson


@pytest.mark.parametrize("eps, delta, k", [(0.4, 0.0, 1), (0.4, 0.0, 5), (0.4, 0.1, 3), (0.4, 0.1, 5),
                                           (1.2, 0.05, 4), (0.05, 0.0, 8)])
def test_optimal_region_is_the_neyman_pearson_region_of_randomized_responses(eps, delta, k):
    """KOV Thm 3.3 is tight: the intersection of its corners is exactly the region of the
    composed randomized responses."""
    e, d = region.optimal_family(eps, delta, k=k)
    ours = region.tradeoff(ALPHA, e, d)
    reference = region.randomized_response_tradeoff(ALPHA, eps, delta, k=k)
    assert np.max(np.abs(ours - reference)) < 1e-12


def test_heterogeneous_region_from_the_loss_atoms_is_exact():
    """For different eps_i the region's corners sit at the nonnegative privacy-loss values
    sum_i +-eps_i; intersecting the optimal (x, delta_g(x)) over exactly those x gives the
    Neyman-Pearson region of the composed randomized responses (MV Thm 1.5 / Def. 3.1)."""
    eps = [0.3, 0.7, 0.15, 1.1]
    delta = [0.0, 0.01, 0.0, 0.02]
    atoms = sorted({abs(sum(s * x for s, x in zip(signs, eps))) for signs in itertools.product((1, -1), repeat=4)})
    e, d = region.family_from_eps_grid(eps, delta, method="optimal", eps_g=atoms)
    ours = region.tradeoff(ALPHA, e, d)
    reference = region.randomized_response_tradeoff(ALPHA, eps, delta)
    assert np.max(np.abs(ours - reference)) < 1e-12
    # a coarse grid of eps_g gives a region at least as large (safe side), and close
    e2, d2 = region.family_from_eps_grid(eps, delta, method="optimal", num=50)
    coarse = region.tradeoff(ALPHA, e2, d2)
    assert (coarse <= reference + 1e-12).all()
    assert np.max(reference - coarse) < 0.05


# ------------------------------------------------------------------------------------- nesting


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.01, 1.0), delta=st.sampled_from([0.0, 1e-6, 1e-3, 0.01]), k=st.integers(1, 40))
def test_regions_nest_optimal_inside_drv_and_basic(eps, delta, k):
    """The optimal region is inside every other theorem's region (a smaller region is a
    stronger guarantee, and the optimal theorem is the strongest valid one)."""
    e, d = region.optimal_family(eps, delta, k=k)
    opt = region.tradeoff(ALPHA, e, d)
    for method in ("basic", "drv", "kov"):
        e2, d2 = region.composition_family(method, eps, delta, k=k, num=60)
        other = region.tradeoff(ALPHA, e2, d2)
        assert (opt >= other - 1e-12).all(), method


@settings(max_examples=20, deadline=None)
@given(eps=st.floats(0.01, 1.5), delta=st.sampled_from([0.0, 1e-4, 0.05]), k=st.integers(1, 30))
def test_composing_more_mechanisms_only_grows_the_region(eps, delta, k):
    e1, d1 = region.optimal_family(eps, delta, k=k)
    e2, d2 = region.optimal_family(eps, delta, k=k + 1)
    assert (region.tradeoff(ALPHA, e2, d2) <= region.tradeoff(ALPHA, e1, d1) + 1e-12).all()


def test_kov_figure3_regions_are_strictly_nested():
    """KOV Figure 3: 30-fold composition of (0.1, 0.001)-DP -- optimal is strictly smaller
    than DRV, which is strictly smaller than basic, somewhere (not just equal)."""
    alpha = region.boundary_alphas([3.0], [0.03], num=2001)
    areas = {}
    for method in ("basic", "drv", "optimal"):
        e, d = region.composition_family(method, 0.1, 0.001, k=30)
        areas[method] = np.trapezoid(region.upper_boundary(alpha, e, d) - region.tradeoff(alpha, e, d), alpha)
    assert areas["optimal"] < areas["drv"] < areas["basic"]
    assert areas["optimal"] < 0.8 * areas["basic"]


def test_basic_family_is_sum_of_parameters():
    e, d = region.basic_family([0.1, 0.2, 0.3], [1e-3, 0.0, 2e-3])
    assert e[0] == pytest.approx(0.6, rel=1e-15) and d[0] == pytest.approx(3e-3, rel=1e-15)
    e, d = region.basic_family(0.5, 0.4, k=3)  # sum delta >= 1: nothing certified
    assert e.size == 0 and d.size == 0
    assert (region.tradeoff(ALPHA, e, d) == 0).all()  # the whole square


def test_drv_family_matches_the_theorem():
    """Each DRV pair is (sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1), k delta + delta')."""
    eps, delta, k = 0.1, 0.001, 30
    e, d = region.drv_family(eps, delta, k=k, num=50)
    prime = d - k * delta
    formula = np.sqrt(2 * k * np.log(1 / prime)) * eps + k * eps * math.expm1(eps)
    ok = prime > 1e-12  # where delta' is resolvable in k delta + delta'
    assert np.allclose(e[ok], formula[ok], rtol=1e-6)
    assert (np.diff(d) > 0).all() and (np.diff(e) <= 0).all()  # more delta, less eps


def test_boundary_alphas_contain_the_kinks():
    a = region.boundary_alphas(0.4, 0.1, num=11)
    kink = 0.9 / math.exp(0.4)
    assert np.any(a == kink) and a[0] == 0.0 and a[-1] == 1.0 and (np.diff(a) > 0).all()


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="eps"):
        region.tradeoff(ALPHA, -0.1, 0.0)
    with pytest.raises(ValueError, match="delta"):
        region.tradeoff(ALPHA, 0.1, 1.5)
    with pytest.raises(ValueError, match="k"):
        region.optimal_family(0.1, 0.0, k=0)
    with pytest.raises(ValueError, match="k <= 10"):
        region.randomized_response_tradeoff(ALPHA, 0.1, 0.0, k=11)


def test_randomized_response_reference_for_one_mechanism():
    """The reference itself: one randomized response has exactly the region R(eps, delta)."""
    for eps, delta in [(0.4, 0.0), (0.4, 0.1), (2.0, 0.3)]:
        assert np.allclose(region.randomized_response_tradeoff(ALPHA, eps, delta, k=1),
                           region.tradeoff(ALPHA, eps, delta), atol=1e-14)


def test_exact_fraction_kov_delta_sanity():
    # the mpmath reference above agrees with exact rationals at a rational-friendly point
    k, i = 4, 1
    x = Fraction(3, 2)  # stands for e^eps
    exact = 1 - (1 - (sum(math.comb(k, l) * (x ** (k - l) - x ** (k - 2 * i + l)) for l in range(i)) / (1 + x) ** k))
    assert kov_delta_i(math.log(1.5), 0.0, k, i) == pytest.approx(float(exact), rel=1e-14)
    assert optcomp.delta_g(math.log(1.5), k=k, eps_g=(k - 2 * i) * math.log(1.5)) == pytest.approx(float(exact), rel=1e-9)


# ------------------------------------------------------------------------------ optcomp.privacy_curve


def test_privacy_curve_optimal_homogeneous_is_the_exact_region():
    """Identical mechanisms: the default grid holds KOV Thm 3.3's corners, so the region of
    the curve is the optimal one -- the Neyman-Pearson curve of the randomized responses."""
    for eps, delta, k in [(0.4, 0.0, 5), (0.4, 0.1, 3), (0.7, 0.01, 6)]:
        c = optcomp.privacy_curve(eps, delta, k=k)
        assert c.method == "optimal" and c.delta_lower is None
        corners = (k - 2 * np.arange(k // 2 + 1)) * eps
        assert np.all(np.isin(corners, c.eps_g))
        for i, x in enumerate(corners):
            # the float corner (k - 2i) * eps may sit an ulp below the real atom (e.g. 5 * 0.4
            # rounds to 2.0 < 5 * fl(0.4)); the true delta there exceeds the corner value by
            # at most P0[top atom] * ulp ~ 1e-16 (and the library must report that excess)
            got = c.delta[np.searchsorted(c.eps_g, x)]
            want = kov_delta_i(eps, delta, k, i)
            assert got >= want * (1 - 1e-12)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
        ref = region.randomized_response_tradeoff(c.alpha, eps, delta, k=k)
        np.testing.assert_allclose(c.beta, ref, atol=1e-12)
        np.testing.assert_allclose(c.beta_upper, 1.0 - region.randomized_response_tradeoff(1.0 - c.alpha, eps, delta, k=k),
                                   atol=1e-12)


@pytest.mark.parametrize("method", ["basic", "drv", "kov", "advanced_pure", "optimal", "approx"])
def test_privacy_curve_region_contains_the_true_region(method):
    """Every method's region is certified: it contains the true (optimal) region, i.e. its
    trade-off curve lies on or below the Neyman-Pearson curve (heterogeneous, k = 4)."""
    eps, delta = [0.1, 0.3, 0.3, 0.6], [0.0, 1e-3, 1e-3, 0.0]
    c = optcomp.privacy_curve(eps, delta, method=method, num=41)
    ref = region.randomized_response_tradeoff(c.alpha, eps, delta)
    assert np.all(c.beta <= ref + 1e-12)
    assert np.all(c.beta_upper >= 1.0 - region.randomized_response_tradeoff(1.0 - c.alpha, eps, delta) - 1e-12)
    assert np.all(np.diff(c.delta) <= 1e-15)  # delta(eps_g) is nonincreasing
    exact = [optcomp.delta_g(eps, delta, eps_g=float(x)) for x in c.eps_g]
    assert np.all(c.delta >= np.array(exact) * (1 - 1e-12))  # never below the optimum
    if method == "approx":
        assert np.all(c.delta_lower <= np.array(exact) * (1 + 1e-12))


def test_privacy_curve_counts_grid_and_errors():
    grouped = optcomp.privacy_curve([0.1, 0.2], counts=[30, 10], eps_g=[3.0, 1.0, 2.0], method="kov")
    written = optcomp.privacy_curve([0.1] * 30 + [0.2] * 10, eps_g=[1.0, 2.0, 3.0], method="kov")
    np.testing.assert_array_equal(grouped.eps_g, [1.0, 2.0, 3.0])  # sorted
    np.testing.assert_allclose(grouped.delta, written.delta, rtol=1e-12)
    big = optcomp.privacy_curve(0.01, k=10**6, num=3)
    assert big.eps_g[0] == 0.0 and 50 < big.eps_g[-1] < 200 and big.delta[-1] < 1e-10
    with pytest.raises(ValueError, match="eps_g"):
        optcomp.privacy_curve(0.1, k=10, eps_g=[1.0, -1.0])
    with pytest.raises(ValueError, match="num"):
        optcomp.privacy_curve(0.1, k=10, num=1)
    with pytest.raises(ValueError, match="method"):
        optcomp.privacy_curve(0.1, k=10, method="nope")
    with pytest.raises(ValueError, match="eps"):
        optcomp.privacy_curve(-0.1, k=10)
    with pytest.raises(ValueError, match="k"):
        optcomp.privacy_curve(0.1, k=0)
