"""Audit of 7cbaf9c (far subsampled bases as interval atoms, the tiny-mu Gaussian series, the
two-group split), against references written from the definitions in mpmath.

References (Poisson add/remove of a base pair (P, Q) = (N(mu, 1), N(0, 1)); remove is
((1 - s) Q + s P, Q), add is (Q, (1 - s) Q + s P)):

* one step, remove: H(x) = s P[Y > y0] - (e^x - (1 - s)) Q[Y > y0] with
  y0 = (log((e^x - (1 - s))/s) + mu^2/2)/mu;
* one step, add (zero once e^x (1 - s) >= 1): H(x) = (1 - e^x (1 - s)) Q[Y < y1]
  - e^x s P[Y < y1] with y1 = (log((e^{-x} - (1 - s))/s) + mu^2/2)/mu;
* a composition with anything else is at least the far mechanism alone (dropping the other
  outputs is post-processing), so delta_g of the mixture >= H of one far step, and its eps_g
  >= the one-step eps_g;
* two far Gaussian steps near the both-sampled bulk: the remove loss is
  g(l1) + g(l2) ~ N(mu^2 + 2 log s, 2 mu^2) (up to e^{-mu^2/8}-small masses and e^{-10^11}
  corrections of g(l) - l - log s), so H(x) = s^2 GH(x; mu^2 + 2 log s, 2 mu^2) with
  GH(x; m, v) = Phi((m - x)/sqrt v) - e^{x - m + v/2} Phi((m - x - v)/sqrt v).

Every mpmath reference runs at 2200 bits (s down to 1e-300 must survive 1 - s).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

import optcomp
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Subsampled
from test_subsampled_far import _bounds  # (a call's bracket, a size limit's too; no warning)

PREC = 2200


def _mp(x):
    if isinstance(x, mpmath.mpf):
        return x
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def _h_one(mu, s, x):
    """max(remove, add) hockey stick of one Poisson-subsampled Gaussian step at eps x."""
    with mpmath.workprec(PREC):
        mu, s, x = _mp(mu), _mp(s), _mp(x)
        ex = mpmath.exp(x)
        c = ex - (1 - s)
        y0 = (mpmath.log(c / s) + mu ** 2 / 2) / mu
        rem = s * mpmath.ncdf(mu - y0) - c * mpmath.ncdf(-y0)
        d = 1 - ex * (1 - s)
        add = mpmath.mpf(0)
        if d > 0:
            y1 = (mpmath.log(d / (ex * s)) + mu ** 2 / 2) / mu
            add = d * mpmath.ncdf(y1) - ex * s * mpmath.ncdf(y1 - mu)
        return max(rem, add)


def _gh(x, m, v):
    """E[(1 - e^{x - L})_+], L ~ N(m, v)."""
    sd = mpmath.sqrt(v)
    return mpmath.ncdf((m - x) / sd) - mpmath.exp(x - m + v / 2 + mpmath.log(mpmath.ncdf((m - x - v) / sd)))


def _holds(b, truth, rel=mpmath.mpf(2) ** -200):
    return _mp(b.lower) <= truth * (1 + rel) and truth <= _mp(b.upper) * (1 + rel)


# ------------------------------------------------------------------ the audit's findings (fixed)

# Found by this audit, fixed: a far base with s below ~1e-66 -- the P-bulk atoms' mass error
# was charged relative to p, not to s p, so finite_law dropped them as uncertain slack, and
# optimal._delta_at's `eps_g >= comp.top()` shortcut (and the eps search's t <= slack) took the
# kept atoms' top (~s) for the law's.  Now the error is relative to each product, and a
# FiniteLaw's top bounds its dropped atoms too (``dropped_top``).


@pytest.mark.parametrize("base", [Gaussian(1.0, sensitivity=2e6), Gaussian(1e-100), Laplace(2.0**-41)])
def test_far_tiny_s_delta_at_one(base):
    """delta_g(1) of one step is ~s (Gaussian: s (Phi(mu - y0) - ...) = 1e-100 to 1e-90); the
    answer was 5e-324."""
    s = 1e-100
    truth = _h_one(2e6, s, 1.0) if base == Gaussian(1.0, sensitivity=2e6) else mpmath.mpf(s) / 4
    # (Laplace: P[L >= 1] >= 1/4 for eps >= 2^-41 far beyond 1: the sampled branch alone)
    hi = optcomp.delta_g([Subsampled(base, s)], counts=[1], eps_g=1.0)
    assert _mp(hi) >= truth


def test_far_tiny_s_delta_bounds_two_steps():
    s = 1e-100
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(Gaussian(1.0, sensitivity=2e6), s)], counts=[2],
                                             eps_g=1.0))
    # truth: 1 - (1 - s)^2 to within e^{-10^11}
    assert _mp(b.upper) >= 2 * _mp(s) * (1 - _mp(s))


def test_far_tiny_s_epsilon_bounds_one_step():
    """delta_g = 1e-110 < s = 1e-100: eps_g sits in the sampled bulk (~2e12 at mu = 2e6);
    epsilon_bounds answered [1e-100, 8.6e-78] (epsilon_g itself answers ~2e12)."""
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1.0, sensitivity=2e6), 1e-100)], counts=[1],
                                               delta_g=1e-110))
    assert _h_one(2e6, 1e-100, b.upper) <= mpmath.mpf(1e-110)


def test_far_tiny_s_epsilon_at_s_1e_67():
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1.0, sensitivity=2e6), 1e-67)], counts=[1],
                                               delta_g=1e-69))
    assert _h_one(2e6, 1e-67, b.upper) <= mpmath.mpf(1e-69)


@pytest.mark.parametrize("beside", [BlackBox(1.0), Laplace(1.0), Gaussian(1.0)])
def test_far_tiny_s_beside_others_epsilon(beside):
    """A composition's eps_g is at least the far step's alone (post-processing): ~2e12 at
    delta_g = 1e-110; the brackets were [1, 1], [1, 1] and [22.69, 22.69]."""
    s, dg = 1e-100, 1e-110
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1.0, sensitivity=2e6), s), beside],
                                               counts=[1, 1], delta_g=dg))
    assert _h_one(2e6, s, b.upper) <= mpmath.mpf(dg)


def test_far_tiny_s_beside_black_box_delta():
    s = 1e-100
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(Gaussian(1.0, sensitivity=2e6), s), BlackBox(1.0)],
                                             counts=[1, 1], eps_g=3.0))
    assert _mp(b.upper) >= _h_one(2e6, s, 3.0)


# ------------------------------------------------------------------ regression guards (pass)

def _check_delta_one(mu, s, x):
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(Gaussian(1.0, sensitivity=mu), s)], counts=[1], eps_g=x))
    assert _holds(b, _h_one(mu, s, x)), (mu, s, x, b)


def _check_epsilon_one(mu, s, dg):
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1.0, sensitivity=mu), s)], counts=[1],
                                               delta_g=dg))
    with mpmath.workprec(PREC):
        if 0.0 < b.lower:
            assert _h_one(mu, s, b.lower) >= _mp(dg), (mu, s, dg, b)
        if b.upper < math.inf:
            assert _h_one(mu, s, b.upper) <= _mp(dg), (mu, s, dg, b)


def _bulk_points(mu, s, ts):
    with mpmath.workprec(PREC):
        m = _mp(mu)
        bulk = m ** 2 / 2 + mpmath.log(_mp(s))
        out = [float(bulk + t * m) for t in ts]
    return [x for x in out if 0.0 < x < math.inf]


@pytest.mark.parametrize("mu, s", [(1.6e6, 0.5), (1e20, 1e-60), (1.3e154, 0.01), (1.8e154, 1 - 2.0**-53)])
def test_far_one_step_delta_on_and_off_the_bulk(mu, s):
    """One far step's delta_g against the closed form, at moderate eps_g and across the
    sampled bulk (mu^2/2 + log s + t mu, t in -30..10; mu = 1.8e154 puts it at 1.6e308)."""
    for x in [0.0, 1e-20, 1.0, 700.0] + _bulk_points(mu, s, [-30, -3, -1, 0, 1, 3, 10]):
        _check_delta_one(mu, s, x)


@pytest.mark.parametrize("mu, s", [(2e6, 1e-60), (1e12, 0.5), (1e100, 1 - 2.0**-53)])
def test_far_one_step_epsilon_against_the_closed_form(mu, s):
    for dg in (0.9, 0.1, 1e-3, 1e-61, 1e-300):
        _check_epsilon_one(mu, s, dg)


def _h_two(mu, s, x):
    """Two far remove steps near either bulk (add is 0 there): both sampled ~ N(mu^2 + 2 log s,
    2 mu^2), one sampled ~ N(mu^2/2 + log s + log(1 - s), mu^2), none at 2 log(1 - s)."""
    with mpmath.workprec(PREC):
        mu, s, x = _mp(mu), _mp(s), _mp(x)
        both = s * s * _gh(x, mu ** 2 + 2 * mpmath.log(s), 2 * mu ** 2)
        one = 2 * s * (1 - s) * _gh(x, mu ** 2 / 2 + mpmath.log(s) + mpmath.log1p(-s), mu ** 2)
        return both + one


@pytest.mark.parametrize("mu, s", [(1.6e6, 0.5), (1e9, 1e-3), (1e50, 1 - 2.0**-53)])
def test_far_two_steps_across_both_bulks(mu, s):
    """(mu <= 1e50: the mpmath ncdf of the reference at |z| ~ mu/sqrt 2 stays cheap.)"""
    G = Subsampled(Gaussian(1.0, sensitivity=mu), s)
    with mpmath.workprec(PREC):
        m, sm = _mp(mu), _mp(s)
        xs = [float(m ** 2 + 2 * mpmath.log(sm) + t * mpmath.sqrt(2) * m) for t in (-3, 0, 1, 3)]
        xs += [float(m ** 2 / 2 + mpmath.log(sm) + mpmath.log1p(-sm) + t * m) for t in (-3, 0, 3)]
    for x in xs:
        b = _bounds(lambda: optcomp.delta_bounds([G], counts=[2], eps_g=x))
        assert _holds(b, _h_two(mu, s, x), mpmath.mpf(2) ** -100), (mu, s, x, b)
    for dg in (1e-3, 1e-7, 1e-125):
        b = _bounds(lambda: optcomp.epsilon_bounds([G], counts=[2], delta_g=dg))
        if b.lower > 80.0:
            assert _h_two(mu, s, b.lower) >= dg
        if 80.0 < b.upper < math.inf:
            assert _h_two(mu, s, b.upper) <= dg


def _h_laplace(d, s, x):
    """One Poisson-subsampled Laplace step of eps d (scale 1): remove s (1 - e^{(L - d)/2}),
    L = log((e^x - (1 - s))/s) in [-d, d]; add c (1 - e^{-(L' + d)/2}), c = 1 - e^x (1 - s),
    L' = log(c/(e^x s)) in (-d, d) (c - e^x s above d)."""
    with mpmath.workprec(PREC):
        d, s, x = _mp(d), _mp(s), _mp(x)
        ex = mpmath.exp(x)
        L = mpmath.log((ex - (1 - s)) / s)
        rem = mpmath.mpf(0) if L >= d else s * (1 - mpmath.exp((L - d) / 2))
        c = 1 - ex * (1 - s)
        add = mpmath.mpf(0)
        if c > 0:
            lp = mpmath.log(c / (ex * s))
            add = c - ex * s if lp >= d else (c * (1 - mpmath.exp(-(lp + d) / 2)) if lp > -d else add)
        return max(rem, add)


@pytest.mark.parametrize("scale, s", [(2.0**-41, 0.5), (1e-15, 1e-60), (1e-300, 0.01)])
def test_far_laplace_one_step(scale, s):
    d = 1 / Fraction(scale)
    G = Subsampled(Laplace(scale), s)
    with mpmath.workprec(PREC):
        bulk = _mp(d) + mpmath.log(_mp(s))
        xs = [0.0, 0.5, 30.0] + [float(bulk + t) for t in (-1500, -100, -5, -0.1)]
    for x in xs:
        if not (0.0 <= x < 1e16):
            continue
        b = _bounds(lambda: optcomp.delta_bounds([G], counts=[1], eps_g=x))
        assert _holds(b, _h_laplace(d, s, x)), (scale, s, x, b)
    for dg in (0.3, 1e-3, 1e-61):
        b = _bounds(lambda: optcomp.epsilon_bounds([G], counts=[1], delta_g=dg))
        if 0.0 < b.lower < math.inf:
            assert _h_laplace(d, s, b.lower) >= dg
        if b.upper < math.inf:
            assert _h_laplace(d, s, b.upper) <= dg


def _h_rr(e0, y):
    e0, y = _mp(e0), _mp(y)
    pu, pd = 1 / (1 + mpmath.exp(-e0)), 1 / (1 + mpmath.exp(e0))
    return max(0, pu * (1 - mpmath.exp(y - e0))) + max(0, pd * (1 - mpmath.exp(y + e0)))


@pytest.mark.parametrize("sigma, s, k, e0", [(1e-7, 1e-60, 2, 0.5), (1e-100, 0.3, 3, 2.0), (1e-100, 0.9, 1, 0.5)])
def test_far_beside_a_black_box_delta(sigma, s, k, e0):
    """k far steps beside a randomized response of e0: a sampled step puts the loss beyond
    every eps_g here, none leaves the far part at k log(1 - s) (remove) or -k log(1 - s)
    (add) within e^{-mu^2/4}: remove 1 - (1 - s)^k + (1 - s)^k H_RR(x - k log(1 - s)), add
    H_RR(x + k log(1 - s))."""
    G = Subsampled(Gaussian(sigma), s)
    for x in (0.0, 0.3, 1.0, 2.5, 5.0):
        b = _bounds(lambda: optcomp.delta_bounds([G, BlackBox(e0)], counts=[k, 1], eps_g=x))
        with mpmath.workprec(PREC):
            sm = _mp(s)
            l1 = mpmath.log1p(-sm)
            truth = max(1 - (1 - sm) ** k + (1 - sm) ** k * _h_rr(e0, _mp(x) - k * l1), _h_rr(e0, _mp(x) + k * l1))
            tol = mpmath.mpf(10) ** -40
            assert _mp(b.lower) <= truth + tol and truth <= _mp(b.upper) + tol, (x, b, truth)


def _h_gauss(mu, x):
    """The Gaussian profile Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu) at 5000 bits (an upper
    bound Phi(a) where a < -1e5)."""
    with mpmath.workprec(5000):
        mu, x = _mp(mu), _mp(x)
        a = mu / 2 - x / mu
        if a < -1e5:
            return mpmath.npdf(a) / -a
        return mpmath.ncdf(a) - mpmath.exp(x) * mpmath.ncdf(-mu / 2 - x / mu)


@pytest.mark.parametrize("mu", [2.0**-20, 1e-30, 1e-135, 1e-300, 5e-324])
def test_tiny_mu_gaussian_profile_against_5000_bits(mu):
    """The series of _small_mu_delta (and the direct form beside it) against the definition."""
    G = Gaussian(1.0, sensitivity=mu)
    for c in (0.0, 1e-3, 0.5, 1.0, 3.0, 10.0):
        x = float(c * _mp(mu))
        h = _h_gauss(mu, x)
        for b in (G.profile_bounds(x), _bounds(lambda: optcomp.delta_bounds([G], counts=[1], eps_g=x))):
            with mpmath.workprec(5000):
                assert _mp(b.lower) <= h * (1 + mpmath.mpf(2) ** -200) and h <= _mp(b.upper) * (1 + mpmath.mpf(2) ** -200), \
                    (mu, x, b)


# ------------------------------------------------------------------ heavier sweeps (slow)

@pytest.mark.slow
@pytest.mark.parametrize("mu", [1.5e6, 3e6, 1e9, 1e20, 1e100, 1.3e154, 1.8e154])
@pytest.mark.parametrize("s", [1e-60, 1e-10, 0.01, 0.5, 0.99, 1 - 2.0**-53])
def test_sweep_far_one_step_delta(mu, s):
    """The audit's sweep (952 calls, none off): moderate eps_g and the sampled bulk."""
    for x in [0.0, 1e-300, 0.5, 10.0, 700.0] + _bulk_points(mu, s, [-60, -10, -3, -1, 0, 1, 3, 10, 30]):
        _check_delta_one(mu, s, x)


@pytest.mark.slow
@pytest.mark.parametrize("mu", [1.5e6, 3e6, 1e12, 1e100, 1.3e154, 1.8e154])
@pytest.mark.parametrize("s", [1e-60, 1e-10, 0.01, 0.5, 1 - 2.0**-53])
def test_sweep_far_one_step_epsilon(mu, s):
    """(delta_g = s itself -- 0.5 at s = 0.5, 1e-10 at s = 1e-10 -- is left out: the profile
    search there takes minutes, see the audit report.)"""
    for dg in (0.9, 0.1, 1e-3, 1e-61, 1e-100, 1e-300):
        if dg != s:
            _check_epsilon_one(mu, s, dg)


def test_a_finite_law_top_bounds_its_dropped_atoms():
    """H = 0 above a law's top only if the top bounds every atom, the dropped ones too: an
    atom at 2e12 known only loosely (mass 1e-100 +- 1e-90) is left out as slack, and the
    law's top must still be >= 2e12 -- not the kept atom's log(1/2)."""
    from optcomp._exact.finite import _law, _negligible

    with mpmath.workprec(256):
        kept = [(None, mpmath.log(mpmath.mpf(0.5)), mpmath.mpf(0), mpmath.mpf(1))]
        law = _law(kept, 0.0, dropped_top=mpmath.mpf(2e12))
        assert law.top()[1] >= 2e12 and law.top(up=False)[1] < 0
        # an atom of negligible mass dropped by _negligible keeps its position in the top
        two = _law(kept + [(None, mpmath.mpf(3e12), mpmath.mpf(1), mpmath.ldexp(1, -1200))], 0.0)
        reduced, charge = _negligible(two, 1)
        assert reduced.size == 1 and charge > 0.0 and reduced.top()[1] >= 3e12


@pytest.mark.parametrize("mechs, counts, dg, one", [
    ([Subsampled(Gaussian(1.0, sensitivity=1.5e6), 1e-10)], [1], 1e-10, (1.5e6, 1e-10)),
    ([Subsampled(Gaussian(1.0, sensitivity=1e9), 1e-3)], [2], 1e-3, None),
    ([Subsampled(Gaussian(1e-7), 0.5), Gaussian(1.0)], [1, 1], 0.5, None),
])
def test_a_tie_at_delta_g_equal_to_q_is_answered(mechs, counts, dg, one):
    """delta_g = q exactly, where one step's delta(0) = q (1 - e^{-10^11}): no precision
    decides the profile against delta_g, and every step of the profile search climbed to 4096
    bits (377, 93 and 347 s).  A float bracket two ulps wide straddling delta_g is now left
    undecided at once.  The bracket stays ordered, and one step's upper end holds delta_g by
    the closed form."""
    b = _bounds(lambda: optcomp.epsilon_bounds(mechs, counts=counts, delta_g=dg))
    assert 0.0 <= b.lower <= b.upper
    if one is not None:
        assert _h_one(*one, b.upper) <= mpmath.mpf(dg)
