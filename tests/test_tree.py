"""The FFT convolution charge of the certified tree, F(N) = (40 log2 N + 10) u
(:func:`optcomp._lattice.tree._fft_error`), checked piece by piece against its derivation:
the algorithm analysed is the one scipy.fft runs (a transcription of pocketfft reproduces it
bit for bit), the constants of the proof are recomputed from that transcription, the twiddle
factors are within the derived distance of 40-digit mpmath values, the whole bound, summed
pass by pass, stays below the charge for every 5-smooth length up to 2^40, and convolutions
of random rows stay within it of exact integer convolutions, in double and long double."""

from __future__ import annotations

import math
import platform

import mpmath as mp
import numpy as np
import pytest
import scipy.fft

import pocketfft_model as pm
from optcomp._lattice import tree
from optcomp._rounding import LIBM_ULPS

# the constants of _fft_error's docstring (units of u)
BETA = {2: 1.415, 3: 6.206, 4: 6.001, 5: 12.906}
TAU = 23.1

_X86 = platform.machine().lower() in ("x86_64", "amd64")
_EXTENDED = np.finfo(np.longdouble).nmant >= 63  # x87 extended (or wider) long double
U64 = 2.0**-64


def _smooth(limit: int) -> list[int]:
    return sorted(2**a * 3**b * 5**c for a in range(64) for b in range(41) for c in range(28)
                  if 2 <= 2**a * 3**b * 5**c <= limit)


def _ld_fct(n: int):
    return np.longdouble(1) / np.longdouble(n)


# ----------------------------------------------------------------------------- the algorithm


@pytest.mark.skipif(not _X86, reason="checked bit for bit on x86-64 (elsewhere fused multiply-adds "
                                     "may remove roundings, which the bound allows)")
def test_transcription_reproduces_scipy_fft_bit_for_bit():
    """rfft and irfft of scipy.fft are the pocketfft passes the proof analyses: the
    transcription (radf2-5/radb2-5 and the twiddle tables, kept in pocketfft's operation
    order) gives identical bits, batched rows included (pocketfft's SIMD path)."""
    rng = np.random.default_rng(7)
    lengths = [n for n in _smooth(300)] + [384, 500, 625, 729, 1000, 1125, 2025, 2048, 3000]
    for n in lengths:
        x = rng.random((3, n)) ** 4
        y = scipy.fft.rfft(x, axis=-1)
        assert np.array_equal(np.array(pm.rfftp(list(x.T), True, float)).T, pm.packed(y, n)), n
        back = pm.rfftp(list(pm.packed(y, n).T), False, float, fct=float(_ld_fct(n)))
        assert np.array_equal(np.array(back).T, scipy.fft.irfft(y, n, axis=-1)), n
    if not _EXTENDED:
        return
    for n in (2, 3, 4, 5, 6, 8, 12, 15, 16, 30, 45, 60, 64, 75, 100, 120, 125, 243, 256):
        x = (rng.random((2, n)) ** 4).astype(np.longdouble) / 3
        y = scipy.fft.rfft(x, axis=-1)
        assert y.dtype == np.clongdouble
        assert np.array_equal(np.array(pm.rfftp(list(x.T), True, np.longdouble)).T, pm.packed(y, n)), n
        back = pm.rfftp(list(pm.packed(y, n).T), False, np.longdouble, fct=_ld_fct(n))
        assert np.array_equal(np.array(back).T, scipy.fft.irfft(y, n, axis=-1)), n


def test_factorization_has_at_most_one_radix_two_pass():
    for n in _smooth(10**6):
        f = pm.factorize(n)
        assert math.prod(f) == n and set(f) <= {2, 3, 4, 5} and f.count(2) <= 1


@pytest.mark.parametrize("r", [2, 3, 4, 5])
@pytest.mark.parametrize("forward", [True, False])
def test_each_pass_is_a_scaled_isometry_with_the_stated_butterfly_constant(r, forward):
    """Step 1 and 3 of the proof: in the half-complex norm every exact pass is sqrt(r)
    times an isometry, and the first-order butterfly factor beta_r (paths and their
    roundings, every column type: real column 0, the middle column of an even block,
    complex columns) is at most the docstring's."""
    for ido in ((1, 3, 5, 7) if r % 2 else (1, 2, 3, 4, 6, 8)):
        beta, sv = pm.butterfly_constant(r, ido, forward)
        assert np.allclose(sv, math.sqrt(r), rtol=1e-12, atol=0.0), (r, ido, sv)
        assert beta <= BETA[r], (r, ido, beta)
    # and the constant is attained (it is not a loose guess): the worst column type
    worst = max(pm.butterfly_constant(r, ido, f)[0] for f in (True, False) for ido in (3, 4) if r % 2 == 0 or ido == 3)
    assert worst >= BETA[r] - 0.002


# ----------------------------------------------------------------------------- the twiddles


def _nu_mu(L: int) -> tuple[float, float, float]:
    """(nu, mu, tau) of the docstring from L = LIBM_ULPS (units of u): angles within 3u,
    cos and sin within (pi/4)^2 3u + L u and (pi/4) 3u + L u."""
    nu = math.hypot((math.pi / 4) ** 2 * 3 + L, (math.pi / 4) * 3 + L) * (1 + 1e-12)
    g2 = math.sqrt(2) * 2 * (1 + 1e-12)
    mu = 2 * nu + g2 + 1e-9
    return nu, mu, mu + g2 * (1 + 1e-9)


def test_tau_of_the_docstring_follows_from_libm_ulps():
    assert _nu_mu(LIBM_ULPS)[2] <= TAU


@pytest.mark.parametrize("dt", [float, np.longdouble])
def test_twiddle_factors_within_the_derived_distance(dt):
    if dt is np.longdouble and not _EXTENDED:
        pytest.skip("no extended long double")
    u = 2.0**-53 if dt is float else U64
    nu, mu, _ = _nu_mu(LIBM_ULPS)
    worst_entry = worst_w = 0.0
    with mp.workdps(40):
        for n in (6, 45, 64, 1000, 3125, 3456):
            roots = pm.UnityRoots(n, dt)
            step = roots.mask + 1
            for idx, (c, s) in list(enumerate(roots.v1)) + [(i * step, v) for i, v in enumerate(roots.v2)]:
                z = mp.expjpi(mp.mpf(2 * idx) / n)
                worst_entry = max(worst_entry, float(abs(mp.mpc(mp.mpf(repr(float(c))) if dt is float else _mp(c),
                                                                mp.mpf(repr(float(s))) if dt is float else _mp(s)) - z)) / u)
            for idx in range(0, n, max(1, n // 97)):
                wr, wi = roots[idx]
                z = mp.expjpi(mp.mpf(2 * idx) / n)
                worst_w = max(worst_w, float(abs(mp.mpc(_mp(wr), _mp(wi)) - z)) / u)
    assert worst_entry <= nu and worst_w <= mu, (worst_entry, worst_w)


def _mp(x) -> mp.mpf:
    """A float or numpy.longdouble as an exact mpmath number."""
    return mp.mpf(np.format_float_scientific(np.longdouble(x), precision=40, unique=False))


# ----------------------------------------------------------------------------- the whole bound


def _derived(N: int, u: float, L: int = LIBM_ULPS) -> float:
    """The derived factor of _fft_error's docstring, pass by pass (steps 2-5), in units of u."""
    tau = _nu_mu(L)[2] * u
    fact = pm.factorize(N)
    log_prod = 0.0
    for k, r in enumerate(fact):
        t = 0.0 if k == len(fact) - 1 else tau  # the pass with ido = 1 has no twiddles
        log_prod += math.log1p(t + (1 + t) * BETA[r] * u / (1 - 6 * u))
    eps = math.expm1(log_prod) * (1 + 1e-12)
    g2 = math.sqrt(2) * 2 * u / (1 - 2 * u)
    rho = (eps + g2 * (1 + eps)) * (1 + eps * math.sqrt(N))
    return (rho + (eps + 2.001 * u * (1 + eps)) * (1 + rho)) / u


@pytest.mark.parametrize("u", [2.0**-53, U64])
def test_charge_covers_the_derived_bound_for_every_5_smooth_length(u):
    """Step 5: for all 3460 5-smooth 2 <= N <= 2^40 the derived factor is below the charge
    (at most 0.90 of it), and the closed form of step 5 bounds it too."""
    ratios = []
    for N in _smooth(2**40):
        d = _derived(N, u)
        assert d <= (36.98 * math.log2(N) - 29.3) * (1 + 1e-7) + 1e-9 or N <= 5, N
        ratios.append(d * u / tree._fft_error(N, u))
    assert len(ratios) == 3460 and max(ratios) <= 0.90, max(ratios)


@pytest.mark.parametrize("u", [2.0**-53, U64])
def test_transform_error_covers_each_transform_pass_by_pass(u):
    """_transform_error(N) = 20 log2(N) u (one rfft, or irfft's backward passes) bounds
    prod_k (1 + eta_k) - 1 of steps 2-4 of _fft_error, recomputed from the constants of
    the proof for all 3460 5-smooth 2 <= N <= 2^40 (at most 0.93 of it)."""
    tau = _nu_mu(LIBM_ULPS)[2] * u
    worst = 0.0
    for N in _smooth(2**40):
        fact = pm.factorize(N)
        log_prod = sum(math.log1p((0.0 if k == len(fact) - 1 else tau) + (1 + tau) * BETA[r] * u / (1 - 6 * u))
                       for k, r in enumerate(fact))
        eps = math.expm1(log_prod) * (1 + 1e-12)
        worst = max(worst, eps / tree._transform_error(N, u))
    assert worst <= 0.93, worst


def test_long_double_charge_never_uses_a_unit_below_the_platforms():
    assert tree._fft_error(1000, U64) >= (40 * math.log2(1000) + 10) * float(np.finfo(np.longdouble).epsneg) * 0.999


@pytest.mark.parametrize("dt", [np.float64, np.longdouble])
def test_convolutions_within_the_charge_of_exact_integer_convolutions(dt):
    """Rows of integers below 2^20 (scaled by 2^-20, exact in either type; magnitudes spread
    over six orders), convolved as the tree does (rfft, product, irfft at N =
    next_fast_len(w_a + w_b - 1, real=True)), against the exact integer convolution: the
    2-norm error is within F(N) (|a|_2 |b|_1 + |a|_1 |b|_2), lengths with factors 2, 3, 5
    (powers of 3 and 5 alone included) up to 8000."""
    if dt is np.longdouble and not _EXTENDED:
        pytest.skip("no extended long double")
    u = 2.0**-53 if dt is np.float64 else U64
    rng = np.random.default_rng(11)
    worst = 0.0
    for target in (2, 3, 5, 12, 45, 243, 997, 1125, 2187, 3125, 4096, 5400, 8000):
        wa = target // 3 + 1
        wb = target + 1 - wa
        A = np.floor(2.0**20 * rng.random(wa) ** 6).astype(np.int64)
        B = np.floor(2.0**20 * rng.random(wb) ** 6).astype(np.int64)
        exact = np.convolve(A, B)  # integers below 2^53: exact, and exact as floats
        a = A.astype(dt) * dt(2.0**-20)
        b = B.astype(dt) * dt(2.0**-20)
        N = scipy.fft.next_fast_len(wa + wb - 1, real=True)
        c = scipy.fft.irfft(scipy.fft.rfft(a, N) * scipy.fft.rfft(b, N), N)[: wa + wb - 1]
        err = np.sqrt(np.sum((c - exact.astype(dt) * dt(2.0**-40)) ** 2))
        M = (math.sqrt(float(np.sum(A.astype(float) ** 2))) * float(B.sum())
             + float(A.sum()) * math.sqrt(float(np.sum(B.astype(float) ** 2)))) * 2.0**-40
        bound = tree._fft_error(N, u) * M
        assert float(err) <= bound, (N, float(err), bound)
        worst = max(worst, float(err) / bound)
    assert worst > 0.0  # the errors are real (not all convolutions exact by luck)
