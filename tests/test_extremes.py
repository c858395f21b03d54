"""Issue 17 item 5 (and issue 16 item 4): the domain's extremes, each a regression test.

Every expected value comes from ``tests/reference.py`` (mpmath, exact rational atom
positions, written from MV Thm 1.5 / KOV Thm 3.3), never from the code under test.  The
checks are the certificate's: a returned delta or eps_g is never below the optimum, a lower
bound never above it.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

import optcomp
import reference as ref


def _args(groups):
    return [g[0] for g in groups], [g[1] for g in groups]


def _counts(groups):
    return [g[2] for g in groups]


def _brackets(b, lo, hi):
    """lower <= optimum <= upper, the optimum within the reference's [lo, hi] (whose ends
    carry the reference's own 1e-40-relative rounding margin)."""
    assert b.lower <= lo, (b, lo)
    assert b.upper >= _below(hi), (b, hi)


def _below(hi):
    """The reference's upper end less its rounding margin (<= 1e-40 relative)."""
    return hi * (1 - mp.mpf("1e-40")) if hi != mp.inf else hi


# ----------------------------------------------------------------- huge eps (the under-report)


def test_huge_eps_delta_is_not_under_reported():
    """delta_g(1e308, 0, k=2, eps_g=0) is 1 (the loss 2e308 lies above every finite eps_g);
    the lattice path returned 0.0 (the commensurable pass overflowed)."""
    groups = [(1e308, 0.0, 2)]
    lo, hi, tight = ref.ref_delta_bounds(groups, 0.0)
    assert tight and lo == 1
    assert optcomp.delta_g(1e308, 0.0, k=2, eps_g=0.0, method="approx") >= _below(hi)
    b = optcomp.delta_bounds(1e308, 0.0, k=2, eps_g=0.0)
    _brackets(b, lo, hi)
    assert b.lower > 0.999


@pytest.mark.parametrize("eps, k", [(1e308, 2), (1e308, 1), (1e200, 100_000), (900.0, 10**6)])
def test_huge_eps_bounds_no_overflow(eps, k):
    """epsilon_bounds / epsilon_g(method="approx") at huge eps: no OverflowError, no
    "zero-size array", and a bracket around the exact top atom k * eps (inf beyond floats)."""
    lo, hi, _ = ref.ref_epsilon_bounds([(eps, 0.0, k)], 1e-6)
    b = optcomp.epsilon_bounds(eps, k=k, delta_g=1e-6)
    _brackets(b, lo, hi)
    assert optcomp.epsilon_g(eps, method="approx", k=k, delta_g=1e-6) >= _below(hi)
    if hi < mp.mpf(1.7976931348623157e308):
        assert b.gap <= 1e-12 * b.upper


def test_huge_eps_at_scale_is_not_an_internal_limit():
    """k = 10^12 mechanisms of eps = 900 (>= BIG_EPS: a deterministic shift): the lattice
    step limit (sum eps / h >= 2^49) must not surface as a user error."""
    lo, hi, _ = ref.ref_epsilon_bounds([(900.0, 1e-300, 10**12)], 1e-30)
    assert optcomp.epsilon_g(900.0, 1e-300, k=10**12, delta_g=1e-30, method="approx") >= _below(hi)
    _brackets(optcomp.epsilon_bounds(900.0, 1e-300, k=10**12, delta_g=1e-30), lo, hi)


@pytest.mark.parametrize("eps_g", [1820.0, 1799.9, 1795.0, 1700.0, 0.0])
def test_big_eps_beside_small_ones_delta(eps_g):
    """Two mechanisms of eps 900 beside 1000 of eps 0.1: the big ones are an exact shift of
    the small ones' loss, on both sides of it (H_s(y) = 1 - e^y + e^y H_s(-y) for y < 0)."""
    groups = [(900.0, 0.0, 2), (0.1, 0.0, 1000)]
    lo, hi, tight = ref.ref_delta_bounds(groups, eps_g)
    assert tight
    b = optcomp.delta_bounds(*_args(groups), counts=_counts(groups), eps_g=eps_g)
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3 * b.upper
    assert optcomp.delta_g(*_args(groups), counts=_counts(groups), eps_g=eps_g, method="approx") >= _below(hi)


def test_big_eps_beside_small_ones_epsilon():
    groups = [(900.0, 0.0, 3), (0.1, 0.0, 1000)]
    lo, hi, tight = ref.ref_epsilon_bounds(groups, 1e-9)
    assert tight
    b = optcomp.epsilon_bounds(*_args(groups), counts=_counts(groups), delta_g=1e-9)
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3


def test_huge_eps_beside_small_ones_epsilon():
    """At 3e200 the reference's 80 digits cannot see the small part; the definition can:
    the optimum is the exact shift 3 fl(1e200) plus the small part's optimum, which lies in
    [0, 1000 * 0.1], and on the float grid the bracket is the shift rounded each way."""
    shift = 3 * ref.Fraction(1e200)
    b = optcomp.epsilon_bounds([1e200, 0.1], [0.0, 0.0], counts=[3, 1000], delta_g=1e-9)
    assert ref.Fraction(b.lower) <= shift < shift + 100 <= ref.Fraction(b.upper)
    assert b.upper == math.nextafter(b.lower, math.inf)


def test_big_eps_beside_a_lattice_of_small_ones():
    """The shifted small part on the commensurable lattice (beyond the exact producers): the
    bracket sits on the shift plus the bracket of the small part alone."""
    eps, delta, counts = [1e200, 0.1, 0.2, 0.3111], [0.0] * 4, [2, 1000, 1000, 1000]
    b = optcomp.epsilon_bounds(eps, delta, counts=counts, delta_g=1e-6)
    small = optcomp.epsilon_bounds(eps[1:], delta[1:], counts=counts[1:], delta_g=1e-6)
    two = 2 * ref.Fraction(1e200)
    assert ref.Fraction(b.lower) <= two + ref.Fraction(small.upper)
    assert ref.Fraction(b.upper) >= two + ref.Fraction(small.lower)
    assert b.lower <= b.upper


# ----------------------------------------------------------------- a target below the float range


def test_underflowed_target_gives_a_valid_lower_bound():
    """t = 1 - (1 - 5e-200)/(1 - 1e-200)^5 ~ 1e-399 underflows: the lower bound was
    102.46 (above the optimum 44.92: invalid) from a segment whose masses all underflowed."""
    groups = [(0.01, 0.0, 10000), (0.5, 1e-200, 5)]
    lo, hi, tight = ref.ref_epsilon_bounds(groups, 5e-200)
    assert tight and abs(float(lo) - 44.922) < 1e-3
    b = optcomp.epsilon_bounds(*_args(groups), counts=_counts(groups), delta_g=5e-200, tol=0.1)
    _brackets(b, lo, hi)
    assert optcomp.epsilon_g(*_args(groups), counts=_counts(groups), delta_g=5e-200) >= _below(hi)
    assert optcomp.epsilon_g(*_args(groups), counts=_counts(groups), delta_g=5e-200, method="approx") >= _below(hi)


@pytest.mark.parametrize("groups", [
    [(0.01, 0.0, 10000), (0.5, 1e-200, 5)],  # meet in the middle (was 102.5, the top atom)
    [(0.02, 0.0, 3000), (0.5, 1e-200, 5)],  # a listed product of binomials
])
def test_underflowed_target_optimal_is_tight(groups):
    """method="optimal" at a target ~1e-399: t 2^1000 settled in mpmath, masses x 2^1000."""
    lo, hi, tight = ref.ref_epsilon_bounds(groups, 5e-200, max_atoms=400_000)
    assert tight and float(hi) < 0.8 * sum(e * c for e, _, c in groups)  # far below the top atom
    got = optcomp.epsilon_g(*_args(groups), counts=_counts(groups), delta_g=5e-200, method="optimal")
    assert got >= _below(hi)
    assert got <= float(hi) * (1 + 1e-12)


def test_segment_without_mass_is_not_a_lower_bound():
    """A lower-bound solve over atoms whose lower masses are all 0 may not stop at the first
    atom (H_lower = 0 <= t already at x = 0)."""
    import numpy as np

    from optcomp.loss import solve_lower

    assert solve_lower(np.array([3.0, 5.0]), np.array([0.0, 0.0]), 1e-300) == 0.0
    assert solve_lower(np.array([3.0, 5.0]), np.array([0.0, 0.5]), 1e-300) >= 3.0


# ----------------------------------------------------------------- Bounds.gap


def test_gap_of_unattainable_budget_is_inf():
    """delta_g below 1 - prod(1 - delta_i): both bounds are inf, the gap inf (was NaN)."""
    lo, hi, _ = ref.ref_epsilon_bounds([(0.1, 0.01, 10)], 0.05)
    assert lo == hi == mp.inf
    b = optcomp.epsilon_bounds(0.1, 0.01, k=10, delta_g=0.05)
    assert b.lower == b.upper == math.inf
    assert b.gap == math.inf
    assert optcomp.lattice.Bounds(0.0, math.inf).gap == math.inf
    assert optcomp.lattice.Bounds(1.0, 2.5).gap == 1.5


# ----------------------------------------------------------------- meet in the middle: effectively exact


def test_mitm_root_far_from_its_first_bracket():
    """5e6 mechanisms of eps 2 beside 20 of eps 0.5 at delta_g = 0.2: the safeguarded Newton of
    meet in the middle lost its secant (charged H at the bracket's top recomputed as
    (H - t) + t, which cancels to 0 when H << t) and stopped 0.5 % (13 sd) above the optimum."""
    groups = [(2.0, 1e-15, 5_000_000), (0.5, 0.0, 20)]
    lo, hi, tight = ref.ref_epsilon_bounds(groups, 0.2, max_atoms=2_000_000)
    assert tight
    got = optcomp.epsilon_g(*_args(groups), counts=_counts(groups), delta_g=0.2, method="optimal")
    assert got >= _below(hi)
    assert got <= float(hi) * (1 + 1e-12)


# tests/reference.py's value (max_atoms=2e7: 967 s here, so recomputed only under -m slow)
REF_4A = "421.00342920293598"


def test_mitm_masses_scaled_at_tiny_delta():
    """delta_g = 1e-300 through meet in the middle: the masses that matter (~1e-300) underflowed
    unscaled, each charged 2.5e-308 of slack, and the root came out 421.01012 against 421.00343;
    the halves are now scaled by 2^s (split between them) as the binomial windows are.  The
    certified lattice (its own producer) must bracket it too."""
    args = ([0.01, 0.05, 0.2], [0.0] * 3)
    counts = [1_000_000, 30, 10]
    got = optcomp.epsilon_g(*args, counts=counts, delta_g=1e-300, method="optimal")
    b = optcomp.epsilon_bounds(*args, counts=counts, delta_g=1e-300, tol=1e-4)
    assert b.lower <= got
    ref_value = mp.mpf(REF_4A)
    assert got >= _below(ref_value)
    assert got <= float(ref_value) * (1 + 1e-12)


@pytest.mark.slow
def test_mitm_masses_scaled_at_tiny_delta_reference():
    lo, hi, tight = ref.ref_epsilon_bounds([(0.01, 0.0, 1_000_000), (0.05, 0.0, 30), (0.2, 0.0, 10)], 1e-300,
                                           max_atoms=20_000_000)
    assert tight and abs(hi - mp.mpf(REF_4A)) <= mp.mpf("1e-13")


@pytest.mark.slow
def test_underflowed_target_large_lower_bound_valid():
    """The issue's larger case: the bracket was [7009.93, 7010.0] around an optimum of
    4080.557 (60-digit audit); the lower end must stay below it (the upper end is the top
    atom: the residual target is below the float range for the lattice)."""
    b = optcomp.epsilon_bounds([0.001, 800.0, 0.05], [0.0, 1e-200, 0.0], counts=[3_000_000, 5, 200],
                               delta_g=5e-200)
    assert b.lower <= 4080.557 <= b.upper


# ----------------------------------------------------------------- tiny eps beside huge ones


@pytest.mark.parametrize("delta_g", [1e-12, 1e-6, 0.5])
def test_tiny_eps_beside_large_ones_is_fast(delta_g):
    """1000 mechanisms of eps 1e-9 beside 50 of eps 20: the tiny ones (sum 1e-6, far below tol)
    are bounded by monotonicity (a lower bound without them, that plus 1e-6 above) instead of
    tilting the lattice by ~1e6 (22-27 s)."""
    import time

    groups = [(1e-9, 0.0, 1000), (20.0, 0.0, 50)]
    lo, hi, tight = ref.ref_epsilon_bounds(groups, delta_g, max_atoms=200_000)
    assert tight
    t0 = time.perf_counter()
    b = optcomp.epsilon_bounds([1e-9] * 1000 + [20.0] * 50, 0.0, delta_g=delta_g)
    assert time.perf_counter() - t0 < 5.0
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3


@pytest.mark.parametrize("eps_g", [999.0, 999.9, 500.0])
def test_tiny_eps_beside_large_ones_delta(eps_g):
    """The delta direction of the same split: H_rest(x) <= H(x) <= H_rest(x - sigma)."""
    groups = [(1e-9, 0.0, 1000), (20.0, 0.0, 50)]
    lo, hi, tight = ref.ref_delta_bounds(groups, eps_g, max_atoms=200_000)
    assert tight
    b = optcomp.delta_bounds(*_args(groups), counts=_counts(groups), eps_g=eps_g)
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3 * b.upper + 1e-300


def test_delta_within_an_ulp_below_the_top_atom():
    """eps_g a few 1e-9 below the top atom of 3e8 mechanisms (Hypothesis find once the
    default method falls back to the lattice): the tilt drove 96 GiB leaves (MemoryError).
    A certified Chernoff bound P0[L > x] <= e^{K(theta) - theta x} below 2^-1000 now answers
    at once; H(x) > 0 below the top atom, so the upper end stays positive."""
    from fractions import Fraction

    eps, counts, x = [1e-08, 0.1, 1.0], [10, 303388285, 166571], 30505399.5000001
    top = sum(Fraction(e) * c for e, c in zip(eps, counts))
    assert Fraction(x) < top  # so the true delta is positive (if astronomically small)
    b = optcomp.delta_bounds(eps, [0.0] * 3, counts=counts, eps_g=x)
    assert 0.0 <= b.lower <= b.upper <= 1e-300
    assert b.upper > 0.0


@pytest.mark.parametrize("eps_g, count", [(1000000000000.9999, 10**10), (10000000000.999998, 10**8)])
def test_nearly_deterministic_groups_delta(eps_g, count):
    """10^10 mechanisms of eps 100 beside one of eps 1, eps_g just below the top atom (slow
    suite find once 'auto' falls back to the lattice: 'lattice step too small for exact
    positions' as a ValueError).  A group with 2 c e^-eps far below the answer is an exact
    shift (its other outcomes charged as slack), as eps >= 800 always was."""
    groups = [(1.0, 0.0, 1), (100.0, 0.0, count)]
    lo, hi, tight = ref.ref_delta_bounds(groups, eps_g)
    assert tight
    b = optcomp.delta_bounds(*_args(groups), counts=_counts(groups), eps_g=eps_g)
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3 * b.upper
    got = optcomp.delta_g(*_args(groups), counts=_counts(groups), eps_g=eps_g)
    assert _below(hi) <= got <= float(hi) * (1 + 1e-3)


@pytest.mark.parametrize("delta_g", [1e-6, 0.3])
def test_nearly_deterministic_groups_epsilon(delta_g):
    groups = [(1.0, 0.0, 1), (100.0, 0.0, 10**10)]
    lo, hi, tight = ref.ref_epsilon_bounds(groups, delta_g)
    assert tight
    b = optcomp.epsilon_bounds(*_args(groups), counts=_counts(groups), delta_g=delta_g)
    _brackets(b, lo, hi)
    assert b.gap <= 1e-3


# ----------------------------------------------------------------- products of binomials: windows of the factors

KINDS_2E7 = [(20.0, 0.0, 10**7), (30.0, 0.0, 10**7)]


@pytest.mark.parametrize("groups, delta_g", [
    (KINDS_2E7, 1e-9),  # the case: the optimum is within 1.1e-9 of the top atom
    (KINDS_2E7, 1e-3),
    (KINDS_2E7, 0.5),
    (KINDS_2E7, 0.99),  # below the second atom (one eps-20 mechanism at -20)
    ([(20.0, 0.0, 10**5), (30.0, 0.0, 10**5)], 0.5),
    ([(2.0, 0.0, 10**4), (3.0, 1e-12, 10**3)], 1e-7),  # windows in the bulk (sd 32 and 7)
    ([(2.0, 0.0, 10**4), (3.0, 1e-12, 10**3)], 0.3),
])
def test_product_of_binomials_windowed_epsilon(groups, delta_g):
    """10^7 mechanisms of eps 20 beside 10^7 of eps 30, method="optimal", met (10^7 + 1)^2
    atoms in the middle (47 s).  Only a window of each binomial matters (n - M is
    ~Poisson(0.02) and ~Poisson(1e-6)): the factors are windowed, every outside mass
    charged, and the answer stays effectively exact against the reference, inside the
    certified bracket of epsilon_bounds -- which lists the same windows before any lattice
    (at delta_g = 0.99 it raised ApproxTooCostly: the lattice needed 9.6e6 points)."""
    lo, hi, tight = ref.ref_epsilon_bounds(groups, delta_g, max_atoms=200_000)
    assert tight
    got = optcomp.epsilon_g(*_args(groups), counts=_counts(groups), delta_g=delta_g, method="optimal")
    assert _below(hi) <= got <= float(hi) * (1 + 1e-12)
    b = optcomp.epsilon_bounds(*_args(groups), counts=_counts(groups), delta_g=delta_g)
    _brackets(b, lo, hi)
    assert b.lower <= got


def test_product_of_binomials_windowed_is_listed():
    """The issue's case is a listed product of a few dozen atoms (not 10^7 x 10^7 met in the
    middle): the windows of the two factors at t = 1e-9."""
    from optcomp import optimal as opt
    from optcomp._inputs import mechanisms

    m = mechanisms([20.0, 30.0], [0.0, 0.0], counts=[10**7, 10**7])
    kind, groups, _, _ = opt._exact_solver(m, opt.MAX_ATOMS, math.log(1e-9))
    assert kind == "full"
    assert opt._atom_count(groups) <= 256
    # the windows hold the top atoms (where the root lies) and end at M = n
    assert all(g[1] == 10**7 and g[3] == 10**7 and g[2] < 10**7 - 3 for g in groups)


@pytest.mark.parametrize("groups, eps_g", [
    (KINDS_2E7, 499999999.9989787),  # H ~ 1e-3, within 1e-3 of the top atom
    (KINDS_2E7, 499999999.0),
    (KINDS_2E7, 499999959.0),
    (KINDS_2E7, 499999900.0),
    ([(2.0, 0.0, 10**4), (3.0, 1e-12, 10**3)], 18500.0),
    ([(0.5, 0.0, 400), (1.0, 0.0, 150)], 300.0),  # H ~ 1e-49: windows aimed by the Chernoff estimate
    ([(0.5, 0.0, 400), (1.0, 0.0, 150)], 345.0),  # H ~ 1e-95
])
def test_product_of_binomials_windowed_delta(groups, eps_g):
    """The delta direction: windows aimed at the Chernoff estimate of H(eps_g), checked
    against the H found (at most 2^-50 of it outside)."""
    lo, hi, tight = ref.ref_delta_bounds(groups, eps_g, max_atoms=200_000)
    assert tight
    got = optcomp.delta_g(*_args(groups), counts=_counts(groups), eps_g=eps_g, method="optimal")
    assert _below(hi) <= got <= float(hi) * (1 + 1e-12)
