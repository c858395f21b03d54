r"""Self-composition by one FFT (layer L3): the k-fold composition of one leaf (a
:class:`optcomp._lattice.leaves.Power` alone in a pass), as one forward transform of the
leaf's tilted rows, a pointwise k-th power, one inverse transform -- every error bounded.

Construction.  Let r be one of the leaf's three tilted rows (:func:`optcomp._lattice.leaves.leaf_rows`:
refined P0, garbled P0, garbled P1; W entries, entry q at lattice index base + q, a
probability vector up to its error bounds rho, E2).  The k-fold convolution t = r^{*k}
(of the *stored* row r) lives on q = 0 .. k(W - 1), lattice index k base + q.  A window
[Q0, Q0 + N) of it is computed as the circular convolution of length N (5-smooth, N >= W):

    x = r zero-padded to N,   X = rfft(x),   P_j = X_j^k (j in J; 0 elsewhere),   c = irfft(P, N),

and window entry i is c[(Q0 + i) mod N] = t[Q0 + i] + a_i, where a_i >= 0 is the mass of t
at the indices Q0 + i + jN, j != 0, outside the window (aliasing; sum_i a_i = the mass of t
outside the window).  P_j is formed by square-and-multiply, only on the frequencies J where
|X_j| + D > e^{c/k}, e^c = CUT_REL / N (elsewhere |A_j^k| <= e^c: a band-limited spectrum,
|J| ~ a few N / sd for t of spread sd lattice points).

Error of one row (max norm; A = F x the exact DFT, exact circular result c = F^-1(A^k);
||.||_V the 2-norm of the full spectrum, conjugates included; sums over j are V-weighted:
weight 1 at j = 0 and j = N/2, 2 elsewhere, total weight N):

1. Forward transform (:func:`optcomp._lattice.tree._transform_error`, eps = eps(N)):
   ||X - A||_V <= D := eps sqrt(N) |x|_2, so every |X_j - A_j| =: d_j <= D and
   |A_j|, |X_j| <= m_j := |X_j| + D.  On a set J_hi of J (the frequencies that survive the
   power best: m_j^(k-1) within 2^-HI_BITS of its largest) the base of the power is
   instead a direct sum (:func:`_direct_dft`), within d_j <= delta |x|_1 of A_j, a
   componentwise bound ~(log W) u |x|_1 where the FFT's is only ~(log N) u sqrt(N) |x|_2
   in 2-norm; m_j := |X_j| + d_j there.  (Only where the FFT's bound is not already
   negligible: DIRECT_REL.)
1'. Split transform (:func:`_split_transform`; where the FFT's bound is not negligible,
   SPLIT_LOOSE, and the split's total bound is the smaller).  A row whose mass sits on a
   few lattice points -- a step sampled at a small rate q keeps ~1 - q of its mass next to
   loss 0 -- has |x|_2 ~ |x|_1, and D is ~sqrt(N) times a direct sum's bound on every
   frequency.  x = x_big + x_rest, x_big the least window [a, c) holding every entry >=
   SPLIT_REL of its row's largest (in every row): z_j = fl(DFT(x_big)_j + FFT(x_rest)_j),
   the first by direct sums on all of J (componentwise within delta |x_big|_1), the second
   within D_r := eps sqrt(N) |x_rest|_2 in V-norm (tiny: the rest is spread thin), the
   addition within u of a modulus <= |x|_1 + D_r + delta |x|_1 (charged 2u).  So d_j <= dr_j + c
   with sum_V dr_j^2 <= D_r^2 and c componentwise; m_j := |z_j| + D_r + c; step 3 becomes
   k D_r (sum_J m_j^(2k-2))^(1/2) + k c sum_J m_j^(k-1).  (J is the plain FFT's: off J,
   |A_j| <= |X_j| + D <= e^{c/k} still.)  10^4 steps of Subsampled(Gaussian(0.8), 1e-4):
   E from ~4e-9 to ~4e-11 of the rows' largest entry.
2. Power.  Every complex product is fl(yz) = yz (1 + delta) + alpha, |delta| <= mu =
   sqrt(2) gamma_2 (Higham, Lemma 3.5; numpy's products, as in :func:`optcomp._lattice.tree._fft_error`
   step 5), |alpha| <= alpha0 = 2^-1072 (gradual underflow of the real products).
   Square-and-multiply evaluates a product tree with k leaves (shared subtrees evaluate the
   same), so by induction on the tree -- a node with n = n1 + n2 leaves is
   (z^n1 w1 + b1)(z^n2 w2 + b2)(1 + delta) + alpha -- its result is z^n w + b with
   |w - 1| <= (1 + mu)^(n-1) - 1 and |b| <= 2 (n - 1) alpha0 ((1 + mu) max(1, |z|))^n.
   So |P_j - z_j^k| <= pw_j := ((1 + mu)^(k-1) - 1) |z_j|^k + 2 (k - 1) alpha0 ((1 + mu) max(1, |z_j|))^k
   for the base z_j used.
3. Amplification: |z_j^k - A_j^k| <= k d_j m_j^(k-1); summed, with Cauchy-Schwarz on
   J_lo = J \ J_hi (sum d_j^2 <= D^2): k delta |x|_1 sum_{J_hi} m_j^(k-1) +
   k D (sum_{J_lo} m_j^(2k-2))^(1/2).  Off J, |P_j - A_j^k| = |A_j|^k <= e^c (1 + 10^-3)
   (the threshold's own rounding, k <= 2^40).  Hence, e = P - A^k,
       ||e||_1 <= sum_J pw_j + (the amplification) + N e^c (1 + 10^-3).
4. Inverse transform (backward passes within eps sqrt(N) ||P||_V, then the product by fl(1/N),
   2.001 u, :func:`optcomp._lattice.tree._fft_error` step 5):
   ||c^ - F^-1 P||_2 <= (eps + 2.001 u (1 + eps)) ||P||_V / sqrt(N).
5. ||F^-1 e||_inf <= ||e||_1 / N (every entry of F^-1 has modulus 1/N), so

       ||c^ - c||_inf <= (eps + 2.001 u (1 + eps)) ||P||_V / sqrt(N) + ||e||_1 / N  =: E_fft,

   every quantity computed from the floats with its rounding charged upward
   (:func:`_pow_sum_up`).  Clipping negative entries to 0 only reduces the error.

Step 3 is where the decay of |A_j|^k pays: the amplification k d_j falls on the few
frequencies that survive the power, so E_fft is ~k (log W) u / N -- about 1e-8 of the
entries at the tilted mode for 10^6 copies (the tilt puts the answer there) -- where a
repeated squaring's error doubles at every one of its log2 k levels.

Window.  Any window gives certified bounds; it is chosen so that the charges below are
negligible (2^-60 of the tilted mass, the driver's ``log_slack`` for the untilted mass sent
to +inf), from Chernoff bounds: on the stored garbled-P0 row, log sum_q r_q e^{s q} <= LM(s)
(:func:`_row_log_mgf`), so t has mass <= e^{k LM(s) - s Q} at q >= Q (s > 0) and
<= e^{k LM(-s) + s Q} at q < Q (s > 0); on the true upper law, the leaf's log-MGF bound K
(:func:`optcomp._lattice.leaves.upper_row_mgf`), P0[L >= l] <= e^{k K(s) - s l} (s > 0) and
P0[L < l] <= e^{k K(s) - s l} (s <= 0).  Each bound holds at every s; LM and K are
computed (every term, charged) only at the few tilts of a grid that a float estimate puts
nearest the best edge (:func:`_row_mgf_estimate`, :func:`_near_best`).  The rows' true
values are the stored k-fold times e^{+-k rho} (:func:`optcomp._lattice.passes.extract`
applies the factor), and the leaf's underflow bound E2 (2-norm, hence 1-norm <= sqrt(W) E2)
adds at most
k sqrt(W) E2 (|r|_1 + sqrt(W) E2)^(k-1) to every entry.

* upper row (refined P0): aliasing only adds mass (the upper side may add P0 mass); mass
  above the window goes to +inf (slack: the Chernoff bound of the true law at the window's
  top); mass below is lumped at the window's first entry (loss raised at fixed P0), charged
  to its error bound in tilted units P0[L < l0] e^{theta l0 - lz} <= e^{k K(s) + (theta - s) l0 - lz}
  (s <= 0) -- or, in a lone pass only, dropped when l0 <= 0, where no loss enters H(x),
  x >= 0 (a node's low losses meet the other nodes' high ones: it lumps them always);
* garbled P0 (lower): entries lowered by E_fft plus the whole aliased mass (Chernoff on
  the stored row, both sides); mass outside the window dropped (a garbling to a symbol
  dropped at the end);
* garbled P1 (lower, raised): aliasing only raises it; mass outside dropped.

A window that holds the whole support (small k) is the exact linear convolution.

Step.  When the Power can rebuild its law at another step (``Power.rebuild``), the pass
runs at a step aligned to the law's atoms (:func:`_pass_step`), with the lower atoms built
at half that step (:func:`_pass_leaf`); the drivers, told how little the aligned law then
costs (:func:`gap_factor`), ask for a coarser step in the first place.

Groups.  A Power among other leaves (a heterogeneous run: each group of identical steps)
is the same window at the pass's own step, handed to the streamed tree as a node
(:func:`power_node`): its max-norm bound times sqrt(N) as the node's 2-norm bound, its
log-MGF bound taken from its entries plus that bound.  The three rows are transformed at
the length N the garbled P0 row's aliasing needs, but the node keeps only the upper row's
window [Q0, Q0 + N0) (N0 from the upper row's Chernoff bound alone, at most N): the upper
row's mass above goes to +inf (that bound at the window's top, the slack), the garbled
rows' outcomes above are dropped (a garbling; their untilted P0 mass there is below the
same bound).  The tilted rows have heavier upper tails than the untilted upper law: for
groups of 100 subsampled Gaussian steps, N ~ 3 N0.  (Transforming the upper and garbled
P1 rows at N0 instead would be certified -- their aliasing only adds upper mass and raises
P1 -- but the tilted mass wrapped to the window's low end, untilted, widened the bracket of two
groups of 20 subsampled Gaussian steps 3x.)

The pass falls back to repeated squaring (:func:`optcomp._lattice.grouped._power`) when a
window would exceed ``MAX_FFT_POINTS`` or the bound is not small against the rows
(``POWER_FFT_REL``).

Length (~750 lines): the construction, its window and tilt choice and the error bound of the
one FFT must agree term by term, so they stay in one module."""

from __future__ import annotations

import math
import sys

import numpy as np

from .._memory import current as _memory_budget
from .._rounding import LIBM_ULPS, UNIT
from .._types import MAX_POINTS, ApproxTooCostly
from . import leaves
from .passes import LatticePass, extract
from .tree import _fft, _transform_error

MAX_FFT_POINTS = MAX_POINTS  # the largest window composed in one transform
PASS_BYTES = 128  # bytes a window point may take at the peak (3 rows: spectrum, result, rolled copy, extraction)
DIRECT_BYTES = 2**25  # the direct sums' chunks (2^20 pairs) and twiddle table
POWER_FFT_REL = 2.0**-10  # fall back when the error bound exceeds this fraction of a row's largest entry
ALIAS_LOG = leaves.WINDOW_LOG  # tilted mass left outside the window (aliased, lumped or dropped), per side
COARSEN_MAX = 16.0  # the most the drivers' step for a lone Power grows over a generic leaf's (:func:`gap_factor`)
COARSEN_GAP = 1.5  # the gap of a cells leaf (upper, half-step lower) per unit of cell mass, against a generic leaf's
UNIT_MULTIPLES = 4096  # the largest multiple of a common unit among a law's atoms (:func:`_unit`)
CUT_REL = 2.0**-40  # frequencies with |X_j|^k below this / N are left out (~1e-13 of the rows' mode)
DIRECT_POINTS = 2**23  # surviving frequencies x row width recomputed by direct sums (else the FFT's bound)
BLOCK = 64  # terms of a direct sum added in any order before the pairwise tree (:func:`_direct_dft`)
HI_BITS = 20  # frequencies with m_j^(k-1) within 2^-HI_BITS of the largest are recomputed directly,
DIRECT_REL = 2.0**-27  # ... where the FFT's bound exceeds this fraction of the rows' largest possible entry
SPLIT_REL = 2.0**-20  # the split transform's window holds every entry >= this fraction of its row's largest
SPLIT_LOOSE = 2.0**-40  # ... tried where the FFT's bound exceeds this fraction of the rows' largest possible entry
SPLIT_POINTS = 2**20  # ... and its direct sums (frequencies x window width) stay within this many pairs (~0.3 s)
NODE_TILT_STEP = 1  # a node's window tilts 2^(NODE_TILT_STEP / 4) apart (a lone Power's: 2^(1/2)); 2 (step 4) left
# its windows ~25% wider (100 groups of 100 subsampled Gaussian steps: 1.9M points of nodes against 1.5M)
MU = math.sqrt(2.0) * 2.0 * UNIT / (1.0 - 2.0 * UNIT) * (1.0 + 4.0 * UNIT)  # complex product, Higham Lemma 3.5
ALPHA0 = 2.0**-1072  # absolute error of one complex product that underflows


def _row_log_mgf(row: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """Upper bounds of log sum_q row_q e^{s q} (q = 0 .. W - 1, the stored floats) at each s
    of ``sig``.  Each term is row_q e^{s q - mx} (mx = max s q over the nonzero entries): the
    argument within 4 u M (M = max |s q|), exp within 2 L u, the product and the sum of n
    terms within (n + 1) u, the log within 2 L u |log S|, the final addition within
    u (M + |log S|): all below the charge 8 u (M + |log S| + n + 8) (L = LIBM_ULPS = 4)."""
    nz = np.nonzero(row > 0.0)[0]
    if nz.size == 0:
        return np.full(sig.size, -math.inf)
    q, r = nz.astype(float), row[nz]
    n = nz.size
    out = np.empty(sig.size)
    step = max(1, 2**20 // n)
    for i in range(0, sig.size, step):  # a block of tilts at a time
        s = sig[i: i + step, None]
        w = s * q[None, :]
        mx = np.max(w, axis=1)
        with np.errstate(under="ignore"):
            S = np.sum(r[None, :] * np.exp(w - mx[:, None]), axis=1)
        lS = np.log(S)
        M = np.abs(s[:, 0]) * float(q[-1])
        out[i: i + step] = mx + lS + 8.0 * UNIT * (M + np.abs(lS) + n + 8.0)
    return out


ESTIMATE_BINS = 256  # bins of a row in :func:`_row_mgf_estimate`


def _row_mgf_estimate(row: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """Float estimates (never bounds: they only choose tilts) of log sum_q row_q e^{s q} at
    each s of ``sig``: the row binned into at most ESTIMATE_BINS runs of consecutive entries,
    each run's mass at its mean position (off by ~s^2 (run width)^2 / 24, not s width)."""
    W = row.size
    b = max(1, -(-W // ESTIMATE_BINS))
    nb = -(-W // b)
    r = np.zeros(nb * b)
    r[:W] = np.maximum(row, 0.0)
    q = np.arange(nb * b, dtype=float)
    mass = r.reshape(nb, b).sum(axis=1)
    ok = mass > 0.0
    if not np.any(ok):
        return np.full(sig.size, -math.inf)
    pos = (r * q).reshape(nb, b).sum(axis=1)[ok] / mass[ok]
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        w = sig[:, None] * pos[None, :]
        mx = np.max(w, axis=1)
        return mx + np.log(np.sum(mass[ok][None, :] * np.exp(w - mx[:, None]), axis=1))


def _near_best(objective: np.ndarray, spread: int = 1) -> np.ndarray:
    """Indices of the least finite entry of ``objective`` and of its ``spread`` neighbours
    on each side (every index when none is finite)."""
    ok = np.isfinite(objective)
    if not np.any(ok):
        return np.arange(objective.size)
    i = int(np.argmin(np.where(ok, objective, np.inf)))
    return np.arange(max(0, i - spread), min(objective.size, i + spread + 1))


def _pow_sum_up(mag: np.ndarray, e: float, weight: np.ndarray) -> float:
    """An upper bound of sum_j weight_j mag_j^e (mag_j >= 0 floats, e >= 1): each term as
    exp(e log mag) with the log within 2 L u |log mag|, the product by e within u, the
    exponent raised by 4 (L + 2) u |v| (v = e log mag) to cover both, exp within 2 L u;
    the weighted sum of n terms within (n + 1) u (weights 1 or 2, exact)."""
    pos = mag > 0.0
    if not np.any(pos):
        return 0.0
    with np.errstate(divide="ignore", under="ignore", over="ignore"):  # (an overflow is an upper bound)
        v = e * np.log(mag[pos])
        terms = np.exp(v + 4.0 * (LIBM_ULPS + 2) * UNIT * np.abs(v)) * (1.0 + 2.0 * LIBM_ULPS * UNIT)
    s = float(np.sum(weight[pos] * terms))
    return s * (1.0 + (pos.sum() + 2) * UNIT) + 5e-324


def _pairwise_sum(a: np.ndarray) -> np.ndarray:
    """Sums along the last axis by a balanced tree: zero-padded to a power of two W' (exact),
    then the upper half added onto the lower, log2 W' times; every term passes through
    d = log2 W' roundings, so the error is within d u (1 + d u) of the sum of the terms'
    absolute values (Higham, *Accuracy and Stability*, 2nd ed., Sec. 4.2)."""
    W = a.shape[-1]
    width = 1 << max(0, (W - 1).bit_length())
    t = np.zeros(a.shape[:-1] + (width,))
    t[..., :W] = a
    while width > 1:
        width //= 2
        t[..., :width] += t[..., width: 2 * width]
    return t[..., 0]


def _direct_dft(rows: np.ndarray, J: np.ndarray, N: int, offset: int = 0, block: int = BLOCK):
    """(X, delta): X[b, i] = sum_q rows[b, q] e^{-2 pi i J_i (offset + q) / N} by direct sums
    (``offset``: the rows' first lattice index; ``block``: BLOCK below), and delta
    with |X[b, i] - exact| <= delta |rows[b]|_1.  Twiddles: the exact residue r = J q mod N
    (integers) taken to [-N/2, N/2], the angle fl(r fl(2 pi / N)) within 2.6 u pi <= 8.2 u
    of 2 pi r / N, cos and sin within L = LIBM_ULPS ulps (<= 2 L u absolute): each within
    16.2 u, the complex twiddle within 23 u (from a table over r when there are more pairs
    than N: the same values).  Sums: every real product rounded once, summed in blocks of
    b = ``block`` (in any order: within (b - 1) u of the absolute terms), the block sums by a
    pairwise tree (:func:`_pairwise_sum`, d = ceil(log2(W / b)) levels): each component
    within (b + d) u of its absolute terms, the complex value within
    sqrt(2) (b + d) u |x|_1 (1 + 16.2 u).  So delta = (23 + 1.415 (b + d)) u,
    charged as (24 + 1.5 (b + d)) u."""
    B, W = rows.shape
    nb = -(-W // block)
    xb = np.zeros((B, nb * block))
    xb[:, :W] = rows
    xb = xb.reshape(B, nb, block)
    q = np.arange(nb * block, dtype=np.int64) + int(offset)
    step = 2.0 * math.pi / N
    table = None
    if J.size * nb * block > N:
        r = np.arange(N, dtype=np.int64)
        ang = np.where(2 * r > N, r - N, r).astype(float) * step
        table = (np.cos(ang), np.sin(ang))
    out = np.empty((B, J.size), dtype=complex)
    chunk = max(1, 2**20 // (nb * block))
    for i in range(0, J.size, chunk):
        r = (J[i: i + chunk].astype(np.int64)[:, None] * q[None, :]) % N
        if table is None:
            ang = np.where(2 * r > N, r - N, r).astype(float) * step
            c, s = np.cos(ang), np.sin(ang)
        else:
            c, s = table[0][r], table[1][r]
        cb, sb = c.reshape(-1, nb, block), s.reshape(-1, nb, block)
        re = _pairwise_sum(np.einsum("jnq,bnq->bjn", cb, xb))
        im = _pairwise_sum(np.einsum("jnq,bnq->bjn", sb, xb))
        out[:, i: i + chunk] = re - 1j * im
    d = max(0, (nb - 1).bit_length())
    return out, (24.0 + 1.5 * (block + d)) * UNIT


def _power(z: np.ndarray, k: int) -> np.ndarray:
    """z^k elementwise by square-and-multiply (a product tree with k leaves)."""
    result = None
    base = z
    while True:
        if k & 1:
            result = base.copy() if result is None else result * base
        k >>= 1
        if not k:
            return result
        base = base * base


def _index(x, up: bool, default: int) -> int:
    """ceil (``up``) or floor of a float window edge; ``default`` when it is not finite."""
    x = float(x)
    if not math.isfinite(x) or abs(x) > 2.0**62:
        return default
    return math.ceil(x) if up else math.floor(x)


def _exp_up(x: float) -> float:
    """exp(x) rounded up (x an upper bound of the exponent, already charged)."""
    if x < -745.0:
        return 5e-324
    if x > 709.0:
        return math.inf
    return math.exp(x) * (1.0 + 2.0 * LIBM_ULPS * UNIT) + 5e-324


def _min_exp(vals: np.ndarray, mag: np.ndarray) -> float:
    """exp of the least of the exponents ``vals``, each the float sum of a few terms (each
    product and sum rounded once) whose absolute values sum to ``mag``: charged
    8 u mag + 1e-12 (1 + |v|) (-inf: an empty row, mass 0; none finite: no bound, inf)."""
    if np.any(vals == -math.inf):
        return 0.0
    ok = np.isfinite(vals) & np.isfinite(mag)
    if not np.any(ok):
        return math.inf
    v = vals[ok] + 8.0 * UNIT * mag[ok] + 1e-12 * (1.0 + np.abs(vals[ok]))
    return _exp_up(float(np.min(v)))


def _split_transform(rows: np.ndarray, Js: list, ws: list, k: int, N: int, D: np.ndarray, s1: np.ndarray,
                     amp: float, workers: int) -> list:
    """The split transform of each row (module docstring, step 1'), where it bounds the
    amplified error better than the plain FFT: per row, None or (z on J, e1), e1 the bound
    on ||P - A^k||_1 (V-weighted over every frequency: the amplification and the power's
    rounding on J, the cut frequencies off J).

    The window [a, c) holds every entry >= SPLIT_REL of its row's largest, in every row (a
    subsampled step at a small rate: one or a few lattice points hold ~1 - q of the mass).
    Its DFT is taken by direct sums (:func:`_direct_dft`, componentwise within delta |x_big|_1)
    on J, the rest's by the FFT (2-norm error <= D_r = eps sqrt(N) |x_rest|_2, tiny when the
    rest is spread thin), the two added (one rounding a component: u of a modulus at most
    |x|_1 + D_r + delta |x|_1, charged 2u).  So d_j <= dr_j + c with sum_V dr_j^2 <= D_r^2 and c
    componentwise, m_j = |z_j| + D_r + c bounds |z_j| and |A_j|, and step 3 becomes
    k D_r (sum_J m_j^(2k-2))^(1/2) + k c sum_J m_j^(k-1).  Against the plain FFT's
    k D (sum m^(2k-2))^(1/2): 10^5 steps of Subsampled(Gaussian(0.8), 1e-4) at delta_g 1e-8,
    whose lower end the FFT's bound held at 0.308 (truth ~0.319), meet tol = 1e-3."""
    B, W = rows.shape
    none = [None] * B
    Jall = np.unique(np.concatenate(Js))
    if Jall.size == 0:
        return none
    top = np.max(rows, axis=1, keepdims=True)
    cols = np.nonzero(np.any(rows >= SPLIT_REL * top, axis=0))[0]
    if cols.size == 0:
        return none
    a, c_ = int(cols[0]), int(cols[-1]) + 1
    if Jall.size * (c_ - a) > SPLIT_POINTS:
        return none
    big = rows[:, a:c_]
    XB, dB = _direct_dft(big, Jall, N, offset=a, block=2)
    b1 = np.sum(big, axis=1) * (1.0 + (c_ - a + 2) * UNIT)
    fft = _fft()
    out = []
    for b in range(B):
        J, w = Js[b], ws[b]
        xr = np.zeros(N)
        xr[:W] = rows[b]
        xr[a:c_] = 0.0
        r2 = math.sqrt(float(np.dot(xr[:W], xr[:W])) * (1.0 + (W + 2) * UNIT)) * (1.0 + 2.0 * UNIT)
        Dr = _transform_error(N) * math.sqrt(N) * r2 * (1.0 + 4.0 * UNIT)
        XR = fft.rfft(xr, workers=workers, overwrite_x=True)
        z = XR[J] + XB[b, np.searchsorted(Jall, J)]
        del XR, xr
        cb = (dB * float(b1[b]) + 2.0 * UNIT * (float(s1[b]) * (1.0 + dB) + Dr)) * (1.0 + 4.0 * UNIT)
        zmag = np.sqrt(z.real * z.real + z.imag * z.imag) * (1.0 + 4.0 * UNIT) + 1e-300
        m = zmag + (Dr + cb) * (1.0 + 2.0 * UNIT)
        e1 = (k * Dr * math.sqrt(_pow_sum_up(m, 2.0 * k - 2.0, w)) + k * cb * _pow_sum_up(m, k - 1.0, w)) \
            * (1.0 + 4.0 * UNIT)
        pw = amp * _pow_sum_up(zmag, float(k), w) \
            + 2.0 * (k - 1) * ALPHA0 * _pow_sum_up(np.maximum(zmag, 1.0) * (1.0 + MU), float(k), w)
        cut = N * math.exp(math.log(CUT_REL / N) + 1e-3)
        e1 = e1 + pw + cut + 1e-300
        plain = k * D[b] * math.sqrt(_pow_sum_up(np.sqrt(z.real * z.real + z.imag * z.imag) + D[b], 2.0 * k - 2.0, w))
        out.append((z, e1) if e1 < plain else None)
    return out


def _kfold_circular(rows: np.ndarray, k: int, N: int, workers: int = -1):
    """(c, E, s1): the circular k-fold convolution of length N of each row of ``rows``
    (B, W), W <= N, by rfft, the pointwise power on the surviving frequencies J and irfft;
    E (B,) the max-norm bound of the module docstring (steps 1-5) on the distance of c to
    the exact circular k-fold of the stored rows; s1 (B,) upper bounds of the rows' 1-norms.

    Where the FFT's own bound is not negligible (k D (sum_J m_j^(2k-2))^(1/2) above
    DIRECT_REL sum_J |X_j|^k, a bound on N times the largest entry), the frequencies of J
    where m_j^(k-1) is within 2^-HI_BITS of its largest value (J_hi: the main lobe, and the
    echoes of a law on a sublattice) are recomputed by direct sums (:func:`_direct_dft`,
    d_j <= delta |x|_1, when |J_hi| W <= DIRECT_POINTS); on the rest,
    J_lo, d_j <= D: step 3's amplification is charged as
    k delta |x|_1 sum_{J_hi} m_j^(k-1) + k D (sum_{J_lo} m_j^(2k-2))^(1/2).  Before that,
    where the FFT's bound exceeds SPLIT_LOOSE of it, a row takes the split transform instead
    (:func:`_split_transform`, step 1') when its bound is the smaller."""
    B, W = rows.shape
    x = np.zeros((B, N))
    x[:, :W] = rows
    s1 = np.sum(rows, axis=1) * (1.0 + (W + 2) * UNIT)
    s2 = np.sqrt(np.einsum("ij,ij->i", rows, rows) * (1.0 + (W + 2) * UNIT)) * (1.0 + 2.0 * UNIT)
    fft = _fft()
    X = fft.rfft(x, axis=-1, workers=workers, overwrite_x=True)
    del x
    eps = _transform_error(N)
    D = eps * math.sqrt(N) * s2 * (1.0 + 4.0 * UNIT)
    # |X_j| as sqrt(re^2 + im^2): four correctly rounded operations (2.5 u), underflow 1e-300
    mag = np.sqrt(X.real * X.real + X.imag * X.imag) * (1.0 + 4.0 * UNIT) + 1e-300
    cut_log = math.log(CUT_REL / N)  # |A_j|^k <= e^{cut_log} off J: at most CUT_REL / N per entry in all
    cut = math.exp(cut_log / k)
    Js = [np.nonzero(mag[b] + D[b] > cut)[0] for b in range(B)]
    his = []
    for b, J in enumerate(Js):  # (a choice: any split is certified)
        with np.errstate(divide="ignore"):
            lm = np.log(mag[b, J] + D[b])
        his.append((k - 1.0) * (lm - np.max(lm, initial=0.0)) >= -HI_BITS * math.log(2.0))
    Jhi = np.unique(np.concatenate([J[hi] for J, hi in zip(Js, his)]))
    # direct sums only where the FFT's own bound is not already negligible (their cost is |J_hi| W)
    ws = [np.where((J == 0) | (2 * J == N), 1.0, 2.0) for J in Js]
    # (each row's two sums over all of J, kept: without direct sums step 3's amplification
    # and the power's bound below are these very sums -- the same floats, not summed twice)
    sums: dict = {}

    def amp_sum(b):
        if ("a", b) not in sums:
            sums["a", b] = _pow_sum_up(mag[b, Js[b]] + D[b], 2.0 * k - 2.0, ws[b])
        return sums["a", b]

    def pow_sum(b):
        if ("p", b) not in sums:
            sums["p", b] = _pow_sum_up(mag[b, Js[b]], float(k), ws[b])
        return sums["p", b]

    amp_fft = [k * D[b] * math.sqrt(amp_sum(b)) for b in range(B)]
    loose = any(amp_fft[b] > DIRECT_REL * pow_sum(b) for b in range(B))
    amp = math.expm1((k - 1) * math.log1p(MU)) * (1.0 + 1e-9)
    splits = [None] * B
    if any(amp_fft[b] > SPLIT_LOOSE * pow_sum(b) for b in range(B)):
        splits = _split_transform(rows, Js, ws, k, N, D, s1, amp, workers)
    loose = loose and any(sp is None for sp in splits)
    direct = loose and Jhi.size * W <= DIRECT_POINTS
    if direct:
        XJ, delta = _direct_dft(rows, Jhi, N)
        dj = delta * s1
    P = X  # the spectrum becomes the power's, in place (each row's J read first)
    E = np.zeros(B)
    for b in range(B):
        J, w = Js[b], ws[b]
        if splits[b] is not None:  # the split transform's base and bound (:func:`_split_transform`)
            z, e1 = splits[b]
        else:
            hi = his[b] if direct else np.zeros(J.size, dtype=bool)
            z, zmag = X[b, J], mag[b, J]
            if direct and np.any(hi):
                zh = XJ[b, np.searchsorted(Jhi, J[hi])]
                z[hi] = zh
                zmag[hi] = np.sqrt(zh.real * zh.real + zh.imag * zh.imag) * (1.0 + 4.0 * UNIT) + 1e-300
            lo = ~hi
            every = not (direct and np.any(hi))  # (z, zmag the FFT's on all of J: the sums above)
            pw = amp * (pow_sum(b) if every else _pow_sum_up(zmag, float(k), w)) \
                + 2.0 * (k - 1) * ALPHA0 * _pow_sum_up(np.maximum(zmag, 1.0) * (1.0 + MU), float(k), w)
            e1 = k * D[b] * math.sqrt(amp_sum(b) if every else _pow_sum_up(mag[b, J[lo]] + D[b], 2.0 * k - 2.0,
                                                                              w[lo])) * (1.0 + 2.0 * UNIT)
            if direct and np.any(hi):  # sum_{J_hi} k d_j m_j^(k-1), d_j <= delta |x|_1
                e1 += k * dj[b] * _pow_sum_up(zmag[hi] + dj[b], k - 1.0, w[hi]) * (1.0 + 2.0 * UNIT)
            e1 = e1 + pw + N * math.exp(cut_log + 1e-3) + 1e-300
        P[b] = 0.0
        if J.size:
            P[b, J] = _power(z, k)
        P[b, 0] = P[b, 0].real  # exact already (a real number squared); irfft reads real parts there
        if N % 2 == 0:
            P[b, -1] = P[b, -1].real
        pj = P[b, J]
        pv2 = float(np.sum(w * (pj.real * pj.real + pj.imag * pj.imag))) * (1.0 + (J.size + 4) * UNIT) + 1e-300
        pv = math.sqrt(pv2) * (1.0 + 2.0 * UNIT)
        E[b] = ((eps + 2.001 * UNIT * (1.0 + eps)) * pv / math.sqrt(N) + e1 / N) * (1.0 + 1e-9)
    del X, mag
    c = fft.irfft(P, N, axis=-1, workers=workers, overwrite_x=True)
    del P
    return c, E, s1


def _unit(a: leaves.Atoms) -> tuple[float | None, float]:
    """(u, m_split): a common unit u of the atoms that the refinement splits (``a.on_lattice``
    False), and the P-mass m_split of those it does not align.  Candidates u = |l_1| / d,
    d = 1 .. 12, l_1 the heaviest nonzero split atom (+-a of Laplace; eps of k-ary randomized
    response or geometric); an atom is aligned when |l| is within 10^-9 relative of an
    integer multiple n u, n <= UNIT_MULTIPLES; the candidate aligning the most mass wins
    (the largest u among equals), None when it aligns less than half of the split mass."""
    split = np.ones(a.loss.size, dtype=bool) if a.on_lattice is None else ~a.on_lattice
    with np.errstate(under="ignore"):
        p = np.where(split, np.exp(a.logp), 0.0)
    nz = split & (a.loss != 0.0) & (p > 0.0)  # (an atom at 0 is on every lattice)
    total = float(np.sum(p[nz]))
    if not np.any(nz):
        return None, 0.0
    l, pn = np.abs(a.loss[nz]), p[nz]
    best, best_mass = None, -1.0
    for d in range(1, 13):
        u = float(l[np.argmax(pn)]) / d
        r = l / u
        aligned = (r <= UNIT_MULTIPLES) & (np.abs(r - np.rint(r)) <= 1e-9 * r)
        mass = float(np.sum(pn[aligned]))
        if mass > best_mass:
            best, best_mass = u, mass
    if best_mass < 0.5 * total:
        return None, total
    return best, total - best_mass


def gap_factor(leaf: leaves.Leaf) -> float:
    """The gap of a self-composition pass of ``leaf`` against a generic leaf's at the same
    step, for the drivers' choice of step (:meth:`optcomp._lattice.workload.Workload.weight`;
    only the cost depends on it).  A generic leaf's gap, ~0.12 (1 + theta) h^2 per copy, is
    the cost of splitting its atoms between lattice points; atoms on the lattice cost
    nothing (:func:`optcomp._lattice.leaves._lattice_interval`), and the pass aligns its step
    to the law's unit (:func:`_pass_step`), so what remains is the connect-the-dots split of
    the cells and the atoms the unit leaves unaligned: P-mass m, with a lower leaf at half
    the step (:func:`_pass_leaf`) about COARSEN_GAP m of a generic leaf's gap (measured:
    Laplace, Gaussian); clamped to [COARSEN_MAX^-2, 1]."""
    up = leaf.upper
    with np.errstate(under="ignore"):
        p = np.exp(up.logp)
    cells = float(np.sum(p[up.on_lattice])) if up.on_lattice is not None else 0.0
    _, m_split = _unit(up)
    return min(1.0, max(COARSEN_MAX**-2, COARSEN_GAP * (cells + m_split)))


def _pass_step(leaf: leaves.Leaf, h: float, k: int) -> float:
    """The step of a self-composition pass asked for at step h: when the split atoms are
    (mostly) multiples of a unit u (:func:`_unit`), h' = u / ceil(u / h) -- or u itself when
    they all are and there are no cells (a law on the lattice uZ: refinement and garbling
    then change nothing, the pass is exact up to its float charges) -- rounded down to B
    significand bits (so u is within n 2^(1-B) steps of a lattice point, and n h' stays
    exact for every lattice index |n| of the pass, below 2^(53 - B)); else h."""
    u, m_split = _unit(leaf.upper)
    if u is None:
        return h
    on_lattice = leaf.upper.on_lattice is None or not np.any(leaf.upper.on_lattice)
    target = u if (m_split == 0.0 and on_lattice) else u / math.ceil(u / h)
    nmax = k * (leaf.span / target + 4.0) + 16.0
    bits = 53 - int(math.ceil(math.log2(nmax))) - 1
    if bits < 16:
        return h
    shift = bits - math.frexp(target)[1]
    # exact: a float scaled by a power of two (to ~2^bits), floored, scaled back -- a normal
    # float (a subnormal step would round: the step asked for instead)
    hs = math.ldexp(math.floor(math.ldexp(target, shift)), -shift)
    return hs if hs >= sys.float_info.min and leaves.exact_positions(hs, nmax) else h


def _pass_leaf(item: leaves.Power, h: float, align: bool = True):
    """(step, leaf) of the pass: :func:`_pass_step` (h when not ``align``: a node among
    others keeps the pass's lattice) and, when the Power can rebuild its law
    (``item.rebuild``), the upper atoms at that step and the lower ones at half of it (a
    cell garbled to the lattice point nearest its mid-point is then off by h/4, not h/2:
    a ~4x smaller lower gap); else h and ``item.leaf``."""
    if item.rebuild is None:
        return h, item.leaf
    hs = _pass_step(item.leaf, h, int(item.count)) if align else h
    try:
        lo = item.rebuild(hs / 2.0, False)  # (first: the law at hs is then its cells in pairs)
        up = item.rebuild(hs)
    except (ValueError, ApproxTooCostly):  # too many cells at that step: the step asked for
        return h, item.leaf
    return hs, leaves.Leaf(up.upper, lo.lower, up.log_inf, up.lump_index, up.log_lump, up.cgf)


def power_pass(item: leaves.Power, h: float, theta: float, log_slack: float, workers: int = -1):
    """The :class:`optcomp._lattice.passes.LatticePass` of ``item.count`` copies of
    ``item.leaf`` at tilt theta by one FFT (module docstring), at the step of
    :func:`_pass_leaf` (h, or aligned to the law's atoms), or None when the window would
    exceed MAX_FFT_POINTS or the error bound is not small (the caller then squares
    repeatedly at step h)."""
    w = _power_window(item, h, theta, log_slack, workers, True)
    if w is None:
        return None
    c, E, lz, rho_k, off, h, slack = w
    idx = np.arange(c.shape[1], dtype=float) + off
    loss = h * idx  # exact (checked)
    return extract(c, E, [[z] for z in lz], rho_k, theta, h, idx, off, loss, loss, slack)


def power_node(item: leaves.Power, h: float, theta: float, log_slack: float, S: np.ndarray, workers: int = -1):
    """``item.count`` copies of ``item.leaf`` by one FFT as a node of the streamed tree of
    :func:`optcomp._lattice.grouped.grouped_pass` (a run whose steps come in groups of
    identical mechanisms: each group one transform, the groups then convolved): (rows, off,
    E, lz, rho, K, slack) at the pass's own step h, or None (the caller squares repeatedly).
    The window is the upper row's, N0 entries (module docstring, Groups: the rows
    transformed at the length the garbled rows' aliasing needs, then cut to it).
    E is a 2-norm bound: sqrt(N0) times the max-norm bound of the module docstring (lump and
    aliasing charges included) over the N0 entries.  K bounds the log-MGF of the node's true
    upper row at the tilts S from its entries: that row lies entrywise within E_inf of the
    computed one (the lumped mass included), so E_P0[e^{sL}] <= e^{lz} sum_i (c_i + E_inf)
    e^{(s - theta) h idx_i} (:func:`optcomp._lattice.leaves.lattice_cgf` of those atoms, the
    log-masses' rounding charged 8 u of their terms)."""
    w = _power_window(item, h, theta, log_slack, workers, False)
    if w is None:
        return None
    c, E, lz, rho_k, off, h2, slack = w
    N = c.shape[1]
    idx = np.arange(N, dtype=float) + off
    loss = h * idx  # exact (checked)
    lz0 = float(lz[0]) + 1e-12 * (1.0 + abs(float(lz[0])))
    with np.errstate(divide="ignore"):
        lc = np.log(c[0] + E[0])
    lm = lc - theta * loss + lz0
    err = 8.0 * UNIT * (np.abs(lc) + np.abs(theta * loss) + abs(lz0) + 4.0) + 1e-300
    K = leaves.lattice_cgf(lm, err, h, int(off), S) * (1.0 + 1e-12) + 1e-12
    E2 = E * math.sqrt(N) * (1.0 + 4.0 * UNIT)
    return c, int(off), E2, np.array(lz, dtype=float), np.array(rho_k, dtype=float), K, slack


def _power_window(item: leaves.Power, h: float, theta: float, log_slack: float, workers: int, align: bool):
    """The window of :func:`power_pass` / :func:`power_node`: (c (3, N), E (3,) max-norm
    bounds, lz (3,), rho (3,), offset, step, P0 mass sent to +inf) or None."""
    k = int(item.count)
    if not 1 <= k <= 2**40:  # (the power's rounding charges assume k u < 2^-13)
        return None
    h, leaf = _pass_leaf(item, h, align)
    rows, base, logZ, rho, E2, s_leaf = leaves.leaf_rows(leaf, h, theta)
    W = rows.shape[1]
    full = k * (W - 1) + 1  # the support of the k-fold, q = 0 .. full - 1
    kb = k * int(base)
    # ---- the window (choices: any window gives certified bounds)
    qf = np.arange(W, dtype=float)
    # (elementwise sums, not BLAS: OpenBLAS's threads took ~16 ms for one such product on a
    # loaded machine, where these take ~0.1 ms)
    m1 = float(np.sum(rows[1] * qf)) / float(np.sum(rows[1]))
    v1 = float(np.sum(rows[1] * (qf - m1) ** 2)) / float(np.sum(rows[1]))
    sd = max(math.sqrt(k * v1), 1.0)
    if not math.isfinite(sd):
        return None
    # (a choice: every grid gives certified charges; a node's finer: NODE_TILT_STEP)
    sig = 2.0 ** (np.arange(-40, 41, 2 if align else NODE_TILT_STEP) / 4.0) / sd
    # the certified sums at the few tilts an estimate puts nearest the best window edge
    # (:func:`_row_mgf_estimate`; the charges below take the least over the tilts evaluated)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        est = _row_mgf_estimate(rows[1], np.concatenate([sig, -sig]))  # (row by row: both sides at once)
        sig_p = sig[_near_best((k * est[: sig.size] - ALIAS_LOG) / sig)]
        sig_n = sig[_near_best((k * est[sig.size:] - ALIAS_LOG) / sig)]
    lm = _row_log_mgf(rows[1], np.concatenate([sig_p, -sig_n]))  # (each tilt's bound its own: one call)
    lm_p, lm_n = lm[: sig_p.size], lm[sig_p.size:]
    with np.errstate(invalid="ignore", over="ignore"):
        q_top = _index(np.min((k * lm_p - ALIAS_LOG) / sig_p), True, full)
        q_lo = _index(np.max((ALIAS_LOG - k * lm_n) / sig_n), False, 0)
    # the true upper law (loss units): untilted mass above the top, tilted lump below the bottom
    sk = sig[::2]  # (the true law's bound sums every atom: a coarser grid)
    S = np.unique(np.concatenate([theta + sk / h, np.minimum(theta - sk / h, 0.0), -sk / h, [0.0]]))
    lz0 = float(k * float(logZ[0]))
    # times k: atoms summed in blocks (:func:`optcomp._lattice.leaves._atoms_cgf`) only where their
    # looseness e^{|s| width}, raised to the k-th power, stays below e^{1/16} -- and then every
    # atom only at the few tilts an estimate from the refined row puts nearest the best edges
    up_l = leaf.upper.loss
    width = float(np.max(up_l) - np.min(up_l)) / max(leaves.CGF_TERMS // S.size, 64)
    blocks = k * float(np.max(np.abs(S))) * width <= 1.0 / 16
    if not blocks:
        # log E_P0[e^{sL}] of the refined row ~ logZ_0 + log sum_q rows0_q e^{(s - theta) h (base + q)}
        t = (S - theta) * h
        est = k * (float(logZ[0]) + t * base + _row_mgf_estimate(rows[0], t))
        pos, neg = S > 0.0, (S <= 0.0) & (theta - S > 0.0)
        pick = np.zeros(S.size, dtype=bool)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if np.any(pos):
                pick[np.flatnonzero(pos)[_near_best((est[pos] - log_slack) / S[pos])]] = True
            if np.any(neg):
                pick[np.flatnonzero(neg)[_near_best((est[neg] - ALIAS_LOG - lz0) / (theta - S[neg]))]] = True
        S = S[pick]
    K = leaves.upper_row_mgf(leaf, S, h, float(rho[0]), blocks=blocks)
    kK = k * K  # (its rounding: charged with the exponents' below)
    pos = S > 0.0
    neg = (S <= 0.0) & (theta - S > 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        q_top_u = _index(np.min((kK[pos] - log_slack) / S[pos]) / h - kb, True, full)  # the upper row's
        q_lump = _index(np.max((ALIAS_LOG + lz0 - kK[neg]) / (theta - S[neg])) / h - kb, False, -kb)
    q_top = max(q_top, q_top_u)
    # the upper row's mass below the window is lumped at its first entry and charged (module
    # docstring); a lone pass may drop what lies below loss 0 instead (losses <= 0 enter no
    # H(x), x >= 0), a node may not: its low losses meet the other nodes' high ones (two
    # groups of 50 steps of Subsampled(Gaussian(0.8), 1e-4) lost 14% of a node's P0 mass
    # there, and eps_g's upper end was 0.05327 where the truth is ~0.05374)
    q_lo = min(q_lo, max(q_lump, -kb if align else 0))
    q_lo = max(q_lo, 0)
    q_top = min(max(q_top, q_lo + 1), full)
    N = _fft().next_fast_len(max(q_top - q_lo, W), real=True)
    if N > MAX_FFT_POINTS:
        return None
    if q_lo + N > full:
        q_lo = max(0, full - N)
    q_top = q_lo + N
    off = kb + q_lo
    if not leaves.exact_positions(h, max(abs(off), abs(off + N))):  # h (off + i) exact
        return None
    # a node (not ``align``): the rows transformed at the length N the garbled rows' aliasing
    # needs, the window kept the upper row's, [q_lo, q_lo + N0)
    N0 = N
    if not align:
        N0 = min(N, _fft().next_fast_len(max(min(max(q_top_u, q_lo + 1), full) - q_lo, W), real=True))
    q_top0 = q_lo + N0
    # ---- certified charges of the window
    alias1 = 0.0
    if q_lo > 0:
        alias1 += _min_exp(k * lm_n + sig_n * q_lo, np.abs(k * lm_n) + sig_n * q_lo)
    if q_top < full:
        alias1 += _min_exp(k * lm_p - sig_p * q_top, np.abs(k * lm_p) + sig_p * q_top)
    lump = 0.0
    l0 = h * off
    if q_lo > 0 and (l0 > 0.0 or not align):
        t = (theta - S[neg]) * l0
        lump = _min_exp(kK[neg] + t - lz0, np.abs(kK[neg]) + np.abs(t) + abs(lz0))
    slack = k * s_leaf * (1.0 + 1e-12)
    if q_top0 < full:
        t = S[pos] * (h * (off + N0))
        slack += _min_exp(kK[pos] - t, np.abs(kK[pos]) + np.abs(t))
    if not (math.isfinite(lump) and math.isfinite(alias1) and math.isfinite(slack)):
        return None
    # ---- the transform, the power, the inverse (within the call's memory budget)
    with _memory_budget().reserve(PASS_BYTES * N + DIRECT_BYTES, "the transforms of a self-composition pass"):
        c, E, s1 = _kfold_circular(rows, k, N, workers)
        c = np.roll(c, -(q_lo % N), axis=-1)
        if N0 < N:
            c = np.ascontiguousarray(c[:, :N0])
        np.maximum(c, 0.0, out=c)
        # the leaf's underflow bound, through k copies
        with np.errstate(divide="ignore"):
            le = np.where(E2 > 0, np.log(k * math.sqrt(W) * E2) + (k - 1) * np.log(s1 + math.sqrt(W) * E2), -np.inf)
        if np.any(le > -40.0):
            return None
        with np.errstate(under="ignore"):
            E = E + np.where(np.isfinite(le), np.exp(le + 1e-9 * (1.0 + np.abs(le))) * 2.0, 0.0) + 5e-324
        E[0] += lump
        E[1] += alias1
        if np.any(E > POWER_FFT_REL * np.max(c, axis=1)):
            return None
        lz = [float(k * float(z)) for z in logZ]
        rho_k = [k * float(r) * (1.0 + 2.0 * UNIT) + 2.0 * UNIT * (abs(z) + 1.0) for r, z in zip(rho, lz)]
        return c, E, lz, rho_k, off, h, slack
