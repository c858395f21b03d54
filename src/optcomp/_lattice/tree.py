r"""The certified batched FFT tree (layer L3): tilted leaf rows, blocks of similar width, a
balanced tree of real FFT convolutions with an explicit error bound per convolution (its
propagation through the tree in :func:`_fft_tree`; the per-convolution charge, proved for
scipy.fft's mixed-radix real transforms, in :func:`_fft_error`), rows gathered into padded
batches."""

from __future__ import annotations

import math
import threading

import numpy as np

from .._memory import current as _memory_budget, register_cache, trim_heap
from .._rounding import UNIT


def _fft():
    """scipy.fft, imported on first use (it costs ~0.3 s at start-up)."""
    import scipy.fft

    return scipy.fft


PLAN_CACHE = 16  # plans scipy.fft (pocketfft) keeps per type: the 16 lengths transformed last
PLAN_FLUSH = 2**22  # bytes: a tree whose plans reach this evicts them when it ends


class _Plans:
    """What scipy.fft's plan cache holds on our account: pocketfft keeps the real-transform
    plans of the last PLAN_CACHE lengths per floating type, each ~``itemsize x N`` bytes of
    twiddle factors (measured: 8 N in float64, 16 N in long double) -- beside a tree of
    length-10^7 transforms, a few hundred MB.  Mirrored here (least recently used first) so
    that the memory budget counts it (:func:`optcomp._memory.register_cache`) and can evict
    it: transforming PLAN_CACHE tiny distinct lengths replaces every cached plan."""

    def __init__(self):
        self.lru: dict = {}  # dtype name -> {N: bytes}, oldest first
        self.lock = threading.Lock()

    def bytes(self) -> int:
        return sum(sum(d.values()) for d in self.lru.values())

    def new_bytes(self, dtype, lengths) -> int:
        d = self.lru.get(np.dtype(dtype).name, {})
        return sum(np.dtype(dtype).itemsize * N for N in set(lengths) if N not in d)

    def used(self, dtype, lengths) -> None:
        with self.lock:
            d = self.lru.setdefault(np.dtype(dtype).name, {})
            for N in lengths:
                d.pop(N, None)
                d[N] = np.dtype(dtype).itemsize * N
            while len(d) > PLAN_CACHE:
                del d[next(iter(d))]

    def flush(self) -> None:
        with self.lock:
            for name in list(self.lru):
                for n in range(2, 2 + PLAN_CACHE):
                    _fft().rfft(np.ones(n, dtype=np.dtype(name)))
            self.lru.clear()
        trim_heap()


_PLANS = _Plans()
register_cache(_PLANS.bytes, _PLANS.flush)


def _fft_error(N: int, unit: float = UNIT) -> float:
    r"""F(N) = (40 log2 N + 10) u: the error factor of one FFT convolution of length N.

    For rows a, b (exact as stored, zero-padded to N) the computed
    c^ = irfft(rfft(a) * rfft(b), N) of scipy.fft satisfies

        ||c^ - a * b||_2 <= F(N) (|a|_2 |b|_1 + |a|_1 |b|_2)            (also in the max norm),

    u = ``unit`` the unit roundoff of the arithmetic: 2^-53 (float64) or 2^-64 (numpy.longdouble
    in x87 extended precision; where longdouble is only a double the charge uses that
    type's own unit roundoff instead).  Proof, for the 5-smooth N <= 2^40 that
    ``next_fast_len(real=True)`` returns, under the assumptions named in
    :mod:`optcomp._rounding` (IEEE arithmetic; sin, cos within L = ``LIBM_ULPS`` = 4 ulps;
    scipy.fft runs pocketfft's real passes -- checked bit for bit by ``tests/test_tree.py``).
    Notation: gamma_n = n u / (1 - n u); first order in u unless stated (the second-order
    terms are bounded in step 5).

    1. The algorithm.  pocketfft factors N into passes of radix 4, at most one 2, then 3s
       and 5s (FFTPACK's radf2-5 forward, radb2-5 backward).  Between passes the array holds
       in FFTPACK's half-complex packing the intermediate vector of the mixed-radix
       Cooley-Tukey algorithm: in blocks of ``ido`` columns, column 0 (and column ido - 1
       when ido is even) is real, the others are (re, im) pairs whose conjugates are
       implied.  Let ||z||_V be the 2-norm of the full complex vector, i.e. the weighted
       2-norm of the stored array with weight 1 on a real entry and 2 on each member of a
       pair.  Each exact pass is then sqrt(r) times an isometry in ||.||_V (a product by
       unit twiddles and r-point DFTs; ``tests/test_tree.py`` checks that every singular
       value of each pass is sqrt(r)).  rfft's first pass reads the real row (||a||_V =
       |a|_2), its last writes the packed spectrum (||.||_V = the 2-norm of the full DFT,
       sqrt(N) |a|_2); irfft runs the backward passes the other way.

    2. Stages (the argument of Higham, *Accuracy and Stability of Numerical Algorithms*,
       2nd ed., Thm 24.2, there for radix 2): if every computed pass satisfies
       ||z^_k - A_k z^_(k-1)||_V <= eta_k ||A_k|| ||z^_(k-1)||_V, the transform errs by
       ||z^ - F x||_V <= (prod_k (1 + eta_k) - 1) sqrt(N) |x|_2 =: eps sqrt(N) |x|_2.

    3. One pass of radix r: twiddle products t = conj(w^) z (forward: before the
       butterflies; backward: w^ d after them), then the butterflies.
       * Twiddles.  pocketfft builds w = e^(-2 pi i j / N) as the product of two table
         entries (cos, sin of an angle theta <= pi/4 computed as fl(x fl(pi / 4N)): <= 3u
         relative), so cos and sin are within (pi/4)^2 3u + L u = 5.86u and (pi/4) 3u + L u =
         6.36u (results in [0, 1): one ulp <= u), an entry within nu = 8.64u, their complex
         product (rounded as in Higham Lemma 3.5) within mu = 2 nu + sqrt(2) gamma_2 <= 20.2u of
         w; a computed product conj(w^) z is then within tau = mu + sqrt(2) gamma_2 (1 + mu)
         <= 23.1u of conj(w) z, entry by entry, so by <= tau ||z||_V in the norm.
       * Butterflies.  Every output is a sum over paths from the (twiddled) inputs through
         +, - and products by the pass constants (sqrt(3)/2, cos(2 pi/5), ..., each rounded
         once, or exact: -1/2, 2); each rounding on a path multiplies it by (1 + delta),
         |delta| <= u, so an output errs by <= sum_d gamma_d P_d |t|, P_d the summed
         |coefficients| of its paths with d roundings (fused multiply-adds only remove
         roundings).  Hence the pass's butterfly error is <= beta_r u sqrt(r) ||t||_V with
         beta_r = ||W (sum_d d P_d) W^-1||_2 / sqrt(r) (W the square roots of the weights of
         step 1), computed from radf2-5 and radb2-5 for every column type:

             r          2       3       4       5
             beta_r   1.415   6.206   6.001  12.906

       So eta_r <= tau + (1 + tau) beta_r u; tau = 0 in the one pass per transform with
       ido = 1 (the first forward, the last backward pass: no twiddles).

    4. One transform.  (beta_r + 23.1) / log2 r is 18.49 (r = 3), 14.56 (4), 15.51 (5) and
       24.52 (2, at most once), so sum_k eta_k <= (18.49 log2 N + 6.03 - 23.1) u =
       (18.49 log2 N - 17.07) u in rfft and in irfft alike.

    5. The convolution.  With A = F a, B = F b, Â, B^ computed (||Â - A||_2 <= eps sqrt(N) |a|_2),
       |A_k| <= |a|_1, |B_k| <= |b|_1, and the products C^_k = fl(Â_k B^_k) (numpy, within
       sqrt(2) gamma_2 |Â_k| |B^_k|), with M = |a|_2 |b|_1 + |a|_1 |b|_2:

           ||C^ - A B||_2 <= sqrt(N) [(eps + sqrt(2) gamma_2 (1 + eps)) (1 + eps sqrt(N)) |a|_2 |b|_1
                                      + eps |a|_1 |b|_2] <= sqrt(N) rho M,

       and irfft (backward passes, their eps; then the product by fl(1/N), formed in long
       double: 2.001u) gives, as ||A B||_2 <= sqrt(N) |a|_2 |b|_1 <= sqrt(N) M,

           ||c^ - a * b||_2 <= [rho + (eps + 2.001u (1 + eps)) (1 + rho)] M
                            <= (2 (18.49 log2 N - 17.07) + 2 sqrt(2) + 2.001) (1 + 10^-7) u M
                            <= (36.98 log2 N - 29.3) (1 + 10^-7) u M <= F(N) M,

       the factor (1 + 10^-7) covering every second-order term for N <= 2^40 (eps sqrt(N) <=
       10^-7).  The exact expression, summed pass by pass over all 3460 5-smooth N <= 2^40,
       is at most 0.90 F(N) (long double; 0.84 in double) -- ``tests/test_tree.py`` recomputes
       it from the constants above and LIBM_ULPS, and checks convolutions of random rows
       against exact integer ones.  (The charge is the one used before this proof, which
       then rested on such comparisons alone: it needed no change.)

    Underflow: a sum whose result is subnormal is exact, and an underflowing product errs
    by at most 2^-1075 (2^-16446 in long double) -- summed over every product of both
    transforms, far below u M for the rows convolved here (normalised masses and their
    convolutions, |a|_1 >= 2^-60)."""
    if unit < UNIT:  # an extended type: never below its unit roundoff on this platform (2^-p = epsneg)
        unit = max(unit, float(np.finfo(np.longdouble).epsneg))
    return (40.0 * math.log2(max(N, 2)) + 10.0) * unit


def _transform_error(N: int, unit: float = UNIT) -> float:
    r"""eps(N) = 20 log2(N) u: the error factor of one real transform of length N.

    The computed rfft of a real row x satisfies ||X^ - F x||_V <= eps(N) sqrt(N) |x|_2, and
    the backward passes of irfft, applied to a packed spectrum Y, give z^ with
    ||z^ - N F^-1 Y||_2 <= eps(N) sqrt(N) ||Y||_V (before the product by fl(1/N));
    ||.||_V is the 2-norm of the full complex vector (conjugates included).  Proof: steps
    1-4 of :func:`_fft_error` -- the same passes, the same norms -- give
    eps = prod_k (1 + eta_k) - 1 <= exp(sum_k eta_k) - 1 with sum_k eta_k <=
    (18.49 log2 N - 17.07) u, which is below 20 log2 N u for every 5-smooth 2 <= N <= 2^40
    (and u <= 2^-53: exp(s) - 1 <= s (1 + s), s <= 10^-11); ``tests/test_tree.py``
    recomputes the product pass by pass from the constants of the proof."""
    if unit < UNIT:  # an extended type: never below its unit roundoff on this platform (2^-p = epsneg)
        unit = max(unit, float(np.finfo(np.longdouble).epsneg))
    return 20.0 * math.log2(max(N, 2)) * unit


def _tilted_leaves(positions, logmasses, magnitudes, theta_h):
    """Leaf masses m_a e^{theta h pos_a}, normalised per leaf.

    ``magnitudes`` bound the sum of the absolute values of the terms each log-mass was
    computed from (its absolute rounding error is a few ulps of that).  Returns
    (weights, logZ, rho): ``weights[j][i]`` the normalised mass of atom j of leaf i,
    ``logZ[i]`` the (float) log-normaliser of leaf i -- an exact constant from here on --
    and ``rho[i]`` a bound on the relative error of leaf i's weights with respect to the
    exact m_a e^{theta h pos_a - logZ[i]}."""
    logw = [lm + theta_h * pos for pos, lm in zip(positions, logmasses)]
    mx = np.max(np.vstack(logw), axis=0)
    with np.errstate(under="ignore"):
        ws = [np.exp(lw - mx) for lw in logw]
    Z = np.zeros_like(mx)
    for w in ws:
        Z += w
    ws = [w / Z for w in ws]
    logZ = mx + np.log(Z)
    mag = np.max(np.vstack([mg + np.abs(theta_h * pos) for pos, mg in zip(positions, magnitudes)]), axis=0)
    rho = 8.0 * UNIT * (mag + np.abs(mx) + 8.0)
    return ws, logZ, rho


def _leaf_blocks(width, offset, batches, budget: int = 2**22):
    """Scatter the leaves into blocks of similar width (sorted by width; within a block the
    widest is at most 1.5 x the narrowest + 64): a list of (X (B, n, W), widths, offsets, E)
    for :func:`_fft_tree`.  ``batches[b]`` is a list of (positions, weights) per atom."""
    blocks = []
    nb = len(batches)
    parts = list(_width_blocks(width, budget))
    _memory_budget().need(nb * sum(sel.size * W for sel, W in parts) * 8.0, "the leaf rows of an FFT tree")
    for sel, W in parts:
        X = np.zeros((nb, sel.size, W))
        rows = np.arange(sel.size)
        for b, atoms in enumerate(batches):
            for pos, wt in atoms:
                X[b, rows, pos[sel]] += wt[sel]
        blocks.append((X, width[sel].astype(np.int64), offset[sel].astype(np.int64), np.zeros((nb, sel.size))))
    return blocks


def _fft_tree(blocks, workers: int, budget: int = 2**22, dtype=np.float64, max_norm: bool = True):
    """Linear convolution of all rows of the ``blocks`` (each (X (B, n, W), widths, offsets,
    E)) along the last axis, batched over the first axis (B), by a balanced tree of FFTs
    (scipy.fft, 5-smooth lengths).

    Each level pairs the narrowest rows with the widest (so the sums have even widths), and
    convolves the pairs in chunks of similar width (at most ``budget`` padded entries per
    batch row and chunk), so one very wide row (a large eps_i) never forces every row to
    its width.  ``dtype=np.longdouble`` runs the tree in x87 extended precision (unit
    roundoff 2^-64, about 4x slower; the commensurable path uses it where the FFT error
    charges would otherwise dominate a 1e-9 bracket).  ``max_norm=False``: the root's
    bound stays in the 2-norm (for a root that is convolved further).

    ``widths``/``offsets`` (length n) give each row's true support length and lattice
    offset; ``E`` (B, n) bounds each row's error in the 2-norm.  Returns (root (B, width),
    width, offset, E_root (B,)) with ``E_root`` a bound on the root's error in the *max*
    norm.  For one convolution c = a * b of computed rows a^, b^ with true a, b:

        c^ - c = (a^ - a) * b^ + a * (b^ - b) + (fl_FFT(a^ * b^) - a^ * b^),

    so (Young's inequality, ||x * y||_2 <= ||x||_2 ||y||_1; F(N) = :func:`_fft_error`, the
    2-norm error factor of one scipy.fft convolution of length N, proved there)
        E_c = E_a |b^|_1 + (|a^|_1 + sqrt(w_a) E_a) E_b + F(N) (|a^|_2 |b^|_1 + |a^|_1 |b^|_2),
    and at the root, ||x * y||_inf <= ||x||_2 ||y||_2 gives the far smaller max-norm bound
        E_inf = E_a |b^|_2 + (|a^|_2 + E_a) E_b + F(N) (...)      (a 2-norm bound is a max-norm bound)
    (the error of the whole left half is smoothed by the spread-out right half).  Clipping
    negative outputs to 0 and zeroing beyond the true width only reduce the error.

    Memory: each level is checked against the call's budget before it is allocated
    (:func:`_tree_level`; :class:`optcomp.ApproxTooCostly` without a bracket when it does not
    fit: the drivers attach theirs)."""
    nb = blocks[0][0].shape[0]
    mem = _memory_budget()
    # the input rows the tree was handed as its own copies (not views of held nodes) live
    # as long as the caller's list of blocks: counted for the whole tree
    held = [sum(int(blk[0].nbytes) for blk in blocks if blk[0].base is None)]
    mem.hold(held[0])
    largest = [0]  # the largest plan used (evicted at the end when it is large)
    try:
        while True:
            sizes = [blk[1].size for blk in blocks]
            r = sum(sizes)
            if r == 1:
                Xb, wb_, ob_, Eb_ = next(blk for blk in blocks if blk[1].size == 1)
                w = int(wb_[0])
                return Xb[:, 0, :w], w, int(ob_[0]), Eb_[:, 0]
            blocks = _tree_level(blocks, sizes, r, nb, workers, budget, dtype, max_norm, mem, held, largest)
            if len(held) > 2:  # the level before the last one is gone
                mem.release(held.pop(-2))
    finally:
        for v in held:
            mem.release(v)
        if largest[0] >= PLAN_FLUSH:
            _PLANS.flush()


TREE_TEMPORARIES = 3  # rfft/irfft arrays of a chunk alive at once beside its output (A or Bm, FA, FB)


def _tree_level(blocks, sizes, r, nb, workers, budget, dtype, max_norm, mem, held, largest):
    """One level of :func:`_fft_tree`: the rows paired (narrowest with widest) and convolved
    in chunks of similar width; its memory checked against the call's budget
    (:mod:`optcomp._memory`) before anything of it is allocated, and held (appended to
    ``held``) while it lives."""
    bid = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
    idx = np.concatenate([np.arange(n) for n in sizes])
    w = np.concatenate([blk[1] for blk in blocks])
    off = np.concatenate([blk[2] for blk in blocks])
    Ecat = np.concatenate([blk[3] for blk in blocks], axis=1)
    order = np.argsort(w, kind="stable")
    carried = order[0] if r % 2 else None
    if carried is not None:
        order = order[1:]
    half = order.size // 2
    ia, ib = order[:half], order[half:][::-1]  # narrowest with widest: even sums
    wc_all = w[ia] + w[ib] - 1
    porder = np.argsort(wc_all, kind="stable")
    ia, ib, wc_all = ia[porder], ib[porder], wc_all[porder]
    npairs = ia.size
    is_root = npairs == 1 and r == 2 and max_norm
    chunks = []
    start = 0
    while start < npairs:
        end = start + 1
        while end < npairs:
            n_est = _fft().next_fast_len(int(wc_all[end]), real=True)
            if wc_all[end] > 1.5 * wc_all[start] + 64 or (end - start + 1) * n_est > budget:
                break
            end += 1
        chunks.append((start, end, _fft().next_fast_len(int(wc_all[end - 1]), real=True)))
        start = end
    # every chunk's output stays (at its full FFT length) until the next level, the largest
    # chunk's transforms beside them; the root (r = 2) also for the caller's contiguous copy
    item = np.dtype(dtype).itemsize
    units = [nb * (e - s_) * (N + 2) * item for s_, e, N in chunks]
    level = sum(units) + (nb * int(w[carried]) * item if carried is not None else 0)
    level *= 2 if r == 2 else 1
    # and the plans of its lengths, which scipy.fft keeps (:class:`_Plans`: resident from then on)
    lengths = [N for _, _, N in chunks]
    tmp = TREE_TEMPORARIES * max(units) + _PLANS.new_bytes(dtype, lengths)
    largest[0] = max(largest[0], item * max(lengths))
    mem.hold(level + tmp, f"an FFT tree level of {npairs:,} convolutions of length up to {chunks[-1][2]:,} "
                          f"({np.dtype(dtype).name})")
    held.append(level)
    new_blocks = []
    try:
        if carried is not None:
            c = carried
            src = blocks[bid[c]]
            new_blocks.append((src[0][:, [idx[c]], : w[c]].copy(), w[[c]], off[[c]], Ecat[:, [c]]))
        for s_, e, _ in chunks:
            pa, pb = ia[s_:e], ib[s_:e]
            new_blocks.append(_convolve_chunk(blocks, bid, idx, w, off, Ecat, pa, pb, nb, is_root, workers, dtype))
    finally:
        _PLANS.used(dtype, lengths)
        mem.release(tmp)
    return new_blocks


def _gather(blocks, bid, idx, rows, width, nb, N, dtype=np.float64):
    """Rows ``rows`` (global indices) copied into a zero-padded (nb, len(rows), N) array."""
    out = np.zeros((nb, rows.size, N), dtype=dtype)
    if rows.size <= 16:  # row by row: one copy each (fancy indexing copies twice)
        for k, (b, i) in enumerate(zip(bid[rows].tolist(), idx[rows].tolist())):
            Xb = blocks[b][0]
            cols = min(width, Xb.shape[2])
            out[:, k, :cols] = Xb[:, i, :cols]
        return out
    for b in np.unique(bid[rows]):
        sel = np.nonzero(bid[rows] == b)[0]
        Xb = blocks[b][0]
        cols = min(width, Xb.shape[2])
        out[:, sel, :cols] = Xb[:, idx[rows[sel]], :cols]
    return out


def _convolve_chunk(blocks, bid, idx, w, off, Ecat, pa, pb, nb, is_root, workers, dtype=np.float64):
    wa, wb = w[pa], w[pb]
    Wa, Wb = int(wa.max()), int(wb.max())
    N = _fft().next_fast_len(Wa + Wb - 1, real=True)
    wc = wa + wb - 1
    Wc = int(wc.max())
    ea, eb = Ecat[:, pa], Ecat[:, pb]
    # contiguous zero-padded copies (much faster than letting rfft pad a strided view)
    A = _gather(blocks, bid, idx, pa, Wa, nb, N, dtype)
    Bm = _gather(blocks, bid, idx, pb, Wb, nb, N, dtype)
    # norms over the first Wa (Wb) columns: the padding is exactly 0
    Av, Bv = A[..., :Wa], Bm[..., :Wb]
    s1a = Av.sum(axis=-1) * (1.0 + Wa * UNIT) + 1e-300
    s1b = Bv.sum(axis=-1) * (1.0 + Wb * UNIT) + 1e-300
    s2a = np.sqrt(np.einsum("ijk,ijk->ij", Av, Av)) * (1.0 + Wa * UNIT)
    s2b = np.sqrt(np.einsum("ijk,ijk->ij", Bv, Bv)) * (1.0 + Wb * UNIT)
    del Av, Bv
    FA = _fft().rfft(A, axis=-1, workers=workers, overwrite_x=True)
    del A
    FA *= _fft().rfft(Bm, axis=-1, workers=workers, overwrite_x=True)
    del Bm
    C = _fft().irfft(FA, N, axis=-1, workers=workers, overwrite_x=True)[..., :Wc]
    del FA
    np.maximum(C, 0.0, out=C)
    for j in np.nonzero(wc < Wc)[0]:  # true values are exactly 0 beyond the true width
        C[:, j, wc[j]:] = 0.0
    # norms carry (1 + W u64) >= their own summation error in either precision
    s1a, s1b, s2a, s2b = (np.asarray(v, dtype=float) * (1.0 + 4.0 * UNIT) for v in (s1a, s1b, s2a, s2b))
    fe = _fft_error(N, UNIT if dtype == np.float64 else 2.0**-64) * (s2a * s1b + s1a * s2b)
    Ec = (ea * s1b + eb * (s1a + np.sqrt(wa) * ea) + fe) * (1.0 + 1e-9)
    if is_root:  # max-norm bound via 2-norms
        Einf = (ea * s2b + eb * (s2a + ea) + fe) * (1.0 + 1e-9)
        Ec = np.minimum(Ec, Einf)
    return C, wc, off[pa] + off[pb], Ec


def _row_blocks(rows, widths, offsets, E, budget: int = 2**22):
    """Leaves given as dense rows (one (B-tuple of arrays) per leaf) grouped into blocks of
    similar width for :func:`_fft_tree` (as :func:`_leaf_blocks`)."""
    nb = len(rows[0])
    blocks = []
    parts = list(_width_blocks(widths, budget))
    _memory_budget().need(nb * sum(sel.size * W for sel, W in parts) * 8.0, "the leaf rows of an FFT tree")
    for sel, W in parts:
        X = np.zeros((nb, sel.size, W))
        for r, i in enumerate(sel.tolist()):
            for b in range(nb):
                X[b, r, : widths[i]] = rows[i][b]
        blocks.append((X, widths[sel].astype(np.int64), offsets[sel].astype(np.int64), E[:, sel].copy()))
    return blocks


def _width_blocks(width, budget: int):
    """(indices, padded width) of blocks of similar width: sorted by width, a block's widest
    at most 1.5 x its narrowest + 64 and at most ``budget`` padded entries per batch row."""
    order = np.argsort(width, kind="stable")
    ws = width[order]
    start, k = 0, width.size
    while start < k:
        end = start + 1
        while end < k and ws[end] <= 1.5 * ws[start] + 64 and (end - start + 1) * int(ws[end]) <= budget:
            end += 1
        yield order[start:end], int(ws[end - 1])
        start = end
