r"""The grouped lattice producer (layer L3): leaves (any finite dominating pairs,
:mod:`optcomp._lattice.leaves`) composed by a streamed FFT tree whose every node is cut to
a window certified by Chernoff bounds; passes of many leaves run as two halves in two
threads.  :func:`grouped_pass` states the construction and its proofs.

This module is the windows (:func:`_cut`), the stream (:func:`_stream`, :func:`_halves`,
the thread pool) and the pass; it sees a leaf only through its rows, their error bounds
and its log-MGF bound (:func:`optcomp._lattice.leaves.build`), never through eps_i."""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import time

import numpy as np
from .._memory import current as _memory_budget
from .._rounding import UNIT
from .._types import ApproxTooCostly
from . import leaves
from .passes import LatticePass, extract
from .selfcompose import power_node, power_pass
from .tree import _fft_tree, _row_blocks


CHUNK_POINTS = 2**16  # leaf lattice points per chunk of the streamed FFT tree (a chunk is composed whole, uncut:
#                      10^5 distinct eps at tol 1e-3, ~15% less CPU than at 2^17; 2^15 and 2^14 no better)
CHUNK_POW2 = True  # flush a chunk at a power-of-two number of leaves once it holds >= CHUNK_POINTS / 2
WINDOW_LOG = leaves.WINDOW_LOG  # tilted mass lumped (upper) / dropped (lower) below each node's window
SLACK_REL = 2.0**-40  # untilted mass sent to +inf above the windows, relative to the target, in all


class _Node:
    """A composed part of the streamed tree: rows (3, W) at lattice offset ``off``, 2-norm
    error bounds E (3,), the sums over its leaves of logZ and rho, and ``K``: upper bounds
    on log E_P0[e^{s L}] of its (true, refined, lumped) upper-bound row at the tilts s of
    :func:`_mgf_grid` (what the window bounds of :func:`_cut` rest on)."""

    __slots__ = ("_rows", "off", "E", "lz", "rho", "K", "level", "_budget")

    def __init__(self, rows, off, E, lz, rho, K, level=0):
        self._budget, self._rows = _memory_budget(), None
        self.rows, self.off, self.E, self.lz, self.rho, self.K, self.level = rows, off, E, lz, rho, K, level

    @property
    def rows(self):
        return self._rows

    @rows.setter
    def rows(self, value):
        # a node's rows are held in the call's memory budget while the node lives (their
        # allocation was checked before: an FFT tree level, a window's copy)
        self._budget.hold(value.nbytes)
        if self._rows is not None:
            self._budget.release(self._rows.nbytes)
        self._rows = value

    def __del__(self):
        if self._rows is not None:
            self._budget.release(self._rows.nbytes)
            self._rows = None


def _mgf_grid(theta: float) -> np.ndarray:
    """Tilts s at which every node carries a bound on its log-MGF: negative ones bound the
    lower tail (s <= 0), positive ones the upper tail."""
    pos = [theta * f for f in (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0)] + [2.0**k for k in range(-4, 9)]
    neg = [0.0] + [-(2.0**k) for k in range(-4, 9)] + [-theta * f for f in (0.25, 0.5, 1.0, 2.0)]
    return np.array(sorted(set(v for v in pos + neg if math.isfinite(v))))


def _cut(node: _Node, theta: float, h: float, S: np.ndarray, log_slack: float) -> float:
    """Truncate ``node`` to a window; returns the P0 mass (an upper bound) sent to +inf.

    Both edges come from Chernoff bounds on the node's true upper-bound row (log-MGF bounds
    ``node.K``), never from the computed entries (whose error bounds are absolute):

    * above index hi: P0[L > l] <= E[e^{sL}] e^{-s l} (s > 0) <= e^log_slack -- that mass
      goes to +inf in the upper row (H only grows) and is dropped from the garbled rows (a
      garbling to a symbol dropped at the end: the lower curve only shrinks);
    * below index lo: the upper row's mass is lumped at lo (loss raised at fixed P0: H only
      grows); in the row's tilted units it weighs e^{theta l - lz} P0[L < l] <=
      e^{theta l - lz} E[e^{sL}] e^{-s l} (s <= 0) <= 2^-60 sum(row); the value charged is
      that bound, and since the true lump lies anywhere below it, it also joins the row's
      error bound.  The garbled rows' mass below lo is dropped.

    The node's log-MGF bounds are updated for the lump (mass moved up to l_lo)."""
    r = node.rows
    W = r.shape[1]
    if W < 256:
        return 0.0
    mode = int(np.argmax(r[0]))
    K = node.K
    lz_lo = float(node.lz[0]) - 1e-12 * (1.0 + abs(float(node.lz[0])))
    # upper edge: the least index hi with min_s K(s) - s h (off + hi + 1) <= log_slack
    pos = S > 0.0
    need = (K[pos] - log_slack) / (S[pos] * h)  # off + hi + 1 >= need
    hi = int(math.ceil(float(np.min(need)))) - node.off - 1 + 1
    hi = min(W - 1, max(mode, hi))
    # lower edge: the largest lo with  K(s) - s h idx + theta h idx - lz <= log(2^-60 sum r0)
    target = WINDOW_LOG + math.log(float(np.sum(r[0])) + 1e-300)
    neg = (S <= 0.0) & (S < theta)  # (at theta = 0 the tilts s < 0: the bound needs theta - s > 0)
    bound_idx = (target + lz_lo - K[neg]) / ((theta - S[neg]) * h) if np.any(neg) else None
    if bound_idx is None:
        lo = 0
    else:
        lo = int(math.floor(float(np.max(bound_idx)))) - node.off - 1
        lo = max(0, min(mode, lo))
    if lo == 0 and hi == W - 1:
        return 0.0
    slack = 0.0
    if hi < W - 1:
        l_cut = h * float(node.off + hi + 1)
        slack = math.exp(float(np.min(K[pos] - S[pos] * l_cut))) * (1.0 + 1e-9)
    lump = 0.0
    if lo > 0:
        idx = float(node.off + lo)
        log_lump = float(np.min(K[neg] - S[neg] * h * idx)) + theta * h * idx - lz_lo
        lump = math.exp(log_lump) * (1.0 + 1e-9)
        # the lumped P0 mass (<= e^{log_lump + lz - theta h idx}) now sits at l = h idx
        lz_hi = float(node.lz[0]) + 1e-12 * (1.0 + abs(float(node.lz[0])))
        node.K = np.logaddexp(K, log_lump + lz_hi - theta * h * idx + S * h * idx) + 1e-12 * (np.abs(K) + 1.0)
    node._budget.need(r[:, lo: hi + 1].nbytes, "a window of a lattice node")
    node.rows = r[:, lo: hi + 1].copy()
    node.rows[0, 0] += lump
    node.E = node.E.copy()
    # the true lumped mass lies anywhere in [0, lump]: charged to the row's error bound
    node.E[0] += lump + 4.0 * UNIT * float(node.rows[0, 0])
    node.off += lo
    return slack


POWER_EXTENDED = 64  # a Power of at least this many copies is squared in long double
POWER_COPIES = 16  # a Power of at most this many copies is streamed as that many leaves (no FFT, no squaring)
POWER_FFT = True  # a Power: one FFT (:mod:`optcomp._lattice.selfcompose`) where it applies -- the whole pass
# when it is alone, else a node of the stream (each group of identical steps one transform)


def _chunk(pending, workers: int) -> _Node:
    """One node from leaf rows (rows, base, logZ, rho, E2, K) by the batched FFT tree
    (2-norm error bounds)."""
    rows = [p[0] for p in pending]
    widths = np.array([r.shape[1] for r in rows], dtype=np.int64)
    offs = np.array([p[1] for p in pending], dtype=np.int64)
    E = np.array([p[4] for p in pending]).T
    blocks = _row_blocks([tuple(r) for r in rows], widths, offs, E)
    root, w, off, Er = _fft_tree(blocks, workers, max_norm=False)
    return _Node(np.ascontiguousarray(root), off, np.asarray(Er, dtype=float),
                 np.sum([p[2] for p in pending], axis=0), np.sum([p[3] for p in pending], axis=0),
                 np.sum([p[5] for p in pending], axis=0))


_SQUARING_CAP: contextvars.ContextVar[float] = contextvars.ContextVar("optcomp_squaring_cap", default=math.inf)
_SQUARED: contextvars.ContextVar[bool] = contextvars.ContextVar("optcomp_squared_powers", default=False)


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def squaring_cap(points: float):
    """``with squaring_cap(points):`` a repeated squaring whose predicted last product
    (:func:`_squared_width`) is wider than ``points`` is refused (ApproxTooCostly, no bracket)
    before it runs -- the drivers' coarse pass after a size limit, which aims at a few hundred
    thousand points from the workload's estimate (blind to the bias of coarse leaves, which at
    10^9 steps widens the node tenfold: ~60 products of 3.5M points, 15-30 s, for a bracket
    no better than the Chernoff end).  A choice of work, never of soundness."""
    return _setting(_SQUARING_CAP, float(points))


def squared_powers(on: bool = True):
    """``with squared_powers():`` every Power of more than POWER_COPIES copies is composed by
    repeated squaring (:func:`_power`; long double from POWER_EXTENDED copies), not by one FFT
    (:mod:`optcomp._lattice.selfcompose`).  The one-FFT power's error bound is k times its
    transform's (relative to the largest entry, in float64); repeated squaring's doubles per
    level from x87 extended precision's unit 2^-64: ~2^11 smaller at ~100 copies, where a
    subsampled Gaussian at delta_g 1e-12 needs the tilted tail resolved below the power's bound
    (:func:`optcomp._refine.refine` retries such a pass squared).  A choice of work, never of
    soundness."""
    return _setting(_SQUARED, bool(on))


SQUARING_BYTES = 15  # bytes a point of the last squaring's product takes per byte of its dtype (3 rows, the
# level's output twice (the root), TREE_TEMPORARIES transforms: 3 (2 + 3) = 15; :func:`optcomp._lattice.tree._tree_level`)


def _squared_width(K: np.ndarray, S: np.ndarray, c: int, theta: float, h: float, base: int, logz: float,
                   mass: float, log_slack: float, W: int) -> int:
    """An estimate of the window :func:`_cut` keeps of ``c`` copies of a leaf whose upper row
    has log-MGF bounds K at the tilts S (the node's are c K, before lumps: its edges, from the
    same Chernoff bounds), its first entry at lattice index ``base``, its rows' log-normaliser
    ``logz`` and tilted mass ``mass`` -- a choice of work, never of soundness: at most the
    full support c (W - 1) + 1."""
    full = c * (W - 1) + 1
    pos = S > 0.0
    neg = (S <= 0.0) & (S < theta)
    if not (np.any(pos) and np.any(neg)):
        return full
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        hi = float(np.min((c * K[pos] - log_slack) / (S[pos] * h)))
        target = WINDOW_LOG + c * math.log(mass + 1e-300)
        lo = float(np.max((target + c * logz - c * K[neg]) / ((theta - S[neg]) * h)))
    lo = max(lo, float(c * base))
    hi = min(hi, float(c * base + full))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return full
    return int(min(float(full), max(1.0, hi - lo)))


def _power(item, h: float, theta: float, log_slack: float, S: np.ndarray, workers: int):
    """``item.count`` copies of ``item.leaf`` as one node, by repeated squaring: every
    product is a :func:`_merge` (the FFT error bound of two operands, whatever they are)
    followed by a :func:`_cut` (its slack counted like any node's), so the node and its
    error bounds are those of a tree over the copies.  Returns (node, P0 mass sent to
    +inf, the row log-normalisers it carries: count x the leaf's, with the rounding of that
    product, <= u |count logZ|, added to the node's relative error bound rho)."""
    c = int(item.count)
    rows, base, logZ, rho, E2, K, s_leaf = next(leaves.build([item.leaf], h, theta, log_slack, S))
    # FFT errors are absolute, relative to the largest entry, and double at every squaring:
    # many copies run in x87 long double (unit 2^-64; rounded back to float64 at the end)
    dtype = np.longdouble if c >= POWER_EXTENDED else np.float64
    # the last product is at least as long as the node's final window: refused now if it
    # cannot fit, not after the ~20 s of squaring before it (10^8 subsampled Gaussian steps)
    width = _squared_width(K, S, c, theta, h, int(base), float(logZ[0]), float(np.sum(rows[0])),
                           log_slack, rows.shape[1])
    _memory_budget().need(SQUARING_BYTES * np.dtype(dtype).itemsize * width,
                          f"the last product of {c:,} copies by repeated squaring ({width:,} points at h={h:g})")
    if width > _SQUARING_CAP.get():
        raise ApproxTooCostly(f"the last product of {c:,} copies by repeated squaring would have {width:,} points "
                              f"at h={h:g} (> {_SQUARING_CAP.get():,.0f} for this pass)")
    sq = _chunk([(rows, base, logZ, rho, E2, K)], workers)
    if dtype is not np.float64:
        sq.rows = sq.rows.astype(dtype)
    result = None
    slack = c * s_leaf * (1.0 + 1e-12)
    while True:
        if c & 1:
            if result is None:
                result = sq
            else:
                result = _merge(result, sq, workers, False, dtype)
                slack += _cut(result, theta, h, S, log_slack)
        c >>= 1
        if not c:
            break
        sq = _merge(sq, sq, workers, False, dtype)
        slack += _cut(sq, theta, h, S, log_slack)
    lz = [float(item.count) * float(logZ[b]) for b in range(3)]
    rho_add = [2.0 * UNIT * (abs(z) + 1.0) for z in lz]
    if dtype is not np.float64:
        # back to float64: relative u per entry (charged to rho), 2^-1074 absolute
        result.rows = np.ascontiguousarray(result.rows.astype(float))
        result.E = np.asarray(result.E, dtype=float) * (1.0 + 4.0 * UNIT) + 2.0**-1073
        rho_add = [r + 2.0 * UNIT for r in rho_add]
    result.rho = result.rho + np.array(rho_add)
    return result, slack, lz


def _merge(a: _Node, b: _Node, workers: int, final: bool, dtype=np.float64) -> _Node:
    blocks = [(a.rows[:, None, :], np.array([a.rows.shape[1]]), np.array([a.off]), a.E[:, None]),
              (b.rows[:, None, :], np.array([b.rows.shape[1]]), np.array([b.off]), b.E[:, None])]
    root, w, off, E = _fft_tree(blocks, workers, max_norm=final, dtype=dtype)
    return _Node(np.ascontiguousarray(root), off, np.asarray(E, dtype=float), a.lz + b.lz, a.rho + b.rho,
                 a.K + b.K, max(a.level, b.level) + 1)


PARALLEL_LEAVES = 64  # passes with at least this many leaves run as two halves (two threads)


POWER_WORK = 6500.0  # the fixed cost of one Power node, in lattice points of a leaf (measured, :func:`_work`)


def _work(item, h: float) -> float:
    """A plan item's weight in :func:`_halves` (a cost estimate, never a bound): its span in
    lattice steps; for a Power composed as one node, (span per copy)^1.25 / h + POWER_WORK
    (measured on groups of 100 subsampled Gaussian steps: its window grows faster than its
    law's width, by the law's heavy tail, and its transforms, log-MGF sums and windows cost
    as much as a leaf of ~6500 points; the span is the Power's bound, read before its leaf
    exists, which overstates the narrow laws' more: sigma 0.8 .. 1.79 at h = 2^-12, the
    halves' CPU time 1.2-1.4 : 1 with the exponent 1.5, 0.8 : 1 with 1, ~1 : 1 with 1.25)."""
    sp = leaves.span(item)
    if isinstance(item, leaves.Power) and item.count > POWER_COPIES:
        s = sp / item.count
        return s * math.sqrt(math.sqrt(max(s, 0.0))) / h + POWER_WORK
    return sp / h


THREADED_FIXED = 0.5  # a pass whose Power nodes' fixed cost is at least this share of its work runs in one thread


def _halves(plan, h: float) -> tuple[list, bool]:
    """(parts, threaded): ``plan`` cut in two at half its total work (:func:`_work`: leaf
    spans, Power nodes' costs) when it has at least PARALLEL_LEAVES leaves, else whole --
    the tree's shape depends on the plan and the step only, never on the number of threads
    that run it; ``threaded``: whether two threads pay, i.e. the Power nodes' fixed cost
    (their laws, windows and log-MGF sums: Python and small arrays, under the GIL) is less
    than THREADED_FIXED of the work (100 groups of 100 subsampled Gaussian steps at
    h = 0.0039: 0.80 s in two threads, 0.53 s in one; at h = 0.00024, 2.36 s against 2.66 s)."""
    if len(plan) < PARALLEL_LEAVES:
        return [plan], False
    work = [_work(item, h) for item in plan]
    fixed = POWER_WORK * sum(1 for item in plan if isinstance(item, leaves.Power) and item.count > POWER_COPIES)
    w = np.cumsum(work)
    cut = int(np.searchsorted(w, 0.5 * w[-1]))
    cut = min(max(cut, 1), len(plan) - 1)
    return [plan[:cut], plan[cut:]], fixed < THREADED_FIXED * float(w[-1])


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    """The two threads that run the halves of a pass: one pool per process, made on first
    use (threads made per call would each leave a malloc arena reserved, which adds up
    against an address-space limit), made anew in a forked child."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(2, thread_name_prefix="optcomp-lattice")
        return _POOL


def _forget_pool():
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class _Ticker:
    """Leaves done, counted by the streams (possibly in threads), reported to ``progress``
    at most once a second from the calling thread; ``stop`` asks the streams to end."""

    def __init__(self, progress, h: float, total: int):
        self.progress, self.h, self.total = progress, h, total
        self.done = 0
        self.stop = False
        self.t_last = time.perf_counter()

    def report(self):
        if self.progress is not None and time.perf_counter() - self.t_last > 1.0:
            self.t_last = time.perf_counter()
            self.progress(dict(stage="lattice pass", step=self.h, done=self.done, total=self.total))


def _stream(plan, h: float, theta: float, log_slack: float, S: np.ndarray, workers: int, final: bool,
            ticker: _Ticker, report: bool = False):
    """The streamed tree of :func:`grouped_pass` over the leaves of ``plan``: returns (root
    node, P0 mass sent to +inf, the leaves' logZ per row).  ``final``: the last merge is
    the root of the whole pass (max-norm bound, no cut); otherwise it is cut too."""
    lz_leaves: list[list[float]] = [[], [], []]
    slack = 0.0
    stack: list[_Node] = []
    pending = []
    pending_pts = 0

    def push(node):
        """A cut node onto the binary counter: equal levels merged (a balanced tree)."""
        nonlocal slack
        stack.append(node)
        while len(stack) >= 2 and stack[-1].level == stack[-2].level:
            b_, a_ = stack.pop(), stack.pop()
            m = _merge(a_, b_, workers, False)
            slack += _cut(m, theta, h, S, log_slack)
            stack.append(m)

    def flush():
        nonlocal slack, pending, pending_pts
        if not pending:
            return
        node = _chunk(pending, workers)
        pending, pending_pts = [], 0
        slack += _cut(node, theta, h, S, log_slack)
        push(node)

    powers = [item for item in plan if isinstance(item, leaves.Power) and item.count > POWER_COPIES]
    for item in powers:  # each Power: one node by repeated squaring, then counted like a chunk
        if ticker.stop:
            raise RuntimeError("lattice pass stopped")
        item = item.made(log_slack)  # (a leaf made here: in this stream's thread)
        pn = power_node(item, h, theta, log_slack, S, workers) if POWER_FFT and not _SQUARED.get() else None
        if pn is not None:  # one FFT (:mod:`optcomp._lattice.selfcompose`)
            rows_p, off_p, E_p, lz_p, rho_p, K_p, s_pow = pn
            node = _Node(np.ascontiguousarray(rows_p), off_p, E_p, lz_p, rho_p, K_p)
            lz = [float(z) for z in lz_p]
            del rows_p
        else:  # repeated squaring
            node, s_pow, lz = _power(item, h, theta, log_slack, S, workers)
        slack += s_pow
        for b in range(3):
            lz_leaves[b].append(lz[b])
        node.level = 0
        # cut like a chunk's root (its window comes from Chernoff bounds of one leaf to the k-th
        # power; the node's own log-MGF bounds K are tighter: ~10% fewer points to merge)
        slack += _cut(node, theta, h, S, log_slack)
        push(node)
        ticker.done += 1
        if report:
            ticker.report()
    plain = [item for item in plan if not isinstance(item, leaves.Power) or item.count <= POWER_COPIES]
    # a Power of few copies: its leaf built once, its copies leaves of the chunks (one batched
    # tree instead of a few tiny FFTs and cuts per Power; every copy the same leaf either way)
    copies = [item.count if isinstance(item, leaves.Power) else 1 for item in plain]
    plain = [item.made(log_slack).leaf if isinstance(item, leaves.Power) else item for item in plain]
    built = leaves.build(plain, h, theta, log_slack, S)
    for (rows, base, logZ, rho, E2, atoms_k, s_leaf), c in zip(built, copies):
        if ticker.stop:
            raise RuntimeError("lattice pass stopped")
        ticker.done += 1
        if report:
            ticker.report()
        for _ in range(c):
            slack += s_leaf
            for b in range(3):
                lz_leaves[b].append(float(logZ[b]))
            pending.append((rows, base, logZ, rho, E2, atoms_k))
            pending_pts += rows.shape[1]
            npend = len(pending)
            if pending_pts >= CHUNK_POINTS or (CHUNK_POW2 and npend & (npend - 1) == 0
                                               and 2 * pending_pts >= CHUNK_POINTS):
                flush()
    flush()
    while len(stack) >= 2:
        b_, a_ = stack.pop(), stack.pop()
        last = len(stack) == 0
        m = _merge(a_, b_, workers, final and last)
        if not (final and last):
            slack += _cut(m, theta, h, S, log_slack)
        stack.append(m)
    return stack[0], slack, lz_leaves


def grouped_pass(vals: np.ndarray, cnts: np.ndarray, h: float, theta: float, log_slack: float,
                 workers: int = -1, plan: list | None = None, progress=None) -> LatticePass:
    """Certified upper- and lower-bound loss distributions on the lattice hZ, built from one
    leaf per group (or per bundle of small groups), each truncated to a window, composed by
    a streamed FFT tree whose every node is truncated to a window.

    Leaves.  A leaf is any finite discrete dominating pair (:class:`optcomp._lattice.leaves.Leaf`:
    upper atoms of a pair whose loss dominates the mechanisms', lower atoms of one it
    dominates, both with error bounds) -- for randomized-response groups the *exact* loss
    distribution of the group (a window of its binomial (2j - c) eps, j ~ Bin(c, p), or
    every combination of a bundle), see :mod:`optcomp._lattice.leaves`.  Upper bound
    (refinement, as in :func:`lattice_pass` but per atom of the leaf): atom l is split under
    P1 between lattice points lo <= l <= hi with (1 - pi) e^{lo} + pi e^{hi} = e^{l}, i.e.
    P0 masses P0 (e^{hi - l} - 1)/(e^{hi - lo} - 1) at lo and P0 (1 - e^{lo - l})/(1 - e^{lo - hi})
    at hi; forgetting the split gives back the leaf, so by data processing H_true <=
    H_refined at every x.  The float position of l is only known within perr: hi = lo + 1
    lies above the interval and lo h at or below its top end (an atom that may lie below lo
    is raised to it: a loss raised at fixed P0 only raises H), and each mass, monotone in
    its distance, is evaluated at the far end (an upper bound).  Lower bound (garbling): T(atom) = the lattice point
    nearest its float position (a function of the outcome), P0 and P1 = P0 e^{-l} pushed
    forward (data processing holds for any pair of finite measures, so a lower pair that is
    not a pair of probability distributions is garbled as well).  The gap is second order
    per *leaf*, not per mechanism: a group of c mechanisms costs what one mechanism costs.
    A leaf's P-mass at +inf goes to +inf in the upper row (slack) and is dropped from the
    lower rows.

    Windows.  Every bound below only ever raises the upper curve / lowers the lower one:
    the upper side is a function H(x) = sum_L P0(L)(1 - e^{x-L})_+ of lattice P0 masses,
    nondecreasing in every node's P0 entries and in their losses, so mass may be added,
    moved up or sent to +inf (slack); the lower side may drop any outcomes of any node (a
    garbling to a symbol that is dropped at the end, where its term is >= 0).  Leaf tails
    come from Chernoff bounds (:func:`optcomp._lattice.leaves._group_window`), node tails from the computed rows
    with their error bounds (:func:`_cut`): tilted mass lumped or dropped below the window
    <= 2^-60, untilted P0 mass sent to +inf above it <= e^log_slack per node (the driver
    gives SLACK_REL times the target over the number of nodes).  So the lattice covers a
    few tilted standard deviations around the answer, not [-sum eps, sum eps].

    Stream.  Leaves are built chunk by chunk (a power-of-two number of leaves holding >=
    CHUNK_POINTS / 2 points, or >= CHUNK_POINTS points: a balanced chunk tree has no level
    that only carries an odd leaf), each chunk composed by :func:`_fft_tree` (2-norm bounds)
    and cut; chunk roots are merged pairwise as in a binary counter (equal levels first),
    each merge cut again, the last merge with the max-norm bound.  A plan of at least
    PARALLEL_LEAVES leaves is streamed as two halves of equal work (:func:`_work`), run in
    two threads when ``workers != 1`` and Power nodes' fixed costs do not dominate (NumPy and
    scipy.fft release the GIL; ~1.7x on two cores; :func:`_halves`), their roots merged last: the tree, hence every bit of the result, is the same
    either way.  Memory: per stream one slice of leaves, one chunk plus O(log) nodes.  A plan
    that is one :class:`optcomp._lattice.leaves.Power` alone is composed by one FFT instead
    (:func:`optcomp._lattice.selfcompose.power_pass`); in a longer plan each Power (a group
    of identical steps of a heterogeneous run) is one FFT node of the stream
    (:func:`optcomp._lattice.selfcompose.power_node`); repeated squaring where they do not apply;
    either node is cut (:func:`_cut`) before it joins the counter, as a chunk's root is.
    Steps h = m 2^j, m <= 15 (:func:`_step_below`): every lattice index n here has
    |n| <= (sum of leaf spans) / h + 8 < 2^49 (checked), so h n is exact.  ``vals``, ``cnts``
    only make the default plan (randomized-response groups); a ``plan`` may hold any
    :class:`optcomp._lattice.leaves.Leaf`."""
    plan = plan if plan is not None else leaves.leaf_plan(vals, cnts)
    # every lattice index n below has |n| <= sum of spans / h + 4: h n exact needs m |n| < 2^53
    mant = math.frexp(h)[0]
    if mant * 16.0 != math.floor(mant * 16.0):
        raise ValueError(f"lattice step {h!r} is not m 2^j with an integer m <= 15")
    if math.fsum(leaves.span(item) for item in plan) * (1.0 + 1e-9) / h + 8.0 >= 2.0**49:
        raise ValueError(f"lattice step {h!r} too small for exact positions (sum eps / h >= 2^49)")
    if POWER_FFT and not _SQUARED.get() and len(plan) == 1 and isinstance(plan[0], leaves.Power):
        plan = [plan[0].made(log_slack)]
        lp = power_pass(plan[0], h, theta, log_slack, workers)  # None: repeated squaring instead
        if lp is not None:
            return lp
    S = _mgf_grid(theta)
    parts, threaded = _halves(plan, h)
    ticker = _Ticker(progress, h, len(plan))
    if threaded and workers != 1 and (os.cpu_count() or 1) >= 2:
        # the two halves' streams in two threads (NumPy and scipy.fft release the GIL in
        # their loops), each with one FFT worker; the tree is the same as run in sequence
        from concurrent.futures import FIRST_EXCEPTION, wait

        # (each in a copy of this context: the call's memory budget, :mod:`optcomp._memory`)
        futs = [_pool().submit(contextvars.copy_context().run, _stream, part, h, theta, log_slack, S, 1, False, ticker)
                for part in parts]
        try:
            while True:
                done, not_done = wait(futs, timeout=0.5, return_when=FIRST_EXCEPTION)
                failed = [f.exception() for f in futs if f in done and f.exception() is not None]
                if failed:
                    raise failed[0]
                if not not_done:
                    break
                ticker.report()
            halves = [f.result() for f in futs]
        finally:
            ticker.stop = True  # the other stream ends at its next leaf (on an error or interrupt)
            wait(futs)
    else:
        halves = [_stream(part, h, theta, log_slack, S, workers, len(parts) == 1, ticker, report=True)
                  for part in parts]
    slack = sum(hv[1] for hv in halves)
    lz_leaves = [[z for hv in halves for z in hv[2][b]] for b in range(3)]
    node = halves[0][0] if len(halves) == 1 else _merge(halves[0][0], halves[1][0], workers, True)
    w, off = node.rows.shape[1], node.off
    idx = np.arange(w, dtype=float) + off
    loss = h * idx  # exact: an integer (|idx| < 2^49, checked above) times h = m 2^j, m <= 15
    return extract(node.rows, node.E, lz_leaves, node.rho, theta, h, idx, off, loss, loss, slack)
