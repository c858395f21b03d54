"""Tests of optcomp.calibrate: per-query budgets under a global (eps_g, delta_g).

Every answer is checked through the public API it inverts: the composition it certifies
must fit the budget, and a slightly larger per-query eps must not.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import _search, calibrate

METHODS = ("basic", "drv", "kov", "advanced_pure", "optimal")
CASES = [(1, 1.0, 1e-6), (10, 1.0, 1e-6), (100, 1.0, 1e-6), (1000, 0.5, 2.0**-25), (10_000, 2.0, 1e-9),
         (50, 0.1, 1e-3)]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k, eps_g, delta_g", CASES)
def test_calibrated_eps_meets_the_budget_and_is_the_largest(method, k, eps_g, delta_g):
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
    assert eps > 0
    assert optcomp.epsilon_g(eps, k=k, delta_g=delta_g, method=method) <= eps_g
    assert optcomp.epsilon_g(eps * (1 + 1e-9), k=k, delta_g=delta_g, method=method) > eps_g


@pytest.mark.parametrize("k, eps_g, delta_g", CASES)
def test_optimal_allows_the_largest_per_query_eps(k, eps_g, delta_g):
    got = {m: calibrate.per_query_epsilon(k, eps_g, delta_g, method=m) for m in METHODS}
    for m in METHODS:
        assert got["optimal"] >= got[m] * (1 - 1e-12), m
    if k >= 100:  # where composition theorems matter, optimal is strictly better than all
        assert all(got["optimal"] > 1.05 * got[m] for m in ("basic", "drv", "kov"))


def test_basic_composition_splits_evenly():
    for k, eps_g in [(1, 1.0), (7, 0.3), (1000, 2.5)]:
        eps = calibrate.per_query_epsilon(k, eps_g, 1e-6, method="basic")
        assert eps == pytest.approx(eps_g / k, rel=1e-14)


def test_single_query_with_slack_in_delta_gets_more_than_eps_g():
    """k = 1, delta_g > 0: the optimal eps_g of one (eps, 0)-DP mechanism is below eps, so the
    per-query eps may exceed the global eps_g (a randomized response with eps slightly above
    eps_g is (eps_g, delta_g)-DP)."""
    eps = calibrate.per_query_epsilon(1, 1.0, 1e-3)
    assert eps > 1.0
    assert optcomp.delta_g(eps, k=1, eps_g=1.0) <= 1e-3


def test_infeasible_budget_gives_zero_eps_and_no_noise_level():
    # 10 queries each with delta = 1e-6 cannot fit delta_g = 1e-6 (basic needs k delta <= delta_g)
    assert calibrate.per_query_epsilon(10, 1.0, 1e-6, delta=1e-6, method="basic") == 0.0
    # the optimal theorem needs 1 - (1 - delta)^k <= delta_g
    assert calibrate.per_query_epsilon(10, 1.0, 1e-6, delta=1e-6, method="optimal") == 0.0
    # a zero global eps with delta_g = 0 allows only eps = 0: no finite noise suffices
    assert calibrate.per_query_epsilon(5, 0.0, 0.0) == 0.0
    with pytest.raises(ValueError, match="no finite, nonzero Laplace scale"):
        calibrate.laplace_scale(5, 0.0, 0.0)
    with pytest.raises(ValueError, match="drv"):  # DRV certifies nothing at delta_g = 0
        calibrate.laplace_scale(5, 1.0, 0.0, method="drv")
    rows = calibrate.noise_table(5, 1.0, 0.0, methods=("drv", "optimal"))
    assert rows[0].eps == 0.0 and rows[0].laplace_scale is None and rows[0].vs_optimal is None
    assert 0 < rows[1].laplace_scale < math.inf


def test_approximate_dp_queries():
    k, eps_g, delta_g, delta = 20, 1.0, 1e-5, 1e-7
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, delta=delta)
    assert optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g) <= eps_g
    assert optcomp.epsilon_g(eps * (1 + 1e-9), delta, k=k, delta_g=delta_g) > eps_g


def test_laplace_scale_is_sensitivity_over_eps():
    eps = calibrate.per_query_epsilon(100, 1.0, 1e-6)
    assert calibrate.laplace_scale(100, 1.0, 1e-6) == 1.0 / eps
    assert calibrate.laplace_scale(100, 1.0, 1e-6, sensitivity=3.0) == 3.0 / eps
    assert calibrate.laplace_scale(100, 1.0, 1e-6, method="basic") == pytest.approx(100.0, rel=1e-14)
    with pytest.raises(ValueError, match="sensitivity"):
        calibrate.laplace_scale(10, 1.0, 1e-6, sensitivity=0)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 5000), eps_g=st.floats(0.05, 5.0), delta_g=st.sampled_from([1e-10, 1e-6, 1e-3]),
       method=st.sampled_from(["drv", "kov", "optimal"]))
def test_more_queries_or_less_budget_means_less_per_query(k, eps_g, delta_g, method):
    e = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
    assert calibrate.per_query_epsilon(k + 1, eps_g, delta_g, method=method) <= e
    assert calibrate.per_query_epsilon(k, eps_g * 0.9, delta_g, method=method) <= e
    assert calibrate.per_query_epsilon(k, eps_g, delta_g / 10, method=method) <= e


def test_split_budget_heterogeneous_weights():
    w = np.array([1.0, 2.0, 5.0, 5.0, 10.0])
    eps = calibrate.split_budget(w, 1.0, 1e-6)
    assert np.allclose(eps / w, eps[0] / w[0], rtol=1e-15)  # proportional to the weights
    assert optcomp.epsilon_g(eps, delta_g=1e-6) <= 1.0
    assert optcomp.epsilon_g(eps * (1 + 1e-9), delta_g=1e-6) > 1.0
    # equal weights reduce to the homogeneous answer
    same = calibrate.split_budget(np.ones(30), 1.0, 1e-6)
    assert same[0] == pytest.approx(calibrate.per_query_epsilon(30, 1.0, 1e-6), rel=1e-12)


def test_largest_passing_finds_the_boundary_to_the_last_bit():
    x = calibrate.largest_passing(lambda v: v <= 3.7, 1.0)
    assert x == 3.7
    assert calibrate.largest_passing(lambda v: v <= 1e-200, 1.0) == 1e-200
    assert calibrate.largest_passing(lambda v: False, 1.0) == 0.0
    assert calibrate.largest_passing(lambda v: True, 1.0) == sys.float_info.max  # never inf


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="k"):
        calibrate.per_query_epsilon(0, 1.0, 1e-6)
    with pytest.raises(ValueError, match="eps_g"):
        calibrate.per_query_epsilon(10, -1.0, 1e-6)
    with pytest.raises(ValueError, match="delta_g"):
        calibrate.per_query_epsilon(10, 1.0, 1.5)
    with pytest.raises(ValueError, match="method"):
        calibrate.per_query_epsilon(10, 1.0, 1e-6, method="nope")
    with pytest.raises(ValueError, match="weights"):
        calibrate.split_budget([1.0, -2.0], 1.0, 1e-6)


# ---------------------------------------------------------------------------------------
# certified against an independent evaluation (mpmath, the theorems' formulas written here)

mp = pytest.importorskip("mpmath")
mp.mp.dps = 60


def _optimal_delta(eps: float, k: int, eps_g: float):
    """MV Thm 1.4 / KOV Thm 3.3 for k (eps, 0)-DP mechanisms, exactly (60 digits):
    delta(eps_g) = sum_i C(k, i) max(0, e^{(k-i) eps} - e^{eps_g + i eps}) / (1 + e^eps)^k."""
    e, x = mp.mpf(eps), mp.mpf(eps_g)
    terms = [mp.binomial(k, i) * (mp.exp((k - i) * e) - mp.exp(x + i * e)) for i in range(k + 1)]
    return mp.fsum(t for t in terms if t > 0) / (1 + mp.exp(e)) ** k


def _closed_form_eps_g(method: str, eps: float, k: int, delta_g: float):
    """eps_g of k (eps, 0)-DP mechanisms: MV Thm 1.2, 1.3 (DRV) and 6.1 (KOV Thm 3.4), exactly."""
    e, d = mp.mpf(eps), mp.mpf(delta_g)
    if method == "basic":
        return k * e
    if method == "drv":
        return mp.sqrt(2 * k * mp.log(1 / d)) * e + k * e * (mp.exp(e) - 1)
    mean = k * e * mp.tanh(e / 2)
    return min(k * e, mean + e * mp.sqrt(2 * k * mp.log(mp.e + mp.sqrt(k * e * e) / d)),
               mean + e * mp.sqrt(2 * k * mp.log(1 / d)))


@pytest.mark.parametrize("k, eps_g, delta_g", [(1, 1.0, 1e-6), (10, 1.0, 1e-6), (100, 1.0, 1e-6),
                                                (1000, 0.5, 2.0**-25), (50, 0.1, 1e-3)])
def test_optimal_split_is_certified_by_an_independent_evaluation(k, eps_g, delta_g):
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g)
    assert _optimal_delta(eps, k, eps_g) <= delta_g  # the split fits the budget, exactly
    assert _optimal_delta(eps * (1 + 1e-9), k, eps_g) > delta_g  # and is the largest that does


@pytest.mark.parametrize("method", ["basic", "drv", "kov"])
@pytest.mark.parametrize("k, eps_g, delta_g", [(10, 1.0, 1e-6), (1000, 0.5, 2.0**-25), (10_000, 2.0, 1e-9)])
def test_closed_form_split_is_certified_by_an_independent_evaluation(method, k, eps_g, delta_g):
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
    assert _closed_form_eps_g(method, eps, k, delta_g) <= eps_g
    assert _closed_form_eps_g(method, eps * (1 + 1e-9), k, delta_g) > eps_g


def test_weighted_split_is_certified_by_an_independent_evaluation():
    """Weights 1 and 3 in equal numbers: the (exact) optimal delta of the grouped split,
    computed here by convolving the two binomial loss distributions (MV Thm 1.5)."""
    n, eps_g, delta_g = 20, 2.0, 1e-6
    c = calibrate.largest_scale([1.0, 3.0], eps_g, delta_g, counts=[n, n])

    def delta(scale):
        a, b = mp.mpf(c if scale is None else scale), 3 * mp.mpf(c if scale is None else scale)
        pa, pb = mp.exp(a) / (1 + mp.exp(a)), mp.exp(b) / (1 + mp.exp(b))
        total = mp.mpf(0)
        for i in range(n + 1):  # i mechanisms of eps a output the "+" outcome
            for j in range(n + 1):
                loss = (2 * i - n) * a + (2 * j - n) * b
                if loss > eps_g:
                    p0 = mp.binomial(n, i) * pa**i * (1 - pa) ** (n - i) * mp.binomial(n, j) * pb**j * (1 - pb) ** (n - j)
                    total += p0 * (1 - mp.exp(eps_g - loss))
        return total

    assert delta(c) <= delta_g
    assert delta(c * (1 + 1e-9)) > delta_g
    assert np.array_equal(calibrate.split_budget([1.0] * n + [3.0] * n, eps_g, delta_g), c * np.array([1.0] * n + [3.0] * n))


def test_weights_are_one_multiset_however_they_are_written():
    """Equal (weight, delta) pairs are grouped into the library's multiset (optcomp._inputs),
    with or without counts and in any order: the same certified scale every way, and the
    basic composition answer eps_g / sum(c_i w_i) (rounded down at most a few ulps)."""
    eps_g, delta_g = 1.0, 1e-6
    ways = [dict(weights=[1.0, 3.0, 1.0, 3.0, 3.0]), dict(weights=[3.0, 1.0], counts=[3, 2]),
            dict(weights=[1.0, 3.0, 3.0], counts=[2, 1, 2]), dict(weights=[3.0, 1.0, 1.0], counts=[3, 1, 1])]
    for method in ("basic", "kov", "optimal"):
        scales = {calibrate.largest_scale(eps_g=eps_g, delta_g=delta_g, method=method, **w) for w in ways}
        assert len(scales) == 1, (method, scales)
    c = calibrate.largest_scale([3.0, 1.0], eps_g, delta_g, counts=[3, 2], method="basic")
    assert 1.0 / 11.0 * (1 - 1e-15) <= c <= 1.0 / 11.0


_EPS = st.floats(1e-300, 1e300) | st.sampled_from([1.0, 1.0 + 2**-52, 3.0, 5e-324, 1e308])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_EPS, st.sampled_from([0.0, 1e-6, 1e-300]), st.integers(1, 10**6)), min_size=1, max_size=6),
       st.floats(0.0, 1e300) | st.sampled_from([0.0, 1.0 - 2**-53, 5e-324, 1e10]))
def test_a_rescaled_multiset_is_the_multiset_of_the_rescaled_pairs(items, c):
    """The searches rescale the validated multiset (``Mechanisms.scaled``) instead of
    validating ``c * weights`` anew: the same multiset the public functions read from
    ``(c * eps, delta, counts)`` -- products that round together merged, overflow refused."""
    from optcomp._inputs import mechanisms

    e, d, n = (list(x) for x in zip(*items))
    m = mechanisms(e, d, counts=n)
    with np.errstate(over="ignore"):
        products = np.asarray(e) * c
    got = m.scaled(c)
    if not np.all(np.isfinite(products)):
        assert got is None
        return
    want = mechanisms(products, d, counts=n)
    assert got == want and got.k == want.k
    assert got.eps.tolist() == want.eps.tolist() and got.delta.tolist() == want.delta.tolist()
    assert not got.eps.flags.writeable


def test_kov_recipe_is_corollary_4_1_and_certified():
    k, eps_g, delta_g = 100, 0.5, 1e-6
    r = calibrate.kov_recipe(k, eps_g, delta_g, sensitivity=2.0)
    exact = mp.sqrt(mp.mpf(eps_g) ** 2 / (4 * k * mp.log(mp.e + mp.mpf(eps_g) / mp.mpf(delta_g))))
    assert r.eps <= exact and r.eps == pytest.approx(float(exact), rel=1e-14)
    assert r.delta == delta_g / (2 * k)
    # KOV Thm 4.2: variance 8 k sensitivity^2 log(e + eps/delta) / eps^2
    assert 2 * r.laplace_scale**2 == pytest.approx(8 * k * 4.0 * math.log(math.e + eps_g / delta_g) / eps_g**2, rel=1e-12)
    assert r.laplace_std == pytest.approx(math.sqrt(2) * r.laplace_scale, rel=1e-15)
    # the corollary's guarantee, checked with the exact theorem (and the optimum does better)
    assert optcomp.epsilon_g(r.eps, r.delta, k=k, delta_g=delta_g) <= eps_g
    assert r.eps < calibrate.per_query_epsilon(k, eps_g, delta_g)
    for bad in [dict(eps_g=1.0), dict(eps_g=0.0), dict(delta_g=0.0)]:
        args = dict(k=k, eps_g=eps_g, delta_g=delta_g) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            calibrate.kov_recipe(**args)


def test_noise_table_what_tighter_accounting_buys():
    rows = calibrate.noise_table(1000, 0.5, 1e-6, sensitivity=3.0)
    by = {r.method: r for r in rows}
    assert list(by) == ["basic", "drv", "kov", "optimal", "kov_cor4.1"]
    assert by["optimal"].vs_optimal == 1.0
    # noise: basic > DRV > KOV > optimal (the ordering MV Figure 2 shows for eps_g)
    assert by["basic"].laplace_scale > by["drv"].laplace_scale > by["kov"].laplace_scale > by["optimal"].laplace_scale
    for r in rows:
        assert r.laplace_scale == 3.0 / r.eps and r.laplace_std == math.sqrt(2.0) * r.laplace_scale
        assert r.theorem
    # eps_g above Cor. 4.1's range: no recipe row
    assert [r.method for r in calibrate.noise_table(10, 1.0, 1e-6)] == list(calibrate.TABLE_METHODS)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 10_000), eps_g=st.floats(1e-6, 1e3), delta_g=st.sampled_from([0.0, 1e-12, 1e-6, 0.1]),
       method=st.sampled_from(["basic", "kov", "optimal"]))
def test_finite_budget_never_gives_infinite_or_zero_noise(k, eps_g, delta_g, method):
    scale = calibrate.laplace_scale(k, eps_g, delta_g, method=method)
    assert 0.0 < scale < math.inf


def test_huge_budget_gives_a_finite_eps():
    eps = calibrate.per_query_epsilon(1, 1e308, 1e-6, method="basic")
    assert math.isfinite(eps) and eps >= 1e308 * (1 - 1e-15)
    assert 0.0 < calibrate.laplace_scale(1, 1e308, 1e-6, method="basic") < math.inf


def test_more_bad_input():
    with pytest.raises(TypeError, match="sensitivity"):
        calibrate.laplace_scale(10, 1.0, 1e-6, sensitivity="1")
    with pytest.raises(ValueError, match="weights"):
        calibrate.largest_scale([], 1.0, 1e-6)
    with pytest.raises(TypeError, match="weights"):
        calibrate.largest_scale("1,2", 1.0, 1e-6)
    with pytest.raises(ValueError, match="counts"):
        calibrate.largest_scale([1.0, 2.0], 1.0, 1e-6, counts=[1])
    with pytest.raises(ValueError, match=r"counts\[0\] must be an integer"):
        calibrate.largest_scale([1.0], 1.0, 1e-6, counts=[0])
    with pytest.raises(ValueError, match=r"counts\[1\] must be an integer"):
        calibrate.largest_scale([1.0, 2.0], 1.0, 1e-6, counts=[1, 2.5])
    assert calibrate.largest_scale([1.0, 2.0], 1.0, 1e-6, counts=[3.0, 2]) == \
        calibrate.largest_scale([1.0, 2.0], 1.0, 1e-6, counts=[3, 2])  # integral floats, as k=
    with pytest.raises(ValueError, match="k must be"):
        calibrate.noise_table(0, 1.0, 1e-6)
    with pytest.raises(ValueError, match="method"):
        calibrate.noise_table(10, 1.0, 1e-6, methods=("nope",))


# ---------------------------------------------------------------- the search (issue 16, item 5)


def _bisection_reference(value, target, start):
    """The previous algorithm: bisection on the predicate, to adjacent floats."""
    return calibrate.largest_passing(lambda x: value(x) <= target, start)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1e-6, 1e6), b=st.floats(0.3, 3.0), c=st.floats(0.0, 1.0), target=st.floats(1e-3, 1e3),
       start=st.floats(1e-12, 1e12), step=st.sampled_from([None, 1e-3, 0.25]))
def test_search_finds_the_bisection_answer(a, b, c, target, start, step):
    """On monotone functions (smooth, or staircases where secant steps are useless) the
    secant search returns exactly what bisection to adjacent floats returns."""
    def value(x):
        log_v = math.log(a) + b * math.log(x) if x > 0 else -math.inf
        v = c + math.exp(log_v) if log_v < 700 else math.inf
        return v if step is None or v == math.inf else math.ceil(v / step) * step

    got = _search._largest_below(value, target, start)
    want = _bisection_reference(value, target, start)
    if value(0.0) > target:
        assert got is None and want == 0.0
    else:
        assert got == want
        assert value(got) <= target
        assert got == sys.float_info.max or value(math.nextafter(got, math.inf)) > target


def test_search_edge_cases():
    inf = math.inf
    assert _search._largest_below(lambda x: x, 0.0, 1.0) == 0.0  # only 0 passes
    assert _search._largest_below(lambda x: 1.0 + x, 0.5, 1.0) is None  # nothing passes
    assert _search._largest_below(lambda x: 0.0, 1.0, 1.0) == sys.float_info.max  # everything passes
    assert _search._largest_below(lambda x: 0.0 if x <= 1e-300 else inf, 1.0, 1.0) == 1e-300
    assert _search._largest_below(lambda x: 0.0 if x < 1e300 else 2.0, 1.0, 1e-300) == math.nextafter(1e300, 0)
    assert _search._largest_below(lambda x: 5e-324 * (x > 0), 0.0, 1.0) == 0.0
    x = _search._largest_below(lambda x: 10 * x, 1.0, 1.0, rtol=1e-6)  # rtol stops early
    assert 10 * x <= 1.0 and x > 0.1 * (1 - 1e-6)


def test_search_tolerates_a_noisy_value():
    """A value non-monotone at the ulp level (as float evaluations of a bound are): the
    answer still passed, and its next float up still failed."""
    rng = np.random.default_rng(1)
    seen = {}

    def value(x):
        if x not in seen:
            seen[x] = 3.0 * x * (1 + 4e-16 * rng.standard_normal())
        return seen[x]

    got = _search._largest_below(value, 1.0, 0.01)
    assert value(got) <= 1.0 < value(math.nextafter(got, 1.0))
    assert got == pytest.approx(1 / 3, rel=1e-14)


@pytest.mark.parametrize("k, eps_g, delta_g", [(10**9, 1.0, 1e-6), (10**6, 0.5, 1e-10), (100, 1.0, 1e-6)])
def test_optimal_split_takes_few_evaluations(k, eps_g, delta_g):
    """Regula falsi from the KOV answer: at most 15 exact evaluations (bisection took ~70;
    at k = 10^12 that was 41-71 s), with the same certified answer to the last bit."""
    seen = []
    eps = calibrate.per_query_epsilon(k, eps_g, delta_g, progress=seen.append)
    assert 0 < len(seen) <= 15
    assert [s["stage"].split(" (")[0] for s in seen] == ["per-query eps under auto"] * len(seen)
    assert optcomp.epsilon_g(eps, k=k, delta_g=delta_g) <= eps_g
    assert optcomp.epsilon_g(math.nextafter(eps, 1.0), k=k, delta_g=delta_g) > eps_g


@pytest.mark.slow
def test_optimal_split_at_10_to_the_12():
    eps = calibrate.per_query_epsilon(10**12, 1.0, 1e-6)
    assert optcomp.epsilon_g(eps, k=10**12, delta_g=1e-6) <= 1.0
    assert optcomp.epsilon_g(math.nextafter(eps, 1.0), k=10**12, delta_g=1e-6) > 1.0


def test_progress_true_writes_one_status_line_after_the_delay(monkeypatch, capsys):
    calibrate.per_query_epsilon(1000, 1.0, 1e-6, progress=True)  # short: silent
    assert capsys.readouterr().err == ""
    monkeypatch.setattr("optcomp._progress.DELAY", 0.0)  # the module that reads it
    calibrate.per_query_epsilon(1000, 1.0, 1e-6, progress=True)
    err = capsys.readouterr().err
    assert "per-query eps under auto" in err and err.endswith("\n") and err.count("\n") == 1
    with pytest.raises(ValueError, match="progress"):
        calibrate.per_query_epsilon(1000, 1.0, 1e-6, progress="yes")


def test_weighted_split_and_noise_table_use_the_search():
    seen = []
    c = calibrate.largest_scale([1.0, 3.0], 2.0, 1e-6, counts=[300, 300], progress=seen.append)
    assert 0 < len(seen) <= 15
    assert optcomp.epsilon_g([c, 3 * c], counts=[300, 300], delta_g=1e-6) <= 2.0
    assert optcomp.epsilon_g([math.nextafter(c, 1.0), 3 * math.nextafter(c, 1.0)], counts=[300, 300],
                             delta_g=1e-6) > 2.0
    rows = calibrate.noise_table(10**6, 1.0, 1e-6, progress=seen.append)
    assert {r.method for r in rows} >= set(calibrate.TABLE_METHODS)
