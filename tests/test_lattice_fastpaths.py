"""Fast paths of the sigma-schedule work (branch sched7): each returns what the general path
and the definitions give -- the same floats, so the engine's bounds and their proofs are
unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optcomp._lattice import leaves
from optcomp._lattice.workload import Workload
from optcomp._rounding import UNIT
from optcomp.mechanisms import Gaussian, Subsampled
from optcomp.mechanisms import subsampled as sub


@pytest.mark.parametrize("h", [2.0**-12, 13 * 2.0**-15, 0.75])
def test_atoms_on_their_lattice_points_get_their_own_index(h):
    """An atom exactly at n h (perr 0) has lo = n, hi = n + 1: the fast path (every atom
    flagged) equals the definition and the general path."""
    n = np.arange(-5000, 5000, 7).astype(float)
    loss = n * h  # exact: |n| < 2^13, h of at most 4 significant bits
    assert np.all(loss / h == n)
    lo, hi, tg = leaves._lattice_interval(loss, np.zeros(n.size), h, np.ones(n.size, dtype=bool))
    assert np.array_equal(lo, n) and np.array_equal(hi, n + 1.0) and np.array_equal(tg, n)
    lo2, hi2, tg2 = leaves._lattice_interval(loss, np.zeros(n.size), h, None)
    assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2) and np.array_equal(tg, tg2)


def test_cells_lower_logs_are_the_masses_logs():
    """The garbled cells' log-masses are log(m_lo) with the 2 u (|log| + 1) charge of _logs,
    with or without point masses; a cell whose Q-mass underflows gets log(m_hi) - a + 4 u (|a| + 1)."""
    rng = np.random.default_rng(3)
    N, h, n0 = 400, 2.0**-10, -37
    m_lo = rng.uniform(1e-9, 1e-3, N)
    m_hi = m_lo * (1 + 1e-12)
    a = (np.arange(n0, n0 + N) * h).astype(float)
    q_lo = m_lo * np.exp(-a - h)
    q_hi = m_hi * np.exp(-a)
    q_hi[::50] = 0.0  # underflowed Q-masses: the fallback
    for points in (None, (np.array([0.3]), np.array([0.0]), np.array([1e-4]), np.array([2e-4]))):
        at = leaves.cells_lower(h, n0, m_lo, m_hi, q_lo, q_hi, points)
        lml = np.log(m_lo)
        assert np.array_equal(at.logp[:N], lml)
        assert np.array_equal(at.err[:N], 2.0 * UNIT * (np.abs(lml) + 1.0))
        lq = np.where(q_hi >= 2.0**-1000, np.log(np.where(q_hi > 0, q_hi, 1.0)),
                      np.log(m_hi) - a + 4.0 * UNIT * (np.abs(a) + 1.0))
        assert np.array_equal(at.loss[:N], lml - lq)
        if points is not None:
            assert at.logp[N] == math.log(1e-4)


def test_the_kept_box_and_tails_are_the_mechanisms():
    m = Subsampled(Gaussian(0.8), 0.01)
    A, B = m._base_box(1e-30)
    assert sub._box(m, 1e-30) == (A, B)
    assert sub._box(Subsampled(Gaussian(0.8), 0.01), 1e-30) == (A, B)  # (equal mechanisms: one entry)
    assert sub._box_tail(m, A, False) == (m._p_below(A), m._q_below(A))
    assert sub._box_tail(m, B, True) == (m._p_above(B), m._q_above(B))
    other = Subsampled(Gaussian(0.9), 0.01)
    assert sub._box(other, 1e-30) == other._base_box(1e-30) != (A, B)


def test_the_memoised_cgf_is_the_cgf():
    from optcomp._directions import direction_workloads
    from optcomp._inputs import mechanisms

    mechs = [Subsampled(Gaussian(s), 0.02) for s in (0.9, 1.3)]
    work = direction_workloads(mechanisms(mechs, 0.0, None, [50, 50]), [(x, 50) for x in mechs])[0][0]
    for theta in (0.0, 0.5, 3.25, 0.5, 0.0):
        first = Workload(work.vals, work.cnts, work.sources)._sources_cgf(theta)  # (computed: a new workload)
        assert work._sources_cgf(theta) == first  # (computed once, then kept)
        assert work._cgf_memo[theta] == first
