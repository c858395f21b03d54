"""k-fold compositions (k >= 2) of the finite mechanisms of :mod:`optcomp.mechanisms`, property-
tested over the whole domain against an independent 50-digit reference.

``test_mechanism_composition.test_one_mechanism_over_the_domain`` draws every family at
k = 1; the compositions with k >= 2 were only example-based.  Here ``Pair(p, q)``,
``RandomizedResponse(eps, m)`` (m >= 3), ``Profile([...])`` (delta_j = 0 and > 0) and
heterogeneous lists of them, with ``k=`` or ``counts=``, go through the public entry points
``optcomp.delta_bounds`` / ``delta_g`` / ``epsilon_g`` and are checked against

* a reference written from the classes' docstrings (never from the library's loss tables):
  the P-law of the privacy loss of each pair -- RR: +eps, 0, -eps with
  e^eps/Z, (m - 2)/Z, 1/Z (Z = e^eps + m - 1); Pair forward: log(p_i/q_i) with mass p_i
  (+inf where q_i = 0 < p_i), reverse with p and q swapped; Profile: the pair of the trade-off
  function f = max_j f_{eps_j, delta_j}, a segment of slope -e^{+-eps_j} over [a0, a1] being
  an outcome of P-mass e^{+-eps_j}(a1 - a0) at loss +-eps_j and 1 - f(0) = min_j delta_j the
  mass at +inf (f and its vertices computed here, at 1400 bits);
* the k-fold law by exact convolution (multinomial enumeration per mechanism, then the
  product of the mechanisms' laws; positions are sums of mpmath logs, equal positions
  merged), +inf mass prod_i T_i^{k_i} - prod_i F_i^{k_i} (T_i the P-mass as given, F_i its
  finite part: a Pair's masses are used unnormalised);
* delta(x) = inf + sum_{l > x} P(l) (1 - e^{x - l}) (suffix sums, with a direct fallback
  when the subtraction would cancel), the larger of the two *global* directions (every
  mechanism in the same order) when a Pair is asymmetric.

The reference itself is checked against brute-force enumeration of outcome tuples of the
pairs (P - e^x Q)_+, against a hand-computed instance, and (Profile) against the trade-off
definition delta(x) = sup_a (1 - e^x a - f(a)).  For k = 10^6 a randomized response's law
is a trinomial; its upper window is computed by the three-term recurrence of the
coefficients of (a + b z + c z^2)^k (positive coefficients, no cancellation) from two
directly summed values, with a certified Chernoff bound on the mass above the window.

Cases these tests found are kept as explicit tests at the end of the module (a Profile
delta_j below 2^-256, fixed in cc3b3f9; a Pair direction with +inf mass 1 to float
precision, fixed in 5c13049) and, under ``-m slow``, the two inputs whose lattice passes
outgrew max_points and the 4 GiB address space (1000 randomized responses; 59 mechanisms
with losses up to 466) before every allocation was checked against the memory budget.
"""

from __future__ import annotations

import bisect
import math
from itertools import combinations

import mpmath as mp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp.mechanisms import Pair, Profile, RandomizedResponse

# a huge k must never allocate O(k): a MemoryError here, not an OOM on a shared machine
pytestmark = pytest.mark.usefixtures("address_space_cap")

DPS = 50
REL = 1e-12  # the reference's own rounding, allowed on every comparison
GRID = 2**100  # positions equal to ~1e-30 are one atom (the reference carries ~1e-45)
BUDGET = 6000  # atoms of the composed law (product of the per-mechanism supports)
TOL = 1e-3  # delta_bounds' tolerance in the property test
HUGE_K = 500  # a single randomized response beyond: the trinomial window reference
MAX_COUNT = 30  # per mechanism (k = 2..30 alone, up to 90 in a list)


# ============================================================================ the reference
# All mpmath work inside workdps / workprec: the global precision is never touched (other
# modules set it), and the library is never called from inside those blocks.


def _key(pos):
    return int(mp.nint(pos * GRID))


def _merge(items):
    """[(pos, mass)] -> {key: (pos, mass)}, equal positions merged."""
    out = {}
    for pos, m in items:
        k = _key(pos)
        if k in out:
            out[k] = (out[k][0], out[k][1] + m)
        else:
            out[k] = (pos, m)
    return out


def rr_law(eps, m):
    """RandomizedResponse(eps, m), either direction: +eps, 0, -eps with e^eps/Z, (m-2)/Z, 1/Z."""
    with mp.workdps(DPS):
        e = mp.mpf(eps)
        z = mp.exp(e) + (m - 1)
        items = [(e, mp.exp(e) / z), (-e, 1 / z)]
        if m > 2:
            items.append((mp.mpf(0), mp.mpf(m - 2) / z))
        return _merge(items), mp.mpf(0)


def pair_law(p, q):
    """Pair(p, q), direction (P, Q) = (p, q): loss log(p_i/q_i) with mass p_i, +inf where q_i = 0."""
    with mp.workdps(DPS):
        items, inf = [], mp.mpf(0)
        for a, b in zip(p, q):
            if a == 0:
                continue
            if b == 0:
                inf += mp.mpf(a)
            else:
                items.append((mp.log(mp.mpf(a)) - mp.log(mp.mpf(b)), mp.mpf(a)))
        return _merge(items), inf


def trade_off_lines(guarantees):
    """The lines whose max is f = max_j f_{eps_j, delta_j}: (slope, intercept, loss)."""
    lines = [(mp.mpf(0), mp.mpf(0), None)]
    for e, d in guarantees:
        E = mp.exp(mp.mpf(e))
        lines.append((-E, 1 - mp.mpf(d), mp.mpf(e)))
        lines.append((-1 / E, (1 - mp.mpf(d)) / E, -mp.mpf(e)))
    return lines


def trade_off_vertices(lines):
    """Sorted alphas >= 0 at which the max of the lines may change its active line."""
    cand = {mp.mpf(0)}
    for (s1, c1, _), (s2, c2, _) in combinations(lines, 2):
        if s1 != s2:
            a = (c1 - c2) / (s2 - s1)
            if a > 0:
                cand.add(a)
    return sorted(cand)


def trade_off_segments(lines, verts):
    """(slope, loss, a0, a1): the maximal intervals on which one line is the max, up to f = 0."""
    segs = []
    for a0, a1 in zip(verts[:-1], verts[1:]):
        mid = (a0 + a1) / 2
        s, c, loss = max(lines, key=lambda ln: ln[0] * mid + ln[1])
        if loss is None:  # f = 0 from here on
            break
        if segs and segs[-1][0] == s:
            segs[-1][3] = a1
        else:
            segs.append([s, loss, a0, a1])
    return segs


def profile_law(guarantees):
    """Profile(guarantees), either direction (f is symmetric): the segments of f, read as
    outcomes (P-mass -slope * width at loss log(-slope)), and min_j delta_j at +inf."""
    with mp.workprec(1400):  # 1 - delta_j exact for delta_j >= 1e-300
        lines = trade_off_lines(guarantees)
        verts = trade_off_vertices(lines)
        items = [(loss, -s * (a1 - a0)) for s, loss, a0, a1 in trade_off_segments(lines, verts)]
        inf = min(mp.mpf(d) for _, d in guarantees)
    with mp.workdps(DPS):
        return _merge([(+pos, +m) for pos, m in items]), +inf


def profile_by_trade_off(guarantees, x):
    """delta(x) = sup_a (1 - e^x a - f(a)) (the maximum of a concave piecewise linear function
    of a: at a vertex of f, or a = 0)."""
    with mp.workprec(1400):
        lines = trade_off_lines(guarantees)
        ex = mp.exp(mp.mpf(x))
        return max(1 - ex * a - max(s * a + c for s, c, _ in lines) for a in trade_off_vertices(lines))


def mech_law(mech, direction):
    if isinstance(mech, RandomizedResponse):
        return rr_law(mech.eps, mech.values)
    if isinstance(mech, Pair):
        return pair_law(mech.p, mech.q) if direction == "forward" else pair_law(mech.q, mech.p)
    if isinstance(mech, Profile):
        return profile_law(mech.guarantees)
    raise TypeError(mech)


def _compositions(k, m):
    if m == 1:
        yield (k,)
        return
    for n in range(k + 1):
        for rest in _compositions(k - n, m - 1):
            yield (n,) + rest


def kfold(law, k):
    """The k-fold convolution of a finite law {key: (pos, mass)}, by multinomial enumeration."""
    atoms = list(law.values())
    m = len(atoms)
    if m == 0:
        return {}
    with mp.workdps(DPS):
        powers = [[mp.mpf(1)] for _ in atoms]
        for i, (_, p) in enumerate(atoms):
            for _ in range(k):
                powers[i].append(powers[i][-1] * p)
        fact = [1]
        for i in range(1, k + 1):
            fact.append(fact[-1] * i)
        items = []
        for ns in _compositions(k, m):
            coef = fact[k]
            mass = mp.mpf(1)
            pos = mp.mpf(0)
            for n, (l, _), pw in zip(ns, atoms, powers):
                if n:
                    coef //= fact[n]
                    mass *= pw[n]
                    pos += n * l
            items.append((pos, coef * mass))
        return _merge(items)


def convolve(a, b):
    with mp.workdps(DPS):
        return _merge([(pa + pb, ma * mb) for pa, ma in a.values() for pb, mb in b.values()])


class Law:
    """A composed P-law: sorted finite atoms, suffix sums, and the mass at +inf."""

    def __init__(self, atoms, inf):
        with mp.workdps(DPS):
            items = sorted(atoms.values(), key=lambda t: t[0])
            self.pos = [p for p, _ in items]
            self.mass = [m for _, m in items]
            self.inf = +inf
            n = len(items)
            self.sp = [mp.mpf(0)] * (n + 1)
            self.sq = [mp.mpf(0)] * (n + 1)
            for i in range(n - 1, -1, -1):
                self.sp[i] = self.sp[i + 1] + self.mass[i]
                self.sq[i] = self.sq[i + 1] + self.mass[i] * mp.exp(-self.pos[i])

    @property
    def top(self):
        return self.pos[-1] if self.pos else mp.mpf("-inf")

    def delta(self, x):
        """inf + sum_{l > x} P(l)(1 - e^{x - l}), to ~1e-40 relative."""
        with mp.workdps(DPS):
            x = mp.mpf(x)
            i = bisect.bisect_right(self.pos, x)
            h = self.sp[i] - mp.exp(x) * self.sq[i]
            if h < self.sp[i] * mp.mpf(10) ** (20 - DPS):  # cancellation: sum directly
                with mp.workdps(DPS + 30):
                    h = mp.fsum(m * -mp.expm1(x - p) for p, m in zip(self.pos[i:], self.mass[i:]))
            return self.inf + max(h, mp.mpf(0))


def composed(workload, direction):
    """The composed P-law of [(mechanism, count)] in one global direction."""
    total = {0: (mp.mpf(0), mp.mpf(1))}
    log_all, log_fin = mp.mpf(0), mp.mpf(0)
    for mech, c in workload:
        law, inf = mech_law(mech, direction)
        total = convolve(total, kfold(law, c))
        with mp.workdps(DPS):
            whole = mp.fsum([m for _, m in law.values()] + [inf])  # a Pair's masses as given (sum 1 +- 1e-9)
            log_all += c * mp.log(whole)
            log_fin += c * mp.log1p(-inf / whole)
    with mp.workdps(DPS):  # prod T_i^c_i - prod F_i^c_i without cancellation (inf_i down to 1e-300)
        inf_total = mp.exp(log_all) * -mp.expm1(log_fin)
    return Law(total, inf_total)


_HUGE = {}


class Reference:
    """delta_opt of a workload: the larger of the global directions."""

    def __init__(self, laws):
        self.laws = laws

    @classmethod
    def of(cls, workload):
        if len(workload) == 1 and isinstance(workload[0][0], RandomizedResponse) and workload[0][1] > HUGE_K \
                and workload[0][0].values >= 3:
            mech, k = workload[0]
            if (mech, k) not in _HUGE:  # shared by the examples (its window grows on demand)
                _HUGE[(mech, k)] = TrinomialReference(TrinomialTail(mech.eps, mech.values, k))
            return _HUGE[(mech, k)]
        dirs = ["forward"]
        if any(isinstance(m, Pair) and m.p != m.q for m, _ in workload):
            dirs.append("reverse")
        return cls([composed(workload, d) for d in dirs])

    def delta(self, x):
        return max(law.delta(x) for law in self.laws)

    def delta_err(self, x):
        return self.delta(x), mp.mpf(0)

    @property
    def inf(self):
        return max(law.inf for law in self.laws)

    @property
    def top(self):
        return max(law.top for law in self.laws)

    def positive_atoms(self):
        return sorted({float(p) for law in self.laws for p in law.pos if p > 0})


# ---------------------------------------------------------------- k = 10^6: the trinomial window


def _chernoff_above(a, b, c, k, j):
    """A certified bound on P[D > j], D = N+ - N- of k draws (+1, 0, -1 w.p. a, b, c):
    min over a grid of theta > 0 of e^{-theta (j + 1)} (a e^theta + b + c e^-theta)^k."""
    best = mp.mpf(1)
    for theta in [mp.mpf(2) ** e for e in range(-14, 8)]:
        v = mp.exp(k * mp.log(a * mp.exp(theta) + b + c * mp.exp(-theta)) - theta * (j + 1))
        best = min(best, v)
    return best


def _trinomial_direct(a, b, c, k, j):
    """P[D = j] = sum_n k!/((n + j)! (k - 2n - j)! n!) a^{n+j} b^{k-2n-j} c^n, summed outward
    from its largest term; the term ratio r decreases in n (and 1/r downwards), so once r < 1
    what is left on that side is below t r / (1 - r): stop when that is 1e-45 of the sum."""
    lo_n, hi_n = 0, (k - j) // 2
    acb = a * c / (b * b)
    cut = mp.mpf(10) ** -45

    def num(n):  # T(n+1)/T(n) = acb * num(n) / den(n)
        return (k - 2 * n - j) * (k - 2 * n - j - 1)

    def den(n):
        return (n + j + 1) * (n + 1)

    lo, hi = lo_n, hi_n  # the mode: the last n with T(n)/T(n-1) >= 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if acb * num(mid - 1) >= den(mid - 1):
            lo = mid
        else:
            hi = mid - 1
    mode = lo
    t0 = mp.exp(mp.loggamma(k + 1) - mp.loggamma(mode + j + 1) - mp.loggamma(k - 2 * mode - j + 1)
                - mp.loggamma(mode + 1) + (mode + j) * mp.log(a) + (k - 2 * mode - j) * mp.log(b) + mode * mp.log(c))
    total, t, n = t0, t0, mode
    while n < hi_n:  # the ratio r decreases: the rest is below t r / (1 - r)
        r = acb * num(n) / den(n)
        if r < 1 and t * r < total * cut * (1 - r):
            break
        t *= r
        n += 1
        total += t
    t, n = t0, mode
    while n > lo_n:  # downwards the ratio 1/r(n - 1) decreases too
        r = den(n - 1) / (acb * num(n - 1))
        if r < 1 and t * r < total * cut * (1 - r):
            break
        t *= r
        n -= 1
        total += t
    return total


class TrinomialTail:
    """The law of k randomized responses of 3+ values (loss eps * D) on a window of atoms
    j <= j_hi, extended downwards on demand: r_m = P[D = k - m] obeys
    a (m + 1) r_{m+1} = (k - m) b r_m + (2k - m + 1) c r_{m-1} (from R' (a + bz + cz^2) =
    k (b + 2cz) R, R = (a + bz + cz^2)^k), with positive coefficients for m < k."""

    def __init__(self, eps, values, k, *, floor=mp.mpf(10) ** -330):
        """The window's top j_hi: the least j with a certified P[D > j] <= ``floor`` (1e-30 of
        the least delta_g the tests use)."""
        with mp.workdps(DPS):
            self.eps = mp.mpf(eps)
            z = mp.exp(self.eps) + (values - 1)
            self.a, self.b, self.c = mp.exp(self.eps) / z, mp.mpf(values - 2) / z, 1 / z
            self.k = k
            mean = k * (self.a - self.c)
            sd = mp.sqrt(k * (self.a + self.c - (self.a - self.c) ** 2))
            lo, hi = max(0, int(mean)), k
            while lo < hi:
                mid = (lo + hi) // 2
                if _chernoff_above(self.a, self.b, self.c, k, mid) <= floor:
                    hi = mid
                else:
                    lo = mid + 1
            j_hi = lo
            self.tail = _chernoff_above(self.a, self.b, self.c, k, j_hi) if j_hi < k else mp.mpf(0)
            self.j_hi = j_hi
            # r at m0 = k - j_hi and m0 - 1 (j_hi + 1), directly
            if j_hi == k:
                self.probs = [self.a ** k]  # probs[i] = P[D = j_hi - i]
                prev = mp.mpf(0)
            else:
                self.probs = [_trinomial_direct(self.a, self.b, self.c, k, j_hi)]
                prev = _trinomial_direct(self.a, self.b, self.c, k, j_hi + 1)
            self._prev = prev
            self.inf = mp.mpf(0)
            self.j_min = max(1, int(mean - 3 * sd))  # never extend below (the window would be O(k))

    def _extend_to(self, j):
        with mp.workdps(DPS):
            a, b, c, k = self.a, self.b, self.c, self.k
            while self.j_hi - (len(self.probs) - 1) > j:
                m = self.k - (self.j_hi - (len(self.probs) - 1))
                r_m, r_prev = self.probs[-1], (self.probs[-2] if len(self.probs) > 1 else self._prev)
                self.probs.append(((k - m) * b * r_m + (2 * k - m + 1) * c * r_prev) / (a * (m + 1)))

    def delta(self, x):
        """sum_{j eps > x} P[D = j](1 - e^{x - j eps}) (and the certified tail above the window):
        directly (expm1) where j eps - x < 2, else as sum P_j - e^x sum P_j e^{-j eps}, whose
        terms are >= (1 - e^-2) P_j (no cancellation)."""
        with mp.workdps(DPS):
            x = mp.mpf(x)
            j0 = int(mp.floor(x / self.eps)) + 1
            while (j0 - 1) * self.eps > x:
                j0 -= 1
            while j0 * self.eps <= x:
                j0 += 1
            assert j0 >= self.j_min, "below the window this reference supports"
            self._extend_to(j0)
            near, sp, sq = [], [], []
            step = mp.exp(-self.eps)
            w = None
            for i in range(self.j_hi - j0, -1, -1):  # j = j0 upwards
                j = self.j_hi - i
                d = j * self.eps - x
                if d < 2:
                    near.append(self.probs[i] * -mp.expm1(-d))
                else:
                    w = mp.exp(-d) if w is None else w * step  # e^{x - j eps}
                    sp.append(self.probs[i])
                    sq.append(self.probs[i] * w)
            return mp.fsum(near) + (mp.fsum(sp) - mp.fsum(sq)), self.tail

    def positive_atoms(self):
        return [float((self.j_hi - i) * self.eps) for i in range(len(self.probs))]


class TrinomialReference:
    """:class:`Reference`'s interface on a :class:`TrinomialTail` (k randomized responses)."""

    def __init__(self, tail):
        self.tail = tail
        self.inf = mp.mpf(0)
        with mp.workdps(DPS):
            self.top = tail.k * tail.eps

    def delta_err(self, x):
        return self.tail.delta(x)

    def delta(self, x):
        v, err = self.tail.delta(x)
        return v

    def positive_atoms(self):
        return self.tail.positive_atoms()


# ============================================================================ the reference, checked


def brute_force(pairs, x):
    """delta(x) of the product of finite pairs [(p, q, count)] from the definition, by
    enumeration of outcome tuples: max over the two global orders of sum (P - e^x Q)_+."""
    with mp.workdps(60):
        def one(order):
            outs = [(mp.mpf(1), mp.mpf(1))]
            for p, q, c in pairs:
                a, b = (p, q) if order == 0 else (q, p)
                for _ in range(c):
                    outs = [(u * mp.mpf(s), v * mp.mpf(t)) for u, v in outs for s, t in zip(a, b)]
            ex = mp.exp(mp.mpf(x))
            return mp.fsum(max(mp.mpf(0), u - ex * v) for u, v in outs)

        return max(one(0), one(1))


def rr_pair(eps, m):
    with mp.workdps(60):
        z = mp.exp(mp.mpf(eps)) + m - 1
        p = [mp.exp(mp.mpf(eps)) / z] + [1 / z] * (m - 1)
        q = [1 / z, mp.exp(mp.mpf(eps)) / z] + [1 / z] * (m - 2)
        return p, q


def profile_pair(guarantees):
    """The outcomes of the trade-off pair, (P, Q) each: segments (-slope * w, w), the atom
    (min delta, 0) and the rest of Q on an outcome of P-mass 0."""
    with mp.workprec(1400):
        lines = trade_off_lines(guarantees)
        verts = trade_off_vertices(lines)
        p, q = [min(mp.mpf(d) for _, d in guarantees)], [mp.mpf(0)]
        for s, _, a0, a1 in trade_off_segments(lines, verts):
            p.append(-s * (a1 - a0))
            q.append(a1 - a0)
        p.append(mp.mpf(0))
        q.append(1 - mp.fsum(q))
        return p, q


def test_reference_on_a_hand_computed_instance():
    """Pair((1/2, 1/2), (1/4, 3/4)) twice: P = (1/4,)*4, Q = (1/16, 3/16, 3/16, 9/16).
    At x = 0 both orders give TV = 5/16; at x = ln 2, forward sum (P - 2Q)_+ = 1/4 - 1/8 =
    1/8, reverse sum (Q - 2P)_+ = 9/16 - 1/2 = 1/16: delta = 1/8.  Above ln(4/1) (the top
    forward loss 2 ln 2) and ln(9/4) (reverse): 0."""
    ref = Reference.of([(Pair((0.5, 0.5), (0.25, 0.75)), 2)])
    with mp.workdps(DPS):
        assert abs(ref.delta(0) - mp.mpf(5) / 16) < mp.mpf(10) ** -45
        assert abs(ref.delta(mp.log(2)) - mp.mpf(1) / 8) < mp.mpf(10) ** -45
        assert abs(ref.laws[1].delta(mp.log(2)) - mp.mpf(1) / 16) < mp.mpf(10) ** -45
        assert ref.delta(mp.log(4)) < mp.mpf(10) ** -45 and ref.delta(2.0) == 0
        assert abs(ref.top - mp.log(4)) < mp.mpf(10) ** -45
    # Profile([(0, 0.1), (0, 1e-78)]): f(a) = (1 - d - a)_+, d = min delta_j: P-mass d at +inf
    # and 1 - d at loss 0, so k = 2 gives delta(x) = 1 - (1 - d)^2 for every x >= 0
    ref = Reference.of([(Profile([(0.0, 0.1), (0.0, 1e-78)]), 2)])
    with mp.workdps(DPS):
        d = mp.mpf(1e-78)
        for x in (0.0, 1.0, 50.0):
            assert abs(ref.delta(x) - (2 * d - d * d)) < mp.mpf(10) ** -45 * d
    # and the library on the Pair (the tight bracket holds 1/8)
    d = optcomp.delta_bounds(Pair((0.5, 0.5), (0.25, 0.75)), k=2, eps_g=math.log(2), tol=1e-6)
    assert d.lower <= 0.125 * (1 + REL) and d.upper >= float(ref.delta(math.log(2))) * (1 - REL)


@pytest.mark.parametrize("mechs,counts", [
    ([Pair((0.5, 0.3, 0.2, 0.0), (0.2, 0.3, 0.4, 0.1))], [3]),
    ([RandomizedResponse(0.7, 3)], [4]),
    ([RandomizedResponse(1.3, 5), Pair((0.6, 0.4), (0.1, 0.9))], [2, 2]),
    ([Profile([(0.5, 0.0), (1.0, 1e-6)]), Pair((0.4, 0.6), (0.5, 0.5))], [2, 1]),
    ([Profile([(0.2, 1e-3), (0.9, 1e-5), (2.0, 0.0)])], [3]),
])
def test_reference_matches_enumeration_of_outcome_tuples(mechs, counts):
    """The PLD reference (convolution of loss atoms) against the definition on outcomes."""
    pairs = []
    for mech, c in zip(mechs, counts):
        if isinstance(mech, Pair):
            pairs.append((mech.p, mech.q, c))
        elif isinstance(mech, RandomizedResponse):
            pairs.append((*rr_pair(mech.eps, mech.values), c))
        else:
            pairs.append((*profile_pair(mech.guarantees), c))
    ref = Reference.of(list(zip(mechs, counts)))
    for x in (0.0, 0.05, 0.4, 1.0, 2.5, 7.0):
        bf = brute_force(pairs, x)
        r = ref.delta(x)
        with mp.workdps(DPS):
            assert abs(r - bf) <= mp.mpf(10) ** -40 * max(bf, mp.mpf(10) ** -300), (x, r, bf)


@pytest.mark.parametrize("guarantees", [
    [(0.5, 0.0)], [(0.5, 1e-3)], [(0.3, 1e-300)], [(0.0, 0.25)], [(0.5, 0.0), (1.0, 1e-6)],
    [(0.1, 0.2), (0.6, 1e-2), (3.0, 1e-9)], [(1e-3, 1e-300), (5.0, 0.0)],
    # test_profile_with_a_tiny_delta_keeps_it's instances (delta_j far below 2^-256)
    [(0.0, 0.1), (0.0, 1e-78)], [(0.0, 1e-100), (1.0, 0.0)], [(0.5, 1e-100), (2.0, 0.0)],
])
def test_profile_reference_is_its_trade_off_function(guarantees):
    """The Profile law (segments of f read as outcomes) reproduces the trade-off definition
    delta(x) = sup_a (1 - e^x a - f(a)) and satisfies every guarantee; one guarantee is the
    black box: delta + (1 - delta)(e^eps - e^x)_+ / (1 + e^eps)."""
    law = Law(*profile_law(guarantees))
    for x in (0.0, 1e-4, 0.05, 0.3, 0.5, 1.0, 2.9, 3.0, 6.0):
        r, t = law.delta(x), profile_by_trade_off(guarantees, x)
        with mp.workdps(DPS):
            assert abs(r - t) <= mp.mpf(10) ** -45 * max(t, mp.mpf(10) ** -300), (x, r, t)
    for e, d in guarantees:
        with mp.workdps(DPS):
            assert law.delta(e) <= mp.mpf(d) * (1 + mp.mpf(10) ** -40) + mp.mpf(10) ** -320
    if len(guarantees) == 1:
        (e, d), = guarantees
        for x in (0.0, e / 2, e, 2 * e + 1):
            with mp.workdps(DPS):
                bb = d + (1 - mp.mpf(d)) * max(0, mp.exp(e) - mp.exp(x)) / (1 + mp.exp(e))
                assert abs(law.delta(x) - bb) <= mp.mpf(10) ** -45, (x, law.delta(x), bb)


@pytest.mark.parametrize("eps,values,k,floor", [(0.5, 3, 40, "1e-330"), (0.05, 4, 60, "1e-330"), (3.0, 3, 25, "1e-330"),
                                                 (0.5, 3, 90, "1e-25"), (0.05, 4, 120, "1e-40")])
def test_trinomial_window_matches_the_convolution(eps, values, k, floor):
    """The k = 10^6 reference (recurrence window from two directly summed values, Chernoff
    tail above it) equals the multinomial convolution where both run, including at atoms and
    one ulp beside them; with a large ``floor`` the window starts below k (direct sums used)."""
    full = Reference.of([(RandomizedResponse(eps, values), k)])
    tri = TrinomialTail(eps, values, k, floor=mp.mpf(floor))
    tri.j_min = 1
    law = full.laws[0]
    for j in (tri.j_hi, tri.j_hi - 1, tri.j_hi // 2, 1):  # the direct sum alone
        with mp.workdps(DPS):
            i = min(range(len(law.pos)), key=lambda i: abs(law.pos[i] - j * mp.mpf(eps)))
            direct = _trinomial_direct(tri.a, tri.b, tri.c, k, j)
            assert abs(direct - law.mass[i]) <= mp.mpf(10) ** -40 * law.mass[i], (j, direct, law.mass[i])
    if mp.mpf(floor) > mp.mpf("1e-300"):
        assert tri.j_hi < k  # the window does not start at the top: the direct sums are used
    for j in (1, 2, k // 3, k // 2, k - 1, k):
        at = float(mp.mpf(eps) * j)
        for x in (at, math.nextafter(at, 0.0), math.nextafter(at, math.inf)):
            if x <= 0:
                continue
            r, tail = tri.delta(x)
            f = full.delta(x)
            with mp.workdps(DPS):
                assert abs(r - f) <= mp.mpf(10) ** -35 * f + tail, (j, x, r, f, tail)


# ============================================================================ the library, checked


def _args(workload):
    mechs = [m for m, _ in workload]
    counts = [c for _, c in workload]
    if len(workload) == 1:
        return dict(eps=mechs[0], k=counts[0])
    return dict(eps=mechs, counts=counts)


def check_delta(workload, ref_delta, x):
    """At eps_g = x: the delta bracket holds the reference (a size limit, ApproxTooCostly: the
    bracket it carries) and delta_g (auto) is >= the reference; no NaN.  Returns the bracket
    and whether it came from a size limit."""
    args = _args(workload)
    ref, ref_err = ref_delta(x)
    try:
        d = optcomp.delta_bounds(**args, eps_g=x, tol=TOL)
        costly = False
    except optcomp.ApproxTooCostly as exc:
        d, costly = exc.bounds, True
        assert d is not None, ("a size limit without a bracket", workload, x, str(exc))
    assert not (math.isnan(d.lower) or math.isnan(d.upper)), (workload, x, d)
    with mp.workdps(DPS):
        assert mp.mpf(d.upper) >= ref * (1 - REL), ("upper bound below the optimum", workload, x, d, ref)
        assert mp.mpf(d.lower) <= (ref + ref_err) * (1 + REL), ("lower bound above the optimum", workload, x, d, ref)
    g = optcomp.delta_g(**args, eps_g=x)
    assert not math.isnan(g)
    with mp.workdps(DPS):
        assert mp.mpf(g) >= ref * (1 - REL), ("delta_g below the optimum", workload, x, g, ref)
    return d, costly, ref


def check_epsilon(workload, ref_delta, ref_inf, t, top=None):
    """epsilon_g (auto) at delta_g = t: delta_opt at the answer is <= t; inf only when t is
    below the mass at +inf (unattainable); and (``top``: the largest finite loss) never above
    the top of the loss when t is attainable (delta_opt(top) = the +inf mass)."""
    e = optcomp.epsilon_g(**_args(workload), delta_g=t)
    assert not math.isnan(e) and e >= 0.0, (workload, t, e)
    with mp.workdps(DPS):
        if math.isfinite(e):
            at, _ = ref_delta(e)
            assert at <= mp.mpf(t) * (1 + REL), ("eps_g below the optimum", workload, t, e, at)
        else:
            assert mp.mpf(t) < ref_inf * (1 + REL), ("inf at an attainable delta_g", workload, t, ref_inf)
        if top is not None and mp.mpf(t) >= ref_inf * (1 + mp.mpf(10) ** -9):
            assert mp.mpf(e) <= max(top, 0) * (1 + mp.mpf(10) ** -9) + mp.mpf(10) ** -300, \
                ("eps_g above the largest loss", workload, t, e, top)
    return e


def delta_tight_enough(d, ref_delta, x):
    """delta_bounds' documented tolerance: upper - lower <= tol upper + 2^-1000 (so upper <=
    (ref + 2^-1000)/(1 - tol)), or upper <= delta_opt(x - tol), or the float64 floor (an
    absolute gap <= 2^-40)."""
    ref, err = ref_delta(x)
    with mp.workdps(DPS):
        caps = [(ref + err + mp.mpf(2) ** -1000) / (1 - TOL), ref + err + mp.mpf(2) ** -40]
        if x - TOL >= 0:
            caps.append(sum(ref_delta(x - TOL)))
        return mp.mpf(d.upper) <= max(caps) * (1 + REL)


# ============================================================================ Hypothesis: k >= 2


def _log(lo, hi):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0**e)


def _normalise(w):
    s = math.fsum(w)
    return tuple(v / s for v in w)


def _pmf(n):
    """A pmf on n outcomes: small integer weights (the middle), or weights 10^-u, u in [0, 300]
    (masses down to 1e-300, losses up to ~690), zeros included."""
    comfortable = st.lists(st.integers(0, 20), min_size=n, max_size=n)
    wide = st.lists(st.one_of(st.just(0.0), st.floats(0.0, 300.0).map(lambda u: 10.0**-u)), min_size=n, max_size=n)
    return st.one_of(comfortable, wide).filter(lambda w: sum(w) > 0).map(_normalise)


PAIRS = st.integers(2, 4).flatmap(lambda n: st.tuples(_pmf(n), _pmf(n))).map(lambda a: Pair(*a))
RRS = st.tuples(_log(1e-4, 30.0), st.one_of(st.integers(3, 6), st.sampled_from([10, 1000, 10**9]))).map(
    lambda a: RandomizedResponse(*a))
GUARANTEE = st.tuples(st.one_of(st.just(0.0), _log(1e-3, 10.0)), st.one_of(st.just(0.0), _log(1e-300, 0.2)))
PROFILES = st.lists(GUARANTEE, min_size=1, max_size=3).map(Profile)
MECHS = st.one_of(RRS, PAIRS, PROFILES)


def _atoms_of(mech):
    return max(len(mech_law(mech, d)[0]) for d in ("forward", "reverse"))


def _costs(mech, c):
    """(enumeration cost of the c-fold, a bound on its merged support)."""
    m = _atoms_of(mech)
    enum = math.comb(c + m - 1, m - 1) if m else 1
    support = 2 * c + 1 if isinstance(mech, RandomizedResponse) else enum
    return enum, support


@st.composite
def workloads(draw):
    """[(mechanism, count)]: one mechanism with k >= 2, or 2-3 different ones with counts >= 1;
    counts cut down (largest first) until the reference's convolution fits BUDGET atoms."""
    n = draw(st.integers(1, 3))
    mechs = draw(st.lists(MECHS, min_size=n, max_size=n, unique=True))
    counts = [draw(st.integers(2 if n == 1 else 1, MAX_COUNT)) for _ in mechs]
    while True:
        costs = [_costs(m, c) for m, c in zip(mechs, counts)]
        if max(e for e, _ in costs) <= BUDGET and math.prod(s for _, s in costs) <= BUDGET:
            break
        i = max(range(n), key=lambda j: costs[j][1])
        counts[i] = max(2 if n == 1 else 1, counts[i] * 2 // 3)
        if n > 1 and all(c == 1 for c in counts):
            break
    return list(zip(mechs, counts))


X_SPECS = st.one_of(
    st.just(("zero", 0.0, 0)),
    st.tuples(st.just("scale"), st.floats(0.0, 1.0), st.just(0)),  # top * 10^-9u
    st.tuples(st.just("atom"), st.floats(0.0, 1.0), st.sampled_from([-1, 0, 1])),  # on an atom, one ulp beside
    st.tuples(st.just("above"), st.floats(0.0, 1.0), st.just(0)),  # top (1 + 10^(18u - 16))
)
T_SPECS = st.one_of(
    st.tuples(st.just("log"), st.floats(0.0, 1.0), st.just(0)),  # 0.5 down to 1e-300
    st.tuples(st.just("inf"), st.just(0.0), st.sampled_from([-1, 0, 1])),  # the mass at +inf, one ulp beside
    st.tuples(st.just("atom"), st.floats(0.0, 1.0), st.sampled_from([-1, 0, 1])),  # delta_opt at an atom
    st.just(("zero", 0.0, 0)),
)


def _ulps(v, n):
    for _ in range(abs(n)):
        v = math.nextafter(v, math.inf if n > 0 else -math.inf)
    return v


def resolve_x(spec, ref):
    kind, u, s = spec
    if kind == "value":
        return u
    top = float(ref.top) if ref.top > 0 else 1.0
    atoms = ref.positive_atoms()
    if kind == "zero" or (kind == "atom" and not atoms):
        return 0.0
    if kind == "scale":
        return top * 10.0 ** (-9.0 * u)
    if kind == "above":
        return top * (1.0 + 10.0 ** (18.0 * u - 16.0))
    return max(0.0, _ulps(atoms[min(int(u * len(atoms)), len(atoms) - 1)], s))


def resolve_t(spec, ref):
    kind, u, s = spec
    if kind == "value":
        return u
    if kind == "zero":
        return 0.0
    if kind == "inf" and ref.inf > 0:
        t = _ulps(float(ref.inf), s)
    elif kind == "atom" and ref.positive_atoms():
        atoms = ref.positive_atoms()
        t = _ulps(float(ref.delta(atoms[min(int(u * len(atoms)), len(atoms) - 1)])), s)
    else:
        t = 10.0 ** (-0.3 - 299.7 * u)
    return min(max(t, 0.0), 0.5)


def _ref_delta(ref):
    return ref.delta_err


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(workload=workloads(), xspec=X_SPECS, tspec=T_SPECS)
# the hand-computed instance: delta_opt(ln 2) = 1/8 exactly
@example(workload=[(Pair((0.5, 0.5), (0.25, 0.75)), 2)], xspec=("value", math.log(2), 0), tspec=("value", 0.125, 0))
# k = 10^6: on an atom (91086 = 182172 * 0.5 exactly), one ulp below it, delta_g down to 1e-300
@example(workload=[(RandomizedResponse(0.5, 3), 10**6)], xspec=("value", 91086.0, 0), tspec=("value", 1e-6, 0))
@example(workload=[(RandomizedResponse(0.5, 3), 10**6)], xspec=("value", math.nextafter(91086.0, 0.0), 0),
         tspec=("value", 1e-300, 0))
# k = 10^6 at an eps whose atoms j * 0.1 are not floats
@example(workload=[(RandomizedResponse(0.1, 3), 10**6)], xspec=("value", 3800.0, 0), tspec=("value", 1e-300, 0))
# masses down to 1e-300 (a loss of -690), eps_g on the top atom 3 ln 2 and beside it
@example(workload=[(Pair((1e-300, 1.0), (0.5, 0.5)), 3)], xspec=("atom", 1.0, -1), tspec=("log", 1.0, 0))
@example(workload=[(Pair((1e-300, 1.0), (0.5, 0.5)), 3)], xspec=("atom", 1.0, 0), tspec=("zero", 0.0, 0))
# tiny eps, k = 40, one ulp above an atom; huge eps with 10^9 values
@example(workload=[(RandomizedResponse(1e-4, 3), 40)], xspec=("atom", 0.5, 1), tspec=("atom", 0.5, 0))
@example(workload=[(RandomizedResponse(30.0, 10**9), 2)], xspec=("atom", 0.0, 1), tspec=("log", 1.0, 0))
# delta_j > 0 (mass at +inf), delta_g on and one ulp beside that mass
@example(workload=[(Profile([(0.0, 0.1), (1.0, 1e-70)]), 20)], xspec=("above", 0.5, 0), tspec=("inf", 0.0, -1))
@example(workload=[(Profile([(0.0, 0.1), (1.0, 1e-70)]), 20)], xspec=("atom", 0.9, 0), tspec=("inf", 0.0, 1))
# heterogeneous, an asymmetric pair with a +inf atom, delta_g 1e-300 and 0
@example(workload=[(RandomizedResponse(0.3, 3), 10), (Pair((0.5, 0.3, 0.2, 0.0), (0.2, 0.3, 0.4, 0.1)), 5)],
         xspec=("atom", 0.7, 0), tspec=("log", 1.0, 0))
@example(workload=[(Profile([(0.5, 0.0), (1.0, 1e-6)]), 4), (RandomizedResponse(2.0, 4), 3),
                   (Pair((0.6, 0.4), (0.1, 0.9)), 6)], xspec=("scale", 0.5, 0), tspec=("zero", 0.0, 0))
# all P-mass at +inf in one direction (disjoint supports), or all but a sliver: delta = 1
@example(workload=[(Pair((0.0, 1.0), (1.0, 0.0)), 2)], xspec=("zero", 0.0, 0), tspec=("log", 0.0, 0))
@example(workload=[(Pair((1.0, 1e-236, 0.0), (1e-147, 1e-100, 1.0)), 3)], xspec=("scale", 0.5, 0),
         tspec=("log", 0.1, 0))
# a Profile delta_j of 1e-300 beside a pure guarantee (a segment of width ~1e-301)
@example(workload=[(Profile([(0.5, 1e-300), (2.0, 0.0)]), 5)], xspec=("atom", 0.6, 0), tspec=("zero", 0.0, 0))
# a multinomial outer window at p within 2^-54 of 1 (the float 1 - p is 0): the pmf ratio from logs
@example(workload=[(RandomizedResponse(0.00019522403915252592, 5), 16), (RandomizedResponse(1.0, 3), 3),
                   (Profile([(0.0, 1.2624684379437497e-56), (0.14458587189001737, 7.489576898452655e-252),
                             (0.26891078133378576, 0.1)]), 3)],
         xspec=("zero", 0.0, 0), tspec=("log", 0.7837646135821006, 0))
def test_k_fold_compositions_over_the_domain(workload, xspec, tspec):
    """k >= 2 copies of RR / Pair / Profile and heterogeneous lists (counts=), eps_g from 0 to
    above the top of the loss (log scale, on atoms and one ulp beside), delta_g from 0.5 to
    1e-300, 0, and at the mass at +inf: the delta bracket holds the 50-digit reference and is
    as tight as delta_bounds documents, delta_g (auto) is never below it, and epsilon_g (auto)
    returns an eps_g where delta_opt <= delta_g (inf only when delta_g is unattainable, never
    above the largest loss otherwise); no NaN."""
    ref = Reference.of(workload)
    x = resolve_x(xspec, ref)
    t = resolve_t(tspec, ref)
    d, costly, _ = check_delta(workload, _ref_delta(ref), x)
    if not costly:
        assert delta_tight_enough(d, _ref_delta(ref), x), ("bracket looser than documented", workload, x, d)
    check_epsilon(workload, _ref_delta(ref), ref.inf, t, top=ref.top)


# ============================================================================ found by these tests


@pytest.mark.parametrize("guarantees,k,x,t", [
    # every delta_j > 0: the +inf mass 1 - (1 - 1e-78)^2 ~ 2e-78; delta_opt >= 2e-78 > delta_g = 1e-300
    ([(0.0, 0.1), (0.0, 1e-78)], 2, 1.0, 1e-300),
    # (0, 1e-100) beside (1, 0): f's first segment (slope -e, width ~6e-101)
    ([(0.0, 1e-100), (1.0, 0.0)], 2, 0.25, 0.0),
    # (0.5, 1e-100) beside (2, 0): the loss-2 segment; (1.0, 0)-DP is false for k = 2
    ([(0.5, 1e-100), (2.0, 0.0)], 2, 1.0, 0.0),
])
def test_profile_with_a_tiny_delta_keeps_it(guarantees, k, x, t):
    """A Profile delta_j far below 2^-256 is kept (before cc3b3f9, 1 - delta_j rounded to 1:
    delta_bounds gave Bounds(0.0, 0.0) and delta_g 0.0 where the reference is ~1e-100..1e-78,
    and epsilon_g at delta_g = t an eps_g whose optimal delta is above t)."""
    workload = [(Profile(guarantees), k)]
    ref = Reference.of(workload)
    assert ref.delta(x) > 0  # the reference: hand-checkable (docstring of the parameters)
    check_delta(workload, _ref_delta(ref), x)
    check_epsilon(workload, _ref_delta(ref), ref.inf, t)


@pytest.mark.parametrize("k", [1, 2])
def test_pair_with_all_but_a_sliver_at_inf(k):
    """Reverse direction (P, Q) = (q, p): P-mass 1 at +inf (q_3 = 1, p_3 = 0) and 1e-147 +
    1e-100 of finite mass (q sums to 1 + 1e-100, within the 1e-9 allowed): delta = 1, with
    no RuntimeWarning (before 5c13049 the leaf divided by 1 - inf_hi = 0)."""
    workload = [(Pair((1.0, 1e-236, 0.0), (1e-147, 1e-100, 1.0)), k)]
    ref = Reference.of(workload)
    assert ref.delta(1.0) >= 1 - 1e-15
    check_delta(workload, _ref_delta(ref), 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("workload,x", [
    # delta_bounds at eps_g = 19980 (an atom, one eps below the top 20000)
    ([(RandomizedResponse(20.0, 3), 1000)], 19980.0),
    # delta_g (auto, tol 1e-4) at the smallest positive atom (delta_bounds at
    # tol 1e-3 answers, with 1.9 GB): losses up to log(0.29 / 2.6e-203) = 466, k = 59
    ([(Pair((0.2926829268292683, 0.12195121951219512, 0.3902439024390244, 0.1951219512195122),
            (2.573692295504094e-203, 0.0, 1.0, 0.0)), 29), (Profile([(0.0, 1.0045111702529927e-180)]), 30)],
     27.28851698947127),
])
def test_compositions_stay_within_memory(workload, x):
    """The answer is a bracket or a size limit (ApproxTooCostly) holding the reference, within
    the module's 4 GiB address space (before the memory budget: arrays of 11-12 million complex
    points against max_points = 8,388,608, MemoryError)."""
    ref = Reference.of(workload)
    check_delta(workload, _ref_delta(ref), x)


@pytest.mark.parametrize("k,x", [(5, 5.0), (16, 31.0)])
def test_a_composed_mass_below_the_least_float_is_reported_as_a_float(k, x):
    """Profile([(0.5, 1e-300), (2.0, 0)]) x k has its loss-2 atom at mass ~1.3e-300: at eps_g
    = 5 (k = 5) the optimum is ~1.6e-600, at eps_g = 31 (k = 16) ~1e-4500 -- both below the
    least float, so the answer is >= 5e-324, never 0 (the long double sum was rounded to
    nearest: 0; at k = 16 the composed masses also underflow long double itself)."""
    workload = [(Profile([(0.5, 1e-300), (2.0, 0.0)]), k)]
    ref = Reference.of(workload)
    assert 0 < ref.delta(x) < mp.mpf("1e-500")
    for method in ("auto", "optimal"):
        assert optcomp.delta_g([Profile([(0.5, 1e-300), (2.0, 0.0)])], counts=[k], eps_g=x, method=method) > 0.0
    check_delta(workload, _ref_delta(ref), x)


def test_delta_zero_is_attainable_beside_a_pair_whose_p_sums_above_one():
    """Pair((1e-300, 1), (0.5, 0.5)): T = sum p = 1 + 1e-300 rounds to a float bracket whose
    upper end is above 1; delta_g = 0 divided by it and moved down one ulp was -2^-1074, whose
    residual target was negative: eps_g inf where the top of the loss (3 log 2 forward, 3 x
    690.08 reverse) attains delta 0."""
    m = Pair((1e-300, 1.0), (0.5, 0.5))
    e = optcomp.epsilon_g([m], counts=[3], delta_g=0.0)
    assert math.isfinite(e)
    assert optcomp.delta_g([m], counts=[3], eps_g=e) == 0.0
    assert 3 * 690.08 < e < 3 * 690.09  # the reverse direction's top, log(0.5 / 1e-300) x 3


@pytest.mark.parametrize("workload,x", [
    ([(RandomizedResponse(1.0, 3), 1), (Pair((0.7083333333333334, 0.2916666666666667), (1.0, 0.0)), 1)], 0.0),
    ([(RandomizedResponse(1.0, 3), 1), (Pair((0.7083333333333334, 0.2916666666666667), (1.0, 0.0)), 2)], 0.0),
    ([(RandomizedResponse(1.0, 3), 3), (Pair((0.7083333333333334, 0.2916666666666667), (1.0, 0.0)), 3)], 0.3),
    ([(RandomizedResponse(0.00019522403915252592, 5), 16), (RandomizedResponse(1.0, 3), 3),
      (Profile(((0.0, 1.2624684379437497e-56), (0.14458587189001737, 7.489576898452655e-252),
                (0.26891078133378576, 1e-16))), 3)], 0.0),
])
def test_a_pair_with_mass_at_infinity_is_never_left_out_of_the_lower_bound(workload, x):
    """Found by the property test after the engine merges: the lattice left out a mechanism
    whose losses are all <= 0 (Pair((0.708, 0.292), (1, 0)) forward: one atom at log 0.708)
    as 'negligible', keeping its +inf event -- but its conditional law has E[e^{-L}] = 1/0.708
    > 1, so leaving it out *raised* H: lower bounds 0.8389 where the optimum is 0.7495 (and a
    lower end above the upper one at k = 2).  And the exact path's binomial window met a pmf
    ratio that underflowed to 0 (a Profile delta of 7.5e-252): log(0), a ValueError."""
    ref = Reference.of(workload)
    check_delta(workload, _ref_delta(ref), x)



def test_costly_exact_compositions_are_left_to_the_lattice():
    """A Profile of five guarantees (ten loss atoms) composed 20 times: the exact rows would walk
    ~10^6 (row, atom) pairs per evaluation (38 s at k = 30), so ``optimal`` refuses
    (ExactTooLarge, naming the rows) and ``auto`` answers by the certified lattice, within its
    tolerance of the lattice's own lower bound; at k = 8, where the rows
    are affordable, the exact answer lies in the lattice's bracket; a 4-atom law at k = 1000
    (structured rows) stays exact."""
    prof = Profile([(0.01, 1e-9), (0.02, 1e-10), (0.05, 1e-12), (0.1, 1e-14), (0.2, 0.0)])
    with pytest.raises(optcomp.ExactTooLarge, match="near atoms"):
        optcomp.delta_g(prof, k=20, eps_g=0.1, method="optimal")
    for x in (0.0, 0.1, 0.3):
        b = optcomp.delta_bounds(prof, k=20, eps_g=x, tol=1e-4)
        got = optcomp.delta_g(prof, k=20, eps_g=x)
        assert b.lower <= got <= b.lower * (1 + 1e-4), (x, got, b)
    exact = optcomp.delta_g(prof, k=8, eps_g=0.1, method="optimal")
    b = optcomp.delta_bounds(prof, k=8, eps_g=0.1, tol=1e-6)
    assert b.lower <= exact <= b.upper
    pair4 = Pair((0.1, 0.2, 0.3, 0.4), (0.4, 0.3, 0.2, 0.1))
    assert optcomp.delta_g(pair4, k=1000, eps_g=100.0, method="optimal") > 0.0
