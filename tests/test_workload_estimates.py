"""The engine's estimates over many mechanism sources (``Workload.cgf``, ``tilt_for``,
``chernoff_guess``): the summed cumulants against the per-source formula
(:meth:`optcomp._lattice.workload.Source.cgf`, summed in a Python loop), the solvers against
their defining equations.  Estimates only (tilt, step, window: never a bound), so the
binned many-source sums are held to a relative 1e-5, the unbinned ones to float rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optcomp._lattice import workload
from optcomp._lattice.workload import GaussianSource, Source, Workload, _newton_bisect
from optcomp.mechanisms import Laplace, Pair


def _loop_cgf(work: Workload, theta: float):
    """K, K', K'' of the sources alone, one source at a time (the definition)."""
    tot = np.zeros(3)
    for s in work.sources:
        tot += s.count * np.array(s.cgf(theta))
    return tot


def _work(sources) -> Workload:
    return Workload(np.zeros(0), np.zeros(0, dtype=np.int64), tuple(sources))


@pytest.mark.parametrize("theta", [0.0, 0.3, 2.0, 40.0])
def test_few_sources_sum_is_the_loop(theta):
    work = _work([Source(Laplace(3.0), 7), Source(Pair((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), 11),
                  GaussianSource(0.4, 0.4)])
    got = np.array(work.cgf(theta))
    ref = _loop_cgf(work, theta)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)  # (K(0) ~ 0: sums of ~1)


@pytest.mark.parametrize("theta", [0.0, 0.5, 5.0, 200.0])
def test_many_sources_binned_sum_is_close(theta):
    rng = np.random.default_rng(2)
    work = _work([Source(Laplace(float(s)), 10) for s in rng.uniform(5.0, 500.0, 40)]
                 + [Source(Pair((0.6, 0.4), (0.4, 0.6)), 3), GaussianSource(0.4, 0.4)])
    got = np.array(work.cgf(theta))
    # the Laplace guides binned (two atoms a bin), the pair's and the wide Gaussian's kept
    assert work._cat[0].size < sum(s.loss.size for s in work.sources) - 30 * workload.CGF_BINS
    ref = _loop_cgf(work, theta)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-10)


def test_solvers_meet_their_equations():
    rng = np.random.default_rng(4)
    work = _work([Source(Laplace(float(s)), 10) for s in rng.uniform(5.0, 50.0, 30)] + [GaussianSource(0.8, 0.8)])
    mean = work.cgf(0.0)[1]
    for x in (mean + 0.01, mean + 1.0, mean + 5.0):
        th = work.tilt_for(x)
        assert th > 0.0
        assert abs(work.cgf(th)[1] - x) <= 1e-7 * abs(x)
    assert work.tilt_for(mean - 1.0) == 0.0
    for t in (1e-3, 1e-6, 1e-12):
        x = work.chernoff_guess(t)
        th = work.tilt_for(x)
        K, K1, K2 = work.cgf(th)
        saddle = max(0.0, math.log(th * (1.0 + th) * math.sqrt(2.0 * math.pi * K2)))
        assert abs((K - th * K1 - saddle) - math.log(t)) <= 1e-5 * abs(math.log(t)), t


def test_newton_bisect_without_a_slope_bisects():
    # a slope of 0 (or a step leaving the bracket) falls back to halving
    lo, hi = _newton_bisect(lambda x: (x - math.pi, 0.0), 0.0, 8.0)
    assert lo <= math.pi <= hi and hi - lo <= 1e-8
    lo, hi = _newton_bisect(lambda x: (math.tanh(x - 3.0), 1e-300), 0.0, 64.0)
    assert abs(0.5 * (lo + hi) - 3.0) <= 1e-7
    lo, hi = _newton_bisect(lambda x: (x * x - 2.0, 2.0 * x), 0.0, 4.0)
    assert abs(0.5 * (lo + hi) - math.sqrt(2.0)) <= 1e-9


def test_exact_dot_is_the_fraction_sum():
    """The frames' exact sums of floats times counts (one common power-of-two denominator)
    against running sums of Fractions, floats from subnormal to huge, signs mixed."""
    from fractions import Fraction

    from optcomp._lattice.workload import _exact_dot

    rng = np.random.default_rng(9)
    for _ in range(300):
        n = int(rng.integers(0, 12))
        vals = [float(rng.choice([rng.uniform(-1e3, 1e3), 5e-324, -1e300, 0.0, 2.0 ** int(rng.integers(-1074, 1000))]))
                for _ in range(n)]
        cnts = [int(c) for c in rng.integers(1, 10**7, n)]
        assert _exact_dot(vals, cnts) == sum((Fraction(v) * c for v, c in zip(vals, cnts)), Fraction(0))
