"""Directed rounding: the few primitives every module uses to land on the safe side.

A privacy guarantee that is too small is a security bug, so each computed bound is
rounded toward the side that keeps it valid (larger eps_g, larger delta_g for upper
bounds; the opposite for certified lower bounds).  These helpers do that exactly for
sums and rationals and by whole ulps for single operations.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from itertools import chain

import numpy as np

__all__ = ["UNIT", "TINY", "LIBM_ULPS", "SPECIAL_ABS", "SPECIAL_ULPS", "log_ndtr_error", "up", "down", "exact_dir", "mpf_exact", "mpf_dir", "fraction_mpf", "sum_dir",
           "sum_up", "sum_down", "dot_dir"]

UNIT = 2.0**-53  # unit roundoff of float64
TINY = 2.5e-308  # bound on one underflowed (flushed to zero) probability

# The library assumptions every float error charge rests on -- the only ones; each proof
# that needs one names LIBM_ULPS or this note:
#  1. Arithmetic is IEEE 754 binary64 (and, for numpy.longdouble on x86-64, the x87
#     64-bit-significand format) with round to nearest: every +, -, *, / is correctly
#     rounded, |fl(x op y) - x op y| <= u |x op y| (u = 2^-53, resp. 2^-64).
#  2. The elementary functions exp, expm1, log, log1p, sin and cos -- numpy's elementwise
#     kernels on float64 and numpy.longdouble, math.*, and the C library's sin/cos/sinl/cosl
#     that scipy.fft's pocketfft calls when it builds its twiddle factors -- return a
#     result within LIBM_ULPS units in the last place of the exact value at their
#     (floating-point) argument, i.e. within 2 LIBM_ULPS u relative.  This is an assumption,
#     not a measurement: glibc's manual ("Errors in Math Functions") lists known maximum
#     errors of a few ulps at most for these functions in double and x87 long double, and
#     numpy's SIMD kernels are built to about 1 ulp; 4 leaves a margin.
#  3. scipy.fft's real transforms are pocketfft's FFTPACK-style passes (radices 4, 2, 3, 5
#     for the 5-smooth lengths used here; twiddles from assumption 2), the algorithm whose
#     error is derived in optcomp._lattice.tree._fft_error; tests/test_tree.py checks a
#     transcription of it against scipy.fft bit for bit.
#  4. scipy.special.log_ndtr (Cephes ndtr/erfc, and an asymptotic series below -20) returns
#     log Phi(x) within SPECIAL_ABS + SPECIAL_ULPS u |log Phi(x)| of the exact value at its
#     float argument.  Also an assumption: Cephes documents peak relative errors of 3.4e-14
#     for ndtr on [-13, 0] and of 5.7e-16 for erfc, i.e. absolute errors ~3.4e-14 in the log;
#     1e-12 leaves a 30x margin there.  Far below (x < -60, |log Phi| > 1800) one ulp of the
#     log alone approaches 1e-12, and the error is relative: an independent audit measured at
#     most 3.9 u down to x = -8.9e5 (1.7e-4 absolute there), hence the relative term.  Only
#     the vectorised cell masses of the Gaussian mechanism and the subsampled Gaussian's MGF
#     bound rest on it (the mpmath paths do not).
LIBM_ULPS = 4
SPECIAL_ABS = 1e-12
SPECIAL_ULPS = 8
_MAX = sys.float_info.max


def log_ndtr_error(L):
    """Assumption 4's error bound of float values ``L`` of scipy's log_ndtr (an array):
    SPECIAL_ABS + SPECIAL_ULPS u |L|, the relative term dropped where L is -inf (Phi below the
    floats has no relative error to charge; -inf + inf would be NaN).  The one place every
    Gaussian log-mass charges it from."""
    L = np.asarray(L, dtype=float)
    return SPECIAL_ABS + SPECIAL_ULPS * UNIT * np.where(np.isfinite(L), np.abs(L), 0.0)


_STEPPED_ULPS = 64  # up to this many ulps, moved one at a time; beyond, by the bound of _nudge


def up(x: float, ulps: int = 4) -> float:
    """``x`` moved ``ulps`` units in the last place toward +inf (a safe-side nudge); for many
    ulps (e.g. one per composed mechanism, 10^12 of them) at least that far (:func:`_nudge`)."""
    if ulps > _STEPPED_ULPS:
        if x == -math.inf:  # (the first step leaves the infinity)
            x, ulps = -_MAX, ulps - 1
        return _nudge(x, ulps, math.inf) if math.isfinite(x) else x
    for _ in range(ulps):
        x = math.nextafter(x, math.inf)
    return x


def down(x: float, ulps: int = 4) -> float:
    """``x`` moved ``ulps`` units in the last place toward -inf (at least that far for many)."""
    if ulps > _STEPPED_ULPS:
        if x == math.inf:
            x, ulps = _MAX, ulps - 1
        return _nudge(x, ulps, -math.inf) if math.isfinite(x) else x
    for _ in range(ulps):
        x = math.nextafter(x, -math.inf)
    return x


def _nudge(x: float, n: int, to: float) -> float:
    """A float at least ``n`` ulps from ``x`` toward ``to`` (+-inf), in O(1).  One ulp at y is at
    most max(2^-1074, 2^-52 |y|), so n steps from x stay within a = |x| + n 2^-1074 times
    (1 + 2^-52)^n <= e^(n 2^-52) <= 1 + 2^-51 n of it (n 2^-52 <= 1.25) -- a move of at most
    n 2^-1074 + 2^-51 n a; the nudge is that, its three roundings (relative 2^-53 each) covered
    by the same doubling's slack, and the final sum's by one more step.  Beyond n = 2^50, the
    infinity itself (never reached by a valid input: counts are at most 10^12)."""
    if n > 2**50:
        return to
    move = (abs(x) + n * 2.0**-1074) * (n * 2.0**-51) + n * 2.0**-1074
    return math.nextafter(x + move if to > 0 else x - move, to)


def exact_dir(value: Fraction, up: bool) -> float:
    """The float next to the rational ``value`` on the requested side (up: >= value, else <=)."""
    try:
        f = float(value)
    except OverflowError:  # |value| beyond the float range
        if value > 0:
            return math.inf if up else _MAX
        return -_MAX if up else -math.inf
    fr = Fraction(f)
    if up and fr < value:
        f = math.nextafter(f, math.inf)
    elif not up and fr > value:
        f = math.nextafter(f, -math.inf)
    return f


def mpf_exact(x) -> Fraction:
    """The exact value of a finite mpmath number (a dyadic rational; ``man_exp`` drops the
    sign, the raw tuple keeps it)."""
    sign, man, exp, _ = x._mpf_
    f = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -f if sign else f


def mpf_dir(x, up: bool) -> float:
    """The float next to a finite mpmath number on the requested side (exactly): mpmath's
    directed rounding to 53 bits where the result is a normal float (its documented
    exception is overflow and gradual underflow), else through the exact rational."""
    from mpmath.libmp import round_ceiling, round_floor, to_float

    f = to_float(x._mpf_, rnd=round_ceiling if up else round_floor)
    if 2.0**-1021 <= abs(f) <= 2.0**1023:
        return f
    return exact_dir(mpf_exact(x), up)


def fraction_mpf(x: Fraction):
    """A rational as an mpmath number at the working precision (one rounding)."""
    import mpmath

    return mpmath.mpf(x.numerator) / x.denominator


def sum_dir(values, up: bool) -> float:
    """The exact sum of finite floats, rounded up (``up``) or down to a float.

    ``math.fsum`` rounds correctly; the sign of the exact residual (a second fsum) says
    on which side the exact sum lies.  An overflowing sum is a positive one here (sums of
    non-negative terms, or delta_g minus such a sum).
    """
    values = [float(v) for v in np.asarray(values, dtype=float).ravel()]
    try:
        s = math.fsum(values)
    except OverflowError:
        return math.inf if up else _MAX
    if math.isinf(s):
        return s
    r = math.fsum(chain(values, (-s,)))
    if up and r > 0:
        s = math.nextafter(s, math.inf)
    elif not up and r < 0:
        s = math.nextafter(s, -math.inf)
    return s


def sum_up(values) -> float:
    """The exact real sum of ``values`` rounded up to a float."""
    return sum_dir(values, True)


def sum_down(values) -> float:
    """The exact real sum of ``values`` rounded down to a float."""
    return sum_dir(values, False)


_EXACT_DOT = 4096  # up to this many terms, count-weighted sums are formed in exact rationals


def dot_dir(counts, values, up: bool, *, extra: float = 0.0) -> float:
    """``extra + sum_i counts[i] * values[i]`` (integer counts, finite floats) rounded up or
    down to a float.

    Exact (rational arithmetic) for up to a few thousand terms; beyond that each product
    is charged its rounding (u relative, 2^-1074 absolute) and the correctly rounded sum
    moved outward by that bound, so the result is still on the requested side.
    """
    counts = np.asarray(counts)
    values = np.asarray(values, dtype=float)
    if values.size <= _EXACT_DOT:
        total = Fraction(extra) + sum(
            (Fraction(float(v)) * int(c) for c, v in zip(counts.tolist(), values.tolist()) if v), Fraction(0)
        )
        return exact_dir(total, up)
    with np.errstate(over="ignore"):
        prods = counts.astype(float) * values
    if not np.all(np.isfinite(prods)):
        pos = bool(np.any(prods == math.inf))
        return (math.inf if up else _MAX) if pos else (-_MAX if up else -math.inf)
    try:
        s = math.fsum([extra, *prods.tolist()])
        err = math.fsum(np.abs(prods).tolist()) * UNIT + values.size * 2.0**-1074
    except OverflowError:
        return math.inf if up else _MAX
    err = math.nextafter(err * (1.0 + 4.0 * UNIT), math.inf)
    return math.nextafter(s + err, math.inf) if up else math.nextafter(s - err, -math.inf)
