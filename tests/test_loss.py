"""The privacy-loss core: suffix sums and H bounds hold their stated error bounds."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp.loss import LossDistribution, excess_lower, rounding_bound, suffix_cumsum


def _exact_suffix(x):
    out, acc = [], Fraction(0)
    for v in reversed(x.tolist()):
        acc += Fraction(v)
        out.append(acc)
    return out[::-1]


@pytest.mark.parametrize(
    "x",
    [
        np.r_[np.full(131_000, 1e-13), 0.5],  # many tiny masses above a large one (FFT noise)
        np.r_[0.5, np.full(70_000, 1e-13)],
        np.full(100_000, 1.0 / 100_000),  # uniform, as in meet in the middle
        np.random.default_rng(0).exponential(size=5_000) * 10.0 ** np.random.default_rng(1).uniform(-300, 0, 5_000),
        np.array([3.0]),
        np.array([]),
    ],
)
def test_suffix_cumsum_within_bound(x):
    got = suffix_cumsum(x)
    assert got.shape == x.shape
    bound = rounding_bound(x.size) - 16 * 2.0**-53
    # compare a sample of entries with the exact rational suffix sums
    exact = _exact_suffix(x) if x.size <= 5_000 else None
    idx = np.unique(np.linspace(0, max(x.size - 1, 0), 200).astype(int)) if x.size else []
    for j in idx:
        ref = exact[j] if exact is not None else Fraction(math.fsum(x[j:].tolist()))
        if ref > 0:
            assert abs(Fraction(float(got[j])) - ref) <= Fraction(bound) * ref, j


def test_plain_cumsum_would_break_the_bound():
    """The case that motivated the cascade: a running total absorbs 131k tiny terms."""
    x = np.r_[np.full(131_000, 1e-13), 0.5]
    plain = np.cumsum(x[::-1])[::-1][0]
    exact = Fraction(math.fsum(x.tolist()))
    assert abs(Fraction(float(plain)) - exact) > Fraction(rounding_bound(x.size)) * exact


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-30, 30), st.floats(1e-300, 1.0)), min_size=1, max_size=60),
    st.floats(0, 30),
)
def test_excess_brackets_mpmath(atoms, x):
    atoms = sorted(atoms)
    loss = np.array([a for a, _ in atoms])
    p0 = np.array([p for _, p in atoms])
    ref = mp.fsum(mp.mpf(p) * (1 - mp.e ** (mp.mpf(x) - mp.mpf(l))) for l, p in atoms if l > x)
    hi = LossDistribution(loss, p0).excess(x)  # masses down to 1e-300: subnormal-safe
    lo = excess_lower(loss, p0, x)
    assert lo <= ref <= hi
    S, W = LossDistribution(loss, p0).suffix()
    assert np.all(W[:-1] <= S[:-1] * (1 + 1e-12))
