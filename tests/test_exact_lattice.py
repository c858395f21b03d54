"""The exact composition of finite laws on one lattice (:mod:`optcomp._exact.convolution`)
against a reference written here from the definitions.

The reference takes each mechanism's output distributions (P, Q) from
``test_exact_finite.pq`` (randomized response, geometric, a Profile's trade-off pair built
by brute force over line crossings, a black box's randomized response with its delta
event), names every outcome's loss log(P/Q) by the exact rational it equals (a multiple of a
float eps, checked to 40 digits), and composes the laws as dictionaries keyed by exact
rational positions in 60-digit mpmath:

    delta(x) = P(some outcome with Q = 0) + sum_{l > x} P(l) (1 - e^{x - l}),

the distances l - x exact rationals.  The lattice law is called directly (also where the
composition is small enough to be listed), so every check exercises it; the public
``method="optimal"`` is checked where it takes the lattice (count vectors beyond the list).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import ExactTooLarge
from optcomp._exact.convolution import LatticeLaw, lattice_law
from optcomp._exact.finite import compositions
from optcomp._inputs import Mechanisms
from optcomp.mechanisms import BlackBox, Geometric, Pair, Profile, RandomizedResponse
from reference import decreasing_root
from test_exact_finite import pq

DPS = 60
REL = 1e-12


# ============================================================================ the reference


def _eps_list(mech):
    if isinstance(mech, Profile):
        return [e for e, _ in mech.guarantees]
    if isinstance(mech, (RandomizedResponse, Geometric, BlackBox)):
        return [mech.eps]
    raise TypeError(mech)


def ref_law(mech):
    """(P-mass of the outcomes with Q = 0, {exact position: P-mass}) of one copy."""
    span = mech.sensitivity if isinstance(mech, Geometric) else 1
    cands = {n * Fraction(e) for e in _eps_list(mech) for n in range(-span, span + 1)}
    inf, atoms = mp.mpf(0), {}
    with mp.workdps(DPS):
        for p, q in pq(mech, "forward"):
            if p > 0 and q == 0:
                inf += p
            elif p > 0:
                lv = mp.log(p / q)
                pos = min(cands, key=lambda c: abs(mp.mpf(c.numerator) / c.denominator - lv))
                assert abs(mp.mpf(pos.numerator) / pos.denominator - lv) < mp.mpf(10) ** -40, (mech, lv)
                atoms[pos] = atoms.get(pos, mp.mpf(0)) + p
    return inf, atoms


_COMPOSED = {}


def ref_composed(items):
    """(P-mass of the tuples with a Q = 0 outcome, {exact position: P-mass of the finite tuples})."""
    key = tuple(items)
    if key not in _COMPOSED:
        _COMPOSED[key] = _ref_composed(items)
    return _COMPOSED[key]


def _ref_composed(items):
    no_inf = mp.mpf(1)
    law = {Fraction(0): mp.mpf(1)}
    with mp.workdps(DPS):
        for mech, c in items:
            inf, one = ref_law(mech)
            no_inf *= (1 - inf) ** c
            for _ in range(c):
                nxt = {}
                for a, pa in law.items():
                    for b, pb in one.items():
                        nxt[a + b] = nxt.get(a + b, mp.mpf(0)) + pa * pb
                law = nxt
        return 1 - no_inf, law


def ref_excess(law, x):
    """sum_{l > x} P(l) (1 - e^{x - l}) with exact distances (60 digits)."""
    fx = Fraction(x)
    with mp.workdps(DPS):
        return mp.fsum(p * -mp.expm1(-(mp.mpf((l - fx).numerator) / (l - fx).denominator))
                       for l, p in law.items() if l > fx)


def ref_delta(items, x):
    inf, law = ref_composed(items)
    with mp.workdps(DPS):
        return inf + ref_excess(law, x)


def ref_root(law, t, top):
    """The least x >= 0 with sum_{l > x} P(l)(1 - e^{x - l}) <= t (bisection, 60 digits)."""
    with mp.workdps(DPS):
        if ref_excess(law, 0.0) <= t:
            return mp.mpf(0)
        atoms = [(mp.mpf(l.numerator) / l.denominator, p) for l, p in law.items() if l > 0]

        def H(x):
            return mp.fsum(p * -mp.expm1(x - l) for l, p in atoms if l > x)

        return decreasing_root(H, t, 0, max(l for l, _ in atoms), steps=120)


# ============================================================================ helpers


def _law(items):
    m = Mechanisms.from_items([(mech, 0.0, c) for mech, c in items])
    (comp,) = compositions(m)
    law = lattice_law(comp)
    if law is None:  # (only for masses known too loosely: a vertex of a Profile within rounding)
        assert sum(c * f.rel for f, c in comp.factors) > 2.0**-40
        return comp, None
    assert isinstance(law, LatticeLaw)
    return comp, law


def check_excess(items, x):
    """H(x) of the law given no +inf outcome (normalised: the finite masses over 1 - P(inf))."""
    comp, law = _law(items)
    if law is None or x >= comp.top():
        return  # (H = 0 from the top atom on: the callers answer it without the law)
    lo, hi = law.excess_bounds(x)
    inf, ref = ref_composed(items)
    with mp.workdps(DPS):
        h = ref_excess(ref, x) / (1 - inf)
    assert lo <= h <= hi, (items, x, lo, float(h), hi)
    assert hi - lo <= REL * hi + 1e-300, (items, x, lo, hi)


def check_root(items, t):
    comp, law = _law(items)
    if law is None:
        return
    inf, ref = ref_composed(items)
    x_lo, x_hi = law.epsilon_bounds(t, t, comp.top())
    with mp.workdps(DPS):
        tu = t * (1 - inf)
        root = ref_root(ref, tu, comp.top())
        tol = 1 + mp.mpf("1e-30")  # (the bisection stops within 2^-120 of the root)
        assert x_lo <= root * tol and root <= x_hi * tol, (items, t, x_lo, float(root), x_hi)
        assert ref_excess(ref, x_hi) <= tu  # the upper end is an upper bound, whatever the bisection
    assert x_hi - x_lo <= REL * x_hi, (items, t, x_lo, x_hi)


# ============================================================================ examples

DECIMAL = Profile([(0.01, 1e-9), (0.03, 0.0)])  # floats only near multiples of 0.01: the shift D
BINARY = Profile([(0.125, 1e-6), (0.375, 1e-12), (0.5, 0.0)])  # exact multiples of 1/8


@pytest.mark.parametrize("items", [
    [(BINARY, 30)],
    [(DECIMAL, 30)],
    [(RandomizedResponse(0.25, values=4), 30), (BlackBox(0.5, 0.0), 3)],
    [(Geometric(0.25, 3), 12), (BINARY, 5)],
])
def test_excess_against_definitions(items):
    _, law = ref_composed(items)
    top = float(max(law))
    for x in (0.0, 0.3, 0.9 * top / 3, 0.5 * top, 0.97 * top):
        check_excess(items, x)


def test_eps_on_atoms_and_beside():
    """x exactly on a composed atom and one ulp to either side (exact distances decide)."""
    for items, atom in (([(BINARY, 30)], 2.5), ([(BINARY, 30)], 0.125 * 13), ([(DECIMAL, 30)], 0.1)):
        for x in (math.nextafter(atom, 0.0), atom, math.nextafter(atom, math.inf)):
            check_excess(items, x)


@pytest.mark.parametrize("t", [0.3, 1e-3, 1e-9, 1e-30, 1e-120, 1e-300])
def test_root_down_to_1e300(t):
    check_root([(BINARY, 30)], t)


def test_root_decimal_profile():
    for t in (1e-2, 1e-14):
        check_root([(DECIMAL, 20)], t)


def test_public_optimal_takes_the_lattice():
    """Beyond the listed compositions (count vectors > 512): the public call answers from the
    lattice, exactly (both functions, their inverse law)."""
    items = [(BINARY, 30)]
    inf, law = ref_composed(items)
    for x in (1.0, 2.5, math.nextafter(2.5, 3.0)):
        d = optcomp.delta_g([BINARY], counts=[30], eps_g=x, method="optimal")
        ref = inf + ref_excess(law, x)
        assert ref <= d <= ref * (1 + REL) + 1e-300
    for dg in (1e-3, 1e-5):
        e = optcomp.epsilon_g([BINARY], counts=[30], delta_g=dg, method="optimal")
        assert ref_delta(items, e) <= dg
        assert ref_delta(items, e * (1 - 2 * REL)) > dg
        assert optcomp.delta_g([BINARY], counts=[30], eps_g=e, method="optimal") <= dg


def test_profile_at_k_10000_inside_the_certified_lattice_bracket():
    """The benchmark instance: exact, and inside the approx path's certified bracket."""
    p = Profile([(0.01, 1e-9), (0.02, 1e-10), (0.05, 1e-12), (0.1, 1e-14), (0.2, 0.0)])
    e = optcomp.epsilon_g([p], counts=[10**4], delta_g=1e-6, method="optimal")
    b = optcomp.epsilon_bounds([p], counts=[10**4], delta_g=1e-6)
    assert b.lower <= e <= b.upper
    d = optcomp.delta_g([p], counts=[10**4], eps_g=e, method="optimal")
    assert d <= 1e-6
    lo, hi = optcomp.delta_bounds([p], counts=[10**4], eps_g=e)
    assert lo <= d and d >= 1e-6 * (1 - 1e-9)  # (the root is where delta meets 1e-6)


def test_incommensurable_atoms_are_not_taken():
    """A Pair's irrational positions (logs of ratios): no lattice; nor eps without a unit."""
    m = Mechanisms.from_items([(Pair((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), 0.0, 40)])
    assert lattice_law(compositions(m)[0]) is None
    m = Mechanisms.from_items([(Profile([(0.1, 1e-6), (math.pi / 10, 0.0)]), 0.0, 40)])
    assert lattice_law(compositions(m)[0]) is None


def test_memory_budget_refuses_before_allocating():
    """The rows are checked against the call's memory budget before each convolution: with the
    budget held but for a few bytes, ExactTooLarge (the lattice's arrays stay below 1 MiB by
    its cost cap, so the least public budget always fits: the public call answers)."""
    from optcomp import _memory

    p = Profile([(0.01, 1e-9), (0.02, 1e-10), (0.05, 1e-12), (0.1, 1e-14), (0.2, 0.0)])
    m = Mechanisms.from_items([(p, 0.0, 10**4)])
    with _memory.limit(2**20) as budget:
        budget.hold(2**20 - 64)
        with pytest.raises(ExactTooLarge):
            lattice_law(compositions(m)[0]).excess_bounds(4.0)
    assert optcomp.epsilon_g([p], counts=[10**4], delta_g=1e-6, method="optimal", max_memory=2**20) > 4.0


# ============================================================================ properties

UNIT = st.sampled_from([Fraction(1, 8), Fraction(1, 16), Fraction(3, 32)])


@st.composite
def profiles(draw):
    """Profiles of 1-3 guarantees, eps multiples (1..8) of a binary unit, delta 0 or 10^-2..-300."""
    u = draw(UNIT)
    ns = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True))
    ds = [draw(st.one_of(st.just(0.0), st.floats(-300, -2).map(lambda v: 10.0**v))) for _ in ns]
    return Profile([(float(n * u), d) for n, d in zip(ns, ds)])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles(), st.integers(2, 16), st.floats(0.0, 1.0), st.floats(-300.0, -0.5))
def test_property_against_definitions(prof, k, frac, log_t):
    items = [(prof, k)]
    _, law = ref_composed(items)
    top = float(max(law))
    check_excess(items, frac * top)
    check_root(items, 10.0**log_t)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles(), st.integers(2, 40), st.floats(0.0, 1.0), st.floats(-300.0, -0.5))
def test_property_against_definitions_more(prof, k, frac, log_t):
    test_property_against_definitions.hypothesis.inner_test(prof, k, frac, log_t)
