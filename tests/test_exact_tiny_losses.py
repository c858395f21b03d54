"""The exact path on pairs of tiny losses (a randomized response subsampled at q = 1e-6: losses
~1e-7 a step), against references written from the definitions.

Two of the subsampled audit's slow calls (issue 26's whole-domain guarantee): thousands of near
atoms per binomial row made the multinomial evaluation one path per atom column (15-21 s at
10^7 copies; now one path per row), and ``method="optimal"`` left eps_g = 0 open below the
first atom (a timeout, then [0, 4.4e-27]; now one evaluation at 0 settles it).

Reference: at eps_g = 0 the optimal delta is H(0) = sum_n (P(n) - Q(n))_+, the total variation
between the composed laws -- for k copies of a two-outcome pair, between Bin(k, a) and
Bin(k, b) with a, b the P- and Q-masses of one outcome (the same in both global directions) --
summed in mpmath over the counts where the likelihood ratio exceeds 1.
"""

from __future__ import annotations

import math

import mpmath
import pytest

import optcomp
from optcomp.mechanisms import RandomizedResponse, Subsampled

Q_SAMPLE = 1e-6
EPS = 0.1


def _masses():
    """(a, b): one outcome's masses under P' = (1 - q) Q + q P and under Q, for randomized
    response with eps (P(+) = e^eps/(1 + e^eps), Q(+) = 1/(1 + e^eps)), from the floats given."""
    q, e = mpmath.mpf(Q_SAMPLE), mpmath.mpf(EPS)
    p_plus = mpmath.exp(e) / (1 + mpmath.exp(e))
    q_plus = 1 / (1 + mpmath.exp(e))
    return (1 - q) * q_plus + q * p_plus, q_plus


def _total_variation(k: int) -> mpmath.mpf:
    """TV(Bin(k, a), Bin(k, b)) = sum over n >= n* of (pmf_a(n) - pmf_b(n)), n* the least count
    whose likelihood ratio is at least 1 (a > b), carried 40 standard deviations on (the terms
    beyond are below e^-800 of the largest) by the ratio pmf(n + 1)/pmf(n) = (k - n)/(n + 1) p/(1 - p)."""
    with mpmath.workdps(40):
        a, b = _masses()
        n_star = int(mpmath.ceil(k * mpmath.log((1 - b) / (1 - a)) / mpmath.log(a * (1 - b) / (b * (1 - a)))))
        n_star = max(0, n_star)
        last = min(k, int(n_star + 40 * math.sqrt(k * 0.25)) + 40)
        total = mpmath.mpf(0)
        for p, sign in ((a, 1), (b, -1)):
            term = mpmath.exp(mpmath.loggamma(k + 1) - mpmath.loggamma(n_star + 1) - mpmath.loggamma(k - n_star + 1)
                              + n_star * mpmath.log(p) + (k - n_star) * mpmath.log1p(-p))
            odds = p / (1 - p)
            acc = mpmath.mpf(0)
            for n in range(n_star, last + 1):
                acc += term
                term *= (k - n) * odds / (n + 1)
            total += sign * acc
        return total


@pytest.mark.parametrize("k", [10**6, pytest.param(10**7, marks=pytest.mark.slow)])
def test_delta_at_zero_of_tiny_losses_is_the_total_variation(k):
    b = optcomp.delta_bounds(Subsampled(RandomizedResponse(EPS), Q_SAMPLE), k=k, eps_g=0.0)
    tv = _total_variation(k)
    # (the mechanism's masses are floats of these reals: ~1e-16 relative apart)
    assert mpmath.mpf(b.lower) <= tv * (1 + mpmath.mpf("1e-13")), (b, tv)
    assert mpmath.mpf(b.upper) >= tv * (1 - mpmath.mpf("1e-13")), (b, tv)
    if k <= 10**6:
        assert b.upper - b.lower <= 1e-12 * b.upper, b  # the exact path's bracket


def test_optimal_epsilon_is_zero_where_delta_g_exceeds_the_total_variation():
    k = 1000
    tv = _total_variation(k)
    assert tv < mpmath.mpf("1e-3")  # so at delta_g = 0.5 the least eps_g >= 0 is 0 itself
    assert optcomp.epsilon_g(Subsampled(RandomizedResponse(EPS), Q_SAMPLE), k=k, delta_g=0.5,
                             method="optimal") == 0.0
    # and just below the total variation, eps_g is positive (the check at 0 does not answer 0)
    d = float(tv) * (1 - 1e-6)
    assert optcomp.epsilon_g(Subsampled(RandomizedResponse(EPS), Q_SAMPLE), k=k, delta_g=d) > 0.0


def test_bounds_of_finite_mechanisms_come_from_the_exact_composition_first(monkeypatch):
    """10^7 steps of randomized response subsampled at q = 0.5: eps_g ~1.2e6, where the
    lattice's absolute tol is a 1e-9 relative one (40-60 s of passes before); the exact
    composition answers within 1e-12 first, as ``auto`` does, and no lattice pass runs."""
    import optcomp.approx as approx

    def no_lattice(*args, **kwargs):
        raise AssertionError("the lattice ran for a finite mechanism the exact path answers")

    monkeypatch.setattr(approx, "lattice_bounds", no_lattice)
    monkeypatch.setattr(approx, "lattice_delta_bounds", no_lattice)
    M = Subsampled(RandomizedResponse(1.0), 0.5)
    b = optcomp.epsilon_bounds(M, k=10**7, delta_g=1e-10)
    assert 0.0 < b.lower <= b.upper <= b.lower * (1 + 1e-12), b
    assert b.upper == optcomp.epsilon_g(M, k=10**7, delta_g=1e-10, method="optimal")
    # the per-step loss is at most log(1 + q (e - 1)): eps_g below k times it
    assert b.upper <= 10**7 * math.log1p(0.5 * math.expm1(1.0)) * (1 + 1e-12)
    d = optcomp.delta_bounds(M, k=10**7, eps_g=b.upper)
    assert d.upper <= 1e-10 * (1 + 1e-12), d  # the inverse law, both from the exact composition
