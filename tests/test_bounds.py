"""Tests of the closed-form composition bounds in optcomp.bounds.

References are recomputed here with mpmath at 50 digits straight from the theorem
statements (MV Thms 1.2, 1.3, 6.1; KOV Thms 3.4, 3.5; Steinke, Composition Basics); the
delta direction is obtained by bisection on the eps formula, not by the closed-form
inversion used in the library.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import bounds
from optcomp._inputs import mechanisms

mp.mp.dps = 50

METHODS = ("basic", "drv", "kov", "advanced_pure")
EPS_FN = {
    "basic": bounds.basic_epsilon,
    "drv": bounds.drv_epsilon,
    "kov": bounds.kov_epsilon,
    "advanced_pure": bounds.advanced_pure_epsilon,
}
DELTA_FN = {
    "basic": bounds.basic_delta,
    "drv": bounds.drv_delta,
    "kov": bounds.kov_delta,
    "advanced_pure": bounds.advanced_pure_delta,
}


# ---------------------------------------------------------------------------------------
# mpmath references, from the papers' statements


def _mp(x) -> mp.mpf:
    return mp.mpf(float(x))  # the exact binary value of the float


class Case:
    """k mechanisms; homogeneous cases keep (eps, delta, k) so the reference can use the
    homogeneous statement of the theorem (k * eps etc.) literally."""

    def __init__(self, eps, delta=0.0, k=None):
        self.m = mechanisms(eps, delta, k)
        self.hom = np.ndim(eps) == 0
        self.k = self.m.k
        if self.hom:
            self.e, self.d = _mp(eps), _mp(delta)
        # the multiset, expanded back to one entry per mechanism
        self.eps_list = np.repeat(self.m.eps, self.m.count).tolist()
        self.delta_list = np.repeat(self.m.delta, self.m.count).tolist()
        self.es = [_mp(x) for x in self.eps_list] if not self.hom else None
        self.ds = [_mp(x) for x in self.delta_list] if not self.hom else None

    def __repr__(self):
        if self.hom:
            return f"Case(eps={float(self.e)}, delta={float(self.d)}, k={self.k})"
        return f"Case(eps={self.eps_list}, delta={self.delta_list})"

    def args(self):
        if self.hom:
            return dict(eps=float(self.e), delta=float(self.d), k=self.k)
        return dict(eps=self.eps_list, delta=self.delta_list)

    # sums
    def sum_eps(self):
        return self.k * self.e if self.hom else mp.fsum(self.es)

    def sum_delta(self):
        return self.k * self.d if self.hom else mp.fsum(self.ds)

    def sum_sq(self):
        return self.k * self.e**2 if self.hom else mp.fsum(x**2 for x in self.es)

    def prod_no_delta(self):
        return (1 - self.d) ** self.k if self.hom else mp.fprod(1 - x for x in self.ds)

    def one_minus_prod(self):
        log_p = self.k * mp.log1p(-self.d) if self.hom else mp.fsum(mp.log1p(-x) for x in self.ds)
        return -mp.expm1(log_p)


def ref_basic_eps(c: Case, dg):
    """MV Thm 1.2: (k eps, k delta); heterogeneous (sum eps_i, sum delta_i)."""
    return mp.inf if c.sum_delta() > _mp(dg) else c.sum_eps()


def ref_basic_delta(c: Case, eg):
    return min(mp.mpf(1), c.sum_delta()) if c.sum_eps() <= _mp(eg) else mp.mpf(1)


def drv_formula(c: Case, dp):
    """MV Thm 1.3: sqrt(2k ln(1/delta')) eps + k eps (e^eps - 1); heterogeneous
    sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1)."""
    if c.hom:
        return mp.sqrt(2 * c.k * mp.log(1 / dp)) * c.e + c.k * c.e * (mp.exp(c.e) - 1)
    return mp.sqrt(2 * mp.log(1 / dp) * c.sum_sq()) + mp.fsum(x * (mp.exp(x) - 1) for x in c.es)


def pure_formula(c: Case, dp):
    """Steinke: 1/2 sum eps_j^2 + sqrt(2 log(1/delta') sum eps_j^2)."""
    q = c.sum_sq()
    return q / 2 + mp.sqrt(2 * mp.log(1 / dp) * q)


def kov_formula(c: Case, dt):
    """KOV Thm 3.4 (= MV Thm 6.1) homogeneous / KOV Thm 3.5 heterogeneous, at delta~ = dt."""
    if c.hom:
        e, k = c.e, c.k
        frac = (mp.exp(e) - 1) * e * k / (mp.exp(e) + 1)
        terms = [k * e]
        if dt > 0:
            terms += [
                frac + e * mp.sqrt(2 * k * mp.log(mp.e + mp.sqrt(k * e**2) / dt)),
                frac + e * mp.sqrt(2 * k * mp.log(1 / dt)),
            ]
        return min(terms)
    frac = mp.fsum(x * (mp.exp(x) - 1) / (mp.exp(x) + 1) for x in c.es)
    q = c.sum_sq()
    terms = [c.sum_eps()]
    if dt > 0:
        terms += [frac + mp.sqrt(2 * q * mp.log(mp.e + mp.sqrt(q) / dt)), frac + mp.sqrt(2 * q * mp.log(1 / dt))]
    return min(terms)


def ref_additive_eps(formula, c: Case, dg):
    """delta_g = sum delta_i + delta', delta' > 0 (DRV, advanced from pure)."""
    dp = _mp(dg) - c.sum_delta()
    if c.sum_sq() == 0:  # all eps zero: 0 for every delta' > 0, and (0, sum delta)-DP
        return mp.mpf(0) if dp >= 0 else mp.inf
    return formula(c, dp) if dp > 0 else mp.inf


def ref_kov_eps(c: Case, dg):
    t = 1 - (1 - _mp(dg)) / c.prod_no_delta()
    if t < 0:
        return mp.inf
    return kov_formula(c, min(t, mp.mpf(1)))


def least_param(f, eg):
    """Least p in (0, 1] with f(p) <= eg for f non-increasing, by bisection on log p.

    Returns 0 if f(p) <= eg for every p > 0 reached, None if even f(1) > eg."""
    eg = _mp(eg)
    if f(mp.mpf(1)) > eg:
        return None
    lo = mp.mpf(-1)
    while f(mp.exp(lo)) <= eg:
        lo *= 2
        if lo < -(2**22):
            return mp.mpf(0)
    hi = mp.mpf(0)
    for _ in range(230):
        mid = (lo + hi) / 2
        if f(mp.exp(mid)) <= eg:
            hi = mid
        else:
            lo = mid
    return mp.exp(hi)


def ref_additive_delta(formula, c: Case, eg):
    if c.sum_sq() == 0:
        return min(mp.mpf(1), c.sum_delta())
    p = least_param(lambda dp: formula(c, dp), eg)
    return mp.mpf(1) if p is None else min(mp.mpf(1), c.sum_delta() + p)


def ref_kov_delta(c: Case, eg):
    if c.sum_eps() <= _mp(eg):
        p = mp.mpf(0)
    else:
        p = least_param(lambda dt: kov_formula(c, dt), eg)
    if p is None:
        return mp.mpf(1)
    # 1 - (1 - p) P written as (1 - P) + p P, which keeps p < 1e-50 visible at 50 digits
    return min(mp.mpf(1), c.one_minus_prod() + p * c.prod_no_delta())


REF_EPS = {
    "basic": ref_basic_eps,
    "drv": lambda c, dg: ref_additive_eps(drv_formula, c, dg),
    "kov": ref_kov_eps,
    "advanced_pure": lambda c, dg: ref_additive_eps(pure_formula, c, dg),
}
REF_DELTA = {
    "basic": ref_basic_delta,
    "drv": lambda c, eg: ref_additive_delta(drv_formula, c, eg),
    "kov": ref_kov_delta,
    "advanced_pure": lambda c, eg: ref_additive_delta(pure_formula, c, eg),
}


def assert_safe_close(value: float, ref, rtol: float = 1e-12, atol: float = 1e-300):
    """value within rtol of ref and not below it (beyond 1e-15 relative).

    atol only matters for references below the normal float range (a delta_g of 1e-2127
    is returned as a few subnormal units, which is above it, as it must be)."""
    assert not math.isnan(value)
    if ref == mp.inf:
        assert value == math.inf
        return
    assert math.isfinite(value), (value, ref)
    ref = mp.mpf(ref)
    assert mp.mpf(value) >= ref * (1 - mp.mpf("1e-15")), (value, ref)
    assert abs(mp.mpf(value) - ref) <= rtol * abs(ref) + atol, (value, ref, float((value - ref) / ref) if ref else None)


# ---------------------------------------------------------------------------------------
# deterministic cases against the references

CASES = [
    Case(0.1, 0.0, 100),
    Case(0.1, 1e-6, 100),
    Case(0.5, 1e-5, 10),
    Case(1.0, 0.0, 1),
    Case(0.005, 0.0, 1000),
    Case(0.01, 1e-9, 10**6),
    Case(2.0, 1e-4, 7),
    Case([0.1, 0.2, 0.3], [1e-6, 0.0, 1e-7]),
    Case([0.05, 0.5, 1.0, 0.0], 1e-5),
    Case(list(np.linspace(0.01, 1.0, 20)), list(np.linspace(0.0, 1e-4, 20))),
    Case([1e-3] * 5 + [0.7], 0.0),
]
DELTA_GS = [2.0**-25, 1e-10, 1e-5, 1e-3, 0.05, 0.3]
EPS_GS = [0.0, 0.05, 0.5, 1.0, 2.5, 5.0, 12.0, 100.0]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_epsilon_matches_mpmath(method, case):
    for dg in DELTA_GS:
        value = optcomp.epsilon_g(**case.args(), delta_g=dg, method=method)
        assert value == EPS_FN[method](case.m, dg)
        assert_safe_close(value, REF_EPS[method](case, dg))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_delta_matches_mpmath(method, case):
    for eg in EPS_GS:
        value = optcomp.delta_g(**case.args(), eps_g=eg, method=method)
        assert value == DELTA_FN[method](case.m, eg)
        assert 0.0 <= value <= 1.0
        assert_safe_close(value, REF_DELTA[method](case, eg))


def test_kov_corner_t_zero():
    """delta_g = 1 - (1-delta)^k exactly (t = 0): only basic composition's k * eps is valid."""
    m = mechanisms(0.25, 0.5, 2)
    assert bounds.kov_epsilon(m, 0.75) == 0.5
    assert bounds.kov_epsilon(m, math.nextafter(0.75, 0)) == math.inf
    assert bounds.kov_epsilon(m, math.nextafter(0.75, 1)) <= 0.5


def test_math_e_is_below_euler():
    """bounds relies on float(math.e) < e < nextafter(math.e, inf)."""
    assert mp.mpf(math.e) < mp.e < mp.mpf(math.nextafter(math.e, math.inf))


# ---------------------------------------------------------------------------------------
# heterogeneous formulas reduce to the homogeneous theorems on equal inputs


@pytest.mark.parametrize("e,d,k", [(0.1, 0.0, 100), (0.5, 1e-6, 13), (1.5, 1e-4, 40), (0.02, 0.0, 500)])
def test_counts_list_and_k_are_one_multiset(e, d, k):
    """k=, counts= and a list with repeats are the same multiset, so every theorem gives the
    same number; and the general DRV form on equal inputs is MV Thm 1.3 as printed."""
    for method in ("basic", "drv", "kov", "advanced_pure"):
        for dg in DELTA_GS:
            a = optcomp.epsilon_g(e, d, k=k, delta_g=dg, method=method)
            assert optcomp.epsilon_g([e] * k, d, delta_g=dg, method=method) == a
            assert optcomp.epsilon_g([e, 2 * e], d, counts=[k, 0 + 1], delta_g=dg, method=method) >= a
        for eg in EPS_GS:
            a = optcomp.delta_g(e, d, k=k, eps_g=eg, method=method)
            assert optcomp.delta_g([e] * k, [d] * k, eps_g=eg, method=method) == a
    for dg in DELTA_GS:
        assert_safe_close(optcomp.epsilon_g(e, d, k=k, delta_g=dg, method="drv"),
                          ref_additive_eps(drv_formula, Case(e, d, k), dg))


# ---------------------------------------------------------------------------------------
# known values


def test_mv_thm_1_3_by_hand():
    """MV Thm 1.3 at eps = 0.1, k = 100, delta = 0, delta' = 1e-5:
    sqrt(2 * 100 * ln(1e5)) * 0.1 = sqrt(2302.5850929940457) * 0.1 = 4.7985259121880812
    100 * 0.1 * (e^0.1 - 1) = 10 * 0.10517091807564762 = 1.0517091807564762
    total 5.8502350929445575."""
    value = optcomp.epsilon_g(0.1, 0.0, delta_g=1e-5, k=100, method="drv")
    assert value == pytest.approx(5.8502350929445575, rel=1e-14)
    assert value >= 5.850235092944557
    # and back: at that eps_g the least delta' is 1e-5
    assert optcomp.delta_g(0.1, 0.0, eps_g=5.8502350929445575, k=100, method="drv") == pytest.approx(1e-5, rel=1e-12)


def test_basic_by_hand():
    assert optcomp.epsilon_g(0.5, 0.0, delta_g=0.0, k=4, method="basic") == 2.0  # exact, no rounding
    assert optcomp.delta_g(0.5, 0.125, eps_g=2.0, k=4, method="basic") == 0.5
    assert optcomp.delta_g(0.5, 0.125, eps_g=math.nextafter(2.0, 0), k=4, method="basic") == 1.0
    # 10 * float(0.1) = 1.0000000000000000555: the exact sum is above 1.0, so is the result
    assert optcomp.epsilon_g(0.1, k=10, delta_g=0.0, method="basic") == math.nextafter(1.0, 2.0)
    assert optcomp.epsilon_g([0.25, 0.5], [0.25, 0.5], delta_g=0.75, method="basic") == 0.75


def test_steinke_footnote_2():
    """Steinke, footnote 2: eps_j = sqrt(2 rho / k), rho = eps^2 / (4 log(1/delta) + 4 eps)
    gives 1/2 sum eps_j^2 + sqrt(2 log(1/delta) sum eps_j^2) = rho + sqrt(4 rho log(1/delta)) <= eps."""
    for eps, delta, k in [(1.0, 1e-6, 1000), (0.5, 1e-9, 37), (3.0, 1e-3, 5)]:
        rho = eps**2 / (4 * math.log(1 / delta) + 4 * eps)
        ej = math.sqrt(2 * rho / k)
        value = optcomp.epsilon_g(ej, 0.0, delta_g=delta, k=k, method="advanced_pure")
        assert value <= eps * (1 + 1e-12)
        assert value == pytest.approx(rho + math.sqrt(4 * rho * math.log(1 / delta)), rel=1e-12)


def test_mv_figure_2_ordering():
    """MV Fig. 2 setting (delta = 0, delta_g = 2^-25): KOV bound <= DRV, KOV bound <= summing,
    and DRV is worse than summing for small k (MV Sec. 6)."""
    for e in (0.005, 0.05, 0.5):
        for k in (1, 10, 100, 1000):
            kw = dict(eps=e, delta=0.0, k=k, delta_g=2.0**-25)
            kov = optcomp.epsilon_g(**kw, method="kov")
            assert kov <= optcomp.epsilon_g(**kw, method="drv")
            assert kov <= optcomp.epsilon_g(**kw, method="basic")
    kw = dict(eps=0.1, delta=0.0, k=2, delta_g=2.0**-25)
    assert optcomp.epsilon_g(**kw, method="drv") > optcomp.epsilon_g(**kw, method="basic")


# ---------------------------------------------------------------------------------------
# infeasible targets and edge cases


def test_infeasible_targets():
    m = mechanisms([0.1, 0.2], [1e-3, 2e-3])
    # basic: delta_g < sum delta -> inf; equal is fine
    assert bounds.basic_epsilon(m, 2.9e-3) == math.inf
    assert bounds.basic_epsilon(mechanisms([0.1, 0.2], [0.25, 0.5]), 0.75) < math.inf
    # drv / advanced_pure: delta' = delta_g - sum delta must be > 0
    for fn in (bounds.drv_epsilon, bounds.advanced_pure_epsilon):
        assert fn(m, 2.9e-3) == math.inf
        assert fn(mechanisms([0.1, 0.2], [0.25, 0.5]), 0.75) == math.inf
        assert fn(m, 3.1e-3) < math.inf
    # kov: delta_g < 1 - prod(1 - delta) -> inf
    lower = 1 - (1 - 1e-3) * (1 - 2e-3)  # 2.998e-3
    assert bounds.kov_epsilon(m, 2.99e-3) == math.inf
    assert bounds.kov_epsilon(m, 2.9985e-3) == pytest.approx(0.3)
    assert lower < 2.9985e-3
    # delta direction with a tiny eps_g: nothing certified
    for method in METHODS:
        assert optcomp.delta_g([0.1, 0.2], [1e-3, 2e-3], eps_g=1e-9, method=method) == 1.0
        assert optcomp.delta_g(0.3, eps_g=0.0, k=50, method=method) == 1.0


def test_all_eps_zero():
    """(0, delta_i)-DP mechanisms: eps_g = 0 certified as soon as delta_g reaches the
    theorem's delta part; the delta direction returns that delta part."""
    m = mechanisms([0.0, 0.0], [1e-3, 1e-4])
    for method in METHODS:
        assert EPS_FN[method](m, 0.5) == 0.0
        assert EPS_FN[method](m, 1e-4) == math.inf
    for method in ("basic", "drv", "advanced_pure"):
        assert DELTA_FN[method](m, 0.0) == pytest.approx(1.1e-3, rel=1e-15)
    assert bounds.kov_delta(m, 0.0) == pytest.approx(1 - (1 - 1e-3) * (1 - 1e-4), rel=1e-14)
    assert bounds.kov_delta(mechanisms(0.0, 0.0, 5), 0.0) == 0.0
    assert bounds.drv_delta(mechanisms(0.0, 0.0, 5), 0.0) == 0.0


def test_extreme_inputs_no_nan_no_warning():
    """Huge eps (e^eps overflows), huge k, tiny delta_g: inf or 1.0, never NaN or a warning
    (pytest turns optcomp RuntimeWarnings into errors)."""
    for args in [dict(eps=800.0, k=3), dict(eps=[800.0, 0.1]), dict(eps=1e300, k=10**6), dict(eps=[1e300, 1e300])]:
        for method in METHODS:
            for dg in (0.0, 1e-300, 0.5):
                v = optcomp.epsilon_g(**args, delta_g=dg, method=method)
                assert not math.isnan(v) and v > 100
            for eg in (0.0, 1.0, 1e308):
                v = optcomp.delta_g(**args, eps_g=eg, method=method)
                assert 0.0 <= v <= 1.0
    assert optcomp.epsilon_g(800.0, k=3, delta_g=0.5, method="drv") == math.inf
    assert optcomp.delta_g(1e300, k=10**6, eps_g=1e308, method="basic") == 0.0
    # tiny eps: far below any relevant scale but still positive results, no underflow to NaN
    for method in METHODS:
        v = optcomp.epsilon_g([1e-200, 1e-310], delta_g=1e-10, method=method)
        assert 0.0 < v < 1e-150
        assert optcomp.delta_g([1e-200, 1e-310], eps_g=1e-199, method=method) <= 1.0


def test_homogeneous_large_k_is_fast():
    """k = 10**6 identical mechanisms take the O(1) closed forms (the only O(k) work left
    is NumPy's check that the mechanisms are identical)."""
    import time

    m = mechanisms(1e-3, 1e-12, 10**6)
    start = time.perf_counter()
    for method in METHODS:
        for _ in range(10):
            assert math.isfinite(EPS_FN[method](m, 1e-5))
            assert DELTA_FN[method](m, 1001.0) < 1.0
    assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------------------------------
# Hypothesis: inverse directions and monotonicity

eps_val = st.floats(1e-4, 3.0)
delta_val = st.one_of(st.just(0.0), st.floats(1e-12, 1e-3))
# homogeneous: k * delta kept below 1e-2 so that delta_g can exceed the delta part
hom_mech = st.tuples(eps_val, st.one_of(st.just(0.0), st.floats(1e-12, 1e-2)), st.integers(1, 10_000)).map(
    lambda t: (t[0], t[1] / t[2], t[2])
)
het_mech = st.lists(st.tuples(eps_val, delta_val), min_size=1, max_size=15).map(
    lambda pairs: ([p[0] for p in pairs], [p[1] for p in pairs], None)
)
mech_args = st.one_of(hom_mech, het_mech)
delta_g_val = st.floats(-12.0, -0.05).map(lambda x: 10.0**x)
eps_g_val = st.one_of(st.floats(0.0, 5.0), st.floats(0.0, 200.0))


def _mech(args):
    return mechanisms(*args)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=200, deadline=None)
@given(args=mech_args, dg=delta_g_val)
def test_delta_of_epsilon_is_below_delta_g(method, args, dg):
    """delta(eps(delta_g)) <= delta_g (+1e-12 rel).  The slack is taken on the input side:
    the inverse is applied at eps(delta_g) * (1 + 1e-12), which absorbs the ~1e-15
    relative outward rounding of eps.  (delta_g itself can be very sensitive to eps_g:
    d log delta / d eps_g = -r / sum eps_i^2, large when delta_g is tiny or when the mean
    term nearly cancels eps_g; see test_inverse_plain_when_well_conditioned.)"""
    m = _mech(args)
    e = EPS_FN[method](m, dg)
    assume(math.isfinite(e))
    assert DELTA_FN[method](m, e * (1 + 1e-12)) <= dg * (1 + 1e-12)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=200, deadline=None)
@given(args=mech_args, frac=st.floats(0.3, 3.0))
def test_epsilon_of_delta_is_below_eps_g(method, args, frac):
    """eps(delta(eps_g)) <= eps_g (+1e-12 relative) wherever delta(eps_g) < 1.  For KOV
    the inverse is taken at delta(eps_g) * (1 + 1e-12): t = 1 - (1 - delta_g)/prod(1 - delta_i)
    cancels when delta~ << sum delta_i, so a few ulps of delta_g are many of delta~."""
    m = _mech(args)
    # eps_g on the theorem's own scale: its eps at a delta_g a little above the delta part
    scale = EPS_FN[method](m, min(0.9, 2 * float(np.dot(m.count, m.delta)) + 1e-6))
    eg = frac * (scale if math.isfinite(scale) else float(np.dot(m.count, m.eps)))
    d = DELTA_FN[method](m, eg)
    assume(d < 1.0)
    if method == "kov":
        d = min(d * (1 + 1e-12), math.nextafter(1.0, 0.0))
    assert EPS_FN[method](m, d) <= eg * (1 + 1e-12) + 1e-300


@settings(max_examples=200, deadline=None)
@given(
    eps=st.lists(st.floats(1e-4, 0.3), min_size=1, max_size=15),
    dg=st.floats(-8.0, -2.0).map(lambda x: 10.0**x),
)
def test_inverse_plain_when_well_conditioned(eps, dg):
    """With delta_i = 0, eps_i <= 0.3 and delta_g in [1e-8, 1e-2] the spread term
    dominates the mean term, and the round trips hold without input slack, rtol 1e-12."""
    m = mechanisms(eps)
    for method in ("drv", "kov", "advanced_pure"):
        e = EPS_FN[method](m, dg)
        d = DELTA_FN[method](m, e)
        assert d <= dg * (1 + 1e-12)
        assert EPS_FN[method](m, d) <= e * (1 + 1e-12)


def _bump_tol(a, b):
    """a <= b up to the outward rounding (1e-12 relative)."""
    return a <= b * (1 + 1e-12) + 1e-300 or b == math.inf


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=200, deadline=None)
@given(
    args=het_mech,
    data=st.data(),
    h=st.floats(1e-3, 1.0),
    dg=delta_g_val,
    eg=eps_g_val,
)
def test_monotone(method, args, data, h, dg, eg):
    """eps(delta_g) is non-decreasing in every eps_i and delta_i and non-increasing in
    delta_g; delta(eps_g) is non-decreasing in every eps_i and delta_i and non-increasing in eps_g."""
    eps, delta, _ = args
    i = data.draw(st.integers(0, len(eps) - 1))
    m = mechanisms(eps, delta)
    more_eps = list(eps)
    more_eps[i] = eps[i] * (1 + h)
    more_delta = list(delta)
    more_delta[i] = delta[i] + h * 1e-4
    m_eps, m_delta = mechanisms(more_eps, delta), mechanisms(eps, more_delta)
    fe, fd = EPS_FN[method], DELTA_FN[method]
    base_e, base_d = fe(m, dg), fd(m, eg)
    assert _bump_tol(base_e, fe(m_eps, dg))
    assert _bump_tol(base_e, fe(m_delta, dg))
    assert _bump_tol(fe(m, min(dg * (1 + h), 0.99)), base_e)
    assert _bump_tol(base_d, fd(m_eps, eg))
    assert _bump_tol(base_d, fd(m_delta, eg))
    assert _bump_tol(fd(m, eg * (1 + h) + h), base_d)


@settings(max_examples=200, deadline=None)
@given(args=mech_args, dg=delta_g_val)
def test_kov_never_worse_than_basic_or_drv(args, dg):
    """KOV's first term is basic composition and its third term is DRV with the sharper
    mean eps tanh(eps/2) <= eps (e^eps - 1) at a delta~ >= DRV's delta'."""
    m = _mech(args)
    kov = bounds.kov_epsilon(m, dg)
    assert kov <= bounds.basic_epsilon(m, dg) * (1 + 1e-12)
    assert kov <= bounds.drv_epsilon(m, dg) * (1 + 1e-12)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=60, deadline=None)
@given(args=st.one_of(hom_mech, st.lists(st.tuples(eps_val, delta_val), min_size=1, max_size=6).map(
    lambda pairs: ([p[0] for p in pairs], [p[1] for p in pairs], None))), dg=delta_g_val, frac=st.floats(0.0, 3.0))
def test_random_cases_against_mpmath(method, args, dg, frac):
    """Random inputs: never below the 50-digit reference, and within 1e-12 of it for eps;
    for delta within 1e-12 * (1 + a), a = log(1/delta), the conditioning of exp(-a).

    KOV's eps uses t = 1 - (1 - delta_g) / prod(1 - delta_i) from loss.residual_target,
    rounded down with an error of a few ulps of delta_g, i.e. a relative error of order
    1e-15 * delta_g / t in t; when t << delta_g (delta_g just above the delta part) the
    tolerance grows accordingly (eps depends on t through log(1/t), so less than linearly)."""
    eps, delta, k = args
    case = Case(eps, delta, k)
    rtol = 1e-12
    if method == "kov":
        t = 1 - (1 - _mp(dg)) / case.prod_no_delta()
        if t > 0:
            rtol += 4e-15 * float(_mp(dg) / t)
    assert_safe_close(EPS_FN[method](case.m, dg), REF_EPS[method](case, dg), rtol=rtol)
    eg = frac * float(np.dot(case.m.count, case.m.eps))
    value = DELTA_FN[method](case.m, eg)
    ref = REF_DELTA[method](case, eg)
    a = float(-mp.log(ref)) if ref > 0 else 0.0
    assert_safe_close(value, ref, rtol=1e-12 * (1 + a))


def test_a_tie_of_finite_mechanisms_is_decided_exactly():
    """delta_g equal to the optimum's value on a flat stretch: no float approximation decides
    delta(x) <= delta_g there, so the lattice alone answered [0, inf]; the exact finite
    composition decides it (references in rationals, from the definition of the pair)."""
    from fractions import Fraction

    import mpmath

    from optcomp.mechanisms import Pair, Subsampled

    m = Subsampled(Pair((0.1, 0.9), (0.0, 1.0)), 0.5)
    # remove direction ((1-q)Q + qP, Q): P-mass q*p_0 at +inf, the other outcome's loss < 0
    # (a Pair is normalised: 0.1 + 0.9 is 1 + 2^-55 as floats, so p_0 = 0.1/(0.1 + 0.9))
    tie = Fraction(1, 2) * Fraction(0.1) / (Fraction(0.1) + Fraction(0.9))
    assert math.nextafter(0.05, 0.0) < tie < Fraction(0.05)  # between the float 0.05 and the one below
    # add direction (Q, (1-q)Q + qP): delta(0) = 1 - (1/2 + 0.9/2) (normalised: the tie itself)
    assert 1 - (Fraction(1, 2) + Fraction(1, 2) * Fraction(0.9) / (Fraction(0.1) + Fraction(0.9))) <= tie
    assert optcomp.epsilon_bounds(m, k=1, delta_g=0.05) == (0.0, 0.0)
    assert optcomp.epsilon_bounds(m, k=1, delta_g=math.nextafter(0.05, 0.0)) == (math.inf, math.inf)
    # Pair((0.0625, 0.9375), (0, 1)) (floats summing to exactly 1), reversed: delta(x) =
    # 1 - 0.9375 e^x, so eps_g = log((1 - d)/0.9375); forward: the +inf mass 0.0625 <= d
    d = 0.0625 + 2.0**-30
    b = optcomp.epsilon_bounds(Pair((0.0625, 0.9375), (0.0, 1.0)), k=1, delta_g=d, tol=1e-9)
    with mpmath.workdps(60):
        truth = mpmath.log((1 - mpmath.mpf(d)) / mpmath.mpf(0.9375))
    assert b.lower <= 0.0 and truth < 0  # (0 is the least eps_g: the reverse side is met at 0)
    assert b.upper <= 1e-9, (b, truth)
    # and Pair((0.05, 0.95), (0, 1)): 0.05 + 0.95 is 1 - 2^-54.4 as floats, so the normalised
    # +inf mass 0.05/(0.05 + 0.95) exceeds the float 0.05: delta_g = 0.05 is unattainable
    assert Fraction(0.05) / (Fraction(0.05) + Fraction(0.95)) > Fraction(0.05)
    assert optcomp.epsilon_bounds(Pair((0.05, 0.95), (0.0, 1.0)), k=1, delta_g=0.05) == (math.inf, math.inf)
