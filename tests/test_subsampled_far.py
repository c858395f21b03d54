"""Subsampled bases with a continuous part at the ends of their parameter range, against
references written from the definitions (Poisson add/remove: remove ((1 - s)Q + sP, Q), add
(Q, (1 - s)Q + sP), (P, Q) the base's pair).

* **Far bases** -- a Gaussian of mu = sensitivity/sigma beyond ~1.5e6 (up to beyond the
  floats' square root, where mu^2/2 overflows) or a Laplace of eps beyond 2^40: their losses
  lie beyond every lattice.  Before, the Gaussian beyond mu ~1e154 raised OverflowError in
  the engine's guide, and every far base was bracketed from the ends of the law alone
  (delta_g at eps_g = 1 within [0.5, 1], eps_g within [0, 1e200] or [1.39, 1e200]).  Their law
  is now finitely many atoms with position brackets (``subsampled._far_atoms``).

  The references: P's bulk lies within 40 mu of mu^2/2 (a Laplace's within 1500 below a) and
  Q's is its mirror, so a remove step's loss is g(l) = log(1 - s + s e^l) >= mu^2/2 - 40 mu +
  log s when the record was sampled (P-part, mass s) and within e^{-mu^2/4} of log(1 - s)
  otherwise -- up to masses below e^{-mu^2/16}.  Hence delta_g(1) of k steps is 1 - (1 - s)^k
  to within e^{-10^11}; one step's eps_g(delta) solves s H_{e^{x'}}(P || Q) = delta, x' =
  log(1 + (e^x - 1)/s) (Balle-Barthe-Gaboardi Thm 8), with the Gaussian's H in closed form;
  and two steps at delta <= 1e-6 << s^2 need the both-sampled mass, eps_g = 2 (mu^2/2 + log s)
  + O(mu) (relative 1e-95 at mu = 1e100).
* **Tiny mu** (sensitivity/sigma 1e-310 .. 5e-324): delta_g at eps_g = 1 raised "zero-size
  array to reduction" -- the preimage of every cell under g lost its inner part to an
  absolute 1e-300 error floor, so no cell kept a lower mass -- and eps_g = 1e300 took 12 s
  in mpmath's normal density at z ~ 1e621.  The truth is below 1e-300: every loss lies within
  ~mu * 40 of 0.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath
import pytest

import optcomp
from optcomp import ApproxTooCostly
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Subsampled


def _bounds(fn):
    """The certified bracket of a call, also when it is a size limit's (no other exception, no
    warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return fn()
        except ApproxTooCostly as exc:
            assert exc.bounds is not None
            return exc.bounds


FAR = [
    (Gaussian(1.0, sensitivity=2e6), 0.5),
    (Gaussian(1.0, sensitivity=1e100), 0.5),
    (Gaussian(1.0, sensitivity=1e100), 1e-3),
    (Gaussian(1e-155), 0.5),
    (Gaussian(1e-300), 0.25),
    (Laplace(1e-100), 0.5),
    (Laplace(2.0**-41), 1e-3),
    (Laplace(5e-324), 0.5),
]


@pytest.mark.parametrize("base, s", FAR)
@pytest.mark.parametrize("k", [1, 2, 10])
def test_far_bases_delta_at_one_is_the_sampled_mass(base, s, k):
    """delta_g(1) = 1 - (1 - s)^k up to e^{-10^11}: the bracket holds it, to 1e-12 relative."""
    truth = 1 - (1 - Fraction(s)) ** k
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(base, s)], counts=[k], eps_g=1.0))
    assert Fraction(b.lower) <= truth <= Fraction(b.upper) * (1 + Fraction(1, 10**90))
    assert b.upper - b.lower <= 1e-12 * b.upper


def _gaussian_eps_one_step(mu, s, delta):
    """The root x of s H_{e^{x'}}(P || Q) = delta, x' = log(1 + (e^x - 1)/s), H the Gaussian
    hockey stick Phi(mu/2 - x'/mu) - e^{x'} Phi(-mu/2 - x'/mu), in mpmath at 400 bits (the
    add direction is 0 beyond -log(1 - s))."""
    with mpmath.workprec(400):
        mu, s, delta = mpmath.mpf(mu), mpmath.mpf(s), mpmath.mpf(delta)

        def f(x):
            xp = mpmath.log1p(mpmath.expm1(x) / s)
            a, b = mu / 2 - xp / mu, -mu / 2 - xp / mu
            h = mpmath.ncdf(a) - mpmath.exp(xp + mpmath.log(mpmath.ncdf(b)))
            return s * h - delta

        lo, hi = max(mu * mu / 2 - 60 * mu, mpmath.mpf(0)), mu * mu / 2 + 60 * mu + 60
        assert f(lo) > 0 > f(hi)
        for _ in range(400):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        return _fraction(lo), _fraction(hi)


def _fraction(x) -> Fraction:
    """An mpmath number as the exact rational it is."""
    man, exp = x.man_exp
    return Fraction(int(man)) * Fraction(2) ** int(exp)


@pytest.mark.parametrize("mu", [2e6, 1e7, 1e12])
@pytest.mark.parametrize("s, delta", [(0.5, 1e-6), (0.01, 1e-10), (0.5, 1e-300)])
def test_far_gaussian_one_step_epsilon_against_the_closed_form(mu, s, delta):
    lo, hi = _gaussian_eps_one_step(mu, s, delta)
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1.0, sensitivity=mu), s)], counts=[1],
                                               delta_g=delta))
    assert Fraction(b.lower) <= lo and hi <= Fraction(b.upper)
    assert b.upper - b.lower <= 1e-9 * b.upper


@pytest.mark.parametrize("base, top", [
    (Gaussian(1.0, sensitivity=1e100), Fraction(1e100) ** 2 / 2),
    (Laplace(1e-100), 1 / Fraction(1e-100)),
    (Laplace(1e-300), 1 / Fraction(1e-300)),
])
def test_far_bases_two_steps_epsilon_sits_at_twice_the_bulk(base, top):
    """delta_g = 1e-6 << s^2: eps_g = 2 (top + log s) + O(mu or 1500), within 1e-90 of 2 top
    relative; the bracket holds that interval and is a few ulps wide."""
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(base, 0.5)], counts=[2], delta_g=1e-6))
    assert Fraction(b.lower) <= 2 * top * (1 - Fraction(1, 10**90))
    assert Fraction(b.upper) >= 2 * top * (1 + Fraction(1, 10**90))
    assert b.upper - b.lower <= 2.0**-48 * b.upper


@pytest.mark.parametrize("base", [Gaussian(1e-155), Gaussian(1e-300), Laplace(5e-324)])
def test_bulk_beyond_the_floats_gives_an_eps_beyond_them(base):
    """mu^2/2 (a) beyond the largest float: eps_g is finite but beyond every float: the lower
    end is the largest float (not inf: attainable), the upper end inf."""
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(base, 0.5)], counts=[2], delta_g=1e-6))
    assert b.lower == math.nextafter(math.inf, 0.0) and b.upper == math.inf


def test_far_base_beside_a_black_box_is_exact():
    """Two far Gaussian steps beside a randomized response of eps 1: at eps_g = 1 an outcome
    with a sampled step has loss ~1e200, one without has loss <= 2 log(1/2) + 1 < 1, so delta_g
    is 1 - (1 - s)^2 = 3/4 (to within e^{-10^11})."""
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(Gaussian(1e-100), 0.5), BlackBox(1.0)], counts=[2, 1],
                                             eps_g=1.0))
    assert Fraction(b.lower) <= Fraction(3, 4) <= Fraction(b.upper) * (1 + Fraction(1, 10**90))
    assert b.upper - b.lower <= 1e-12


@pytest.mark.parametrize("mu", [1e-310, 2.00097e-321, 5e-324])
def test_tiny_mu_bases_answer_zero_not_a_crash(mu):
    m = Subsampled(Gaussian(1.0, sensitivity=mu), 0.5)
    for eps_g in (1.0, 1e300):
        b = _bounds(lambda: optcomp.delta_bounds([m], counts=[2], eps_g=eps_g))
        assert b.lower == 0.0 and b.upper <= 1e-300
    b = _bounds(lambda: optcomp.epsilon_bounds([m], counts=[2], delta_g=1e-6))
    assert b.lower == 0.0 and b.upper <= 1e-300


def _gdp_delta(mu, x):
    """The mu-GDP profile Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu) at 200 digits."""
    with mpmath.workdps(200):
        mu, x = mpmath.mpf(mu), mpmath.mpf(x)
        return mpmath.ncdf(mu / 2 - x / mu) - mpmath.exp(x) * mpmath.ncdf(-mu / 2 - x / mu)


def test_far_base_beside_gaussians_delta_holds_the_mixture():
    """Two far steps (s = 1/2) beside three Gaussians of sigma 1 (GDP mu = sqrt 3), remove
    direction: a sampled step puts the loss beyond 1e199 (contributing 1), none leaves the far
    part at 2 log(1 - s) (to within e^{-10^199}), so delta_g(1) = 3/4 + 1/4 H_G(1 - 2 log(1/2)),
    H_G the GDP profile (~0.79); the add direction puts each far step at -log(1 - s) = log 2,
    H_G(1 - 2 log 2) (~0.69).  The two groups' bracket (the far group exact, the rest by the
    lattice) holds the larger."""
    with mpmath.workdps(200):
        remove = mpmath.mpf(3) / 4 + _gdp_delta(mpmath.sqrt(3), 1 + 2 * mpmath.log(2)) / 4
        add = _gdp_delta(mpmath.sqrt(3), 1 - 2 * mpmath.log(2))
        truth = max(remove, add)
        assert remove > add
    b = _bounds(lambda: optcomp.delta_bounds([Subsampled(Gaussian(1e-100), 0.5), Gaussian(1.0)], counts=[2, 3],
                                             eps_g=1.0))
    assert b.lower <= truth <= b.upper
    assert b.upper < 0.9  # (the ends of the law alone gave [0.5, 1])


@pytest.mark.parametrize("beside, counts", [(Gaussian(1.0), [2, 3]), (Laplace(1.0), [2, 1])])
def test_far_base_beside_lattice_mechanisms_epsilon_is_tight(beside, counts):
    """delta_g = 1e-6 << s^2: eps_g = mu^2 + O(mu) + the others' few units, within 1e-90 of
    mu^2 = 1e200 relative: the bracket (the two groups' basic composition above, either group
    alone below) holds that interval, a few ulps wide (the ends of the law gave [10.6, 2e100])."""
    top = Fraction(1e100) ** 2
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(1e-100), 0.5), beside], counts=counts,
                                               delta_g=1e-6))
    assert Fraction(b.lower) <= top * (1 - Fraction(1, 10**90))
    assert Fraction(b.upper) >= top * (1 + Fraction(1, 10**90))
    assert b.upper - b.lower <= 2.0**-48 * b.upper


def test_a_size_limit_keeps_one_step_as_its_lower_end():
    """Two steps of Subsampled(Gaussian(10), 0.01) at delta_g = 1e-300 stop at a size limit
    (the tail's range exceeds one tilt's float FFTs); one step is a marginal of the two, so its
    eps_g (the closed form's root, ~0.327) bounds the optimum from below.  The size limit's
    bracket was [0.023, 0.351]; its lower end now holds one step's."""
    lo, hi = _gaussian_eps_one_step(0.1, 0.01, 1e-300)
    b = _bounds(lambda: optcomp.epsilon_bounds([Subsampled(Gaussian(10.0), 0.01)], counts=[2], delta_g=1e-300))
    assert Fraction(b.lower) <= hi * (1 + Fraction(1, 10**9))  # (<= the truth: one step's root is below it)
    assert Fraction(b.lower) >= lo * (1 - Fraction(1, 10**9))
    assert Fraction(b.upper) >= hi
