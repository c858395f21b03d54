"""Poisson-subsampled mechanisms (add/remove neighbours) against references written from the
definitions, in both global directions.

With (P, Q) a base pair (output law on D, holding the record, and on D' = D minus it), a
record enters the subsample with probability s: M(D) = (1 - s) Q + s P and M(D') = Q.  The
remove direction is (M(D), M(D')), the add direction (M(D'), M(D)); the hockey-stick
divergence of a pair (A, B) at x is H(x) = integral of (a - e^x b)_+, the k-fold
composition's is that of the product pair, and the reported delta is the larger of the two
global directions.  Nothing here reads optcomp's formulas: the references integrate the
densities (mpmath quadrature) or enumerate the outcomes (exact rationals / 60 digits)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
import reference as ref
from optcomp._laws import FORWARD, REVERSE
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Pair, RandomizedResponse, Subsampled

# ---------------------------------------------------------------------------------------------
# references


def _gauss_pair(sigma, sens=1.0):
    """Densities of the base pair in the output t: P = N(sens, sigma^2), Q = N(0, sigma^2)."""
    sg, d = mpmath.mpf(sigma), mpmath.mpf(sens)
    return (lambda t: mpmath.npdf(t, d, sg)), (lambda t: mpmath.npdf(t, 0, sg))


def _lap_pair(b, sens=1.0):
    bb, d = mpmath.mpf(b), mpmath.mpf(sens)
    return (lambda t: mpmath.exp(-abs(t - d) / bb) / (2 * bb)), (lambda t: mpmath.exp(-abs(t) / bb) / (2 * bb))


def _mixed(p, q, s):
    """(a, b) densities of the remove pair ((1 - s) Q + s P, Q) or, swapped, the add pair."""
    s = mpmath.mpf(s)
    return (lambda t: (1 - s) * q(t) + s * p(t)), q


def _hs_quad(a, b, x, points):
    """H(x) = int (a - e^x b)_+ dt by quadrature between the given points (the crossings and
    kinks: the integrand is smooth between them)."""
    ex = mpmath.exp(x)
    pts = sorted(set(points))
    total = mpmath.mpf(0)
    for lo, hi in zip(pts[:-1], pts[1:]):
        mid = (lo + hi) / 2 if mpmath.isfinite(lo) and mpmath.isfinite(hi) else (
            hi - 1 if mpmath.isfinite(hi) else (lo + 1 if mpmath.isfinite(lo) else 0))
        if a(mid) - ex * b(mid) > 0:
            total += mpmath.quad(lambda t: a(t) - ex * b(t), [lo, hi], maxdegree=10)
    return max(total, mpmath.mpf(0))


def gauss_h(sigma, s, x, direction, sens=1.0):
    """One step's H(x) of the subsampled Gaussian (any real x), by quadrature.  The loss of
    the base pair is increasing in t, so each direction's integrand changes sign once, at
    the t where (1 - s) + s e^{l(t)} = e^{+-x}."""
    p, q = _gauss_pair(sigma, sens)
    a, b = _mixed(p, q, s)
    if direction == REVERSE:
        a, b = b, a
    sg2, d, s = mpmath.mpf(sigma) ** 2, mpmath.mpf(sens), mpmath.mpf(s)
    r = (mpmath.exp(x if direction == FORWARD else -x) - 1 + s) / s
    sg = mpmath.sqrt(sg2)
    cross = [sg2 / d * mpmath.log(r) + d / 2] if r > 0 else [mpmath.mpf(0)]
    # tanh-sinh needs the scale: the integrand decays over min(sigma, sigma^2/|t|) in the tails
    scale = min(sg, sg2 / (abs(cross[0]) + sg))
    near = [cross[0] + sign * j * scale for j in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256) for sign in (-1, 1)]
    return _hs_quad(a, b, x, [-mpmath.inf, mpmath.inf] + cross + near)


def gauss_h_closed(sigma, s, y, direction, sens=1.0):
    """The same by integrating the densities over the half-line in closed form (Phi): the
    inner integral of the k = 2 reference, any real y."""
    sg, d, s = mpmath.mpf(sigma), mpmath.mpf(sens), mpmath.mpf(s)
    ey = mpmath.exp(y)
    if direction == FORWARD:  # int ((1 - s) q + s p - e^y q)_+ : positive right of t*
        r = (ey - 1 + s) / s
        if r <= 0:
            return 1 - ey
        t = sg * sg / d * mpmath.log(r) + d / 2
        qt, pt = mpmath.ncdf(-t / sg), mpmath.ncdf(-(t - d) / sg)
        return (1 - s) * qt + s * pt - ey * qt
    r = (1 / ey - 1 + s) / s  # int (q - e^y ((1 - s) q + s p))_+ : positive left of t
    if r <= 0:
        return mpmath.mpf(0)
    t = sg * sg / d * mpmath.log(r) + d / 2
    qt, pt = mpmath.ncdf(t / sg), mpmath.ncdf((t - d) / sg)
    return qt - ey * ((1 - s) * qt + s * pt)


KINK_STEPS = (0, 1 / 1024, 1 / 256, 1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8)  # (local scales)


def gauss_h2(sigma, s, x, direction, sens=1.0, far=False):
    """Two steps: E over the first step's outcome t of H_1(x - L(t)) (a 1-d quadrature of
    the one-step curve against the first step's loss).  ``far``: breakpoints every sigma out
    to 40 sigma (where H is tiny its integrand peaks in the first step's far tail -- sigma
    10, q = 1, x = 2: near t = 14 sigma, H ~ 2.8e-47, which five pieces put 6% low), and
    around the kinks of H_1 (x - L(t)) -- y = 0, where H_1 leaves 1 - e^y for its tail, and
    y = log(1 - q), the branch of its closed form -- at the local scale min(sigma,
    sigma^2/|t|): at sigma 1.31, q = 3.6e-5, x = 6.5 the integrand jumps by 17 orders of
    magnitude within sigma/40 there, near t = 22.3 sigma, which the pieces every sigma alone
    put 27% low (these breakpoints: within 1e-10 of 2000 pieces sigma/400 wide split at the kinks)."""
    p, q = _gauss_pair(sigma, sens)
    a, b = _mixed(p, q, s)
    if direction == REVERSE:
        a, b = b, a
    tail = [m * sigma for m in range(1, 41)] if far else [5 * sigma]
    pts = [-f for f in tail[::-1]] + [0, sens] + [f + sens for f in tail]
    if far:
        sg, d, q_ = mpmath.mpf(sigma), mpmath.mpf(sens), mpmath.mpf(s)
        for c in (mpmath.mpf(x), x - mpmath.log1p(-q_)):  # L(t) = c, L = +-log(1 - q + q e^{l(t)})
            r = (mpmath.exp(c if direction == FORWARD else -c) - 1 + q_) / q_
            if r > 0:
                t = sg * sg / d * mpmath.log(r) + d / 2
                scale = min(sg, sg * sg / (abs(t) + sg))
                pts += [t + sign * j * scale for j in KINK_STEPS for sign in (-1, 1)]
        pts = sorted(set(pts))
    return mpmath.quad(lambda t: a(t) * gauss_h_closed(sigma, s, x - mpmath.log(a(t) / b(t)), direction, sens),
                       [-mpmath.inf] + pts + [mpmath.inf])


def laplace_h(b, s, x, direction, sens=1.0):
    """One step of the subsampled Laplace pair by quadrature, split at the kinks 0, sens and
    at the crossing inside (0, sens) (outside, the loss is constant: no crossing)."""
    p, q = _lap_pair(b, sens)
    a, c = _mixed(p, q, s)
    if direction == REVERSE:
        a, c = c, a
    s_, bb, d = mpmath.mpf(s), mpmath.mpf(b), mpmath.mpf(sens)
    r = (mpmath.exp(x if direction == FORWARD else -x) - 1 + s_) / s_
    pts = [-mpmath.inf, 0, d, mpmath.inf]
    if r > 0:
        t = (bb * mpmath.log(r) + d) / 2
        if 0 < t < d:
            pts.append(t)
    return _hs_quad(a, c, x, pts)


def laplace_h_closed(b, s, y, direction, sens=1.0):
    """One step of the subsampled Laplace pair, any real y, with the densities integrated
    in closed form on the three pieces t < 0, 0 < t < sens, t > sens (on each outer piece
    both densities are one exponential: the integrand has one sign; inside it changes sign
    once, at the t where e^{(2t - sens)/b} = r)."""
    b, d, s = mpmath.mpf(b), mpmath.mpf(sens), mpmath.mpf(s)
    ey = mpmath.exp(y)
    ed = mpmath.exp(-d / b)
    # per piece: (Q-mass, P-mass) of t in [t0, t1] for the pieces' exponentials
    qm = lambda t0, t1: (mpmath.exp(-t0 / b) - mpmath.exp(-t1 / b)) / 2  # noqa: E731
    pm = lambda t0, t1: (mpmath.exp((t1 - d) / b) - mpmath.exp((t0 - d) / b)) / 2  # noqa: E731
    if direction == FORWARD:  # a = (1 - s) q + s p, c = q
        ca, cp = 1 - s - ey, s  # integrand = ca q + cp p
        r = (ey - 1 + s) / s
        t_star = d / 2 + b * mpmath.log(r) / 2 if r > 0 else -mpmath.inf
        mid = (0 if t_star <= 0 else (d if t_star >= d else t_star), d)
    else:  # a = q, c = (1 - s) q + s p
        ca, cp = 1 - ey * (1 - s), -ey * s
        r = (1 / ey - 1 + s) / s
        t_star = d / 2 + b * mpmath.log(r) / 2 if r > 0 else -mpmath.inf
        mid = (0, 0 if t_star <= 0 else (d if t_star >= d else t_star))
    left = max(ca * mpmath.mpf(1) / 2 + cp * ed / 2, 0)  # t < 0: q mass 1/2, p mass e^{-d/b}/2
    right = max(ca * ed / 2 + cp * mpmath.mpf(1) / 2, 0)  # t > d: q mass e^{-d/b}/2, p mass 1/2
    inner = ca * qm(*mid) + cp * pm(*mid) if mid[1] > mid[0] else 0
    return left + right + max(inner, 0)


def laplace_h2(b, s, x, direction, sens=1.0):
    """Two steps of the subsampled Laplace pair: outside [0, sens] the first loss is a
    constant (two atoms), inside a 1-d quadrature of the one-step curve (closed form)."""
    p, q = _lap_pair(b, sens)
    a, c = _mixed(p, q, s)
    if direction == REVERSE:
        a, c = c, a
    d = mpmath.mpf(sens)
    left_mass = mpmath.quad(a, [-mpmath.inf, 0])
    right_mass = mpmath.quad(a, [d, mpmath.inf])
    h1 = lambda y: laplace_h_closed(b, s, y, direction, sens)  # noqa: E731
    total = left_mass * h1(x - mpmath.log(a(-1) / c(-1))) + right_mass * h1(x - mpmath.log(a(d + 1) / c(d + 1)))
    # the one-step curve has kinks where x - L(t) meets the losses of the atoms: split there
    pts = [mpmath.mpf(0)] + [d * j / 8 for j in range(1, 8)] + [d]
    total += mpmath.quad(lambda t: a(t) * h1(x - mpmath.log(a(t) / c(t))), pts)
    return total


def finite_h(p, q, s, k, x, direction):
    """k-fold composition of the subsampled finite pair by enumeration of the k-tuples of
    outcomes: masses exact (p, q, s rationals), compared with e^x at 60 digits."""
    s = Fraction(s)
    a = [(1 - s) * qi + s * pi for pi, qi in zip(p, q)]
    b = list(q)
    if direction == REVERSE:
        a, b = b, a
    return ref.tuples_hockey_stick(a, b, k, x)


def black_box_pair(eps, delta):
    """The dominating pair of an (eps, delta) black box (MV Def. 3.1): outcomes
    (+inf, +eps, -eps, -inf), as exact rationals up to e^eps at 60 digits."""
    with mpmath.workdps(60):
        e = mpmath.exp(mpmath.mpf(eps))
        fr = lambda v: Fraction(mpmath.nstr(v, 60, strip_zeros=False))  # noqa: E731
        dl = Fraction(delta)
        hi, lo = fr(e / (1 + e)), fr(1 / (1 + e))
    return [dl, (1 - dl) * hi, (1 - dl) * lo, Fraction(0)], [Fraction(0), (1 - dl) * lo, (1 - dl) * hi, dl]


def _contains(b, ref, rel=1e-12, absolute=1e-300):
    slack = rel * abs(ref) + absolute
    return b.lower - slack <= ref <= b.upper + slack


# ---------------------------------------------------------------------------------------------
# one step: the profile against quadrature


@pytest.mark.parametrize("sigma, s, x", [(1.0, 0.5, 0.0), (1.1, 256 / 60000, 0.003), (0.5, 0.01, 2.0),
                                         (3.0, 1e-6, 0.003)])
def test_gaussian_profile_against_quadrature(sigma, s, x):
    """Quadrature of the densities (accurate to ~1e-10 relative in the far tail)."""
    m = Subsampled(Gaussian(sigma), s)
    with mpmath.workdps(40):
        ref = max(gauss_h(sigma, s, x, FORWARD), gauss_h(sigma, s, x, REVERSE))
    assert _contains(m.profile_bounds(x), ref, rel=1e-9)


@pytest.mark.parametrize("sigma, s", [(1.1, 256 / 60000), (3.0, 1e-6), (0.3, 1.0 - 2**-40), (100.0, 1e-3)])
@pytest.mark.parametrize("x", [0.0, 0.003, 2.0, 30.0])
def test_gaussian_profile_against_half_line_integrals(sigma, s, x):
    """The densities integrated over the half-line where each direction's integrand is
    positive, in Phi (60 digits): to the profile's own 2^-64 relative."""
    m = Subsampled(Gaussian(sigma), s)
    with mpmath.workdps(80):
        ref = max(gauss_h_closed(sigma, s, mpmath.mpf(x), FORWARD), gauss_h_closed(sigma, s, mpmath.mpf(x), REVERSE))
    assert _contains(m.profile_bounds(x), ref, rel=1e-18, absolute=0.0)


@pytest.mark.parametrize("b, s", [(5.0, 0.5), (1.0, 0.1), (0.3, 0.9)])
@pytest.mark.parametrize("x", [0.0, 0.01, 0.08, 0.5])
def test_laplace_profile_against_quadrature(b, s, x):
    m = Subsampled(Laplace(b), s)
    with mpmath.workdps(40):
        ref = max(laplace_h(b, s, x, FORWARD), laplace_h(b, s, x, REVERSE))
    assert _contains(m.profile_bounds(x), ref, rel=1e-20)


def test_q_one_is_the_base():
    for base in (Gaussian(1.3), Laplace(2.0), BlackBox(1.0, 1e-5), Pair((0.5, 0.5), (0.2, 0.8))):
        m = Subsampled(base, 1.0)
        assert m.directions() == base.directions()
        assert m.black_box() == base.black_box() and m.gaussian() == base.gaussian()
        for x in (0.0, 0.7):
            assert m.profile_bounds(x) == base.profile_bounds(x)
        assert optcomp.epsilon_bounds(m, k=3, delta_g=1e-6) == optcomp.epsilon_bounds(base, k=3, delta_g=1e-6)


def test_tiny_q_keeps_the_loss():
    """log(1 - s + s e^l) at s = 1e-6 is ~1e-6 (e^l - 1): no cancellation to 0."""
    p, q = (0.6, 0.4), (0.3, 0.7)
    m = Subsampled(Pair(p, q), 1e-6)
    law = m.law(1.0, FORWARD)
    with mpmath.workdps(50):
        s = mpmath.mpf(1e-6)
        want = sorted(float(mpmath.log1p(s * mpmath.expm1(mpmath.log(mpmath.mpf(a) / mpmath.mpf(b)))))
                      for a, b in zip(p, q))
    got = sorted(law.loss.tolist())
    for w, g in zip(want, got):
        assert abs(g - w) <= 1e-15 * abs(w)
    # the remove loss of the Gaussian is bounded below by log(1 - s), the add loss above by -log(1 - s)
    g = Subsampled(Gaussian(1.0), 1e-6)
    assert g.loss_range(FORWARD)[0] <= math.log1p(-1e-6) <= g.loss_range(FORWARD)[0] + 1e-15
    assert g.loss_range(REVERSE)[1] >= -math.log1p(-1e-6)


# ---------------------------------------------------------------------------------------------
# compositions


@pytest.mark.parametrize("sigma, s, x, tol", [
    (2.0, 0.5, 0.1, 1e-5),
    pytest.param(1.0, 0.3, 0.4, 1e-7, marks=pytest.mark.slow),
    pytest.param(0.8, 0.05, 0.05, 1e-7, marks=pytest.mark.slow),
])
def test_gaussian_two_steps_against_quadrature(sigma, s, x, tol):
    m = Subsampled(Gaussian(sigma), s)
    with mpmath.workdps(20):
        ref = max(gauss_h2(sigma, s, x, FORWARD), gauss_h2(sigma, s, x, REVERSE))
    b = optcomp.delta_bounds(m, k=2, eps_g=x, tol=tol)
    assert _contains(b, ref, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2])
def test_laplace_add_exceeds_remove(k):
    """Laplace (scale 5) subsampled at q = 0.5: at k = 1 the remove direction is the larger,
    at k = 2 the add direction exceeds it by ~8 % (at eps 0.02): a remove-only accountant
    under-reports; optcomp reports the larger global direction."""
    b_, s, x = 5.0, 0.5, (0.05 if k == 1 else 0.02)
    with mpmath.workdps(25):
        h = laplace_h if k == 1 else laplace_h2
        fwd, rev = h(b_, s, x, FORWARD), h(b_, s, x, REVERSE)
    if k == 1:
        assert fwd > 1.1 * rev
    else:
        assert rev > 1.07 * fwd
    got = optcomp.delta_bounds(Subsampled(Laplace(b_), s), k=k, eps_g=x, tol=1e-6)
    assert _contains(got, max(fwd, rev), rel=1e-9)
    assert got.lower > min(fwd, rev) * 1.05


@dataclasses.dataclass(frozen=True)
class _OneWay(Subsampled):
    """Test double: one global direction (``way``) of a subsampled mechanism, as a symmetric
    mechanism (the engine then composes that direction alone)."""

    way: str = FORWARD

    def directions(self):
        return (FORWARD,)

    def law(self, h, direction=FORWARD, **kw):
        return Subsampled.law(self, h, self.way, **kw)

    def loss_range(self, direction=FORWARD, **kw):
        return Subsampled.loss_range(self, self.way, **kw)

    def inf_mass(self, direction=FORWARD):
        return Subsampled.inf_mass(self, self.way)

    def guide(self, direction=FORWARD, **kw):
        return Subsampled.guide(self, self.way, **kw)


def _one_way(mech, direction):
    return _OneWay(mech.mechanism, mech.q, way=direction)


def test_laplace_five_steps_reports_the_add_direction():
    """k = 5 at eps 0.15: the add direction exceeds the remove one by ~5 % (each direction
    composed alone through a test double); the reported bracket sits above the remove one."""
    m = Subsampled(Laplace(5.0), 0.5)
    fwd = optcomp.delta_bounds(_one_way(m, FORWARD), k=5, eps_g=0.15, tol=1e-6)
    rev = optcomp.delta_bounds(_one_way(m, REVERSE), k=5, eps_g=0.15, tol=1e-6)
    both = optcomp.delta_bounds(m, k=5, eps_g=0.15, tol=1e-6)
    assert rev.lower > 1.04 * fwd.upper
    assert both.lower >= rev.lower and both.upper >= rev.upper * (1 - 1e-12)


@pytest.mark.parametrize("k, s", [(1, Fraction(1, 10)), (2, Fraction(1, 2)), (3, Fraction(1, 1000))]
                         + [pytest.param(k, s, marks=pytest.mark.slow) for k in (1, 2, 3)
                            for s in (Fraction(1, 2), Fraction(1, 10), Fraction(1, 1000))])
def test_finite_pair_against_enumeration(k, s):
    """A pair with an outcome Q never produces (+inf loss) and one P never produces (-inf):
    both map as the module docstring says, in both directions."""
    p = [Fraction(1, 2), Fraction(3, 10), Fraction(1, 5), Fraction(0)]  # outcome 0: loss +inf forward,
    q = [Fraction(0), Fraction(2, 5), Fraction(1, 2), Fraction(1, 10)]  # outcome 3: -inf
    m = Subsampled(Pair(tuple(map(float, p)), tuple(map(float, q))), float(s))
    for x in (0.0, 0.05, 0.3):
        ref = max(finite_h(p, q, s, k, x, d) for d in (FORWARD, REVERSE))
        assert _contains(optcomp.delta_bounds(m, k=k, eps_g=x, tol=1e-5), ref, rel=1e-9)


@pytest.mark.parametrize("eps, delta, s, k", [(1.0, 1e-6, 0.5, 2), (0.5, 0.0, 0.1, 3), (2.0, 1e-3, 0.01, 2)])
def test_black_box_against_enumeration(eps, delta, s, k):
    p, q = black_box_pair(eps, delta)
    m = Subsampled(BlackBox(eps, delta), s)
    for x in (0.0, 0.01, 0.4):
        ref = max(finite_h(p, q, Fraction(s), k, x, d) for d in (FORWARD, REVERSE))
        assert _contains(optcomp.delta_bounds(m, k=k, eps_g=x, tol=1e-6), ref, rel=1e-9, absolute=1e-50)
        if k == 1:
            assert _contains(m.profile_bounds(x), ref, rel=1e-30, absolute=1e-50)


def test_mixed_with_other_mechanisms_and_black_boxes():
    """A subsampled pair beside a black box and a randomized response, k small: the
    enumeration of the product of all their pairs, each global direction."""
    s = Fraction(1, 4)
    p, q = [Fraction(7, 10), Fraction(3, 10)], [Fraction(3, 10), Fraction(7, 10)]
    pb, qb = black_box_pair(0.3, 1e-4)
    rp, rq = black_box_pair(0.2, 0.0)  # binary randomized response (0.2)

    def h(x, direction):
        a1 = [(1 - s) * qi + s * pi for pi, qi in zip(p, q)]
        pairs = [(a1, q) if direction == FORWARD else (q, a1), (pb, qb), (rp, rq), (rp, rq)]
        with mpmath.workdps(60):
            ex = mpmath.exp(mpmath.mpf(x))
            tot = mpmath.mpf(0)
            for tup in itertools.product(*(range(len(a)) for a, _ in pairs)):
                pa = math.prod((a[i] for (a, _), i in zip(pairs, tup)), start=Fraction(1))
                pq = math.prod((b[i] for (_, b), i in zip(pairs, tup)), start=Fraction(1))
                v = mpmath.mpf(pa.numerator) / pa.denominator - ex * mpmath.mpf(pq.numerator) / pq.denominator
                tot += max(v, 0)
            return tot

    m = Subsampled(Pair((0.7, 0.3), (0.3, 0.7)), 0.25)
    items = [m, BlackBox(0.3, 1e-4), RandomizedResponse(0.2)]
    for x in (0.1, 0.5):
        ref = max(h(x, FORWARD), h(x, REVERSE))
        got = optcomp.delta_bounds(items, counts=[1, 1, 2], eps_g=x, tol=1e-6)
        assert _contains(got, ref, rel=1e-9)
    # epsilon: the bracket holds the least x with delta(x) <= delta_g
    b = optcomp.epsilon_bounds(items, counts=[1, 1, 2], delta_g=1e-3, tol=1e-6)
    assert h(b.upper, FORWARD) <= 1e-3 * (1 + 1e-9) and h(b.upper, REVERSE) <= 1e-3 * (1 + 1e-9)
    assert max(h(b.lower - 1e-12, FORWARD), h(b.lower - 1e-12, REVERSE)) >= 1e-3 * (1 - 1e-9)


def test_optimal_method_answers_a_subsampled_pair():
    """A subsampled finite pair is a finite pair: method='optimal' composes it exactly."""
    m = Subsampled(Pair((0.7, 0.3), (0.3, 0.7)), 0.25)
    ref = max(finite_h([Fraction(7, 10), Fraction(3, 10)], [Fraction(3, 10), Fraction(7, 10)], Fraction(1, 4), 2,
                       0.1, d) for d in (FORWARD, REVERSE))
    got = optcomp.delta_g(m, k=2, eps_g=0.1, method="optimal")
    assert got >= float(ref) * (1 - 1e-12) and got <= float(ref) * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------
# property: bracket holds the truth on log scales


def _eps_truth(sigma, s, delta):
    """The least x >= 0 with max over the directions of one step's H(x) <= delta (bisection
    on the quadrature-free closed form of the densities' half-line integrals)."""
    with mpmath.workdps(40):  # (mpmath's exponent is unbounded: tiny deltas need no more digits)
        f = lambda x: max(gauss_h_closed(sigma, s, x, FORWARD), gauss_h_closed(sigma, s, x, REVERSE))  # noqa: E731
        if f(mpmath.mpf(0)) <= delta:
            return 0.0
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while f(hi) > delta:
            lo, hi = hi, 2 * hi
        for _ in range(64):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if f(mid) <= delta else (mid, hi)
        return hi


def _one_step_epsilon_check(log_q, log_sigma, log_delta):
    s, sigma, delta = 10.0**log_q, 10.0**log_sigma, 10.0**log_delta
    m = Subsampled(Gaussian(sigma), s)
    truth = _eps_truth(sigma, s, delta)
    b = optcomp.epsilon_bounds(m, k=1, delta_g=delta, tol=1e-3 * max(1.0, float(truth)))
    assert math.isfinite(b.upper)
    assert b.lower <= truth * (1 + 1e-12) + 1e-300 and truth <= b.upper * (1 + 1e-12) + 1e-300


@given(log_q=st.floats(-6, 0), log_sigma=st.floats(math.log10(0.3), 2), log_delta=st.floats(-300, -1))
@settings(max_examples=6, deadline=None)
def test_one_step_epsilon_bracket_holds_truth(log_q, log_sigma, log_delta):
    _one_step_epsilon_check(log_q, log_sigma, log_delta)


@pytest.mark.slow
@given(log_q=st.floats(-6, 0), log_sigma=st.floats(math.log10(0.3), 2), log_delta=st.floats(-300, -1))
@settings(max_examples=60, deadline=None)
def test_one_step_epsilon_bracket_holds_truth_more(log_q, log_sigma, log_delta):
    _one_step_epsilon_check(log_q, log_sigma, log_delta)


@pytest.mark.parametrize("log_q, log_sigma, log_delta", [(-6, math.log10(0.3), -300), (0, 2, -300), (-6, 2, -1),
                                                          (-0.99999, 0.0, -55.0)])
def test_one_step_epsilon_at_the_corners(log_q, log_sigma, log_delta):
    _one_step_epsilon_check(log_q, log_sigma, log_delta)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(log_q=st.floats(-6, 0), log_sigma=st.floats(math.log10(0.3), 2), x=st.floats(0.0, 3.0))
def test_two_step_delta_bracket_holds_truth(log_q, log_sigma, x):
    s, sigma = 10.0**log_q, 10.0**log_sigma
    with mpmath.workdps(30):
        ref = max(gauss_h2(sigma, s, x, FORWARD, far=True), gauss_h2(sigma, s, x, REVERSE, far=True))
    b = optcomp.delta_bounds(Subsampled(Gaussian(sigma), s), k=2, eps_g=x, tol=1e-4)
    assert _contains(b, ref, rel=1e-8, absolute=1e-280)


def test_two_steps_at_a_kink_far_in_the_tail():
    """sigma 1.31, q = 3.6e-5, x = 6.5: the two-step integrand jumps by 17 orders of
    magnitude within sigma/40 near t = 22.3 sigma (:func:`gauss_h2`'s kinks); the reference
    agrees with 2000 pieces sigma/400 wide split at the kinks (8.93396588617e-109, computed
    once: 30 s) and the bracket holds it."""
    sigma, s, x = 1.31, 3.6e-5, 6.5
    with mpmath.workdps(30):
        ref = max(gauss_h2(sigma, s, x, FORWARD, far=True), gauss_h2(sigma, s, x, REVERSE, far=True))
    assert abs(ref / mpmath.mpf("8.93396588617e-109") - 1) < 1e-9
    b = optcomp.delta_bounds(Subsampled(Gaussian(sigma), s), k=2, eps_g=x, tol=1e-4)
    assert _contains(b, ref, rel=1e-8, absolute=1e-280)


# ---------------------------------------------------------------------------------------------
# validation


def test_bad_input():
    with pytest.raises(ValueError, match="q"):
        Subsampled(Gaussian(1.0), 0.0)
    with pytest.raises(ValueError, match="q"):
        Subsampled(Gaussian(1.0), 1.5)
    with pytest.raises(TypeError, match="mechanism"):
        Subsampled(1.0, 0.5)
    with pytest.raises(ValueError, match="scheme"):
        Subsampled(Gaussian(1.0), 0.5, scheme="shuffle")
    with pytest.raises(ValueError, match="relation"):
        Subsampled(Gaussian(1.0), 0.5, relation="neighbours")


@pytest.mark.parametrize("b, s, y", [(5.0, 0.5, 0.02), (1.0, 0.1, -0.3), (0.3, 0.9, 1.0), (2.0, 0.01, 0.0)])
def test_laplace_references_agree(b, s, y):
    """The two references of the Laplace curve (quadrature, closed form) agree: the k = 2
    reference builds on the second."""
    with mpmath.workdps(30):
        for d in (FORWARD, REVERSE):
            qd, cf = laplace_h(b, s, y, d), laplace_h_closed(b, s, y, d)
            assert abs(qd - cf) <= 1e-20 + 1e-15 * abs(cf)


def test_without_replacement_black_box_is_balle_barthe_gaboardi():
    """A fraction q drawn without replacement, replace-one neighbours: an (eps, delta) black box
    becomes the randomized response of (log(1 + q(e^eps - 1)), q delta) (BBG 2018, Thm 9):
    its profile from MV Def. 3.1, delta(x) = d + (1 - d)(e^e - e^x)_+/(1 + e^e)."""
    eps, delta, q = 1.0, 1e-6, 0.01
    m = Subsampled(BlackBox(eps, delta), q, scheme="without_replacement", relation="replace_one")
    with mpmath.workdps(40):
        e = mpmath.log1p(q * mpmath.expm1(eps))
        d = mpmath.mpf(q) * mpmath.mpf(delta)
        for x in (0.0, 0.01, 0.5):
            ref = d + (1 - d) * max(mpmath.exp(e) - mpmath.exp(x), 0) / (1 + mpmath.exp(e))
            b = m.profile_bounds(x)
            assert b.lower - 1e-15 * ref <= ref <= b.upper * (1 + 1e-12)
    assert m.black_box()[0] >= float(e) and m.black_box()[0] <= float(e) * (1 + 1e-15)
    prof = Subsampled(optcomp.mechanisms.Profile([(1.0, 1e-6), (2.0, 0.0)]), 0.1, scheme="without_replacement",
                      relation="replace_one")
    assert optcomp.epsilon_g(prof, k=10, delta_g=1e-5) <= optcomp.epsilon_g(
        Subsampled(BlackBox(1.0, 1e-6), 0.1, scheme="without_replacement", relation="replace_one"), k=10,
        delta_g=1e-5)


@pytest.mark.parametrize("scheme, relation, base", [("poisson", "replace_one", Gaussian(1.0)),
                                                    ("without_replacement", "replace_one", Gaussian(1.0)),
                                                    ("without_replacement", "replace_one", Laplace(1.0)),
                                                    ("without_replacement", "add_remove", BlackBox(1.0))])
def test_schemes_without_an_established_pair_are_refused(scheme, relation, base):
    with pytest.raises(ValueError, match="established"):
        Subsampled(base, 0.1, scheme=scheme, relation=relation)
