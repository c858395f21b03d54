"""Self-tests of the independent reference in ``tests/reference.py``.

The reference is only useful if it is right, so it is checked here against things that do
not share its code path: brute force over the 4^k outcomes of the randomized responses
(the definition of (eps_g, delta_g)-DP), KOV Theorem 3.3's corner formula, the closed form
for a single mechanism, and exactness properties (feasibility boundary, atoms).  No
optcomp import: these tests must pass whatever state the library is in.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference as ref


def close(a, b, digits=40):
    a, b = mp.mpf(a), mp.mpf(b)
    return abs(a - b) <= mp.mpf(10) ** (-digits) * max(abs(a), abs(b), mp.mpf("1e-300"))


def _mech_groups(mechs):
    return [(e, d, 1) for e, d in mechs]


# ----------------------------------------------------------------------------- brute force


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    mechs=st.lists(
        st.tuples(st.sampled_from([0.0, 0.05, 0.3, 0.3, 1.0, 2.5, 7.0]), st.sampled_from([0.0, 0.0, 1e-6, 0.01, 0.2])),
        min_size=1,
        max_size=4,
    ),
    where=st.integers(0, 3),
    frac=st.floats(0, 1.2),
)
def test_delta_matches_brute_force(mechs, where, frac):
    """ref_delta == max over tests of P0(Q) - e^{eps_g} P1(Q) on {0,1,2,3}^k, to 40 digits,
    at atoms, one ulp either side of the top atom, and in between."""
    top = math.fsum(e for e, _ in mechs)
    eps_g = [top, math.nextafter(top, 0) if top > 0 else 0.0, math.nextafter(top, math.inf), frac * top][where]
    with mp.workdps(60):
        brute = ref.brute_force_delta(mechs, eps_g)
        mine = ref.ref_delta(_mech_groups(mechs), eps_g)
        assert close(brute, mine), (mechs, eps_g, brute, mine)


def test_delta_matches_brute_force_k5():
    mechs = [(0.1, 1e-3), (0.1, 0.0), (0.37, 0.0), (1.5, 1e-9), (0.1, 0.0)]
    for eps_g in (0.0, 0.1, 0.27, 0.57, 1.97, 2.37, math.nextafter(2.37, 0)):
        assert close(ref.brute_force_delta(mechs, eps_g), ref.ref_delta(_mech_groups(mechs), eps_g))


def test_grouped_equals_expanded():
    """Counts are a representation detail: (eps, delta, 3) == three (eps, delta, 1)."""
    g = [(0.3, 1e-4, 3), (0.7, 0.0, 2)]
    expanded = [(0.3, 1e-4, 1)] * 3 + [(0.7, 0.0, 1)] * 2
    for x in (0.0, 0.5, 1.3, 2.3):
        assert close(ref.ref_delta(g, x), ref.ref_delta(expanded, x), 45)


# ----------------------------------------------------------------------------- KOV Thm 3.3


@pytest.mark.parametrize("eps,delta,k", [(0.4, 0.0, 5), (0.4, 0.1, 5), (0.1, 0.001, 30), (1.3, 1e-8, 17), (3.0, 0.0, 40)])
def test_kov_corners(eps, delta, k):
    """At eps_g = (k - 2i) eps (the exact real number, as a Fraction) the optimum is KOV
    Thm 3.3's closed form, for every i."""
    for i in range(k // 2 + 1):
        x = (k - 2 * i) * Fraction(eps)
        assert close(ref.kov_corner_delta(eps, delta, k, i), ref.ref_delta([(eps, delta, k)], x), 40), i


def test_single_mechanism_closed_form():
    """k = 1: delta(eps_g) = delta + (1 - delta)(e^eps - e^eps_g)/(1 + e^eps) for eps_g < eps."""
    with mp.workdps(60):
        for eps, delta in [(1e-12, 0.0), (0.5, 0.1), (30.0, 1e-300), (700.0, 0.0)]:
            for x in (0.0, eps / 3, math.nextafter(eps, 0)):
                e, d, xx = mp.mpf(eps), mp.mpf(delta), mp.mpf(x)
                want = d + (1 - d) * mp.exp(xx) * mp.expm1(e - xx) / (1 + mp.exp(e))  # e - xx exact (Sterbenz)
                assert close(want, ref.ref_delta([(eps, delta, 1)], x), 35), (eps, delta, x)
            assert ref.ref_delta([(eps, delta, 1)], eps) == mp.mpf(delta) or close(ref.ref_delta([(eps, delta, 1)], eps), delta)


def test_top_atom_float_product_below_real_product():
    """The issue-7 row: 10 * 23.11655047458064 in floating point is below the real 10 eps, so
    the top atom is still above eps_g and delta = P0[top] (1 - e^{eps_g - top}) > 0."""
    eps = 23.11655047458064
    x = 10 * eps
    assert Fraction(x) < 10 * Fraction(eps)
    d = ref.ref_delta([(eps, 0.0, 10)], x)
    with mp.workdps(60):
        gap = mp.mpf(10 * Fraction(eps) - Fraction(x))
        p = 1 / (1 + mp.exp(-mp.mpf(eps)))
        assert close(d, p**10 * -mp.expm1(-gap), 35)
    assert 1e-14 < d < 2e-14
    # and exactly at the real top atom delta is 0
    assert ref.ref_delta([(eps, 0.0, 10)], 10 * Fraction(eps)) == 0


# ----------------------------------------------------------------------------- epsilon direction


@pytest.mark.parametrize(
    "groups,dg",
    [
        ([(0.1, 0.0, 100)], 1e-6),
        ([(0.01, 0.0, 1000)], 2.0**-25),
        ([(0.3, 1e-5, 3), (1.1, 0.0, 2)], 1e-3),
        ([(1e-8, 0.0, 1000)], 1e-300),
        ([(5.0, 0.01, 4)], 0.5),
    ],
)
def test_inverse(groups, dg):
    """delta(OptComp(dg)) == dg (S is continuous and strictly decreasing where positive)."""
    x = ref.ref_epsilon(groups, dg)
    assert 0 < x < mp.inf
    with mp.workdps(80):
        assert close(ref.ref_delta(groups, x), dg, 30)
        below = ref.ref_delta(groups, x * (1 - mp.mpf("1e-25")))
        assert below > dg


def test_feasibility_boundary_exact():
    """1 - (1 - 0.5)^2 = 0.75 exactly: delta_g = 0.75 gives the top atom, one ulp below inf."""
    g = [(0.1, 0.5, 2)]
    assert ref.ref_feasible(ref.normalise_groups(g), 0.75) == 0
    assert ref.ref_epsilon(g, 0.75) == mp.mpf(Fraction(0.1) * 2)
    assert ref.ref_epsilon(g, math.nextafter(0.75, 0)) == mp.inf
    assert ref.ref_epsilon(g, math.nextafter(0.75, 1)) < 0.2


def test_feasibility_large_count():
    """k = 10^6 with delta = 1e-12: 1 - (1 - 1e-12)^(10^6) = 9.999995000001667e-07 (to 16
    digits); the float just above is feasible, the float below is not."""
    g = ref.normalise_groups([(0.0001, 1e-12, 10**6)])
    with mp.workdps(60):
        b = -mp.expm1(10**6 * mp.log1p(-mp.mpf(1e-12)))
    f = float(b)
    lo, hi = (f, math.nextafter(f, 1)) if mp.mpf(f) < b else (math.nextafter(f, 0), f)
    assert ref.ref_feasible(g, lo) == 1 and ref.ref_feasible(g, hi) == -1


def test_zero_when_h0_fits():
    assert ref.ref_epsilon([(0.1, 0.0, 3)], 0.9) == 0


def test_bounds_bracket_exact_value():
    """A deliberately small max_atoms gives a non-tight but certified bracket."""
    g = [(0.01, 0.0, 200_000)]
    exact = ref.ref_epsilon(g, 1e-6)
    lo, hi, tight = ref.ref_epsilon_bounds(g, 1e-6, max_atoms=300)
    assert not tight and lo <= exact <= hi
    dlo, dhi, dtight = ref.ref_delta_bounds(g, 20.0, max_atoms=50)
    d = ref.ref_delta(g, 20.0)
    assert dlo <= d <= dhi


def test_precision_independent():
    """The same answer at 80 and 140 digits (the reference's own error is far below 1e-40)."""
    g = [(0.7, 1e-9, 7), (0.05, 0.0, 3)]
    a = ref.ref_delta_bounds(g, 1.234, dps=80)[0]
    b = ref.ref_delta_bounds(g, 1.234, dps=140)[0]
    assert close(a, b, 60)


def test_global_precision_untouched():
    before = mp.mp.dps
    ref.ref_epsilon([(0.2, 0.0, 50)], 1e-9)
    ref.ref_delta([(0.2, 0.0, 50)], 1.0)
    assert mp.mp.dps == before


def test_huge_eps_and_counts():
    """eps = 1e308 and k = 10^12 stay finite in the reference (mpmath has no overflow)."""
    x = ref.ref_epsilon([(1e308, 0.0, 2), (1.0, 0.0, 1)], 1e-6)
    assert x > ref.FLOAT_MAX
    lo, hi, _ = ref.ref_epsilon_bounds([(0.1, 0.0, 10**12)], 1e-6, max_atoms=2000)
    assert 4e9 < lo <= hi <= 1.0001e11


# ----------------------------------------------------------------------------- closed forms


def test_closed_forms_dominate_optimum():
    """Every theorem's bound is >= the optimum (sanity of the closed-form references)."""
    for groups, dg in [([(0.1, 0.0, 100)], 1e-6), ([(0.5, 1e-7, 20), (0.05, 0.0, 50)], 1e-5), ([(2.0, 0.0, 3)], 0.01)]:
        opt = ref.ref_epsilon(groups, dg)
        for f in (ref.ref_basic_epsilon, ref.ref_drv_epsilon, ref.ref_kov_epsilon, ref.ref_advanced_pure_epsilon):
            assert f(groups, dg) >= opt, f.__name__
        x = opt * mp.mpf("1.3")
        dopt = ref.ref_delta(groups, x)
        for f in (ref.ref_basic_delta, ref.ref_drv_delta, ref.ref_kov_delta, ref.ref_advanced_pure_delta):
            assert f(groups, x) >= dopt, f.__name__


def test_kov_homogeneous_is_thm_3_4():
    """The heterogeneous form (Thm 3.5) with k equal entries is Thm 3.4 as printed."""
    eps, k, dg = 0.1, 100, 1e-6
    with mp.workdps(60):
        e = mp.mpf(eps)
        dt = mp.mpf(dg)
        m = k * e * (mp.exp(e) - 1) / (mp.exp(e) + 1)
        want = min(k * e, m + e * mp.sqrt(2 * k * mp.log(mp.e + mp.sqrt(k * e * e) / dt)), m + e * mp.sqrt(2 * k * mp.log(1 / dt)))
        assert close(ref.ref_kov_epsilon([(eps, 0.0, k)], dg), want, 40)


def test_drv_homogeneous_is_thm_1_3():
    eps, k, dg = 0.1, 100, 1e-6
    with mp.workdps(60):
        e = mp.mpf(eps)
        want = mp.sqrt(2 * k * mp.log(1 / mp.mpf(dg))) * e + k * e * (mp.exp(e) - 1)
        assert close(ref.ref_drv_epsilon([(eps, 0.0, k)], dg), want, 40)
