"""A Pair whose floats do not sum to exactly 1 is the pair of distributions (p/Σp, q/Σq).

Masses taken as given would be measures of total 1 + 2^-55 (0.1 + 0.4 + 0.5 in binary), whose
hockey-stick divergence at k copies carries (Σp)^k - (Σp - δ)^k at +inf: above the bracket the
engine reports for any pair of distributions (an audit found 1.1e-16 above it at k = 4), and
above 1 for a large k.  The references here are written from the definition with the sums
taken exactly: delta(x) = Σ_tuples (P^k - e^x Q^k)_+ over the normalised rationals.
"""

import itertools
import warnings
import math
from fractions import Fraction

import mpmath
import pytest

import optcomp
from optcomp.mechanisms import Pair, Profile

mp = mpmath.mp


def normalised(v):
    s = sum((Fraction(x) for x in v), Fraction(0))
    return [Fraction(x) / s for x in v]


def delta_ref(p, q, k: int, x: float):
    """Σ over k-tuples of (P - e^x Q)_+ of the normalised pair, in 80-digit mpmath, the
    larger of the two directions."""
    with mpmath.workdps(80):
        ex = mpmath.exp(mpmath.mpf(x))
        best = mpmath.mpf(0)
        for a, b in ((p, q), (q, p)):
            tot = mpmath.mpf(0)
            for t in itertools.product(range(len(a)), repeat=k):
                pa = math.prod(a[i] for i in t)
                qa = math.prod(b[i] for i in t)
                d = mpmath.mpf(pa.numerator) / pa.denominator - ex * (mpmath.mpf(qa.numerator) / qa.denominator)
                if d > 0:
                    tot += d
            best = max(best, tot)
        return best


def test_decimal_masses_with_mass_at_infinity_are_normalised():
    p, q = (0.7, 0.3, 0.0), (0.1, 0.4, 0.5)
    assert sum(Fraction(x) for x in q) == 1 + Fraction(1, 2**55)  # (why this case)
    P, Q = normalised(p), normalised(q)
    truth = delta_ref(P, Q, 4, 40.0)
    closed = 1 - (1 - Q[2]) ** 4  # only the +inf outcome counts at 40
    with mpmath.workdps(80):
        assert abs(truth - mpmath.mpf(closed.numerator) / closed.denominator) < mpmath.mpf(10) ** -70
    b = optcomp.delta_bounds(Pair(p, q), k=4, eps_g=40.0)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 1e-15


@pytest.mark.parametrize("x", [0.0, 0.1, 0.5, 1.0, 2.3])
def test_normalised_pair_brackets_contain_the_definition(x):
    p, q = (0.1, 0.2, 0.3, 0.4), (0.35, 0.25, 0.3, 0.1)  # sums 1 + 2^-54 and 1 - 2^-54
    assert sum(Fraction(v) for v in p) != 1 or sum(Fraction(v) for v in q) != 1
    P, Q = normalised(p), normalised(q)
    truth = delta_ref(P, Q, 3, x)
    b = optcomp.delta_bounds(Pair(p, q), k=3, eps_g=x)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 1e-8 * truth  # (delta_bounds' default tolerance)


def test_a_large_excess_is_normalised_not_charged():
    # sums 1 + 1e-10 (within the accepted 1e-9): at k = 1000 the given masses would make a
    # measure whose "delta" at x >= 0 exceeds 1; the normalised pair's is 1 - (1 - δ)^k
    p, q = (0.3, 0.3, 0.4 + 1e-10), (0.5, 0.5, 0.0)
    P = normalised(p)
    with mpmath.workdps(60):
        d = mpmath.mpf(P[2].numerator) / P[2].denominator
        truth = 1 - (1 - d) ** 1000  # every finite loss log(P_i/Q_i) < 0
    b = optcomp.delta_bounds(Pair(p, q), k=1000, eps_g=0.0)
    assert b.lower <= truth <= b.upper <= 1.0


def test_exact_sums_are_used_as_given():
    # (the common case: nothing changes where the floats sum to exactly 1)
    pair = Pair((0.5, 0.25, 0.25), (0.25, 0.25, 0.5))
    with mpmath.workprec(192):
        atoms, inf, inf_err = pair._atoms("forward")
    assert inf == 0 and inf_err == 0
    assert sorted(float(m) for *_, m, _ in atoms) == [0.25, 0.25, 0.5]
    assert all(e == 0 for *_, e in atoms)


@pytest.mark.parametrize("eps,k", [(1e-98, 1), (1e-78, 2), (1e-153, 3), (1e-300, 2)])
def test_profile_of_a_tiny_eps_keeps_its_two_lines_apart(eps, k):
    """Profile([(0, 0.1), (eps, 0)]) is randomized response RR(eps) (its f_{eps,0} lies above
    f_{0,0.1}); k copies at x = 0: P[L > 0] - Q[L > 0] over the binomial of +-eps steps
    (found by the domain sweep: the exact answer was eps, ~2x the truth, and a delta_bounds
    lower end 4x above it, the slopes -e^{+-eps} merged at 256 bits)."""
    with mpmath.workdps(700):
        e = mpmath.mpf(eps)
        p = mpmath.exp(e) / (1 + mpmath.exp(e))
        truth = mpmath.fsum(mpmath.binomial(k, j) * (p**j * (1 - p) ** (k - j) - p ** (k - j) * (1 - p) ** j)
                            for j in range(k + 1) if 2 * j > k)
    b = optcomp.delta_bounds(Profile([(0.0, 0.1), (eps, 0.0)]), k=k, eps_g=0.0)
    assert b.lower <= truth <= b.upper
    assert b.upper <= truth * (1 + 1e-9)
    v = optcomp.delta_g(Profile([(0.0, 0.1), (eps, 0.0)]), k=k, eps_g=0.0, method="optimal")
    assert truth <= v <= truth * (1 + 1e-12)


def test_profile_of_tiny_eps_and_delta_composes_without_overflow():
    # (the lattice's aligned step for losses of 1e-300: 2^(bits - exponent) overflowed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = optcomp.delta_bounds(Profile([(1e-300, 1e-300), (2.0, 0.0)]), k=3, eps_g=0.0)
    with mpmath.workdps(1400):
        # f = max(f_{e,d}, f_{2,0}) (Dong-Roth-Su): slopes -e^2, -e^e, -e^-e, -e^-2 between the
        # crossings a1 < a2 < a3 of its lines; a segment of slope -s over [a, b] is an outcome of
        # P-mass s (b - a) at loss log s
        e, d, two = mpmath.mpf(1e-300), mpmath.mpf(1e-300), mpmath.mpf(2)
        E, E2 = mpmath.exp(e), mpmath.exp(two)
        a1 = d / (E2 - E)  # 1 - e^2 a = 1 - d - e^e a
        a2 = (1 - d) / (1 + E)  # 1 - d - e^e a = e^-e (1 - d - a)
        a3 = 1 - d / E / (1 / E - 1 / E2)  # e^-e (1 - d - a) = e^-2 (1 - a)
        law = [(two, E2 * a1), (e, E * (a2 - a1)), (-e, (a3 - a2) / E), (-two, (1 - a3) / E2)]
        assert abs(mpmath.fsum(m for _, m in law) - 1) < mpmath.mpf(10) ** -1300
        truth = mpmath.fsum(law[i][1] * law[j][1] * law[l][1] * -mpmath.expm1(-(law[i][0] + law[j][0] + law[l][0]))
                            for i in range(4) for j in range(4) for l in range(4)
                            if law[i][0] + law[j][0] + law[l][0] > 0)
    assert b.lower <= truth <= b.upper
    assert b.upper <= truth * (1 + 1e-9)


def test_sums_a_tiny_amount_apart_keep_their_shift():
    # q sums to 1 + 1e-300: the forward loss log(T) ~ 1e-300 must survive (formed as log1p of
    # the exact T - 1; log(num) - log(den) at 256 bits left a bracket up to 2e-75 wide)
    m = Pair((1.0, 0.0), (1.0, 1e-300))
    T = Fraction(1) + Fraction(1e-300)
    with mpmath.workdps(700):
        truth = mpmath.mpf(1) - mpmath.mpf(1) / (mpmath.mpf(T.numerator) / T.denominator)  # (1 - 1/T)_+
    v = optcomp.delta_g(m, k=1, eps_g=0.0, method="optimal")
    assert truth <= v <= truth * (1 + 1e-12)
    b = optcomp.delta_bounds(m, k=1, eps_g=0.0)
    assert b.lower <= truth <= b.upper


@pytest.mark.parametrize("p,q", [((0.1, 0.4, 0.5), (0.5, 0.4, 0.1)), ((0.7, 0.3, 0.0), (0.1, 0.4, 0.5)),
                                 ((1.0, 0.0), (1.0, 1e-300)), ((1e-300, 0.5, 0.5), (0.5, 0.5, 1e-300)),
                                 ((0.5, 0.25, 0.25), (0.25, 0.25, 0.5))])
def test_the_float_atoms_and_the_exact_path_read_one_normalised_pair(p, q):
    """In each direction the exact path's rationals are (p/Σp, q/Σq), and the float atoms lie
    within their stated errors of that pair: mass P_i at log(P_i/Q_i), +inf mass the P_i of
    the outcomes with Q_i = 0 (the references from the definition, at 400 bits)."""
    from optcomp._exact.finite import exact_pair

    pair = Pair(p, q)
    for d, (a, b) in (("forward", (p, q)), ("reverse", (q, p))):
        P, Q = normalised(a), normalised(b)
        assert exact_pair(pair, d) == (tuple(P), tuple(Q))
        assert sum(P) == 1 and sum(Q) == 1
        with mpmath.workprec(192):
            atoms, inf, inf_err = pair._atoms(d)
        outcomes = [(Pi, Qi) for Pi, Qi in zip(P, Q) if Pi > 0 and Qi > 0]
        assert len(atoms) == len(outcomes)
        with mpmath.workprec(400):
            def mp(r):
                return mpmath.mpf(r.numerator) / r.denominator

            ref_inf = sum((Pi for Pi, Qi in zip(P, Q) if Pi > 0 and Qi == 0), Fraction(0))
            assert abs(inf - mp(ref_inf)) <= inf_err
            for (_, pos, perr, m, m_err), (Pi, Qi) in zip(atoms, outcomes):
                assert abs(m - mp(Pi)) <= m_err
                r = Pi / Qi  # (log1p near 1: a ratio 1 + 1e-300 keeps its loss)
                assert abs(pos - (mpmath.log1p(mp(r - 1)) if abs(r - 1) < Fraction(1, 2) else mpmath.log(mp(r)))) <= perr
