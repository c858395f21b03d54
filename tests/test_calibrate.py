"""Tests of optcomp.calibrate: per-query budgets under a global (eps_g, delta_g).

Every answer is checked through the public API it inverts: the composition it certifies
must fit the budget, and a slightly larger per-query eps must not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import calibrate

METHODS = ("basic", "drv", "kov", "advanced_pure", "optimal")
CASES = [(1, 1.0, 1e-6), (10, 1.0, 1e-6), (100, 1.0, 1e-6), (1000, 0.5, 2.0**-25), (10_000, 2.0, 1e-9),
         (50, 0.1, 1e-3)]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k, eps_g, delta_g", CASES)
def test_calibrated_eps_meets_the_budget_and_is_the_largest(method, k, eps_g, delta_g):
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
    assert eps > 0
    assert optcomp.epsilon_g(eps, k=k, delta_g=delta_g, method=method) <= eps_g
    assert optcomp.epsilon_g(eps * (1 + 1e-9), k=k, delta_g=delta_g, method=method) > eps_g


@pytest.mark.parametrize("k, eps_g, delta_g", CASES)
def test_optimal_allows_the_largest_per_query_eps(k, eps_g, delta_g):
    got = {m: calibrate.per_query_epsilon(k, eps_g, delta_g, method=m) for m in METHODS}
    for m in METHODS:
        assert got["optimal"] >= got[m] * (1 - 1e-12), m
    if k >= 100:  # where composition theorems matter, optimal is strictly better than all
        assert all(got["optimal"] > 1.05 * got[m] for m in ("basic", "drv", "kov"))


def test_basic_composition_splits_evenly():
    for k, eps_g in [(1, 1.0), (7, 0.3), (1000, 2.5)]:
        eps = calibrate.per_query_epsilon(k, eps_g, 1e-6, method="basic")
        assert eps == pytest.approx(eps_g / k, rel=1e-14)


def test_single_query_with_slack_in_delta_gets_more_than_eps_g():
    """k = 1, delta_g > 0: the optimal eps_g of one (eps, 0)-DP mechanism is below eps, so the
    per-query eps may exceed the global eps_g (a randomized response with eps slightly above
    eps_g is (eps_g, delta_g)-DP)."""
    eps = calibrate.per_query_epsilon(1, 1.0, 1e-3)
    assert eps > 1.0
    assert optcomp.delta_g(eps, k=1, eps_g=1.0) <= 1e-3


def test_infeasible_budget_gives_zero_and_infinite_noise():
    # 10 queries each with delta = 1e-6 cannot fit delta_g = 1e-6 (basic needs k delta <= delta_g)
    assert calibrate.per_query_epsilon(10, 1.0, 1e-6, delta=1e-6, method="basic") == 0.0
    # the optimal theorem needs 1 - (1 - delta)^k <= delta_g
    assert calibrate.per_query_epsilon(10, 1.0, 1e-6, delta=1e-6, method="optimal") == 0.0
    # a zero global eps with delta_g = 0 allows only eps = 0
    assert calibrate.per_query_epsilon(5, 0.0, 0.0) == 0.0
    assert calibrate.laplace_scale(5, 0.0, 0.0) == math.inf


def test_approximate_dp_queries():
    k, eps_g, delta_g, delta = 20, 1.0, 1e-5, 1e-7
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, delta=delta)
    assert optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g) <= eps_g
    assert optcomp.epsilon_g(eps * (1 + 1e-9), delta, k=k, delta_g=delta_g) > eps_g


def test_laplace_scale_is_sensitivity_over_eps():
    eps = calibrate.per_query_epsilon(100, 1.0, 1e-6)
    assert calibrate.laplace_scale(100, 1.0, 1e-6) == 1.0 / eps
    assert calibrate.laplace_scale(100, 1.0, 1e-6, sensitivity=3.0) == 3.0 / eps
    assert calibrate.laplace_scale(100, 1.0, 1e-6, method="basic") == pytest.approx(100.0, rel=1e-14)
    with pytest.raises(ValueError, match="sensitivity"):
        calibrate.laplace_scale(10, 1.0, 1e-6, sensitivity=0)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 5000), eps_g=st.floats(0.05, 5.0), delta_g=st.sampled_from([1e-10, 1e-6, 1e-3]),
       method=st.sampled_from(["drv", "kov", "optimal"]))
def test_more_queries_or_less_budget_means_less_per_query(k, eps_g, delta_g, method):
    e = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
    assert calibrate.per_query_epsilon(k + 1, eps_g, delta_g, method=method) <= e
    assert calibrate.per_query_epsilon(k, eps_g * 0.9, delta_g, method=method) <= e
    assert calibrate.per_query_epsilon(k, eps_g, delta_g / 10, method=method) <= e


def test_split_budget_heterogeneous_weights():
    w = np.array([1.0, 2.0, 5.0, 5.0, 10.0])
    eps = calibrate.split_budget(w, 1.0, 1e-6)
    assert np.allclose(eps / w, eps[0] / w[0], rtol=1e-15)  # proportional to the weights
    assert optcomp.epsilon_g(eps, delta_g=1e-6) <= 1.0
    assert optcomp.epsilon_g(eps * (1 + 1e-9), delta_g=1e-6) > 1.0
    # equal weights reduce to the homogeneous answer
    same = calibrate.split_budget(np.ones(30), 1.0, 1e-6)
    assert same[0] == pytest.approx(calibrate.per_query_epsilon(30, 1.0, 1e-6), rel=1e-12)


def test_largest_passing_finds_the_boundary_to_the_last_bit():
    x = calibrate.largest_passing(lambda v: v <= 3.7, 1.0)
    assert x == 3.7
    assert calibrate.largest_passing(lambda v: v <= 1e-200, 1.0) == 1e-200
    assert calibrate.largest_passing(lambda v: False, 1.0) == 0.0
    assert calibrate.largest_passing(lambda v: True, 1.0) == math.inf


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="k"):
        calibrate.per_query_epsilon(0, 1.0, 1e-6)
    with pytest.raises(ValueError, match="eps_g"):
        calibrate.per_query_epsilon(10, -1.0, 1e-6)
    with pytest.raises(ValueError, match="delta_g"):
        calibrate.per_query_epsilon(10, 1.0, 1.5)
    with pytest.raises(ValueError, match="method"):
        calibrate.per_query_epsilon(10, 1.0, 1e-6, method="nope")
    with pytest.raises(ValueError, match="weights"):
        calibrate.split_budget([1.0, -2.0], 1.0, 1e-6)
