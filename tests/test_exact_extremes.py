"""Finite laws at the far ends of their parameters: a geometric mechanism of sensitivity up to
2^20 and a two-atom pair whose masses differ by 1e300, composed up to 10^6 times.  References
are written from the definitions in 60-digit mpmath: the hockey stick
H(x) = sum_outcomes P(o) (1 - e^{x - L(o)})_+ over the listed loss atoms (the geometric
mechanism's law from its noise pmf, the pair's product measure by binomial counts)."""

from __future__ import annotations

import time
from fractions import Fraction

import mpmath
import pytest

import optcomp
from optcomp.mechanisms import Geometric, Pair, RandomizedResponse

DPS = 60


def _mp(x) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def _geometric_atoms(eps: float, sens: int):
    """(loss, P-mass) of y = Z against y - sens, Z two-sided geometric with
    P[Z = z] = (1 - r)/(1 + r) r^|z|, r = e^-eps: the loss eps (|y - sens| - |y|) summed
    over y <= 0 (loss sens eps), 0 < y < sens, and y >= sens (loss -sens eps), in closed form."""
    e = _mp(eps)
    r = mpmath.exp(-e)
    c = (1 - r) / (1 + r)
    atoms = [(sens * e, 1 / (1 + r)), (-sens * e, r**sens / (1 + r))]
    atoms += [((sens - 2 * y) * e, c * r**y) for y in range(1, sens)]
    return atoms


def _excess(atoms, x) -> mpmath.mpf:
    return mpmath.fsum(m * -mpmath.expm1(x - l) for l, m in atoms if l > x)


def _root(H, lo, hi, delta):
    """The least x in [lo, hi] with H(x) <= delta (H decreasing, H(lo) > delta >= H(hi))."""
    lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        if H(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def _check(bounds, truth, value=None):
    assert bounds.lower <= truth <= bounds.upper, (bounds, truth)
    if value is not None:
        assert value >= truth


# ----------------------------------------------------------------------------- Geometric


@pytest.mark.parametrize("eps,sens,x", [(1.5, 5000, 3000.5), (1.5, 5000, 7499.0), (0.01, 5000, 20.0),
                                        (700.0, 4097, 2867899.0), (1e-3, 4100, 0.5)])
def test_geometric_large_sensitivity_one_copy(eps, sens, x):
    with mpmath.workdps(DPS):
        atoms = _geometric_atoms(eps, sens)
        truth = _excess(atoms, _mp(x))
    _check(optcomp.delta_bounds([Geometric(eps, sensitivity=sens)], counts=[1], eps_g=x), truth)


def test_geometric_large_sensitivity_above_the_top():
    # the top atom is sens * eps: above it delta_g is 0 (the atoms cut at +inf weigh < 2^-1200)
    g = Geometric(1.5, sensitivity=5000)
    b = optcomp.delta_bounds([g], counts=[1], eps_g=7500.25)
    assert b.lower == 0.0 and b.upper <= 1e-300


def _top_pair(eps: float, sens: int):
    """Two copies near the top: only the pair of top atoms (loss 2 sens eps, mass
    1/(1 + r)^2) lies above 2 sens eps - 2 eps."""
    with mpmath.workdps(DPS):
        e = _mp(eps)
        return 2 * sens * e, (1 / (1 + mpmath.exp(-e))) ** 2


@pytest.mark.parametrize("sens", [2**13, 2**20])
def test_geometric_sensitivity_two_copies(sens):
    """The reproducer: Geometric(1000, sensitivity=2^20) twice at delta_g = 1e-6 (it took
    minutes listing 2^20 atoms in 256-bit arithmetic)."""
    g = Geometric(1000.0, sensitivity=sens)
    top, m = _top_pair(1000.0, sens)
    with mpmath.workdps(DPS):
        truth = top + mpmath.log1p(-mpmath.mpf("1e-6") / m)  # m (1 - e^{x - top}) = 1e-6
    _check(optcomp.epsilon_bounds([g], counts=[2], delta_g=1e-6), truth,
           optcomp.epsilon_g([g], counts=[2], delta_g=1e-6))
    x = float(top) - 0.5  # exact
    with mpmath.workdps(DPS):
        truth_d = m * -mpmath.expm1(mpmath.mpf(-0.5))
    _check(optcomp.delta_bounds([g], counts=[2], eps_g=x), truth_d)


# ----------------------------------------------------------------------------- the pair


def _pair_excess(k: int, x, a: Fraction, terms: int = 8):
    """H(x) of k copies of Pair((a, 1), (1, a)) (either direction) -- the pair of distributions
    (a, 1)/(1 + a) and (1, a)/(1 + a), as Pair documents: j copies at the outcome of loss -l
    (mass a/(1 + a) each), k - j at +l (mass 1/(1 + a)), l = log(1/a): the binomial sum over
    j < terms (the rest weighs below C(k, terms) a^terms / (1 - k a) < 1e-100 here).  (The
    normalisation weighs (1 + a)^-k: 1 - 1e-14 at a = 1e-20, k = 10^6, where the exact
    composition's bracket is 6e-16 wide.)"""
    am = _mp(a)
    l = -mpmath.log(am)
    scale = (1 + am) ** -k
    return mpmath.fsum(mpmath.binomial(k, j) * am**j * scale * -mpmath.expm1(x - (k - 2 * j) * l)
                       for j in range(terms) if (k - 2 * j) * l > x)


@pytest.mark.parametrize("a,k", [(1e-300, 3), (1e-300, 1000), (1e-300, 10**6), (5e-324, 10**6), (1e-20, 10**6)])
def test_pair_huge_ratio(a, k):
    """Pair((a, 1), (1, a)) composed k times (a = 1e-300, k = 10^6: > 120 s, the pivot
    probability 1/(1 + 1e-300) rounded to 1 and its masses came out NaN)."""
    P = Pair((a, 1.0), (1.0, a))
    a = Fraction(a)
    with mpmath.workdps(DPS):
        top = k * -mpmath.log(_mp(a))
        truth = _root(lambda x: _pair_excess(k, x, a), top - 1, top, mpmath.mpf("1e-6"))
    _check(optcomp.epsilon_bounds([P], counts=[k], delta_g=1e-6), truth,
           optcomp.epsilon_g([P], counts=[k], delta_g=1e-6))
    for d in (0.5, 1e-3, 1.0):
        x = float(top) - d
        with mpmath.workdps(DPS):
            truth_d = _pair_excess(k, _mp(x), a)
        _check(optcomp.delta_bounds([P], counts=[k], eps_g=x), truth_d)


@pytest.mark.slow
@pytest.mark.parametrize("call", [
    lambda: optcomp.epsilon_g([Geometric(1000, sensitivity=2**20)], counts=[2], delta_g=1e-6),
    lambda: optcomp.delta_g([Geometric(1000, sensitivity=2**20)], counts=[2], eps_g=2097151999.5),
    lambda: optcomp.epsilon_g([Pair((1e-300, 1), (1, 1e-300))], counts=[10**6], delta_g=1e-6),
    lambda: optcomp.delta_g([Pair((1e-300, 1), (1, 1e-300))], counts=[10**6], eps_g=690775527.0),
])
def test_extremes_time(call):
    t = time.perf_counter()
    call()
    assert time.perf_counter() - t < 10.0


@pytest.mark.parametrize("eps", [1e-7, 1e-10, 1e-15])
def test_tiny_eps_finite_laws_are_exact(eps):
    """Loss atoms of size ~eps: their long double positions carried an absolute error floor
    (2^-62, i.e. 2e-12 of 1e-7), so method='optimal' refused at 1e-12; the position errors
    are now relative to the positions.  References from the definitions (60 digits):
    Geometric(eps, 2) at x = 0 is the total variation 1 - e^-eps; RandomizedResponse(eps, 3)
    is (e^eps - 1)/(e^eps + 2); two copies of the latter by enumerating the 9 outcomes."""
    with mpmath.workdps(60):
        e = mpmath.mpf(eps)
        geo = -mpmath.expm1(-e)
        rr = mpmath.expm1(e) / (mpmath.exp(e) + 2)
        # RR with 3 values: P = (e^eps, 1, 1)/(e^eps + 2), Q = (1, e^eps, 1)/(e^eps + 2)
        z = mpmath.exp(e) + 2
        P, Q = [mpmath.exp(e) / z, 1 / z, 1 / z], [1 / z, mpmath.exp(e) / z, 1 / z]
        rr2 = mpmath.fsum(max(P[a] * P[b] - Q[a] * Q[b], 0) for a in range(3) for b in range(3))
    for mech, k, truth in [(Geometric(eps, 2), 1, geo), (RandomizedResponse(eps, 3), 1, rr),
                           (RandomizedResponse(eps, 3), 2, rr2)]:
        v = optcomp.delta_g(mech, k=k, eps_g=0.0, method="optimal")
        assert truth <= v <= truth * (1 + mpmath.mpf("1e-12")), (mech, k, v, truth)
