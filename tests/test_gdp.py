"""optcomp.gdp: the certified closed form of composed Gaussian mechanisms (mu-GDP).

The references never call the module under test: the privacy profile is written here from
its formula, delta(eps) = Φ(mu/2 − eps/mu) − e^eps Φ(−mu/2 − eps/mu), and evaluated in
mpmath at 60 digits (the cancellation of the two terms costs at most ~16 digits on the
domain drawn here); mu from the definition mu² = Σ c Δ²/σ², also at 60 digits; the
composition theorem itself is checked by numerical integration of one Gaussian's profile
against the other's privacy-loss density.  eps_g brackets are checked through delta:
delta is strictly decreasing in eps, so eps_g ∈ [lower, upper] exactly when
delta(lower) ≥ delta_g ≥ delta(upper)."""

from __future__ import annotations

import ast
import doctest
import math
from pathlib import Path

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp import gdp
from optcomp.gdp import delta_bounds, epsilon_bounds, mu_bounds
from optcomp.mechanisms import Gaussian

NORMAL = 2.2250738585072014e-308  # smallest normal float
REL = 1e-12  # the target gap


def ref_delta(mu, eps):
    """delta(eps) of mu-GDP at 60 digits, from the formula (mu, eps exact: floats or mpf)."""
    with mpmath.workdps(60):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        return mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m)


def ref_mu(sigmas, sens, counts):
    with mpmath.workdps(60):
        return mpmath.sqrt(mpmath.fsum(c * (mpmath.mpf(d) / mpmath.mpf(s)) ** 2
                                       for s, d, c in zip(sigmas, sens, counts)))


def ref_eps(mu, delta_g):
    """eps_g at 60 digits: the root of log delta(e) = log delta_g (Anderson's method on a
    bracket; delta decreasing)."""
    with mpmath.workdps(60):
        t = mpmath.log(mpmath.mpf(delta_g))
        hi = mpmath.mpf(mu) ** 2 / 2 + mu * mpmath.sqrt(2 * -t)
        return mpmath.findroot(lambda e: mpmath.log(ref_delta(mu, e)) - t, (mpmath.mpf(0), hi), solver="anderson")


def _contains(b, truth):
    return mpmath.mpf(b.lower) <= truth <= mpmath.mpf(b.upper)


def _gap_ok(b, truth):
    """Gap ≤ 1e-12 relative where the truth is a normal float, the float floor below."""
    if truth >= NORMAL:
        return b.upper - b.lower <= REL * float(truth)
    return b.upper <= 2 * 5e-324 + float(truth) * (1 + REL)


# ------------------------------------------------------------------------------------------
# the references themselves

@pytest.mark.parametrize("mu, eps", [(0.5, 0.0), (1.0, 1.0), (3.0, 7.5)])
def test_reference_profile_is_the_hockey_stick_of_the_loss(mu, eps):
    """ref_delta equals E[(1 − e^{eps − L})_+] with L ~ N(mu²/2, mu²), integrated."""
    with mpmath.workdps(30):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        f = lambda l: mpmath.npdf(l, m * m / 2, m) * -mpmath.expm1(e - l)
        q = mpmath.quad(f, [e, e + 1, m * m / 2 + 2 * m, mpmath.inf])
        assert abs(q - ref_delta(mu, eps)) <= mpmath.mpf(10) ** -25 * q


@pytest.mark.parametrize("mu1, mu2, eps", [(1.0, 0.5, 0.7), (0.3, 2.0, 2.0), (1.5, 1.5, 0.0)])
def test_composition_theorem(mu1, mu2, eps):
    """Two Gaussian mechanisms compose to one with mu² = mu1² + mu2² (Dong–Roth–Su Cor.
    3.3): the composed profile E[delta_2(eps − L_1)] over L_1 ~ N(mu1²/2, mu1²), integrated,
    is inside delta_bounds at mu = sqrt(mu1² + mu2²)."""
    with mpmath.workdps(30):
        m1, e = mpmath.mpf(mu1), mpmath.mpf(eps)
        f = lambda l: mpmath.npdf(l, m1 * m1 / 2, m1) * ref_delta(mu2, e - l)
        c = m1 * m1 / 2
        composed = mpmath.quad(f, [-mpmath.inf, c - 4 * m1, c, c + 4 * m1, mpmath.inf])
    lo, hi = mu_bounds([1 / mu1, 1 / mu2])  # sigma = 1/mu_i, sensitivity 1
    b = delta_bounds(lo, hi, eps)
    assert b.lower <= composed * (1 + mpmath.mpf(10) ** -20) and composed * (1 - mpmath.mpf(10) ** -20) <= b.upper
    with mpmath.workdps(60):
        mu = mpmath.sqrt(mpmath.mpf(mu1) ** 2 + mpmath.mpf(mu2) ** 2)
    assert abs(composed - ref_delta(mu, eps)) <= mpmath.mpf(10) ** -20 * composed


# ------------------------------------------------------------------------------------------
# delta

_log_mu = st.floats(-6, 3)
_eps = st.one_of(st.just(0.0), st.floats(-8, 4).map(lambda t: 10.0**t))


@settings(max_examples=300, deadline=None)
@given(_log_mu, _eps)
def test_delta_bracket_contains_the_truth(log_mu, eps):
    mu = 10.0**log_mu
    b = delta_bounds(mu, mu, eps)
    truth = ref_delta(mu, eps)
    assert 0.0 <= b.lower <= b.upper <= 1.0
    assert _contains(b, truth), (mu, eps, b, truth)
    assert _gap_ok(b, truth), (mu, eps, b, truth)


@pytest.mark.parametrize("mu, eps", [(1e-8, 0.0), (1e-8, 3e-7), (1e4, 5.04e7), (1e4, 0.0), (2.0, 76.8),
                                     (1.0, 37.0), (1.0, 1e6), (1e6, 1.0)])
def test_delta_at_the_ends_of_the_domain(mu, eps):
    b = delta_bounds(mu, mu, eps)
    truth = ref_delta(mu, eps)
    assert _contains(b, truth) and _gap_ok(b, truth), (b, truth)


def test_delta_special_values():
    assert delta_bounds(0.0, 0.0, 1.0) == (0.0, 0.0)  # no loss at all
    assert delta_bounds(0.0, math.inf, 1.0) == (0.0, 1.0)
    assert delta_bounds(1.0, 1.0, 1e300) == (0.0, 5e-324)  # below every float, not 0 on the upper side
    assert delta_bounds(1e300, 1e300, 1.0) == (1.0 - 2.0**-53, 1.0)  # within 2^-1000 of 1, below it
    one = delta_bounds(1e3, 1e3, 1.0)
    assert one.upper == 1.0 and one.lower == 1.0 - 2.0**-53  # delta < 1, within 2^-1000 of it
    # delta increases with mu: the bracket over [mu_lo, mu_hi] holds both ends
    lo, hi = delta_bounds(1.0, 1.0, 0.5), delta_bounds(1.1, 1.1, 0.5)
    assert delta_bounds(1.0, 1.1, 0.5) == (lo.lower, hi.upper) and lo.upper < hi.lower


@settings(max_examples=40, deadline=None)
@given(st.floats(-2, 2), st.floats(-1, 1), _eps)
def test_agrees_with_the_gaussian_mechanism(log_sigma, log_sens, eps):
    """k = 1: mechanisms.Gaussian(sigma, sensitivity).profile_bounds brackets the same value."""
    sigma, sens = 10.0**log_sigma, 10.0**log_sens
    lo, hi = mu_bounds(sigma, sens)
    ours = delta_bounds(lo, hi, eps)
    theirs = Gaussian(sigma, sens).profile_bounds(eps)
    truth = ref_delta(ref_mu([sigma], [sens], [1]), eps)
    assert _contains(ours, truth) and _contains(theirs, truth)
    assert max(ours.lower, theirs.lower) <= min(ours.upper, theirs.upper)
    assert _gap_ok(ours, truth)


# ------------------------------------------------------------------------------------------
# mu of a composition

def test_mu_exact_sums_are_exact():
    assert mu_bounds([2.0, 4.0], counts=[3, 4]) == (1.0, 1.0)  # 3/4 + 4/16
    assert mu_bounds(0.5, 2.0, 25) == (20.0, 20.0)  # sqrt(25·16)
    lo, hi = mu_bounds([2.0, 4.0], counts=[3, 4])
    assert delta_bounds(lo, hi, 0.3) == delta_bounds(1.0, 1.0, 0.3)
    assert epsilon_bounds(lo, hi, 1e-9) == epsilon_bounds(1.0, 1.0, 1e-9)


_mech = st.tuples(st.floats(-3, 3), st.floats(-2, 2), st.integers(1, 10**6))


@settings(max_examples=40, deadline=None)
@given(st.lists(_mech, min_size=1, max_size=40), _eps, st.floats(-300, math.log10(0.5)))
def test_mixed_sigmas_compose_to_one_mu(mechs, eps, log_dg):
    """Mixed sigmas, sensitivities and counts (exact sums up to 16 entries, float sums with
    charged rounding beyond): mu brackets the 60-digit sum, and delta/eps_g of the mix
    bracket the single-mu truth."""
    sigmas = [10.0**s for s, _, _ in mechs]
    sens = [10.0**d for _, d, _ in mechs]
    counts = [c for _, _, c in mechs]
    lo, hi = mu_bounds(sigmas, sens, counts)
    mu = ref_mu(sigmas, sens, counts)
    assert lo <= mu <= hi and hi - lo <= 4e-15 * hi
    b = delta_bounds(lo, hi, eps)
    truth = ref_delta(mu, eps)
    assert _contains(b, truth)
    assert _gap_ok(b, truth)  # mu's width (≤ 2 ulps) moves delta by ≤ a²·4.4e-16 ≤ 7e-13 relative
    dg = 10.0**log_dg
    e = epsilon_bounds(lo, hi, dg)
    _check_eps(mu, dg, e)


def test_many_distinct_sigmas():
    sigmas = [1.0 + i / 7 for i in range(1000)]
    sens = [1.0 / (1 + i % 5) for i in range(1000)]
    counts = [10] * 1000
    lo, hi = mu_bounds(sigmas, sens, counts)
    assert lo <= ref_mu(sigmas, sens, counts) <= hi and hi - lo <= 4e-15 * hi


# ------------------------------------------------------------------------------------------
# eps_g

def _check_eps(mu, dg, e, gap=True):
    """delta(lower; mu) ≥ delta_g ≥ delta(upper; mu) at 60 digits, and the gap."""
    assert 0.0 <= e.lower <= e.upper
    if e.upper == 0.0:
        assert ref_delta(mu, 0.0) <= dg
        return
    assert ref_delta(mu, e.upper) <= dg, (mu, dg, e)
    assert e.lower == 0.0 or ref_delta(mu, e.lower) >= dg, (mu, dg, e)
    assert ref_delta(mu, 0.0) > dg  # eps_g > 0 indeed
    if gap and e.upper >= NORMAL:
        assert e.upper - e.lower <= REL * e.upper, (mu, dg, e)


@settings(max_examples=200, deadline=None)
@given(_log_mu, st.floats(-300, math.log10(0.5)))
def test_epsilon_bracket_contains_the_truth(log_mu, log_dg):
    mu, dg = 10.0**log_mu, 10.0**log_dg
    _check_eps(mu, dg, epsilon_bounds(mu, mu, dg))


@settings(max_examples=40, deadline=None)
@given(_log_mu, st.floats(-15, -1), _eps, st.floats(-300, math.log10(0.5)))
def test_brackets_over_an_interval_of_mu(log_mu, log_width, eps, log_dg):
    """[mu_lo, mu_hi] wider than a rounding: delta from mu_lo below and mu_hi above, eps_g
    from mu_lo below and mu_hi above (both monotone in mu)."""
    mu_lo = 10.0**log_mu
    mu_hi = mu_lo * (1 + 10.0**log_width)
    b = delta_bounds(mu_lo, mu_hi, eps)
    assert mpmath.mpf(b.lower) <= ref_delta(mu_lo, eps) and ref_delta(mu_hi, eps) <= mpmath.mpf(b.upper)
    dg = 10.0**log_dg
    e = epsilon_bounds(mu_lo, mu_hi, dg)
    assert e.upper == 0.0 or ref_delta(mu_hi, e.upper) <= dg
    assert e.upper > 0.0 or ref_delta(mu_hi, 0.0) <= dg
    assert e.lower == 0.0 or ref_delta(mu_lo, e.lower) >= dg
    assert e.lower <= e.upper


@pytest.mark.parametrize("mu, dg", [(2.0, 1e-6), (1e-6, 1e-300), (1e3, 1e-10), (0.05, 0.01)])
def test_epsilon_against_the_reference_root(mu, dg):
    e = epsilon_bounds(mu, mu, dg)
    root = ref_eps(mu, dg)
    assert mpmath.mpf(e.lower) <= root <= mpmath.mpf(e.upper)
    assert e.upper - e.lower <= REL * e.upper


@pytest.mark.parametrize("mu", [1e-8, 1e-6, 0.01, 1.0, 30.0, 1e3, 1e4])
def test_epsilon_at_the_smallest_delta(mu):
    for dg in (5e-324, 1e-300, NORMAL):
        _check_eps(mu, dg, epsilon_bounds(mu, mu, dg))


def test_epsilon_special_values():
    assert epsilon_bounds(1.0, 1.0, 0.0) == (math.inf, math.inf)  # delta(eps) > 0 for every eps
    assert epsilon_bounds(0.0, 0.0, 0.0) == (0.0, 0.0)  # no loss: delta ≡ 0
    assert epsilon_bounds(0.0, math.inf, 1e-6) == (0.0, math.inf)
    d0 = float(ref_delta(1.0, 0.0))  # 2Φ(1/2) − 1, nearest float
    for dg in (0.5, 0.999, d0 if d0 >= ref_delta(1.0, 0.0) else math.nextafter(d0, 1.0)):
        assert epsilon_bounds(1.0, 1.0, dg) == (0.0, 0.0)  # delta_g ≥ delta(0): eps_g = 0
    below = math.nextafter(min(d0, float(ref_delta(1.0, 0.0))), 0.0)
    while below >= ref_delta(1.0, 0.0):
        below = math.nextafter(below, 0.0)
    e = epsilon_bounds(1.0, 1.0, below)  # just below delta(0): a tiny positive eps_g, still bracketed
    _check_eps(1.0, below, e)
    assert 0 < e.upper < 1e-14
    huge = epsilon_bounds(1e200, 1e200, 1e-10)  # mu²/2 beyond the float range
    assert huge == (1.7976931348623157e308, math.inf)


# ------------------------------------------------------------------------------------------
# the error charge itself: at a low working precision the brackets are wide, and must still
# hold the truth (a charge that is too small shows here, not at 128 bits)

@pytest.mark.parametrize("prec", [30, 44])
def test_error_charge_holds_at_low_precision(monkeypatch, prec):
    from optcomp import _pairs

    monkeypatch.setattr(_pairs, "PRECISIONS", (prec,))
    monkeypatch.setattr(gdp, "PRECISIONS", (prec,))
    pts = [(10.0**lm, 0.0 if le is None else 10.0**le) for lm in (-5.5, -2, -0.3, 0.4, 1.2, 2.5)
           for le in (None, -6, -1, 0.5, 1.5, 2.7)]
    # large mu near its tail (a = −z): there the rounding of a and b (|q| ~ mu/2) dominates
    pts += [(mu, mu * mu / 2 + z * mu) for mu in (31.7, 317.3, 2971.9) for z in (1.1, 10.3, 30.7)]
    wide = 0
    for mu, eps in pts:
        b = delta_bounds(mu, mu, eps)
        assert _contains(b, ref_delta(mu, eps)), (prec, mu, eps, b)
        wide += b.upper - b.lower > 1e-9 * b.upper
    assert wide >= 3  # the low precision did bite somewhere
    for mu, dg in [(1e-5, 1e-100), (0.02, 1e-6), (0.7, 0.3), (3.0, 1e-300), (300.0, 1e-12)]:
        _check_eps(mu, dg, epsilon_bounds(mu, mu, dg), gap=False)
        base = mu * mu / 2 + 2 * mu  # a = −2: delta a normal float
        target = float(ref_delta(mu, base))
        for e in (base * (1 - 1e-6), base, base * (1 + 1e-6)):  # near the target: undecided, never wrong
            d = gdp._decide(mu, e, target)
            truth = ref_delta(mu, e)
            assert d == 0 or (d > 0 and truth >= target) or (d < 0 and truth <= target), (prec, mu, e, d)


# ------------------------------------------------------------------------------------------
# validation and layering

@pytest.mark.parametrize("call, name", [
    (lambda: mu_bounds(0.0), "sigmas"),
    (lambda: mu_bounds([1.0, -2.0]), "sigmas[1]"),
    (lambda: mu_bounds([]), "sigmas"),
    (lambda: mu_bounds(math.inf), "sigmas"),
    (lambda: mu_bounds(1.0, -1.0), "sensitivities"),
    (lambda: mu_bounds([1.0, 2.0], [1.0, 1.0, 1.0]), "sensitivities"),
    (lambda: mu_bounds(1.0, 1.0, 0), "counts"),
    (lambda: mu_bounds([1.0, 2.0], 1.0, [1, 2.5]), "counts[1]"),
    (lambda: mu_bounds([1.0, 2.0], 1.0, [1]), "counts"),
    (lambda: delta_bounds(-1.0, 1.0, 0.0), "mu_lo"),
    (lambda: delta_bounds(math.nan, 1.0, 0.0), "mu_lo"),
    (lambda: delta_bounds(math.inf, math.inf, 0.0), "mu_lo"),
    (lambda: delta_bounds(2.0, 1.0, 0.0), "mu_hi"),
    (lambda: delta_bounds(1.0, 1.0, -0.5), "eps"),
    (lambda: delta_bounds(1.0, 1.0, math.inf), "eps"),
    (lambda: epsilon_bounds(1.0, 1.0, 1.0), "delta_g"),
    (lambda: epsilon_bounds(1.0, 1.0, -1e-9), "delta_g"),
    (lambda: epsilon_bounds(1.0, math.nan, 0.1), "mu_hi"),
])
def test_bad_input_raises_value_error_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=r"\b" + name.replace("[", r"\[").replace("]", r"\]")):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda: mu_bounds("2"), "sigmas"),
    (lambda: mu_bounds(1.0, True), "sensitivities"),
    (lambda: mu_bounds(1.0, 1.0, "3"), "counts"),
    (lambda: delta_bounds(True, 1.0, 0.0), "mu_lo"),
    (lambda: delta_bounds(1.0, 1.0, "0"), "eps"),
    (lambda: epsilon_bounds(1.0, 1.0, None), "delta_g"),
])
def test_bad_types_raise_type_error_naming_the_parameter(call, name):
    with pytest.raises(TypeError, match=name):
        call()


def test_gdp_imports_only_vocabulary_and_pairs():
    tree = ast.parse(Path(gdp.__file__).read_text())
    internal = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assert internal <= {"_rounding", "_types", "_inputs", "_pairs"}, internal
    absolute = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    absolute |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    assert not any(m.startswith("optcomp") for m in absolute), absolute


def test_docstring_examples():
    result = doctest.testmod(gdp, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0
