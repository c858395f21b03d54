"""Accounting at scale (issue 8): the commensurable path of optcomp.lattice, progress reports.

References are independent of the code under test: the exact product of the groups'
binomials in 50-digit mpmath (every atom at its exact position sum_i (2 j_i - c_i) eps_i,
eps_i the exact binary value of the float -- MV Thm 1.5 as written), a rational lattice
dynamic program on integer multiples of u for instances whose eps_i are exactly n_i u,
and exact rational convolutions for the long-double FFT tree.  Checked: lower <= reference
<= upper always, and the bracket's width.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import approx, lattice
from optcomp._inputs import mechanisms
from optcomp.loss import residual_target

mp.mp.dps = 50


# ----------------------------------------------------------------------------- references


def mp_group_atoms(eps, counts):
    """(loss, P0 mass) of every combination (j_1, ..., j_G) of the groups' binomials, exact
    positions (mpf at 50 digits of the float eps_i's exact value)."""
    atoms = [(mp.mpf(0), mp.mpf(1))]
    for e, c in zip(eps, counts):
        E = mp.mpf(float(e))
        p = mp.e**E / (1 + mp.e**E)
        g = [((2 * j - c) * E, mp.binomial(c, j) * p**j * (1 - p) ** (c - j)) for j in range(c + 1)]
        atoms = [(l1 + l2, p1 * p2) for l1, p1 in atoms for l2, p2 in g]
    return [(l, p) for l, p in atoms if l > 0]


def mp_H(atoms, x):
    x = mp.mpf(x)
    return mp.fsum(p * (1 - mp.e ** (x - l)) for l, p in atoms if l > x)


def mp_optcomp_atoms(atoms, t):
    """The least x >= 0 with H(x) <= t, by bisection to ~1e-45 relative (H decreases in x);
    H(x) = A_j - e^x B_j from suffix sums A_j = sum_{i >= j} p_i, B_j = sum p_i e^{-l_i}
    over the sorted atoms (50 digits: no cancellation issue at these sizes)."""
    import bisect

    t = mp.mpf(t)
    atoms = sorted(atoms)
    ls = [l for l, _ in atoms]
    A, B = [mp.mpf(0)] * (len(atoms) + 1), [mp.mpf(0)] * (len(atoms) + 1)
    for i in range(len(atoms) - 1, -1, -1):
        A[i] = A[i + 1] + atoms[i][1]
        B[i] = B[i + 1] + atoms[i][1] * mp.e ** (-atoms[i][0])

    def H(x):
        j = bisect.bisect_right(ls, x)
        return A[j] - mp.e**x * B[j]

    if H(mp.mpf(0)) <= t:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), ls[-1]
    for _ in range(160):
        mid = (lo + hi) / 2
        if H(mid) > t:
            lo = mid
        else:
            hi = mid
    return hi


def rational_lattice_dp(n, counts, u: Fraction):
    """The loss distribution of groups with eps_i = n_i u *exactly* (u a dyadic rational,
    so the float eps_i equals it), by dynamic programming on the integer index
    sum_i n_i (2 j_i - c_i): masses in mpmath, positions exact rationals."""
    dist = {0: mp.mpf(1)}
    for ni, c in zip(n, counts):
        E = mp.mpf(Fraction(ni) * u)
        p = mp.e**E / (1 + mp.e**E)
        new = defaultdict(lambda: mp.mpf(0))
        for idx, pm in dist.items():
            for j in range(c + 1):
                new[idx + ni * (2 * j - c)] += pm * mp.binomial(c, j) * p**j * (1 - p) ** (c - j)
        dist = dict(new)
    return [(mp.mpf(Fraction(idx) * u), pm) for idx, pm in dist.items() if idx > 0]


def bounds_of(eps, counts, delta_g, **kw):
    m = mechanisms(np.asarray(eps, dtype=float), 0.0, None, np.asarray(counts))
    b = lattice.commensurable_bounds(m, residual_target(m, delta_g), residual_target(m, delta_g, round_up=True), **kw)
    return m, b


# ----------------------------------------------------------------------------- the unit


def test_common_unit_of_decimals():
    cu = lattice.common_unit(np.array([0.05, 0.1, 0.25]), np.array([1, 1, 1]))
    assert cu.unit == Fraction(1, 20) and cu.n.tolist() == [1, 2, 5]
    cu = lattice.common_unit(np.array([0.001, 0.137, 0.2]), np.array([3, 1, 2]))
    assert cu.unit == Fraction(1, 1000) and cu.n.tolist() == [1, 137, 200]
    assert cu.points == 3 * 1 + 137 + 2 * 200 + 1 + (3 + 137 + 400)  # 2 sum c n + 1
    cu = lattice.common_unit(np.array([40.0, 0.5]), np.array([1, 7]))
    assert cu.unit == Fraction(1, 2) and cu.n.tolist() == [80, 1]


def test_common_unit_refuses_reals_and_huge_lattices():
    rng = np.random.default_rng(1)
    assert lattice.common_unit(np.sort(rng.uniform(0.05, 0.2, 20)), np.ones(20, dtype=np.int64)) is None
    assert lattice.common_unit(np.array([math.pi / 10]), np.array([1])) is None
    assert lattice.common_unit(np.array([1e-9, 0.1]), np.array([1, 1])) is None  # denominator > 10^6
    # 10^6 mechanisms at step 0.001: 2.5e8 points > max_points
    assert lattice.common_unit(np.array([0.1, 0.15]), np.array([10**6, 10**6]), max_points=2**23) is None


def test_unit_instances_bracket_every_eps():
    cu = lattice.common_unit(np.array([0.05, 0.15, 0.35, 0.7]), np.array([1, 1, 1, 1]))
    u_hi, u_lo = lattice._unit_instances(cu)
    for e, n in zip(cu.eps.tolist(), cu.n.tolist()):
        assert Fraction(u_lo) * n <= Fraction(e) <= Fraction(u_hi) * n
    assert (u_hi - u_lo) <= 4 * 2.0**-52 * u_hi


# ----------------------------------------------------------------------------- soundness


@pytest.mark.parametrize(
    "eps, counts, delta_g",
    [
        ([0.1, 0.25, 0.05], [30, 20, 40], 1e-6),
        ([0.1, 0.25, 0.05], [30, 20, 40], 1e-300),  # deep tail, near the top atom
        ([0.1, 0.25, 0.05], [30, 20, 40], 0.5),  # large delta_g: untilted
        ([0.001, 0.003], [200, 100], 1e-9),  # tiny eps
        ([0.5, 3.0, 12.0], [6, 3, 2], 1e-12),  # large eps
        ([0.01, 0.05, 0.1], [60, 40, 20], 1e-30),
    ],
)
def test_commensurable_brackets_mpmath(eps, counts, delta_g):
    m, b = bounds_of(eps, counts, delta_g)
    ref = mp_optcomp_atoms(mp_group_atoms(eps, counts), delta_g)
    assert b.lower <= ref <= b.upper
    assert b.gap <= 1e-9 * max(b.upper, 1e-300)


@pytest.mark.parametrize(
    "n, counts, u, delta_g",
    [
        ([1, 2, 5], [12, 9, 4], Fraction(1, 8), 1e-5),  # eps = 0.125, 0.25, 0.625: exact in binary
        ([3, 7], [40, 15], Fraction(1, 64), 1e-10),
        ([1, 1024], [50, 1], Fraction(1, 1024), 1e-3),  # one eps = 1 next to many tiny ones
    ],
)
def test_commensurable_against_rational_lattice_dp(n, counts, u, delta_g):
    eps = [float(Fraction(ni) * u) for ni in n]
    assert all(Fraction(e) == Fraction(ni) * u for e, ni in zip(eps, n))
    m, b = bounds_of(eps, counts, delta_g)
    atoms = rational_lattice_dp(n, counts, u)
    ref = mp_optcomp_atoms(atoms, delta_g)
    assert b.lower <= ref <= b.upper
    assert b.gap <= 1e-9 * b.upper
    # delta direction at the answer and at points between/on atoms
    for x in (float(ref), float(Fraction(3) * u * n[0]), float(ref) * 0.9, 0.0):
        lo, hi = lattice.commensurable_excess_bounds(m, x)
        H = mp_H(atoms, x)
        assert lo <= H <= hi
        assert hi - lo <= 1e-9 * hi + 1e-300


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    digits=st.sampled_from([1, 2, 3]),
    raw=st.lists(st.integers(1, 300), min_size=2, max_size=3, unique=True),
    counts=st.lists(st.integers(1, 12), min_size=3, max_size=3),
    log_delta=st.floats(-300, -0.5),
)
def test_commensurable_random_decimals_never_below(digits, raw, counts, log_delta):
    scale = 10**digits
    eps = sorted({round(r / scale, digits) for r in raw if r / scale <= 3.0})
    if len(eps) < 2:
        return
    counts = counts[: len(eps)]
    delta_g = 10.0**log_delta
    m, b = bounds_of(eps, counts, delta_g)
    assert b is not None
    atoms = mp_group_atoms(eps, counts)
    ref = mp_optcomp_atoms(atoms, delta_g)
    assert b.lower <= ref <= b.upper
    assert b.gap <= 1e-9 * max(b.upper, 1e-12)
    lo, hi = lattice.commensurable_excess_bounds(m, float(ref) * 0.97)
    H = mp_H(atoms, float(ref) * 0.97)
    assert lo <= H <= hi


def test_commensurable_with_delta_i_and_zero_eps():
    eps = [0.0, 0.1, 0.2, 0.2]
    delta = [1e-4, 0.0, 1e-7, 0.0]
    b = optcomp.epsilon_bounds(eps * 10, delta * 10, delta_g=1e-2, tol=1e-9)
    # reference: OptComp with t = 1 - (1 - delta_g)/prod(1 - delta_i), positive eps only
    t = 1 - (1 - mp.mpf(1e-2)) / mp.fprod(1 - mp.mpf(d) for d in delta * 10)
    ref = mp_optcomp_atoms(mp_group_atoms([0.1, 0.2], [10, 20]), t)
    assert b.lower <= ref <= b.upper and b.gap <= 1e-9 * b.upper


def test_public_paths_use_the_unit_and_meet_1e9():
    rng = np.random.default_rng(0)
    eps = np.round(rng.uniform(0.05, 0.2, 300), 3)
    info = lattice.BracketInfo()
    m = mechanisms(eps, 0.0, None, None)
    b = lattice.lattice_bounds(m, 1e-6, 1e-9, info=info)
    assert info.path == "commensurable" and b.gap <= 1e-9 * b.upper
    d = optcomp.delta_bounds(eps, eps_g=b.upper, tol=1e-9)
    assert d.gap <= 1e-9 * d.upper and d.upper <= 1e-6 * (1 + 1e-9)
    # the approx method's answer is the same certified upper end
    assert optcomp.epsilon_g(eps, delta_g=1e-6, method="approx", tol=1e-9) == b.upper


def test_three_kinds_ten_thousand_each():
    """The issue's instance (3 kinds x 10^4, out of reach of the exact paths): certified to
    1e-9, consistent with the exact paths on sub-instances (same answer at k = 3 x 300)."""
    b = optcomp.epsilon_bounds([0.01, 0.05, 0.1], counts=[10**4] * 3, delta_g=1e-6, tol=1e-9)
    assert b.gap <= 1e-9 * b.upper
    small = optcomp.epsilon_bounds([0.01, 0.05, 0.1], counts=[300] * 3, delta_g=1e-6, tol=1e-9)
    exact = optcomp.epsilon_g([0.01, 0.05, 0.1], counts=[300] * 3, delta_g=1e-6)
    assert small.lower <= exact and exact - small.upper <= 1e-12 * exact


# ----------------------------------------------------------------------------- the FFT tree in long double


def test_long_double_tree_error_bound_holds():
    rng = np.random.default_rng(5)
    rows = [rng.random(w) * (rng.random(w) < 0.7) for w in (5, 17, 33, 64, 9, 130)]
    rows = [r / r.sum() for r in rows]
    exact = [Fraction(1)]
    for r in rows:
        fr = [Fraction(float(v)) for v in r]
        new = [Fraction(0)] * (len(exact) + len(fr) - 1)
        for i, a in enumerate(exact):
            if a:
                for j, bb in enumerate(fr):
                    new[i + j] += a * bb
        exact = new
    widths = np.array([r.size for r in rows], dtype=np.int64)
    blocks = lattice._row_blocks([(r,) for r in rows], widths, np.zeros(len(rows), dtype=np.int64),
                                 np.zeros((1, len(rows))))
    root, w, off, E = lattice._fft_tree(blocks, 1, dtype=np.longdouble)
    assert w == len(exact) and off == 0
    err = max(abs(Fraction(float(np.float64(v))) - e) for v, e in zip(root[0].astype(np.longdouble), exact))
    assert err <= Fraction(float(E[0])) + Fraction(2.0**-53)  # + the float64 view of each entry
    assert float(E[0]) < 1e-15


# ----------------------------------------------------------------------------- progress


def test_progress_callable_receives_each_pass():
    seen = []
    rng = np.random.default_rng(3)
    eps = rng.uniform(0.05, 0.2, 200)  # arbitrary reals: lattice passes
    b = optcomp.epsilon_bounds(eps, delta_g=1e-6, tol=1e-4, progress=seen.append)
    assert seen and all(s["stage"] == "lattice" for s in seen)
    assert seen[-1]["gap"] <= 1e-4 and seen[-1]["upper"] == b.upper
    assert all({"step", "points", "lower", "upper", "gap", "tol", "seconds"} <= set(s) for s in seen)
    seen.clear()
    optcomp.delta_g(eps, eps_g=b.upper, method="approx", progress=seen.append)
    assert seen and seen[-1]["stage"] == "lattice"
    seen.clear()
    optcomp.delta_bounds([0.1, 0.25], counts=[400, 400], eps_g=60.0, tol=1e-9, progress=seen.append)
    assert seen and seen[0]["stage"] == "commensurable"


def test_progress_true_writes_one_line_to_stderr(capsys):
    optcomp.epsilon_g(np.linspace(0.05, 0.2, 100) + 1e-7 * np.pi, delta_g=1e-6, method="approx", progress=True)
    err = capsys.readouterr().err
    assert err.startswith("\roptcomp lattice") and err.endswith("\n") and err.count("\n") == 1
    assert "gap" in err and "points" in err


def test_progress_bar_object():
    buf = io.StringIO()
    bar = approx._StderrBar(buf)
    bar(dict(stage="lattice", step=0.001, points=12345, gap=2e-4, tol=1e-3))
    bar.close()
    assert buf.getvalue().startswith("\roptcomp lattice, step 0.001, 12,345 points, gap 0.0002 (tol 0.001)")
    assert buf.getvalue().endswith("\n")


def test_progress_validation():
    assert "progress" in approx.OPTIONS and optcomp.METHOD_INFO["approx"].options == approx.OPTIONS
    with pytest.raises(ValueError, match="progress"):
        optcomp.epsilon_bounds([0.1, 0.2], delta_g=1e-6, progress="yes")
    with pytest.raises(ValueError, match="progress"):
        optcomp.epsilon_g([0.1, 0.2], delta_g=1e-6, method="optimal", progress=True)  # not an option there
    optcomp.epsilon_g([0.1, 0.2], delta_g=1e-6, method="approx", progress=False)
