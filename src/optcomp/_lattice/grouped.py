r"""The grouped lattice producer (layer L3): one leaf per group of equal eps (a window of
its binomial) or per bundle of small groups composed exactly, each refined (upper) and
garbled (lower) onto the lattice hZ, composed by a streamed FFT tree whose every node is cut
to a window certified by Chernoff bounds; passes of many leaves run as two halves in two
threads.  :func:`grouped_pass` states the construction and its proofs.

One module of ~700 lines on purpose for now: windows, leaves and the stream share the
node type and the per-leaf formulas (the vectorised bundles must repeat the one-leaf
float operations exactly); splitting them is issue 17's next step (the producer seam)."""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
from scipy.special import log_expit

from .._cgf import binomial_chernoff, cgf_terms
from .._rounding import UNIT
from .passes import LatticePass, extract
from .tree import _fft_tree, _row_blocks


BUNDLE_ATOMS = 1024  # small groups / singletons are composed exactly into leaves of <= this many atoms
CHUNK_POINTS = 2**17  # leaf lattice points per chunk of the streamed FFT tree
CHUNK_POW2 = True  # flush a chunk at a power-of-two number of leaves once it holds >= CHUNK_POINTS / 2
WINDOW_LOG = math.log(2.0**-60)  # tilted mass lumped (upper) / dropped (lower) below each node's window
SLACK_REL = 2.0**-40  # untilted mass sent to +inf above the windows, relative to the target, in all


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


def _leaf_atoms(items, theta: float, log_slack: float):
    """The exact atoms of one leaf: (loss, perr, logp, err, lump_index, log_lump, log_up).

    ``items``: one (eps, c) group with c + 1 > BUNDLE_ATOMS (a window of its binomial,
    :func:`_group_window`), or several small ones composed exactly (every combination).
    ``loss`` are float positions within ``perr`` of the true ones, ``logp`` the log P0
    masses within ``err``; the P0 mass below the window (<= e^log_lump) is added to atom
    ``lump_index`` for the upper bound, the mass above it (<= e^log_up) goes to +inf."""
    from .._binomial import binomial_log_pmf

    if len(items) == 1 and items[0][1] + 1 > BUNDLE_ATOMS:
        eps, c = items[0]
        j_lo, j_hi, log_lump, log_up = _group_window(eps, c, theta, log_slack)
        j = np.arange(j_lo, j_hi + 1, dtype=np.int64)
        logp, err = binomial_log_pmf(eps, c, j)
        loss = (2 * j - c).astype(float) * eps
        perr = UNIT * np.abs(loss)
        return loss, perr, logp, err, 0, log_lump, log_up
    loss = np.zeros(1)
    logp = np.zeros(1)
    mag = 0.0
    span = 0.0
    for eps, c in items:
        j = np.arange(c + 1, dtype=np.int64)
        jf = j.astype(float)
        lp, lq = float(log_expit(eps)), float(log_expit(-eps))
        lc = np.array([math.lgamma(c + 1) - math.lgamma(i + 1) - math.lgamma(c - i + 1) for i in range(c + 1)])
        lm = lc + jf * lp + (c - jf) * lq
        mag += 3.0 * math.lgamma(c + 1) + c * (abs(lp) + abs(lq)) + 4.0
        span += c * eps
        loss = (loss[:, None] + ((2 * j - c).astype(float) * eps)[None, :]).ravel()
        logp = (logp[:, None] + lm[None, :]).ravel()
    m = len(items)
    perr = np.full(loss.size, 4.0 * (m + 2) * UNIT * span)
    err = 8.0 * UNIT * (mag + np.abs(logp) + 4.0 * m)
    return loss, perr, logp, err, 0, -math.inf, -math.inf


def _lattice_interval(loss: np.ndarray, perr, h: float):
    """Lattice neighbours lo h <= l - perr <= l <= l + perr <= hi h of every atom (checked on
    the exact products, hi > lo) and the garbling T = rint(l / h) (any function of the atom)."""
    pe = 2.0 * perr + 4.0 * UNIT * np.abs(loss) + 1e-300
    x = loss - pe
    y = loss + pe
    lo = np.floor(x / h)
    lo[lo * h > x] -= 1.0
    hi = np.ceil(y / h)
    hi[hi * h < y] += 1.0
    return lo, np.maximum(hi, lo + 1.0), np.rint(loss / h)


def _leaf_rows(atoms, h: float, theta: float):
    """The three tilted lattice rows of one leaf (see :func:`grouped_pass`): refined P0
    (upper), garbled P0 and garbled P1 (lower).  Returns (rows (3, W), offset, logZ (3,),
    rho (3,), E2 (3,), slack) -- rho a relative and E2 an absolute (2-norm) error bound of
    each row, slack the P0 mass sent to +inf."""
    loss, perr, logp, err, li, log_lump, log_up = atoms
    n = loss.size
    lo, hi, tg = _lattice_interval(loss, perr, h)
    # upper: the lumped mass joins atom li (P0 only: a loss raised at fixed P0 only raises H)
    logp0 = logp.copy()
    err0 = err.copy()
    if log_lump > -math.inf:
        logp0[li] = float(np.logaddexp(logp0[li], log_lump))
        err0[li] = err0[li] + 4.0 * UNIT * (abs(logp0[li]) + 1.0)
    D = (hi - lo) * h  # exact
    d_hi = (hi * h - loss) + perr + 4.0 * UNIT * (np.abs(hi * h) + np.abs(loss))  # >= hi h - l
    d_lo = (loss - lo * h) + perr + 4.0 * UNIT * (np.abs(lo * h) + np.abs(loss))  # >= l - lo h
    d_hi = np.minimum(d_hi, D)
    d_lo = np.minimum(d_lo, D)
    with np.errstate(divide="ignore"):
        # P0 mass at lo: P0 (e^{hi - l} - 1)/(e^D - 1), at hi: P0 (1 - e^{-(l - lo)})/(1 - e^{-D});
        # each increases in its distance, so the widened distances give upper bounds
        l_lo = np.log(np.expm1(d_hi)) - np.log(np.expm1(D))
        l_hi = np.log(-np.expm1(-d_lo)) - np.log(-np.expm1(-D))
    fin_lo, fin_hi = np.isfinite(l_lo), np.isfinite(l_hi)
    e_lo = err0 + 8.0 * UNIT * (np.abs(np.where(fin_lo, l_lo, 0.0)) + np.abs(np.log(np.expm1(D))) + 4.0)
    e_hi = err0 + 8.0 * UNIT * (np.abs(np.where(fin_hi, l_hi, 0.0)) + np.abs(np.log(-np.expm1(-D))) + 4.0)
    th = theta * h
    base = int(min(lo.min(), tg.min()))
    W = int(max(hi.max(), tg.max())) - base + 1
    batches = [
        ([lo, hi], [logp0 + l_lo, logp0 + l_hi], [e_lo, e_hi], th),
        ([tg], [logp], [err], th),
        ([tg], [logp - loss], [err + perr + 4.0 * UNIT * (np.abs(loss) + np.abs(logp))], th + h),
    ]
    rows = np.zeros((3, W))
    logZ = np.zeros(3)
    rho = np.zeros(3)
    E2 = np.zeros(3)
    for b, (poss, lms, errs, tb) in enumerate(batches):
        lws = [lm + tb * p for p, lm in zip(poss, lms)]
        mx = max(float(np.max(lw[np.isfinite(lw)])) for lw in lws if np.any(np.isfinite(lw)))
        for p, lw in zip(poss, lws):
            with np.errstate(under="ignore"):
                rows[b] += np.bincount((p - base).astype(np.int64), weights=np.exp(lw - mx), minlength=W)
        Z = float(np.sum(rows[b]))
        rows[b] /= Z
        logZ[b] = mx + math.log(Z)
        r = 0.0
        for p, lm, lw, er in zip(poss, lms, lws, errs):
            ok = np.isfinite(lw)
            if np.any(ok):  # the row constants added after the max (as in _bundle_leaves)
                r = max(r, float(np.max(er[ok] + 8.0 * UNIT * (np.abs(lm[ok]) + np.abs(lw[ok]))))
                        + 8.0 * UNIT * (abs(mx) + abs(logZ[b]) + 4.0))
        rho[b] = r + (2 * n + 8) * UNIT
        E2[b] = 2.0 * n * 2.0**-1070
    slack = math.exp(log_up) * (1.0 + 1e-9) if log_up > -math.inf else 0.0
    return rows, base, logZ, rho, E2, slack


def _bundle_leaves(eps2d: np.ndarray, counts: tuple, h: float, theta: float, S: np.ndarray):
    """:func:`_leaf_atoms`, :func:`_leaf_rows` and :func:`_leaf_mgf` for n bundles of the same
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
    # ---- _leaf_rows, elementwise (no lump: li, log_lump unused)
    lo, hi, tg = _lattice_interval(loss, perr, h)
    D = (hi - lo) * h
    d_hi = (hi * h - loss) + perr + 4.0 * UNIT * (np.abs(hi * h) + np.abs(loss))
    d_lo = (loss - lo * h) + perr + 4.0 * UNIT * (np.abs(lo * h) + np.abs(loss))
    d_hi = np.minimum(d_hi, D)
    d_lo = np.minimum(d_lo, D)
    # the same values as there, computed once per distinct width k = hi - lo (D = k h exactly)
    kk = (hi - lo).astype(np.int64)
    k0 = int(kk.min())
    Dk = np.arange(k0, int(kk.max()) + 1).astype(float) * h
    kk -= k0
    lD1 = np.log(np.expm1(Dk))[kk]
    lD2 = np.log(-np.expm1(-Dk))[kk]
    with np.errstate(divide="ignore"):
        l_lo = np.log(np.expm1(d_hi)) - lD1
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
            # _leaf_rows' charge: the per-atom terms, the row constants added after the max
            v = er + 8.0 * UNIT * (np.abs(lm) + np.abs(lw))
            v[~np.isfinite(lw)] = 0.0
            r = np.maximum(r, np.max(v, axis=1) + 8.0 * UNIT * (np.abs(mx) + np.abs(logZ[b]) + 4.0))
        rho[b] = r + (2 * n + 8) * UNIT
    # ---- _leaf_mgf (no lump): the far-end masses exceed the exact split by <= 2 (2 perr + rounding)/h
    extra = np.log1p(8.0 * (perr[:, 0] + 4.0 * UNIT * np.max(np.abs(loss), axis=1) + 1e-300) / h) + rho[0]
    K = np.zeros((nl, S.size))
    for g, c in enumerate(counts):
        K += int(c) * cgf_terms(lps[:, g][:, None], lqs[:, g][:, None], eps2d[:, g][:, None], S[None, :])
    K = K + np.abs(S)[None, :] * 2.0 * h + extra[:, None]
    K = K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300
    return rows, widths, base.astype(np.int64), logZ, rho, E2, K


class _Node:
    """A composed part of the streamed tree: rows (3, W) at lattice offset ``off``, 2-norm
    error bounds E (3,), the sums over its leaves of logZ and rho, and ``K``: upper bounds
    on log E_P0[e^{s L}] of its (true, refined, lumped) upper-bound row at the tilts s of
    :func:`_mgf_grid` (what the window bounds of :func:`_cut` rest on)."""

    __slots__ = ("rows", "off", "E", "lz", "rho", "K", "level")

    def __init__(self, rows, off, E, lz, rho, K, level=0):
        self.rows, self.off, self.E, self.lz, self.rho, self.K, self.level = rows, off, E, lz, rho, K, level


def _mgf_grid(theta: float) -> np.ndarray:
    """Tilts s at which every node carries a bound on its log-MGF: negative ones bound the
    lower tail (s <= 0), positive ones the upper tail."""
    pos = [theta * f for f in (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0)] + [2.0**k for k in range(-4, 9)]
    neg = [0.0] + [-(2.0**k) for k in range(-4, 9)] + [-theta * f for f in (0.25, 0.5, 1.0, 2.0)]
    return np.array(sorted(set(v for v in pos + neg if math.isfinite(v))))


def _leaf_mgf(items, S: np.ndarray, h: float, log_lump: float, l_lump: float, extra: float = 0.0) -> np.ndarray:
    """Upper bounds on log E_P0[e^{s L}] of a leaf's refined (upper) row at the tilts S: the
    exact leaf (sum_i c_i log(p_i e^{s eps_i} + q_i e^{-s eps_i})), times e^{2 |s| h} for the
    refinement (every atom's mass goes to lattice points within 2h of it: lo and hi are
    chosen outside the atom's position interval), times e^extra for the masses being
    evaluated at the far end of that interval and their rounding (``extra`` bounds the
    log of the row's total mass over the exact refined one), plus the lumped mass moved up
    to l_lump (for s > 0 it can raise the MGF by at most lump e^{s l_lump})."""
    K = np.zeros(S.size)
    for eps, c in items:
        K += c * cgf_terms(float(log_expit(eps)), float(log_expit(-eps)), eps, S)
    K = K + np.abs(S) * 2.0 * h + extra
    if log_lump > -math.inf:
        K = np.logaddexp(K, log_lump + S * l_lump)
    return K * (1.0 + 1e-12) + 1e-12 * (np.abs(K) + 1.0) + 1e-300


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
    neg = S <= 0.0
    bound_idx = (target + lz_lo - K[neg]) / ((theta - S[neg]) * h) if theta > 0.0 else None
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
    node.rows = r[:, lo: hi + 1].copy()
    node.rows[0, 0] += lump
    node.E = node.E.copy()
    # the true lumped mass lies anywhere in [0, lump]: charged to the row's error bound
    node.E[0] += lump + 4.0 * UNIT * float(node.rows[0, 0])
    node.off += lo
    return slack


def _merge(a: _Node, b: _Node, workers: int, final: bool) -> _Node:
    blocks = [(a.rows[:, None, :], np.array([a.rows.shape[1]]), np.array([a.off]), a.E[:, None]),
              (b.rows[:, None, :], np.array([b.rows.shape[1]]), np.array([b.off]), b.E[:, None])]
    root, w, off, E = _fft_tree(blocks, workers, max_norm=final)
    return _Node(np.ascontiguousarray(root), off, np.asarray(E, dtype=float), a.lz + b.lz, a.rho + b.rho,
                 a.K + b.K, max(a.level, b.level) + 1)


def leaf_plan(vals: np.ndarray, cnts: np.ndarray) -> list:
    """The leaves: each group with c + 1 > BUNDLE_ATOMS alone (a binomial window), the others
    bundled (in eps order) while the product of their (c + 1) stays <= BUNDLE_ATOMS."""
    plan, cur, size = [], [], 1
    for e, c in zip(vals.tolist(), cnts.tolist()):
        c = int(c)
        if c + 1 > BUNDLE_ATOMS:
            plan.append([(e, c)])
            continue
        if size * (c + 1) > BUNDLE_ATOMS:
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


def _leaf_one(items, h: float, theta: float, log_slack: float, S: np.ndarray):
    """One leaf by the per-leaf functions: (rows (3, W), base, logZ, rho, E2, K, slack)."""
    leaf = _leaf_atoms(items, theta, log_slack)
    rows, base, logZ, rho, E2, s_leaf = _leaf_rows(leaf, h, theta)
    # the far-end masses exceed the exact split by <= 2 (2 perr + rounding)/h relative
    extra = math.log1p(8.0 * float(np.max(leaf[1]) + 4.0 * UNIT * np.max(np.abs(leaf[0])) + 1e-300) / h) \
        + float(rho[0])
    K = _leaf_mgf(items, S, h, leaf[5], float(leaf[0][leaf[4]]) if leaf[5] > -math.inf else 0.0, extra)
    return rows, base, logZ, rho, E2, K, s_leaf


def _leaves(plan, h: float, theta: float, log_slack: float, S: np.ndarray):
    """The leaves of ``plan`` in order, as (rows (3, W), base, logZ (3,), rho (3,), E2 (3,),
    K, slack): binomial windows one by one (:func:`_leaf_one`), runs of bundles of the same
    shape (the same counts) in slices by :func:`_bundle_leaves` (``VECTOR_LEAVES``)."""
    i, n = 0, len(plan)
    while i < n:
        items = plan[i]
        if not VECTOR_LEAVES or (len(items) == 1 and items[0][1] + 1 > BUNDLE_ATOMS):
            yield _leaf_one(items, h, theta, log_slack, S)
            i += 1
            continue
        shape = tuple(int(c) for _, c in items)
        natoms = math.prod(c + 1 for c in shape)
        wmax = 2.0 * sum(c * e for e, c in items) / h + 4.0
        j = i + 1
        while j < n and (j - i + 1) * natoms <= LEAF_SLICE_ATOMS:
            nxt = plan[j]
            if tuple(int(c) for _, c in nxt) != shape:
                break
            w = max(wmax, 2.0 * sum(c * e for e, c in nxt) / h + 4.0)
            if (j - i + 1) * w > LEAF_SLICE_POINTS:
                break
            wmax = w
            j += 1
        eps2d = np.array([[e for e, _ in plan[t]] for t in range(i, j)], dtype=float)
        rows, widths, bases, logZ, rho, E2, K = _bundle_leaves(eps2d, shape, h, theta, S)
        for t in range(j - i):
            yield rows[:, t, : int(widths[t])], int(bases[t]), logZ[:, t], rho[:, t], E2[:, t], K[t], 0.0
        i = j


PARALLEL_LEAVES = 64  # passes with at least this many leaves run as two halves (two threads)


def _halves(plan) -> list:
    """``plan`` cut in two at half its total width (sum of c eps) when it has at least
    PARALLEL_LEAVES leaves, else whole: the tree's shape depends on the plan only, never
    on the number of threads that run it."""
    if len(plan) < PARALLEL_LEAVES:
        return [plan]
    w = np.cumsum([sum(c * e for e, c in items) for items in plan])
    cut = int(np.searchsorted(w, 0.5 * w[-1]))
    cut = min(max(cut, 1), len(plan) - 1)
    return [plan[:cut], plan[cut:]]


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

    def flush():
        nonlocal slack, pending, pending_pts
        if not pending:
            return
        rows = [p[0] for p in pending]
        widths = np.array([r.shape[1] for r in rows], dtype=np.int64)
        offs = np.array([p[1] for p in pending], dtype=np.int64)
        E = np.array([p[4] for p in pending]).T
        blocks = _row_blocks([tuple(r) for r in rows], widths, offs, E)
        root, w, off, Er = _fft_tree(blocks, workers, max_norm=False)
        node = _Node(np.ascontiguousarray(root), off, np.asarray(Er, dtype=float),
                     np.sum([p[2] for p in pending], axis=0), np.sum([p[3] for p in pending], axis=0),
                     np.sum([p[5] for p in pending], axis=0))
        pending, pending_pts = [], 0
        slack += _cut(node, theta, h, S, log_slack)
        stack.append(node)
        while len(stack) >= 2 and stack[-1].level == stack[-2].level:
            b_, a_ = stack.pop(), stack.pop()
            m = _merge(a_, b_, workers, False)
            slack += _cut(m, theta, h, S, log_slack)
            stack.append(m)

    for rows, base, logZ, rho, E2, atoms_k, s_leaf in _leaves(plan, h, theta, log_slack, S):
        if ticker.stop:
            raise RuntimeError("lattice pass stopped")
        ticker.done += 1
        if report:
            ticker.report()
        slack += s_leaf
        for b in range(3):
            lz_leaves[b].append(float(logZ[b]))
        pending.append((rows, base, logZ, rho, E2, atoms_k))
        pending_pts += rows.shape[1]
        npend = len(pending)
        if pending_pts >= CHUNK_POINTS or (CHUNK_POW2 and npend & (npend - 1) == 0 and 2 * pending_pts >= CHUNK_POINTS):
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

    Leaves.  A leaf is the *exact* loss distribution of its mechanisms (a window of the
    group's binomial (2j - c) eps, j ~ Bin(c, p), or every combination of a bundle), as
    atoms l with P0 masses.  Upper bound (refinement, as in :func:`lattice_pass` but per
    atom of the leaf): atom l is split under P1 between lattice points lo <= l <= hi with
    (1 - pi) e^{lo} + pi e^{hi} = e^{l}, i.e. P0 masses P0 (e^{hi - l} - 1)/(e^{hi - lo} - 1)
    at lo and P0 (1 - e^{lo - l})/(1 - e^{lo - hi}) at hi; forgetting the split gives back
    the leaf, so by data processing H_true <= H_refined at every x.  The float position of
    l is only known within perr: lo and hi are chosen outside the interval, and each mass,
    monotone in its distance, is evaluated at the far end (an upper bound).  Lower bound
    (garbling): T(atom) = the lattice point nearest its float position (a function of the
    outcome), P0 and P1 = P0 e^{-l} pushed forward.  The gap is second order per *leaf*,
    not per mechanism: a group of c mechanisms costs what one mechanism costs.  Runs of
    bundles of the same shape (the same counts, e.g. bundles of 10 singletons) are built
    together, in slices, by :func:`_bundle_leaves`: the formulas of :func:`_leaf_atoms`,
    :func:`_leaf_rows` and :func:`_leaf_mgf` evaluated elementwise, so the same atoms,
    lattice points, masses and charges as one leaf at a time (``VECTOR_LEAVES = False``).

    Windows.  Every bound below only ever raises the upper curve / lowers the lower one:
    the upper side is a function H(x) = sum_L P0(L)(1 - e^{x-L})_+ of lattice P0 masses,
    nondecreasing in every node's P0 entries and in their losses, so mass may be added,
    moved up or sent to +inf (slack); the lower side may drop any outcomes of any node (a
    garbling to a symbol that is dropped at the end, where its term is >= 0).  Leaf tails
    come from Chernoff bounds (:func:`_group_window`), node tails from the computed rows
    with their error bounds (:func:`_cut`): tilted mass lumped or dropped below the window
    <= 2^-60, untilted P0 mass sent to +inf above it <= e^log_slack per node (the driver
    gives SLACK_REL times the target over the number of nodes).  So the lattice covers a
    few tilted standard deviations around the answer, not [-sum eps, sum eps].

    Stream.  Leaves are built chunk by chunk (a power-of-two number of leaves holding >=
    CHUNK_POINTS / 2 points, or >= CHUNK_POINTS points: a balanced chunk tree has no level
    that only carries an odd leaf), each chunk composed by :func:`_fft_tree` (2-norm bounds)
    and cut; chunk roots are merged pairwise as in a binary counter (equal levels first),
    each merge cut again, the last merge with the max-norm bound.  A plan of at least
    PARALLEL_LEAVES leaves is streamed as two halves of equal width (sum of c eps), run in
    two threads when ``workers != 1`` (NumPy and scipy.fft release the GIL; ~1.7x on two
    cores), their roots merged last: the tree, hence every bit of the result, is the same
    either way.  Memory: per stream one slice of leaves, one chunk plus O(log) nodes.
    Steps h = m 2^j, m <= 15 (:func:`_step_below`): every lattice index n here has
    |n| <= sum c eps / h + 8 < 2^49 (checked), so h n is exact."""
    plan = plan if plan is not None else leaf_plan(vals, cnts)
    # every lattice index n below has |n| <= sum c eps / h + 4: h n exact needs m |n| < 2^53
    mant = math.frexp(h)[0]
    if mant * 16.0 != math.floor(mant * 16.0):
        raise ValueError(f"lattice step {h!r} is not m 2^j with an integer m <= 15")
    if float(np.sum(cnts * vals)) / h + 8.0 >= 2.0**49:
        raise ValueError(f"lattice step {h!r} too small for exact positions (sum eps / h >= 2^49)")
    th = theta * h
    S = _mgf_grid(theta)
    parts = _halves(plan)
    ticker = _Ticker(progress, h, len(plan))
    if len(parts) == 2 and workers != 1 and (os.cpu_count() or 1) >= 2:
        # the two halves' streams in two threads (NumPy and scipy.fft release the GIL in
        # their loops), each with one FFT worker; the tree is the same as run in sequence
        from concurrent.futures import FIRST_EXCEPTION, wait

        futs = [_pool().submit(_stream, part, h, theta, log_slack, S, 1, False, ticker) for part in parts]
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
