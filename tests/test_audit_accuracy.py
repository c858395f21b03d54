"""Accuracy items of an independent 60-digit audit: ``optimal`` within its 1e-12 claim on
heterogeneous products of huge binomial groups (meet in the middle), and the certified
bracket reaching its tolerance when the residual target lies below the float range
(delta_i ~ delta_g ~ 1e-200).

The reference is written from the definitions (MV Thm 1.5 / KOV Thm 3.3): the composition
of (eps_i, delta_i) randomized responses has

    delta_opt(x) = 1 - prod_i (1 - delta_i) (1 - H(x)),   H(x) = E_P0[(1 - e^{x - L})_+],

L = sum_i eps_i s_i with independent s_i = +-1, P0[s_i = +1] = e^eps_i/(1 + e^eps_i).  For
groups (eps_g, n_g) the number m_g of +1 is Binomial(n_g, p_g) and L = sum_g (2 m_g - n_g)
eps_g.  The largest group is summed over a window of its binomial in mpmath (60 digits):
from the least m that can put L above x upward by the exact term ratio
(n - m)/(m + 1) e^eps, until past the mode and below 1e-55 of the largest term (the rest
bounded by a geometric series, asserted negligible); the other groups are enumerated
(exact rational positions).  With suffix sums A_j = sum_{m >= j} P(m) and B_j = sum_{m >= j}
P(m) e^{-L(m)} of the big group, an atom a of the others contributes
pa (A_j - e^{x - a} B_j), j the least m with L(m) + a > x (exact rationals)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest

import optcomp

DPS = 60


def _mpf(f: Fraction):
    return mp.mpf(f.numerator) / f.denominator


def _binomial_factor(e: Fraction, n: int):
    """[(exact loss (2m - n) e, P0 mass)] of one group, every m."""
    E = _mpf(e)
    lp, lq = -mp.log1p(mp.exp(-E)), -mp.log1p(mp.exp(E))
    return [((2 * m - n) * e, mp.exp(mp.loggamma(n + 1) - mp.loggamma(m + 1) - mp.loggamma(n - m + 1)
                                     + m * lp + (n - m) * lq)) for m in range(n + 1)]


def ref_excess(groups, x) -> mp.mpf:
    """H(x) of the groups [(eps, count)] (floats taken exactly), at the working precision."""
    X = Fraction(x)
    groups = sorted(((Fraction(e), int(n)) for e, n in groups if e > 0), key=lambda g: -g[1])
    (eb, nb), rest = groups[0], groups[1:]
    atoms = [(Fraction(0), mp.mpf(1))]
    for e, n in rest:
        atoms = [(a + b, pa * pb) for a, pa in atoms for b, pb in _binomial_factor(e, n)]
    E = _mpf(eb)
    lp, lq = -mp.log1p(mp.exp(-E)), -mp.log1p(mp.exp(E))

    def first_above(a: Fraction) -> int:  # least m with (2m - nb) eb + a > X
        return max(0, min(nb + 1, math.floor((X - a) / (2 * eb) + Fraction(nb, 2)) + 1))

    firsts = [first_above(a) for a, _ in atoms]
    lo = min(firsts)
    if lo > nb:
        return mp.mpf(0)
    t = mp.exp(mp.loggamma(nb + 1) - mp.loggamma(lo + 1) - mp.loggamma(nb - lo + 1) + lo * lp + (nb - lo) * lq)
    ratio, mode = mp.exp(lp - lq), nb / (1 + mp.exp(-E))
    pm, largest, m = [], t, lo
    while m <= nb:
        pm.append(t)
        largest = max(largest, t)
        if m > mode + 1 and t < largest * mp.mpf(10) ** -55:
            break
        t = t * (nb - m) / (m + 1) * ratio
        m += 1
    hi = lo + len(pm) - 1
    if hi < nb:  # the terms above hi decrease geometrically (the ratio decreases in m)
        r = mp.mpf(nb - hi) / (hi + 1) * ratio
        assert r < 1 and pm[-1] * r / (1 - r) < largest * mp.mpf(10) ** -50
    A = [mp.mpf(0)] * (len(pm) + 1)
    B = [mp.mpf(0)] * (len(pm) + 1)
    for j in range(len(pm) - 1, -1, -1):
        A[j] = A[j + 1] + pm[j]
        B[j] = B[j + 1] + pm[j] * mp.exp(-_mpf((2 * (lo + j) - nb) * eb))
    total = mp.mpf(0)
    for (a, pa), first in zip(atoms, firsts):
        j = first - lo
        if j < len(pm):
            total += pa * (A[j] - mp.exp(_mpf(X - a)) * B[j])
    return total


def ref_delta(groups, deltas, x) -> mp.mpf:
    """delta_opt(x) = (1 - prod(1 - delta_i)) + prod(1 - delta_i) H(x) (MV Thm 1.5)."""
    log_no = mp.fsum(n * mp.log1p(-mp.mpf(d)) for (_, n), d in zip(groups, deltas) if d)
    return -mp.expm1(log_no) + mp.exp(log_no) * ref_excess(groups, x)


def ref_target(groups, deltas, delta_g) -> mp.mpf:
    """t = 1 - (1 - delta_g) / prod(1 - delta_i), exactly (rationals: it cancels to ~1e-399)."""
    no = Fraction(1)
    for (_, n), d in zip(groups, deltas):
        no *= (1 - Fraction(d)) ** n
    t = 1 - (1 - Fraction(delta_g)) / no
    return _mpf(t)


@pytest.mark.parametrize("eps,delta,counts,x,quoted", [
    # meet in the middle over a window of 34,075 atoms of the 10^6 group (before: 2.4e-10
    # above, from a position error charged as n eps = 10^4 instead of the window's ~390)
    ([0.01, 0.05, 0.2], [0.0, 0.0, 0.0], [1000000, 30, 10], 378.9030862826424, "6.6177519432634e-237"),
    # five mechanisms of eps 800 shift the loss by 4000 exactly (before: 1.6e-10 above)
    ([0.001, 800.0, 0.05], [0.0, 1e-200, 0.0], [3000000, 5, 200], 4012.5185778339423, "1.000000000000368e-09"),
])
def test_optimal_delta_within_1e_12_of_the_truth(eps, delta, counts, x, quoted):
    with mp.workdps(DPS):
        ref = ref_delta(list(zip(eps, counts)), delta, x)
        assert abs(ref / mp.mpf(quoted) - 1) < 1e-13  # the audit's quoted truth, recomputed
        for method in ("optimal", "auto"):
            d = optcomp.delta_g(eps, delta, counts=counts, eps_g=x, method=method)
            assert ref <= d <= ref * (1 + mp.mpf(1e-12)), (method, d, ref, d / ref - 1)


def test_epsilon_bounds_reach_the_tolerance_below_the_float_range():
    """delta_i = 1e-200 (five mechanisms) and delta_g = 5e-200: the residual target t =
    1 - (1 - delta_g)/(1 - delta_i)^5 ~ 1e-399 is below float64 (before: [40.12, 102.5], the
    lattice's masses cannot resolve it); the windowed product with masses and t scaled by
    2^1000 brackets the root within tol, around the 60-digit root."""
    groups, deltas = [(0.01, 10000), (0.5, 5)], [0.0, 1e-200]
    b = optcomp.epsilon_bounds([0.01, 0.5], [0.0, 1e-200], counts=[10000, 5], delta_g=5e-200)
    assert b.gap <= 1e-3, b
    with mp.workdps(DPS):
        t = ref_target(groups, deltas, 5e-200)
        assert mp.mpf("9.99e-400") < t < mp.mpf("1.001e-399")
        # the least x with H(x) <= t lies in (lower, upper]: H(lower) > t >= H(upper) would
        # contradict it only if the bracket were wrong -- checked at its two ends
        assert ref_excess(groups, b.upper) <= t, b
        assert b.lower == 0.0 or ref_excess(groups, b.lower) >= t * (1 - mp.mpf(1e-12)), b
        e = optcomp.epsilon_g([0.01, 0.5], [0.0, 1e-200], counts=[10000, 5], delta_g=5e-200, method="optimal")
        assert ref_excess(groups, e) <= t
        assert abs(e - 44.922171435) < 1e-9  # the audit's quoted truth
