"""Self-composition by one FFT (optcomp._lattice.selfcompose): k copies of one law, one
forward transform, a pointwise k-th power, one inverse transform.

Each piece of the error bound is checked against exact arithmetic (integer convolutions,
40-60 digit mpmath), and the whole pass -- through the production plan of a mechanism
(Workload / Source / Power) -- brackets references written from the definitions of the
laws in tests/reference.py, independently of the code under test:

* Laplace k = 1: the closed form delta(x) = 1 - e^{(x - a)/2};
* Laplace k = 2: that reference checked against a direct double quadrature here;
* Laplace k = 3, 4: the Irwin-Hall mixture with exact antiderivatives (reference.py);
* Gaussian, k up to 10^6: the closed form of mu sqrt(k) (Balle-Wang), delta down to 1e-300;
* ternary randomized response, k = 200: the exact multinomial law (the window is narrower
  than the support: aliasing, lump and slack all charged);
at x on atoms of the composed law and between them, in both directions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import _refine, lattice
from optcomp._lattice import grouped, leaves, selfcompose
from optcomp._lattice.workload import Source, Workload
from optcomp.mechanisms import Gaussian, Laplace, RandomizedResponse

from reference import ref_gaussian_delta, ref_laplace_delta, ref_ternary_delta, ref_ternary_law

U = 2.0**-53


def workload(mech, k: int) -> Workload:
    """k copies of one mechanism as the drivers build them (one Source: a Power of k)."""
    return Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (Source(mech, k),))


def fft_pass(work: Workload, h: float, theta: float, log_slack: float = math.log(1e-320)):
    """The pass the drivers run on a lone Power, asserting it took the FFT path."""
    plan = work.plan(h)
    assert len(plan) == 1 and isinstance(plan[0], leaves.Power)
    lp = selfcompose.power_pass(plan[0], h, theta, log_slack, 1)
    assert lp is not None
    return lp


def contains(lp, x, ref, rel_gap=None):
    lo, hi = lp.excess_bounds(x)
    assert mp.mpf(lo) <= ref <= mp.mpf(hi), (x, lo, ref, hi)
    if rel_gap is not None:
        assert hi - lo <= rel_gap * float(ref) + 1e-300, (x, lo, float(ref), hi)


# ----------------------------------------------------------------------------- the pieces


def _dyadic_rows(rng, B: int, W: int, bits: int = 12):
    """B rows of W dyadic rationals m / 2^bits, each summing to exactly 1 (floats exact),
    as integer numerators and floats."""
    ints = []
    for _ in range(B):
        r = (rng.random(W) ** 3 * 2 ** (bits - 2)).astype(np.int64)
        r[rng.integers(W)] += 2**bits - int(r.sum())
        ints.append([int(v) for v in r])
    return ints, np.array(ints, dtype=float) * 2.0**-bits


def _exact_circular(ints, k: int, N: int):
    """The exact circular k-fold (length N) of integer rows, as numerators (Python ints)."""
    out = []
    for r in ints:
        acc = np.array([1], dtype=object)
        base = np.array(r, dtype=object)
        e = k
        while e:  # square-and-multiply on exact integer polynomials
            if e & 1:
                acc = np.convolve(acc, base)
            e >>= 1
            if e:
                base = np.convolve(base, base)
        fold = [0] * N
        for i, v in enumerate(acc.tolist()):
            fold[i % N] += v
        out.append(fold)
    return out


@pytest.mark.parametrize("W,k,N,direct", [(9, 2, 16, True), (12, 3, 40, True), (7, 17, 50, True),
                                           (12, 40, 150, True), (12, 40, 150, False), (5, 64, 90, False)])
def test_kfold_circular_within_its_bound(W, k, N, direct, monkeypatch):
    """The computed circular k-fold is within E (max norm) of the exact one, entry by entry
    (exact rationals: dyadic rows, integer convolutions), with and without the direct sums
    for the surviving frequencies, windows narrower than the support (aliasing) included;
    and E is small (the bound is not vacuous)."""
    if not direct:
        monkeypatch.setattr(selfcompose, "DIRECT_POINTS", 0)
    bits = 12
    rng = np.random.default_rng(W * 1000 + k)
    ints, rows = _dyadic_rows(rng, 3, W, bits)
    c, E, s1 = selfcompose._kfold_circular(rows, k, N, 1)
    exact = _exact_circular(ints, k, N)
    scale = Fraction(1, 2 ** (bits * k))
    for b in range(3):
        assert s1[b] >= 1.0
        worst = max(abs(Fraction(float(c[b, i])) - v * scale) for i, v in enumerate(exact[b]))
        assert worst <= Fraction(float(E[b])), (b, float(worst), E[b])
        assert E[b] < 1e-9


def test_direct_dft_componentwise_bound():
    """The direct sums at chosen frequencies are within delta |x|_1 of the exact DFT
    (50-digit mpmath), every frequency, every row."""
    rng = np.random.default_rng(3)
    for W, N in ((5, 8), (40, 243), (300, 4000)):
        rows = rng.random((2, W)) ** 4
        J = np.unique(rng.integers(0, N // 2 + 1, 10))
        X, delta = selfcompose._direct_dft(rows, J, N)
        with mp.workdps(50):
            for b in range(2):
                s1 = mp.fsum(mp.mpf(float(v)) for v in rows[b])
                for i, j in enumerate(J.tolist()):
                    ex = mp.fsum(mp.mpf(float(rows[b, q])) * mp.expjpi(-mp.mpf(2 * j * q) / N) for q in range(W))
                    assert abs(mp.mpc(X[b, i].real, X[b, i].imag) - ex) <= delta * s1, (W, N, j)


def test_direct_dft_with_an_offset_and_small_blocks():
    """The split transform's direct sums: a window starting at lattice index ``offset``, summed
    in blocks of 2 -- within its (smaller) delta |x|_1 of the exact DFT (50-digit mpmath)."""
    rng = np.random.default_rng(5)
    for W, N, offset in ((5, 8, 3), (40, 243, 200), (90, 4000, 1234)):
        rows = rng.random((2, W)) ** 4
        J = np.unique(rng.integers(0, N // 2 + 1, 12))
        X, delta = selfcompose._direct_dft(rows, J, N, offset=offset, block=2)
        assert delta < selfcompose._direct_dft(rows, J, N)[1]
        with mp.workdps(50):
            for b in range(2):
                s1 = mp.fsum(mp.mpf(float(v)) for v in rows[b])
                for i, j in enumerate(J.tolist()):
                    ex = mp.fsum(mp.mpf(float(rows[b, q])) * mp.expjpi(-mp.mpf(2 * j * (offset + q)) / N)
                                 for q in range(W))
                    assert abs(mp.mpc(X[b, i].real, X[b, i].imag) - ex) <= delta * s1, (W, N, j)


def _concentrated_rows(seed: int, W: int, bits: int = 40):
    """Three rows of W dyadic rationals m / 2^bits summing to 1: one entry holding nearly all
    the mass (a step sampled at a small rate), one of ~2^-17, the rest below 2^-32 -- spread thin."""
    rng = np.random.default_rng(seed)
    ints = []
    for _ in range(3):
        r = [int(v) for v in rng.integers(0, 2**8, W)]
        r[int(rng.integers(3, W))] = int(rng.integers(2**22, 2**24))
        big = int(rng.integers(0, 3))
        r[big] = 0
        r[big] = 2**bits - sum(r)
        ints.append(r)
    return ints, np.array(ints, dtype=float) * 2.0**-bits


@pytest.mark.parametrize("W,k,N", [(16, 64, 600), (12, 96, 700), (16, 64, 2048)])
def test_split_transform_within_its_bound_and_tighter(W, k, N, monkeypatch):
    """The split transform (module docstring, step 1'): on rows whose mass sits on one lattice
    point, every row takes it, the computed circular k-fold is within E of the exact one
    entry by entry (exact integer convolutions, aliasing included), and E is at least twice
    smaller than the plain FFT's bound on the same rows."""
    ints, rows = _concentrated_rows(W * 1000 + k, W)
    taken = []
    real = selfcompose._split_transform

    def spy(*args, **kw):
        out = real(*args, **kw)
        taken.extend(o is not None for o in out)
        return out

    monkeypatch.setattr(selfcompose, "_split_transform", spy)
    c, E, _ = selfcompose._kfold_circular(rows, k, N, 1)
    assert taken == [True, True, True]
    exact = _exact_circular(ints, k, N)
    scale = Fraction(1, 2 ** (40 * k))
    for b in range(3):
        worst = max(abs(Fraction(float(c[b, i])) - v * scale) for i, v in enumerate(exact[b]))
        assert worst <= Fraction(float(E[b])), (b, float(worst), E[b])
    monkeypatch.setattr(selfcompose, "SPLIT_LOOSE", math.inf)
    _, E_plain, _ = selfcompose._kfold_circular(rows, k, N, 1)
    assert np.all(E <= 0.5 * E_plain), (E, E_plain)


@pytest.mark.parametrize("k", [2, 3, 7, 1000, 123457])
def test_power_within_its_bound(k):
    """Square-and-multiply: |fl(z^k) - z^k| <= ((1 + mu)^(k-1) - 1) |z|^k
    + 2 (k - 1) alpha0 ((1 + mu) max(1, |z|))^k against 50-digit powers."""
    rng = np.random.default_rng(k)
    r = np.concatenate([1.0 - rng.random(20) * 1e-6 * 10.0 ** rng.integers(0, 6, 20), [1.0, 1.0 + 1e-13]])
    z = r * np.exp(1j * rng.random(r.size) * 2 * np.pi)
    p = selfcompose._power(z, k)
    amp = math.expm1((k - 1) * math.log1p(selfcompose.MU))
    with mp.workdps(50):
        for zi, pi in zip(z.tolist(), p.tolist()):
            ex = mp.mpc(zi.real, zi.imag) ** k
            a = abs(mp.mpc(zi.real, zi.imag))
            bound = amp * a**k + 2 * (k - 1) * selfcompose.ALPHA0 * ((1 + selfcompose.MU) * max(1, a)) ** k
            assert abs(mp.mpc(pi.real, pi.imag) - ex) <= bound, (k, zi)


def test_row_log_mgf_and_power_sums_are_upper_bounds():
    """_row_log_mgf and _pow_sum_up bound the exact sums from above, within 1e-10."""
    rng = np.random.default_rng(5)
    row = rng.random(500) ** 6
    row[rng.integers(0, 500, 100)] = 0.0
    sig = np.array([-3.0, -0.01, 0.0, 1e-4, 0.2, 5.0])
    got = selfcompose._row_log_mgf(row, sig)
    mag = rng.random(300) * (1.0 + 1e-6)
    w = np.where(rng.random(300) < 0.5, 1.0, 2.0)
    with mp.workdps(40):
        for s, g in zip(sig.tolist(), got.tolist()):
            ex = mp.log(mp.fsum(mp.mpf(float(v)) * mp.e ** (mp.mpf(s) * q) for q, v in enumerate(row.tolist())))
            assert ex <= g <= ex + 1e-10 * (1 + abs(ex)), (s, g, ex)
        for e in (1.0, 2.0, 999.0, 123457.0):
            ex = mp.fsum(mp.mpf(float(wi)) * mp.mpf(float(m)) ** int(e) for m, wi in zip(mag.tolist(), w.tolist()))
            g = selfcompose._pow_sum_up(mag, e, w)
            assert ex <= g <= ex * (1 + 1e-9) + 1e-300, (e, g, ex)


def test_refinement_charge_bounds_the_exact_split():
    """leaves.refinement_charge: for an atom at l split between lo and lo + h keeping its P1
    mass and E_P1[e^L], log E_P0[e^{sL'}] - s l (per unit P0 mass) is at most the charge,
    every tilt (negative, in (-1, 0), large) and position; and it is second order in h."""
    S = np.array([-40.0, -3.0, -1.0, -0.5, 0.0, 0.3, 1.0, 7.0, 60.0])
    with mp.workdps(40):
        for h in (1e-4, 0.01, 0.3):
            charge = leaves.refinement_charge(S, h, 0.0)
            for g in (0.0, 1e-9, 0.1, 0.5, 0.93, 1.0):
                H, L = mp.mpf(h), mp.mpf(g) * h  # the atom at lo + g h, lo = 0
                pi = mp.expm1(L) / mp.expm1(H)  # P1 probability of hi: (1 - pi) + pi e^h = e^l
                for s, c in zip(S.tolist(), charge.tolist()):
                    ex = mp.log((1 - pi) + pi * mp.e ** ((s + 1) * H)) - (s + 1) * L
                    assert ex <= c + 1e-30, (h, g, s, ex, c)
        assert leaves.refinement_charge(np.array([1.0]), 1e-4, 0.0)[0] < 1e-8  # not 2 |s| h = 2e-4


def test_an_atom_on_the_lattice_is_not_split():
    """An atom within its position error of a lattice point keeps (all but a rounding
    sliver of) its mass there: the aligned step of a self-composition costs nothing."""
    h = 2.0**-10
    leaf = leaves.Leaf.from_masses([3 * h, -5 * h], [1e-19, 0.0], [0.6, 0.4], [0.6, 0.4])
    rows, base, logZ, *_ = leaves.leaf_rows(leaf, h, 0.0)
    up = rows[0] * math.exp(logZ[0])
    assert up[3 - base] == pytest.approx(0.6, rel=1e-12) and up[4 - base] < 1e-12
    assert up[-5 - base] == pytest.approx(0.4, rel=1e-12) and up[-4 - base] < 1e-12
    assert up[-4 - base] == 0.0  # exactly on the lattice (perr 0): no sliver at all


def test_window_tilts_near_the_best_edge():
    """The window's certified sums are taken at the tilts _near_best picks from the estimate
    _row_mgf_estimate: the estimate follows the exact log-MGF of a row (to 1e-3 of its
    spread here), the pick holds the grid's best tilt of the exact objective or a neighbour
    of it, and every index when no objective is finite."""
    rng = np.random.default_rng(3)
    q = np.arange(20000, dtype=float)
    row = np.exp(-0.5 * ((q - 7000.0) / 900.0) ** 2) * (1.0 + 0.1 * rng.random(q.size))
    k, A = 50, math.log(2.0**-60)
    sig = 2.0 ** (np.arange(-12, 41, 2) / 4.0) / (900.0 * math.sqrt(k))
    est = selfcompose._row_mgf_estimate(row, sig)
    exact = selfcompose._row_log_mgf(row, sig)
    assert np.all(np.abs(est - exact) <= 1e-3 * (1.0 + np.abs(exact)))
    pick = selfcompose._near_best((k * est - A) / sig)
    assert int(np.argmin((k * exact - A) / sig)) in pick and pick.size <= 3
    assert list(selfcompose._near_best(np.array([np.nan, np.inf]))) == [0, 1]
    assert list(selfcompose._near_best(np.array([3.0, 1.0, 2.0, 5.0]), 1)) == [0, 1, 2]


# ----------------------------------------------------------------------------- the whole pass


def test_laplace_one_copy_closed_form():
    """One copy (a Power of 1): delta(x) = 1 - e^{(x - a)/2} on [0, a), 0 beyond; x on the
    atom +a and one ulp below it included."""
    mech, a = Laplace(2.0), 0.5
    src = Source(mech, 1)
    for h, theta in ((2.0**-9, 0.0), (2.0**-11, 3.0)):
        item = leaves.Power(src.leaf(h), 1, src.leaf)
        lp = selfcompose.power_pass(item, h, theta, math.log(1e-300), 1)
        assert lp is not None
        for x in (0.0, 0.1, 0.25, math.nextafter(a, 0.0), a, 0.7):
            with mp.workdps(40):
                X = mp.mpf(x)
                ref = -mp.expm1((X - mp.mpf(a)) / 2) if x < a else mp.mpf(0)
            contains(lp, x, ref, rel_gap=2e-4 if x < 0.45 else None)


def _laplace_two_quadrature(a, x):
    """delta(x) of two Laplace losses by direct quadrature over the definition (atoms +-a,
    density e^{(l - a)/2}/4 on (-a, a)), written apart from reference.py's closed forms."""
    a, x = mp.mpf(a), mp.mpf(x)
    atoms = [(a, mp.mpf(1) / 2), (-a, mp.e**-a / 2)]

    def g(s):
        return -mp.expm1(x - s) if s > x else mp.mpf(0)

    def f(l):
        return mp.e ** ((l - a) / 2) / 4

    def one(c):  # int f(l) g(c + l) dl, kink at l = x - c
        pts = sorted({-a, a, min(max(x - c, -a), a)})
        return mp.quad(lambda l: f(l) * g(c + l), pts)

    total = mp.fsum(m1 * m2 * g(l1 + l2) for l1, m1 in atoms for l2, m2 in atoms)
    total += 2 * mp.fsum(m * one(l) for l, m in atoms)
    kinks = sorted({-a, a} | {min(max(v, -a), a) for v in (x - a, x + a)})
    return total + mp.quad(lambda l: f(l) * one(l), kinks)


@pytest.mark.parametrize("scale", [2.0, 100.0])
def test_laplace_two_copies_exact_integral(scale):
    """k = 2: the pass brackets the closed-form reference (itself checked against a direct
    double quadrature) at x on the atom 0 = a + (-a), between atoms and near the top 2a,
    and in the eps direction at the atom."""
    a = 1.0 / scale
    work = workload(Laplace(scale), 2)
    xs = [0.0, 0.3 * a, a, 1.9 * a]
    refs = [ref_laplace_delta(a, 2, x) for x in xs]
    if scale == 2.0:  # the closed forms against the definition, integrated directly
        with mp.workdps(20):
            assert abs(_laplace_two_quadrature(a, xs[1]) - refs[1]) <= 1e-15 * refs[1]
    for hh in (a / 50, a / 700):
        h = _refine.step_below(hh)
        lp = fft_pass(work, h, work.tilt_for(a))
        for x, r in zip(xs, refs):
            contains(lp, x, r, rel_gap=0.05 if hh == a / 50 else 2e-3)
    # eps direction: t = delta(a) gives eps_g = a exactly
    t = float(refs[2])
    b = lp.epsilon_bounds(math.nextafter(t, 0.0), math.nextafter(t, 1.0))
    assert b.lower <= a <= b.upper and b.gap <= 1e-3 * a


@pytest.mark.parametrize("k,scale", [(3, 2.0), (4, 0.7), (4, 30.0)])
def test_laplace_k_fold_against_mpmath(k, scale):
    """k = 3, 4: the pass brackets the 60-digit k-fold (Irwin-Hall mixture) at atoms of the
    composed law ((k - 2i) a), between them, at deltas from ~0.3 down to the last percent of
    the top, and eps_g on an atom lies in the eps bracket."""
    a = 1.0 / scale
    work = workload(Laplace(scale), k)
    xs = [0.0, 0.37 * a, (k - 2) * a, (k - 0.5) * a, (k - 0.01) * a]
    refs = [ref_laplace_delta(a, k, x) for x in xs]
    h = _refine.step_below(a / 400)
    for x0 in (xs[1], xs[3]):
        lp = fft_pass(work, h, work.tilt_for(x0))
        for x, r in zip(xs, refs):
            contains(lp, x, r, rel_gap=0.02)
        t = float(refs[2])
        b = lp.epsilon_bounds(math.nextafter(t, 0.0), math.nextafter(t, 1.0))
        assert b.lower <= (k - 2) * a <= b.upper, (b, (k - 2) * a)


def _gaussian_step(sigma: float, theta: float) -> float:
    """A step of 1/(16 sqrt(1 + theta)) of one copy's loss spread mu_1 = 1/sigma (the gap of
    delta relative grows with the tilt).  Finer steps do not help a Gaussian at large k:
    its cell masses are known to ~1e-12 / (cell width in sd) (``_rounding.SPECIAL_ABS``),
    which the cells' connect-the-dots split divides by h, k times over."""
    return _refine.step_below(1.0 / sigma / 16.0 / math.sqrt(1.0 + theta))


@pytest.mark.parametrize("sigma,k", [(3.0, 20), (100.0, 10**4), pytest.param(1000.0, 10**6, marks=pytest.mark.slow)])
def test_gaussian_k_fold_closed_form_down_to_1e_300(sigma, k):
    """k Gaussians through the Power path (not the closed-form shortcut of the drivers):
    the pass brackets delta of mu sqrt(k) at deltas ~1e-2, 1e-10, 1e-100 and ~1e-300;
    within 15% up to 10^4 copies (at 10^6 the cell masses' brackets, amplified k / h
    times, leave the upper end a few times too high: containment only)."""
    work = workload(Gaussian(sigma), k)
    with mp.workdps(40):
        mu = mp.sqrt(k) / mp.mpf(sigma)
    muf = float(mu)
    for z in (2.0, 6.0, 21.0, 37.0):
        x = muf * (muf / 2 + z)
        ref = ref_gaussian_delta(mu, x)
        theta = work.tilt_for(x)
        lp = fft_pass(work, _gaussian_step(sigma, theta), theta, math.log(float(ref)) - 40.0)
        contains(lp, x, ref, rel_gap=0.15 if k <= 10**4 else None)


def test_ternary_randomized_response_with_an_aliased_window():
    """200 copies of 3-ary randomized response (a law on eps Z: the pass runs at step eps):
    tilted away from the mean, the window is narrower than the support, so aliasing
    (charged to the lower row), the lump below and the mass sent to +inf above all enter;
    the pass brackets the exact multinomial law at atoms d eps, between them and deep in
    the tail, tightly."""
    eps, k = 0.5, 200
    law = ref_ternary_law(eps, k, dps=40)
    work = workload(RandomizedResponse(eps, values=3), k)
    xs = [0.0, 5.0, 12.25, 30.0, 60.0]  # 5 = 10 eps and 30 = 60 eps are atoms
    refs = [ref_ternary_delta(eps, law, x, dps=40) for x in xs]
    h = _refine.step_below(eps / 64)
    log_slack = math.log(float(min(refs))) - 30.0
    for x0 in (12.25, 45.0):
        lp = fft_pass(work, h, work.tilt_for(x0), log_slack)
        assert lp.h == eps  # the law lives on eps Z: the pass runs there (exact up to float charges)
        if x0 == 45.0:
            assert lp.points < 2 * k  # a window, not the whole support: tilted, 45 is 4.8 sd above the mean
        for x, r in zip(xs, refs):
            contains(lp, x, r)
    for x, r in zip(xs[1:3], refs[1:3]):  # tight at the tilt aimed there
        lp = fft_pass(work, h, work.tilt_for(x), log_slack)
        contains(lp, x, r, rel_gap=1e-8)
        b = lp.epsilon_bounds(math.nextafter(float(r), 0.0), math.nextafter(float(r), 1.0))
        assert b.lower <= x <= b.upper and b.gap <= 1e-7 * x, (x, b)


def test_drivers_take_the_fft_path():
    """The eps and delta drivers on a lone Power (4 Laplace mechanisms) meet the tolerance
    around the 60-digit reference at the first step they choose (aligned to the law and
    coarsened by its cell mass in the pass)."""
    k, scale, delta_g = 4, 2.0, 1e-3
    a = 1.0 / scale
    work = workload(Laplace(scale), k)
    b = _refine.lattice_epsilon(work, delta_g, delta_g, 1e-5, k * a, max_points=2**23, workers=1, progress=None)
    assert ref_laplace_delta(a, k, b.upper) <= delta_g <= ref_laplace_delta(a, k, b.lower), b
    assert b.gap <= 1e-5 and len(b.passes) <= 2  # (a second pass: the tilt re-aimed near the top atom 4a)
    x = 1.1
    d = _refine.lattice_delta(work, x, 1e-5, lambda lo, hi: lattice.Bounds(lo, hi), max_points=2**23, workers=1,
                               progress=None)
    assert d.lower <= ref_laplace_delta(a, k, x) <= d.upper and d.gap <= 1e-5 * d.upper


@settings(max_examples=8, deadline=None)
@given(log_sigma=st.floats(-0.3, 3.0), log_k=st.floats(0.3, 6.0), z=st.floats(0.0, 37.0))
def test_gaussian_power_property(log_sigma, log_k, z):
    """Hypothesis over sigma in [0.5, 1000], k in [2, 10^6] (log scales) and x = mu(mu/2 + z),
    z in [0, 37] (delta from ~0.5 down to ~1e-300): the pass on a lone Power of Gaussians
    brackets the closed form of mu sqrt(k), within 25% up to 10^4 copies."""
    sigma, k = 10.0**log_sigma, max(2, int(round(10.0**log_k)))
    with mp.workdps(40):
        mu = mp.sqrt(k) / mp.mpf(sigma)
    x = float(mu) * (float(mu) / 2 + z)
    ref = ref_gaussian_delta(mu, x)
    work = workload(Gaussian(sigma), k)
    theta = work.tilt_for(x)
    lp = fft_pass(work, _gaussian_step(sigma, theta), theta, math.log(float(ref)) - 40.0)
    contains(lp, x, ref, rel_gap=0.25 if k <= 10**4 else None)


def test_fft_pass_agrees_with_repeated_squaring(monkeypatch):
    """The FFT pass and the repeated squaring of the stream (the path kept where the FFT
    does not apply) bracket the same value on the same instance."""
    work = workload(Laplace(20.0), 300)
    h = _refine.step_below(0.05 / 200)
    theta = work.tilt_for(3.0)
    lp_fft = grouped.grouped_pass(work.vals, work.cnts, h, theta, math.log(1e-40), 1, work.plan(h))
    monkeypatch.setattr(grouped, "POWER_FFT", False)
    lp_sq = grouped.grouped_pass(work.vals, work.cnts, h, theta, math.log(1e-40), 1, work.plan(h))
    for x in (1.0, 3.0, 4.0):
        a, b = lp_fft.excess_bounds(x), lp_sq.excess_bounds(x)
        assert max(a[0], b[0]) <= min(a[1], b[1]), (x, a, b)


def test_the_pass_keeps_within_the_memory_budget():
    """The pass reserves its transforms' memory in the call's budget before allocating them
    (a size limit otherwise); a public call under 8 MiB is a size limit whose bracket holds
    the answer given under 64 MiB."""
    from optcomp import _memory

    work = workload(Laplace(100.0), 10**4)
    h = _refine.step_below(2e-4)
    item = leaves.Power(work.plan(h)[0].leaf, 10**4)  # (no rebuild: nothing else to allocate)
    with _memory.limit(4 * 2**20), pytest.raises(optcomp.ApproxTooCostly, match="self-composition"):
        selfcompose.power_pass(item, h, work.tilt_for(4.9), math.log(1e-30), 1)
    b = optcomp.epsilon_bounds([Laplace(100.0)], counts=[10**4], delta_g=1e-6, tol=5e-6, max_memory=64 * 2**20)
    with pytest.raises(optcomp.ApproxTooCostly) as info:
        optcomp.epsilon_bounds([Laplace(100.0)], counts=[10**4], delta_g=1e-6, tol=5e-6, max_memory=8 * 2**20)
    assert b.gap <= 5e-6 and info.value.bounds.lower <= b.lower and b.upper <= info.value.bounds.upper


def test_gaussian_groups_as_fft_nodes_keep_the_upper_window(monkeypatch):
    """Groups of Gaussians of different sigmas, each group one FFT node of the stream
    (power_node): where the untilted upper row needs a narrower window than the tilted
    garbled rows' aliasing (a large slack), the node keeps the upper row's window, narrower
    than its transforms (seen here).  The pass brackets the closed form of the composition
    (a Gaussian of mu^2 = sum k_i / sigma_i^2, Dong-Roth-Su) at and around each tilt's aim."""
    groups = [(4.0, 40), (5.0, 60), (6.0, 30), (5.5, 50)]
    work = Workload(np.zeros(0), np.zeros(0, dtype=np.int64), tuple(Source(Gaussian(s), k) for s, k in groups))
    with mp.workdps(40):
        mu = mp.sqrt(sum(mp.mpf(k) / mp.mpf(s) ** 2 for s, k in groups))
    lengths, widths = [], []
    real_kfold, real_node = selfcompose._kfold_circular, selfcompose.power_node

    def kfold(rows, k, N, workers=-1):
        lengths.append(N)
        return real_kfold(rows, k, N, workers)

    def node(*args, **kw):
        out = real_node(*args, **kw)
        widths.append(out[0].shape[1])
        return out

    monkeypatch.setattr(selfcompose, "_kfold_circular", kfold)
    monkeypatch.setattr(grouped, "power_node", node)
    h = 2.0**-10
    for x0 in (3.0, 9.0):
        lengths.clear()
        widths.clear()
        lp = grouped.grouped_pass(work.vals, work.cnts, h, work.tilt_for(x0), math.log(1e-14), 1, work.plan(h))
        assert len(widths) == len(lengths) == len(groups) and all(w <= n for w, n in zip(widths, lengths))
        if x0 == 9.0:
            assert all(w < n for w, n in zip(widths, lengths))
        for x in (0.8 * x0, x0, 1.2 * x0):
            contains(lp, x, ref_gaussian_delta(mu, x), rel_gap=1e-3)
