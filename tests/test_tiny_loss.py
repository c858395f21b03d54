"""Tiny total privacy loss (issue 16 item 5: epsilon_g(5e-324, k=10**12, delta_g=1e-6) took
11 s for the answer 0): when sum_i eps_i <= t, H(0) <= 1 - e^{-sum eps} <= t and the exact
answer is 0, settled without a binomial window."""

from __future__ import annotations

import mpmath as mp
import pytest

import optcomp
import reference as ref


@pytest.mark.parametrize("eps, delta, k, delta_g", [(5e-324, 0.0, 10**12, 1e-6), (1e-300, 0.0, 10**4, 1e-6),
                                                    (5e-324, 1e-9, 100, 1e-6), (1e-20, 0.0, 10**6, 1e-12)])
def test_tiny_total_loss_gives_exactly_zero(eps, delta, k, delta_g):
    assert optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g) == 0.0
    assert optcomp.delta_g(eps, delta, k=k, eps_g=0.0) <= delta_g  # the inverse law holds
    if k <= 10**4:
        with mp.workdps(60):
            assert ref.ref_delta([(eps, delta, k)], 0.0) <= delta_g  # and 0 is the true optimum


def test_tiny_loss_just_above_the_budget_is_not_zero():
    # k eps = 1e-10 > delta_g = 1e-11: H(0) ~ 0.4 sqrt(k) eps = 4e-14 fits, so 0 still, but from
    # the exact solver; at delta_g = 1e-15 the answer is positive and certified
    assert optcomp.epsilon_g(1e-14, k=10**4, delta_g=1e-11) == 0.0
    x = optcomp.epsilon_g(1e-14, k=10**4, delta_g=1e-15)
    assert 0.0 < x <= 1e-10
    with mp.workdps(60):
        assert ref.ref_delta([(1e-14, 0.0, 10**4)], x) <= 1e-15


@pytest.mark.parametrize("eps, delta, k", [(5e-324, 0.0, 10**12), (1e-305, 0.0, 10**4), (5e-324, 1e-9, 50)])
def test_tiny_total_loss_delta_within_the_documented_accuracy(eps, delta, k):
    """delta(eps_g) for a total loss below 1e-301: the upper bound A + H(0) <= A + sum eps,
    within the documented 1e-300 absolute of the optimum (k = 10^12 took ~10 s)."""
    got = optcomp.delta_g(eps, delta, k=k, eps_g=0.0)
    if k <= 10**4:
        with mp.workdps(60):
            exact = ref.ref_delta([(eps, delta, k)], 0.0)
            assert exact <= got <= exact * (1 + mp.mpf("1e-12")) + mp.mpf("1e-300")
    else:
        assert 0.0 < got <= 1e-300
