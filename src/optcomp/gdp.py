"""Composed Gaussian mechanisms in closed form (mu-GDP), certified.

Theorem.  A Gaussian mechanism of noise N(0, sigma²) on a query of ℓ2-sensitivity Δ is
mu-GDP with mu = Δ/sigma (Dong, Roth and Su, *Gaussian Differential Privacy*, JRSS-B 84(1)
2022, Thm. 2.7): its worst pair of neighbours is (N(0, 1), N(mu, 1)) after scaling, and its
privacy loss L = log(dP/dQ) under P is N(mu²/2, mu²).  Losses of independent mechanisms add,
so k such mechanisms with parameters mu_i compose to the loss N(mu²/2, mu²) with

    mu² = Σ_i count_i · Δ_i² / sigma_i²,

exactly the loss of one Gaussian mechanism: composition is tight for Gaussian trade-off
functions, G_mu1 ⊗ G_mu2 = G_sqrt(mu1² + mu2²) (ibid., Cor. 3.3; adaptive composition
included).  Its privacy profile, the least delta for which the composition is (eps, delta)-DP
(ibid., Cor. 2.13; Balle and Wang, *Improving the Gaussian Mechanism for Differential
Privacy*, ICML 2018, Thm. 8), is

    delta(eps) = Φ(a) − e^eps Φ(b),   a = mu/2 − eps/mu,   b = −mu/2 − eps/mu = a − mu,

strictly decreasing in eps ≥ 0 (d delta/d eps = −e^eps Φ(b)) and strictly increasing in mu
(d delta/d mu = φ(a)); note e^eps φ(b) = φ(a).  eps_g(delta_g) is the root of delta(eps) =
delta_g: 0 when delta_g ≥ delta(0) = 2Φ(mu/2) − 1, math.inf when delta_g = 0 (delta(eps) > 0
for every eps when mu > 0).

Guarantee.  :func:`mu_bounds` returns floats mu_lo ≤ mu ≤ mu_hi (mu² summed with directed
rounding, see there); :func:`delta_bounds` and :func:`epsilon_bounds` return
``Bounds(lower, upper)`` with lower ≤ the true value ≤ upper for *every* mu in [mu_lo, mu_hi]
(delta from mu_lo below and mu_hi above, by monotonicity in mu; eps_g from mu_lo below and
mu_hi above).  A one-ulp bracket of mu moves delta by phi(a) ulp(mu), relative mu phi(a)
u/delta -- up to ~1e-11 (mu ~ 10^4, eps ~ 4e7) --, so :func:`composed_mu` hands ends that
carry the exact mu² (:class:`ExactMu`, up to 16 distinct mechanisms) and both functions then
evaluate at mu = sqrt(mu²) itself, the bracket again a few ulps of the value.  For eps_g the bracket is certified through delta itself: the upper end e_hi
carries a proof that delta(e_hi; mu_hi) ≤ delta_g, the lower end e_lo a proof that
delta(e_lo; mu_lo) ≥ delta_g.  Gaps: a few ulps (≤ 1e-12 relative) wherever the true value is
a normal float, the float floor (0, 5e-324) below the float range.

Evaluation and rounding.  Far from the root region the value is decided exactly: with a
and the thresholds compared in rationals, a < −39 gives delta ≤ Φ(a) ≤ φ(39)/39 < 2^-1090
(bracket (0, 5e-324)); a > 39 (only possible for mu > 78, so b ≤ −mu/2 < −39) gives
1 − delta ≤ Φ(−a) + φ(a)/|b| < 2^-1090 (bracket (1 − 2^-53, 1)).  In between, delta is
evaluated in mpmath at a working precision p (u = 2^-p) with a proved error charge
(:func:`_delta_mp`): the direct form Φ(a) − e^eps Φ(b) cancels (down to about mu/|a| of
Φ(a) for small mu: about 32 bits at mu = 1e-8 while delta is a normal float), and the
charge is relative to the two terms, so ``_pairs.settle`` raises p (128, 256, …, 4096 bits)
until the bracket is 2^-64 relative; the bracket is then rounded outward to floats
(``_rounding.mpf_dir``).  Comparisons with delta_g are made in mpmath against the same
charge, never on rounded floats.

Assumption (the one this module rests on, besides IEEE float64 arithmetic): mpmath's
``erf``, ``erfc`` and ``exp`` return results within a few units in the last place of the
exact value at their mpmath argument, at any working precision (mpmath documents its
elementary and error functions as accurate to the working precision; ``ncdf`` is
erfc(−a/√2)/2 or (1 + erf(a/√2))/2 on top of them).  The charge allows 2^10 ulps of each
term.

Layer: vocabulary (``_rounding``, ``_types``, ``_inputs``) and the mpmath helpers of
``_pairs``; no driver, no facade.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import mpmath
import numpy as np
from scipy import optimize, special

from ._inputs import MAX_K, ParameterTypeError, _as_vector, _check_real, _describe, _integer, check_delta_g
from ._pairs import PRECISIONS, mpf_err, settle
from ._rounding import exact_dir, fraction_mpf, mpf_exact
from ._types import Bounds

__all__ = ["mu_bounds", "ExactMu", "split_gaussians", "composed_mu", "gaussians_alone", "delta_bounds", "epsilon_bounds",
           "profile"]

_FAR = 39  # |a| beyond this: delta within 2^-1090 of 0 or of 1 (module docstring)
_ONE_BELOW = 1.0 - 2.0**-53  # the float just below 1
_MAX = sys.float_info.max
_TIGHT = -120  # a decision whose bracket is 2^_TIGHT relative and still straddles delta_g: widen instead
_MARGIN = 2.0**-58  # eps candidates are placed this far (relative) beyond the estimated root
_EXACT_TERMS = 16  # up to this many distinct mechanisms, mu² is summed exactly in rationals


# ---------------------------------------------------------------------------------------------
# mu from the mechanisms

def split_gaussians(others) -> tuple[list, list]:
    """((Gaussian, count) pairs, the other pairs) of ``others``, ((mechanism, count), ...) of
    :mod:`optcomp.mechanisms` objects (a Gaussian is one whose ``gaussian()`` hook answers)."""
    gauss = [(mech, c) for mech, c in others if mech.gaussian() is not None]
    return gauss, [(mech, c) for mech, c in others if mech.gaussian() is None]


class ExactMu(float):
    """A float end of a mu bracket that also carries the exact mu² (``square``, a rational):
    :func:`delta_bounds` and :func:`epsilon_bounds` given two ends carrying the same square
    evaluate delta at mu = sqrt(square) itself (its rounding in mpmath charged) instead of
    at the two float ends -- a one-ulp bracket of mu moves delta by phi(a) times an ulp of
    mu, ~1e-11 relative where mu phi(a)/delta ~ 10^5 (mu ~ 10^4 at eps ~ 4e7)."""

    square: Fraction

    def __new__(cls, value: float, square: Fraction):
        obj = super().__new__(cls, value)
        obj.square = square
        return obj


def composed_mu(gaussians) -> Bounds:
    """:func:`mu_bounds` of (Gaussian, count) pairs: the one Gaussian they compose to (up to
    16 distinct mechanisms: ends that carry the exact mu², :class:`ExactMu`)."""
    params = [g.gaussian() for g, _ in gaussians]
    b = mu_bounds([s for s, _ in params], [d for _, d in params], [c for _, c in gaussians])
    if len(params) <= _EXACT_TERMS and 0.0 < b.lower and b.upper < math.inf:
        sq = sum((int(c) * (Fraction(float(d)) / Fraction(float(s))) ** 2 for (s, d), (_, c) in zip(params, gaussians)),
                 Fraction(0))
        return Bounds(ExactMu(b.lower, sq), ExactMu(b.upper, sq))
    return b


def _square(mu_lo, mu_hi) -> Fraction | None:
    """The exact mu² two ends carry in common (:class:`ExactMu`), else None."""
    if isinstance(mu_lo, ExactMu) and isinstance(mu_hi, ExactMu) and mu_lo.square == mu_hi.square:
        return mu_lo.square
    return None


def gaussians_alone(m, others) -> Bounds | None:
    """The composed mu bracket when the black-box multiset ``m`` (an
    :class:`optcomp._inputs.Mechanisms`) adds nothing -- no pair with eps or delta above 0 --
    and ``others`` are Gaussian mechanisms only; else None (no closed form)."""
    gauss, rest = split_gaussians(others)
    if rest or not gauss or bool((m.eps > 0).any() or (m.delta > 0).any()):
        return None
    return composed_mu(gauss)


def mu_bounds(sigmas, sensitivities=1.0, counts=None) -> Bounds:
    """Certified floats ``Bounds(mu_lo, mu_hi)`` around mu = sqrt(Σ_i counts_i·Δ_i²/sigma_i²),
    the mu-GDP parameter of the composition of Gaussian mechanisms N(0, sigma_i²) on
    queries of ℓ2-sensitivity Δ_i (Dong–Roth–Su, Thm. 2.7 and Cor. 3.3).

    ``sigmas``: a number or a flat sequence of floats > 0; ``sensitivities``: a number (for
    all) or a sequence as long (> 0); ``counts``: None (one each), an integer or a sequence
    of integers ≥ 1 (an integral float such as 1e6 accepted).

    Rounding: up to 16 distinct mechanisms, mu² is summed exactly in rationals and rounded
    outward once.  Beyond, each term m_i = c_i·(Δ_i/σ_i)² is formed in ``numpy.longdouble``
    (unit roundoff u = eps/2 of the platform's format: 2^-64 for x86-64's x87 format, 2^-53
    where it is float64; correctly rounded operations, ``_rounding``'s assumption 1) with
    three roundings (quotient, square, product; c_i ≤ 10^12 exact), so the computed m̂_i
    satisfies m̂_i(1 + u)^-4 ≤ m_i ≤ m̂_i(1 − u)^-4 while every intermediate is normal
    (checked: m̂_i in [2^-900, 2^900], hence t² ≥ m̂_i/2^40 normal too).  Their computed sum
    Ŝ (n − 1 additions of non-negative terms, in any order) is within γ_{n−1} = (n − 1)u/(1 −
    (n − 1)u) of Σ m̂_i relative, so Ŝ/((1 + γ)(1 + u)^4) ≤ Σ m_i ≤ Ŝ/((1 − γ)(1 − u)^4),
    evaluated exactly in rationals (about 2nu wide: 1e-16 for n = 1000 with x87).  Terms
    outside that range are formed exactly in rationals.  The bounds are rounded outward to
    floats and their square roots decided exactly (r² compared with the sum in rationals).
    mu_hi may be ``inf`` when mu² overflows."""
    sig = np.atleast_1d(_as_vector("sigmas", sigmas))
    if sig.size == 0:
        raise ValueError("sigmas must hold at least one mechanism, got an empty sequence")
    n = sig.size
    sens = _as_vector("sensitivities", sensitivities)
    if sens.ndim == 0:
        sens = np.full(n, float(sens))
    elif sens.size != n:
        raise ValueError(f"sensitivities has length {sens.size} but sigmas has {n} entries")
    cnt = _counts(counts, n)
    for name, arr in (("sigmas", sig), ("sensitivities", sens)):
        bad = ~np.isfinite(arr) | (arr <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} must be finite and > 0, got {name}[{i}]={float(arr[i])!r}")
    if n <= _EXACT_TERMS:  # exact rational sum, one outward rounding
        exact = sum((int(k) * (Fraction(float(d)) / Fraction(float(s))) ** 2
                     for k, d, s in zip(cnt.tolist(), sens.tolist(), sig.tolist())), Fraction(0))
        return Bounds(_sqrt_dir(exact_dir(exact, False), False), _sqrt_dir(exact_dir(exact, True), True))
    ld = np.longdouble
    u = Fraction(*np.finfo(ld).eps.as_integer_ratio()) / 2
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        t = sens.astype(ld) / sig.astype(ld)
        m = cnt.astype(ld) * (t * t)  # counts <= 10^12 < 2^53: exact
    ok = (m >= ld(2.0**-900)) & (m <= ld(2.0**900))
    k = int(ok.sum())
    total = Fraction(*np.sum(m[ok]).as_integer_ratio()) if k else Fraction(0)
    gamma = (k - 1) * u / (1 - (k - 1) * u) if k > 1 else Fraction(0)
    hi = total / ((1 - gamma) * (1 - u) ** 4)
    lo = total / ((1 + gamma) * (1 + u) ** 4)
    for i in np.flatnonzero(~ok).tolist():
        exact = int(cnt[i]) * (Fraction(float(sens[i])) / Fraction(float(sig[i]))) ** 2
        hi += exact
        lo += exact
    return Bounds(_sqrt_dir(exact_dir(lo, False), False), _sqrt_dir(exact_dir(hi, True), True))


def _counts(counts, n: int) -> np.ndarray:
    """The counts as int64, each an integer in [1, 10^12] (``_inputs._integer``'s rule; the
    error names ``counts[i]``); vectorised for numeric arrays and lists of numbers."""
    if counts is None:
        return np.ones(n, dtype=np.int64)
    if isinstance(counts, (str, bytes, bool)):
        raise ParameterTypeError(f"counts must be an integer or a sequence of integers >= 1, got {_describe(counts)}")
    if not isinstance(counts, (list, tuple, np.ndarray)):
        return np.full(n, _integer("counts", counts, 1, MAX_K), dtype=np.int64)
    items = counts if isinstance(counts, np.ndarray) else list(counts)
    if len(items) != n:
        raise ValueError(f"counts has length {len(items)} but sigmas has {n} entries")
    arr = None
    if isinstance(counts, np.ndarray) or not any(isinstance(v, (bool, np.bool_)) for v in items):
        try:
            arr = np.asarray(items)
        except (TypeError, ValueError):  # ragged or exotic: checked one by one below
            arr = None
    if arr is not None and arr.ndim == 1 and arr.dtype.kind in "iuf":
        with np.errstate(invalid="ignore"):
            good = (arr >= 1) & (arr <= MAX_K) & (arr == np.floor(arr))
        if good.all():
            return arr.astype(np.int64)
    return np.asarray([_integer(f"counts[{i}]", v, 1, MAX_K) for i, v in enumerate(list(items))], dtype=np.int64)


def _sqrt_dir(s: float, up: bool) -> float:
    """sqrt(s) rounded up or down to a float, decided exactly (s ≥ 0 or inf)."""
    if s == math.inf:
        return math.inf if up else _MAX
    if s <= 0:
        return 0.0
    r = math.sqrt(s)
    sq, exact = Fraction(r) ** 2, Fraction(s)
    if up and sq < exact:
        r = math.nextafter(r, math.inf)
    elif not up and sq > exact:
        r = math.nextafter(r, -math.inf)
    return r


# ---------------------------------------------------------------------------------------------
# validation

def _check_mus(mu_lo, mu_hi) -> tuple[float, float]:
    lo = _check_real("mu_lo", mu_lo)
    hi = _check_real("mu_hi", mu_hi)
    if not (math.isfinite(lo) and lo >= 0):
        raise ValueError(f"mu_lo must be finite and >= 0, got {lo!r}")
    if not hi >= lo:
        raise ValueError(f"mu_hi must be >= mu_lo = {lo!r}, got {hi!r}")
    return lo + 0.0, hi + 0.0


def _check_eps(eps) -> float:
    x = _check_real("eps", eps)
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {x!r}")
    return x + 0.0


# ---------------------------------------------------------------------------------------------
# delta(eps; mu): exact far regions, certified mpmath in between

def _region(mu: float, x) -> int:
    """−1 when a = mu/2 − x/mu < −39, +1 when a > 39, 0 otherwise; decided exactly
    (x a float or an mpmath number; mu finite > 0, or an :class:`ExactMu`: mu = sqrt(S),
    a < −39 <=> x − S/2 > 39 mu <=> (x − S/2)² > 39² S with x − S/2 > 0, and likewise)."""
    xf = Fraction(x) if isinstance(x, float) else mpf_exact(x)
    if isinstance(mu, ExactMu):
        sq = mu.square
        d = xf - sq / 2
        if d > 0 and d * d > _FAR * _FAR * sq:
            return -1
        if d < 0 and d * d > _FAR * _FAR * sq:
            return 1
        return 0
    m = Fraction(mu)
    half = m * m / 2
    if xf > half + _FAR * m:
        return -1
    if xf < half - _FAR * m:
        return 1
    return 0


def _delta_mp(mu: float, x):
    """(value, err, slope) of delta(x; mu) at the working precision p, u = 2^-p, for a
    finite float mu > 0 and an exact x ≥ 0 (float or mpf) in region 0: |value − delta| ≤ err,
    and slope ≈ e^x Φ(b) = −d delta/dx (an estimate, for Newton steps only).

    Error charge.  mu and x are exact.  q = x/mu is rounded (≤ u|q|), â = mu/2 − q̂ and
    b̂ = −mu/2 − q̂ once more (mu/2 is exact), and ``ncdf`` divides its argument by a
    rounded √2 (≤ 3u relative): Φ is evaluated at ã with |ã − a| ≤ u|q| + 4.01u|â| ≤
    D_a = 8u(|q̂| + |â|), likewise b with D_b.  Φ moves by at most D·max φ on the segment,
    and φ(t + d) ≤ φ(t)e^{|t||d|}; with |â|D_a, |b̂|D_b ≤ 0.1 (checked, else err = inf and the
    precision rises) and e^x φ(b) = φ(a), both moves are ≤ 1.4 φ(â)·D ≤ 2·npdf(â)·D.  The
    functions (erfc/erf, exp: the module's assumption), the product e^x·Φ(b) and the
    difference add a few ulps of t1, t2 and the value: charged 2^10 ulps each (``mpf_err``),
    a margin of over 60 that also covers the rounding of the charge itself.  Finally the
    returned err is raised by 4u(|value| + err), so that value ± err formed in mpmath (one
    rounding to nearest) still encloses delta."""
    exact = isinstance(mu, ExactMu)
    m = mpmath.sqrt(fraction_mpf(mu.square)) if exact else mpmath.mpf(mu)
    X = mpmath.mpf(x)
    q = X / m
    a = m / 2 - q
    b = -m / 2 - q
    t1 = mpmath.ncdf(a)
    t2 = mpmath.exp(X) * mpmath.ncdf(b)
    v = t1 - t2
    u = mpmath.ldexp(1, -mpmath.mp.prec)
    da = 8 * u * (abs(q) + abs(a))
    db = 8 * u * (abs(q) + abs(b))
    if abs(a) * da > 0.1 or abs(b) * db > 0.1:
        return max(v, mpmath.mpf(0)), mpmath.inf, t2
    err = mpf_err(t1, t2, v, bits=10) + 2 * mpmath.npdf(a) * (da + db)
    if exact:  # m = sqrt(S) within 3u m (S rounded, sqrt): delta moves by phi(a) per unit of mu
        err += 2 * mpmath.npdf(a) * 4 * u * m
    v = max(v, mpmath.mpf(0))
    return v, err + 4 * u * (v + err), t2


def _delta_bracket(mu: float, x: float) -> tuple[float, float]:
    """Floats (lo, hi) around delta(x; mu) (mu ≥ 0 or inf, x ≥ 0 finite)."""
    if mu == 0:
        return 0.0, 0.0  # P = Q: no loss
    if mu == math.inf:
        return 1.0, 1.0
    r = _region(mu, x)
    if r < 0:
        return 0.0, 5e-324
    if r > 0:
        return _ONE_BELOW, 1.0
    return settle(lambda: _delta_mp(mu, x)[:2])


def delta_bounds(mu_lo, mu_hi, eps) -> Bounds:
    """Certified ``Bounds(lower, upper)`` of the privacy profile of mu-GDP,

        delta(eps) = Φ(mu/2 − eps/mu) − e^eps Φ(−mu/2 − eps/mu)

    (Dong–Roth–Su Cor. 2.13; Balle–Wang Thm. 8), for every mu in [mu_lo, mu_hi]: ``lower``
    ≤ delta(eps; mu_lo) and ``upper`` ≥ delta(eps; mu_hi) (delta increases with mu).  The
    composed guarantee: the Gaussian mechanisms of :func:`mu_bounds` are (eps, upper)-DP, and
    not (eps, d)-DP for any d < lower.  Gap a few ulps (the float floor below 2^-1022).

    >>> lo, hi = mu_bounds([2.0, 4.0], counts=[3, 4])  # mu² = 3/4 + 4/16 = 1
    >>> delta_bounds(lo, hi, 1.0)
    Bounds(lower=0.12693673750664394, upper=0.12693673750664397)
    """
    sq = _square(mu_lo, mu_hi)
    lo_mu, hi_mu = _check_mus(mu_lo, mu_hi)
    x = _check_eps(eps)
    if sq is not None and 0.0 < lo_mu and hi_mu < math.inf:
        b = _delta_bracket(ExactMu(hi_mu, sq), x)
        return Bounds(b[0], b[1])
    hi = _delta_bracket(hi_mu, x)
    lo = hi if lo_mu == hi_mu else _delta_bracket(lo_mu, x)
    return Bounds(lo[0], hi[1])


def profile(mu, eps) -> float:
    """delta(eps) of mu-GDP rounded up (never below the true value): ``delta_bounds(mu, mu,
    eps).upper``."""
    return delta_bounds(mu, mu, eps).upper


# ---------------------------------------------------------------------------------------------
# eps_g(delta_g; mu): Newton on log delta in mpmath, certified by decisions on floats

def _decide(mu: float, x, target: float) -> int:
    """+1 if delta(x; mu) ≥ target is proved, −1 if delta(x; mu) ≤ target is proved, 0 if
    undecided (the bracket straddles target even at 2^-120 relative, or the precisions ran
    out).  mu finite > 0, 0 < target < 1."""
    r = _region(mu, x)
    if r:
        return -1 if r < 0 else 1  # delta < 2^-1090 < every positive float; > 1 − 2^-1090 > target
    t = mpmath.mpf(target)
    for prec in PRECISIONS:
        with mpmath.workprec(prec):
            v, err, _ = _delta_mp(mu, x)
            if v - err >= t:
                return 1
            if v + err <= t:
                return -1
            if err <= v * mpmath.ldexp(1, _TIGHT):
                return 0
    return 0


def _estimate(mu: float, x):
    """(value, slope) of delta(x; mu) at a precision where the value is 2^-30 relative (for
    Newton steps; not certified)."""
    for prec in PRECISIONS:
        with mpmath.workprec(prec):
            v, err, t2 = _delta_mp(mu, x)
            if v > 0 and err <= v * mpmath.ldexp(1, -30):
                return v, t2
    return None


def _log_delta_float(mu: float, e: float) -> float:
    """log delta(e; mu) in float64 (scipy's log_ndtr; a guess only)."""
    a = mu / 2 - e / mu
    b = -mu / 2 - e / mu
    la = float(special.log_ndtr(a))
    r = e + float(special.log_ndtr(b)) - la  # log(e^e Φ(b) / Φ(a)) < 0
    if not r < 0:
        return -math.inf
    return la + math.log(-math.expm1(r))


def _eps_max(mu: float, delta_g: float) -> float:
    """An eps with delta(eps; mu) ≤ Φ(a) ≤ e^{-t²/2}/2 ≤ delta_g (a = −t); a bracket end for
    the guess (float arithmetic; the certification does not rely on it)."""
    t = math.sqrt(2.0 * max(0.0, -math.log(delta_g)))
    return mu * mu / 2 + mu * t


def _guess(mu: float, delta_g: float) -> float:
    """A float root of log delta(e) = log delta_g by Brent's method on scipy's log_ndtr."""
    hi = _eps_max(mu, delta_g)
    target = math.log(delta_g)
    try:
        return float(optimize.brentq(lambda e: _log_delta_float(mu, e) - target, 0.0, hi, xtol=1e-300,
                                     rtol=4e-15, maxiter=200))
    except (ValueError, RuntimeError, OverflowError, ZeroDivisionError):
        return hi / 2


def _root(mu: float, delta_g: float, start: float | None) -> float:
    """An estimate of the root of delta(eps; mu) = delta_g (0 < delta_g < 1): Newton steps
    on log delta in mpmath (d log delta/d eps = −e^eps Φ(b)/delta) from a float start
    (``start``, or Brent's method on scipy's log_ndtr), kept inside a bracket [lo, hi] of
    estimated signs (bisection when a step leaves it).  Not certified: :func:`_certify`
    proves what is returned to the caller."""
    lo, hi = 0.0, _eps_max(mu, delta_g)
    if not math.isfinite(hi):
        hi = _MAX
    if start is None:
        start = _guess(mu, delta_g)
    e = start if lo <= start <= hi else hi / 2
    with mpmath.workprec(128):
        ln_t = mpmath.log(mpmath.mpf(delta_g))
    for _ in range(200):
        r = _region(mu, e)
        est = None if r else _estimate(mu, e)
        if est is None:  # a far region (or no usable value): bisect toward the root
            if r > 0:
                lo = e
            else:
                hi = e
            new = (lo + hi) / 2
        else:
            v, t2 = est
            with mpmath.workprec(128):
                f = mpmath.log(v) - ln_t
                if f > 0:
                    lo = max(lo, e)
                else:
                    hi = min(hi, e)
                step = f * v / t2 if t2 > 0 else mpmath.inf
                nxt = mpmath.mpf(e) + step
                if nxt <= 0:  # the root is at (or estimated below) 0: eps_g 0 or tiny
                    return 0.0
                # quadratic convergence: a step this small leaves an error far below _MARGIN
                if abs(step) <= max(e, 5e-324) * 2.0**-36:
                    return float(nxt)
                new = float(nxt) if lo < nxt < hi else (lo + hi) / 2
        if new == e:
            return e
        e = new
    return e


def _certify(mu: float, delta_g: float, root: float, upper: bool) -> float:
    """A float e with delta(e; mu) ≤ delta_g proved (``upper``) or ≥ delta_g proved (lower;
    0.0, always a valid lower end, when nothing positive is proved): first a candidate
    _MARGIN beyond the estimated root, then steps that grow fourfold (the far regions decide
    every candidate beyond them)."""
    sign = 1 if upper else -1
    want = -1 if upper else 1
    c = exact_dir(Fraction(root) * (1 + sign * Fraction(_MARGIN)), upper)
    step = max(root, _eps_max(mu, delta_g) * 2.0**-60, 5e-324) * 2.0**-52
    for _ in range(1200):
        if c <= 0 and not upper:
            return 0.0
        if c == math.inf:
            return math.inf
        if _decide(mu, max(c, 0.0), delta_g) == want:
            return max(c, 0.0)
        c = c + sign * step
        step *= 4
    return math.inf if upper else 0.0  # pragma: no cover - the far regions decide long before


def _eps_side(mu: float, delta_g: float, upper: bool, start: float | None):
    """(certified end, root estimate) of eps_g for one mu: the upper end (delta(e) ≤ delta_g
    proved) or the lower end (delta(e) ≥ delta_g proved)."""
    if mu == 0:
        return 0.0, None  # delta ≡ 0
    if mu == math.inf or delta_g == 0:
        return math.inf, None  # delta ≡ 1, or delta(e) > 0 for every e
    if mu > 1e150 and _decide(mu, _MAX, delta_g) == 1:
        return (math.inf if upper else _MAX), None  # the root lies beyond the float range
    if start is None and _log_delta_float(mu, 0.0) - math.log(delta_g) < 1e-6:
        # delta(0) near or below delta_g (float estimate): decide eps_g = 0 first
        d0 = _decide(mu, 0.0, delta_g)
        if d0 == -1:
            return 0.0, 0.0
        if d0 == 0:
            return _certify(mu, delta_g, 0.0, upper), 0.0
    root = _root(mu, delta_g, start)
    return _certify(mu, delta_g, root, upper), root


def epsilon_bounds(mu_lo, mu_hi, delta_g) -> Bounds:
    """Certified ``Bounds(lower, upper)`` of eps_g, the least eps with delta(eps) ≤ delta_g
    for mu-GDP (the optimal composition of Gaussian mechanisms; Dong–Roth–Su Cor. 2.13 and
    3.3), for every mu in [mu_lo, mu_hi]: delta(upper; mu_hi) ≤ delta_g and delta(lower;
    mu_lo) ≥ delta_g are proved, so eps_g(mu) ∈ [lower, upper].  ``Bounds(0, 0)`` when
    delta_g ≥ delta(0) = 2Φ(mu/2) − 1; ``math.inf`` when unattainable (delta_g = 0 with mu >
    0, mu_hi = inf, or a root beyond the float range).  Gap a few ulps (≤ 1e-12 relative).

    >>> lo, hi = mu_bounds(1.0, counts=4)  # four sigma = 1 Gaussians: mu = 2
    >>> epsilon_bounds(lo, hi, 1e-6)
    Bounds(lower=10.997151214220649, upper=10.997151214220652)
    """
    sq = _square(mu_lo, mu_hi)
    lo_mu, hi_mu = _check_mus(mu_lo, mu_hi)
    dg = check_delta_g(delta_g)
    if sq is not None and 0.0 < lo_mu and hi_mu < math.inf:  # one mu, exact: both ends from it
        lo_mu = hi_mu = ExactMu(hi_mu, sq)
    upper, root = _eps_side(hi_mu, dg, True, None)
    if upper == 0:
        return Bounds(0.0, 0.0)
    if lo_mu == hi_mu and root is not None:
        lower = _certify(lo_mu, dg, root, False)
    else:
        lower, _ = _eps_side(lo_mu, dg, False, root)
    return Bounds(lower, upper)
