"""The privacy-loss core: the suffix quantities D, W and the H bounds hold their stated
error bounds against mpmath (the references are the definitions, summed in 40 digits)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp.loss import LossDistribution, excess_lower, rounding_bound, solve_lower, solve_segments, suffix_dw


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(40):
        yield


def _ref_dw(loss, p, j):
    lj = mp.mpf(float(loss[j]))
    W = mp.fsum(mp.mpf(float(p[i])) * mp.e ** (lj - mp.mpf(float(loss[i]))) for i in range(j, loss.size))
    D = mp.fsum(mp.mpf(float(p[i])) * -mp.expm1(lj - mp.mpf(float(loss[i]))) for i in range(j + 1, loss.size))
    return D, W


@pytest.mark.parametrize(
    "loss, p",
    [
        (np.arange(2000.0) * 1e-3, np.full(2000, 1.0 / 2000)),  # dense, uniform: many blocks
        (np.sort(np.random.default_rng(0).uniform(-50, 50, 1500)),
         np.random.default_rng(1).exponential(size=1500) * 10.0 ** np.random.default_rng(2).uniform(-300, 0, 1500)),
        (np.arange(100.0) * 1e-9, np.r_[np.full(99, 1e-13), 0.5]),  # tiny gaps: D ~ 1e-22, no cancellation
        (np.array([0.0, 700.0, 1400.0]), np.array([0.3, 0.3, 0.4])),  # e^{-700}: near underflow
        (np.array([3.0]), np.array([0.25])),
    ],
)
def test_suffix_dw_within_bound(loss, p):
    D, W = suffix_dw(p, loss)
    bound = rounding_bound(loss.size)
    for j in np.unique(np.linspace(0, loss.size - 1, 40).astype(int)):
        d_ref, w_ref = _ref_dw(loss, p, j)
        assert abs(mp.mpf(float(W[j])) - w_ref) <= bound * w_ref + 1e-300, j
        assert abs(mp.mpf(float(D[j])) - d_ref) <= bound * d_ref + 1e-300, j


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-30, 30), st.floats(1e-300, 1.0)), min_size=1, max_size=60, unique_by=lambda a: a[0]),
    st.floats(0, 30),
)
def test_excess_brackets_mpmath_tightly(atoms, x):
    atoms = sorted(atoms)
    loss = np.array([a for a, _ in atoms])
    p0 = np.array([p for _, p in atoms])
    ref = mp.fsum(mp.mpf(p) * -mp.expm1(mp.mpf(x) - mp.mpf(l)) for l, p in atoms if l > x)
    hi = LossDistribution(loss, p0).excess(x)
    lo = excess_lower(loss, p0, x)
    assert lo <= ref <= hi
    # relative accuracy: no cancellation, whatever the size of H next to the masses
    assert hi <= ref * (1 + 1e-12) + 1e-300
    assert lo >= ref * (1 - 1e-12) - 1e-300


@pytest.mark.parametrize("ulps", [-2, -1, 1, 2])
def test_excess_next_to_an_atom_is_exact(ulps):
    """eps_g a few ulps from an atom: H = p (1 - e^{x - l}) exactly, not 0 and not ~ulp(l)."""
    loss = np.array([1.0, 231.1655047458064])
    p0 = np.array([0.5, 0.5])
    x = loss[1]
    for _ in range(abs(ulps)):
        x = math.nextafter(x, math.copysign(math.inf, ulps))
    ref = mp.fsum(mp.mpf(p) * -mp.expm1(mp.mpf(x) - mp.mpf(l)) for l, p in zip(loss.tolist(), p0.tolist()) if l > x)
    hi = LossDistribution(loss, p0).excess(x)
    lo = excess_lower(loss, p0, x)
    assert lo <= ref <= hi
    assert hi <= ref * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.001, 30), st.floats(1e-30, 1.0)), min_size=1, max_size=40, unique_by=lambda a: a[0]),
    st.floats(-300, -1),
)
def test_solvers_bracket_the_root(atoms, log_t):
    atoms = sorted(atoms)
    loss = np.array([a for a, _ in atoms])
    p0 = np.array([p for _, p in atoms])
    t = 10.0 ** log_t

    def H(x):
        return mp.fsum(mp.mpf(p) * -mp.expm1(mp.mpf(x) - mp.mpf(l)) for l, p in atoms if l > x)

    hi = solve_segments(LossDistribution(loss, p0), t)
    lo = solve_lower(loss, p0, t)
    assert lo <= hi
    assert H(hi) <= t  # the upper bound is a certified eps_g
    if lo > 0:
        assert H(mp.mpf(lo) * (1 - mp.mpf(2) ** -60)) >= t * (1 - 1e-9)  # just below lo, H still above t
    assert hi - lo <= 1e-12 * max(hi, 1e-300) + 1e-300


@pytest.mark.parametrize("n", [1, 5, 32, 33, 1000, 40_000])
def test_uniform_lattice_path_equals_general(n):
    """Atoms on a lattice (the homogeneous producer) take the scalar-exponential path: same
    D and W as the general recurrence, within the shared bound."""
    rng = np.random.default_rng(n)
    p = rng.exponential(size=n) * 10.0 ** rng.uniform(-30, 0, n)
    pos = np.arange(n, dtype=float)
    D1, W1 = suffix_dw(p, pos, 0.37)
    D2, W2 = suffix_dw(p, pos, 0.37, step=1.0)
    bound = 2 * rounding_bound(n)
    assert np.all(np.abs(W1 - W2) <= bound * W1 + 1e-300)
    assert np.all(np.abs(D1 - D2) <= bound * D1 + 1e-300)


@pytest.mark.parametrize("uniform", [True, False])
def test_block_store_agrees_with_full_arrays(uniform, monkeypatch):
    """Beyond _FULL atoms only block totals are stored and atoms are recomputed from their
    block: the same H and eps_g as with every D, W stored (within the shared bound)."""
    import optcomp.loss as L

    rng = np.random.default_rng(7)
    n = 20_000
    loss = np.arange(n, dtype=float) if uniform else np.sort(rng.uniform(0, 2000, n))
    p = rng.exponential(size=n) * 10.0 ** rng.uniform(-12, 0, n)
    p /= p.sum()
    kw = dict(unit=0.01, step=1.0) if uniform else {}
    scale = 0.01 if uniform else 1.0
    blocks = LossDistribution(loss, p, p0_lower=p, **kw)
    monkeypatch.setattr(L, "_FULL", 10**9)
    full = LossDistribution(loss, p, p0_lower=p, **kw)
    tol = 4 * rounding_bound(n)
    for x in np.linspace(0, float(loss[-1]) * scale, 37)[:-1].tolist():
        a, b = blocks.excess(x), full.excess(x)
        assert abs(a - b) <= tol * b + 1e-300
        a, b = blocks.excess_lower(x), full.excess_lower(x)
        assert abs(a - b) <= tol * b + 1e-300
    for t in (1e-3, 1e-9, 1e-30):
        a, b = blocks.epsilon(t), full.epsilon(t)
        assert abs(a - b) <= 1e-12 * b
        a, b = blocks.epsilon_lower(t), full.epsilon_lower(t)
        assert abs(a - b) <= 1e-12 * b
