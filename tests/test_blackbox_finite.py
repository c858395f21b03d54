"""A finite mechanism beside many black boxes: delta(x) = sum_a P_F(a) delta_B(x - l_a).

References are written here from the definition of the hockey-stick divergence,
delta(x) = sum_outcomes (P - e^x Q)_+, over the product of the black boxes' dominating pairs
(randomized response with delta, MV Def. 3.1 / KOV Thm 3.3: outcomes counted by binomial or
multinomial count vectors) and the mechanism's own output distributions (k-ary randomized
response, a Pair as given) -- the larger of the two global directions (the mechanism forward,
or with P and Q swapped) -- in mpmath, never from optcomp's laws.
"""

from __future__ import annotations

import math
from itertools import product

import mpmath
import pytest
from hypothesis import given, settings, strategies as st

import optcomp
from optcomp._exact.finite import compositions
from optcomp._exact.split import split_law
from optcomp._inputs import mechanisms
from optcomp.mechanisms import BlackBox, Pair, RandomizedResponse


# ------------------------------------------------------------------ references (definitions)


def _count_vectors(k: int, m: int):
    if m == 1:
        yield (k,)
        return
    for first in range(k + 1):
        for rest in _count_vectors(k - first, m - 1):
            yield (first,) + rest


def _box_pair(eps, delta):
    """The dominating pair of an (eps, delta)-DP black box (MV Def. 3.1) as outcome lists."""
    e = mpmath.exp(mpmath.mpf(eps))
    d = mpmath.mpf(delta)
    P = [d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), mpmath.mpf(0)]
    return P, P[::-1]


def _rr_pair(eps, values):
    e = mpmath.exp(mpmath.mpf(eps))
    z = e + values - 1
    P = [e / z, 1 / z] + [1 / z] * (values - 2)
    Q = [1 / z, e / z] + [1 / z] * (values - 2)
    return P, Q


def _power(pair, k: int, window=None):
    """The k-fold product of one pair, outcomes merged by count vector (multinomial), as
    (P, Q) lists; ``window``: a predicate on the count vector keeping only some of them (its
    omitted P- and Q-mass is returned as well, to bound the reference's error)."""
    P1, Q1 = pair
    live = [i for i in range(len(P1)) if P1[i] > 0 or Q1[i] > 0]
    P, Q = [], []
    for v in _count_vectors(k, len(live)):
        if window is not None and not window(v):
            continue
        c = mpmath.factorial(k)
        p = q = mpmath.mpf(1)
        for n, i in zip(v, live):
            c /= mpmath.factorial(n)
            p *= P1[i] ** n
            q *= Q1[i] ** n
        P.append(c * p)
        Q.append(c * q)
    return P, Q


def _delta(parts, x):
    """sum over the product of (P - e^x Q)_+, parts a list of (P, Q) outcome lists."""
    ex = mpmath.exp(mpmath.mpf(x))
    total = mpmath.mpf(0)
    for combo in product(*[list(zip(P, Q)) for P, Q in parts]):
        p = q = mpmath.mpf(1)
        for a, b in combo:
            p *= a
            q *= b
        if p > ex * q:
            total += p - ex * q
    return total


def _delta_both(boxes, mech_pairs, x):
    """The larger of the two global directions (the mechanisms forward, or P and Q swapped)."""
    box_parts = [_power(_box_pair(e, d), k) for e, d, k in boxes]
    fwd = box_parts + mech_pairs
    rev = box_parts + [(Q, P) for P, Q in mech_pairs]
    return max(_delta(fwd, x), _delta(rev, x))


# ------------------------------------------------------------------ the reproducer


def _box_terms(k: int, eps: float, width: int):
    """(P, Q) masses of the count m of +eps outcomes of k black boxes (eps, 0) for |m - k/2| <=
    width: binomial pmfs of p = e^eps/(1 + e^eps) and of q = 1 - p, by the pmf ratio from one
    log-gamma start (at the working precision)."""
    e = mpmath.exp(mpmath.mpf(eps))
    p, q = e / (1 + e), 1 / (1 + e)
    m0 = k // 2 - width
    pb = mpmath.exp(mpmath.loggamma(k + 1) - mpmath.loggamma(m0 + 1) - mpmath.loggamma(k - m0 + 1)
                    + m0 * mpmath.log(p) + (k - m0) * mpmath.log(q))
    qb = pb * (q / p) ** (2 * m0 - k)
    out = []
    for m in range(m0, k // 2 + width + 1):
        out.append((pb, qb))
        r = mpmath.mpf(k - m) / (m + 1)
        pb, qb = pb * r * (p / q), qb * r * (q / p)
    return out


def _tiny_reference(x):
    """delta(x) of BlackBox(1e-300) x 10^6 beside RandomizedResponse(1.0, values=3), from the
    definition at 330 digits (the P - e^x Q differences are 1e-300 relative).  The counts m of
    the boxes' +eps outcome are summed over |m - k/2| <= 12 sd (sd = 500; the rest weighs
    below e^-70 of the whole P and Q mass, far below the 1e-13 compared here)."""
    with mpmath.workdps(330):
        ex = mpmath.exp(mpmath.mpf(x))
        P_rr, Q_rr = _rr_pair(1.0, 3)
        total = mpmath.mpf(0)
        for pb, qb in _box_terms(10**6, 1e-300, 6000):
            for a, b in zip(P_rr, Q_rr):  # (RR is symmetric: one direction suffices)
                d = a * pb - ex * b * qb
                if d > 0:
                    total += d
        return total


_TINY = [BlackBox(1e-300), RandomizedResponse(1.0, values=3)]


@pytest.fixture(scope="module")
def tiny_delta_at_1():
    return _tiny_reference(1.0)


def test_delta_bounds_upper_end_is_tight(tiny_delta_at_1):
    """delta_bounds' upper end sat on the lattice's 2^-52 floor (2.2e-16 against 2.3e-298)."""
    truth = tiny_delta_at_1
    b = optcomp.delta_bounds(_TINY, counts=[10**6, 1], eps_g=1.0)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 1e-12 * truth
    d = optcomp.delta_g(_TINY, counts=[10**6, 1], eps_g=1.0)
    assert truth <= d <= truth * (1 + 1e-12)
    assert optcomp.delta_g(_TINY, counts=[10**6, 1], eps_g=1.0, method="optimal") == d


def test_the_reference_is_e_over_e_plus_2_of_the_boxes_alone(tiny_delta_at_1):
    """Only the randomized response's +1 outcome lets the loss pass eps_g = 1 (the boxes total
    1e-294): delta(1) = e/(e+2) delta_B(0), delta_B from MV Thm 1.5's binomial sum."""
    with mpmath.workdps(330):
        db = mpmath.fsum(pb - qb for pb, qb in _box_terms(10**6, 1e-300, 6000) if pb > qb)
        ee = mpmath.e
        assert abs(ee / (ee + 2) * db / tiny_delta_at_1 - 1) < 1e-25  # (330 digits less ~300 cancelled)


@pytest.mark.parametrize("delta_g", [1e-300, 1e-298, 1e-295, 1e-290])
def test_epsilon_bounds_hold_the_root(delta_g, tiny_delta_at_1):
    """delta(1) = 2.3e-298 > delta_g while every loss is at most 1 + 1e-294 < 1 + 2^-52
    (delta(1 + 2^-52) = 0): the root lies in (1, 1 + 2^-52], or below 1 when delta_g is above
    delta(1) -- then in (1 - 1e-16, 1] (delta(x) >= e/(e+2) (1 - e^(x-1)) for x < 1)."""
    b = optcomp.epsilon_bounds(_TINY, counts=[10**6, 1], delta_g=delta_g)
    one_up = math.nextafter(1.0, 2.0)
    if tiny_delta_at_1 > delta_g:
        assert b.lower <= 1.0 and b.upper >= one_up
    else:
        assert b.lower <= 1.0 <= b.upper
    assert b.upper <= math.nextafter(one_up, 2.0) and b.upper - b.lower <= 1e-4
    e = optcomp.epsilon_g(_TINY, counts=[10**6, 1], delta_g=delta_g)
    assert b.lower <= e <= b.upper


def test_tiny_boxes_beside_a_pair_of_irrational_losses():
    """BlackBox(1e-200) x 500 beside Pair((0.5, 0.5), (0.25, 0.75)) (losses log 2, log 2/3):
    the split route's positions carry error bounds; reference from the definition at 260
    digits, both directions."""
    pair = Pair((0.5, 0.5), (0.25, 0.75))
    with mpmath.workdps(260):
        mp = ([mpmath.mpf(0.5), mpmath.mpf(0.5)], [mpmath.mpf(0.25), mpmath.mpf(0.75)])
        for x in (0.0, math.log(2.0), 0.5):
            truth = _delta_both([(1e-200, 0.0, 500)], [mp], x)
            b = optcomp.delta_bounds([BlackBox(1e-200), pair], counts=[500, 1], eps_g=x)
            assert b.lower <= truth <= b.upper, (x, b, truth)
            assert b.upper - b.lower <= 1e-3 * truth, (x, b, truth)


# ------------------------------------------------------------------ the split law against the definition


_CASES = [
    # (boxes [(eps, delta, count)], mechanisms [(mech, count)], x)
    ([(0.1, 0.0, 30)], [(RandomizedResponse(1.0, values=3), 1)], 0.5),  # y = x - 1 < 0: the symmetric form
    ([(0.1, 0.0, 30)], [(RandomizedResponse(1.0, values=3), 1)], 0.0),
    ([(0.1, 0.0, 20), (0.3, 0.0, 7)], [(RandomizedResponse(1.0, values=3), 1)], 0.7),
    ([(0.25, 1e-3, 12)], [(RandomizedResponse(0.5, values=4), 2)], 0.3),  # delta events
    ([(1e-3, 0.0, 40)], [(Pair((0.5, 0.5), (0.25, 0.75)), 2)], 0.4),
    ([(2.0, 0.0, 6)], [(Pair((0.1, 0.9, 0.0), (0.0, 0.5, 0.5)), 1)], 1.0),  # +inf mass, a zero
]


def _mech_pair(mech):
    if isinstance(mech, RandomizedResponse):
        return _rr_pair(mech.eps, mech.values)
    return [mpmath.mpf(a) for a in mech.p], [mpmath.mpf(b) for b in mech.q]


def _split_delta(boxes, mechs, x):
    """The larger direction's delta bracket from the split law (built directly, whatever the
    engine would route the composition to)."""
    m = mechanisms([BlackBox(e, d) for e, d, _ in boxes] + [mm for mm, _ in mechs], 0.0, None,
                   [k for _, _, k in boxes] + [c for _, c in mechs])
    lo = hi = 0.0
    for comp in compositions(m):
        law = split_law(comp)
        assert law is not None
        d_lo, d_hi = comp.events.delta_bounds(*law.excess_bounds(x))
        lo, hi = max(lo, d_lo), max(hi, d_hi)
    return lo, hi


@pytest.mark.parametrize("boxes, mechs, x", _CASES)
def test_split_law_against_the_definition(boxes, mechs, x):
    with mpmath.workdps(60):
        parts = []
        for mech, c in mechs:
            parts += [_mech_pair(mech)] * c
        truth = _delta_both(boxes, parts, x)
    lo, hi = _split_delta(boxes, mechs, x)
    assert lo <= truth <= hi
    assert hi - lo <= 1e-12 * truth


@settings(max_examples=12, deadline=None)
@given(log_eps=st.floats(-300.0, 0.3), k=st.integers(1, 40), rr_eps=st.floats(0.01, 3.0),
       values=st.integers(2, 4), x=st.floats(0.0, 3.0))
def test_split_law_on_log_scales(log_eps, k, rr_eps, values, x):
    eps = 10.0**log_eps
    with mpmath.workdps(340):  # (P - e^x Q across boxes of eps 1e-300 needs ~300 digits)
        truth = _delta_both([(eps, 0.0, k)], [_rr_pair(rr_eps, values)], x)
    lo, hi = _split_delta([(eps, 0.0, k)], [(RandomizedResponse(rr_eps, values=values), 1)], x)
    assert lo <= truth <= hi
    assert hi - lo <= 1e-12 * truth + 1e-300


def test_split_epsilon_brackets_the_root():
    """eps_g through the split law: delta at its two ends brackets delta_g (definition)."""
    boxes, mechs, delta_g = [(0.1, 0.0, 30)], [(RandomizedResponse(1.0, values=3), 1)], 1e-3
    m = mechanisms([BlackBox(0.1), RandomizedResponse(1.0, values=3)], 0.0, None, [30, 1])
    lo = hi = 0.0
    for comp in compositions(m):
        t_low, t_high = comp.events.targets(delta_g)
        x_lo, x_hi = split_law(comp).epsilon_bounds(t_low, t_high, comp.top())
        lo, hi = max(lo, x_lo), max(hi, x_hi)
    assert hi - lo <= 1e-12 * hi
    with mpmath.workdps(60):
        parts = [_rr_pair(1.0, 3)]
        assert _delta_both(boxes, parts, hi) <= delta_g < _delta_both(boxes, parts, lo)
