"""Audit of the split forward transform of the one-FFT power (selfcompose, module docstring
step 1'; :func:`optcomp._lattice.selfcompose._split_transform`).

Adversarial rows against exact references: the circular k-fold of dyadic rows computed exactly
in the ring Z[x] / (x^N - 1) (Python integers, reduced mod x^N - 1 after every product, so
aliasing is exact), the direct sums with an offset against 50-digit mpmath up to the largest
transform length, and (slow) end-to-end brackets of rarely sampled Gaussians against the
squared bracket and one release's eps (tests/reference_dpsgd.py).  A spy on
``_split_transform`` confirms the split is actually taken where a test means to exercise it."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optcomp._lattice import selfcompose

BITS = 44


# ----------------------------------------------------------------------------- references


def _ring_mul(a: list, b: list, N: int) -> list:
    """a * b in Z[x] / (x^N - 1) (both of length N)."""
    p = np.convolve(np.array(a, dtype=object), np.array(b, dtype=object)).tolist()
    out = p[:N]
    for i in range(N, len(p)):
        out[i - N] += p[i]
    return out + [0] * (N - len(out))


def _exact_circular(ints, k: int, N: int) -> list:
    """The exact circular k-fold (length N) of each integer row, as numerators."""
    res = []
    for r in ints:
        base = [0] * N
        for i, v in enumerate(r):
            base[i % N] += v
        acc, e = None, k
        while e:
            if e & 1:
                acc = list(base) if acc is None else _ring_mul(acc, base, N)
            e >>= 1
            if e:
                base = _ring_mul(base, base, N)
        res.append(acc)
    return res


def _fill(r: list, big: list, bits: int = BITS) -> list:
    """``r`` with the positions ``big`` sharing the mass left to make the row sum to 2^bits."""
    r = list(r)
    for p in big:
        r[p] = 0
    rem = 2**bits - sum(r)
    assert rem > 0
    for i, p in enumerate(big):
        r[p] = rem // len(big) + (rem % len(big) if i == 0 else 0)
    return r


def _forcing(real):
    """_split_transform taking the split in every row: the plain FFT's D, which it reads only
    to choose (``plain``), inflated -- a choice, certified either way."""

    def split(rows, Js, ws, k, N, D, *rest):
        return real(rows, Js, ws, k, N, D * 1e100, *rest)

    return split


def _spies(monkeypatch, force: bool = True):
    """Record, per call of _split_transform, which rows took the split, and the (offset,
    width, block) of every direct sum."""
    taken, dfts = [], []
    real_split, real_dft = selfcompose._split_transform, selfcompose._direct_dft
    if force:
        real_split = _forcing(real_split)

    def split(*args, **kw):
        out = real_split(*args, **kw)
        taken.append([o is not None for o in out])
        return out

    def dft(rows, J, N, offset=0, block=selfcompose.BLOCK):
        dfts.append((int(offset), rows.shape[1], block))
        return real_dft(rows, J, N, offset=offset, block=block)

    monkeypatch.setattr(selfcompose, "_split_transform", split)
    monkeypatch.setattr(selfcompose, "_direct_dft", dft)
    return taken, dfts


def _check_within_E(ints, k: int, N: int, bits: int = BITS):
    rows = np.array(ints, dtype=float) * 2.0**-bits
    assert np.all(np.array([sum(r) for r in ints]) == 2**bits)
    c, E, s1 = selfcompose._kfold_circular(rows, k, N, 1)
    exact = _exact_circular(ints, k, N)
    scale = Fraction(1, 2 ** (bits * k))
    for b in range(len(ints)):
        assert s1[b] >= 1.0
        worst = max(abs(Fraction(float(c[b, i])) - v * scale) for i, v in enumerate(exact[b]))
        assert worst <= Fraction(float(E[b])), (b, float(worst), E[b])
        assert E[b] < 1e-9  # not vacuous
    return E


# ----------------------------------------------------------------------------- adversarial rows


def _rng_rest(rng, W: int, hi: int) -> list:
    return [int(v) for v in rng.integers(0, hi, W)]


def _shapes(name: str, W: int, seed: int) -> list:
    """Three rows of W dyadic entries m / 2^BITS (sum 1) of a named adversarial shape."""
    rng = np.random.default_rng(seed)
    thin = 2**10  # rest entries below 2^-34
    if name == "end":  # the mass at the row's last point: the window's offset is W - 1
        return [_fill(_rng_rest(rng, W, thin), [W - 1]) for _ in range(3)]
    if name == "spread":  # big entries at both ends: the window is the whole row
        return [_fill(_rng_rest(rng, W, thin), [0, W - 1]),
                _fill(_rng_rest(rng, W, thin), [W // 2]),
                _fill(_rng_rest(rng, W, thin), [1, W // 3, W - 2])]
    if name == "thick_rest":  # every rest entry just below the threshold 2^-20 of the top
        t = 2 ** (BITS - 20)
        return [_fill([int(v) for v in rng.integers(t // 2, t - 2**8, W)], [p]) for p in (0, W // 2, W - 1)]
    if name == "threshold":  # entries exactly at SPLIT_REL of the top (in), one unit below (out)
        rows = []
        for lo, hi_ in ((2, W - 3), (3, W - 4), (W // 2 - 1, W // 2 + 1)):
            n = W - 4  # entries T - 1; then T at lo and hi, the top 2^20 T inside, a filler f < T
            T = (2**BITS + n) // (2**20 + n + 2)
            f = 2**BITS - 2**20 * T - 2 * T - n * (T - 1)
            assert 0 <= f < T
            r = [T - 1] * W
            r[lo], r[hi_], r[(lo + hi_) // 2] = T, T, 2**20 * T
            r[W - 1] = f  # (outside every window)
            rows.append(r)
        return rows
    if name == "mixed":  # three different shapes in one call
        return [_fill(_rng_rest(rng, W, thin), [0]),
                _fill(_rng_rest(rng, W, 2**23), [W - 1]),
                _fill([int(2**23 * 0.5 ** (i % 24)) for i in range(W)], [W // 2, W // 2 + 1])]
    raise ValueError(name)


CASES = [  # (shape, W, N, k): N = W (offsets near N), N < k (W - 1) + 1 (aliasing), k = 2 .. 200
    ("end", 16, 16, 50), ("end", 9, 10, 200), ("end", 40, 300, 7), ("end", 3, 3, 2),
    ("spread", 16, 17, 200), ("spread", 32, 64, 100), ("spread", 48, 250, 3),
    ("thick_rest", 16, 40, 64), ("thick_rest", 24, 200, 150),
    ("threshold", 12, 12, 31), ("threshold", 20, 160, 97), ("threshold", 33, 256, 2),
    ("mixed", 16, 16, 200), ("mixed", 30, 120, 45), ("mixed", 8, 243, 128),
]


@pytest.mark.parametrize("shape, W, N, k", CASES)
def test_split_within_E_on_adversarial_rows(shape, W, N, k, monkeypatch):
    """Every row, split forced to be tried (SPLIT_LOOSE = 0), within E of the exact circular
    k-fold; the split is taken (spy) and its direct sums ran on the expected window."""
    monkeypatch.setattr(selfcompose, "SPLIT_LOOSE", 0.0)
    taken, dfts = _spies(monkeypatch)
    ints = _shapes(shape, W, seed=W * 7919 + k)
    _check_within_E(ints, k, N)
    assert taken == [[True, True, True]], taken
    rows = np.array(ints, dtype=float)
    top = rows.max(axis=1, keepdims=True)
    cols = np.nonzero(np.any(rows >= 2.0**-20 * top, axis=0))[0]
    assert (cols[0], cols[-1] + 1 - cols[0], 2) in dfts
    if shape == "end":
        assert dfts[0][0] == W - 1
    if shape == "threshold":  # the exact-threshold entries are in the window, those below not
        assert dfts[0][:2] == (2, W - 4)


@pytest.mark.parametrize("drop, direct_rel", [(1, 0.0), (0, 0.0), (2, 1.0)])
def test_split_mixed_with_the_direct_path(drop, direct_rel, monkeypatch):
    """Rows taking the split beside a row forced onto the plain path (its split answer
    dropped: any choice is certified), with the J_hi direct sums forced (DIRECT_REL = 0) or
    not: every row within E of the exact k-fold."""
    monkeypatch.setattr(selfcompose, "SPLIT_LOOSE", 0.0)
    monkeypatch.setattr(selfcompose, "DIRECT_REL", direct_rel)
    taken, dfts = [], []
    real_split, real_dft = _forcing(selfcompose._split_transform), selfcompose._direct_dft

    def split(*args, **kw):
        out = real_split(*args, **kw)
        taken.append([o is not None for o in out])
        out = list(out)
        out[drop] = None
        return out

    def dft(rows, J, N, offset=0, block=selfcompose.BLOCK):
        dfts.append((int(offset), block))
        return real_dft(rows, J, N, offset=offset, block=block)

    monkeypatch.setattr(selfcompose, "_split_transform", split)
    monkeypatch.setattr(selfcompose, "_direct_dft", dft)
    ints = _shapes("mixed", 20, seed=11 + drop)
    _check_within_E(ints, 60, 90)
    assert taken == [[True, True, True]], taken
    assert any(b == 2 for _, b in dfts)
    if direct_rel == 0.0:  # the J_hi direct sums ran for the dropped row
        assert (0, selfcompose.BLOCK) in dfts


def _property_case(seed, W, extra, k, kinds, force):
    """Random rows (thin, thick, sparse, geometric or 2^-14-level rests; 1 to 3 big points,
    anywhere), random N >= W and k, the split forced or chosen: every row within E."""
    rng = np.random.default_rng(seed)
    N = W + extra
    ints = []
    for kind in kinds:
        if kind == 0:
            r = _rng_rest(rng, W, 2**8)
        elif kind == 1:
            r = _rng_rest(rng, W, 2 ** (BITS - 21))
        elif kind == 2:
            r = [int(v) if rng.random() < 0.3 else 0 for v in rng.integers(0, 2**20, W)]
        elif kind == 3:
            r = [int(2**22 * 0.5 ** (i % 30)) for i in range(W)]
        else:
            r = _rng_rest(rng, W, 2**30)
        big = sorted({int(p) for p in rng.integers(0, W, int(rng.integers(1, 4)))})
        ints.append(_fill(r, big))
    old = selfcompose.SPLIT_LOOSE
    real = selfcompose._split_transform
    taken = []

    def split(*args, **kw):
        out = (_forcing(real) if force else real)(*args, **kw)
        taken.append([o is not None for o in out])
        return out

    selfcompose.SPLIT_LOOSE, selfcompose._split_transform = 0.0, split
    try:
        _check_within_E(ints, k, N)
    finally:
        selfcompose.SPLIT_LOOSE, selfcompose._split_transform = old, real
    assert taken and (not force or all(taken[0])), taken  # (taken or not: both certified)


_KINDS = st.lists(st.integers(0, 4), min_size=3, max_size=3)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), W=st.integers(2, 24), extra=st.integers(0, 80), k=st.integers(2, 80),
       kinds=_KINDS, force=st.booleans())
def test_split_within_E_property(seed, W, extra, k, kinds, force):
    _property_case(seed, W, extra, k, kinds, force)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**31), W=st.integers(2, 48), extra=st.integers(0, 250), k=st.integers(2, 200),
       kinds=_KINDS, force=st.booleans())
def test_split_within_E_property_wide(seed, W, extra, k, kinds, force):
    _property_case(seed, W, extra, k, kinds, force)


# ----------------------------------------------------------------------------- the direct sums


def _mp_dft(row, j: int, N: int, offset: int):
    return mp.fsum(mp.mpf(float(row[q])) * mp.expjpi(-mp.mpf(2 * j * (offset + q)) / N)
                   for q in range(len(row)) if row[q] != 0.0)


@pytest.mark.parametrize("N", [2**23, 8_000_000, 3**14])
def test_direct_dft_offsets_near_the_largest_N(N):
    """Offsets near N at the largest lengths (residues J (offset + q) ~ 2^45 in int64), the
    frequencies near N/2 and random, blocks of 2 and BLOCK: within delta |x|_1 (50 digits)."""
    rng = np.random.default_rng(N)
    W = 7
    rows = rng.random((2, W)) ** 3
    rows[0, 0] = 1.0
    J = np.unique(np.concatenate([[0, 1, N // 2 - 1, N // 2], rng.integers(0, N // 2 + 1, 8)]))
    for offset in (N - W, N - W - 1, N // 2 - 3, 0):
        for block in (2, selfcompose.BLOCK):
            X, delta = selfcompose._direct_dft(rows, J, N, offset=offset, block=block)
            with mp.workdps(50):
                for b in range(2):
                    s1 = mp.fsum(mp.mpf(float(v)) for v in rows[b])
                    for i, j in enumerate(J.tolist()):
                        err = abs(mp.mpc(X[b, i].real, X[b, i].imag) - _mp_dft(rows[b], j, N, offset))
                        assert err <= delta * s1, (N, offset, block, j)


def test_direct_dft_table_path_with_an_offset():
    """More pairs than N (the twiddle table), an offset near N, blocks of 2, nb blocks across
    a power of two (d = ceil(log2 nb)): sampled frequencies within delta |x|_1 (50 digits)."""
    N = 2**16
    rng = np.random.default_rng(3)
    for W in (5, 8, 9, 17):
        rows = rng.random((1, W))
        J = np.arange(N // 2 + 1)
        assert J.size * (-(-W // 2) * 2) > N
        offset = N - W + 1
        X, delta = selfcompose._direct_dft(rows, J, N, offset=offset, block=2)
        nb = -(-W // 2)
        assert delta == (24.0 + 1.5 * (2 + max(0, (nb - 1).bit_length()))) * selfcompose.UNIT
        with mp.workdps(50):
            s1 = mp.fsum(mp.mpf(float(v)) for v in rows[0])
            for j in [0, 1, 2, N // 4, N // 2 - 1, N // 2] + rng.integers(0, N // 2 + 1, 10).tolist():
                err = abs(mp.mpc(X[0, j].real, X[0, j].imag) - _mp_dft(rows[0], j, N, offset))
                assert err <= delta * s1, (W, j)


# ----------------------------------------------------------------------------- end to end (slow)


E2E = [  # (sigma, q, k, delta_g): the split taken; the squared bracket below 60 s on the audit's machine
    (0.6, 1e-3, 1000, 1e-5),
    (0.6, 1e-4, 10**4, 1e-8),
    (1.0, 1e-3, 10**4, 1e-6),
    (1.2, 1e-4, 10**5, 1e-5),
    (1.5, 1e-5, 10**5, 1e-12),
    (1.5, 1e-3, 10**5, 1e-8),
    (0.7, 3e-4, 30000, 1e-9),
    (1.5, 1e-4, 10**4, 1e-5),
    (1.0, 1e-5, 10**4, 1e-12),
    (1.5, 1e-4, 10**5, 1e-8),
    (0.9, 5e-4, 30000, 1e-7),
    (1.2, 1e-5, 10**5, 1e-10),
]


@pytest.mark.slow
@pytest.mark.parametrize("sigma, q, k, delta_g", E2E)
def test_end_to_end_split_brackets_meet_the_squared_ones(sigma, q, k, delta_g, monkeypatch):
    import mpmath as mpm

    import optcomp
    from optcomp._lattice import grouped
    from optcomp.mechanisms import Gaussian, Subsampled

    import reference_dpsgd as rd

    taken = []
    real = selfcompose._split_transform

    def split(*args, **kw):
        out = real(*args, **kw)
        taken.append(sum(o is not None for o in out))
        return out

    monkeypatch.setattr(selfcompose, "_split_transform", split)
    M = Subsampled(Gaussian(sigma), q)
    try:
        b = optcomp.epsilon_bounds(M, k=k, delta_g=delta_g, tol=1e-3)
    except optcomp.ApproxTooCostly as exc:
        b = exc.bounds
    assert taken and max(taken) > 0, taken
    monkeypatch.setattr(grouped, "POWER_FFT", False)
    try:
        s = optcomp.epsilon_bounds(M, k=k, delta_g=delta_g, tol=1e-3)
    except optcomp.ApproxTooCostly as exc:
        s = exc.bounds
    assert max(b.lower, s.lower) <= min(b.upper, s.upper), (b, s)
    with mpm.workdps(rd.DPS):
        one = rd.ref_eps_poisson(rd.gauss(sigma), q, mpm.mpf(delta_g))
    assert b.upper >= one


# ----------------------------------------------------------------------------- large k (mpmath)


def _mp_circular(row, k: int, N: int, dps: int = 60) -> list:
    """The exact circular k-fold of one float row to ``dps`` digits: c = F^-1 (A^k), A the
    DFT of the row zero-padded to N, every step in mpmath (A^k within k 10^-dps relative)."""
    with mp.workdps(dps):
        x = [mp.mpf(float(v)) for v in row]
        w = [mp.expjpi(-mp.mpf(2 * t) / N) for t in range(N)]
        Ak = [mp.fsum(x[q] * w[(j * q) % N] for q in range(len(x)) if x[q] != 0) ** k for j in range(N)]
        return [mp.re(mp.fsum(Ak[j] * w[(-i * j) % N] for j in range(N))) / N for i in range(N)]


@pytest.mark.parametrize("k, N, W, big", [(1000, 32, 12, (11,)), (10**4, 24, 24, (0, 23)), (10**5, 16, 9, (4,)),
                                          (123457, 20, 20, (19,)), (10**6, 16, 16, (3, 12))])
def test_split_large_k_against_mpmath(k, N, W, big, monkeypatch):
    """The rarely sampled regime: one or two points hold all but ~2^-30 of each row, so every
    |A_j| is within ~2^-30 of 1 and the k-th power keeps all N frequencies (sum m^(k-1) ~ N,
    E ~ k c): within E of the 60-digit circular k-fold, for k up to 10^6."""
    monkeypatch.setattr(selfcompose, "SPLIT_LOOSE", 0.0)
    taken, dfts = _spies(monkeypatch)
    rng = np.random.default_rng(k + N)
    ints = [_fill(_rng_rest(rng, W, 2**14), list(big)) for _ in range(2)]
    rows = np.array(ints, dtype=float) * 2.0**-BITS
    c, E, _ = selfcompose._kfold_circular(rows, k, N, 1)
    assert taken == [[True, True]], taken
    for b in range(2):
        ref = _mp_circular(rows[b], k, N)
        with mp.workdps(60):
            worst = max(abs(mp.mpf(float(c[b, i])) - ref[i]) for i in range(N))
        assert worst <= E[b], (b, float(worst), E[b])
        assert E[b] < 1e-6
