r"""What one lattice pass composes (layer L3): randomized-response groups and mechanism
leaves, and the float estimates the drivers aim with.

A :class:`Workload` is the multiset the drivers of :mod:`optcomp.lattice` refine over:
``vals``/``cnts`` -- groups of two-atom randomized responses (the black-box (eps_i, delta_i)
pairs given no delta event) -- and ``sources`` -- mechanisms of :mod:`optcomp.mechanisms`
with their counts, each entering as a :class:`~optcomp._lattice.leaves.Leaf` built for the
pass's step h (:func:`mechanism_leaf`: finite loss laws as their atoms, laws with a
continuous part by connect-the-dots cells on the lattice itself).

Everything here except the leaves and the frames is an *estimate*: the tilt that centres
the composed loss at x, the Chernoff guess of eps_g, the tilted spread, the lattice width.
Only the cost of a pass depends on them, never its bounds.

The *frames* are certified brackets from the ends of the law alone, which the drivers
intersect with a pass's bracket (or use instead of one): every finite loss is at most the
composed top T (:meth:`Workload.top_bound`; for a law with an unbounded tail, its support's
end with the tail's P-mass a delta event), so H(x) <= 1 - e^{x - T}; and the composed loss is
at least T_lo with P-mass at least M for every choice of top atoms and floors of the leaves
(:meth:`Workload.frame`), so H(x) >= M (1 - e^{x - T_lo}).  They decide exactly what a lattice
cannot resolve: one ulp above or below the top atom, a target far below the top atoms' mass,
and leaves whose losses lie beyond any lattice (:data:`~optcomp._laws.REACH`, 2^40: losses near 1e308).
A finite law enters cut at its tail (:func:`atom_law`): its extreme atoms of negligible P-mass
go to +inf (upper side) or onto its lowest kept atom, so that an atom of P-mass e^{-10^4}
neither sets the top nor widens the lattice.

A pass of several items makes each group of identical steps of a law with a continuous part
when its stream reaches it (:meth:`Source.lazy_power`, :func:`pass_leaf_within`): one law at
h/2, its cells merged in pairs for h, upper atoms from the one and lower from the other,
truncated at the pass's slack -- built once, in the pass's threads, dropped after.

Length (~1000 lines): the sources (a mechanism's leaves by step, its guide, its pass leaves),
the workload's frames and its estimates (cumulants, tilts, Chernoff bounds, the exact-MGF one included) read the same per-source
laws and caches."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import expit, log_expit

from .._cgf import _cumulant_slope, _log_mgf, chernoff_guess, tilt_for
from .._rounding import LIBM_ULPS, UNIT, down, exact_dir, sum_up, up
from .._laws import FORWARD, MAX_ATOMS, REACH, TAIL, AtomLaw, Mechanism, cell_guide, loss_end
from .._memory import current as _memory_budget, register_cache, resident
from .._types import ApproxTooCostly
from . import leaves
from .grouped import POWER_COPIES


@lru_cache(maxsize=64)
def atom_law(mech, direction: str = FORWARD, tail: float = 0.0) -> AtomLaw:
    """The finite loss law of ``mech`` in ``direction`` as the engine composes it: its
    :class:`~optcomp._laws.AtomLaw` with the extreme atoms of negligible P-mass cut
    (``tail``: at most this much P-mass on each side, by ``p_hi``).

    * atoms from the top down while their P-mass sums to <= tail: moved to +inf on the
      upper side (their ``p_hi`` join ``inf_hi``: a loss raised at fixed P-mass only raises
      delta) and dropped on the lower side (a lower bound may drop outcomes);
    * atoms from the bottom up (by upper position loss + perr) likewise: raised onto the
      lowest kept atom on the upper side (its ``p_hi`` grows by theirs), dropped on the
      lower side.

    Either way the bracket is certified; what the cut buys is a compact law (the discrete
    Gaussian of a tiny sigma holds atoms of mass e^{-10^4} at loss 3.5 10^4 beside its one
    atom of mass ~1 at 5000, and its composed top would be the former)."""
    law = mech.law(1.0, direction, tail=max(tail, TAIL_FLOOR))
    if not tail > 0.0 or law.loss.size <= 1:
        return law
    p_hi = law.p_hi
    order = np.argsort(law.loss, kind="stable")[::-1]  # highest first
    cum = np.cumsum(p_hi[order])
    n_top = int(np.searchsorted(cum, tail, side="right"))
    up_pos = law.loss + law.perr
    order_b = np.argsort(up_pos, kind="stable")
    cum_b = np.cumsum(p_hi[order_b])
    n_bot = int(np.searchsorted(cum_b, tail, side="right"))
    if n_top + n_bot >= law.loss.size or (n_top == 0 and n_bot == 0):
        return law
    cut_top = order[:n_top]
    cut_bot = order_b[:n_bot]
    keep = np.ones(law.loss.size, dtype=bool)
    keep[cut_top] = False
    keep[cut_bot] = False
    new_hi = p_hi.copy()
    if n_bot:
        first = order_b[n_bot]  # the lowest kept atom by upper position (never cut from the top: n_top + n_bot < n)
        if not keep[first]:
            return law
        new_hi[first] = min(1.0, sum_up([p_hi[first], *p_hi[cut_bot].tolist()]))
    inf_hi = law.inf_hi
    if n_top:
        inf_hi = min(1.0, sum_up([inf_hi, *p_hi[cut_top].tolist()]))
    return AtomLaw(law.direction, law.loss[keep], law.perr[keep], law.p_lo[keep], new_hi[keep], law.inf_lo,
                   inf_hi, law.neg_q_lo, law.neg_q_hi, law.beyond_lo)


TAIL_FLOOR = 5e-324  # the least truncation tail a law is asked for (the least positive float)


LEAF_CACHE = 2**28  # bytes of mechanism leaves kept between passes and calls (the last ones used)
CELL_BYTES = 512  # memory per cell while a continuous law's leaf is built (Laplace: ~400 measured)
ATOM_BYTES = 1280  # ... per atom of a finite law's (its atoms pass through mpmath: ~1160 measured)
_LEAVES: OrderedDict = OrderedDict()
_LEAVES_BYTES = [0]
_LEAVES_LOCK = threading.Lock()


def _leaf_bytes(leaf: leaves.Leaf) -> int:
    return leaf.nbytes  # (a lazy cells leaf's sides are not built for it: leaves.LazyLeaf)


def _clear_leaves() -> None:
    with _LEAVES_LOCK:
        _LEAVES.clear()
        _LEAVES_BYTES[0] = 0


register_cache(lambda: _LEAVES_BYTES[0], _clear_leaves)


def mechanism_leaf(mech, h: float, direction: str = FORWARD, tail: float = TAIL) -> leaves.Leaf:
    """The leaf of one mechanism at the lattice step h (:func:`_mechanism_leaf`), cached (the
    last ones used, at most ``LEAF_CACHE`` bytes in all and an eighth of the memory budget:
    counted against the budget, dropped before it refuses an allocation)."""
    key = (mech, h, direction, tail)
    with _LEAVES_LOCK:
        leaf = _LEAVES.get(key)
        if leaf is not None:
            _LEAVES.move_to_end(key)
            return leaf
    leaf = _mechanism_leaf(mech, h, direction, tail)
    nbytes = _leaf_bytes(leaf)
    cap = min(LEAF_CACHE, _memory_budget().limit // 8)
    with _LEAVES_LOCK:
        if nbytes <= cap and key not in _LEAVES:
            _LEAVES[key] = leaf
            _LEAVES_BYTES[0] += nbytes
            while _LEAVES_BYTES[0] > cap:
                _LEAVES_BYTES[0] -= _leaf_bytes(_LEAVES.popitem(last=False)[1])
    return leaf


HALF_FIRST = True  # a Source of several copies builds its law at h/2 first (see Source.leaf)
LAW_CACHE = 2  # cell laws kept (the last ones built): a law at h/2 gives the one at h by pairs
_LAWS: OrderedDict = OrderedDict()


def _law_bytes(law) -> int:
    return sum(int(getattr(law, f).nbytes) for f in ("p_lo", "p_hi", "q_lo", "q_hi"))


def _clear_laws() -> None:
    with _LEAVES_LOCK:
        _LAWS.clear()


def _laws_bytes() -> int:
    with _LEAVES_LOCK:  # (a pass's threads add laws while the budget counts them)
        return sum(_law_bytes(v) for v in _LAWS.values())


register_cache(_laws_bytes, _clear_laws)


def _cell_law(mech, h: float, direction: str, tail: float, max_atoms: int):
    """``mech.law(h, ...)`` of a law with a continuous part: from the cache, or -- when the
    law at h/2 is there (a self-composition pass builds its lower leaf at half its step,
    :func:`optcomp._lattice.selfcompose._pass_leaf`) -- its cells merged in pairs
    (:func:`coarsened`), else built (and kept: the last LAW_CACHE laws)."""
    key = (mech, h, direction, tail)
    with _LEAVES_LOCK:
        law = _LAWS.get(key)
        half = _LAWS.get((mech, h / 2.0, direction, tail))
    if law is None and half is not None and half.p_lo.size <= 2 * max_atoms - 2:
        law = coarsened(half)
    if law is None:
        law = mech.law(h, direction, tail=tail, max_atoms=max_atoms)
    with _LEAVES_LOCK:
        _LAWS[key] = law
        _LAWS.move_to_end(key)
        while len(_LAWS) > LAW_CACHE:
            _LAWS.popitem(last=False)
    return law


def coarsened(law):
    """The :class:`~optcomp._laws.CellLaw` at step 2h from one at step h: cell [n 2h, (n + 1) 2h]
    is the union of the cells 2n and 2n + 1 (closed cells meet in single points, which carry
    no mass of the continuous part), its mass brackets the sums of theirs, rounded outward
    (nextafter).  A cell left without its partner at either end makes a cell of its own (its
    partner's half, beyond the law's cells, is counted by the tail bound on that side as
    before: the new cell describes the mass of the old one, whose losses lie in it).  Points
    and the tail bounds are the law's."""
    from .._laws import CellLaw

    n0 = int(law.n0)
    lead = n0 % 2  # a leading half: pad one empty half-cell before it
    n = law.p_lo.size + lead
    trail = n % 2

    def pairs(a, up):
        if lead or trail:  # (else no padding: the same sums)
            a = np.concatenate([np.zeros(lead), a, np.zeros(trail)])
        v = a[0::2] + a[1::2]
        return np.minimum(np.nextafter(v, 2.0), 1.0) if up else np.maximum(np.nextafter(v, -1.0), 0.0)

    return CellLaw(law.direction, 2.0 * law.h, (n0 - lead) // 2, pairs(law.p_lo, False), pairs(law.p_hi, True),
                   pairs(law.q_lo, False), pairs(law.q_hi, True), law.points, law.below_hi, law.above_hi)


def _mechanism_leaf(mech, h: float, direction: str, tail: float) -> leaves.Leaf:
    """The leaf of one mechanism at the lattice step h, from its law (``Mechanism.law``; a
    finite law through :func:`atom_law`, cut at ``tail``).

    A finite loss law with P-mass delta_m at +inf (a :class:`~optcomp.mechanisms.Profile`'s
    min delta_j, a :class:`~optcomp.mechanisms.Pair`'s outcomes with q = 0) is split as
    P = delta_m [+inf] + (1 - delta_m) P': the leaf is the conditional law P' (masses
    p/(1 - delta_m): p_hi/(1 - inf_hi) rounded up, p_lo/(1 - inf_lo) rounded down -- each
    the side that matches the delta_m used with it) and delta_m enters as an independent
    delta event, exactly like a black box's delta_i: delta(x) = 1 - prod(1 - delta)(1 - H'(x))
    (:func:`inf_mass`).  A law with a continuous part is the connect-the-dots leaf of its
    cells (:func:`optcomp._lattice.leaves.cells_leaf`).  Its size is capped by the call's
    memory budget (:mod:`optcomp._memory`): a step needing more cells or atoms than fit is a
    size limit (:class:`ApproxTooCostly` without a bracket: the drivers attach theirs)."""
    budget = _memory_budget()
    per = CELL_BYTES if mech.kind == "cells" else ATOM_BYTES
    room = max(int((budget.limit - budget.held - resident()) // per), 1)
    try:
        if mech.kind == "atoms":
            law = atom_law(mech, direction, tail)
            if law.loss.size > room:
                raise ValueError(f"{law.loss.size} atoms exceed the {room} that fit")
        else:
            law = _cell_law(mech, h, direction, tail, min(MAX_ATOMS, room))
    except ValueError as exc:  # too many cells or atoms at this step: a size limit, not bad input
        what = "" if room >= MAX_ATOMS else f" (the memory budget, max_memory={budget.limit:,} bytes)"
        raise ApproxTooCostly(f"{mech!r} at lattice step h={h:g}: {exc}{what}", None) from None
    if isinstance(law, AtomLaw):
        p_lo, p_hi, inf_lo, inf_hi = law.p_lo, law.p_hi, law.inf_lo, law.inf_hi
        if inf_hi > 0.0:
            if inf_hi < 1.0:
                p_hi = np.minimum(np.nextafter(p_hi / (1.0 - inf_hi) * (1.0 + 2.0**-52), 2.0), 1.0)
            else:  # +inf mass 1 to float precision beside a sliver of finite mass: each at most 1
                p_hi = np.where(p_hi > 0.0, 1.0, 0.0)
            if inf_lo < 1.0:
                p_lo = np.maximum(np.nextafter(p_lo / (1.0 - inf_lo) * (1.0 - 2.0**-52), -1.0), 0.0)
        return leaves.Leaf.from_masses(law.loss, law.perr, p_lo, p_hi)
    pts = law.points
    points = (pts.loss, pts.perr, pts.p_lo, pts.p_hi) if pts.loss.size else None
    return leaves.cells_leaf(law.h, law.n0, law.p_lo, law.p_hi, law.q_lo, law.q_hi, points, law.below_hi,
                             law.above_hi)


def pass_leaf_within(mech, h: float, direction: str, tail: float, law_tail: float, bound: float) -> leaves.Leaf:
    """:func:`pass_leaf` of the law truncated at ``law_tail`` (>= ``tail``: its cells then
    cover less; the leaf charges its own truncation, :func:`optcomp._lattice.leaves.cells_leaf`),
    every atom within ``bound`` of 0 (|loss| + perr): the lower atoms beyond it dropped (a
    garbled cell lands outside its cell only when its mass bracket is loose: a lower pair
    may drop outcomes); when an upper atom lies beyond it, the law at ``tail`` instead (whose
    range ``bound`` was taken from: :meth:`Source.pass_bound`)."""
    leaf = pass_leaf(mech, h, direction, max(tail, law_tail))
    ua = leaf.upper
    if float(np.max(np.abs(ua.loss) + ua.perr)) > bound and law_tail > tail:
        leaf = pass_leaf(mech, h, direction, tail)
        ua = leaf.upper
    if float(np.max(np.abs(ua.loss) + ua.perr)) > bound:
        raise ValueError(f"{mech!r}: a leaf atom beyond its support's bound {bound!r}")
    dn = leaf.lower
    keep = np.abs(dn.loss) + dn.perr <= bound
    if not np.all(keep):
        if not np.any(keep):  # (a lower pair may drop every outcome: one atom of mass 0 keeps the shape)
            keep[0] = True
            dn = leaves.Atoms(dn.loss[keep] * 0.0, dn.perr[keep] * 0.0, np.full(1, -math.inf), np.zeros(1))
        else:
            dn = leaves.Atoms(dn.loss[keep], dn.perr[keep], dn.logp[keep], dn.err[keep])
        leaf = leaves.Leaf(leaf.upper, dn, leaf.log_inf, leaf.lump_index, leaf.log_lump, leaf.cgf)
    return leaf


def pass_leaf(mech, h: float, direction: str = FORWARD, tail: float = TAIL) -> leaves.Leaf:
    """The leaf a pass of several items composes for copies of a law with a continuous part:
    upper atoms from its cells at step h, lower atoms from its cells at h/2
    (:func:`optcomp._lattice.leaves.split_cells_leaf`; what
    :func:`optcomp._lattice.selfcompose._pass_leaf` assembles from two leaves), from one law
    built at h/2 and merged in pairs for h (:func:`coarsened`) -- so each cell law is built
    once a pass and each side once.  Where the law at h/2 does not fit (the memory budget,
    too many cells), the leaf at h (:func:`mechanism_leaf`).  Memory checks and size
    limits as :func:`_mechanism_leaf`."""
    budget = _memory_budget()
    room = max(int((budget.limit - budget.held - resident()) // CELL_BYTES), 1)
    max_atoms = min(MAX_ATOMS, room)
    try:
        half = mech.law(h / 2.0, direction, tail=tail, max_atoms=max_atoms)
    except ValueError:  # too many cells at h/2 (or positions not exact): the leaf at h alone
        return mechanism_leaf(mech, h, direction, tail)
    if half.p_lo.size <= 2 * max_atoms - 2:
        law = coarsened(half)
    else:
        law = _cell_law(mech, h, direction, tail, max_atoms)
    return leaves.split_cells_leaf(law, half)


def beyond_floats(mech, direction: str = FORWARD, tail: float = 0.0) -> bool:
    """Whether part of the +inf mass of :func:`inf_mass` is held by finite losses beyond the
    float range (``AtomLaw.beyond_lo``)."""
    return mech.kind == "atoms" and atom_law(mech, direction, tail).beyond_lo > 0.0


def inf_mass(mech, direction: str = FORWARD, tail: float = 0.0) -> tuple[float, float]:
    """Bracket (inf_lo, inf_hi) of one copy's P-mass at loss +inf as the engine composes it
    (:func:`atom_law`: the atoms cut from the top at ``tail`` included in inf_hi), handled as
    a delta event (see :func:`mechanism_leaf`); (0, 0) for laws with a continuous part
    (their truncation tails stay in the leaf, charged to the upper side)."""
    if mech.kind != "atoms":
        return 0.0, 0.0
    law = atom_law(mech, direction, tail)
    return law.inf_lo, law.inf_hi


def _top_atom(loss: np.ndarray, perr: np.ndarray, p_lo: np.ndarray) -> tuple[float, float]:
    """(position rounded down, P-mass lower bound) of the highest atom with p_lo > 0."""
    keep = p_lo > 0.0
    if not keep.any():
        return -math.inf, 0.0
    lo = loss[keep] - perr[keep]
    i = int(np.argmax(lo))
    exact = Fraction(float(loss[keep][i])) - Fraction(float(perr[keep][i]))
    return exact_dir(exact, False), float(p_lo[keep][i])


GUIDE_CELLS = 512  # cells of the coarse leaf a source's CGF estimate is computed from
GUIDE_ATOMS = 4096  # a finite law with more atoms is binned to this many for the estimates
CGF_BINS = 64  # bins (two atoms each) per source in the many-source estimates (Workload._sources_cgf)
CGF_MANY = 16  # from this many sources on, their narrow guides are binned for the estimates
CGF_WIDTH = 2.0**-7  # ... those whose bins are at most this wide


def _guide_step(lo_loss: float, hi_loss: float) -> float:
    """A step giving ~GUIDE_CELLS cells over a law's range."""
    return 2.0 ** math.floor(math.log2(max((hi_loss - lo_loss) / GUIDE_CELLS, 2.0**-40)))


SUMMARIES = 256  # Source descriptions kept (the last used): a call's rough pass and its refinement share them


@lru_cache(maxsize=SUMMARIES)
def _source_summary(mech, direction: str, tail: float) -> dict:
    """What :meth:`Source._describe` sets (its coarse law and guide: ~10 ms for a subsampled
    Gaussian), by (mechanism, direction, tail): every workload of a call -- and the calls of
    a calibration or of an accountant's queries -- describe the same sources; arrays
    read-only."""
    s = Source.__new__(Source)
    s.mech, s.count, s.direction, s.tail = mech, 1, direction, tail
    s._describe()
    out = {k: v for k, v in s.__dict__.items() if k not in ("mech", "count", "direction", "tail")}
    for v in out.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return out


class Source:
    """``count`` copies of one mechanism in one direction: its leaves by step (cached) and a
    coarse float picture of its loss law (atoms, P-masses) for the estimates."""

    def __init__(self, mech, count: int, direction: str = FORWARD, tail: float = TAIL):
        self.mech, self.count, self.direction, self.tail = mech, int(count), direction, tail
        try:
            summary = _source_summary(mech, direction, tail)
        except TypeError:  # (a mechanism that does not hash: described afresh)
            summary = None
        if summary is None:
            self._describe()
        else:
            self.__dict__.update(summary)

    def _describe(self):
        """The law's frames (top and floor atoms, ends, +inf mass) and coarse guide: functions
        of (mechanism, direction, tail) alone (:func:`_source_summary` keeps them)."""
        mech, direction, tail = self.mech, self.direction, self.tail
        #: (position, mass): P[L >= position] >= mass for one copy (lower-side certified; mass 0
        #: when unknown) -- the top atom, for the brackets near the top (Workload.top_mass)
        self.top_atom = (-math.inf, 0.0)
        #: (position, mass) likewise at the bottom of the law: the frame far below the top
        self.floor_atom = (-math.inf, 0.0)
        #: an upper bound of every loss but the truncation tail above it (P-mass <= tail a copy
        #: when ``inf_mass`` > 0): a finite law's top, a cell law's support end
        self.finite_top = math.inf
        #: whether the leaf is a law conditioned on no +inf event (P-mass a > 0 at +inf): its
        #: E[e^{-L}] = Q(finite)/(1 - a) may exceed 1, so adding it may *lower* H -- such a
        #: source is never left out on the lower side (optcomp._splits.split_negligible_sources)
        self.conditional = False
        if mech.kind == "atoms":
            law = atom_law(mech, direction, tail)
            loss, p = law.loss, law.p_hi
            self.inf_mass = 0.0  # (the leaf is the conditional law: the +inf mass is a delta event)
            self.conditional = law.inf_hi > 0.0
            self.top_loss = law.top()
            self.top_atom = _top_atom(law.loss, law.perr, law.p_lo)
            self.finite_top = self.top_loss
            keep = law.p_lo > 0.0
            if keep.any():
                self.floor_atom = (loss_end(law.loss[keep], law.perr[keep], False),
                                   down(math.fsum(law.p_lo[keep].tolist()), 1))
        else:
            lo_loss, hi_loss = mech.loss_range(direction, tail=tail)
            self.finite_top = hi_loss
            hg = _guide_step(lo_loss, hi_loss)
            try:
                law = mech.law(hg, direction, tail=tail)
                # the generic guide is this very law's picture (the same step): not built twice
                generic = type(mech).guide is Mechanism.guide
                loss, p = cell_guide(law) if generic else mech.guide(direction, tail=tail, cells=GUIDE_CELLS)
            except ValueError:  # cells no lattice places (losses ~1e300): the range's ends as the guide
                self.inf_mass, self.top_loss = 0.0, hi_loss
                self.loss, self.logp = np.array([lo_loss, hi_loss]), np.log(np.array([0.5, 0.5]))
                self.width = max(abs(lo_loss), abs(hi_loss))
                # P[L < lo] <= tail (the contract of a cell law's support): the floor frame
                self.floor_atom = (lo_loss, down(1.0 - tail, 1))
                return
            pts = law.points
            self.inf_mass = float(law.above_hi)
            # a bounded law (no tail above the cells): its largest loss is the upper end of
            # loss_range (the continuous part's end or a point mass's, rounded up)
            self.top_loss = hi_loss if self.inf_mass == 0.0 else math.inf
            self.top_atom = _top_atom(pts.loss, pts.perr, pts.p_lo)
            # every cell lies above its first edge n0 hg, every point above its lower end
            b = min([law.n0 * hg] + (pts.loss - pts.perr).tolist())
            b = min(b, loss_end(pts.loss, pts.perr, False)) if pts.loss.size else b
            self.floor_atom = (b, down(math.fsum(law.p_lo.tolist() + pts.p_lo.tolist()), 1))
        keep = p > 0
        loss, p = loss[keep], p[keep]
        if not loss.size and mech.kind != "atoms":
            # a law with a continuous part always has finite mass: a guide that shows none (an
            # estimate whose masses underflowed) must not drop it from the composition (the
            # drivers leave out sources with an empty picture) -- the range's ends instead
            lo_loss, hi_loss = mech.loss_range(direction, tail=tail)
            loss, p = np.array([lo_loss, hi_loss]), np.array([0.5, 0.5])
        if loss.size > GUIDE_ATOMS:  # a coarse guide: the masses binned by position (estimates only)
            edges = np.linspace(float(np.min(loss)), float(np.max(loss)), GUIDE_ATOMS + 1)
            idx = np.clip(np.searchsorted(edges, loss, side="right") - 1, 0, GUIDE_ATOMS - 1)
            mass = np.bincount(idx, weights=p, minlength=GUIDE_ATOMS)
            mean = np.bincount(idx, weights=p * loss, minlength=GUIDE_ATOMS)
            full = mass > 0
            loss, p = mean[full] / mass[full], mass[full]
        self.loss, self.logp = loss, np.log(p)
        self.width = float(np.max(np.abs(self.loss))) if self.loss.size else 0.0

    def leaf(self, h: float, half_first: bool = True, law_tail: float = 0.0) -> leaves.Leaf:
        """The leaf at step h (cached: :func:`mechanism_leaf`); a law with a continuous part
        truncated at the larger of the source's tail and ``law_tail`` (a pass's slack per
        copy: the leaf charges its truncation, which only shrinks its cells)."""
        tail = max(self.tail, law_tail) if self.mech.kind == "cells" else self.tail
        if half_first and self.count > 1 and self.mech.kind == "cells" and HALF_FIRST:
            # copies go through one FFT, whose lower leaf is at h/2: that law first, then
            # the one at h from it by pairs of cells (:func:`_cell_law`)
            try:
                mechanism_leaf(self.mech, h / 2.0, self.direction, tail)
            except ApproxTooCostly:  # (too many cells at h/2: the pass will use h)
                pass
        return mechanism_leaf(self.mech, h, self.direction, tail)

    def pass_leaf(self, h: float) -> leaves.Leaf:
        """The leaf of a pass of several items at step h: for copies of a law with a
        continuous part, :func:`pass_leaf` (upper at h, lower at h/2), kept for the pass (the
        last step's only: :meth:`Workload.span`, :meth:`Workload.plan` and the pass's
        stream each read it; built once); else :meth:`leaf`."""
        if not (self.count > 1 and self.mech.kind == "cells"):
            return self.leaf(h)
        kept = getattr(self, "_pass", None)
        if kept is not None and kept[0] == h:
            return kept[1]
        self._pass = None  # (the previous step's leaf is not held while this one is built)
        leaf = pass_leaf(self.mech, h, self.direction, self.tail)
        self._pass = (h, leaf)
        return leaf

    def pass_bound(self, h: float) -> float:
        """A bound of |loss| + perr over the atoms of :meth:`lazy_power`'s leaf at step h: the
        support's (``loss_range`` at the source's tail, rounded outward) plus 2 h (its cells
        reach the lattice points around it) plus 1 (lower atoms beyond are dropped)."""
        if not hasattr(self, "_range"):
            self._range = self.mech.loss_range(self.direction, tail=self.tail)
        lo, hi = self._range
        return up(up(max(abs(lo), abs(hi)) + 2.0 * h, 1) + 1.0, 1)

    def lazy_power(self, h: float) -> leaves.Power:
        """The copies of a law with a continuous part as a Power among other items whose leaf
        (:func:`pass_leaf_within`) is made when the pass reaches it -- in the pass's thread,
        its law truncated at the pass's slack -- and dropped after."""
        bound = self.pass_bound(h)
        mech, direction, tail = self.mech, self.direction, self.tail
        return leaves.Power(None, self.count, None,
                            lambda law_tail: pass_leaf_within(mech, h, direction, tail, law_tail, bound), bound)

    def span(self, h: float) -> float:
        return self.leaf(h).span

    def cgf(self, theta: float) -> tuple[float, float, float]:
        """(K, K', K'') of one copy's coarse law at theta (floats)."""
        w = self.logp + theta * self.loss
        mx = float(np.max(w))
        e = np.exp(w - mx)
        z = float(np.sum(e))
        m1 = float(np.sum(e * self.loss)) / z
        m2 = float(np.sum(e * self.loss**2)) / z
        return mx + math.log(z), m1, max(m2 - m1 * m1, 0.0)


class GaussianSource(Source):
    """All the Gaussian mechanisms of a workload as one: k Gaussians compose exactly to one of
    mu^2 = sum Delta_i^2/sigma_i^2 (Dong-Roth-Su; :mod:`optcomp.gdp`), whose certified
    bracket [mu_lo, mu_hi] gives the leaf's upper atoms (from mu_hi: delta grows with mu)
    and its lower atoms (from mu_lo)."""

    def __init__(self, mu_lo: float, mu_hi: float, tail: float = TAIL):
        from ..mechanisms import Gaussian

        super().__init__(Gaussian(1.0, mu_hi), 1, FORWARD, tail)
        # mu_lo = 0 (mu^2 below the float range): the lower side leaves the Gaussian out (a
        # mechanism removed only lowers delta) -- the leaf of the point mass at loss 0
        self._low = Gaussian(1.0, mu_lo) if mu_lo > 0.0 else None
        if self._low != self.mech:
            # the floor mu^2/2 - t mu (P-mass Phi(t), t <= 40 the support's width in sigmas) for
            # every mu in [mu_lo, mu_hi]: increasing in mu from mu = t on, so mu_lo's when mu_lo
            # >= 40; else mu_hi's moved down by mu_hi^2 (mu^2/2 - t mu >= -t mu_hi)
            b, m = self.floor_atom
            if self._low is not None and mu_lo >= 40.0:
                self.floor_atom = Source(self._low, 1, FORWARD, tail).floor_atom
            else:
                self.floor_atom = (down(b - up(mu_hi * mu_hi, 1), 1), m) if math.isfinite(b) else (-math.inf, 0.0)

    def leaf(self, h: float, half_first: bool = True) -> leaves.Leaf:
        up = mechanism_leaf(self.mech, h, self.direction, self.tail)
        if self._low == self.mech:
            return up
        if self._low is None:
            lo = leaves.Leaf.from_masses(np.zeros(1), np.zeros(1), np.ones(1), np.ones(1))
        else:
            lo = mechanism_leaf(self._low, h, self.direction, self.tail)
        return leaves.Leaf(up.upper, lo.lower, up.log_inf)


BEYOND_MU = 2.0**512  # mu at least this: L ~ N(mu^2/2, mu^2) exceeds the float range but for e^-(2^1000)


def gaussian_part(mu_lo: float, mu_hi: float, tail: float = TAIL):
    """(sources, delta event) of the Gaussians composed to mu in [mu_lo, mu_hi]: one
    :class:`GaussianSource`, or -- mu_hi infinite or mu_lo >= 2^512, where the loss exceeds
    every float by more than 2^969 but with probability Phi(-2^510) -- no source and a delta
    event of P-mass [1 - 2^-52 (mu_lo >= 2^512; else 0), 1] (the argument of
    ``mechanisms._base._law_from``)."""
    if mu_lo >= BEYOND_MU:  # (never for mu_bounds' floats, whose mu_lo stays below sqrt(max float))
        return (), (1.0 - 2.0**-52, 1.0)
    if mu_hi == math.inf:  # the upper side is all +inf (delta event 1); the lower side keeps mu_lo's law
        return (GaussianSource(mu_lo, mu_lo, tail),), (0.0, 1.0)
    return (GaussianSource(mu_lo, mu_hi, tail),), None


def _exact_dot(values, counts) -> Fraction:
    """sum_i values_i counts_i exactly (finite floats, integers): every float is an integer
    over a power of two, so the sum is one integer over the largest of them (no gcd per
    term, as a running sum of Fractions takes: thousands of sources)."""
    ratios = [float(v).as_integer_ratio() for v in values]
    if not ratios:
        return Fraction(0)
    den = max(d for _, d in ratios)
    return Fraction(sum(n * int(c) * (den // d) for (n, d), c in zip(ratios, counts)), den)


def _binned_guides(loss: np.ndarray, logp: np.ndarray, sizes: np.ndarray, seg: np.ndarray):
    """Concatenated guides (source ``seg`` of each atom; ``sizes`` atoms each) with every
    guide of more than 2 CGF_BINS atoms over a span of at most CGF_BINS CGF_WIDTH binned by
    position to CGF_BINS bins, each bin's mass as two atoms at its mean -+ its standard
    deviation (mass, mean and variance kept: K, K', K'' move by O(theta^3 width^3) of a bin;
    for the estimates only).  Returns (loss, logp, seg), grouped by source in order."""
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lo, hi = np.minimum.reduceat(loss, first), np.maximum.reduceat(loss, first)
    span = hi - lo
    binned = (sizes > 2 * CGF_BINS) & (span <= CGF_BINS * CGF_WIDTH)
    if not binned.any():
        return loss, logp, seg
    span = np.where(span > 0.0, span, 1.0)
    b = np.clip(((loss - lo[seg]) / span[seg] * CGF_BINS).astype(np.int64), 0, CGF_BINS - 1)
    gid = seg * CGF_BINS + b
    top = float(np.max(logp))
    p = np.exp(logp - top)
    nb = sizes.size * CGF_BINS
    mass = np.bincount(gid, weights=p, minlength=nb)
    mean = np.bincount(gid, weights=p * loss, minlength=nb) / np.where(mass > 0.0, mass, 1.0)
    var = np.bincount(gid, weights=p * (loss - mean[gid]) ** 2, minlength=nb) / np.where(mass > 0.0, mass, 1.0)
    sd = np.sqrt(np.maximum(var, 0.0))
    keep = (mass > 0.0) & np.repeat(binned, CGF_BINS)
    b_loss = np.stack([mean[keep] - sd[keep], mean[keep] + sd[keep]], axis=1).ravel()
    b_logp = np.repeat(np.log(mass[keep]) + (top - math.log(2.0)), 2)
    b_seg = np.repeat(np.repeat(np.arange(sizes.size), CGF_BINS)[keep], 2)
    rest = ~binned[seg]
    seg = np.concatenate([b_seg, seg[rest]])
    order = np.argsort(seg, kind="stable")
    return np.concatenate([b_loss, loss[rest]])[order], np.concatenate([b_logp, logp[rest]])[order], seg[order]


def _newton_bisect(g, lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] narrowed to about 1e-9 relative around the root of an increasing g (g(lo) < 0
    <= g(hi); ``g(th)`` returns (value, slope)): safeguarded Newton -- each evaluation
    narrows the bracket, the next point is the Newton step when it falls inside, else the
    midpoint (an estimate: ~6 evaluations instead of ~35 halvings); a Newton step below
    1e-10 relative ends it at that point."""
    x = 0.5 * (lo + hi)
    for _ in range(200):
        v, d = g(x)
        if v < 0.0:
            lo = x
        else:
            hi = x
        if hi - lo <= 1e-9 * hi:
            break
        nxt = x - v / d if d > 0.0 else math.nan
        if lo <= nxt <= hi and abs(nxt - x) <= 1e-10 * abs(x):
            return nxt, nxt
        x = nxt if lo < nxt < hi else 0.5 * (lo + hi)
    return lo, hi


class Workload:
    """Randomized-response groups (``vals`` ascending, ``cnts``) and mechanism ``sources``."""

    #: some delta events stand for finite losses beyond the float range (set by the drivers)
    beyond = False

    def __init__(self, vals: np.ndarray, cnts: np.ndarray, sources: tuple = ()):
        self.vals, self.cnts, self.sources = vals, cnts, tuple(sources)
        self.cf = cnts.astype(float)
        self.rr_plan = leaves.leaf_plan(vals, cnts)

    def _alone(self) -> bool:
        """Whether the plan is one :class:`~optcomp._lattice.leaves.Power` alone (a pass of
        its own, at a step aligned to its law: :func:`optcomp._lattice.selfcompose.power_pass`)."""
        return not self.rr_plan and len(self.sources) == 1 and self.sources[0].count > 1

    def plan(self, h: float) -> list:
        """The pass's items: randomized-response groups, then each source's leaf (its copies
        a :class:`~optcomp._lattice.leaves.Power`).  A Power alone can rebuild its leaf at the
        step of its own pass; among other items it is a node at the pass's step h, with its
        lower atoms at h/2 (:meth:`Source.pass_leaf`)."""
        out = list(self.rr_plan)
        if self._alone():
            s = self.sources[0]
            if s.mech.kind == "cells":  # made when the pass starts, at its slack (Power.made)
                return [leaves.Power(None, s.count, s.leaf, lambda law_tail: s.leaf(h, True, law_tail),
                                     s.pass_bound(h))]
            return [leaves.Power(s.leaf(h), s.count, s.leaf)]
        for s in self.sources:
            if s.count > POWER_COPIES and s.mech.kind == "cells":
                out.append(s.lazy_power(h))
            else:
                out.append(leaves.Power(s.pass_leaf(h), s.count) if s.count > 1 else s.leaf(h))
        return out

    def leaves_count(self) -> int:
        return len(self.rr_plan) + sum(s.count for s in self.sources)

    def span(self, h: float) -> float:
        """Sum over the leaves of their half-widths (for the 2^49 check of exact positions)."""
        if self._alone():
            s = self.sources[0]
            return s.count * (s.pass_bound(h) if s.mech.kind == "cells" else s.span(h))
        return float(np.sum(self.cnts * self.vals)) + sum(
            s.count * (s.pass_bound(h) if s.count > POWER_COPIES and s.mech.kind == "cells" else s.pass_leaf(h).span)
            for s in self.sources)

    def top_bound(self, finite: bool = False) -> float:
        """An upper bound of the largest composed loss (inf when a leaf has an unbounded law):
        H(x) = 0 for x at or above it.  ``finite``: of every loss but the truncation tails
        above the leaves' supports (:meth:`tail_events` bounds their P-mass)."""
        tops = [s.finite_top if finite else s.top_loss for s in self.sources]
        if any(not t < math.inf for t in tops):
            return math.inf
        total = _exact_dot(self.vals.tolist(), self.cnts.tolist())
        total += _exact_dot([t for t in tops if t > -math.inf], [s.count for t, s in zip(tops, self.sources)
                                                                   if t > -math.inf])
        return exact_dir(total, True)

    def tail_events(self) -> list[tuple[float, int]]:
        """(P-mass, count) of the truncation tails above the supports of the leaves with an
        unbounded law (at most the source's tail a copy): delta events for the upper side of
        the frames that use ``top_bound(finite=True)``."""
        return [(s.tail, s.count) for s in self.sources if s.inf_mass > 0.0 and math.isfinite(s.finite_top)]

    def frame(self, groups_top: bool, sources_top: bool) -> tuple[float, float]:
        """(T_lo, M): the composed loss is >= T_lo (rounded down) with P-mass >= M (rounded
        down), every leaf at its top atom or above its floor -- a randomized response's +eps
        (P-mass e^eps/(1 + e^eps)) or -eps (mass 1); a mechanism's highest atom with p_lo > 0
        (``top_atom``; a law without one offers its floor) or its floor (``floor_atom``: the
        lowest atom with p_lo > 0, or its first cell, with the P-mass it holds above);
        (-inf, 0) when a leaf has none (independent leaves: the masses multiply)."""
        atoms = [s.top_atom if sources_top and s.top_atom[1] > 0.0 else s.floor_atom for s in self.sources]
        if any(a[1] <= 0.0 or not math.isfinite(a[0]) for a in atoms):
            return -math.inf, 0.0
        sign = 1 if groups_top else -1
        total = sign * _exact_dot(self.vals.tolist(), self.cnts.tolist())
        total += _exact_dot([a[0] for a in atoms], [s.count for s in self.sources])
        # log M = sum c log p <= 0: each log within a few ulps, charged 2^-40 relative (generous)
        terms = [float(c) * float(v) for c, v in zip(self.cf.tolist(), log_expit(self.vals).tolist())] \
            if groups_top else []
        terms += [s.count * math.log(a[1]) for a, s in zip(atoms, self.sources)]
        log_m = math.fsum(terms) * (1.0 + 2.0**-40) - 1e-300
        return exact_dir(total, False), (math.exp(log_m) * (1.0 - 2.0**-40) if log_m > -745.0 else 0.0)

    def top_mass(self) -> tuple[float, float]:
        """:meth:`frame` with every leaf at its top atom."""
        return self.frame(True, True)

    def _frames(self):
        """The (position, mass) lower frames: tops and floors of the groups and the mechanisms."""
        frames = (self.frame(g, m) for g in (True, False) for m in (True, False))
        return [f for f in frames if f[1] > 0.0 and math.isfinite(f[0])]

    def near_top_excess(self, x: float) -> tuple[float, float]:
        """Certified (lo, hi) of H(x) from the ends of the law alone -- ``hi`` for the law
        without its truncation tails (their P-mass :meth:`tail_events` joins the upper side's
        delta events): every finite loss is <= T (:meth:`top_bound`), so (1 - e^{x - L})_+ <= (1 - e^{x - T})_+; and L >= T_lo
        with P-mass >= M (:meth:`frame`), so H(x) >= M (1 - e^{x -
        T_lo})_+.  Tight one ulp below the top atom, where a lattice cannot resolve the
        distance, and far below the floor (losses beyond the lattice's reach)."""
        top = self.top_bound(finite=True)
        hi = 1.0
        if math.isfinite(top):
            y = exact_dir(Fraction(x) - Fraction(top), False)
            hi = 0.0 if y >= 0.0 else min(1.0, up(-math.expm1(y), LIBM_ULPS))
        lo = 0.0
        for t_lo, m in self._frames():  # H(x) >= M (1 - e^{x - T_lo}) for each frame
            y = exact_dir(Fraction(x) - Fraction(t_lo), True)
            if y < 0.0:
                lo = max(lo, down(m * down(-math.expm1(y), LIBM_ULPS), 1))
        return min(lo, hi), hi

    def near_top_epsilon(self, t_low: float, t_high: float) -> tuple[float, float]:
        """Certified (lower, upper) of the least x >= 0 with H(x) <= t (t_low <= t <= t_high;
        ``t_low`` the residual target with :meth:`tail_events` among the delta events) from
        the same two facts as :meth:`near_top_excess`: x = T + log(1 - t_low) has
        H(x) <= 1 - e^{x - T} <= t, and every x < T_lo + log(1 - t_high/M) has H(x) >
        t_high.  Tight when t is far below the mass M of the top atoms."""
        top = self.top_bound(finite=True)
        upper = math.inf
        if math.isfinite(top) and t_low < 1.0:
            shift = up(math.log1p(-t_low), LIBM_ULPS) if t_low > 0.0 else 0.0
            upper = max(0.0, exact_dir(Fraction(top) + Fraction(min(shift, 0.0)), True))
        lower = 0.0
        for t_lo, m in self._frames():
            if t_high < m:
                r = up(t_high / m, 1)
                if r < 1.0:
                    shift = down(math.log1p(-r), LIBM_ULPS) if r > 0.0 else 0.0
                    lower = max(lower, exact_dir(Fraction(t_lo) + Fraction(shift), False))
        return min(lower, upper), upper

    def reach(self) -> float:
        """The largest |loss| of a leaf (randomized-response groups and mechanisms): beyond
        :data:`~optcomp._laws.REACH` no lattice places the leaves (positions n h need |n| < 2^49)."""
        vals = float(np.max(self.vals)) if self.vals.size else 0.0
        return max([vals] + [s.width for s in self.sources])

    def top(self) -> float:
        """An estimate of the largest finite composed loss."""
        return float(np.sum(self.cnts * self.vals)) + sum(s.count * s.width for s in self.sources)

    # ---- certified Chernoff bounds (the fallback bracket of the drivers)
    def _mgf_bound(self, theta: float, h: float) -> tuple[float, float]:
        """Certified (K, I) at theta >= 0 for the composition of the leaves' upper pairs at
        step h (which dominates the workload's): log E_P[e^{theta L}; L finite] <= K, and
        P[some leaf at +inf] <= I (union bound).  A source whose mechanism bounds its exact
        law's log-MGF (:meth:`_exact_log_mgf`) enters with count x that bound and no +inf mass
        where that is below count x its leaf's (the composition of its own pair with the
        others' leaves still dominates the workload's)."""
        S = np.array([float(theta)])
        terms = [float(leaves.group_mgf(items, S)[0]) for items in self.rr_plan]
        inf = []
        for s in self.sources:
            leaf = s.leaf(h)
            term = s.count * float(leaves.upper_mgf(leaf, S)[0])
            exact = self._exact_log_mgf(s, theta)
            if exact is not None and s.count * exact < term:
                # the source's exact law (no +inf mass) in place of its leaf: composing its own
                # pair with the others' dominating leaves still dominates the workload
                terms.append(s.count * exact)
                continue
            terms.append(term)
            if leaf.log_inf > -math.inf:  # exp(log a) may fall |log a| u short of a: 1e-9 covers it
                inf.append(up(s.count * (math.exp(leaf.log_inf) * (1.0 + 1e-9)), 1))
        return self._sum_up(terms), (sum_up(inf) if inf else 0.0)

    @staticmethod
    def _sum_up(terms: list[float]) -> float:
        """An upper bound of the sum of the exact values of ``terms``, each count x K rounded
        once (within 2u of itself): fsum (exact) plus those roundings and four more."""
        mag = sum(abs(t) for t in terms)
        return math.fsum(terms) + (len(terms) + 4) * 2.0 * UNIT * mag

    @staticmethod
    def _exact_log_mgf(source, theta: float) -> float | None:
        """A certified upper bound of log E[e^{theta L}] of one copy of ``source`` from its exact
        law, when its mechanism offers one (:meth:`optcomp.mechanisms.Mechanism.log_mgf_bound`:
        a Poisson-subsampled Gaussian), else None (finite or not: an infinite bound is simply
        never the smaller)."""
        v = source.mech.log_mgf_bound(theta, source.direction)
        return None if v is None or math.isnan(v) else float(v)

    def chernoff_delta(self, x: float, theta: float, h: float) -> float:
        """A certified upper bound of H(x) = E_P[(1 - e^{x - L})_+]: H(x) <= P[L > x] <= I +
        e^{K - theta x} (Markov at theta >= 0; :meth:`_mgf_bound`), at most 1."""
        if not (0.0 <= theta < math.inf):
            return 1.0
        K, inf = self._mgf_bound(theta, h)
        tx = theta * x
        # (theta x beyond the float range: e^{K - theta x} is 0, not inf - inf)
        e = K - tx + 2.0 * UNIT * (abs(K) + abs(tx)) + 1e-300 if tx < math.inf else -math.inf
        if e >= 0.0 or inf >= 1.0:
            return 1.0
        tail = math.ulp(0.0) if e < -745.2 else up(math.exp(e), LIBM_ULPS)  # e^-745.2 < 2^-1074
        return min(1.0, up(inf + tail, 1))

    def chernoff_epsilon(self, t: float, theta: float, h: float) -> float:
        """A certified x >= 0 with H(x) <= t (so eps_g <= x), from I + e^{K - theta x} <= t at
        theta > 0; inf when there is none (t <= I, or theta = 0)."""
        if not (0.0 < theta < math.inf) or not t > 0.0:
            return math.inf
        K, inf = self._mgf_bound(theta, h)
        room = down(t - inf, 1)
        if not room > 0.0:
            return math.inf
        num = K - down(math.log(room), LIBM_ULPS)
        num = num + 2.0 * UNIT * abs(num) + 1e-300
        return max(0.0, up(num / theta, 1))

    def exact_chernoff_epsilon(self, t: float, theta: float) -> float:
        """A certified x >= 0 with H(x) <= t (so eps_g <= x) from the exact per-step log-MGF
        bounds of every source (:meth:`_exact_log_mgf`; the randomized-response groups by
        :func:`~optcomp._lattice.leaves.group_mgf`) at tilt ``theta``; inf when a source offers
        none.  No lattice step: the exact laws' own H.

        For y = L - x, (1 - e^{-y})_+ <= c e^{theta y} with c = max_{y >= 0} (1 - e^{-y}) e^{-theta y}
        = theta^theta / (1 + theta)^(1 + theta) (the maximum at e^{-y} = theta / (1 + theta)), so
        H(x) = E_P[(1 - e^{x - L})_+] <= c e^{K - theta x}, K >= log E_P[e^{theta L}] of the
        composition of the exact laws (the sum of count x each step's bound: the steps are
        independent; no +inf mass) -- Markov's P[L > x] <= e^{K - theta x}
        (:meth:`chernoff_epsilon`) without the factor c, ~0.5 / theta lower in x.  t (the
        residual target of the delta events, truncation tails included) is at most delta_g:
        H(x) <= t certifies x.  So x = (K + log c - log t) / theta, every rounding charged:
        log c = -(theta log1p(1/theta) + log1p(theta)), both terms positive and within a few
        ulps, raised by 1e-12 of its magnitude; log t rounded down; the sum's three roundings,
        4 u of its terms."""
        if not (t > 0.0 and 0.0 < theta < math.inf):
            return math.inf
        S = np.array([float(theta)])
        terms = [float(leaves.group_mgf(items, S)[0]) for items in self.rr_plan]
        for s in self.sources:
            v = self._exact_log_mgf(s, theta)
            if v is None or not v < math.inf:
                return math.inf
            terms.append(s.count * v)
        K = self._sum_up(terms)
        v = theta * math.log1p(1.0 / theta) + math.log1p(theta)
        log_c = -v * (1.0 - 1e-12)
        log_t = down(math.log(t), LIBM_ULPS)
        num = K + log_c - log_t
        if not math.isfinite(num):
            return math.inf
        num = num + 4.0 * UNIT * (abs(K) + abs(log_c) + abs(log_t)) + 1e-300
        return max(0.0, up(num / theta, 1))

    # ---- estimates (floats): K, K', K'' of the composed loss under P
    def cgf(self, theta: float) -> tuple[float, float, float]:
        K = _log_mgf(self.vals, theta, self.cf) if self.vals.size else 0.0
        K1 = _cumulant_slope(self.vals, theta, self.cf) if self.vals.size else 0.0
        e2 = self.vals * (1.0 + 2.0 * theta)
        K2 = float(np.sum(self.cf * (2.0 * self.vals) ** 2 * expit(e2) * expit(-e2)))
        if self.sources:
            k, k1, k2 = self._sources_cgf(theta)
            K, K1, K2 = K + k, K1 + k1, K2 + k2
        return K, K1, K2

    def _sources_cgf(self, theta: float) -> tuple[float, float, float]:
        """sum over the sources of count x :meth:`Source.cgf` (the same formulas, every
        source's coarse law at once: the bisections of :meth:`tilt_for` and
        :meth:`chernoff_guess` call this ~100 times, over thousands of sources)."""
        if not hasattr(self, "_cat"):
            loss = np.concatenate([s.loss for s in self.sources])
            sizes = np.array([s.loss.size for s in self.sources], dtype=np.int64)
            seg = np.repeat(np.arange(sizes.size), sizes)
            logp = np.concatenate([s.logp for s in self.sources])
            if sizes.size >= CGF_MANY and np.all(sizes > 0):
                loss, logp, seg = _binned_guides(loss, logp, sizes, seg)
                sizes = np.bincount(seg, minlength=sizes.size)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            counts = np.array([float(s.count) for s in self.sources])
            self._cat = (loss, logp, starts, seg, counts, bool(np.all(sizes > 0)))
        memo = self.__dict__.setdefault("_cgf_memo", {})  # (a pure function of theta: the bisections repeat tilts)
        if theta in memo:
            return memo[theta]
        memo[theta] = out = self._sources_cgf_at(theta)
        return out

    def _sources_cgf_at(self, theta: float) -> tuple[float, float, float]:
        loss, logp, starts, seg, counts, full = self._cat
        if not full:  # (a source without atoms: reduceat needs non-empty segments)
            terms = [s.cgf(theta) for s in self.sources]
            return tuple(float(sum(s.count * t[i] for s, t in zip(self.sources, terms))) for i in range(3))
        w = logp + theta * loss
        mx = np.maximum.reduceat(w, starts)
        e = np.exp(w - mx[seg])
        z = np.add.reduceat(e, starts)
        m1 = np.add.reduceat(e * loss, starts) / z
        m2 = np.add.reduceat(e * loss**2, starts) / z
        k = mx + np.log(z)
        return (float(np.sum(counts * k)), float(np.sum(counts * m1)),
                float(np.sum(counts * np.maximum(m2 - m1 * m1, 0.0))))

    def tilt_for(self, x: float) -> float:
        """theta >= 0 with K'(theta) = x (0 below the mean; large near the top)."""
        if not self.sources:
            return tilt_for(self.vals, x, self.cf)
        if x <= self.cgf(0.0)[1]:
            return 0.0
        lo, hi = 0.0, 1.0
        while self.cgf(hi)[1] < x and hi < 2.0**40:
            lo, hi = hi, 2.0 * hi

        def g(th):
            _, K1, K2 = self.cgf(th)
            return K1 - x, K2

        lo, hi = _newton_bisect(g, lo, hi)
        return 0.5 * (lo + hi)

    def chernoff_guess(self, t: float) -> float:
        """x = K'(theta) where the saddle-point estimate of H reaches t: the Chernoff rate
        K - theta K' less log(theta (1 + theta) sqrt(2 pi K'')) when that is positive (H(x) =
        e^{K - theta x} E_theta[e^{-theta (L - x)} (1 - e^{x - L})_+], the tilted law ~N(x, K''):
        e^{K - theta x} / (theta (1 + theta) sqrt(2 pi K''))).  Without that factor the guess
        overshoots by ~its log over theta (DP-SGD's subsampled Gaussians: 30 %), and the tilt
        aimed there misses the answer."""
        if not self.sources:
            return chernoff_guess(self.vals, t, self.cf)
        logt = math.log(max(t, 1e-300))

        def rate(th):
            K, K1, K2 = self.cgf(th)
            return K - th * K1 - max(0.0, math.log(max(th * (1.0 + th) * math.sqrt(2.0 * math.pi * K2), 1e-300)))

        if rate(0.0) <= logt:
            return self.cgf(0.0)[1]
        lo, hi = 0.0, 1.0
        while rate(hi) > logt and hi < 2.0**40:
            lo, hi = hi, 2.0 * hi

        def g(th):  # logt - rate: increasing (its slope ~ theta K'', plus the factor's 1/theta + 1/(1 + theta))
            K, K1, K2 = self.cgf(th)
            f = th * (1.0 + th) * math.sqrt(2.0 * math.pi * K2)
            value = K - th * K1 - max(0.0, math.log(max(f, 1e-300)))
            return logt - value, th * K2 + (1.0 / th + 1.0 / (1.0 + th) if f > 1.0 else 0.0)

        lo, hi = _newton_bisect(g, lo, hi)
        return min(self.cgf(hi)[1], self.top())

    def points(self, theta: float, h: float) -> int:
        """Lattice points of the widest node: 30 tilted standard deviations plus the widest
        leaf, capped by the full support."""
        sd = math.sqrt(self.cgf(theta)[2])
        widest = max([float(np.max(self.vals)) if self.vals.size else 0.0] + [s.width for s in self.sources])
        return int(min(2.0 * self.top(), 30.0 * sd + 4.0 * widest + 2.0) / h) + 1

    def weight(self, theta: float) -> float:
        """Sum over the leaves of their measured gap coefficients (gap ~ this x h^2): about
        0.12 (1 + theta) for a binomial group leaf or a mechanism leaf and 0.1 (1 + theta)
        for a bundle (the (1 + lambda) factor of the second-order term, lambda ~ theta =
        |d log H/dx|)."""
        rr = sum(0.12 if leaves.alone(items) else 0.1
                 for items in self.rr_plan)
        return (1.0 + theta) * (rr + 0.12 * sum(s.count for s in self.sources) * self._power_gap())

    def _power_gap(self) -> float:
        """For one mechanism's copies alone (a pass by :func:`optcomp._lattice.selfcompose.power_pass`,
        at a step aligned to its law): their gap against generic leaves'
        (:func:`~optcomp._lattice.selfcompose.gap_factor` of the leaf at a probe step); else 1."""
        if self.rr_plan or len(self.sources) != 1 or self.sources[0].count < 2:
            return 1.0
        if not hasattr(self, "_gap"):
            from .selfcompose import gap_factor

            s = self.sources[0]
            probe = 2.0 ** math.floor(math.log2(max(s.width, 2.0**-40) / 256.0))
            try:
                self._gap = gap_factor(s.leaf(probe))
            except (ValueError, ApproxTooCostly):
                self._gap = 1.0
        return self._gap
