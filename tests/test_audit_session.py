"""Audit of this session's merges (the exact finite composition intersected with the
lattice's bracket; the coarse pass at a size limit; the DP-SGD speed changes), each against
a reference written here from the definitions:

* finite pairs, Poisson-subsampled pairs (remove ((1 - q) Q + q P, Q), add the reverse;
  Zhu-Dong-Wang 2022 Thm 11) and black boxes (the four-outcome pair of KOV 2015): the
  composition enumerated outcome by outcome in exact rationals, delta(x) = sum (P - e^x Q)_+
  per global direction; at a lattice point e^x = P/Q rational, so ties are decided exactly;
* Gaussian + Laplace: delta(x) = E_{L ~ Laplace loss}[h_mu(x - L)] with the mu-GDP curve
  h_mu(y) = Phi(-y/mu + mu/2) - e^y Phi(-y/mu - mu/2) (Dong-Roth-Su), by mpmath quadrature;
* black boxes: tests/reference.py (60 digits);
* the Poisson-subsampled Gaussian, one step: tests/reference_dpsgd.py (its two directions'
  half-line integrals), two steps: E over the first step's outcome of the one-step curve
  (tests/test_subsampled.gauss_h_closed), split at the first step's crossing.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction as F

import mpmath as mp
import pytest

import optcomp
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Pair, Subsampled

import reference as R
import reference_dpsgd as D


# -- finite compositions, enumerated --------------------------------------------------------------
def _pair(p, q):
    return [(F(a), F(b)) for a, b in zip(p, q)]


def _sub(outs, s):
    s = F(s)
    return [((1 - s) * b + s * a, b) for a, b in outs]


def _black_box(eps, delta):
    # KOV's pair: (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0) against its mirror;
    # e^eps to 2^-300 (rationals): exact up to 1e-90, far below every float gap tested
    with mp.workdps(100):
        e = mp.exp(mp.mpf(eps))
        fr = lambda v: F(int(mp.nint(v * 2**300)), 2**300)  # noqa: E731
        a, b = fr((1 - mp.mpf(delta)) * e / (1 + e)), fr((1 - mp.mpf(delta)) / (1 + e))
    return [(F(delta), F(0)), (a, b), (b, a), (F(0), F(delta))]


def _compose(outs_list):
    law = {}
    for combo in itertools.product(*outs_list):
        P = Q = F(1)
        for a, b in combo:
            P, Q = P * a, Q * b
        if P == 0 and Q == 0:
            continue
        key = P / Q if Q else None  # None: loss +inf
        pa, qa = law.get(key, (F(0), F(0)))
        law[key] = (pa + P, qa + Q)
    return law


def _delta_at_ratio(law, r):
    return sum((P - r * Q for k, (P, Q) in law.items() if k is None or k > r), F(0))


def _mpq(x: F):
    return mp.mpf(x.numerator) / x.denominator


def _delta(law, x):
    r = mp.exp(mp.mpf(x))
    return sum((_mpq(P) - r * _mpq(Q) for k, (P, Q) in law.items() if k is None or _mpq(k) > r), mp.mpf(0))


def _eps(law, d):
    """The least x >= 0 with delta(x) <= d: decided exactly at the lattice points, the root
    between two of them x = log((A - d)/B) with A, B the masses above."""
    d = F(d)
    if _delta_at_ratio(law, F(1)) <= d:
        return mp.mpf(0)
    prev = F(1)
    for r in sorted(k for k in law if k is not None and k > 1):
        if _delta_at_ratio(law, r) <= d:
            above = [v for k, v in law.items() if k is None or k > prev]
            A, B = sum((P for P, _ in above), F(0)), sum((Q for _, Q in above), F(0))
            return mp.log(_mpq(A - d) / _mpq(B))
        prev = r
    return mp.inf


DY = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]  # dyadic: the deltas at atoms are floats


def _random_case(rng):
    def pmf_pair():
        n = rng.choice([2, 3])
        while True:
            p = [rng.choice(DY) for _ in range(n - 1)]
            q = [rng.choice(DY) for _ in range(n - 1)]
            if sum(p) <= 1 and sum(q) <= 1:
                p.append(1 - sum(p))
                q.append(1 - sum(q))
                if p != q:
                    return tuple(p), tuple(q)

    mechs, fw = [], []
    for _ in range(rng.choice([1, 2, 3])):
        u = rng.random()
        if u < 0.55:
            p, q = pmf_pair()
            m, o = Pair(p, q), _pair(p, q)
        elif u < 0.85:
            p, q = pmf_pair()
            s = rng.choice([0.5, 0.25, 0.75, 0.125, 0.3])
            m, o = Subsampled(Pair(p, q), s), _sub(_pair(p, q), s)
        else:
            e, d = rng.choice([(0.5, 0.125), (1.0, 0.01), (math.log(2), 0.125), (0.0, 0.125), (1.0, 0.0)])
            m, o = BlackBox(e, d), _black_box(e, d)
        for _ in range(rng.choice([1, 1, 2])):
            mechs.append(m)
            fw.append(o)
    laws = [_compose(fw), _compose([[(b, a) for a, b in o] for o in fw])]
    return mechs, laws


def _check_finite_case(seed):
    rng = random.Random(seed)
    mechs, laws = _random_case(rng)
    ratios = sorted({k for law in laws for k in law if k is not None and k >= 1})
    with mp.workdps(60):
        for _ in range(3):
            r, law = rng.choice(ratios), rng.choice(laws)
            dg = float(_delta_at_ratio(law, r))  # a tie: delta_g one of the curve's values at an atom
            for d in (dg, math.nextafter(dg, 0.0), math.nextafter(dg, 1.0), 0.0):
                d = min(max(d, 0.0), 1.0)
                for tol in (1e-3, 1e-9):
                    b = _bracket(optcomp.epsilon_bounds, mechs, delta_g=d, tol=tol)
                    truth = max(_eps(law_, d) for law_ in laws)
                    if truth == mp.inf or truth == 0 or all(m.kind == "atoms" and not isinstance(m, BlackBox)
                                                            for m in mechs):
                        assert b.lower <= truth <= b.upper, (mechs, d, tol, b, truth)
                    else:  # the black boxes' e^eps in rationals: 1e-80 of slack
                        assert b.lower <= truth + 1e-80 and truth - 1e-80 <= b.upper, (mechs, d, tol, b, truth)
            x = float(mp.log(_mpq(r)))
            for xx in (x, math.nextafter(x, 0.0), math.nextafter(x, 9.0)):
                b = _bracket(optcomp.delta_bounds, mechs, eps_g=xx, tol=1e-9)
                truth = max(_delta(law_, xx) for law_ in laws)
                assert b.lower <= truth * (1 + 1e-70) + 1e-80 and truth * (1 - 1e-70) - 1e-80 <= b.upper, \
                    (mechs, xx, b, truth)


def _bracket(f, *args, **kw):
    """The answer, or the certified bracket an ApproxTooCostly carries (both must hold the truth)."""
    try:
        return f(*args, **kw)
    except optcomp.ApproxTooCostly as exc:
        assert exc.bounds is not None
        return exc.bounds


@pytest.mark.parametrize("seed", [3, 11])
def test_finite_compositions_with_ties_against_enumeration(seed):
    """Pairs, Poisson-subsampled pairs and black boxes with dyadic masses, delta_g at the
    curve's values at atoms (exact ties) and one ulp either side, eps_g at the atoms."""
    _check_finite_case(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 140))  # (107, 113: the top atom's lower end, now fixed)
def test_finite_compositions_with_ties_against_enumeration_many(seed):
    _check_finite_case(seed)


def test_the_sessions_tie_in_both_directions():
    """Subsampled(Pair((0.1, 0.9), (0, 1)), 0.5), the add direction's delta(0) and the remove
    direction's mass at +inf: each as delta_g, and one ulp below."""
    m = Subsampled(Pair((0.1, 0.9), (0.0, 1.0)), 0.5)
    o = _sub(_pair((0.1, 0.9), (0.0, 1.0)), 0.5)
    laws = [_compose([o]), _compose([[(b, a) for a, b in o]])]
    add0 = float(_delta_at_ratio(laws[1], F(1)))
    with mp.workdps(60):
        for d in (0.05, math.nextafter(0.05, 0), add0, math.nextafter(add0, 0), math.nextafter(add0, 1)):
            for k in (1, 2):
                lw = [_compose([o] * k), _compose([[(b, a) for a, b in o]] * k)] if k > 1 else laws
                truth = max(_eps(law, d) for law in lw)
                b = optcomp.epsilon_bounds(m, k=k, delta_g=d, tol=1e-9)
                assert b.lower <= truth <= b.upper, (k, d, b, truth)


# -- the coarse pass at a size limit ---------------------------------------------------------------
def _gdp(mu, y):
    return mp.ncdf(-y / mu + mu / 2) - mp.exp(y) * mp.ncdf(-y / mu - mu / 2)


def _gauss_laplace_delta(sigma, scale, x):
    """Gaussian(sigma) + Laplace(scale), sensitivity 1: E over the Laplace loss (atoms +a with
    mass 1/2, -a with e^-a/2, density e^{(l-a)/2}/4 between) of the mu-GDP curve."""
    mu, a, x = 1 / mp.mpf(sigma), 1 / mp.mpf(scale), mp.mpf(x)
    h = lambda y: _gdp(mu, y)  # noqa: E731
    return (h(x - a) / 2 + mp.exp(-a) / 2 * h(x + a)
            + mp.quad(lambda l: mp.exp((l - a) / 2) / 4 * h(x - l), [-a, 0, a]))


@pytest.mark.parametrize("max_points", [2**10, 2**14])
@pytest.mark.parametrize("sigma,scale,x", [(1.0, 1.0, 0.0), (2.0, 0.5, 2.0), (0.7, 3.0, 0.7)])
def test_coarse_pass_bracket_gaussian_with_laplace(max_points, sigma, scale, x):
    with mp.workdps(40):
        truth = _gauss_laplace_delta(sigma, scale, x)
    b = _bracket(optcomp.delta_bounds, [Gaussian(sigma), Laplace(scale)], eps_g=x, tol=1e-10, max_points=max_points)
    assert b.lower <= truth <= b.upper, (b, truth)
    # and the epsilon side at the same delta: its bracket holds x
    d = float(truth)
    b = _bracket(optcomp.epsilon_bounds, [Gaussian(sigma), Laplace(scale)], delta_g=d, tol=1e-10,
                 max_points=max_points)
    with mp.workdps(40):
        assert b.lower == 0 or _gauss_laplace_delta(sigma, scale, b.lower) >= d
        assert _gauss_laplace_delta(sigma, scale, b.upper) <= d, (b, x)


@pytest.mark.parametrize("max_points", [2**10, 2**12])
@pytest.mark.parametrize("groups,dg,x", [([(0.01, 0.0, 10000)], 1e-6, 0.5),
                                         ([(0.1, 1e-7, 500), (0.5, 0.0, 20)], 1e-4, 2.0),
                                         ([(1.0, 0.0, 3), (0.03, 1e-9, 3000)], 1e-300, 0.5)])
def test_coarse_pass_bracket_black_boxes(max_points, groups, dg, x):
    eps, delta, counts = zip(*groups)
    b = _bracket(optcomp.epsilon_bounds, list(eps), list(delta), counts=list(counts), delta_g=dg, tol=1e-12,
                 max_points=max_points)
    lo, hi, _ = R.ref_epsilon_bounds(groups, dg)
    assert b.lower <= hi and lo <= b.upper, (b, lo, hi)
    b = _bracket(optcomp.delta_bounds, list(eps), list(delta), counts=list(counts), eps_g=x, tol=1e-12,
                 max_points=max_points)
    lo, hi, _ = R.ref_delta_bounds(groups, x)
    assert b.lower <= hi and lo <= b.upper, (b, lo, hi)


# -- the Poisson-subsampled Gaussian ---------------------------------------------------------------
_ONE_STEP = [(q, s) for q in (1e-6, 1e-3, 0.3, 1.0) for s in (0.3, 2.0, 100.0)]
_ONE_STEP_FAST = [(1e-6, 100.0), (1e-3, 0.3), (1.0, 2.0)]


@pytest.mark.parametrize("q,sigma", [c if c in _ONE_STEP_FAST else pytest.param(*c, marks=pytest.mark.slow)
                                     for c in _ONE_STEP])
def test_subsampled_gaussian_one_step_against_the_definition(q, sigma):
    base = D.gauss(sigma)
    m = Subsampled(Gaussian(sigma), q)
    with mp.workdps(60):
        prof = lambda e: max(D.h_remove(base, q, e), D.h_add(base, q, e))  # noqa: E731
        for x in (0.0, 1e-6, 0.1, 2.0):
            b = optcomp.delta_bounds([m], eps_g=x, tol=1e-9)
            truth = prof(mp.mpf(x))
            assert b.lower <= truth <= b.upper, (x, b, truth)
        for dg in (1e-5, 1e-100, 1e-300):
            b = optcomp.epsilon_bounds([m], delta_g=dg, tol=1e-9)
            assert b.lower == 0 or prof(mp.mpf(b.lower)) >= dg, (dg, b)
            assert prof(mp.mpf(b.upper)) <= dg, (dg, b)


def _two_step_forward(sigma, q, x, split):
    """H of two remove steps: E_{t ~ (1-q)N(0) + qN(1)}[h1(x - L(t))], split at ``split`` (the
    first step's crossing L(t) = x, where the integrand turns on within sigma^2/t)."""
    from test_subsampled import _gauss_pair, _mixed, gauss_h_closed

    p0, q0 = _gauss_pair(sigma, 1.0)
    a, b = _mixed(p0, q0, q)
    f = lambda t: a(t) * gauss_h_closed(sigma, q, x - mp.log(a(t) / b(t)), "forward")  # noqa: E731
    tc = mp.findroot(lambda t: mp.log(a(t) / b(t)) - x, split)
    left = [-mp.inf] + [mp.mpf(j) / 2 for j in range(-40, int(2 * tc) - 1)] + [tc - mp.mpf(k) for k in
                                                                                 ("0.3", "0.1", "0.03", "0.01")] + [tc]
    right = [tc + mp.mpf(j) / 100 for j in range(0, 151)] + [tc + 2, tc + 4, mp.inf]
    return mp.quad(f, left, maxdegree=10) + mp.quad(f, right, maxdegree=10)


@pytest.mark.slow
def test_subsampled_gaussian_two_steps_far_tail():
    """sigma 1.3079, q 3.55e-5, x 6.515: delta ~ 8.7e-109, half of it from the first step's far
    tail (t ~ 22 sigma, a spike sigma^2/t wide). The five-piece two-step quadrature of
    test_subsampled (gauss_h2, far=True) gives 6.4e-109 here, below the engine's bracket."""
    s, q, x = 1.3078725705822145, 3.5524256696680995e-05, 6.514876768048161
    with mp.workdps(40):
        truth = _two_step_forward(s, q, mp.mpf(x), 29)
    m = Subsampled(Gaussian(s), q)
    b = _bracket(optcomp.delta_bounds, [m], counts=[2], eps_g=x, tol=1e-6)  # a size limit here
    assert b.lower <= truth <= b.upper, (b, truth)


@pytest.mark.xfail(strict=True, reason="one ulp above an exactly decided tie the bracket is [0, 1.5e-7] and "
                   "ApproxTooCostly at tol 1e-9 (the exact finite composition's own bracket is [0, 3.01]): "
                   "not a wrong bound, an undecided 3-mechanism finite input")
def test_one_ulp_above_a_decided_tie_is_decided():
    """delta(0) = 0.916796875 exactly (dyadic masses): at delta_g = that value the answer is
    [0, 0]; one ulp above, eps_g = 0 still (delta is nonincreasing), but no answer within tol."""
    mechs = [Subsampled(Pair((0.375, 0.25, 0.375), (0.125, 0.875, 0.0)), 0.3),
             Pair((0.125, 0.75, 0.125), (0.75, 0.0, 0.25)), Pair((0.625, 0.375), (0.0, 1.0))]
    fw = [_sub(_pair((0.375, 0.25, 0.375), (0.125, 0.875, 0.0)), 0.3), _pair((0.125, 0.75, 0.125), (0.75, 0.0, 0.25)),
          _pair((0.625, 0.375), (0.0, 1.0))]
    laws = [_compose(fw), _compose([[(b, a) for a, b in o] for o in fw])]
    tie = max(_delta_at_ratio(law, F(1)) for law in laws)
    assert float(tie) == tie and tie == F(0.916796875)
    assert optcomp.epsilon_bounds(mechs, delta_g=float(tie), tol=1e-9) == (0.0, 0.0)
    b = optcomp.epsilon_bounds(mechs, delta_g=math.nextafter(float(tie), 1.0), tol=1e-9)
    assert b == (0.0, 0.0)


@pytest.mark.parametrize("mechs,delta_g,atom", [
    ([Subsampled(Pair((0.0, 0.5, 0.5), (0.625, 0.375, 0.0)), 0.25)] * 2, 0.234375, (169, 144)),
    ([Subsampled(Pair((0.5, 0.375, 0.125), (0.375, 0.0, 0.625)), 0.5)], 0.1875, (7, 6)),
])
def test_lower_bound_at_the_top_atom_is_at_most_the_optimum(mechs, delta_g, atom):
    """Remove direction of Subsampled(Pair(p, q), s): ((1 - s) q + s p, q). delta_g is the
    P-mass at +inf exactly (15/64: the outcomes where q = 0, both steps; 3/16: one step), so
    delta(x) <= delta_g exactly from the top finite atom log(P/Q) on (169/144 = (13/12)^2;
    7/6), and above delta_g just below it: the optimum is that atom's position."""
    fw = [_sub(_pair(m.mechanism.p, m.mechanism.q), m.q) for m in mechs]
    laws = [_compose(fw), _compose([[(b, a) for a, b in o] for o in fw])]
    with mp.workdps(60):
        truth = mp.log(mp.mpf(atom[0]) / atom[1])
        assert max(_eps(law, delta_g) for law in laws) == truth
        b = optcomp.epsilon_bounds(mechs, delta_g=delta_g)
        assert truth <= b.upper
        assert b.lower <= truth, (b, b.lower - truth)  # was 0.16008541534707288 > 0.160085415347072851647...
