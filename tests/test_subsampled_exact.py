"""method='optimal' on Poisson-subsampled finite pairs, against exact rational enumeration
(where the exact bracket is wider than 1e-12 relative -- losses ~s ~1e-7 -- optimal refuses and
auto's certified bound is checked instead).

A Poisson-subsampled finite pair is itself a finite pair: with (P, Q) the base's output
distributions (on D, holding the record, and on D' without it) and s the sampling rate,
the remove direction is ((1 - s) Q + s P, Q) and the add direction (Q, (1 - s) Q + s P)
(Zhu, Dong and Wang, AISTATS 2022, Thm 11).  The reference below forms these masses as exact
rationals (the floats as given), takes the k-fold product outcome by outcome, and sums
(A - e^x B)_+ at 60 digits in each global direction; the optimum is the larger one.  Nothing
here reads optcomp's formulas."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
import reference as ref
from optcomp import ExactTooLarge
from optcomp.mechanisms import Pair, Subsampled

TINY = mpmath.mpf(10) ** -30  # the reference's own precision, relative


def _pairs(p, q, s):
    """(remove pair, add pair) of the subsampled pair, exact rationals: ``Pair(p, q)`` stands
    for the distributions p / sum p and q / sum q, the sums taken exactly (with p = (a, 1.0 -
    a) in floats the sum need not be 1: a = 0.2 gives 1 + 5.6e-17, and an unnormalised
    reference put the truth 1.4 ulps above the exact value, a = 0.2 drawn in a parallel run)."""
    P, Q, S = [Fraction(a) for a in p], [Fraction(b) for b in q], Fraction(s)
    P = [a / sum(P) for a in P]
    Q = [b / sum(Q) for b in Q]
    mix = [(1 - S) * b + S * a for a, b in zip(P, Q)]
    return (mix, Q), (Q, mix)


def _hs(pair, k, x):
    """sum over k-tuples of outcomes of (A - e^x B)_+, masses exact, e^x at 60 digits."""
    return ref.tuples_hockey_stick(*pair, k, x)


def _delta(p, q, s, k, x):
    return max(_hs(d, k, x) for d in _pairs(p, q, s))


def _eps(p, q, s, k, delta_g):
    """inf{x >= 0: delta(x) <= delta_g} by bisection to 1e-40 (inf when delta(x) stays above
    delta_g, i.e. the +inf mass alone exceeds it)."""
    with mpmath.workdps(60):
        dg = mpmath.mpf(delta_g)
        if _delta(p, q, s, k, 0) <= dg:
            return mpmath.mpf(0)
        hi = mpmath.mpf(1)
        while _delta(p, q, s, k, hi) > dg:
            hi *= 2
            if hi > 2**12:
                return mpmath.inf
        lo = mpmath.mpf(0)
        while hi - lo > mpmath.mpf(10) ** -40 * hi:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _delta(p, q, s, k, mid) > dg else (lo, mid)
        return hi


masses = st.floats(min_value=1e-12, max_value=1.0 - 1e-12)
rates = st.floats(min_value=-12.0, max_value=0.0).map(lambda e: 10.0**e)  # log scale, 1e-12 .. 1


@settings(max_examples=25, deadline=None)
@given(a=masses, b=masses, s=rates, k=st.integers(1, 4), x=st.floats(min_value=-9.0, max_value=0.5))
def test_delta_matches_enumeration(a, b, s, k, x):
    """Two outcomes, sampling rate and eps_g on log scales: the exact value within 1e-12
    relative above, never below."""
    x = 0.0 if x < -8.5 else 10.0**x
    p, q = (a, 1.0 - a), (b, 1.0 - b)
    ref = _delta(p, q, s, k, x)
    m = Subsampled(Pair(p, q), s)
    try:
        got, rel = optcomp.delta_g(m, eps_g=x, k=k, method="optimal"), 1e-12
    except ExactTooLarge:  # (losses ~s: a bracket wider than 1e-12 relative, refused) auto's bound
        got, rel = optcomp.delta_g(m, eps_g=x, k=k), 1e-4
    assert ref * (1 - TINY) <= got <= ref * (1 + rel) + 1e-300, (got, ref)


@settings(max_examples=15, deadline=None)
@given(a=masses, s=rates, k=st.integers(1, 3), dg=st.floats(min_value=-12.0, max_value=-1.0))
def test_epsilon_matches_enumeration(a, s, k, dg):
    """A three-outcome pair with one outcome only P produces (loss +inf): eps_g from the
    exact root, or inf where the +inf mass s a_0 alone exceeds delta_g."""
    delta_g = 10.0**dg
    p, q = (a / 2, a / 2, 1.0 - a), (0.0, 0.7, 0.3)
    ref = _eps(p, q, s, k, delta_g)
    m = Subsampled(Pair(p, q), s)
    try:
        got, slack = optcomp.epsilon_g(m, delta_g=delta_g, k=k, method="optimal"), 1e-12 * ref
    except ExactTooLarge:  # (as above) auto's bound, within 1e-4 absolute
        got, slack = optcomp.epsilon_g(m, delta_g=delta_g, k=k), 1e-4
    if ref == mpmath.inf:
        assert got == math.inf
    else:
        assert ref * (1 - TINY) <= got <= ref + slack + 1e-300, (got, ref)


def test_large_subsampled_compositions_go_to_the_lattice():
    """Three atoms or more and more than SUBSAMPLED_TUPLES count vectors: optimal refuses
    (the multinomial rows of irrational atoms ~s apart cost seconds), auto's certified
    lattice answers; a two-atom law stays exact at any k (binomial rows)."""
    import pytest

    m = Subsampled(Pair((0.2, 0.3, 0.5), (0.5, 0.3, 0.2)), 0.01)
    with pytest.raises(ExactTooLarge):
        optcomp.epsilon_g(m, delta_g=1e-6, k=1000, method="optimal")
    b = optcomp.epsilon_bounds(m, delta_g=1e-6, k=1000)
    assert b.lower <= optcomp.epsilon_g(m, delta_g=1e-6, k=1000) <= b.upper < math.inf
    two = Subsampled(Pair((0.3, 0.7), (0.6, 0.4)), 0.01)
    assert optcomp.epsilon_g(two, delta_g=1e-6, k=10000, method="optimal") < math.inf
