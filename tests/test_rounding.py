"""The safe-side nudges of :mod:`optcomp._rounding`: ``up(x, n)`` / ``down(x, n)`` are at least
n ulps from x (one ulp at a time up to 64, by a bound beyond), and cheap at any n -- a sum of
10^9 profile terms was nudged one ulp per term (90 s, found with 10^9 subsampled steps)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp._rounding import down, up


def _stepped(x: float, n: int, to: float) -> float:
    for _ in range(n):
        x = math.nextafter(x, to)
    return x


FINITE = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.floats(-1e-300, 1e-300), st.sampled_from([0.0, 5e-324, -5e-324, 2.0**-1022, 1.0, -1.0]))


@settings(max_examples=300, deadline=None)
@given(x=FINITE, n=st.integers(1, 3000))
def test_at_least_n_ulps_and_not_far_beyond(x, n):
    hi, lo = _stepped(x, n, math.inf), _stepped(x, n, -math.inf)
    assert up(x, n) >= hi and down(x, n) <= lo
    if math.isfinite(hi) and math.isfinite(lo):  # within ~5x of the move (a safe side, not a useless one)
        assert up(x, n) - x <= 5.0 * (hi - x) + 1e-320 and x - down(x, n) <= 5.0 * (x - lo) + 1e-320


def test_many_ulps_are_cheap_and_infinities_stay():
    x = up(0.3, 10**12)  # (one at a time: hours)
    assert 0.3 + 10**12 * 2.0**-54 <= x <= 0.3 * (1 + 10**12 * 2.0**-50)
    assert down(-0.3, 10**12) == -x
    assert up(math.inf, 10**12) == math.inf and down(-math.inf, 10**12) == -math.inf  # (were loops)
    assert _stepped(-math.inf, 70, math.inf) <= up(-math.inf, 70) == -down(math.inf, 70) < -1.79e308
    assert down(math.inf, 10**12) == -up(-math.inf, 10**12) < 1.8e308
    assert math.isnan(up(math.nan, 100)) and math.isnan(down(math.nan, 100))
    assert up(1.0, 2**51) == math.inf and down(1.0, 2**51) == -math.inf
