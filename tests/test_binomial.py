"""The binomial masses in log space (optcomp._binomial) against 50-digit mpmath, from the
definition C(k, m) p^m q^(k-m) with p = e^eps/(1 + e^eps) -- including k = 10^12, twenty
and more standard deviations out, and masses far below the float range (scaled by 2^s)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp._binomial import binomial_log_pmf, binomial_masses


def _ref_log_pmf(eps, k, m):
    with mp.workdps(60):
        q = 1 / (1 + mp.e ** mp.mpf(eps))
        return mp.log(mp.binomial(k, m)) + m * mp.log1p(-q) + (k - m) * mp.log(q)


def _points(eps, k):
    p = 1.0 / (1.0 + math.exp(-eps))
    sd = math.sqrt(k * p * (1.0 - p))
    ms = {0, 1, k - 1, k, k // 2}
    for z in (0, 1, 5, 10, 20, 37, -5, -20, -37):
        ms.add(int(k * p + z * sd))
    return sorted(m for m in ms if 0 <= m <= k)


@pytest.mark.parametrize("k", [1, 2, 17, 1000, 10**6, 10**9, 10**12])
@pytest.mark.parametrize("eps", [1e-12, 1e-6, 0.01, 0.1, 1.0, 5.0, 30.0, 700.0])
def test_log_pmf_within_its_bound(k, eps):
    ms = _points(eps, k)
    logp, err = binomial_log_pmf(eps, k, np.array(ms))
    for m, a, b in zip(ms, logp.tolist(), err.tolist()):
        ref = _ref_log_pmf(eps, k, m)
        assert abs(mp.mpf(a) - ref) <= b, (m, a, float(ref), b)
        assert b <= 1e-10 * max(1.0, abs(float(ref)))  # and the bound itself is tight


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**12), st.floats(-12, 2.8), st.floats(0, 1))
def test_log_pmf_random(k, log_eps, frac):
    eps = 10.0**log_eps
    m = int(frac * k)
    logp, err = binomial_log_pmf(eps, k, np.array([m]))
    assert abs(mp.mpf(float(logp[0])) - _ref_log_pmf(eps, k, m)) <= float(err[0])


def test_scaled_masses_keep_tiny_masses_accurate():
    """Masses around 1e-400 (k = 10^6, deep tail) are returned scaled by 2^s, as bounds."""
    k, eps = 10**6, 0.1
    p = 1.0 / (1.0 + math.exp(-eps))
    m0 = int(k * p + 45 * math.sqrt(k * p * (1 - p)))
    lo, hi, s = binomial_masses(eps, k, m0, m0 + 50)
    assert s > 1000 - 200
    for i in (0, 25, 50):
        ref = mp.e ** _ref_log_pmf(eps, k, m0 + i) * mp.mpf(2) ** s
        assert lo[i] <= ref <= hi[i]
        assert hi[i] - lo[i] <= 5e-11 * ref  # the bound grows with the deviance (~1000 here)
