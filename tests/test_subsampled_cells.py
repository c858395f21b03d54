"""The subsampled Gaussian's cell masses are elementwise: a lattice's run of cells (read and
written by slices), the same cells in any order (gathered by index), and the cells one at a
time give the same brackets bit for bit; likewise the generic preimage masses, whose outer
and inner preimages are handed to the base together.  The served brackets contain the mass
computed in mpmath from the definition (the base Gaussian's P- and Q-masses on the preimage
g^{-1}[y0, y1], g(l) = log(1 - s + s e^l)), and each end lies outside it."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from optcomp.mechanisms import Gaussian, Laplace, Subsampled


def _mp_masses(sigma: float, s: float, y0: float, y1: float):
    """(Q, (1 - s) Q + s P) of the base Gaussian N(mu^2/2, mu^2) loss (P) / N(-mu^2/2, mu^2)
    (Q), mu = 1/sigma, on [g^{-1}(y0), g^{-1}(y1)], in mpmath at 60 digits."""
    with mp.workdps(60):
        mu = 1 / mp.mpf(sigma)
        S = mp.mpf(s)
        a = mp.log1p(mp.expm1(mp.mpf(y0)) / S)
        b = mp.log1p(mp.expm1(mp.mpf(y1)) / S)
        p = mp.ncdf((b - mu**2 / 2) / mu) - mp.ncdf((a - mu**2 / 2) / mu)
        q = mp.ncdf((b + mu**2 / 2) / mu) - mp.ncdf((a + mu**2 / 2) / mu)
        return q, (1 - S) * q + S * p


@pytest.mark.parametrize("sigma, q", [(1.0, 0.01), (0.5, 1e-3), (5.0, 0.3)])
def test_run_shuffled_and_single_cells_agree_bitwise(sigma, q):
    m = Subsampled(Gaussian(sigma), q)
    e = np.arange(-3000, 3001, dtype=float) * 2.0**-12
    y0, y1 = e[:-1], e[1:]
    ok, full = m._gaussian_cells(y0, y1)
    assert ok.sum() > 1000 and not ok.all()  # served and unserved cells both present
    perm = np.random.default_rng(7).permutation(y0.size)
    ok_p, full_p = m._gaussian_cells(y0[perm], y1[perm])
    assert np.array_equal(ok[perm], ok_p)
    for a, b in zip(full, full_p):
        assert np.array_equal(a[perm].view(np.int64), b.view(np.int64))
    for i in np.linspace(0, y0.size - 1, 25).astype(int):
        ok_1, full_1 = m._gaussian_cells(y0[i:i + 1], y1[i:i + 1])
        assert ok_1[0] == ok[i]
        assert all(a[i] == b[0] for a, b in zip(full, full_1))


@pytest.mark.parametrize("sigma, q", [(1.0, 0.01), (0.8, 0.3)])
def test_served_brackets_contain_the_mpmath_mass(sigma, q):
    m = Subsampled(Gaussian(sigma), q)
    y0 = np.array([-64.0, -16.0, 0.0, 5.0, 328.0, 1638.0]) * 2.0**-14  # (dyadic: y1 - y0 exact)
    y1 = y0 + np.array([2.0**-12, 2.0**-12, 2.0**-20, 2.0**-8, 2.0**-12, 2.0**-10])
    ok, (q_lo, q_hi, mix_lo, mix_hi) = m._gaussian_cells(y0, y1)
    assert ok.all()
    for i in np.flatnonzero(ok):
        qm, mix = _mp_masses(sigma, q, float(y0[i]), float(y1[i]))
        assert q_lo[i] < qm < q_hi[i] and mix_lo[i] < mix < mix_hi[i]
        assert q_hi[i] - q_lo[i] <= 1e-12 * qm and mix_hi[i] - mix_lo[i] <= 1e-12 * mix


@pytest.mark.parametrize("base", [Gaussian(0.7), Laplace(1.0)])
def test_generic_masses_are_elementwise(base):
    m = Subsampled(base, 0.05)
    rng = np.random.default_rng(3)
    y0 = np.concatenate([rng.normal(0.0, 1.0, 40), [np.log1p(-0.05) - 1e-9, -40.0, 30.0]])
    y1 = y0 + np.concatenate([rng.exponential(0.05, 40), [1e-3, 50.0, 5.0]])
    whole = m._generic_masses(y0, y1)
    for i in range(y0.size):
        one = m._generic_masses(y0[i:i + 1], y1[i:i + 1])
        assert all(a[i] == b[0] for a, b in zip(whole, one))
