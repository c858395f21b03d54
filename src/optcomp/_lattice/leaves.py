r"""The leaves of the grouped lattice producer (layer L3): the producer seam.

A leaf is **any finite discrete dominating pair** (:class:`Leaf`): finite atoms of the
privacy loss L = log(dP/dQ) under P -- float positions within a bound of the true ones,
log P-masses within a bound (:class:`Atoms`) -- plus a bound on the P-mass at loss +inf;
the Q-masses follow from the loss (q = p e^{-l}).  The upper-bound row is built from
``Leaf.upper`` (atoms of a pair that dominates the mechanism: L_up >= L under a coupling,
e.g. the exact loss, or the loss rounded up), the two lower-bound rows from ``Leaf.lower``
(L_lo <= L, e.g. the exact loss, or rounded down); for an exactly known finite pair the two
are the same atoms.  The FFT tree, the windows and the stream of
:mod:`optcomp._lattice.grouped` see only a leaf's three tilted lattice rows, their error
bounds and a bound on its log-MGF (:func:`leaf_rows`, :func:`leaf_mgf`): nothing of eps_i.

Producers of leaves:

* :func:`group_leaf` -- a group of c identical randomized responses (MV Def. 3.1, the
  two-atom pair of a black-box (eps, delta)): a window of Bin(c, p) (:func:`_group_window`),
  its tails lumped / sent to +inf; or a *bundle* of small groups composed exactly (every
  combination), and :func:`_bundle_leaves`, the same formulas for runs of equal-shape
  bundles at once (one NumPy pass);
* :meth:`Leaf.from_masses` -- any finite pair given by float brackets of its atoms'
  positions and P-masses (e.g. k-ary randomized response, a discretised mechanism);
* :meth:`Leaf.from_pairs` -- the upper and lower :class:`optcomp._pairs.DiscretePair` of a
  mechanism (:mod:`optcomp.mechanisms`), atoms on their own lattice.

A plan (:func:`leaf_plan`) is a list whose items are either a list of (eps, c) groups (a
randomized-response leaf, built at the pass's tilt) or a :class:`Leaf`.

Length (~1020 lines): the per-leaf functions and :func:`_bundle_leaves`, their vectorised
twin, must evaluate the same float operations in the same order, so they stay side by side
(with the lazily built cells leaf and the lattice log-MGF bound that both paths use)."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.special import log_expit

from .._cgf import binomial_chernoff, cgf_terms
from .._memory import current as _memory_budget
from .._rounding import LIBM_ULPS, UNIT

ATOM_BYTES = 240  # memory per atom of a leaf being built or put on the lattice (its arrays and temporaries)
GROUP_ATOMS = 1024  # a group with c + 1 above this many atoms is a leaf alone (a window of its binomial)
BUNDLE_ATOMS = 256  # smaller groups are composed exactly into leaves of <= this many atoms (one group alone may
#                    exceed it): 10^5 distinct eps at tol 1e-3 took 3.9 s at 1024, 2.7 s at 256 (the bundles' work
#                    per group grows like 2^m / m in their m groups; the tree's is the same)
# (with a bundle slice's rows held in the budget while its leaves are handed out, :func:`build`: a
# pass refused by a 64 MiB budget peaks at ~100 MB, against 240 MB before that accounting)
WINDOW_LOG = math.log(2.0**-60)  # tilted mass lumped (upper) / dropped (lower) below each window


@dataclass(frozen=True, eq=False)
class Atoms:
    """Finite atoms of a privacy loss under P: the true position of atom i lies within
    ``perr[i]`` of the float ``loss[i]``, the log of its true P-mass within ``err[i]`` of
    ``logp[i]`` (``logp`` may be -inf: a zero mass)."""

    loss: np.ndarray
    perr: np.ndarray
    logp: np.ndarray
    err: np.ndarray
    step: float = 0.0  # > 0: the atoms flagged in ``on_lattice`` sit exactly at loss = n step
    on_lattice: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Leaf:
    """A finite discrete dominating pair, as a leaf of the lattice engine.

    ``upper``: the atoms of a pair dominating the mechanism (its composed delta(x) =
    E_P[(1 - e^{x - L})_+] is >= the mechanism's at every x, for every composition), whose
    P-mass at loss +inf is at most e^``log_inf``; for a windowed leaf the P-mass below the
    window, <= e^``log_lump``, joins atom ``lump_index`` (a loss raised at fixed P-mass
    only raises delta).  ``lower``: the atoms of a pair whose composed delta is <= the
    mechanism's (its mass at +inf, if any, is dropped: a lower bound may drop outcomes).
    ``cgf``: S -> upper bounds of log E_P[e^{s L}] over ``upper``'s finite atoms at the
    tilts S (before the lump), or None to compute them from the atoms (:func:`leaf_mgf`)."""

    upper: Atoms
    lower: Atoms
    log_inf: float = -math.inf
    lump_index: int = 0
    log_lump: float = -math.inf
    cgf: Callable | None = None

    @property
    def nbytes(self) -> int:
        """The bytes of the leaf's arrays (what a cache of leaves counts)."""
        return sum(int(v.nbytes) for a in (self.upper, self.lower)
                   for v in (a.loss, a.perr, a.logp, a.err, a.on_lattice) if v is not None)

    @property
    def span(self) -> float:
        """An upper bound of |loss| over both atom sets (the leaf's half-width)."""
        return max(float(np.max(np.abs(a.loss) + a.perr, initial=0.0)) for a in (self.upper, self.lower))

    @classmethod
    def from_masses(cls, loss, perr, p_lo, p_hi, inf_hi: float = 0.0) -> "Leaf":
        """The leaf of a finite pair given by float brackets: atom i at a position within
        ``perr[i]`` of ``loss[i]``, with P-mass in [p_lo[i], p_hi[i]]; P-mass at +inf
        <= ``inf_hi``.  Upper atoms carry p_hi, lower ones p_lo (delta is a positive linear
        functional of the P-masses at fixed losses); each log is charged 2 ulps."""
        loss = np.asarray(loss, dtype=float)
        perr = np.broadcast_to(np.asarray(perr, dtype=float), loss.shape).copy()
        p_lo, p_hi = np.asarray(p_lo, dtype=float), np.asarray(p_hi, dtype=float)
        if not (loss.shape == p_lo.shape == p_hi.shape) or loss.ndim != 1 or loss.size == 0:
            raise ValueError("loss, p_lo and p_hi must be 1-d arrays of one length >= 1")
        if not (np.all(np.isfinite(loss)) and np.all(perr >= 0) and np.all(0 <= p_lo) and np.all(p_lo <= p_hi)
                and np.all(p_hi <= 1.0)):
            raise ValueError("need finite loss, perr >= 0 and 0 <= p_lo <= p_hi <= 1")
        if not (0.0 <= inf_hi <= 1.0):
            raise ValueError(f"inf_hi={inf_hi!r} must lie in [0, 1]")

        def side(p):
            with np.errstate(divide="ignore"):
                logp = np.log(p)
            return Atoms(loss, perr, logp, 2.0 * UNIT * (np.abs(np.where(p > 0, logp, 0.0)) + 1.0))

        return cls(side(p_hi), side(p_lo), math.log(inf_hi) if inf_hi > 0 else -math.inf)

    @classmethod
    def from_pairs(cls, upper, lower) -> "Leaf":
        """The leaf of a mechanism's certified :class:`optcomp._pairs.DiscretePair` s
        (``upper.side == "upper"``, ``lower.side == "lower"``): atom n_i h at the float
        n_i h (within 1 ulp), P-masses p_hi (upper) and p_lo (lower), +inf mass inf_hi."""
        if upper.side != "upper" or lower.side != "lower":
            raise ValueError("from_pairs needs an upper and a lower DiscretePair")

        def side(pair, p):
            loss = pair.n.astype(float) * pair.h
            with np.errstate(divide="ignore"):
                logp = np.log(p)
            return Atoms(loss, UNIT * np.abs(loss), logp, 2.0 * UNIT * (np.abs(np.where(p > 0, logp, 0.0)) + 1.0))

        up = side(upper, upper.p_hi)
        return cls(up, side(lower, lower.p_lo), math.log(upper.inf_hi) if upper.inf_hi > 0 else -math.inf)



def _log_expm1(d):
    """log(e^d - 1) elementwise, d >= 0 (-inf at 0): d + log1p(-e^-d) beyond 32, where e^d - 1
    is e^d to float precision and overflows past 709 (an atom of loss 1000 in a wide cell);
    both forms within a few ulps (the callers charge 8 units of |value| + 4)."""
    d = np.asarray(d, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d > 32.0, d + np.log1p(-np.exp(-np.maximum(d, 32.0))), np.log(np.expm1(np.minimum(d, 32.0))))

def cells_leaf(h: float, n0: int, m_lo, m_hi, q_lo, q_hi, points=None, below_hi: float = 0.0,
               above_hi: float = 0.0) -> Leaf:
    """The connect-the-dots leaf of a loss law with a continuous part (Doroshenko, Ghazi,
    Kamath, Kumar, Manurangsi, *Connect the Dots*, PoPETs 2022), on the engine's lattice hZ.

    Input: for the cells C_n = [n h, (n + 1) h], n = n0, n0 + 1, ..., float brackets of their
    P-masses m_n (``m_lo``, ``m_hi``) and Q-masses q_n (``q_lo``, ``q_hi``) -- the law of the
    loss L restricted to C_n under P and under Q = e^{-L} P; ``points``: (loss, perr, p_lo,
    p_hi) of point masses off the cells; ``below_hi`` / ``above_hi``: upper bounds of the
    P-mass below n0 h / above the last cell.

    Upper (a refinement, exact by data processing): every outcome with loss l in C_n = [a, b]
    is split into two with losses a and b, P-probabilities (e^{b - l} - 1)/(e^{b - a} - 1) and
    the rest; summed over the cell, the P-masses at a and b are the unique p_a + p_b = m_n,
    p_a e^{-a} + p_b e^{-b} = q_n:  p_a = (q_n e^a - m_n e^{-h})/(1 - e^{-h}),
    p_b = (m_n - q_n e^a)/(1 - e^{-h}); an upper bound pb of p_b comes from the outer ends of
    the brackets, every float operation charged (the numerators cancel to ~m h/2, so a
    bracket rho wide costs ~rho/h relative), and a is given the lesser of p_a's upper bound
    and m_hi - pb, rounded up: (m_hi - pb, pb) also dominates (p_a, p_b) -- add m_hi - m_n at
    a, then move pb - p_b <= p_a + m_hi - m_n from a up to b (H is nondecreasing in P-masses
    and in losses at fixed P-mass) -- so the brackets' width costs ~rho of mass and a shift
    by h of ~rho/h, not ~2 rho/h of mass.  The P-mass below n0 h is raised to n0 h (a loss raised at
    fixed P-mass only raises delta), the mass above goes to +inf.  These atoms sit exactly on
    hZ (flagged ``on_lattice``: the engine does not split them again).

    Lower (a garbling): each cell becomes one outcome of P-mass m_lo and Q-mass q_hi, at loss
    log(m_lo / q_hi) (P-mass lowered and Q-mass raised only lower delta), cells with
    m_lo < 2^-1000 dropped; point masses carry p_lo; tails are dropped.

    Each side is a function of the law alone (:func:`cells_upper`, :func:`cells_lower`), so
    the two may come from laws at different steps (:func:`split_cells_leaf`)."""
    _cell_arrays(h, n0, m_lo, m_hi, q_lo, q_hi)  # (bad input refused here, not when a side is built)
    npts = 0 if points is None else int(np.asarray(points[0]).size)
    N = int(np.asarray(m_lo).size)
    return LazyLeaf(lambda: cells_upper(h, n0, m_lo, m_hi, q_lo, q_hi, points, below_hi, above_hi)[0],
                    lambda: cells_lower(h, n0, m_lo, m_hi, q_lo, q_hi, points),
                    math.log(above_hi) if above_hi > 0 else -math.inf,
                    (4 * 8 + 1) * (N + 1 + npts) + 4 * 8 * (N + npts) + 4 * 8 * N)


class LazyLeaf(Leaf):
    """A :class:`Leaf` whose two sides are built on first use, each by a function of the law
    alone (:func:`cells_leaf`): a self-composition pass reads only the lower side of the law
    at h/2 and the upper side of the law at h (:func:`optcomp._lattice.selfcompose._pass_leaf`),
    so neither of the other two is built.  ``nbytes`` is fixed when it is made: both sides
    and the law's arrays the builders hold (an upper bound, whatever has been built)."""

    def __init__(self, make_upper: Callable, make_lower: Callable, log_inf: float, nbytes: int):
        object.__setattr__(self, "_make", [make_upper, make_lower])
        object.__setattr__(self, "_sides", [None, None])
        object.__setattr__(self, "log_inf", log_inf)
        object.__setattr__(self, "_nbytes", int(nbytes))

    def _side(self, i: int) -> Atoms:
        side = self._sides[i]
        if side is None:
            side = self._make[i]()
            self._sides[i] = side
            self._make[i] = None  # (the law's arrays are released once both sides are built)
        return side

    @property
    def upper(self) -> Atoms:  # type: ignore[override]
        return self._side(0)

    @property
    def lower(self) -> Atoms:  # type: ignore[override]
        return self._side(1)

    @property
    def nbytes(self) -> int:
        return self._nbytes


def split_cells_leaf(law_up, law_lo) -> Leaf:
    """The connect-the-dots leaf (:func:`cells_leaf`) with its upper atoms from the
    :class:`~optcomp._laws.CellLaw` ``law_up`` and its lower atoms from ``law_lo`` -- the
    same loss law at another step (typically half: a cell garbled to one outcome then sits
    within h/4 of the lattice point nearest it, not h/2).  Each side is a valid pair on its
    own (a refinement of the law dominating it, a garbling dominated by it), so any two
    laws of the same mechanism and direction make a leaf."""

    def pts(law):
        p = law.points
        return (p.loss, p.perr, p.p_lo, p.p_hi) if p.loss.size else None

    a = law_up
    upper, log_inf = cells_upper(a.h, a.n0, a.p_lo, a.p_hi, a.q_lo, a.q_hi, pts(a), a.below_hi, a.above_hi)
    b = law_lo
    return Leaf(upper, cells_lower(b.h, b.n0, b.p_lo, b.p_hi, b.q_lo, b.q_hi, pts(b)), log_inf)


def _cell_arrays(h: float, n0: int, m_lo, m_hi, q_lo, q_hi):
    m_lo, m_hi = np.asarray(m_lo, float), np.asarray(m_hi, float)
    q_lo, q_hi = np.asarray(q_lo, float), np.asarray(q_hi, float)
    N = m_lo.size
    if not (m_hi.size == q_lo.size == q_hi.size == N) or N == 0:
        raise ValueError("cell brackets m_lo, m_hi, q_lo, q_hi must have one length >= 1")
    if not exact_positions(h, abs(n0) + N + 1):
        raise ValueError(f"cells at h={h!r}, n0={n0}: positions n h must be exact (odd part of h's significand "
                         "times |n| below 2^53)")
    n = np.arange(n0, n0 + N + 1, dtype=np.int64)
    a = n[:-1].astype(float) * h  # exact
    return m_lo, m_hi, q_lo, q_hi, N, n, a


def _logs(p):
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    return lp, 2.0 * UNIT * (np.abs(np.where(p > 0, lp, 0.0)) + 1.0)


def cells_upper(h: float, n0: int, m_lo, m_hi, q_lo, q_hi, points=None, below_hi: float = 0.0,
                above_hi: float = 0.0) -> tuple[Atoms, float]:
    """The upper atoms of :func:`cells_leaf` (the refinement) and the log of their P-mass at
    +inf."""
    m_lo, m_hi, q_lo, q_hi, N, n, a = _cell_arrays(h, n0, m_lo, m_hi, q_lo, q_hi)
    den = -math.expm1(-h) * (1.0 - 2.0 * UNIT)  # <= 1 - e^{-h}
    with np.errstate(divide="ignore", under="ignore", over="ignore"):
        lq_lo, lq_hi = np.log(q_lo), np.log(q_hi)
        qea_lo = np.exp(lq_lo + a) * (1.0 - 8.0 * UNIT * (np.abs(np.where(q_lo > 0, lq_lo, 0.0)) + np.abs(a) + 2.0))
        qea_hi = np.exp(lq_hi + a) * (1.0 + 8.0 * UNIT * (np.abs(np.where(q_hi > 0, lq_hi, 0.0)) + np.abs(a) + 2.0))
    # q e^a also lies in [m e^{-h}, m] (q = int p e^{-l} over l in [a, a + h]): both ends are
    # valid bounds, so take the tighter -- and the only one where q underflowed (l > ~745,
    # where a given q_hi of 0 would not bound q e^a ~ m)
    qea_lo = np.maximum(np.maximum(np.where(q_lo > 0, qea_lo, 0.0), 0.0),
                        m_lo * math.exp(-h) * (1.0 - 2.0 * (LIBM_ULPS + 1) * UNIT))
    qea_hi = np.where(q_hi >= 2.0**-1000, np.minimum(qea_hi, m_hi), m_hi)
    # and q e^a as a product: within (2 LIBM_ULPS + 2) u relative, not |log q| u (which at
    # a fine step h, against numerators ~m h/2, costs ~|log q| u / h; a product that may
    # have left the normal range is not used)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ea = np.exp(a)  # (once: the same floats for both ends)
        prod_lo = q_lo * ea
        prod_hi = q_hi * ea
    fine = (prod_lo >= 2.0**-1000) & (prod_hi <= 2.0**1000)
    rel = (2.0 * LIBM_ULPS + 2.0) * UNIT
    qea_lo = np.where(fine, np.maximum(qea_lo, prod_lo * (1.0 - rel)), qea_lo)
    qea_hi = np.where(fine, np.minimum(qea_hi, prod_hi * (1.0 + rel)), qea_hi)
    num_b = m_hi - qea_lo
    num_b = num_b + 4.0 * UNIT * (m_hi + qea_lo)
    num_a = qea_hi - m_lo * math.exp(-h) * (1.0 - 2.0 * UNIT)
    num_a = num_a + 4.0 * UNIT * (qea_hi + m_lo)
    with np.errstate(over="ignore"):
        pb = np.clip(num_b / den * (1.0 + 2.0 * UNIT), 0.0, m_hi)
        pa = np.clip(num_a / den * (1.0 + 2.0 * UNIT), 0.0, m_hi)
    # or the rest of m_hi at a: (m_hi - pb, pb) dominates the true (p_a, p_b) as well (add
    # m_hi - m_n at a, then move pb - p_b <= that plus p_a from a up to b), and costs the
    # brackets' width once in mass, not ~2/h times (a shift by h instead)
    with np.errstate(invalid="ignore"):
        rest = m_hi - pb
    pa = np.minimum(pa, np.where(rest > 0.0, np.nextafter(rest, np.inf), 0.0))
    pts = np.zeros(N + 1)
    pts[:-1] += pa
    pts[1:] += pb
    pts = pts * (1.0 + 2.0 * UNIT)  # the two additions
    pts[0] += below_hi * (1.0 + 2.0 * UNIT)
    loss_u = n.astype(float) * h
    perr_u = np.zeros(N + 1)
    flags = np.ones(N + 1, dtype=bool)
    if points is not None:
        pl, pe, plo, phi = (np.asarray(v, float) for v in points)
        loss_u = np.concatenate([loss_u, pl])
        perr_u = np.concatenate([perr_u, pe])
        pts = np.concatenate([pts, phi])
        flags = np.concatenate([flags, np.zeros(pl.size, dtype=bool)])
    lu, eu = _logs(np.minimum(pts, 1.0))
    return Atoms(loss_u, perr_u, lu, eu, step=h, on_lattice=flags), (math.log(above_hi) if above_hi > 0 else -math.inf)


def cells_lower(h: float, n0: int, m_lo, m_hi, q_lo, q_hi, points=None) -> Atoms:
    """The lower atoms of :func:`cells_leaf` (the garbling)."""
    m_lo, m_hi, q_lo, q_hi, N, n, a = _cell_arrays(h, n0, m_lo, m_hi, q_lo, q_hi)
    # lower: one garbled outcome per cell (Q-mass raised: q_hi, or m_hi e^{-a} where q underflowed)
    with np.errstate(divide="ignore"):
        lq_up = np.log(q_hi)
        low = ~(q_hi >= 2.0**-1000)
        if low.any():  # (only there: the same floats as formed for every cell)
            lq_up[low] = np.log(m_hi[low]) - a[low] + 4.0 * UNIT * (np.abs(a[low]) + 1.0)
    # a cell whose P-mass is known only below 2^-1000 (a bracket at the float floor: its
    # garbled loss log(m_lo/q_hi) is meaningless, e.g. -40 for a Gaussian's far tail) is
    # dropped (a lower pair may drop outcomes)
    ok = (m_lo >= 2.0**-1000) & np.isfinite(lq_up)
    with np.errstate(divide="ignore"):
        lml, lqh = np.log(m_lo[ok]), lq_up[ok]
    loss_l = lml - lqh
    perr_l = 4.0 * UNIT * (np.abs(lml) + np.abs(lqh) + 1.0)
    pl_lo = m_lo[ok]
    if points is not None:
        pl, pe, plo, phi = (np.asarray(v, float) for v in points)
        loss_l = np.concatenate([loss_l, pl])
        perr_l = np.concatenate([perr_l, pe])
        pl_lo = np.concatenate([pl_lo, plo])
        ll, el = _logs(pl_lo)
    else:  # (_logs of m_lo[ok] > 0: its logs are lml, taken above)
        ll, el = lml, 2.0 * UNIT * (np.abs(lml) + 1.0)
    return Atoms(loss_l, perr_l, ll, el)


def cut_top(leaf: Leaf, max_mass: float) -> Leaf:
    """``leaf`` with its highest upper atoms sent to +inf while their P-mass (upper bounds
    e^{logp + err}, summed from the top and rounded up: each exp within 2^-40 relative, a
    running sum of n terms within n u, charged 4 n u) stays <= ``max_mass``, and the lower atoms above the least cut position
    dropped -- a loss raised to +inf at fixed P-mass only raises delta (the upper pair still
    dominates; its +inf mass grows by the cut mass, which the pass sends to +inf as slack),
    and a lower pair may drop outcomes.  The leaf itself when nothing is cut (or it has a
    lumped mass or a log-MGF of its own, which refer to its atoms)."""
    up = leaf.upper
    if not max_mass > 0.0 or leaf.cgf is not None or leaf.log_lump > -math.inf or up.loss.size < 2:
        return leaf
    order = np.argsort(up.loss, kind="stable")[::-1]  # highest first
    with np.errstate(under="ignore", over="ignore"):
        p = np.exp(up.logp[order] + up.err[order]) * (1.0 + 2.0**-40)
    cum = np.cumsum(p) * (1.0 + 4.0 * UNIT * p.size)
    m = int(np.searchsorted(cum, max_mass, side="right"))
    m = min(m, up.loss.size - 1)
    if m == 0:
        return leaf
    cut_mass = float(cum[m - 1])
    keep = np.ones(up.loss.size, dtype=bool)
    keep[order[:m]] = False
    lowest_cut = float(np.min(up.loss[order[:m]] - up.perr[order[:m]]))
    upper = Atoms(up.loss[keep], up.perr[keep], up.logp[keep], up.err[keep], up.step,
                  None if up.on_lattice is None else up.on_lattice[keep])
    dn = leaf.lower
    k = dn.loss - dn.perr < lowest_cut
    if not np.any(k):
        return leaf
    lower = dn if np.all(k) else Atoms(dn.loss[k], dn.perr[k], dn.logp[k], dn.err[k], dn.step,
                                       None if dn.on_lattice is None else dn.on_lattice[k])
    inf = math.exp(leaf.log_inf) if leaf.log_inf > -math.inf else 0.0
    log_inf = math.log((inf + cut_mass) * (1.0 + 2.0**-40))
    return Leaf(upper, lower, log_inf, leaf.lump_index, leaf.log_lump, None)


class Power:
    """A plan item: ``count`` independent copies of one :class:`Leaf`: alone in a pass, by one
    FFT (:func:`optcomp._lattice.selfcompose.power_pass`, at a step of its own when
    ``rebuild`` can make the leaf at another step); else by the stream's repeated squaring
    (:func:`optcomp._lattice.grouped._power`): O(log count) windowed convolutions instead of
    ``count`` leaves.

    ``rebuild``: (h, half_first[, law_tail]) -> the same law's Leaf at step h (a pass may
    choose its own step).  ``make``: the leaf made when the pass reaches it (``leaf`` given
    as None): ``make(tail)`` -> the Leaf, its law truncated at P-mass ``tail`` a side (the
    pass's slack over ``count``: what its windows drop anyway; :meth:`made`), every loss
    within ``bound`` of 0 (|loss| + perr <= bound: :func:`span` reads it before the leaf
    exists); read before the pass makes it, ``leaf`` is ``make(0.0)``."""

    __slots__ = ("_leaf", "count", "rebuild", "make", "bound")

    def __init__(self, leaf: Leaf | None, count: int, rebuild: Callable | None = None,
                 make: Callable | None = None, bound: float = 0.0):
        if leaf is None and make is None:
            raise ValueError("a Power needs its leaf or a make")
        self._leaf, self.count, self.rebuild, self.make, self.bound = leaf, count, rebuild, make, bound

    @property
    def leaf(self) -> Leaf:
        if self._leaf is None:
            self._leaf = self.make(0.0)
        return self._leaf

    def made(self, log_slack: float) -> "Power":
        """This Power with its leaf (made at the pass's ``log_slack``: the law's truncation
        tails and the highest atoms of :func:`cut_top`, each at most e^log_slack / count of
        P-mass a copy, go to +inf or are lumped: at most 2 e^log_slack more of the node's
        slack)."""
        if self._leaf is not None:
            return self
        budget = math.exp(log_slack) / self.count
        if self.rebuild is not None:  # (its pass may rebuild it at another step: at the same tail)
            rebuild = self.rebuild
            return Power(self.make(budget), self.count, lambda h, half_first=True: rebuild(h, half_first, budget))
        return Power(cut_top(self.make(budget), budget), self.count)


def exact_positions(h: float, nmax: float) -> bool:
    """Whether every product n h, |n| <= nmax, is exact: the odd part of h's significand
    times nmax stays below 2^53."""
    m = int(math.frexp(h)[0] * 2.0**53)
    while m and not m & 1:
        m >>= 1
    return m * nmax < 2.0**53


def span(item) -> float:
    """Half-width of a plan item's loss support: sum c eps for randomized-response groups."""
    if isinstance(item, Power):
        return item.count * (item.bound if item._leaf is None else item.leaf.span)
    return item.span if isinstance(item, Leaf) else float(sum(c * e for e, c in item))


def _group_window(eps: float, c: int, theta: float, log_slack: float):
    """[j_lo, j_hi] of Bin(c, p) kept for a group leaf, log of the P0 mass of X < j_lo (lumped
    at j_lo for the upper bound), log of the P0 mass of X > j_hi (sent to +inf).

    j_hi: the least with P0[X > j_hi] <= e^log_slack and P_theta[X > j_hi] <= 2^-60 (Chernoff
    bounds, P_theta the tilted binomial p_theta = expit(eps (1 + 2 theta))); j_lo: the
    largest with the lumped mass's tilted weight P0[X < j_lo] e^{theta l_{j_lo}} / M(theta)
    <= 2^-60 and P_theta[X < j_lo] <= 2^-60 (M(theta) = E_P0 e^{theta L})."""
    lp, lq = float(log_expit(eps)), float(log_expit(-eps))
    e2 = eps * (1.0 + 2.0 * theta)
    lpt, lqt = float(log_expit(e2)), float(log_expit(-e2))
    logM = c * float(cgf_terms(lp, lq, eps, theta))
    mean = c * math.exp(lpt)

    def hi_ok(m):
        return (binomial_chernoff(c, m + 1, lp, lq, True) <= log_slack
                and binomial_chernoff(c, m + 1, lpt, lqt, True) <= WINDOW_LOG)

    def lo_ok(m):
        if m <= 0:
            return True
        lump = binomial_chernoff(c, m - 1, lp, lq, False) + theta * (2 * m - c) * eps - logM
        return lump <= WINDOW_LOG and binomial_chernoff(c, m - 1, lpt, lqt, False) <= WINDOW_LOG

    a, b = min(c, max(0, math.floor(mean))), c  # hi_ok(c) holds
    while a < b:
        mid = (a + b) // 2
        if hi_ok(mid):
            b = mid
        else:
            a = mid + 1
    j_hi = b
    a, b = 0, min(j_hi, max(0, math.ceil(mean)))  # lo_ok(0) holds
    while a < b:
        mid = (a + b + 1) // 2
        if lo_ok(mid):
            a = mid
        else:
            b = mid - 1
    j_lo = a
    log_lump = binomial_chernoff(c, j_lo - 1, lp, lq, False) if j_lo > 0 else -math.inf
    log_up = binomial_chernoff(c, j_hi + 1, lp, lq, True) if j_hi < c else -math.inf
    return j_lo, j_hi, log_lump, log_up


def _group_cgf(items) -> Callable:
    """S -> sum_i c_i log(p_i e^{s eps_i} + q_i e^{-s eps_i}): the exact log-MGF of a
    randomized-response leaf (:func:`optcomp._cgf.cgf_terms`)."""

    def K(S: np.ndarray) -> np.ndarray:
        out = np.zeros(S.size)
        for eps, c in items:
            out += c * cgf_terms(float(log_expit(eps)), float(log_expit(-eps)), eps, S)
        return out

    return K


def alone(items) -> bool:
    """Whether a plan entry is one (eps, c) group with c + 1 > GROUP_ATOMS: a leaf of its
    own, a window of its binomial (:func:`_group_window`)."""
    return len(items) == 1 and items[0][1] + 1 > GROUP_ATOMS


def group_leaf(items, theta: float, log_slack: float) -> Leaf:
    """The leaf of randomized-response groups: ``items`` is one (eps, c) group with
    c + 1 > GROUP_ATOMS (a window of its binomial, :func:`_group_window`; the P-mass below
    the window is lumped at its lowest atom, the mass above goes to +inf), or several small
    ones composed exactly (every combination).  Positions (2j - c) eps and masses (from
    :func:`optcomp._binomial.binomial_log_pmf` for a window) carry their error bounds; the
    same atoms serve both sides (the pair is known exactly)."""
    from .._binomial import binomial_log_pmf

    if alone(items):
        eps, c = items[0]
        j_lo, j_hi, log_lump, log_up = _group_window(eps, c, theta, log_slack)
        _memory_budget().need(ATOM_BYTES * (j_hi - j_lo + 1), f"a window of {j_hi - j_lo + 1:,} binomial atoms")
        j = np.arange(j_lo, j_hi + 1, dtype=np.int64)
        logp, err = binomial_log_pmf(eps, c, j)
        loss = (2 * j - c).astype(float) * eps
        atoms = Atoms(loss, UNIT * np.abs(loss), logp, err)
        return Leaf(atoms, atoms, log_up, 0, log_lump, _group_cgf(items))
    loss = np.zeros(1)
    logp = np.zeros(1)
    mag = 0.0
    span_ = 0.0
    for eps, c in items:
        j = np.arange(c + 1, dtype=np.int64)
        jf = j.astype(float)
        lp, lq = float(log_expit(eps)), float(log_expit(-eps))
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        lm = lc + jf * lp + (c - jf) * lq
        mag += 3.0 * math.lgamma(c + 1) + c * (abs(lp) + abs(lq)) + 4.0
        span_ += c * eps
        loss = (loss[:, None] + ((2 * j - c).astype(float) * eps)[None, :]).ravel()
        logp = (logp[:, None] + lm[None, :]).ravel()
    m = len(items)
    perr = np.full(loss.size, 4.0 * (m + 2) * UNIT * span_)
    err = 8.0 * UNIT * (mag + np.abs(logp) + 4.0 * m)
    atoms = Atoms(loss, perr, logp, err)
    return Leaf(atoms, atoms, cgf=_group_cgf(items))


def _lattice_interval(loss: np.ndarray, perr, h: float, exact=None):
    """Lattice neighbours lo h <= l + perr < hi h = (lo + 1) h of every atom (checked on the
    exact products) and the garbling T = rint(l / h) (any function of the atom).  An atom
    whose interval [l - perr, l + perr] reaches below lo h is raised to it by the refinement
    (a loss raised at fixed P0 only raises H), so an atom on or next to a lattice point
    costs nothing.  Atoms flagged in ``exact`` sit exactly at l = n h: lo = n, hi = n + 1
    (:func:`leaf_rows` then puts the whole mass at lo: the distance is exactly 0)."""
    if exact is not None and exact.all():  # (every atom on its lattice point: the same lo, none computed twice)
        lo = np.rint(loss / h)
        return lo, lo + 1.0, lo
    pe = 2.0 * perr + 4.0 * UNIT * np.abs(loss) + 1e-300
    y = loss + pe
    lo = np.floor(y / h)
    lo[lo * h > y] -= 1.0
    lo[(lo + 1.0) * h <= y] += 1.0
    if exact is not None:
        lo = np.where(exact, np.rint(loss / h), lo)
    return lo, lo + 1.0, np.rint(loss / h)


def leaf_rows(leaf: Leaf, h: float, theta: float):
    """The three tilted lattice rows of one leaf (see
    :func:`optcomp._lattice.grouped.grouped_pass`): refined P0 of ``leaf.upper`` (upper),
    garbled P0 and garbled P1 of ``leaf.lower`` (lower).  Returns (rows (3, W), offset,
    logZ (3,), rho (3,), E2 (3,), slack) -- rho a relative and E2 an absolute (2-norm) error
    bound of each row, slack the P0 mass sent to +inf.

    The rows are stored divided by their float sum Z and logZ = mx + log Z: Z's own
    rounding cancels (an entry stands for row_i e^{logZ}), so an entry's relative error is
    its terms' (the exp and their log-masses' bounds), its bin's sum (at most as many u
    as the terms it receives, ``per_bin``), the division and the constants added after the
    max -- not the number of atoms of the leaf."""
    up, dn = leaf.upper, leaf.lower
    loss, perr, logp, err = up.loss, up.perr, up.logp, up.err
    li, log_lump = leaf.lump_index, leaf.log_lump
    n = max(loss.size, dn.loss.size)
    lo_l = min(float(np.min(up.loss - up.perr)), float(np.min(dn.loss - dn.perr)))
    hi_l = max(float(np.max(up.loss + up.perr)), float(np.max(dn.loss + dn.perr)))
    _memory_budget().need(3 * 8 * ((hi_l - lo_l) / h + 4) + ATOM_BYTES * (up.loss.size + dn.loss.size),
                          f"a leaf's lattice rows at step h={h:g}")
    exact = up.on_lattice if (up.on_lattice is not None and up.step == h) else None
    lo, hi, _ = _lattice_interval(loss, perr, h, exact)
    tg = np.rint(dn.loss / h)  # (the garbling of :func:`_lattice_interval`)
    # upper: the lumped mass joins atom li (P0 only: a loss raised at fixed P0 only raises H)
    logp0 = logp.copy()
    err0 = err.copy()
    if log_lump > -math.inf:
        logp0[li] = float(np.logaddexp(logp0[li], log_lump))
        err0[li] = err0[li] + 4.0 * UNIT * (abs(logp0[li]) + 1.0)
    D = h  # (hi - lo) h, exact: hi = lo + 1 for every atom
    # an atom exactly at its lattice point (perr 0 and l == lo h, both floats exact: a cell's
    # end) keeps its whole mass at lo -- the split's distance is 0 -- and puts nothing at hi
    sp = ~((perr == 0.0) & (loss == lo * h))
    ls, ps, los, his = loss[sp], perr[sp], lo[sp], hi[sp]
    d_hi = (his * h - ls) + ps + 4.0 * UNIT * (np.abs(his * h) + np.abs(ls))  # >= hi h - l
    d_lo = (ls - los * h) + ps + 4.0 * UNIT * (np.abs(los * h) + np.abs(ls))  # >= l - lo h
    d_hi = np.minimum(d_hi, D)  # beyond D: the atom may lie below lo, all its mass there
    d_lo = np.minimum(np.maximum(d_lo, 0.0), D)  # <= 0: below lo, nothing at hi
    lD1, lD2 = float(_log_expm1(D)), float(np.log(-np.expm1(-D)))  # (once: the same values per atom)
    l_lo = np.zeros(loss.size)
    with np.errstate(divide="ignore"):
        # P0 mass at lo: P0 (e^{hi - l} - 1)/(e^D - 1), at hi: P0 (1 - e^{-(l - lo)})/(1 - e^{-D});
        # each increases in its distance, so the widened distances give upper bounds
        l_lo[sp] = _log_expm1(d_hi) - lD1
        l_hi = np.log(-np.expm1(-d_lo)) - lD2
    fin_lo, fin_hi = np.isfinite(l_lo), np.isfinite(l_hi)
    e_lo = err0 + 8.0 * UNIT * (np.abs(np.where(fin_lo, l_lo, 0.0)) + abs(lD1) + 4.0)
    e_hi = err0[sp] + 8.0 * UNIT * (np.abs(np.where(fin_hi, l_hi, 0.0)) + abs(lD2) + 4.0)
    th = theta * h
    base = int(min(lo.min(), tg.min()))
    W = int(max(hi.max(), tg.max())) - base + 1
    batches = [
        ([lo, his], [logp0 + l_lo, logp0[sp] + l_hi], [e_lo, e_hi], th),
        ([tg], [dn.logp], [dn.err], th),
        ([tg], [dn.logp - dn.loss], [dn.err + dn.perr + 4.0 * UNIT * (np.abs(dn.loss) + np.abs(dn.logp))], th + h),
    ]
    rows = np.zeros((3, W))
    logZ = np.zeros(3)
    rho = np.zeros(3)
    E2 = np.zeros(3)
    # (each position array's bins once: the garbled rows share theirs; a bin's count once per batch)
    bins = {}
    counts = {}

    def bins_of(p):
        if id(p) not in bins:
            bins[id(p)] = (p - base).astype(np.int64)
        return bins[id(p)]

    for b, (poss, lms, errs, tb) in enumerate(batches):
        # the most terms one lattice point receives (each bin's sum within that many u)
        key = tuple(id(p) for p in poss)
        if key not in counts:
            idx = [bins_of(p) for p in poss]
            counts[key] = int(np.max(np.bincount(idx[0] if len(idx) == 1 else np.concatenate(idx))))
        per_bin = counts[key]
        lws = [lm + tb * p for p, lm in zip(poss, lms)]
        oks = [np.isfinite(lw) for lw in lws]
        alls = [ok.size > 0 and bool(ok.all()) for ok in oks]
        mx = max(float(np.max(lw if a else lw[ok])) for lw, ok, a in zip(lws, oks, alls) if a or np.any(ok))
        for p, lw in zip(poss, lws):
            with np.errstate(under="ignore"):
                rows[b] += np.bincount(bins_of(p), weights=np.exp(lw - mx), minlength=W)
        Z = float(np.sum(rows[b]))
        rows[b] /= Z
        logZ[b] = mx + math.log(Z)
        r = 0.0
        for p, lm, lw, er, ok, a in zip(poss, lms, lws, errs, oks, alls):
            if a:  # (every term finite: the same maximum, no copies)
                r = max(r, float(np.max(er + 8.0 * UNIT * (np.abs(lm) + np.abs(lw))))
                        + 8.0 * UNIT * (abs(mx) + abs(logZ[b]) + 4.0))
            elif np.any(ok):  # the row constants added after the max (as in _bundle_leaves)
                r = max(r, float(np.max(er[ok] + 8.0 * UNIT * (np.abs(lm[ok]) + np.abs(lw[ok]))))
                        + 8.0 * UNIT * (abs(mx) + abs(logZ[b]) + 4.0))
        rho[b] = r + (per_bin + 4) * UNIT
        E2[b] = 2.0 * n * 2.0**-1070
    slack = math.exp(leaf.log_inf) * (1.0 + 1e-9) if leaf.log_inf > -math.inf else 0.0
    return rows, base, logZ, rho, E2, slack


def _bundle_leaves(eps2d: np.ndarray, counts: tuple, h: float, theta: float, S: np.ndarray):
    """:func:`group_leaf`, :func:`leaf_rows` and :func:`leaf_mgf` for n bundles of the same
    shape at once (one NumPy pass instead of 3n Python calls): bundle i composes groups
    (eps2d[i, g], counts[g]), g = 0..m-1, every combination exactly (no window, no lump).

    Every quantity is the elementwise formula of the per-leaf functions, evaluated in the
    same order (the same float operations), so each leaf's rows, logZ, rho, E2 and K are
    those of the per-leaf path up to the order of a few summations (bincount's per-bin
    sums, the normaliser Z), whose error is the same (2n + 8) u charged there; the tests
    check both paths against each other and against exact references.  Returns
    (rows (3, n, Wmax), widths (n,), bases (n,), logZ (3, n), rho (3, n), E2 (3, n),
    K (n, |S|)); row i of leaf i is rows[:, i, :widths[i]]."""
    nl, m = eps2d.shape
    natoms = math.prod(int(c) + 1 for c in counts)
    width = 2.0 * float(np.max(eps2d @ np.array(counts, dtype=float))) / h + 4.0
    # the rows (3 per leaf) and one bincount row beside them; the atoms' arrays and temporaries
    _memory_budget().need(nl * (ATOM_BYTES * natoms + 4 * 8 * width), f"{nl:,} bundle leaves at step h={h:g}")
    loss = np.zeros((nl, 1))
    logp = np.zeros((nl, 1))
    mag = np.zeros(nl)
    span = np.zeros(nl)
    lps, lqs = log_expit(eps2d), log_expit(-eps2d)
    for g, c in enumerate(counts):
        c = int(c)
        eps = eps2d[:, g]
        j = np.arange(c + 1, dtype=np.int64)
        jf = j.astype(float)
        lp, lq = lps[:, g], lqs[:, g]
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        lm = lc[None, :] + jf[None, :] * lp[:, None] + (c - jf)[None, :] * lq[:, None]
        mag += 3.0 * math.lgamma(c + 1) + c * (np.abs(lp) + np.abs(lq)) + 4.0
        span += c * eps
        loss = (loss[:, :, None] + ((2 * j - c).astype(float)[None, :] * eps[:, None])[:, None, :]).reshape(nl, -1)
        logp = (logp[:, :, None] + lm[:, None, :]).reshape(nl, -1)
    n = loss.shape[1]
    perr = (4.0 * (m + 2) * UNIT * span)[:, None]
    err = 8.0 * UNIT * (mag[:, None] + np.abs(logp) + 4.0 * m)
    # ---- leaf_rows, elementwise (no lump: li, log_lump unused)
    lo, hi, tg = _lattice_interval(loss, perr, h)
    D = (hi - lo) * h
    d_hi = (hi * h - loss) + perr + 4.0 * UNIT * (np.abs(hi * h) + np.abs(loss))
    d_lo = (loss - lo * h) + perr + 4.0 * UNIT * (np.abs(lo * h) + np.abs(loss))
    d_hi = np.minimum(d_hi, D)
    d_lo = np.minimum(np.maximum(d_lo, 0.0), D)
    # the same values as there, computed once per distinct width k = hi - lo (D = k h exactly)
    kk = (hi - lo).astype(np.int64)
    k0 = int(kk.min())
    Dk = np.arange(k0, int(kk.max()) + 1).astype(float) * h
    kk -= k0
    lD1 = _log_expm1(Dk)[kk]
    lD2 = np.log(-np.expm1(-Dk))[kk]
    with np.errstate(divide="ignore"):
        l_lo = _log_expm1(d_hi) - lD1
        l_hi = np.log(-np.expm1(-d_lo)) - lD2
    fin_lo, fin_hi = np.isfinite(l_lo), np.isfinite(l_hi)
    e_lo = err + 8.0 * UNIT * (np.abs(np.where(fin_lo, l_lo, 0.0)) + np.abs(lD1) + 4.0)
    e_hi = err + 8.0 * UNIT * (np.abs(np.where(fin_hi, l_hi, 0.0)) + np.abs(lD2) + 4.0)
    th = theta * h
    base = np.minimum(lo.min(axis=1), tg.min(axis=1))
    top = np.maximum(hi.max(axis=1), tg.max(axis=1))
    widths = (top - base).astype(np.int64) + 1
    Wm = int(widths.max())
    # flat bin of every position in the (nl, Wm) rows, computed once per position array
    shift = (np.arange(nl, dtype=np.int64) * Wm)[:, None] - base.astype(np.int64)[:, None]
    i_lo, i_hi, i_tg = ((p.astype(np.int64) + shift).ravel() for p in (lo, hi, tg))
    batches = [
        ([lo, hi], [i_lo, i_hi], [logp + l_lo, logp + l_hi], [e_lo, e_hi], th),
        ([tg], [i_tg], [logp], [err], th),
        ([tg], [i_tg], [logp - loss], [err + perr + 4.0 * UNIT * (np.abs(loss) + np.abs(logp))], th + h),
    ]
    rows = np.empty((3, nl, Wm))
    logZ = np.zeros((3, nl))
    rho = np.zeros((3, nl))
    E2 = np.full((3, nl), 2.0 * n * 2.0**-1070)
    for b, (poss, bins, lms, errs, tb) in enumerate(batches):
        lws = [lm + tb * p for p, lm in zip(poss, lms)]
        mx = np.max([np.max(np.where(np.isfinite(lw), lw, -np.inf), axis=1) for lw in lws], axis=0)
        for t, (ib, lw) in enumerate(zip(bins, lws)):
            with np.errstate(under="ignore"):
                row = np.bincount(ib, weights=np.exp(lw - mx[:, None]).ravel(), minlength=nl * Wm).reshape(nl, Wm)
            if t == 0:
                rows[b] = row
            else:
                rows[b] += row
        Z = rows[b].sum(axis=1)
        rows[b] /= Z[:, None]
        logZ[b] = mx + np.array([math.log(z) for z in Z.tolist()])
        r = np.zeros(nl)
        for lm, lw, er in zip(lms, lws, errs):
            # leaf_rows' charge: the per-atom terms, the row constants added after the max
            v = er + 8.0 * UNIT * (np.abs(lm) + np.abs(lw))
            v[~np.isfinite(lw)] = 0.0
            r = np.maximum(r, np.max(v, axis=1) + 8.0 * UNIT * (np.abs(mx) + np.abs(logZ[b]) + 4.0))
        rho[b] = r + (2 * n + 8) * UNIT
    # ---- leaf_mgf (no lump): the far-end masses exceed the exact split by <= 2 (2 perr + rounding)/h
    extra = np.log1p(8.0 * (perr[:, 0] + 4.0 * UNIT * np.max(np.abs(loss), axis=1) + 1e-300) / h) + rho[0]
    K = np.zeros((nl, S.size))
    for g, c in enumerate(counts):
        K += int(c) * cgf_terms(lps[:, g][:, None], lqs[:, g][:, None], eps2d[:, g][:, None], S[None, :])
    pe = 2.0 * perr[:, 0] + 4.0 * UNIT * np.max(np.abs(loss), axis=1) + 1e-300
    K = K + refinement_charge(S[None, :], h, pe[:, None]) + extra[:, None]
    K = K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300
    return rows, widths, base.astype(np.int64), logZ, rho, E2, K


CGF_TERMS = 2**18  # atoms x tilts summed one by one; beyond, the atoms are summed in blocks first
_BLOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Atoms -> (nb, blocks): a cached leaf's


def _atoms_cgf(a: Atoms, S: np.ndarray, blocks: bool = True) -> np.ndarray:
    """Upper bounds of log sum_i p_i e^{s l_i} over finite atoms at the tilts S: each mass
    raised by its error bound, each position moved to the end of its interval that raises
    e^{s l}; the float log-sum-exp (n terms, arguments up to max |w|) charged
    8 u (max |w| + n + 4).  Beyond CGF_TERMS atoms x tilts (a fine leaf of a continuous law:
    10^6 cells at 30 tilts took ~1.5 s and 240 MB a call), the atoms are summed in blocks of
    consecutive positions (:func:`_atom_blocks`; each term only grows) -- unless ``blocks`` is
    False (a bound multiplied by k copies, where a block's looseness e^{|s| width} would be
    raised to the k-th power): then every atom, CGF_TERMS terms at a time."""
    ok = np.isfinite(a.logp)
    if not np.any(ok):
        return np.full(S.size, -math.inf)
    lh, ll = a.loss[ok] + a.perr[ok], a.loss[ok] - a.perr[ok]
    lw = a.logp[ok] + a.err[ok]
    n = lw.size
    if not blocks and n * S.size > CGF_TERMS:
        if n > CGF_TERMS:  # (one tilt alone exceeds the terms: as before, in blocks)
            return np.concatenate([_atoms_cgf(a, S[i: i + 1], True) for i in range(S.size)])
        step = max(1, CGF_TERMS // n)
        return np.concatenate([_direct_cgf(lw, lh, ll, S[i: i + step], n) for i in range(0, S.size, step)])
    if n * S.size > CGF_TERMS:
        nb = max(CGF_TERMS // S.size, 64)
        cached = _BLOCKS.get(a)
        if cached is None or cached[0] != nb:
            cached = (nb, _atom_blocks(lw, lh, ll, nb))
            _BLOCKS[a] = cached
        lw, lh, ll = cached[1]
    return _direct_cgf(lw, lh, ll, S, n)


def lattice_cgf(logp: np.ndarray, err: np.ndarray, h: float, off: int, S: np.ndarray) -> np.ndarray:
    """:func:`_atoms_cgf` of atoms at the lattice points h (off + i), i = 0 .. N - 1 (exact
    float positions: perr 0), log P-masses ``logp[i]`` within ``err[i]``: beyond CGF_TERMS
    atoms x tilts, in at most CGF_TERMS / |S| runs of consecutive points (each run's mass at
    its last point for s >= 0, its first for s < 0: the blocks of :func:`_atom_blocks`,
    which are of equal width in position, formed by a reshape instead of scatters)."""
    N = logp.size
    lw = logp + err
    ok = np.isfinite(lw)
    n = int(np.count_nonzero(ok))
    if n == 0:
        return np.full(S.size, -math.inf)
    if n * S.size <= CGF_TERMS:
        pos = h * (np.flatnonzero(ok).astype(float) + off)  # exact
        return _direct_cgf(lw[ok], pos, pos, S, n)
    nb = max(CGF_TERMS // S.size, 64)
    b = -(-N // nb)
    nb = -(-N // b)
    w = np.full(nb * b, -math.inf)
    w[:N] = np.where(ok, lw, -math.inf)
    w = w.reshape(nb, b)
    mx = np.max(w, axis=1)
    used = mx > -math.inf
    with np.errstate(under="ignore"):
        total = np.sum(np.exp(w[used] - mx[used, None]), axis=1)
    first = np.arange(nb, dtype=np.int64)[used] * b
    last = np.minimum(first + b - 1, N - 1)
    return _direct_cgf(mx[used] + np.log(total), h * (last.astype(float) + off), h * (first.astype(float) + off),
                       S, n)


def _direct_cgf(lw: np.ndarray, lh: np.ndarray, ll: np.ndarray, S: np.ndarray, n: int) -> np.ndarray:
    """The direct sum of :func:`_atoms_cgf` over terms (log-masses ``lw``, position ends ``lh``
    >= ``ll``: atoms, or blocks of them) charged for ``n`` atoms (a block's own sum is within
    the charge of its atoms, :func:`_atom_blocks`)."""
    K = np.empty(S.size)
    for sel, l in ((S >= 0.0, lh), (S < 0.0, ll)):  # (the tilts >= 0 at the upper ends, the others at the lower)
        if not np.any(sel):
            continue
        w = S[sel][:, None] * l[None, :]
        w += lw[None, :]
        mx, mn = np.max(w, axis=1), np.min(w, axis=1)
        w -= mx[:, None]
        np.exp(w, out=w)
        K[sel] = mx + np.log(np.sum(w, axis=1)) + 8.0 * UNIT * (np.maximum(np.abs(mx), np.abs(mn)) + n + 4.0)
    return K


def _atom_blocks(lw: np.ndarray, lh: np.ndarray, ll: np.ndarray, nb: int):
    """Atoms (log-masses ``lw``, position intervals [ll, lh]) grouped into at most ``nb``
    blocks of equal width in position: each block's log total mass (log-sum-exp of its
    atoms: a sum of n_b positive terms, relative error <= n_b u, within the caller's n u
    charge), placed at its largest upper end for s >= 0 and its least lower end for s < 0,
    so that sum_i p_i e^{s l_i} <= sum_blocks P_b e^{s l_b}: an upper bound at every s, looser
    by at most e^{|s| width} (width = the span / nb: the windows it bounds move by one
    width)."""
    lo, hi = float(np.min(ll)), float(np.max(ll))
    width = (hi - lo) / nb
    b = np.minimum(((ll - lo) / width).astype(np.int64), nb - 1) if width > 0.0 else np.zeros(ll.size, np.int64)
    top = np.full(nb, -math.inf)
    np.maximum.at(top, b, lh)
    bottom = np.full(nb, math.inf)
    np.minimum.at(bottom, b, ll)
    mx = np.full(nb, -math.inf)
    np.maximum.at(mx, b, lw)
    with np.errstate(under="ignore"):
        total = np.bincount(b, weights=np.exp(lw - mx[b]), minlength=nb)
    used = total > 0.0
    return mx[used] + np.log(total[used]), top[used], bottom[used]


def refinement_charge(S: np.ndarray, h: float, pe: float) -> np.ndarray:
    """Upper bounds of the log-MGF's growth by the refinement at step h, at the tilts S
    (:func:`_lattice_interval`: an atom is raised by at most pe = 2 perr + 4 u |l| to its
    lower neighbour lo, or split between lo and hi = lo + 1).  The smaller of:

    * 2 |s| h: every atom's mass goes to lattice points within 2h of it;
    * ((s + 1)^2 + |s + 1|) h^2 / 8 + 2 |s| pe: a split keeps the atom's P1 mass and
      E_P1[e^L] = e^l, so with X the split loss under P1 (values lo, hi, h apart) and
      t = s + 1, E_P0[e^{sX}] / e^{sl} = E e^{tX} / (E e^X)^t, whose log is
      kappa(t) - t kappa(1) <= (t^2 + max(0, -t)) h^2 / 8 by Hoeffding's lemma
      (kappa(t) <= t E X + t^2 h^2 / 8 for every real t, and E X <= kappa(1)); a mixture of
      atoms grows by at most its largest factor; a raise multiplies e^{sl} by <= e^{|s| pe}."""
    if h < 2.0**-400:  # (h^2 would underflow and (s + 1)^2 may overflow: the same bound as (|t| h)^2)
        th = np.abs(S + 1.0) * h
        return np.minimum(np.abs(S) * 2.0 * h, (th * th + th * h) / 8.0 * (1.0 + 2.0**-48) + np.abs(S) * 2.0 * pe)
    return np.minimum(np.abs(S) * 2.0 * h, ((S + 1.0) ** 2 + np.abs(S + 1.0)) * (h * h / 8.0) + np.abs(S) * 2.0 * pe)


def leaf_mgf(leaf: Leaf, S: np.ndarray, h: float, extra: float = 0.0, blocks: bool = True) -> np.ndarray:
    """Upper bounds on log E_P0[e^{s L}] of a leaf's refined (upper) row at the tilts S: the
    leaf's own log-MGF (``leaf.cgf``, or :func:`_atoms_cgf` of its upper atoms), with the
    lumped mass at its atom (for s > 0 it can raise the MGF by at most lump e^{s l_lump}),
    plus the refinement's charge (:func:`refinement_charge`), plus ``extra`` for the masses
    being evaluated at the far end of their position interval and their rounding
    (``extra`` bounds the log of the row's total mass over the exact refined one);
    ``blocks``: as in :func:`_atoms_cgf`."""
    u = leaf.upper
    pe = 2.0 * float(np.max(u.perr, initial=0.0)) + 4.0 * UNIT * float(np.max(np.abs(u.loss), initial=0.0)) + 1e-300
    K = _lumped_cgf(leaf, S, blocks) + refinement_charge(S, h, pe) + extra
    return K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300


def _lumped_cgf(leaf: Leaf, S: np.ndarray, blocks: bool = True) -> np.ndarray:
    """log of the upper atoms' MGF with the lumped mass at its atom (floats, before slack)."""
    K = leaf.cgf(S) if leaf.cgf is not None else _atoms_cgf(leaf.upper, S, blocks)
    if leaf.log_lump > -math.inf:
        li = leaf.lump_index
        l_lump = float(leaf.upper.loss[li]) + np.where(S >= 0.0, 1.0, -1.0) * float(leaf.upper.perr[li])
        K = np.logaddexp(K, leaf.log_lump + S * l_lump)
    return K


def upper_mgf(leaf: Leaf, S: np.ndarray) -> np.ndarray:
    """Upper bounds on log E_P[e^{s L}; L finite] of the leaf's upper pair (its lumped mass
    included) at the tilts S: :func:`leaf_mgf` without the refinement, for Chernoff bounds on
    the composition the upper pairs dominate."""
    K = _lumped_cgf(leaf, S)
    return K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300


def group_mgf(items, S: np.ndarray) -> np.ndarray:
    """Upper bounds on the log-MGF of randomized-response groups ``items`` ((eps, c) pairs)
    at the tilts S: :func:`_group_cgf` with the slack of :func:`upper_mgf`, plus its float
    error (each of the n = sum c terms log(p e^{s eps} + q e^{-s eps}) within 8 ulps of
    2 + |s| eps, |log p| <= log 2)."""
    K = _group_cgf(items)(S)
    n = float(sum(c for _, c in items))
    return K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 4e-15 * n * (2.0 + np.abs(S) * max(e for e, _ in items))


def leaf_plan(vals: np.ndarray, cnts: np.ndarray) -> list:
    """The leaves: each group with c + 1 > GROUP_ATOMS alone (a binomial window), the others
    bundled (in eps order) while the product of their (c + 1) stays <= BUNDLE_ATOMS (a group
    with c + 1 above that: a bundle of its own, every atom)."""
    plan, cur, size = [], [], 1
    for e, c in zip(vals.tolist(), cnts.tolist()):
        c = int(c)
        if alone([(e, c)]):
            plan.append([(e, c)])
            continue
        if cur and size * (c + 1) > BUNDLE_ATOMS:
            plan.append(cur)
            cur, size = [], 1
        cur.append((e, c))
        size *= c + 1
    if cur:
        plan.append(cur)
    return plan


VECTOR_LEAVES = True  # bundles of equal shape built together (:func:`_bundle_leaves`); False: one by one
LEAF_SLICE_ATOMS = 2**16  # atoms per vectorised slice of bundles (its arrays stay in a core's cache)
LEAF_SLICE_POINTS = 2**21  # leaves x widest leaf per slice (the slice's rows are 3 x this)


def _leaf_one(item, h: float, theta: float, log_slack: float, S: np.ndarray):
    """One leaf by the per-leaf functions: (rows (3, W), base, logZ, rho, E2, K, slack)."""
    leaf = item if isinstance(item, Leaf) else group_leaf(item, theta, log_slack)
    rows, base, logZ, rho, E2, s_leaf = leaf_rows(leaf, h, theta)
    return rows, base, logZ, rho, E2, upper_row_mgf(leaf, S, h, float(rho[0])), s_leaf


def upper_row_mgf(leaf: Leaf, S: np.ndarray, h: float, rho_up: float, blocks: bool = True) -> np.ndarray:
    """:func:`leaf_mgf` of the refined row :func:`leaf_rows` builds at step h (``rho_up`` its
    relative error bound): the far-end masses exceed the exact split by <= 2 (2 perr +
    rounding)/h relative."""
    u = leaf.upper
    extra = math.log1p(8.0 * float(np.max(u.perr) + 4.0 * UNIT * np.max(np.abs(u.loss)) + 1e-300) / h) + rho_up
    return leaf_mgf(leaf, S, h, extra, blocks)


def build(plan, h: float, theta: float, log_slack: float, S: np.ndarray):
    """The leaves of ``plan`` in order (:class:`Leaf` items as they are), as (rows (3, W), base, logZ (3,), rho (3,), E2 (3,),
    K, slack): binomial windows one by one (:func:`_leaf_one`), runs of bundles of the same
    shape (the same counts) in slices by :func:`_bundle_leaves` (``VECTOR_LEAVES``).  A slice's
    rows stay alive while its leaves are handed out: they are held in the call's memory budget
    until then, and a slice holds at most 1/256 of the budget in lattice points (the rows are
    24 bytes a point; the bincount row and the leaves' copies beside them)."""
    i, n = 0, len(plan)
    budget = _memory_budget()
    slice_points = min(LEAF_SLICE_POINTS, max(2**14, budget.limit // 256))
    while i < n:
        items = plan[i]
        if not VECTOR_LEAVES or isinstance(items, Leaf) or alone(items):
            yield _leaf_one(items, h, theta, log_slack, S)
            i += 1
            continue
        shape = tuple(int(c) for _, c in items)
        natoms = math.prod(c + 1 for c in shape)
        wmax = 2.0 * sum(c * e for e, c in items) / h + 4.0
        j = i + 1
        while j < n and (j - i + 1) * natoms <= LEAF_SLICE_ATOMS:
            nxt = plan[j]
            if isinstance(nxt, Leaf) or tuple(int(c) for _, c in nxt) != shape:
                break
            w = max(wmax, 2.0 * sum(c * e for e, c in nxt) / h + 4.0)
            if (j - i + 1) * w > slice_points:
                break
            wmax = w
            j += 1
        eps2d = np.array([[e for e, _ in plan[t]] for t in range(i, j)], dtype=float)
        rows, widths, bases, logZ, rho, E2, K = _bundle_leaves(eps2d, shape, h, theta, S)
        held = rows.nbytes
        budget.hold(held)  # (checked by _bundle_leaves' estimate)
        try:
            for t in range(j - i):  # copies: a view would keep the whole slice (up to 48 MB) alive
                yield rows[:, t, : int(widths[t])].copy(), int(bases[t]), logZ[:, t], rho[:, t], E2[:, t], K[t], 0.0
        finally:
            del rows
            budget.release(held)
        i = j
