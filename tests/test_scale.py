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
from optcomp import _refine, approx, lattice
from optcomp._lattice import commensurable, grouped, leaves, tree
from optcomp import _cgf, _progress
from optcomp._inputs import mechanisms
from optcomp.loss import residual_target
from reference import decreasing_root

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
    return decreasing_root(H, t, 0, ls[-1])


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
    b = commensurable.commensurable_bounds(m, residual_target(m, delta_g), residual_target(m, delta_g, round_up=True), **kw)
    return m, b


# ----------------------------------------------------------------------------- the unit


def test_common_unit_of_decimals():
    cu = commensurable.common_unit(np.array([0.05, 0.1, 0.25]), np.array([1, 1, 1]))
    assert cu.unit == Fraction(1, 20) and cu.n.tolist() == [1, 2, 5]
    cu = commensurable.common_unit(np.array([0.001, 0.137, 0.2]), np.array([3, 1, 2]))
    assert cu.unit == Fraction(1, 1000) and cu.n.tolist() == [1, 137, 200]
    assert cu.points == 3 * 1 + 137 + 2 * 200 + 1 + (3 + 137 + 400)  # 2 sum c n + 1
    cu = commensurable.common_unit(np.array([40.0, 0.5]), np.array([1, 7]))
    assert cu.unit == Fraction(1, 2) and cu.n.tolist() == [80, 1]


def test_common_unit_refuses_reals_and_huge_lattices():
    rng = np.random.default_rng(1)
    assert commensurable.common_unit(np.sort(rng.uniform(0.05, 0.2, 20)), np.ones(20, dtype=np.int64)) is None
    assert commensurable.common_unit(np.array([math.pi / 10]), np.array([1])) is None
    assert commensurable.common_unit(np.array([1e-9, 0.1]), np.array([1, 1])) is None  # denominator > 10^6
    # 10^6 mechanisms at step 0.001: 2.5e8 points > max_points
    assert commensurable.common_unit(np.array([0.1, 0.15]), np.array([10**6, 10**6]), max_points=2**23) is None


def test_unit_instances_bracket_every_eps():
    cu = commensurable.common_unit(np.array([0.05, 0.15, 0.35, 0.7]), np.array([1, 1, 1, 1]))
    u_hi, u_lo = commensurable._unit_instances(cu)
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
        lo, hi = commensurable.commensurable_excess_bounds(m, x)
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
    lo, hi = commensurable.commensurable_excess_bounds(m, float(ref) * 0.97)
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
    blocks = tree._row_blocks([(r,) for r in rows], widths, np.zeros(len(rows), dtype=np.int64),
                                 np.zeros((1, len(rows))))
    root, w, off, E = tree._fft_tree(blocks, 1, dtype=np.longdouble)
    assert w == len(exact) and off == 0
    err = max(abs(Fraction(float(np.float64(v))) - e) for v, e in zip(root[0].astype(np.longdouble), exact))
    assert err <= Fraction(float(E[0])) + Fraction(2.0**-53)  # + the float64 view of each entry
    assert float(E[0]) < 1e-15


# ----------------------------------------------------------------------------- progress


def test_progress_callable_receives_each_pass(monkeypatch):
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
    monkeypatch.setattr(lattice, "ENUMERATED_ATOMS", 0)  # (listed from near the root, this is exact)
    optcomp.delta_bounds([0.1, 0.25], counts=[400, 400], eps_g=60.0, tol=1e-9, progress=seen.append)
    assert seen and seen[0]["stage"] == "commensurable"


def test_progress_within_a_long_pass():
    seen = []
    rng = np.random.default_rng(4)
    b = optcomp.epsilon_bounds(rng.uniform(0.05, 0.2, 4000), delta_g=1e-6, tol=1e-4, progress=seen.append)
    inner = [s for s in seen if s["stage"] == "lattice pass"]
    assert seen[-1]["stage"] == "lattice" and seen[-1]["upper"] == b.upper
    # (done = total: every leaf built, the last merges running -- reported under load)
    assert all(0 <= s["done"] <= s["total"] for s in inner)
    assert [s["done"] for s in inner] == sorted(s["done"] for s in inner)


def test_progress_true_writes_one_line_to_stderr(capsys):
    optcomp.epsilon_g(np.linspace(0.05, 0.2, 100) + 1e-7 * np.pi, delta_g=1e-6, method="approx", progress=True)
    err = capsys.readouterr().err
    assert err.startswith("\roptcomp lattice") and err.endswith("\n") and err.count("\n") == 1
    assert "gap" in err and "points" in err


def test_progress_bar_object():
    buf = io.StringIO()
    bar = _progress.StderrBar(buf)
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


# ----------------------------------------------------------------------------- groups and windows (any eps)


def mp_H_many(atoms, xs):
    """H(x) at every x of ``xs`` from suffix sums over the sorted atoms (50 digits)."""
    import bisect

    atoms = sorted(atoms)
    ls = [l for l, _ in atoms]
    A, B = [mp.mpf(0)] * (len(atoms) + 1), [mp.mpf(0)] * (len(atoms) + 1)
    for i in range(len(atoms) - 1, -1, -1):
        A[i] = A[i + 1] + atoms[i][1]
        B[i] = B[i + 1] + atoms[i][1] * mp.e ** (-atoms[i][0])
    out = []
    for x in xs:
        x = mp.mpf(float(x))
        j = bisect.bisect_right(ls, x)
        out.append(A[j] - mp.e**x * B[j])
    return out


GROUP_CASES = [
    # (eps, counts): big groups (binomial windows), bundles of singletons, huge and tiny eps
    ([0.05, 0.1370001, 0.2], [600, 3, 2]),
    ([0.0123456789, 0.3, 0.71], [1500, 1, 1]),
    ([1e-4, 0.5, 30.0], [400, 2, 1]),
    ([0.1 + 1e-9, 0.15 + 2e-9, 0.07 + 3e-9], [300, 40, 2]),
]


@pytest.mark.parametrize("case", range(len(GROUP_CASES)))
def test_grouped_pass_brackets_H_everywhere(case, monkeypatch):
    """H_lower(x) <= H_true(x) <= H_upper(x) at every x, for several steps and tilts, with
    the streamed tree forced to merge and cut many small nodes (tiny chunks) and the slack
    budget tiny or generous: the windows never under-report."""
    eps, counts = GROUP_CASES[case]
    eps = np.array(eps)
    counts = np.array(counts, dtype=np.int64)
    order = np.argsort(eps)
    eps, counts = eps[order], counts[order]
    atoms = mp_group_atoms(eps, counts)
    top = float(np.sum(eps * counts))
    monkeypatch.setattr(grouped, "CHUNK_POINTS", 64)
    monkeypatch.setattr(grouped, "PARALLEL_LEAVES", 2)  # two halves merged at the root, whenever 2+ leaves
    xs = np.concatenate([np.linspace(0.0, top, 9), [float(_cgf.chernoff_guess(eps, 1e-6, counts.astype(float)))]])
    ref = mp_H_many(atoms, xs)
    for h in (2.0**-4, 1.5 * 2.0**-8, 15 * 2.0**-13, 13 * 2.0**-14, 2.0**-11):  # steps m 2^j, m <= 15
        for theta, log_slack in ((0.0, math.log(1e-12)), (0.8, math.log(1e-300 * 2.0**-40)), (4.0, -30.0)):
            lp = grouped.grouped_pass(eps, counts, h, theta, log_slack, 1)
            for x, r in zip(xs, ref):
                lo, hi = lp.excess_bounds(float(x))
                assert mp.mpf(lo) <= r <= mp.mpf(hi), (h, theta, float(x), lo, float(r), hi)


def test_halves_in_threads_are_the_sequential_tree(monkeypatch):
    """The two halves of a pass run in two threads give bit for bit the tree run in
    sequence (the shape depends on the plan only), and an error in a thread reaches the
    caller."""
    rng = np.random.default_rng(5)
    eps = np.sort(rng.uniform(0.05, 0.2, 1500))
    counts = np.ones(eps.size, dtype=np.int64)
    assert len(leaves.leaf_plan(eps, counts)) >= grouped.PARALLEL_LEAVES
    a = grouped.grouped_pass(eps, counts, 2.0**-9, 0.3, -40.0, 1)
    b = grouped.grouped_pass(eps, counts, 2.0**-9, 0.3, -40.0, -1)
    for u, v in ((a.upper.loss, b.upper.loss), (a.upper.p0, b.upper.p0), (a.lower_loss, b.lower_loss),
                 (a.lower_p0, b.lower_p0)):
        assert np.array_equal(u, v)
    assert a.upper.slack == b.upper.slack
    calls = []

    def failing(plan, *args):
        calls.append(len(plan))
        if len(calls) == 2:
            raise MemoryError("leaf")
        yield from real(plan, *args)

    real = leaves.build
    monkeypatch.setattr(leaves, "build", failing)
    with pytest.raises(MemoryError, match="leaf"):
        grouped.grouped_pass(eps, counts, 2.0**-9, 0.3, -40.0, -1)


@pytest.mark.parametrize("delta_g", [1e-3, 1e-12, 1e-300])
def test_grouped_bounds_against_exact_products(delta_g, monkeypatch):
    """The driver (steps, tilt, windows) against the exact product-of-binomials path of
    optcomp.optimal, down to delta_g = 1e-300 (the lattice's: no enumeration first)."""
    monkeypatch.setattr(lattice, "ENUMERATED_ATOMS", 0)
    eps = [0.05 + 1e-9 * math.pi, 0.11 + 1e-9 * math.e, 0.4 + 1e-9]
    counts = [800, 60, 9]
    m = mechanisms(np.array(eps), 0.0, None, np.array(counts))
    info = lattice.BracketInfo()
    b = lattice.lattice_bounds(m, delta_g, 1e-4, info=info)
    ref = optcomp.epsilon_g(eps, counts=counts, delta_g=delta_g)
    assert info.path == "lattice"
    assert b.lower <= ref * (1 + 1e-13) and ref <= b.upper and b.gap <= 1e-4
    d = lattice.lattice_delta_bounds(m, 0.9 * ref, 1e-3)
    dref = optcomp.delta_g(eps, counts=counts, eps_g=0.9 * ref)
    assert d.lower <= dref * (1 + 1e-12) and dref <= d.upper


BUNDLE_CASES = [
    # (eps, counts): singletons (bundles of 10), small groups (bundles of mixed shapes), a
    # binomial window among them, huge and tiny eps
    (list(np.random.default_rng(11).uniform(0.05, 0.2, 13)), [1] * 13),
    ([0.01, 0.0123456789, 0.3, 0.71, 2.5, 30.0], [3, 7, 1, 2, 1, 1]),
    ([1e-4, 0.05, 0.1 + 1e-9], [5, 1100, 2]),
]


@pytest.mark.parametrize("case", range(len(BUNDLE_CASES)))
def test_vectorised_leaves_match_per_leaf_path(case, monkeypatch):
    """_bundle_leaves (runs of same-shape bundles in slices) against the per-leaf functions:
    the same rows and offsets, charges at least the per-leaf ones (and within 1e-11), and
    with either path grouped_pass brackets the 50-digit H at every x."""
    eps, counts = BUNDLE_CASES[case]
    eps = np.array(eps)
    counts = np.array(counts, dtype=np.int64)
    order = np.argsort(eps)
    eps, counts = eps[order], counts[order]
    monkeypatch.setattr(leaves, "LEAF_SLICE_ATOMS", 3000)  # several slices per run
    plan = leaves.leaf_plan(eps, counts)
    atoms = mp_group_atoms(eps, counts)
    top = float(np.sum(eps * counts))
    xs = np.concatenate([np.linspace(0.0, top, 7), [float(_cgf.chernoff_guess(eps, 1e-6, counts.astype(float)))]])
    ref = mp_H_many(atoms, xs)
    for h, theta in ((2.0**-5, 0.0), (13 * 2.0**-12, 0.7), (2.0**-9, 3.0)):
        S = grouped._mgf_grid(theta)
        monkeypatch.setattr(leaves, "VECTOR_LEAVES", True)
        vec = list(leaves.build(plan, h, theta, -40.0, S))
        monkeypatch.setattr(leaves, "VECTOR_LEAVES", False)
        one = list(leaves.build(plan, h, theta, -40.0, S))
        assert len(vec) == len(one) == len(plan)
        for a, b in zip(vec, one):
            assert a[0].shape == b[0].shape and a[1] == b[1]
            np.testing.assert_allclose(a[0], b[0], rtol=1e-13, atol=1e-300)
            for u, v in zip(a[2:], b[2:]):
                # the bundles keep the (2n + 8) u charge of every summed row; leaf_rows charges
                # only the terms landing on one lattice point: never less, and both tiny
                u, v = np.asarray(u, float), np.asarray(v, float)
                assert np.allclose(u, v, rtol=1e-13, atol=0) or \
                    (np.all(u >= v) and np.all(u <= v + 1e-11)), (u, v)
        for vl in (True, False):
            monkeypatch.setattr(leaves, "VECTOR_LEAVES", vl)
            lp = grouped.grouped_pass(eps, counts, h, theta, math.log(1e-20), 1)
            for x, r in zip(xs, ref):
                lo, hi = lp.excess_bounds(float(x))
                assert mp.mpf(lo) <= r <= mp.mpf(hi), (vl, h, theta, float(x), lo, float(r), hi)


def _driver_case(n):
    rng = np.random.default_rng(3)
    cases = ((rng.uniform(0.05, 0.2, 2000), None, 1e-6),
             (rng.uniform(0.01, 0.5, 300), None, 1e-30),
             (rng.uniform(0.05, 0.2, 60), rng.integers(100, 3000, 60), 1e-3))
    return cases[n]


# the 2000 distinct eps (the same driver as the 300 distinct at 1e-30, larger) behind -m slow
@pytest.mark.parametrize("case", [pytest.param(0, marks=pytest.mark.slow), 1, 2])
def test_delta_driver_first_step_is_enough(case):
    """lattice_delta_bounds aims its first step with lambda = |d log H/dx| (~theta): one pass
    reaches the relative tolerance, and its bracket meets a much finer one."""
    eps, counts, delta_g = _driver_case(case)
    m = mechanisms(eps, 0.0, None, counts)
    x = lattice.lattice_bounds(m, delta_g, 1e-3).upper
    info = lattice.BracketInfo()
    d = lattice.lattice_delta_bounds(m, x, 1e-3, info=info)
    assert info.path == "lattice" and len(info.passes) == 1
    assert d.gap <= 1e-3 * d.upper
    fine = lattice.lattice_delta_bounds(m, x, 1e-6)
    assert d.lower <= fine.upper and fine.lower <= d.upper
    assert d.lower <= delta_g * (1 + 1e-9)  # x >= the optimal eps_g at delta_g


def test_step_grid_is_exact_and_dense():
    """Steps are m 2^j with 8 <= m <= 15 (so h n is exact for |n| < 2^49), the largest <= x,
    at most 1/8 below it; grouped_pass refuses other steps."""
    rng = np.random.default_rng(5)
    for x in np.exp(rng.uniform(-700.0, 3.0, 20000)).tolist() + [1.0, 0.25, 1.875, 2.0 - 2.0**-50, 15 * 2.0**-900]:
        h = _refine.step_below(x)
        mant, _ = math.frexp(h)
        assert h <= x < h * (1.0 + 1.0 / 8.0) and mant * 16 == int(mant * 16)
        n = int(rng.integers(1, 2**49))
        assert Fraction(h) * n == Fraction(h * n)  # exact products
    with pytest.raises(ValueError, match="m 2\\^j"):
        grouped.grouped_pass(np.array([0.1]), np.array([3]), 17 * 2.0**-12, 0.0, -40.0, 1)


def test_tilt_and_chernoff_guess_solve_their_equations():
    """tilt_for (Newton) centres the loss at x: K'(theta) = x; chernoff_guess (Newton inside a
    bracket) agrees with a plain bisection of K - theta K' = log t."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        k = int(rng.integers(1, 40))
        e = np.exp(rng.uniform(-7.0, 2.0, k))
        c = rng.integers(1, 2000, k).astype(float)
        top = float(np.sum(c * e))
        x = top * float(rng.uniform(0.0, 0.999))
        theta = _cgf.tilt_for(e, x, c)
        if x <= _cgf._cumulant_slope(e, 0.0, c):
            assert theta == 0.0
        else:
            assert theta > 0.0 and abs(_cgf._cumulant_slope(e, theta, c) - x) <= 1e-9 * top
        t = 10.0 ** float(rng.uniform(-300.0, -0.5))
        logt = math.log(t)

        def rate(th):
            return _cgf._log_mgf(e, th, c) - th * _cgf._cumulant_slope(e, th, c)

        lo, hi = 0.0, 1.0
        while rate(hi) > logt and hi < 1e6:
            lo, hi = hi, 2.0 * hi
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if rate(mid) > logt else (lo, mid)
        ref = min(_cgf._cumulant_slope(e, hi, c), top)
        assert abs(_cgf.chernoff_guess(e, t, c) - ref) <= 1e-7 * ref + 1e-12


def test_group_window_tails_are_bounds():
    """The Chernoff tails of a group's window bound the binomial's true tails (mpmath)."""
    for eps, c, theta in ((0.05, 5000, 0.5), (0.3, 800, 3.0), (1e-3, 6000, 0.0)):
        j_lo, j_hi, log_lump, log_up = leaves._group_window(eps, c, theta, math.log(1e-30))
        E = mp.mpf(eps)
        p = mp.e**E / (1 + mp.e**E)
        below = mp.fsum(mp.binomial(c, j) * p**j * (1 - p) ** (c - j) for j in range(0, j_lo))
        above = mp.fsum(mp.binomial(c, j) * p**j * (1 - p) ** (c - j) for j in range(j_hi + 1, c + 1))
        assert below <= mp.e ** mp.mpf(log_lump) if j_lo > 0 else below == 0
        assert above <= mp.e ** mp.mpf(log_up) if j_hi < c else above == 0
        assert above <= 1e-30 * 1.0000001
        assert 0 < j_lo < j_hi < c  # a window, not the whole support


def test_million_mechanisms_in_groups_is_o_groups():
    """10^6 mechanisms in 50 groups: no O(k) array; the bracket agrees with the grouped
    exact path on a smaller copy scaled the same way (monotone sanity) and is certified."""
    rng = np.random.default_rng(2)
    eps = np.sort(rng.uniform(0.05, 0.2, 50))
    counts = np.full(50, 20000)
    b = optcomp.epsilon_bounds(eps, counts=counts, delta_g=1e-6, tol=1e-2)
    assert b.gap <= 1e-2
    kov = optcomp.epsilon_g(eps, counts=counts, delta_g=1e-6, method="kov")
    assert b.upper <= kov


@pytest.mark.slow
def test_million_mechanisms_thousand_values_tol_1e3():
    rng = np.random.default_rng(0)
    eps = np.sort(rng.uniform(0.05, 0.2, 1000))
    counts = np.full(1000, 1000)
    b = optcomp.epsilon_bounds(eps, counts=counts, delta_g=1e-6, tol=1e-3)
    assert b.gap <= 1e-3
    d = optcomp.delta_bounds(eps, counts=counts, eps_g=b.upper, tol=1e-3)
    assert d.lower <= 1e-6 * (1 + 1e-12) and d.gap <= 1e-3 * d.upper


@pytest.mark.parametrize("delta_g", [1e-2, 1e-30, 1e-300])
def test_windows_cut_and_stay_sound_through_the_driver(delta_g, monkeypatch):
    """Many small chunks, so that every merge is cut to its window (checked: some cut
    happens), against the exact meet-in-the-middle answer of optcomp.optimal."""
    eps = [0.03 + 1e-9 * math.pi, 0.07 + 1e-9 * math.e, 0.13 + 1e-9, 0.31 + 3e-9, 0.02 + 7e-9]
    counts = [1100, 150, 120, 100, 2]
    monkeypatch.setattr(grouped, "CHUNK_POINTS", 64)
    cuts = []
    real_cut = grouped._cut

    def spy(node, *a):
        w = node.rows.shape[1]
        out = real_cut(node, *a)
        cuts.append(w - node.rows.shape[1])
        return out

    monkeypatch.setattr(grouped, "_cut", spy)
    m = mechanisms(np.array(eps), 0.0, None, np.array(counts))
    b = lattice.lattice_bounds(m, delta_g, 1e-3)
    ref = optcomp.epsilon_g(eps, counts=counts, delta_g=delta_g)
    # the exact path returns upper bounds (measured up to ~1e-10 relative above the optimum
    # at delta_g = 1e-300, see test_lattice_tighter_than_exact_path_at_1e300): one side exact
    assert b.lower <= ref * (1 + 1e-13) and ref * (1 - 1e-8) <= b.upper and b.gap <= 1e-3
    for x in (0.8 * ref, ref):
        d = lattice.lattice_delta_bounds(m, x, 1e-3)
        dref = optcomp.delta_g(eps, counts=counts, eps_g=x)
        assert d.lower <= dref * (1 + 1e-12)
    assert any(c > 0 for c in cuts)


def test_lattice_tighter_than_exact_path_at_1e300(monkeypatch):
    """Three groups (4e4 atoms, so mpmath can list them) at delta_g = 1e-300, windows
    forced: the lattice brackets the 50-digit optimum in both directions."""
    eps = np.array([0.03 + 1e-9 * math.pi, 0.13 + 1e-9, 0.31 + 3e-9])
    counts = np.array([1100, 6, 4])
    monkeypatch.setattr(grouped, "CHUNK_POINTS", 64)
    m = mechanisms(eps, 0.0, None, counts)
    atoms = mp_group_atoms(eps, counts)
    true = mp_optcomp_atoms(atoms, 1e-300)
    b = lattice.lattice_bounds(m, 1e-300, 1e-7)
    assert b.lower <= true <= b.upper and b.gap <= 1e-7
    for x in (float(true), float(true) * 0.995):
        d = lattice.lattice_delta_bounds(m, x, 1e-4)
        H = mp_H_many(atoms, [x])[0]
        assert d.lower <= H <= d.upper


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(10, 40), st.floats(-9.0, 1.8), st.floats(0.0, 2.0), st.integers(1, 4), st.floats(-300.0, -1.0),
       st.integers(0, 2**32 - 1))
def test_beyond_listing_only_where_the_exact_producers_give_up(n, log_lo, log_width, cmax, log_dg, seed):
    """The driver skips the exact producers only where they return None (a product beyond
    ENUMERATED_ATOMS atoms): checked against them on groups of eps up to ~400 (windows of one
    atom where e^-eps is below the tail) at delta_g down to 1e-300, both directions."""
    rng = np.random.default_rng(seed)
    eps = 10.0 ** rng.uniform(log_lo, log_lo + log_width, n)
    counts = rng.integers(1, cmax + 1, n)
    m = mechanisms(eps, 0.0, None, counts)
    vals, _ = m.positive()
    dg = 10.0**log_dg
    t_low, t_high = residual_target(m, dg), residual_target(m, dg, round_up=True)
    from optcomp._exact.atoms import exact_epsilon_bounds, exact_excess_bounds

    if lattice._beyond_listing(vals, math.log(t_low)):
        assert exact_epsilon_bounds(m, t_low, t_high, lattice.ENUMERATED_ATOMS) is None
    if lattice._beyond_listing(vals, 0.0):
        x = float(np.dot(vals, m.positive()[1])) * float(rng.uniform(0.0, 0.9))
        assert exact_excess_bounds(m, x, lattice.ENUMERATED_ATOMS) is None
    if vals.size < lattice.ENUMERATED_ATOMS.bit_length():
        assert not lattice._beyond_listing(vals, 0.0)
