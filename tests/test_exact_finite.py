"""Exact composition of finite mechanisms (``method="optimal"``, and so ``auto``) against a
reference written here from the definitions.

The reference never sees a privacy-loss table: each mechanism is the pair of output
distributions (P, Q) its class documents -- k-ary randomized response on inputs 0 and 1, a
Pair's p and q, the two-sided geometric on 0 and Delta (its outcomes y <= 0 and y >= Delta
grouped, geometric series summed), a Profile's trade-off pair (f = max_j f_{eps_j, delta_j}
built here by brute force over line crossings: a segment of slope s and width w is an
outcome of Q-mass w and P-mass -s w, 1 - f(0) is an outcome of P-mass only), a black box's
randomized response with its delta event -- and a composition's delta(x) is

    sum over outcome tuples (P(tuple) - e^x Q(tuple))_+        (60-digit mpmath),

the tuples grouped per mechanism by count vector (multinomial coefficients), the larger of
the two *global* directions (every Pair forward, or every Pair reversed: (P, Q) -> (Q, P);
the other families are symmetric, a black box's delta event included).  For k up to 10^6: a two-outcome Pair (a binomial: the positive part is a window
of it, summed directly) and, under ``-m slow``, k-ary randomized response (the trinomial's
coefficients by their three-term recurrence from directly summed ones).

Checked: delta_g(eps_g) within [ref, ref (1 + 1e-12) + 1e-300]; eps_g(delta_g) is an upper
bound (ref delta at it <= delta_g) and within 1e-12 of the optimum (ref delta 1e-12 below
it > delta_g); eps_g on atoms and one ulp beside; delta_g down to 1e-300.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations, product

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import ExactTooLarge
from optcomp.mechanisms import BlackBox, Geometric, Laplace, Pair, Profile, RandomizedResponse

pytestmark = pytest.mark.usefixtures("address_space_cap")

DPS = 60
REL = 1e-12
BUDGET = 4000  # outcome tuples (after grouping by count vector) the reference enumerates


# ============================================================================ the reference


def rr_pq(eps, m):
    """k-ary randomized response: report the true value with e^eps/(e^eps + m - 1), each other
    value with 1/(e^eps + m - 1); P on input 0, Q on input 1."""
    e = mp.exp(mp.mpf(eps))
    z = e + (m - 1)
    P = [e / z] + [1 / z] * (m - 1)
    Q = [1 / z, e / z] + [1 / z] * (m - 2)
    return list(zip(P, Q))


def geometric_pq(eps, dl):
    """Two-sided geometric noise P[Z = z] = (1 - r)/(1 + r) r^|z| at 0 (P) and at dl (Q);
    outcomes y <= 0 and y >= dl grouped (their ratio is constant), sums in closed form."""
    r = mp.exp(-mp.mpf(eps))
    c = (1 - r) / (1 + r)
    out = [(1 / (1 + r), r**dl / (1 + r)), (r**dl / (1 + r), 1 / (1 + r))]
    out += [(c * r**y, c * r ** (dl - y)) for y in range(1, dl)]
    return out


def profile_pq(guarantees):
    """The trade-off pair of f = max_j max(0, 1 - d_j - e^{e_j} a, e^{-e_j} (1 - d_j - a))."""
    with mp.workprec(1400):
        lines = [(mp.mpf(0), mp.mpf(0))]
        for e, d in guarantees:
            E = mp.exp(mp.mpf(e))
            lines += [(-E, 1 - mp.mpf(d)), (-1 / E, (1 - mp.mpf(d)) / E)]
        cuts = {mp.mpf(0), mp.mpf(1)}
        for (s1, c1), (s2, c2) in combinations(lines, 2):
            if s1 != s2:
                a = (c1 - c2) / (s2 - s1)
                if 0 < a < 1:
                    cuts.add(a)
        cuts = sorted(cuts)
        f0 = max(c for _, c in lines)
        out = [(1 - f0, mp.mpf(0))]  # the drop at 0: P-mass only
        for a0, a1 in zip(cuts[:-1], cuts[1:]):
            mid = (a0 + a1) / 2
            s, _ = max(lines, key=lambda ln: ln[0] * mid + ln[1])
            out.append((-s * (a1 - a0), a1 - a0))  # (s = 0: f = 0 there, Q-mass only)
    with mp.workdps(DPS):
        return [(+p, +q) for p, q in out]


def pq(mech, direction):
    """The (P, Q) masses of one mechanism's outcomes in a global direction."""
    with mp.workdps(DPS):
        if isinstance(mech, RandomizedResponse):
            out = rr_pq(mech.eps, mech.values)
        elif isinstance(mech, Geometric):
            out = geometric_pq(mech.eps, mech.sensitivity)
        elif isinstance(mech, Profile):
            out = profile_pq(mech.guarantees)
        elif isinstance(mech, Pair):
            out = [(mp.mpf(a), mp.mpf(b)) for a, b in zip(mech.p, mech.q)]
        elif isinstance(mech, BlackBox):
            e, d = mp.exp(mp.mpf(mech.eps)), mp.mpf(mech.delta)
            out = [(d, mp.mpf(0)), ((1 - d) * e / (1 + e), (1 - d) / (1 + e)), ((1 - d) / (1 + e), (1 - d) * e / (1 + e))]
        else:
            raise TypeError(mech)
        out = [(p, q) for p, q in out if p > 0 or q > 0]
        # a Pair is asymmetric: "reverse" swaps its two distributions; the others are
        # symmetric (documented: the same law in both directions -- a black box's delta event
        # included: (eps, delta)-DP holds both ways)
        return [(q, p) for p, q in out] if direction == "reverse" and isinstance(mech, Pair) else out


def _vectors(c, m):
    if m == 1:
        yield (c,)
        return
    for n in range(c + 1):
        for rest in _vectors(c - n, m - 1):
            yield (n,) + rest


def grouped(mech, c, direction):
    """(P, Q) of c copies per count vector over the outcomes (multinomial coefficient times
    the products of the masses)."""
    out = pq(mech, direction)
    res = []
    with mp.workdps(DPS):
        for n in _vectors(c, len(out)):
            coef = math.factorial(c)
            for k in n:
                coef //= math.factorial(k)
            P, Q = mp.mpf(coef), mp.mpf(coef)
            for k, (p, q) in zip(n, out):
                if k:
                    P *= p**k
                    Q *= q**k
            res.append((P, Q))
    return res


def ref_delta(items, x):
    """max over the global directions of sum over tuples (P - e^x Q)_+ (items: (mech, count))."""
    return ref_delta_err(items, x)[0]


def ref_delta_err(items, x):
    """(:func:`ref_delta`, a bound on its own rounding: 10^-(DPS - 8) of the sum of max(P, e^x Q)
    over the tuples -- a tuple at loss exactly x leaves ~10^-DPS of P where the truth is 0)."""
    best = mp.mpf(0)
    err = mp.mpf(0)
    with mp.workdps(DPS):
        ex = mp.exp(mp.mpf(x))
        for direction in ("forward", "reverse"):
            parts = [grouped(mech, c, direction) for mech, c in items]
            total = mp.mpf(0)
            for combo in product(*parts):
                P, Q = mp.mpf(1), mp.mpf(1)
                for p, q in combo:
                    P *= p
                    Q *= q
                if P > ex * Q:
                    total += P - ex * Q
                err += max(P, ex * Q)
            best = max(best, total)
        # (a Pair's masses summing above 1 in binary can push the sum above 1: delta is a
        # probability, and the library reports at most 1)
        return min(best, mp.mpf(1)), err * mp.mpf(10) ** (8 - DPS)


def tuples(items):
    total = 1
    for mech, c in items:
        total *= math.comb(c + len(pq(mech, "forward")) - 1, c)
    return total


# ============================================================================ checks


def check_delta(items, x):
    mechs, counts = [m for m, _ in items], [c for _, c in items]
    d = optcomp.delta_g(mechs, counts=counts, eps_g=x, method="optimal")
    ref, err = ref_delta_err(items, x)
    assert d >= ref - err, (items, x, d, ref)
    assert d <= ref * (1 + REL) + err + 1e-300, (items, x, d, ref)
    return d, ref


def check_epsilon(items, t):
    mechs, counts = [m for m, _ in items], [c for _, c in items]
    e = optcomp.epsilon_g(mechs, counts=counts, delta_g=t, method="optimal")
    if math.isinf(e):
        assert ref_delta(items, 1e300) > t  # (the delta events alone exceed t)
        return e
    ref, err = ref_delta_err(items, e)
    assert ref - err <= t, (items, t, e)
    if e > 0:
        ref, err = ref_delta_err(items, e * (1 - 2 * REL))
        assert ref + err > t, (items, t, e)
    return e


# ============================================================================ examples


def test_issue_examples():
    """The two instances the exact path was built for, and their inverse law."""
    rr = [(RandomizedResponse(0.5, values=3), 3)]
    d, ref = check_delta(rr, 0.0)
    assert d == pytest.approx(float(ref), rel=1e-14)
    pair = [(Pair((0.4, 0.3, 0.2, 0.1), (0.1, 0.2, 0.3, 0.4)), 4)]
    for x in (0.0, 0.5, 1.0):
        check_delta(pair, x)
    for t in (0.1, 1e-3, 1e-6):
        e = check_epsilon(pair, t)
        assert optcomp.delta_g([pair[0][0]], counts=[4], eps_g=e, method="optimal") <= t


def test_auto_is_exact():
    """``auto`` answers with the exact value (no approx fallback) where optimal answers."""
    m = [RandomizedResponse(0.5, values=3)]
    exact = optcomp.delta_g(m, counts=[3], eps_g=0.0, method="optimal")
    assert optcomp.delta_g(m, counts=[3], eps_g=0.0) == exact
    assert optcomp.epsilon_g(m, counts=[3], delta_g=1e-3) == optcomp.epsilon_g(m, counts=[3], delta_g=1e-3,
                                                                               method="optimal")


def test_continuous_beside_finite_is_too_large():
    with pytest.raises(ExactTooLarge):
        optcomp.delta_g([Laplace(1.0), RandomizedResponse(0.5, values=3)], counts=[2, 2], eps_g=0.5, method="optimal")
    # auto falls back to approx's certified bracket (not an error)
    assert 0.0 < optcomp.delta_g([Laplace(1.0), RandomizedResponse(0.5, values=3)], counts=[2, 2], eps_g=0.5) < 1.0


def test_asymmetric_pair_takes_the_larger_global_direction():
    """A Pair composed with itself: the reported delta is the larger of the two global
    directions', strictly above the smaller one (never the worst direction per copy)."""
    pair = Pair((0.6, 0.3, 0.1), (0.2, 0.2, 0.6))
    items = [(pair, 3), (RandomizedResponse(0.3, values=3), 2)]
    x = 0.4
    d, ref = check_delta(items, x)
    fwd = rev = mp.mpf(0)
    with mp.workdps(DPS):
        ex = mp.exp(mp.mpf(x))
        for direction in ("forward", "reverse"):
            parts = [grouped(m, c, direction) for m, c in items]
            tot = mp.fsum(max(mp.mpf(0), mp.fprod(p for p, _ in combo) - ex * mp.fprod(q for _, q in combo))
                          for combo in product(*parts))
            if direction == "forward":
                fwd = tot
            else:
                rev = tot
    assert min(fwd, rev) < max(fwd, rev) * (1 - 1e-3)
    assert float(ref) == pytest.approx(float(max(fwd, rev)), rel=1e-14)


def test_zero_masses_and_infinite_losses():
    """q = 0 < p (a loss +inf: an independent delta event), p = 0 < q (an outcome P never
    produces), and a Pair whose masses do not sum to 1 exactly in binary (used as given)."""
    items = [(Pair((0.5, 0.3, 0.2, 0.0), (0.0, 0.3, 0.3, 0.4)), 3)]
    for x in (0.0, 0.3, 2.0, 50.0):
        check_delta(items, x)
    for t in (0.9, 0.88, 0.875 + 1e-9):
        check_epsilon(items, t)
    items = [(Pair((0.1, 0.7, 0.2), (0.3, 0.3, 0.4)), 5)]
    check_delta(items, 0.2)


def test_eps_on_atoms_and_one_ulp_beside():
    """eps_g exactly on a composed loss atom (k eps as a float, and the top atom) and one ulp
    to either side: delta is exact there too (exact rational positions)."""
    rr = RandomizedResponse(0.3, values=4)
    for c, atom in ((5, 3 * 0.3), (5, 5 * 0.3), (2, 0.3)):
        for x in (math.nextafter(atom, 0.0), atom, math.nextafter(atom, math.inf)):
            check_delta([(rr, c)], x)
    prof = Profile([(0.5, 1e-4), (1.5, 0.0)])
    for x in (1.0, math.nextafter(1.5, 0.0), 1.5, 3.0, math.nextafter(3.0, 4.0)):
        check_delta([(prof, 2)], x)


def test_tiny_delta():
    """delta_g down to 1e-300 (the masses far below the float range keep their digits)."""
    items = [(RandomizedResponse(2.0, values=3), 6)]
    for t in (1e-30, 1e-120, 1e-300):
        check_epsilon(items, t)
    check_delta(items, 11.5)


def test_two_outcome_pair_at_large_k():
    """A two-outcome Pair (not a black box: its two losses are not +-eps) at k = 10^4 and
    10^6, against its binomial summed directly over the window where P > e^x Q."""
    p, q = (0.7, 0.3), (0.4, 0.6)
    for k, t in ((10**4, 1e-6), (10**6, 1e-9)):
        e = optcomp.epsilon_g([Pair(p, q)], counts=[k], delta_g=t, method="optimal")
        assert binomial_delta(p, q, k, e) <= t * (1 + 1e-40)
        assert binomial_delta(p, q, k, e * (1 - 2 * REL)) > t
        x = e * 0.999
        d = optcomp.delta_g([Pair(p, q)], counts=[k], eps_g=x, method="optimal")
        ref = binomial_delta(p, q, k, x)
        assert ref <= d <= ref * (1 + REL)


def binomial_delta(p, q, k, x):
    """max over directions of sum_n C(k, n) (a1^n a2^(k-n) - e^x b1^n b2^(k-n))_+ for the
    two-outcome pair (a, b) = (p, q) or (q, p): the loss n log(a1/b1) + (k - n) log(a2/b2)
    is monotone in n, so the positive part is an interval of n; summed from its boundary
    outward (each mass from the one before by the pmf ratio) until the masses are below
    1e-70 of the largest."""
    best = mp.mpf(0)
    with mp.workdps(DPS):
        ex = mp.exp(mp.mpf(x))
        for a, b in ((p, q), (q, p)):
            # (a Pair's distributions: its floats over their exact sums)
            sa, sb = Fraction(a[0]) + Fraction(a[1]), Fraction(b[0]) + Fraction(b[1])
            a1, a2, b1, b2 = (mp.mpf(r.numerator) / r.denominator
                              for r in (Fraction(a[0]) / sa, Fraction(a[1]) / sa, Fraction(b[0]) / sb,
                                        Fraction(b[1]) / sb))
            l1, l2 = mp.log(a1 / b1), mp.log(a2 / b2)
            if l1 == l2:
                continue
            cut = (mp.mpf(x) - k * l2) / (l1 - l2)  # loss(n) > x iff n > cut (l1 > l2) or n < cut
            up_ = l1 > l2
            n = max(0, int(mp.floor(cut)) + 1) if up_ else min(k, int(mp.ceil(cut)) - 1)
            if n > k or n < 0:
                continue
            lc = mp.loggamma(k + 1) - mp.loggamma(n + 1) - mp.loggamma(k - n + 1)
            P = mp.exp(lc + n * mp.log(a1) + (k - n) * mp.log(a2))
            Q = mp.exp(lc + n * mp.log(b1) + (k - n) * mp.log(b2))
            total, peak = mp.mpf(0), mp.mpf(0)
            while 0 <= n <= k:
                if P > ex * Q:
                    total += P - ex * Q
                peak = max(peak, P)
                if P < peak * mp.mpf("1e-70"):
                    break
                if up_:
                    if n == k:
                        break
                    P *= mp.mpf(k - n) / (n + 1) * a1 / a2
                    Q *= mp.mpf(k - n) / (n + 1) * b1 / b2
                    n += 1
                else:
                    if n == 0:
                        break
                    P *= mp.mpf(n) / (k - n + 1) * a2 / a1
                    Q *= mp.mpf(n) / (k - n + 1) * b2 / b1
                    n -= 1
            best = max(best, total)
    return best


# ============================================================================ properties


def pmfs(m):
    """Integer weights 0..12 (at least one positive), normalised in floats: zeros in either
    pmf, sums within ulps of 1 (the masses are used exactly as given)."""
    w = st.lists(st.integers(0, 12), min_size=m, max_size=m).filter(lambda v: sum(v) > 0)
    return w.map(lambda v: tuple(x / sum(v) for x in v))


@st.composite
def pairs(draw):
    m = draw(st.integers(2, 6))
    p, q = draw(pmfs(m)), draw(pmfs(m))
    return Pair(p, q)


log_eps = st.floats(-6.0, 1.6).map(math.exp)  # eps in [2.5e-3, 5]
mechanisms_ = st.one_of(
    pairs(),
    st.builds(RandomizedResponse, log_eps, st.integers(3, 6)),
    st.builds(Geometric, log_eps, st.integers(2, 3)),
    st.lists(st.tuples(st.floats(0.05, 3.0), st.one_of(st.just(0.0), st.floats(-300, -2).map(lambda v: 10.0**v))),
             min_size=2, max_size=3).map(Profile),
)


@st.composite
def compositions_(draw):
    """One to three distinct mechanisms (and maybe a black box) with counts, the reference's
    enumeration within BUDGET tuples."""
    n = draw(st.integers(1, 3))
    items = []
    for _ in range(n):
        mech = draw(mechanisms_)
        if any(m == mech for m, _ in items):
            continue
        items.append((mech, draw(st.integers(1, 6))))
    if draw(st.booleans()):
        items.append((BlackBox(draw(log_eps), draw(st.sampled_from([0.0, 1e-9, 0.01]))), draw(st.integers(1, 3))))
    while tuples(items) > BUDGET:
        mech, c = items[-1]
        items[-1] = (mech, max(1, c // 2))
        if tuples(items) > BUDGET and c == 1:
            items.pop()
    return items


def _top(items):
    """Largest finite composed loss (float, for choosing eps_g), from the reference's pairs."""
    best = 0.0
    for direction in ("forward", "reverse"):
        tot = 0.0
        for mech, c in items:
            losses = [float(mp.log(p / q)) for p, q in pq(mech, direction) if p > 0 and q > 0]
            tot += c * max(losses) if losses else 0.0
        best = max(best, tot)
    return best


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(compositions_(), st.floats(0.0, 1.05), st.floats(-300.0, -0.4))
def test_property_against_definitions(items, frac, log_t):
    if not items:
        return
    x = frac * _top(items)
    try:
        check_delta(items, x)
        check_epsilon(items, 10.0**log_t)
    except ExactTooLarge as exc:  # only a bracket wider than 1e-12 may refuse; it must say so
        assert "wider than" in str(exc), exc


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(compositions_(), st.floats(0.0, 1.05), st.floats(-300.0, -0.4))
def test_property_against_definitions_more(items, frac, log_t):
    test_property_against_definitions.hypothesis.inner_test(items, frac, log_t)


# ============================================================================ k = 10^6, randomized response


def trinomial_delta(eps, m, k, x):
    """RandomizedResponse(eps, m) x k: the loss is s eps, s = n_+ - n_-, with P-mass T_s =
    sum over n_- of the multinomial (a e^eps)^{n_+} b^{n_0} a^{n_-}-weights, a = 1/Z,
    b = (m - 2)/Z; Q-mass T_s e^{-s eps} (the law is the same with +eps and -eps swapped).
    delta(x) = sum_{s eps > x} T_s (1 - e^{x - s eps}), the T_s of the upper window by the
    three-term recurrence of the coefficients of (A + B z + C z^2)^k (run downward from two
    values summed directly at the top of the window: positive coefficients above the middle)."""
    with mp.workdps(DPS):
        e = mp.exp(mp.mpf(eps))
        z = e + (m - 1)
        A, B, C = 1 / z, mp.mpf(m - 2) / z, e / z  # exponent j = n_0 + 2 n_+ (index of z^j), s = j - k
        s_min = int(mp.floor(mp.mpf(x) / mp.mpf(eps))) + 1
        lc = mp.loggamma(k + 1)

        lA, lB, lC = mp.log(A), mp.log(B), mp.log(C)

        def direct(j):
            """Coefficient of z^j: sum over n_+ of the multinomial term (n_0 = j - 2 n_+,
            n_- = k - n_0 - n_+), from its largest term outward by the term ratio
            n_0 (n_0 - 1) C A / ((n_+ + 1)(n_- + 1) B^2), until below 1e-75 of it."""
            lo_n, hi_n = max(0, j - k), j // 2

            def log_term(npl):
                n0, nmi = j - 2 * npl, k - j + npl
                return lc - mp.loggamma(npl + 1) - mp.loggamma(n0 + 1) - mp.loggamma(nmi + 1) \
                    + npl * lC + n0 * lB + nmi * lA

            a, b = lo_n, hi_n  # the peak: the largest n with ratio(n - 1) >= 1 (log-concave)
            while b - a > 1:
                mid = (a + b) // 2
                n0, nmi = j - 2 * (mid - 1), k - j + mid - 1
                if n0 * (n0 - 1) * C * A >= mid * (nmi + 1) * B * B:
                    a = mid
                else:
                    b = mid
            n_pk = b if b <= hi_n and log_term(b) > log_term(a) else a
            top = mp.exp(log_term(n_pk))
            total = top
            for direction in (1, -1):
                t_, n = top, n_pk
                while lo_n <= n + direction <= hi_n:
                    if direction == 1:
                        n0, nmi = j - 2 * n, k - j + n
                        t_ *= mp.mpf(n0 * (n0 - 1)) / ((n + 1) * (nmi + 1)) * C * A / (B * B)
                    else:
                        n0, nmi = j - 2 * (n - 1), k - j + n - 1
                        t_ /= mp.mpf(n0 * (n0 - 1)) / (n * (nmi + 1)) * C * A / (B * B)
                    n += direction
                    total += t_
                    if t_ < top * mp.mpf("1e-75"):
                        break
            return total

        # the window's top: where the terms fall below 1e-70 of the first
        j_lo = s_min + k
        step = 200
        j_hi = min(2 * k, j_lo + step)
        first = direct(j_lo)
        while j_hi < 2 * k and direct(j_hi) > first * mp.mpf("1e-75"):
            step *= 2
            j_hi = min(2 * k, j_lo + step)
        # recurrence from the top, with the reversed polynomial (C + B w + A w^2)^k, w = 1/z:
        # coefficient i of it is T_{2k - i}; i a_i C = (k - i + 1) B a_{i-1} + (2k - i + 2) A a_{i-2}
        i_lo = 2 * k - j_hi
        a_prev2, a_prev1 = direct(2 * k - i_lo), direct(2 * k - i_lo - 1)
        T = {2 * k - i_lo: a_prev2, 2 * k - i_lo - 1: a_prev1}
        for i in range(i_lo + 2, 2 * k - j_lo + 1):
            a = ((k - i + 1) * B * a_prev1 + (2 * k - i + 2) * A * a_prev2) / (i * C)
            T[2 * k - i] = a
            a_prev2, a_prev1 = a_prev1, a
        total = mp.mpf(0)
        for j, t in T.items():
            s = j - k
            if s * mp.mpf(eps) > mp.mpf(x):
                total += t * (1 - mp.exp(mp.mpf(x) - s * mp.mpf(eps)))
        return total


@pytest.mark.slow
@pytest.mark.parametrize("eps, m, t", [(0.5, 3, 1e-6), (0.1, 4, 1e-10), (1.0, 3, 1e-300)])
def test_randomized_response_million(eps, m, t):
    k = 10**6
    rr = RandomizedResponse(eps, values=m)
    e = optcomp.epsilon_g([rr], counts=[k], delta_g=t, method="optimal")
    assert trinomial_delta(eps, m, k, e) <= t * (1 + 1e-40)
    assert trinomial_delta(eps, m, k, e * (1 - 2 * REL)) > t
    d = optcomp.delta_g([rr], counts=[k], eps_g=e, method="optimal")
    ref = trinomial_delta(eps, m, k, e)
    assert ref <= d <= ref * (1 + REL) + 1e-300
