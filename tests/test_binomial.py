"""The binomial masses in log space (optcomp._binomial) against 50-digit mpmath, from the
definition C(k, m) p^m q^(k-m) with p = e^eps/(1 + e^eps) -- including k = 10^12, twenty
and more standard deviations out, and masses far below the float range (scaled by 2^s)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from optcomp._binomial import _U_XP, binomial_log_pmf, binomial_masses

_EXTENDED = _U_XP <= 2.0**-60  # numpy.longdouble wider than a double (x86-64, aarch64 Linux)


def _ref_log_pmf(eps, k, m):
    with mp.workdps(60):
        q = 1 / (1 + mp.e ** mp.mpf(eps))
        return mp.log(mp.binomial(k, m)) + m * mp.log1p(-q) + (k - m) * mp.log(q)


def _points(eps, k):
    p = 1.0 / (1.0 + math.exp(-eps))
    sd = math.sqrt(k * p * (1.0 - p))
    ms = {0, 1, k - 1, k, k // 2}
    for z in (0, 1, 5, 10, 20, 37, -5, -20, -37):
        ms.add(int(k * p + z * sd))
    return sorted(m for m in ms if 0 <= m <= k)


@pytest.mark.parametrize("k", [1, 2, 17, 1000, 10**6, 10**9, 10**12])
@pytest.mark.parametrize("eps", [1e-12, 1e-6, 0.01, 0.1, 1.0, 5.0, 30.0, 700.0])
def test_log_pmf_within_its_bound(k, eps):
    ms = _points(eps, k)
    logp, err = binomial_log_pmf(eps, k, np.array(ms))
    for m, a, b in zip(ms, logp.tolist(), err.tolist()):
        ref = _ref_log_pmf(eps, k, m)
        assert abs(mp.mpf(a) - ref) <= b, (m, a, float(ref), b)
        assert b <= 1e-10 * max(1.0, abs(float(ref)))  # and the bound itself is tight


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**12), st.floats(-12, 2.8), st.floats(0, 1))
def test_log_pmf_random(k, log_eps, frac):
    eps = 10.0**log_eps
    m = int(frac * k)
    logp, err = binomial_log_pmf(eps, k, np.array([m]))
    assert abs(mp.mpf(float(logp[0])) - _ref_log_pmf(eps, k, m)) <= float(err[0])


def test_scaled_masses_keep_tiny_masses_accurate():
    """Masses around 1e-400 (k = 10^6, deep tail) are returned scaled by 2^s, as bounds."""
    k, eps = 10**6, 0.1
    p = 1.0 / (1.0 + math.exp(-eps))
    m0 = int(k * p + 45 * math.sqrt(k * p * (1 - p)))
    lo, hi, s = binomial_masses(eps, k, m0, m0 + 50)
    assert s > 1000 - 200
    for i in (0, 25, 50):
        with mp.workdps(60):
            ref = mp.e ** _ref_log_pmf(eps, k, m0 + i) * mp.mpf(2) ** s
        assert lo[i] <= ref <= hi[i]
        # the bound grows with the deviance (~1000 here): ~2e-12 in double precision, ~1e-15 in
        # the log where the deep-tail masses are recomputed in an extended precision (u = 2^-64),
        # so a bracket ~2.8e-15 wide with the roundings to a double
        assert hi[i] - lo[i] <= (3.5e-15 if _EXTENDED else 5e-11) * ref


def _mpf(x) -> mp.mpf:
    """A float or numpy.longdouble, exactly."""
    return mp.mpf(np.format_float_scientific(x, precision=40, unique=False))


@pytest.mark.parametrize("k", [1, 17, 10**6, 10**12])
@pytest.mark.parametrize("eps", [1e-12, 0.01, 1.0, 30.0, 700.0])
def test_extended_log_pmf_within_its_bound(k, eps):
    ms = _points(eps, k)
    logp, err = binomial_log_pmf(eps, k, np.array(ms), dtype=np.longdouble)
    for m, a, b in zip(ms, logp, err):
        with mp.workdps(60):
            ref = _ref_log_pmf(eps, k, m)
            assert abs(_mpf(a) - ref) <= _mpf(b), (m, float(a), float(ref), float(b))
        if _EXTENDED:
            assert b <= 1e-16 * max(1.0, abs(float(ref)))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**12), st.floats(-12, 2.8), st.floats(-60, 60), st.sampled_from([None, 0, 300, 1000]))
def test_masses_contain_the_reference(k, log_eps, z, scale):
    """binomial_masses brackets 2^s P[M = m] anywhere from the mode to 60 standard
    deviations out, scaled or not; where the extended precision exists, the bracket is
    within 2.5e-13 relative (2 REFINE_ERR and the roundings) even at masses near 1e-300
    (|log| ~ 700, where double precision alone would give ~3e-12)."""
    eps = 10.0**log_eps
    p = 1.0 / (1.0 + math.exp(-eps))
    m = min(k, max(0, int(k * p + z * math.sqrt(k * p * (1 - p)))))
    lo, hi, s = binomial_masses(eps, k, m, m, scale)
    with mp.workdps(60):
        ref = mp.e ** _ref_log_pmf(eps, k, m) * mp.mpf(2) ** s
    if ref > 2.0**-1000 and ref < 2.0**1000:
        assert _mpf(lo[0]) <= ref <= _mpf(hi[0]), (lo[0], ref, hi[0])
        if _EXTENDED:
            assert _mpf(hi[0]) - _mpf(lo[0]) <= mp.mpf("2.5e-13") * ref
    else:
        assert _mpf(lo[0]) <= ref <= _mpf(hi[0]) + mp.mpf(2.0**-1074) * 2


# The fill's own relative error (ratio_products: 2.01 j u for j < 32 factors, 8 u_xp + u for
# e^{j eps}, u for the last product) and the three roundings of binomial_masses (4 u), from
# the theorem's constants, not from the code's output: 2.01 * 31 u + 8 * 2^-64 + 6 u.
_FILL_REL = 2.01 * 31 * 2.0**-53 + 8 * 2.0**-64 + 6 * 2.0**-53
# an anchor left in double precision has a log error <= REFINE_ERR = 2^-43 (two-sided, plus
# the exp's 24 u each side); a filled mass adds _FILL_REL on each side
_REFINED_WIDTH = 2 * (2.0**-43 + 2.0**-53) + 48 * 2.0**-53 + 2 * _FILL_REL


@settings(max_examples=60, deadline=None)
@given(st.integers(10**4, 10**12), st.floats(-12, 2.8), st.floats(-40, 30), st.integers(0, 10**5),
       st.sampled_from([None, 0, 300]), st.booleans())
@example(k=10**4, log_eps=0.625, z=1.0, width=0, scale=None, refine=True)  # issue 16: 2 of 30 seeds
@example(k=10**4, log_eps=-1.0, z=-19.0, width=410 - 128, scale=None, refine=False)
def test_filled_windows_contain_the_reference(k, log_eps, z, width, scale, refine):
    """Wide windows take one anchor every FILL_BLOCK atoms and fill between by products of
    pmf ratios: every mass (anchors, block ends, blocks whose anchor underflows) still
    brackets 60-digit mpmath; a filled mass's relative bracket is its anchor's plus at most
    _FILL_REL on each side (the anchor's own width is that of the atom-by-atom path *at the
    anchor*, which may be left in double precision while a neighbour is refined: so a filled
    mass may be up to ~2.3e-13 wide where the one-atom path at the same m is 1e-15 -- the
    cause of the old flaky width claim); with refinement (and an extended type) every
    normal filled mass is within _REFINED_WIDTH (2.6e-13) of its reference, the same
    guarantee as the atom-by-atom path."""
    from optcomp import _binomial

    eps = 10.0**log_eps
    p = 1.0 / (1.0 + math.exp(-eps))
    m0 = min(k, max(0, int(k * p + z * math.sqrt(k * p * (1 - p)))))
    m1 = min(k, m0 + _binomial.FILL_MIN + width)
    lo, hi, s = binomial_masses(eps, k, m0, m1, scale, refine)
    B = _binomial.FILL_BLOCK
    picks = sorted({0, 1, B - 1, B, 2 * B - 1, (m1 - m0) // 2, m1 - m0 - 1, m1 - m0} & set(range(m1 - m0 + 1)))
    # the anchors of the picks inside the window, and the first atoms after them
    picks = sorted(set(picks) | {(m0 + i) // B * B - m0 for i in picks if (m0 + i) // B * B >= m0})
    with mp.workdps(60):
        for i in picks:
            ref = mp.e ** _ref_log_pmf(eps, k, m0 + i) * mp.mpf(2) ** s
            assert _mpf(lo[i]) <= ref <= _mpf(hi[i]) + mp.mpf(2.0**-1074) * 2, (i, lo[i], ref, hi[i])
            if refine and _EXTENDED and lo[i] >= 2.0**-1000 and hi[i] < 2.0**1000:
                assert _mpf(hi[i]) - _mpf(lo[i]) <= mp.mpf(_REFINED_WIDTH) * ref, (i, lo[i], hi[i])
    if m1 - m0 + 1 < _binomial.FILL_MIN or eps > 700.0:
        return  # computed atom by atom (the test above bounds those)
    for i in picks:
        ia = (m0 + i) // B * B - m0
        if ia < 0 or not (lo[ia] >= 2.0**-1000 and lo[i] >= 2.0**-1000 and hi[i] < 2.0**1000):
            continue  # anchor outside the window, or masses computed atom by atom (not normal)
        w_anchor = (hi[ia] - lo[ia]) / lo[ia]
        w = (hi[i] - lo[i]) / lo[i]
        assert w <= w_anchor + 2.0 * _FILL_REL + 1e-16, (i, ia, w, w_anchor)


# ----------------------------------------------------------------------------- the derivation's pieces
# binomial_log_pmf's docstring derives its bound term by term; these check the pieces on their
# own (each against 60-digit mpmath), where the total's margins cannot hide a short charge.

_DTYPES = [np.float64] + ([np.longdouble] if _EXTENDED else [])


def _unit(dt) -> float:
    return 2.0**-53 if dt is np.float64 else 2.0**-64


@pytest.mark.parametrize("dt", _DTYPES)
def test_stirlerr_within_its_derived_relative_error(dt):
    """Table u, series 3.01 u (the docstring of _stirlerr), both series forms."""
    from optcomp._binomial import _stirlerr

    ns = list(range(1, 40)) + [50, 100, 1000, 2**20 - 1, 2**20, 10**6, 10**9, 10**12]
    got = _stirlerr(np.array(ns, dtype=dt))
    got_big = _stirlerr(np.array([2**20, 3 * 10**6, 10**12], dtype=dt))  # the two-term form
    u = _unit(dt)
    with mp.workdps(60):
        for n, g in list(zip(ns, got)) + list(zip([2**20, 3 * 10**6, 10**12], got_big)):
            ref = mp.log(mp.factorial(n)) - (n + mp.mpf(0.5)) * mp.log(n) + n - mp.log(2 * mp.pi) / 2
            assert abs(_mpf(g) - ref) <= (1.0001 if n <= 31 else 3.01) * u * ref, (n, float(g), float(ref))


def _bd0_ref(x: int, mh: float, ml: float):
    """x log(x/M') + M' - x for the double-double M' = mh + ml that _bd0 is given."""
    M = mp.mpf(mh) + mp.mpf(ml)
    return x * mp.log(x / M) + M - x


@pytest.mark.parametrize("dt", _DTYPES)
@pytest.mark.parametrize("eps,k", [(0.1, 1000), (1.0, 10**6), (1e-3, 10**9), (3.0, 10**12), (20.0, 10**12)])
def test_bd0_within_its_bound_in_every_regime(dt, eps, k):
    """_bd0 against 60-digit mpmath in each of its forms: near the mean (v = d/(x + M) up to
    +-0.0999, where the series takes 11 steps and, for v < 0, its partial sums exceed the
    result -- the case the old (7 + steps) u missed), the two series (1/2 <= x/M < 1,
    1 < x/M <= 2) and the closed form (x/M < 1/2, > 2)."""
    from optcomp._binomial import _bd0, _parameters

    (mh, ml), _, _, _, _ = _parameters(eps, k)
    M = mh + ml
    xs = set()
    for v in (-0.0999, -0.05, -1e-3, 0.0, 1e-3, 0.05, 0.0999):  # x = M (1 + v)/(1 - v)
        xs.add(round(M * (1 + v) / (1 - v)))
    for r in (0.02, 0.3, 0.51, 0.6, 0.8, 1.3, 1.7, 1.99, 2.5, 50.0):
        xs.add(round(M * r))
    xs = sorted(x for x in xs if 1 <= x <= k)
    u = _unit(dt)
    for near_only in (True, False):  # the all-near fast path and the masked one
        sel = [x for x in xs if abs(x - M) < 0.0999 * (x + M)] if near_only else xs
        if not sel:
            continue
        b, e, _, _ = _bd0(np.array(sel, dtype=dt), mh, ml, u)
        with mp.workdps(60):
            for x, bi, ei in zip(sel, b, e):
                ref = _bd0_ref(x, mh, ml)
                assert abs(_mpf(bi) - ref) <= _mpf(ei), (x, x / M, float(bi), float(ref), float(ei))


@pytest.mark.parametrize("dt", _DTYPES)
@pytest.mark.parametrize("k", [10**3, 10**6, 10**9, 10**12])
@pytest.mark.parametrize("eps", [1e-6, 0.5, 4.0])
def test_log_pmf_within_its_bound_at_the_regime_edges(dt, k, eps):
    """binomial_log_pmf where bd0 switches form (|v| -> 0.1, x/M -> 1/2 and 2, both for m and
    for j = k - m) and in the far tails, against 60-digit mpmath, in both precisions."""
    p = 1.0 / (1.0 + math.exp(-eps))
    ms = set()
    for M, to_m in ((k * p, lambda x: x), (k * (1 - p), lambda x: k - x)):
        for v in (-0.0999, -0.0995, 0.0995, 0.0999):
            ms.add(to_m(round(M * (1 + v) / (1 - v))))
        for r in (0.499, 0.501, 0.999, 1.001, 1.999, 2.001, 1e-3):
            ms.add(to_m(round(M * r)))
    ms = sorted(m for m in ms if 0 <= m <= k)
    logp, err = binomial_log_pmf(eps, k, np.array(ms), dtype=dt)
    with mp.workdps(60):
        for m, a, b in zip(ms, logp, err):
            ref = _ref_log_pmf(eps, k, m)
            assert abs(_mpf(a) - ref) <= _mpf(b), (m, float(a), float(ref), float(b))


def test_extended_unit_roundoff_is_the_types_own():
    """2^-p for a p-bit significand: 1 + 2^-p is a tie (rounds to 1), and 1 + 1.5 2^-p rounds
    up, so relative rounding errors reach 2^-p -- not half of it."""
    from optcomp._binomial import _U_XP

    x = np.longdouble(_U_XP)
    assert np.longdouble(1) + x == 1 and np.longdouble(1) + np.longdouble(1.5) * x > 1


@pytest.mark.parametrize("q", [Fraction(1, 10**12), Fraction(1, 10**56), Fraction(3, 10**70)])
def test_parameter_near_one_keeps_its_complement(q):
    """p = 1 - q given exactly (a Fraction) with q far below 10^-45: q comes from the exact
    1 - p, not from 1 minus the 60-digit p (which kept ~4 of q's digits at 1e-56 -- log
    masses 7e-7 off under a 3e-16 bound -- and none at 3e-70: NaN); the exact multinomial's
    binomial (:class:`optcomp._exact.multinomial._Binom`) against an 80-digit reference."""
    from optcomp._exact.multinomial import _Binom

    b = _Binom(1 - q)
    for N, m in ((3, 1), (3, 2), (1000, 997), (10**6, 10**6 - 3)):
        y, err = b.log_pmf(np.array([N]), np.array([m]))
        with mp.workdps(80):
            qm = mp.mpf(q.numerator) / q.denominator
            ref = mp.log(mp.binomial(N, m) * (1 - qm) ** m * qm ** (N - m))
        ref_ld = np.longdouble(mp.nstr(ref, 30))
        assert y[0] - err[0] <= ref_ld <= y[0] + err[0], (q, N, m, float(y[0] - ref_ld), float(err[0]))
