"""The Gaussian's lattice cells built with shared work (each edge's log Phi once, the Q-masses
read from the mirrored cells of one grid) are the brackets of the cell-by-cell computation,
bit for bit -- and those contain the cell masses computed from the definition in mpmath."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from optcomp.mechanisms import Gaussian


def _cellwise(g, law):
    e = np.arange(law.n0, law.n0 + law.p_lo.size + 1, dtype=np.int64).astype(float) * law.h
    return g._interval_masses(e[:-1], e[1:], "forward")


@pytest.mark.parametrize("sigma, sens, h, tail", [
    (1.0, 9.54992586067857, 2.0**-8, 5.7e-280),  # mean 45.6 beside a spread of 352: one shared grid
    (1.0, 300.0, 0.7, 1e-12),  # mean far beyond the spread: two grids
    (0.01, 1.0, 1.0, 1e-300),
    (1e5, 1.0, 1e-9, 1e-12),
    (3.0, 1.0, 0.09375, 1e-6),
])
def test_shared_cells_equal_the_cellwise_brackets(sigma, sens, h, tail):
    g = Gaussian(sigma, sensitivity=sens)
    law = g.law(h, tail=tail)
    for a, b in zip((law.p_lo, law.p_hi, law.q_lo, law.q_hi), _cellwise(g, law)):
        assert np.array_equal(a, b)


@settings(max_examples=15, deadline=None)
@given(log_mu=st.floats(-3.0, 2.5), cells=st.integers(50, 3000), log_tail=st.floats(-290.0, -3.0))
def test_shared_cells_on_log_scales(log_mu, cells, log_tail):
    mu = 10.0**log_mu
    g = Gaussian(1.0, sensitivity=mu)
    lo, hi = g.loss_range(tail=10.0**log_tail)
    h = float((hi - lo) / cells)
    law = g.law(h, tail=10.0**log_tail)
    for a, b in zip((law.p_lo, law.p_hi, law.q_lo, law.q_hi), _cellwise(g, law)):
        assert np.array_equal(a, b)


def test_cells_contain_the_definition():
    """P[L in [a, b]] for L ~ N(mu^2/2, mu^2) and Q[L in [a, b]] for L ~ N(-mu^2/2, mu^2), at 80 digits (masses near 1e-31 are differences of Phi values near 1)."""
    mu = 1.7
    g = Gaussian(1.0, sensitivity=mu)
    law = g.law(0.25, tail=1e-30)
    with mpmath.workdps(80):
        m = mpmath.mpf(mu)
        for i in range(0, law.p_lo.size, 7):
            a = mpmath.mpf((law.n0 + i) * law.h)
            b = a + mpmath.mpf(law.h)
            p = mpmath.ncdf((b - m * m / 2) / m) - mpmath.ncdf((a - m * m / 2) / m)
            q = mpmath.ncdf((b + m * m / 2) / m) - mpmath.ncdf((a + m * m / 2) / m)
            assert law.p_lo[i] <= p <= law.p_hi[i]
            assert law.q_lo[i] <= q <= law.q_hi[i]
