"""The leaves a heterogeneous pass composes for copies of a law with a continuous part
(optcomp._lattice.workload.pass_leaf_within, made in the pass's thread): the connect-the-dots
leaf with its two sides from laws at two steps, its far upper tail sent to +inf
(leaves.cut_top), its atoms within the bound the pass checks exact positions against; and
the Gaussian cell masses evaluated in chunks.  References: the hockey-stick curve of a
finite pair from its atoms in 50-digit mpmath (the definition), and the unchunked masses."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from optcomp._lattice import leaves, workload
from optcomp._laws import FORWARD, REVERSE
from optcomp.mechanisms import Gaussian, Laplace, Subsampled
from optcomp.mechanisms import subsampled as subsampled_mod


def _h_mp(atoms: leaves.Atoms, log_inf: float, x: float, k: int = 1):
    """H(x) = E_P[(1 - e^{x - L})_+] of k independent copies of the atoms (masses e^logp,
    losses as given, +inf mass e^log_inf), in mpmath from the definition."""
    with mp.workdps(50):
        pts = [(mp.mpf(float(l)), mp.e ** mp.mpf(float(lp))) for l, lp in zip(atoms.loss, atoms.logp)
               if lp > -math.inf]
        inf = mp.e ** mp.mpf(log_inf) if log_inf > -math.inf else mp.mpf(0)
        dist = {mp.mpf(0): mp.mpf(1)}
        for _ in range(k):
            nxt = {}
            for a, pa in dist.items():
                for l, p in pts:
                    nxt[a + l] = nxt.get(a + l, mp.mpf(0)) + pa * p
            dist = nxt
        fin = sum(p * max(mp.mpf(0), 1 - mp.e ** (mp.mpf(x) - l)) for l, p in dist.items())
        return fin + (1 - (1 - inf) ** k)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cut_top_keeps_the_upper_pair_above_and_the_lower_below(seed):
    """The cut leaf's upper curve is >= the leaf's (its +inf mass at least the mass cut), its
    lower curve <= the leaf's, at one and two copies, for budgets from nothing to most of
    the mass."""
    rng = np.random.default_rng(seed)
    n = 12
    loss = np.sort(rng.uniform(-2.0, 6.0, n))
    p = rng.dirichlet(np.ones(n)) * (1.0 - 1e-3)
    leaf = leaves.Leaf.from_masses(loss, np.zeros(n), p * (1 - 1e-9), p, inf_hi=1e-3)
    for budget in (0.0, 1e-12, float(p[-1]) * 1.01, float(p[-3:].sum()) * 1.01, 0.5):
        cut = leaves.cut_top(leaf, budget)
        dropped = leaf.upper.loss.size - cut.upper.loss.size
        if budget == 0.0:
            assert cut is leaf
        assert float(np.sum(np.exp(leaf.upper.logp))) - float(np.sum(np.exp(cut.upper.logp))) \
            <= math.exp(cut.log_inf) - math.exp(leaf.log_inf) + 1e-15
        assert math.exp(cut.log_inf) - math.exp(leaf.log_inf) <= budget * (1 + 1e-9) + 1e-300
        for k in (1, 2):
            for x in (0.0, 0.5, 2.0, 5.0):
                assert _h_mp(cut.upper, cut.log_inf, x, k) >= _h_mp(leaf.upper, leaf.log_inf, x, k), (budget, k, x)
                assert _h_mp(cut.lower, -math.inf, x, k) <= _h_mp(leaf.lower, -math.inf, x, k), (budget, k, x)
        if budget >= float(p[-1]) * 1.01:
            assert dropped >= 1


def test_split_cells_leaf_takes_each_side_from_its_law():
    """split_cells_leaf(law, law) is cells_leaf of the law; with two steps its upper atoms are
    those of the first law's leaf and its lower atoms those of the second's (array-equal)."""
    m = Subsampled(Gaussian(1.0), 0.02)
    for direction in (FORWARD, REVERSE):
        a, b = m.law(2.0**-8, direction, tail=1e-20), m.law(2.0**-9, direction, tail=1e-20)

        def whole(law):
            return leaves.cells_leaf(law.h, law.n0, law.p_lo, law.p_hi, law.q_lo, law.q_hi, None, law.below_hi,
                                     law.above_hi)

        same, la, lb = leaves.split_cells_leaf(a, a), whole(a), whole(b)
        mixed = leaves.split_cells_leaf(a, b)
        for got, want in ((same.upper, la.upper), (same.lower, la.lower), (mixed.upper, la.upper),
                          (mixed.lower, lb.lower)):
            for f in ("loss", "perr", "logp", "err"):
                assert np.array_equal(getattr(got, f), getattr(want, f))
        assert same.log_inf == la.log_inf == mixed.log_inf


def test_cells_leaf_builds_each_side_on_use(monkeypatch):
    """cells_leaf builds a side only when it is read (counted), each once, array-equal to
    cells_upper / cells_lower of the law; its nbytes, fixed when made, covers the sides'
    arrays; bad cell arrays are refused when the leaf is made."""
    m = Subsampled(Gaussian(1.0), 0.02)
    law = m.law(2.0**-8, FORWARD, tail=1e-20)
    calls = []
    for name in ("cells_upper", "cells_lower"):
        real = getattr(leaves, name)
        monkeypatch.setattr(leaves, name, lambda *a, _r=real, _n=name, **k: (calls.append(_n), _r(*a, **k))[1])
    args = (law.h, law.n0, law.p_lo, law.p_hi, law.q_lo, law.q_hi)
    leaf = leaves.cells_leaf(*args, None, law.below_hi, law.above_hi)
    n0 = leaf.nbytes
    assert calls == []
    lower = leaf.lower
    assert calls == ["cells_lower"] and leaf.lower is lower
    upper = leaf.upper
    assert calls == ["cells_lower", "cells_upper"] and leaf.upper is upper
    want_u, log_inf = leaves.cells_upper(*args, None, law.below_hi, law.above_hi)
    want_l = leaves.cells_lower(*args)
    for got, want in ((upper, want_u), (lower, want_l)):
        for f in ("loss", "perr", "logp", "err"):
            assert np.array_equal(getattr(got, f), getattr(want, f))
    assert leaf.log_inf == log_inf and leaf.nbytes == n0
    assert n0 >= sum(int(v.nbytes) for a in (upper, lower) for v in (a.loss, a.perr, a.logp, a.err, a.on_lattice)
                     if v is not None)
    with pytest.raises(ValueError, match="one length"):
        leaves.cells_leaf(law.h, law.n0, law.p_lo[:-1], law.p_hi, law.q_lo, law.q_hi)


@pytest.mark.parametrize("mech", [Subsampled(Gaussian(0.8), 0.01), Subsampled(Laplace(2.0), 0.1)])
@pytest.mark.parametrize("direction", [FORWARD, REVERSE])
def test_pass_leaf_within_its_bound_and_mass(mech, direction):
    """The leaf a heterogeneous pass makes (law truncated at a larger tail) lies within the
    bound the pass checks positions against, and its upper pair keeps all the P-mass (finite
    atoms plus +inf >= 1, up to rounding: truncated tails lumped or sent to +inf)."""
    src = workload.Source(mech, 50, direction, 1e-30)
    h = 2.0**-10
    bound = src.pass_bound(h)
    for law_tail in (0.0, 1e-20, 1e-8):
        leaf = workload.pass_leaf_within(mech, h, direction, 1e-30, law_tail, bound)
        for a in (leaf.upper, leaf.lower):
            assert float(np.max(np.abs(a.loss) + a.perr)) <= bound
        total = math.fsum(np.exp(leaf.upper.logp).tolist()) + (math.exp(leaf.log_inf) if leaf.log_inf > -math.inf
                                                                else 0.0)
        assert total >= 1.0 - 1e-12
        if law_tail >= 1e-8 and direction == FORWARD and isinstance(mech.mechanism, Gaussian):
            assert math.exp(leaf.log_inf) <= 1e-8 * 4  # the truncated tail: about law_tail, not more


def test_gaussian_cells_in_chunks_match_bitwise(monkeypatch):
    """The cell masses are elementwise: evaluated in chunks of 5 cells they equal the masses
    evaluated at once, bit for bit."""
    m = Subsampled(Gaussian(1.1), 256 / 60000)
    h = 2.0**-12
    e = np.arange(-40, 400, dtype=float) * h
    ok1, full1 = m._gaussian_cells(e[:-1], e[1:])
    monkeypatch.setattr(subsampled_mod, "CELL_CHUNK", 5)
    ok2, full2 = m._gaussian_cells(e[:-1], e[1:])
    assert ok1.any() and np.array_equal(ok1, ok2)
    for a, b in zip(full1, full2):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("direction", [FORWARD, REVERSE])
def test_lazy_groups_bracket_what_one_group_brackets(direction):
    """The same 40 steps as one group (a Power alone: one aligned FFT pass) and as two groups
    of 20 (two Powers made in the stream, at the pass's slack, convolved): both certified, so
    their brackets on H(x) overlap, and the split one is as narrow (within 2x + the slack)."""
    from optcomp._lattice import grouped

    m = Subsampled(Gaussian(1.1), 0.02)
    whole = workload.Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (workload.Source(m, 40, direction, 1e-30),))
    split = workload.Workload(np.zeros(0), np.zeros(0, dtype=np.int64),
                              tuple(workload.Source(m, 20, direction, 1e-30) for _ in range(2)))
    plan = split.plan(2.0**-11)
    assert len(plan) == 2 and all(p._leaf is None for p in plan)  # made by the pass
    h = 2.0**-11
    theta = whole.tilt_for(whole.chernoff_guess(1e-6))
    lp_w = grouped.grouped_pass(whole.vals, whole.cnts, h, theta, math.log(1e-40), 1, whole.plan(h))
    lp_s = grouped.grouped_pass(split.vals, split.cnts, h, theta, math.log(1e-40), 1, split.plan(h))
    for x in (0.05, 0.15, 0.3):  # (the add direction's loss is at most 40 log(1/0.98) = 0.81; H >= 1e-12 here)
        a, b = lp_w.excess_bounds(x), lp_s.excess_bounds(x)
        assert max(a[0], b[0]) <= min(a[1], b[1]), (x, a, b)
        if x >= 0.15:  # (at 0.05, far below the tilt's aim, the node windows cost 8x in the add direction, as before)
            assert b[1] - b[0] <= 2.0 * (a[1] - a[0]) + 1e-38, (x, a, b)  # (+ the slack e^log_slack a node)
        assert b[0] > 0.0
