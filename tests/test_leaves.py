"""The producer seam (issue 17, item 3): a leaf of the lattice engine is any finite discrete
dominating pair (optcomp._lattice.leaves.Leaf), and the unchanged engine -- the FFT tree, the
windows, the stream of optcomp._lattice.grouped -- composes it.

Shown with ternary randomized response (3-RR: report the true value with probability
e^eps/(e^eps + 2), each other value with 1/(e^eps + 2); privacy loss +eps, 0, -eps): k copies,
alone and mixed with two-atom randomized-response groups, bracket the exact hockey-stick
curve, which the reference below computes in 60-digit mpmath from the definition (a sum over
the multinomial counts of the outcomes), independently of the code under test.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from optcomp._lattice import grouped, leaves
from optcomp.mechanisms import RandomizedResponse

mp.mp.dps = 60


def mp_ternary_atoms(eps: float, k: int):
    """(loss, P-mass) of k independent 3-RR pairs: a outcomes 'true' (loss +eps), b 'other
    neighbour' (loss -eps), k - a - b 'third' (loss 0); multinomial masses."""
    E = mp.mpf(eps)
    z = mp.e**E + 2
    pt, po = mp.e**E / z, 1 / z
    out = {}
    for a in range(k + 1):
        for b in range(k + 1 - a):
            m = mp.factorial(k) / (mp.factorial(a) * mp.factorial(b) * mp.factorial(k - a - b))
            out[a - b] = out.get(a - b, mp.mpf(0)) + m * pt**a * po ** (k - a)
    return [(n * E, p) for n, p in out.items()]


def mp_rr_atoms(eps: float, c: int):
    E = mp.mpf(eps)
    p = mp.e**E / (1 + mp.e**E)
    return [((2 * j - c) * E, mp.binomial(c, j) * p**j * (1 - p) ** (c - j)) for j in range(c + 1)]


def mp_compose(*atom_lists):
    out = [(mp.mpf(0), mp.mpf(1))]
    for atoms in atom_lists:
        acc = {}
        for l1, p1 in out:
            for l2, p2 in atoms:
                key = mp.nstr(l1 + l2, 50)
                l, p = acc.get(key, (l1 + l2, mp.mpf(0)))
                acc[key] = (l, p + p1 * p2)
        out = list(acc.values())
    return out


def mp_delta(atoms, x) -> mp.mpf:
    """delta(x) = E_P[(1 - e^{x - L})_+] (the hockey-stick divergence of the composition)."""
    x = mp.mpf(x)
    return mp.fsum(p * (1 - mp.e ** (x - l)) for l, p in atoms if l > x)


def ternary_leaf(eps: float) -> leaves.Leaf:
    """3-RR as a Leaf from float brackets of its masses (60-digit values rounded outward)."""
    E = mp.mpf(eps)
    z = mp.e**E + 2
    masses = [1 / z, 1 / z, mp.e**E / z]  # losses -eps, 0, +eps
    lo = [float(np.nextafter(float(m), 0.0)) for m in masses]
    hi = [float(np.nextafter(float(m), 1.0)) for m in masses]
    return leaves.Leaf.from_masses([-eps, 0.0, eps], 0.0, lo, hi)


@pytest.mark.parametrize("eps,k", [(0.3, 40), (1.1, 12), (0.05, 60)])
def test_ternary_rr_through_the_unchanged_engine(eps, k):
    """k leaves of 3-RR, composed by grouped_pass at several steps and tilts (with the
    stream forced to cut and merge small nodes and to run two halves): lower <= exact <=
    upper at every x, and the bracket is tight at a fine step."""
    atoms = mp_ternary_atoms(eps, k)
    top = eps * k
    xs = [0.0, 0.1 * top, 0.25 * top, 0.5 * top, 0.9 * top]
    ref = [mp_delta(atoms, x) for x in xs]
    leaf = ternary_leaf(eps)
    plan = [leaf] * k
    for h, theta in ((2.0**-5, 0.0), (13 * 2.0**-12, 0.7), (2.0**-11, 2.0)):
        lp = grouped.grouped_pass(np.array([]), np.array([]), h, theta, math.log(1e-30), 1, plan=plan)
        for x, r in zip(xs, ref):
            lo, hi = lp.excess_bounds(x)
            assert mp.mpf(lo) <= r <= mp.mpf(hi), (h, theta, x, lo, float(r), hi)
    # untilted, the bracket is tight where the mass is (the gap is second order in h)
    lp = grouped.grouped_pass(np.array([]), np.array([]), 2.0**-11, 0.0, math.log(1e-30), 1, plan=plan)
    for x, r in zip(xs[:3], ref[:3]):
        lo, hi = lp.excess_bounds(x)
        assert hi - lo <= 1e-2 * float(r), (x, lo, hi, float(r))


def test_ternary_leaves_mixed_with_randomized_response_groups(monkeypatch):
    """3-RR leaves in one plan with two-atom groups (a binomial window and a bundle): the
    stream composes them alike; small chunks and two halves exercise cuts and merges."""
    monkeypatch.setattr(grouped, "CHUNK_POINTS", 64)
    monkeypatch.setattr(grouped, "PARALLEL_LEAVES", 2)
    vals, cnts = np.array([0.05, 0.2]), np.array([1500, 3])
    eps3, k3 = 0.4, 6
    ref_atoms = mp_compose(mp_ternary_atoms(eps3, k3), mp_rr_atoms(0.05, 1500), mp_rr_atoms(0.2, 3))
    plan = leaves.leaf_plan(vals, cnts) + [ternary_leaf(eps3)] * k3
    top = 0.05 * 1500 + 0.6 + eps3 * k3
    xs = [0.0, 0.05 * top, 0.15 * top, 0.3 * top]
    ref = [mp_delta(ref_atoms, x) for x in xs]
    for h, theta in ((2.0**-6, 0.3), (2.0**-10, 1.5)):
        for workers in (1, -1):
            lp = grouped.grouped_pass(vals, cnts, h, theta, math.log(1e-40), workers, plan=plan)
            for x, r in zip(xs, ref):
                lo, hi = lp.excess_bounds(x)
                assert mp.mpf(lo) <= r <= mp.mpf(hi), (h, theta, x, lo, float(r), hi)


def test_leaf_from_a_mechanisms_discrete_pairs():
    """A mechanism's certified upper and lower DiscretePairs (atoms rounded up / down to their
    own lattice, not the engine's) enter as one leaf: the composition still brackets the
    exact 3-RR curve."""
    eps, k = 0.3, 20
    rr = RandomizedResponse(eps, values=3)
    h_pair = 2.0**-11 * 3.0  # not a divisor of eps: every atom is rounded
    leaf = leaves.Leaf.from_pairs(rr.discrete_pair(h_pair, "upper"), rr.discrete_pair(h_pair, "lower"))
    atoms = mp_ternary_atoms(eps, k)
    xs = [0.0, 0.5, 1.5, 3.0]
    lp = grouped.grouped_pass(np.array([]), np.array([]), 2.0**-9, 0.5, math.log(1e-30), 1, plan=[leaf] * k)
    for x in xs:
        r = mp_delta(atoms, x)
        lo, hi = lp.excess_bounds(x)
        assert mp.mpf(lo) <= r <= mp.mpf(hi), (x, lo, float(r), hi)
        assert hi - lo <= 0.1 * float(r)  # first order: rounding at h_pair moves L by <= k h_pair


def test_atoms_cgf_bounds_the_log_mgf():
    """_atoms_cgf is an upper bound of log E[e^{sL}] (60 digits) and tight to ~1e-13."""
    leaf = ternary_leaf(0.7)
    S = np.array([-64.0, -3.0, -0.5, 0.0, 0.25, 1.0, 7.0, 200.0])
    K = leaves._atoms_cgf(leaf.upper, S)
    E = mp.mpf(0.7)
    z = mp.e**E + 2
    for s, k in zip(S, K):
        s = mp.mpf(float(s))
        true = mp.log((mp.e ** (-s * E) + 1 + mp.e**E * mp.e ** (s * E)) / z)
        assert true <= mp.mpf(float(k)) <= true + 1e-12 * (1 + abs(true))


@pytest.mark.parametrize("N, off", [(50, -20), (600, 10), (40000, -17000)])
def test_lattice_cgf_bounds_the_log_mgf(N, off):
    """lattice_cgf of atoms at h (off + i) (a bell-shaped law with empty points) is an upper
    bound of log sum_i p_i e^{s l_i} -- 50-digit sums for the direct path (few terms: within
    the charge 8 u (n + max |w| + 4), w = log p + s l); long double sums, 1e-12 relative, for the runs of
    consecutive points (many terms: within the runs' width |s| h b) -- and the runs never
    undercut the per-atom bound of _atoms_cgf on the same atoms."""
    h = 2.0**-10
    i = np.arange(N)
    with np.errstate(divide="ignore"):
        logp = -0.5 * ((i - 0.4 * N) / (0.05 * N + 1.0)) ** 2 + np.where(i % 7 == 3, -np.inf, 0.0)
    err = np.full(N, 1e-14)
    S = np.concatenate([[-40.0, -2.0, 0.0, 0.5, 3.0, 25.0], np.linspace(-1.0, 1.0, 24)])
    K = leaves.lattice_cgf(logp, err, h, off, S)
    ok = np.isfinite(logp)
    n = int(ok.sum())
    pos = h * (i[ok] + off)
    blocked = n * S.size > leaves.CGF_TERMS
    b = -(-N // max(leaves.CGF_TERMS // S.size, 64)) if blocked else 1
    assert blocked == (N == 40000)
    for s, k in zip(S, K):
        if not blocked:
            with mp.workdps(40):
                ms = mp.mpf(float(s))
                w = [mp.mpf(float(lp)) + mp.mpf(1e-14) + ms * mp.mpf(float(l)) for lp, l in zip(logp[ok], pos)]
                top = max(w)
                true = top + mp.log(mp.fsum(mp.e ** (v - top) for v in w))
                mag = float(max(abs(v) for v in w))
            assert true <= mp.mpf(float(k)), (s, true, k)
            assert mp.mpf(float(k)) <= true + 8.0 * 2.0**-53 * (n + mag + 4.0) + 1e-15 * (1 + abs(true))
        else:
            w = (logp[ok] + 1e-14).astype(np.longdouble) + np.longdouble(s) * pos.astype(np.longdouble)
            top = np.max(w)
            true = float(top + np.log(np.sum(np.exp(w - top))))
            assert true * (1.0 - 1e-12 * np.sign(true)) - 1e-12 <= k <= true + abs(s) * h * b + 1e-9 * (1 + abs(true))
    atoms = leaves.Atoms(h * (i + off).astype(float), np.zeros(N), logp, err)
    assert np.all(K >= leaves._atoms_cgf(atoms, S, blocks=False) - 1e-12 * (1 + np.abs(K)))


def test_from_masses_rejects_bad_input():
    with pytest.raises(ValueError, match="p_lo <= p_hi"):
        leaves.Leaf.from_masses([0.0, 1.0], 0.0, [0.6, 0.1], [0.5, 0.2])
    with pytest.raises(ValueError, match="one length"):
        leaves.Leaf.from_masses([0.0, 1.0], 0.0, [0.5], [0.5])
    with pytest.raises(ValueError, match="inf_hi"):
        leaves.Leaf.from_masses([0.0], 0.0, [0.5], [0.5], inf_hi=2.0)
    with pytest.raises(ValueError, match="upper and a lower"):
        rr = RandomizedResponse(0.5)
        leaves.Leaf.from_pairs(rr.discrete_pair(0.01, "lower"), rr.discrete_pair(0.01, "lower"))


@pytest.mark.parametrize("k", [5, 40, 100])
def test_power_of_a_leaf_brackets_the_exact_composition(k):
    """A Power item (up to POWER_COPIES copies streamed as that many leaves; beyond, by
    repeated squaring, each product cut to its window; long double from POWER_EXTENDED
    copies) brackets the 60-digit multinomial reference, alone and beside
    randomized-response groups."""
    assert (k <= grouped.POWER_COPIES) == (k == 5) and (k >= grouped.POWER_EXTENDED) == (k == 100)
    eps = 0.2
    atoms = mp_ternary_atoms(eps, k)
    top = eps * k
    xs = [0.0, 0.05 * top, 0.15 * top, 0.3 * top]
    ref = [mp_delta(atoms, x) for x in xs]
    item = leaves.Power(ternary_leaf(eps), k)
    for h, theta in ((2.0**-7, 0.0), (2.0**-10, 1.0)):
        lp = grouped.grouped_pass(np.array([]), np.array([]), h, theta, math.log(1e-40), 1, plan=[item])
        for x, r in zip(xs, ref):
            lo, hi = lp.excess_bounds(x)
            assert mp.mpf(lo) <= r <= mp.mpf(hi), (k, h, theta, x, lo, float(r), hi)
    # beside a two-atom group: the stream merges the power node with the chunk
    ref2 = mp_compose(atoms, mp_rr_atoms(0.05, 40))
    plan = leaves.leaf_plan(np.array([0.05]), np.array([40])) + [item]
    lp = grouped.grouped_pass(np.array([0.05]), np.array([40]), 2.0**-9, 0.5, math.log(1e-40), 1, plan=plan)
    for x in xs[:3]:
        r = mp_delta(ref2, x)
        lo, hi = lp.excess_bounds(x)
        assert mp.mpf(lo) <= r <= mp.mpf(hi), (x, lo, float(r), hi)
        assert hi - lo <= 1e-2 * float(r)
