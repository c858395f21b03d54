"""The floored direction's Chernoff bound (optcomp._refine.floor_chernoff): H(x) <= c e^{K - theta x}
with c = theta^theta / (1 + theta)^(1 + theta), from exact per-step MGFs -- checked against
references from the definitions (mpmath), and the driver's bracket unchanged when it answers."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

import optcomp
import optcomp._refine as R
from optcomp._lattice.workload import Workload
from optcomp.mechanisms import Gaussian, Subsampled

from reference import ReferenceTooCostly, ref_epsilon_bounds
from test_chernoff import _subsampled_gaussian_cgf


def _grid_tilt(theta):
    return 2.0 ** (round(R.FLOOR_CHERNOFF_TILTS * math.log2(theta)) / R.FLOOR_CHERNOFF_TILTS)


@pytest.mark.parametrize("theta", [1e-3, 0.3, 1.0, 4.7, 60.0, 1e4])
def test_the_factor_is_the_maximum_of_the_hockey_stick_over_the_exponential(theta):
    """max_{y >= 0} (1 - e^{-y}) e^{-theta y} = theta^theta / (1 + theta)^(1 + theta): the
    closed form at the stationary point, and no y of a fine grid above it (40 digits)."""
    with mpmath.workdps(40):
        th = mpmath.mpf(theta)
        c = th**th / (1 + th) ** (1 + th)
        y_star = mpmath.log((1 + th) / th)
        assert abs((1 - mpmath.exp(-y_star)) * mpmath.exp(-th * y_star) - c) <= c * mpmath.mpf(10) ** -30
        for j in range(-400, 400):
            y = y_star * mpmath.exp(mpmath.mpf(j) / 50)
            assert (1 - mpmath.exp(-y)) * mpmath.exp(-th * y) <= c * (1 + mpmath.mpf(10) ** -30)


GROUPS = st.lists(st.tuples(st.floats(0.01, 2.0), st.integers(1, 150)), min_size=1, max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=GROUPS, t=st.floats(1e-12, 0.3), theta=st.floats(0.05, 40.0))
@example(groups=[(0.01, 150)], t=1e-12, theta=40.0)
@example(groups=[(1.0, 3), (0.3, 20)], t=0.2, theta=0.05)
def test_floor_chernoff_of_randomized_response_is_above_the_optimal_epsilon(groups, t, theta):
    """Any tilt: x with H(x) <= t, so x >= the exact optimal eps_g's certified lower end
    (products of binomials, from the definitions)."""
    groups = sorted(groups)
    work = Workload(np.array([e for e, _ in groups]), np.array([c for _, c in groups], dtype=np.int64))
    x = R.floor_chernoff(work, t, theta)
    assert x >= 0.0 and not math.isnan(x)
    try:
        lo, _, _ = ref_epsilon_bounds([(e, 0.0, c) for e, c in groups], t)
    except ReferenceTooCostly:
        reject()
    assert mpmath.mpf(x) >= lo, (groups, t, theta, x, lo)


@pytest.mark.parametrize("q, sigmas, k, t", [(0.01, (0.8, 1.3), 100, 1e-5), (0.2, (2.0, 3.0), 40, 1e-3),
                                             (1e-3, (0.9,), 10**6, 1e-8)])
def test_floor_chernoff_of_subsampled_gaussians_is_the_exact_mgf_formula_rounded_up(q, sigmas, k, t):
    """In each global direction, x >= (sum k K1(theta) + log c(theta) - log t) / theta at the grid
    tilt, K1 each step's exact CGF (40-digit quadrature from the definitions) -- and within
    2 % of it (that formula with the steps' certified MGF bounds, a little above the
    exact MGFs, and its roundings charged)."""
    from optcomp._directions import direction_workloads
    from optcomp._inputs import mechanisms

    mechs = [Subsampled(Gaussian(s), q) for s in sigmas]
    works = direction_workloads(mechanisms(mechs, 0.0, None, [k] * len(mechs)), [(m, k) for m in mechs])
    assert len(works) == 2
    for (work, _, _), direction in zip(works, ("forward", "reverse")):
        assert work.sources[0].direction == direction
        theta0 = work.tilt_for(work.chernoff_guess(t))
        for f in (0.7, 1.0, 1.4):
            x = R.floor_chernoff(work, t, theta0 * f)
            th = _grid_tilt(theta0 * f)
            with mpmath.workdps(40):
                K = sum(k * _subsampled_gaussian_cgf(q, s, th, direction) for s in sigmas)
                m_th = mpmath.mpf(th)
                log_c = m_th * mpmath.log(m_th) - (1 + m_th) * mpmath.log(1 + m_th)
                exact = (K + log_c - mpmath.log(t)) / m_th
            if x == math.inf:
                continue
            assert mpmath.mpf(x) >= exact, (direction, th, x, exact)
            assert x <= exact * (1 + mpmath.mpf(2e-2)) + mpmath.mpf(1e-12), (direction, th, x, exact)


def _schedule(n, k, q=0.05):
    return [Subsampled(Gaussian(0.9 + 0.05 * i), q) for i in range(n)], [k] * n


def test_a_floored_direction_far_below_its_floor_is_settled_by_the_chernoff_bound(monkeypatch):
    """A schedule of subsampled Gaussians (the add direction far below the remove one): the
    floored direction answered by floor_chernoff (no pass), the bracket bit for bit the one with
    that shortcut off (the floored direction's pass then shows the same), and within tol."""
    m, c = _schedule(10, 60)
    calls = []
    orig = R.floor_chernoff

    def spy(work, t, theta):
        x = orig(work, t, theta)
        calls.append(x)
        return x

    monkeypatch.setattr(R, "floor_chernoff", spy)
    tol = 1e-3
    b = optcomp.epsilon_bounds(m, counts=c, delta_g=1e-6, tol=tol)
    assert len(calls) == 1 and calls[0] <= b.lower, (calls, b)
    monkeypatch.setattr(R, "FLOOR_CHERNOFF_SOURCES", 10**9)
    off = optcomp.epsilon_bounds(m, counts=c, delta_g=1e-6, tol=tol)
    assert len(calls) == 1
    assert (b.lower, b.upper) == (off.lower, off.upper) and b.gap <= tol


def test_fewer_sources_than_the_gate_run_a_pass_in_each_direction(monkeypatch):
    calls = []
    monkeypatch.setattr(R, "floor_chernoff", lambda *a: calls.append(a) or math.inf)
    m, c = _schedule(R.FLOOR_CHERNOFF_SOURCES - 1, 60)
    optcomp.epsilon_bounds(m, counts=c, delta_g=1e-6, tol=1e-3)
    assert not calls


def test_sources_of_few_copies_run_a_pass_in_each_direction(monkeypatch):
    """(Leaves of a chunk, not Power nodes: their pass is cheaper than their exact MGFs.)"""
    calls = []
    monkeypatch.setattr(R, "floor_chernoff", lambda *a: calls.append(a) or math.inf)
    from optcomp._lattice.grouped import POWER_COPIES

    m, c = _schedule(R.FLOOR_CHERNOFF_SOURCES, POWER_COPIES)
    optcomp.epsilon_bounds(m, counts=c, delta_g=1e-6, tol=1e-3)
    assert not calls
