"""Many black boxes of tiny eps beside one small finite mechanism: the exact composition
through the split law H(x) = sum_a p_a H_B(x - l_a) (the multinomial rows' chain would walk
the 2 / (2 eps) pivot steps between the mechanism's outcomes at every evaluation).

References from the definition (MV Thm 1.5; the hockey-stick divergence of the composed
pair), in 50-digit mpmath, never from optcomp: the randomized response RR(1, values=3) seen
forward has privacy loss +1 (P-mass e/(e+2)), 0 (1/(e+2)) and -1 (1/(e+2)); the k black
boxes of eps the loss (2m - k) eps, m ~ Bin(k, e^eps/(1+e^eps)); the two are independent, so

    delta(x) = H(x) = sum_l P(l) sum_m Bin(k, p)(m) (1 - e^{x - l - (2m - k) eps})_+

(no delta events; both mechanisms are symmetric, so the reverse direction is the same law).
"""

import math

import mpmath
import pytest

import optcomp
from optcomp.mechanisms import BlackBox, RandomizedResponse

mpmath.mp.dps = 40


def _box_excess(eps: float, k: int, y) -> mpmath.mpf:
    """H_B(y) = sum_m Bin(k, p)(m) (1 - e^{y - (2m - k) eps})_+ for y >= 0, summed from the
    first atom above y until, beyond the mode, the geometric bound of the rest (the pmf ratio
    (k - m)/(m + 1) e^eps only falls) is below 10^-35 of the sum."""
    e = mpmath.mpf(eps)
    p = mpmath.e**e / (1 + mpmath.e**e)
    m = int(mpmath.floor((k + mpmath.mpf(y) / e) / 2)) + 1  # first m with (2m - k) eps > y
    if m > k:
        return mpmath.mpf(0)
    b = mpmath.e**(mpmath.loggamma(k + 1) - mpmath.loggamma(m + 1) - mpmath.loggamma(k - m + 1)
                   + m * mpmath.log(p) + (k - m) * mpmath.log(1 - p))
    total = mpmath.mpf(0)
    odds = p / (1 - p)
    for j in range(m, k + 1):
        total += b * -mpmath.expm1(mpmath.mpf(y) - (2 * j - k) * e)
        r = (k - j) * odds / (j + 1)
        b *= r
        if r < 1 and b / (1 - r) < total * mpmath.mpf(10) ** -35:
            break
    return total


def _delta(eps: float, k: int, x: float) -> mpmath.mpf:
    """delta(x) of k black boxes of eps beside RR(1, values=3), from the definition."""
    x = mpmath.mpf(x)
    w = 2 + mpmath.e
    return sum(mass * _box_excess(eps, k, x - loss) for loss, mass in ((1, mpmath.e / w), (0, 1 / w), (-1, 1 / w)))


@pytest.mark.parametrize("eps, k", [(1e-6, 10**6), pytest.param(1e-5, 10**6, marks=pytest.mark.slow), (1e-4, 10**5),
                                    pytest.param(1e-6, 10**9, marks=pytest.mark.slow)])
def test_many_tiny_black_boxes_beside_a_randomized_response(eps, k):
    d = 1e-6
    got = optcomp.epsilon_g([BlackBox(eps), RandomizedResponse(1.0, values=3)], counts=[k, 1], delta_g=d)
    # the exact optimum is the least x >= 0 with delta(x) <= d: the answer certifies it
    # (delta there at most d) and sits within 1e-12 relative of it (delta just below it above d)
    assert _delta(eps, k, got) <= d
    assert _delta(eps, k, got * (1 - 1e-12)) > d


def test_delta_of_many_tiny_black_boxes_matches_the_definition():
    eps, k = 1e-6, 10**6
    for x in (1.0, 1.002, 1.004):
        got = optcomp.delta_g([BlackBox(eps), RandomizedResponse(1.0, values=3)], counts=[k, 1], eps_g=x)
        ref = _delta(eps, k, x)
        assert ref <= got <= ref * (1 + 1e-12)
