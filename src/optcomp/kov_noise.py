"""KOV Section 4: noise for k queries (Kairouz, Oh and Viswanath, *The Composition Theorem for
Differential Privacy*, ICML 2015 / IEEE Trans. IT 2017, Section 4; the statements are restated
in ``../shared/papers/README.md``).

* Corollary 4.1: for eps ∈ (0, 0.9] and delta ∈ (0, 1], per-query
  (sqrt(eps²/(4k·log(e + eps/delta))), delta/(2k))-DP gives (eps, delta)-DP under k-fold
  adaptive composition.
* Theorem 4.2 (Laplace) and Theorem 4.3 (Gaussian): noise of variance
  8kΔ²·log(e + eps/delta)/eps² per query suffices for (eps, delta)-DP under k-fold
  composition -- Laplace for eps ∈ (0, 0.9], Gaussian "for any eps > 0".  The staircase
  mechanism meets Corollary 4.1's per-query eps with variance O(kΔ² log(e + eps/delta)/eps²)
  (KOV cite Geng–Viswanath for the constant; no number is stated).
* Theorem 4.4: the k-fold two-sided geometric mechanism (sensitivity 1) achieves exactly the
  optimal privacy region of k (eps, 0)-DP mechanisms: its privacy loss is randomized
  response's.

What the exact profiles say (tests/test_kov_noise.py): Thm 4.3 holds on its stated domain
only for moderate eps.  Its proof (Appendix B) rests on the condition of
:func:`kov_gaussian_condition`, and the step "sigma² ≥ (4kΔ²/eps²) log(e + eps/delta) and
sigma² ≥ kΔ²/(4 eps) ensure it" fails once eps is large: e.g. k = 1, eps = 200, delta = 1e-6,
the Gaussian with the stated variance has delta(200) ≈ 7.3e-6 > 1e-6 (and k = 1, eps = 100,
delta = 0.5 gives 0.86).  :func:`gaussian_for` returns the stated noise;
:func:`kov_gaussian_condition` says whether the appendix's condition holds for it.

Every noise parameter returned here is rounded **up** (more noise is the safe side) and every
per-query privacy parameter **down**.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

from ._inputs import _integer, check_k
from ._rounding import mpf_dir
from .mechanisms import BlackBox, Gaussian, Geometric, Laplace, Staircase
from .mechanisms._base import _real

__all__ = ["kov_variance", "per_query_budget", "laplace_for", "gaussian_for", "staircase_for",
           "kov_gaussian_condition", "geometric_as_randomized_response", "gaussian_composition",
           "staircase_gamma"]

LAPLACE_EPS_MAX = 0.9  # Thm 4.2 / Cor 4.1 are stated for eps in (0, 0.9]


def _args(k, eps, delta):
    return check_k(k), _real("eps", eps), _real("delta", delta, hi=1.0, hi_open=False)


def _log_term(eps: float, delta: float):
    return mpmath.log(mpmath.e + mpmath.mpf(eps) / mpmath.mpf(delta))


def kov_variance(k, eps, delta, sensitivity=1.0) -> float:
    """KOV Thm 4.2 / 4.3: the per-query noise variance 8kΔ²·log(e + eps/delta)/eps² that
    suffices for (eps, delta)-DP under k-fold composition of Laplace (eps ≤ 0.9) or Gaussian
    noise; rounded up (computed at 40 digits)."""
    k, eps, delta = _args(k, eps, delta)
    sens = _real("sensitivity", sensitivity)
    with mpmath.workdps(40):
        v = 8 * k * mpmath.mpf(sens) ** 2 * _log_term(eps, delta) / mpmath.mpf(eps) ** 2
        return mpf_dir(v * (1 + mpmath.mpf(2) ** -120), True)


def per_query_budget(k, eps, delta) -> tuple[float, float]:
    """KOV Corollary 4.1: per-query (eps_0, delta_0) = (sqrt(eps²/(4k·log(e + eps/delta))),
    delta/(2k)) gives (eps, delta)-DP under k-fold composition, for eps ∈ (0, 0.9] and
    delta ∈ (0, 1].  Both rounded down (a smaller per-query budget is the safe side)."""
    k, eps, delta = _args(k, eps, delta)
    with mpmath.workdps(40):
        e0 = mpmath.sqrt(mpmath.mpf(eps) ** 2 / (4 * k * _log_term(eps, delta)))
        e0 = mpf_dir(e0 * (1 - mpmath.mpf(2) ** -120), False)
    d0 = float(Fraction(delta) / (2 * k))
    if Fraction(d0) > Fraction(delta) / (2 * k):
        d0 = math.nextafter(d0, 0.0)
    return e0, d0


def laplace_for(k, eps, delta, sensitivity=1.0) -> Laplace:
    """KOV Thm 4.2: the Laplace mechanism of variance 2b² = 8kΔ²·log(e + eps/delta)/eps²,
    i.e. scale b = 2Δ·sqrt(k·log(e + eps/delta))/eps (rounded up), stated to give
    (eps, delta)-DP under k-fold composition for eps ∈ (0, 0.9], delta ∈ (0, 1]."""
    v = kov_variance(k, eps, delta, sensitivity)
    with mpmath.workdps(40):
        return Laplace(mpf_dir(mpmath.sqrt(mpmath.mpf(v) / 2) * (1 + mpmath.mpf(2) ** -120), True),
                       _real("sensitivity", sensitivity))


def gaussian_for(k, eps, delta, sensitivity=1.0) -> Gaussian:
    """KOV Thm 4.3: the Gaussian mechanism of variance sigma² = 8kΔ²·log(e + eps/delta)/eps²
    (sigma rounded up), stated to give (eps, delta)-DP under k-fold composition for every
    eps > 0 -- but see :func:`kov_gaussian_condition`."""
    v = kov_variance(k, eps, delta, sensitivity)
    with mpmath.workdps(40):
        return Gaussian(mpf_dir(mpmath.sqrt(mpmath.mpf(v)) * (1 + mpmath.mpf(2) ** -120), True),
                        _real("sensitivity", sensitivity))


def kov_gaussian_condition(k, eps, delta, sigma, sensitivity=1.0) -> bool:
    """KOV Appendix B's sufficient condition for k Gaussian queries of noise sigma to be
    (eps, delta)-DP: with r = kΔ²/sigma²,
    eps ≥ r/2 + sqrt(2r·log(e + sqrt(r)/delta))  (evaluated at 40 digits).

    The appendix claims that sigma² ≥ (4kΔ²/eps²)·log(e + eps/delta) together with
    sigma² ≥ kΔ²/(4 eps) implies it; that step fails for large eps (k = 1, eps = 100,
    delta = 0.5: both hold, this condition does not, and the mechanism's delta(100) is 0.86)."""
    k, eps, delta = _args(k, eps, delta)
    sigma = _real("sigma", sigma)
    sens = _real("sensitivity", sensitivity)
    with mpmath.workdps(40):
        r = k * mpmath.mpf(sens) ** 2 / mpmath.mpf(sigma) ** 2
        need = r / 2 + mpmath.sqrt(2 * r * mpmath.log(mpmath.e + mpmath.sqrt(r) / mpmath.mpf(delta)))
        return bool(mpmath.mpf(eps) >= need)


def gaussian_composition(k, sigma, sensitivity=1.0) -> Gaussian:
    """The k-fold composition of Gaussian(sigma, Δ) *is* one Gaussian mechanism with
    mu² = kΔ²/sigma² (Dong–Roth–Su, GDP composition): Gaussian(sigma/sqrt(k), Δ), its sigma
    rounded down (a smaller sigma is the pessimistic side)."""
    k = check_k(k)
    sigma = _real("sigma", sigma)
    with mpmath.workdps(40):
        s = mpf_dir(mpmath.mpf(sigma) / mpmath.sqrt(k) * (1 - mpmath.mpf(2) ** -120), False)
    return Gaussian(s, _real("sensitivity", sensitivity))


def staircase_gamma(eps) -> float:
    """Geng–Viswanath's variance-optimal gamma* = 1/(1 + e^{eps/2}) (nearest float)."""
    return Staircase.optimal_gamma(eps)


def staircase_for(k, eps, delta, sensitivity=1.0) -> Staircase:
    """The staircase mechanism of KOV Section 4.1: per-query eps_0 of Corollary 4.1 (the
    staircase is pure DP, so delta_0 is unused) with Geng–Viswanath's optimal gamma*."""
    e0, _ = per_query_budget(k, eps, delta)
    return Staircase(e0, staircase_gamma(e0), _real("sensitivity", sensitivity))


def geometric_as_randomized_response(eps, sensitivity=1) -> BlackBox:
    """KOV Thm 4.4: the two-sided geometric mechanism with sensitivity 1 has the privacy loss
    of (eps, 0) randomized response (two atoms ±eps, masses e^eps/(1 + e^eps) and
    1/(1 + e^eps)), so its k-fold composition is exactly the optimal composition of k
    (eps, 0)-DP mechanisms (KOV Thm 3.3 / MV Thm 1.4).  Returns that black box; for
    sensitivity Δ > 1 the geometric mechanism is (Δ·eps)-DP but its loss has Δ + 1 atoms,
    and no black box is equivalent (ValueError)."""
    g = Geometric(eps, sensitivity)
    if _integer("sensitivity", sensitivity, 1, 2**20) != 1:
        raise ValueError(f"sensitivity must be 1 for KOV Thm 4.4, got {sensitivity!r}")
    return BlackBox(g.eps, 0.0)
