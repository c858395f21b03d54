"""Gaussian profiles at tiny mu = sensitivity/sigma, plain and subsampled, against references
written from the definitions at 2400 bits.

At mu = 1e-135 the closed form Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu) cancels ~450 bits,
so each certified decision of a profile search needed ~1000-bit erfc evaluations (3-10 s for
one eps_g of Subsampled(Gaussian(1, sensitivity=1e-135), 0.5) at delta_g 1e-300); the
Gaussian now takes a Taylor series of Phi(a) - Phi(b) there, and the subsampled add
direction its threshold log g = x - log1p(-(1 - s) expm1(x)/s) (log s + x - log c lost every
digit of x ~ 1e-134 at any precision below ~450 bits).  Both must keep their brackets around
the truth.
"""

from __future__ import annotations

import mpmath
import pytest

from optcomp.mechanisms import Gaussian, Subsampled

PREC = 2400


def _gauss_delta(mu, x):
    """delta(x) = int (p - e^x q)_+ for p = N(mu, 1), q = N(0, 1): p > e^x q iff mu y - mu^2/2
    > x, i.e. y > y0, so delta = P[Y > y0] - e^x Q[Y > y0]."""
    with mpmath.workprec(PREC):
        mu, x = mpmath.mpf(mu), mpmath.mpf(x)
        y0 = (x + mu * mu / 2) / mu
        return +(mpmath.ncdf(mu - y0) - mpmath.exp(x) * mpmath.ncdf(-y0))


def _add_delta(mu, s, x):
    """The add direction H_{e^x}(Q || (1 - s) Q + s P), p = N(mu, 1), q = N(0, 1): q > e^x ((1 -
    s) q + s p) iff e^{mu y - mu^2/2} < (e^{-x} - (1 - s))/s, i.e. y < y0; H = Q[Y < y0] (1 -
    e^x (1 - s)) - e^x s P[Y < y0] (0 when e^{-x} <= 1 - s)."""
    with mpmath.workprec(PREC):
        mu, s, x = mpmath.mpf(mu), mpmath.mpf(s), mpmath.mpf(x)
        r = (mpmath.exp(-x) - (1 - s)) / s
        if r <= 0:
            return mpmath.mpf(0)
        y0 = (mpmath.log(r) + mu * mu / 2) / mu
        return +(mpmath.ncdf(y0) * (1 - mpmath.exp(x) * (1 - s)) - mpmath.exp(x) * s * mpmath.ncdf(y0 - mu))


def _remove_delta(mu, s, x):
    """The remove direction H_{e^x}((1 - s) Q + s P || Q): (1 - s) q + s p > e^x q iff
    e^{mu y - mu^2/2} > (e^x - (1 - s))/s, y > y0; H = s P[Y > y0] - (e^x - (1 - s)) Q[Y > y0]."""
    with mpmath.workprec(PREC):
        mu, s, x = mpmath.mpf(mu), mpmath.mpf(s), mpmath.mpf(x)
        r = (mpmath.exp(x) - (1 - s)) / s
        y0 = (mpmath.log(r) + mu * mu / 2) / mu
        return +(s * mpmath.ncdf(mu - y0) - (mpmath.exp(x) - (1 - s)) * mpmath.ncdf(-y0))


MUS = [3e-7, 1e-30, 1e-135, 1e-300]
CS = [0.0, 0.5, 5.0, 20.0, 37.0]


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("c", CS)
def test_gaussian_profile_at_tiny_mu(mu, c):
    x = c * mu
    truth = _gauss_delta(mu, x)
    b = Gaussian(1.0, sensitivity=mu).profile_bounds(x)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 1e-12 * b.upper + 1e-320


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("c", CS)
@pytest.mark.parametrize("s", [0.5, 1e-3])
def test_subsampled_gaussian_profile_at_tiny_mu(mu, c, s):
    x = c * mu * s
    truth = max(_add_delta(mu, s, x), _remove_delta(mu, s, x))
    b = Subsampled(Gaussian(1.0, sensitivity=mu), s).profile_bounds(x)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 1e-12 * b.upper + 1e-320
