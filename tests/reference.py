r"""An independent high-precision reference for optimal composition, written from the theorems.

Nothing here imports or mirrors :mod:`optcomp`; every formula is taken from the papers:

* **MV Def. 3.1 / Lemma 3.2**: every (eps_i, delta_i)-DP mechanism is dominated by a
  randomized response; the composition's hockey-stick curve is that of the product of
  randomized responses.
* **MV Thm 1.5 / KOV Thm 3.3** (the optimum, written as a hockey-stick divergence):

      delta_opt(eps_g) = 1 - prod_i (1 - delta_i) * (1 - S(eps_g)),
      S(x) = E_P0[(1 - e^{x - L})_+] = sum_{atoms l > x} P0[L = l] (1 - e^{x - l}),

  where L = sum_i s_i eps_i, s_i = +-1 independent with P0[s_i = +1] = e^{eps_i}/(1 + e^{eps_i}).
  For ``count`` identical mechanisms with the same eps, the number m of "+1" is
  Binomial(count, p) and the atom is (2m - count) eps.
* ``OptComp(delta_g)`` is the least eps_g >= 0 with delta_opt(eps_g) <= delta_g, i.e. with
  S(eps_g) <= t := 1 - (1 - delta_g) / prod_i (1 - delta_i); ``inf`` when t < 0.

Exactness.  Every atom position is an exact rational: the binary float inputs are turned
into :class:`fractions.Fraction` and summed exactly, and eps_g (a float, a Fraction or an
mpf) is compared with the atoms exactly, so an eps_g one ulp either side of an atom (e.g. of
the float product ``k * eps`` vs the real k*eps) is on the correct side.  Distances l - x are
exact Fractions converted to mpmath at the working precision (relative error 10^-dps).

Masses.  Binomial masses are evaluated in mpmath (default 80 digits) from log-gamma at the
mode of the window and then by the exact term ratio
    t_{m+1} / t_m = (c - m) e^{eps} / (m + 1),
which is *decreasing in m*.  Hence beyond the upper edge a >= mode of a window, the terms are
dominated by a geometric series, sum_{m > a} t_m <= t_{a+1} / (1 - r_{a+1}) with r_{a+1} < 1,
and symmetrically below a lower edge b <= mode with the downward ratio
t_{m-1}/t_m = m / ((c - m + 1) e^{eps}), which decreases as m decreases.  These tail bounds
are *certified* (not estimates), so every result comes with an interval
[value computed from the kept atoms, that + bound on the dropped mass]; windows are grown
until the dropped mass is below ``TAU`` = 1e-50 relative to the quantity computed (the answer
S(eps_g), or the target t), far below the 1e-12 the library promises.  When a window would
exceed ``max_atoms`` the reference still returns a *certified* interval (the lower end is a
sum of a subset of the nonnegative terms) but flags it as not tight; tests then only check
the safe side.

Precision.  All mpmath work happens inside ``mp.workdps(...)`` (the global precision is never
changed).  The delta direction only adds nonnegative terms (S at the atoms by the recursion
S(l_{j-1}) = (1 - e^{-G}) A_j + e^{-G} S(l_j)), so its relative error is ~10^-dps.  The
epsilon direction solves S(x) = t in closed form on the segment between two consecutive
atoms; the precision is raised with the condition number of that root (kappa in
:func:`_solve`) and the interval widened by a certified margin (:func:`ref_epsilon_bounds`).
The target t = 1 - (1 - delta_g)/prod(1 - delta_i) is computed exactly (Fractions) or at a
precision that resolves its cancellation near the feasibility boundary (:func:`_target`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath as mp
from mpmath.libmp import fzero, mpf_add, mpf_mul

__all__ = [
    "TAU",
    "ReferenceTooCostly",
    "normalise_groups",
    "ref_delta",
    "ref_delta_bounds",
    "ref_epsilon",
    "ref_epsilon_bounds",
    "ref_no_delta_log",
    "ref_feasible",
    "ref_basic_epsilon",
    "ref_basic_delta",
    "ref_drv_epsilon",
    "ref_drv_delta",
    "ref_kov_epsilon",
    "ref_kov_delta",
    "ref_advanced_pure_epsilon",
    "ref_advanced_pure_delta",
    "brute_force_delta",
    "kov_corner_delta",
    "ref_laplace_delta",
    "ref_gaussian_delta",
    "ref_ternary_law",
    "ref_ternary_delta",
]

DPS = 80  # working precision (decimal digits) of the reference
TAU = mp.mpf("1e-50")  # relative truncation tolerance of the binomial windows
DEFAULT_MAX_ATOMS = 40_000
FLOAT_MAX = Fraction(1.7976931348623157e308)


class ReferenceTooCostly(ValueError):
    """The exact window would exceed ``max_atoms``; use the ``*_bounds`` variants."""


# --------------------------------------------------------------------------- inputs


def normalise_groups(groups):
    """[(eps, delta, count), ...] -> list of (Fraction eps, Fraction delta, int count).

    Floats are converted exactly (``Fraction(float)``); counts must be positive ints."""
    out = []
    for eps, delta, count in groups:
        eps, delta = float(eps), float(delta)
        count = int(count)
        if not (math.isfinite(eps) and eps >= 0 and 0 <= delta < 1 and count >= 1):
            raise ValueError(f"reference: bad group {(eps, delta, count)!r}")
        out.append((Fraction(eps), Fraction(delta), count))
    return out


def _loss_groups(groups):
    """Merge groups with equal eps (the loss distribution ignores delta): {eps: count}."""
    merged: dict[Fraction, int] = {}
    for eps, _delta, count in groups:
        if eps != 0:  # eps = 0 mechanisms put all their mass at L = 0: no effect on L
            merged[eps] = merged.get(eps, 0) + count
    return sorted(merged.items())


def _top_atom(groups) -> Fraction:
    """max L = sum_i count_i eps_i, exactly."""
    return sum((c * e for e, _d, c in groups), Fraction(0))


def _mpf(x: Fraction):
    return mp.mpf(x.numerator) / x.denominator


def _as_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, mp.mpf):
        man, exp = mp.mpf(x).man_exp
        return Fraction(man) * (Fraction(2) ** exp)
    return Fraction(float(x))


# --------------------------------------------------------------------------- delta factor


def ref_no_delta_log(groups):
    """log prod_i (1 - delta_i)^{count_i} in mpmath (current precision)."""
    return mp.fsum(c * mp.log1p(-_mpf(d)) for _e, d, c in groups if d)


def ref_feasible(groups, delta_g) -> int:
    """Sign of (1 - delta_g) - prod (1 - delta_i)^{c_i}, i.e. of -t, decided exactly.

    Returns -1 if delta_g > 1 - prod (t > 0), 0 if equal (t = 0), +1 if infeasible (t < 0).
    Exact Fraction powers when the total count of delta_i > 0 mechanisms is small; otherwise
    equality is impossible (the product has denominator 2^(sum j_i c_i) > 2^1074, while
    1 - delta_g is a float) and mpmath at increasing precision decides the sign.
    """
    dg = Fraction(float(delta_g))
    pos = [(d, c) for _e, d, c in groups if d]
    if not pos:
        return 0 if dg == 0 else -1
    if sum(c for _d, c in pos) <= 1100:
        prod = Fraction(1)
        for d, c in pos:
            prod *= (1 - d) ** c
        diff = (1 - dg) - prod
        return (diff > 0) - (diff < 0)
    for dps in (60, 200, 1000, 5000):
        with mp.workdps(dps):
            lhs = mp.log1p(-_mpf(dg)) if dg else mp.mpf(0)
            rhs = mp.fsum(c * mp.log1p(-_mpf(d)) for d, c in pos)
            diff = lhs - rhs
            if abs(diff) > mp.mpf(10) ** (20 - dps) * (abs(lhs) + abs(rhs)):
                return 1 if diff > 0 else -1
    raise AssertionError("reference: could not decide feasibility")  # pragma: no cover


def _target(groups, delta_g):
    """t = 1 - (1 - delta_g)/prod(1 - delta_i)^{c_i} to ~60 correct digits at the current
    precision.  t suffers cancellation when delta_g is within ulps of 1 - prod(...), so it is
    computed exactly (Fractions) for small total counts and otherwise at a precision raised
    until the difference of the logarithms is resolved."""
    dps = mp.mp.dps
    dg = Fraction(float(delta_g))
    pos = [(d, c) for _e, d, c in groups if d]
    if sum(c for _d, c in pos) <= 1100:
        prod = Fraction(1)
        for d, c in pos:
            prod *= (1 - d) ** c
        return _mpf(1 - (1 - dg) / prod)
    for work in (dps + 40, 400, 2000, 10000):
        with mp.workdps(work):
            lhs = mp.log1p(-_mpf(dg)) if dg else mp.mpf(0)
            rhs = mp.fsum(c * mp.log1p(-_mpf(d)) for d, c in pos)
            diff = lhs - rhs
            if abs(diff) > mp.mpf(10) ** (dps + 20 - work) * (abs(lhs) + abs(rhs)):
                t = -mp.expm1(diff)
                break
    else:  # pragma: no cover
        raise AssertionError("reference: target t not resolved")
    return +t


# --------------------------------------------------------------------------- binomial windows


@dataclass
class _Window:
    """Atoms of one binomial group: positions (Fractions), masses (mpf), dropped-mass bound."""

    pos: list
    mass: list
    dropped: object  # mpf upper bound on the mass of the atoms not listed
    complete: bool


def _log_binom_mass(c: int, m: int, logp, logq):
    return mp.loggamma(c + 1) - mp.loggamma(m + 1) - mp.loggamma(c - m + 1) + m * logp + (c - m) * logq


def _group_logs(eps: Fraction):
    e = _mpf(eps)
    logp = -mp.log1p(mp.exp(-e))  # log e^e / (1 + e^e)
    logq = -e - mp.log1p(mp.exp(-e))  # log 1 / (1 + e^e)
    return e, logp, logq


def _mode(c: int, eps: Fraction) -> int:
    e, logp, _ = _group_logs(eps)
    m = int(mp.floor((c + 1) * mp.exp(logp)))
    return min(max(m, 0), c)


def _binomial_window(eps: Fraction, c: int, *, m_min: int, abs_tol, max_atoms: int, anchor_top: int = 0) -> _Window:
    """Atoms m in [m_min, c] of Binomial(c, p) (position (2m - c) eps): all with mass that
    matters to absolute tolerance ``abs_tol`` on the dropped mass, plus the ``anchor_top``
    atoms just above m_min (always kept, so that a far-tail cut still gets its first atoms).

    Starts at s = max(m_min, mode) and walks up (then down to m_min) with the exact ratio;
    stops a side when the certified geometric tail bound is <= abs_tol / 2."""
    e, logp, logq = _group_logs(eps)
    ee = mp.exp(e)
    mode = _mode(c, eps)
    if m_min > c:
        return _Window([], [], mp.mpf(0), True)
    s = max(m_min, mode)
    t_s = mp.exp(_log_binom_mass(c, s, logp, logq))
    ms, ts = [s], [t_s]
    complete = True
    half = abs_tol / 2
    dropped = mp.mpf(0)
    # upward from s
    m, t = s, t_s
    r = (c - m) * ee / (m + 1) if m < c else mp.mpf(0)  # t_{m+1} / t_m
    while m < c:
        t_next = t * r
        r_next = (c - m - 1) * ee / (m + 2) if m + 1 < c else mp.mpf(0)  # t_{m+2} / t_{m+1}
        if m + 1 > mode and r_next < 1 and m + 1 - m_min > anchor_top:
            tail = t_next / (1 - r_next)  # >= sum_{j > m} t_j (the ratios decrease in m)
            if tail <= half:
                dropped += tail
                break
        if len(ms) >= max_atoms:
            complete = False
            dropped += 1  # trivially: the mass left is <= 1
            break
        m, t, r = m + 1, t_next, r_next
        ms.append(m)
        ts.append(t)
    # downward from s - 1 to m_min (only when m_min < mode)
    m, t = s, t_s
    rho = m / ((c - m + 1) * ee) if m > 0 else mp.mpf(0)  # t_{m-1} / t_m
    while m > m_min:
        t_prev = t * rho
        rho_prev = (m - 1) / ((c - m + 2) * ee) if m - 1 > 0 else mp.mpf(0)  # t_{m-2} / t_{m-1}
        if m - 1 < mode and rho_prev < 1:
            tail = t_prev / (1 - rho_prev)  # >= sum_{j < m} t_j (the downward ratios decrease)
            if tail <= half:
                dropped += tail
                break
        if len(ms) >= max_atoms:
            complete = False
            dropped += 1
            break
        m, t, rho = m - 1, t_prev, rho_prev
        ms.append(m)
        ts.append(t)
    pos = [(2 * j - c) * eps for j in ms]
    return _Window(pos, ts, dropped, complete)


def _m_min_above(eps: Fraction, c: int, cut: Fraction) -> int:
    """Least m with (2m - c) eps > cut (exact)."""
    # (2m - c) eps > cut  <=>  m > (c + cut/eps) / 2
    bound = (c + cut / eps) / 2
    m = math.floor(bound) + 1
    return max(m, 0)


@dataclass
class _Atoms:
    """Atoms of L above ``cut``, ascending; S at/above them; certified dropped mass."""

    pos: list  # Fractions, ascending, all > cut
    mass: list  # mpf
    dropped: object  # mpf: upper bound on P0-mass of the atoms > cut not listed
    complete: bool
    top: Fraction


def _atoms_above(groups, cut: Fraction, abs_tol, max_atoms: int) -> _Atoms:
    """The P0 distribution of L restricted to atoms > cut (up to certified dropped mass)."""
    lg = _loss_groups(groups)
    top = _top_atom(groups)
    if not lg or top <= cut:
        return _Atoms([], [], mp.mpf(0), True, top)
    if len(lg) == 1:
        eps, c = lg[0]
        w = _binomial_window(eps, c, m_min=_m_min_above(eps, c, cut), abs_tol=abs_tol,
                             max_atoms=max_atoms, anchor_top=4)
        order = sorted(range(len(w.pos)), key=lambda i: w.pos[i])
        return _Atoms([w.pos[i] for i in order], [w.mass[i] for i in order], w.dropped, w.complete, top)
    # product of binomials: per-group windows over all m (plus the top 3 atoms of each group);
    # positions kept as integers in units of 1/den (den: the common denominator of the eps),
    # exactly the Fractions' sums, without a Fraction's hash and normalisation per product
    den = math.lcm(*(eps.denominator for eps, _ in lg))
    dist: dict[int, object] = {0: mp.mpf(1)._mpf_}  # raw mpmath values (see below)
    dropped = mp.mpf(0)
    complete = True
    tol_g = abs_tol / len(lg)
    for eps, c in lg:
        w = _binomial_window(eps, c, m_min=0, abs_tol=tol_g, max_atoms=max_atoms)
        pos, mass = list(w.pos), list(w.mass)
        have = set(pos)
        e, logp, logq = _group_logs(eps)
        for j in range(max(0, c - 2), c + 1):  # the top atoms, for eps_g near sum eps
            p = (2 * j - c) * eps
            if p not in have:
                pos.append(p)
                mass.append(mp.exp(_log_binom_mass(c, j, logp, logq)))
        dropped += w.dropped
        complete &= w.complete
        if len(dist) * len(pos) > max_atoms * 4:
            raise ReferenceTooCostly(f"product of binomials too large ({len(dist)} x {len(pos)})")
        scaled = [p.numerator * (den // p.denominator) for p in pos]
        # the products and sums on mpmath's raw values at the context's precision and rounding:
        # the very operations (mpf_mul, mpf_add; a first term is 0 + pa pb) that ``pa * pb`` and
        # ``new.get(key, 0) + ...`` on mpf objects perform, without an object per operation
        prec, rnd = mp.mp._prec_rounding
        raw = [m._mpf_ for m in mass]
        new: dict[int, object] = {}
        get = new.get
        for a, pa in dist.items():
            for b, pb in zip(scaled, raw):
                key = a + b
                old = get(key)
                term = mpf_mul(pa, pb, prec, rnd)
                new[key] = mpf_add(term, fzero, prec, rnd) if old is None else mpf_add(old, term, prec, rnd)
        dist = new
    above = math.floor(cut * den)  # an integer position n is > cut iff n > floor(cut den)
    items = sorted((n, m) for n, m in dist.items() if n > above)
    return _Atoms([Fraction(n, den) for n, _ in items], [mp.mp.make_mpf(m) for _, m in items], dropped, complete, top)


def _suffix(atoms: _Atoms):
    """For atoms l_1 < ... < l_n: A_j = sum_{i>=j} P_i, S_j = S(l_j), V_j = A_j - S_j =
    sum_{i>=j} P_i e^{l_j - l_i}, all by recursions with nonnegative terms only
    (S(l_{j-1}) = (1 - e^{-G}) A_j + e^{-G} S_j with G = l_j - l_{j-1}, exact)."""
    n = len(atoms.pos)
    A, S = [fzero] * n, [fzero] * n
    # the positions as integers in units of 1/den (exact): gaps without Fraction arithmetic
    den = math.lcm(*(p.denominator for p in atoms.pos)) if n else 1
    scaled = [p.numerator * (den // p.denominator) for p in atoms.pos]
    cache: dict = {}  # gap (units of 1/den) -> (e^-G, -expm1(-G)); a single group has one gap, 2 eps
    eGs = [fzero] * n  # eGs[j]: e^-G of the gap from atom j to atom j + 1 (raw)
    # the recursions on mpmath's raw values at the context's precision and rounding: the very
    # operations (mpf_add, mpf_mul, in this order) that the same lines on mpf objects perform
    prec, rnd = mp.mp._prec_rounding
    mass = [m._mpf_ for m in atoms.mass]
    for j in range(n - 1, -1, -1):
        if j == n - 1:
            A[j], S[j] = mass[j], fzero
        else:
            gap = scaled[j + 1] - scaled[j]
            if gap not in cache:
                G = _mpf(Fraction(gap, den))
                cache[gap] = (mp.exp(-G)._mpf_, (-mp.expm1(-G))._mpf_)
            eG, one_minus = cache[gap]
            eGs[j] = eG
            A[j] = mpf_add(mass[j], A[j + 1], prec, rnd)
            S[j] = mpf_add(mpf_mul(one_minus, A[j + 1], prec, rnd), mpf_mul(eG, S[j + 1], prec, rnd), prec, rnd)
    make = mp.mp.make_mpf
    return [make(a) for a in A], [make(x) for x in S], _LazyV(mass, eGs, prec, rnd)


class _LazyV:
    """V_j = mass_j + e^{-G_j} V_{j+1} (V_{n-1} = mass_{n-1}), the recursion of :func:`_suffix`,
    run from the last atom down to the least index asked for (the root finder asks for one or
    two), at the precision and rounding it was made with."""

    def __init__(self, mass, eGs, prec, rnd):
        self._mass, self._eGs, self._prec, self._rnd = mass, eGs, prec, rnd
        self._values = {len(mass) - 1: mass[-1]} if mass else {}
        self._low = len(mass) - 1

    def __getitem__(self, j):
        if j < 0:
            j += len(self._mass)
        if not 0 <= j < len(self._mass):
            raise IndexError(j)
        while self._low > j:
            i = self._low - 1
            self._values[i] = mpf_add(self._mass[i], mpf_mul(self._eGs[i], self._values[i + 1], self._prec, self._rnd),
                                      self._prec, self._rnd)
            self._low = i
        return mp.mp.make_mpf(self._values[j])


def _S_at(atoms: _Atoms, A, S, x: Fraction):
    """S(x) from the kept atoms (a certified lower bound of the true S(x))."""
    j = bisect.bisect_right(atoms.pos, x)  # first atom > x
    if j == len(atoms.pos):
        return mp.mpf(0)
    g = _mpf(atoms.pos[j] - x)
    return -mp.expm1(-g) * A[j] + mp.exp(-g) * S[j]


# --------------------------------------------------------------------------- delta direction


def ref_delta_bounds(groups, eps_g, *, dps: int = DPS, max_atoms: int = DEFAULT_MAX_ATOMS):
    """Certified (lo, hi, tight) with lo <= delta_opt(eps_g) <= hi (mpf, ``dps`` digits).

    ``tight`` is true when (hi - lo) <= TAU * lo (or everything is exact)."""
    g = normalise_groups(groups)
    x = _as_fraction(eps_g)
    if x < 0:
        raise ValueError("eps_g must be >= 0")
    with mp.workdps(dps):
        lnd = ref_no_delta_log(g)
        abs_tol = mp.mpf("1e-70")
        for _ in range(40):
            atoms = _atoms_above(g, x, abs_tol, max_atoms)
            if atoms.pos:
                A, S, _V = _suffix(atoms)
                s_lo = _S_at(atoms, A, S, x)
            else:
                s_lo = mp.mpf(0)
            s_hi = min(s_lo + atoms.dropped, mp.mpf(1))
            if atoms.dropped <= TAU * s_lo or (atoms.dropped == 0) or not atoms.complete:
                break
            abs_tol = min(abs_tol * mp.mpf("1e-60"), TAU * s_lo / 4) if s_lo > 0 else abs_tol * mp.mpf("1e-100")
        # S < 1 always; a kept sum within rounding of 1 (e.g. eps = 1e200: 1 - S ~ e^-1e200)
        # is clamped, delta is then within 10^-dps of 1 and only the float 1.0 is >= it
        s_lo = min(s_lo, mp.mpf(1))
        lo = -mp.expm1(lnd + mp.log1p(-s_lo)) if s_lo < 1 else mp.mpf(1)
        hi = -mp.expm1(lnd + mp.log1p(-s_hi)) if s_hi < 1 else mp.mpf(1)
        tight = atoms.complete and (atoms.dropped == 0 or atoms.dropped <= TAU * s_lo)
        return +lo, +hi, tight


def ref_delta(groups, eps_g, **kw):
    """delta_opt(eps_g) (MV Thm 1.5 / KOV Thm 3.3) as an mpf, relative error <= ~1e-50."""
    lo, hi, tight = ref_delta_bounds(groups, eps_g, **kw)
    if not tight:
        raise ReferenceTooCostly(f"window too large for {groups!r} at eps_g={eps_g!r}")
    return lo


# --------------------------------------------------------------------------- epsilon direction


def _solve(atoms: _Atoms, t, suffix=None):
    """Least x >= 0 with S_kept(x) <= t for t > 0 (the kept atoms are all > 0).

    Returns (x, kappa): kappa = A_j / (A_j - t) bounds the amplification of the relative
    rounding error of the masses and of t into the absolute error of x (the root solves
    e^{-g} V_j = A_j - t on the segment ending at atom j)."""
    if not atoms.pos:
        return mp.mpf(0), mp.mpf(1)
    A, S, V = suffix or _suffix(atoms)  # (the caller's, when it solves twice on one set of atoms)
    if _S_at(atoms, A, S, Fraction(0)) <= t:
        return mp.mpf(0), mp.mpf(1)
    # S is decreasing with S(l_n) = 0 <= t: find the least j with S_j <= t
    if S[0] <= t:
        j = 0
    else:
        lo_j, hi_j = 0, len(atoms.pos) - 1
        while hi_j - lo_j > 1:  # invariant S[lo_j] > t >= S[hi_j]
            mid = (lo_j + hi_j) // 2
            if S[mid] > t:
                lo_j = mid
            else:
                hi_j = mid
        j = hi_j
    # root in (max(l_{j-1}, 0), l_j]: x = l_j - g with S(x) = A_j - e^{-g} V_j = t
    num = A[j] - t
    if not num > 0:  # pragma: no cover - t < S(lower end) <= A_j
        raise AssertionError("reference: root bracketing failed")
    g = mp.log(V[j] / num)
    x = _mpf(atoms.pos[j]) - g
    return max(x, mp.mpf(0)), A[j] / num


def ref_epsilon_bounds(groups, delta_g, *, max_atoms: int = DEFAULT_MAX_ATOMS):
    """Certified (lo, hi, tight): lo <= OptComp(delta_g) <= hi (mpf, or mp.inf when infeasible).

    Infeasibility (t < 0) is decided exactly (:func:`ref_feasible`); t = 0 gives the top atom
    sum c_i eps_i exactly.  Otherwise the kept atoms give S_kept <= S <= S_kept + dropped, so
    the root of S_kept = t is a lower bound and the root of S_kept = t - dropped an upper
    bound.  The working precision is raised until 10^-dps * kappa (see :func:`_solve`) is
    below 1e-60, so the mpmath rounding is negligible next to the 1e-45 widening applied."""
    g = normalise_groups(groups)
    sign = ref_feasible(g, delta_g)
    if sign > 0:
        return mp.inf, mp.inf, True
    top = _top_atom(g)
    if sign == 0:
        with mp.workdps(DPS):
            v = _mpf(top)
        return v, v, True
    dps = DPS
    while True:
        with mp.workdps(dps):
            t = _target(g, delta_g)
            abs_tol = TAU * t / 4
            atoms = _atoms_above(g, Fraction(0), abs_tol, max_atoms)
            suffix = _suffix(atoms) if atoms.pos else None
            x_lo, kappa_lo = _solve(atoms, t, suffix)  # S >= S_kept: the root of S_kept = t is <= OptComp
            if atoms.dropped >= t:
                x_hi, kappa_hi = _mpf(top), mp.mpf(1)
            else:
                x_hi, kappa_hi = _solve(atoms, t - atoms.dropped, suffix)  # S <= S_kept + dropped
            kappa = max(kappa_lo, kappa_hi)
            # absolute error of x ~ 10^-dps * kappa (+ position rounding 10^-dps * |l|)
            if kappa * mp.mpf(10) ** (-dps) <= mp.mpf("1e-60") or dps >= 5000:
                if dps >= 5000:  # pragma: no cover
                    raise AssertionError("reference: root too ill-conditioned")
                # certified margin for the mpmath rounding: 10^(10 - dps) (kappa + |x| + 1)
                margin = mp.mpf(10) ** (10 - dps) * (kappa + abs(x_hi) + 1)
                lo = max(x_lo - margin, mp.mpf(0)) if x_lo > 0 else mp.mpf(0)
                hi = x_hi + margin if x_hi > 0 else mp.mpf(0)
                tight = atoms.complete and (hi - lo <= mp.mpf("1e-40") * max(hi, mp.mpf("1e-300")))
                return +lo, +hi, tight
        dps = int(dps + 20 + float(mp.log10(kappa)))


def ref_epsilon(groups, delta_g, **kw):
    """OptComp(delta_g): least eps_g >= 0 with delta_opt(eps_g) <= delta_g, or mp.inf."""
    lo, hi, tight = ref_epsilon_bounds(groups, delta_g, **kw)
    if not tight:
        raise ReferenceTooCostly(f"window too large for {groups!r} at delta_g={delta_g!r}")
    return hi


# --------------------------------------------------------------------------- closed forms
# All in mpmath at DPS digits from the exact Fraction inputs; they return the theorem's exact
# value (no rounding direction needed: 1e-80 relative is far below anything tested).


def _sums(g):
    s1 = _mpf(sum((c * e for e, _d, c in g), Fraction(0)))
    s2 = _mpf(sum((c * e * e for e, _d, c in g), Fraction(0)))
    drv_mean = mp.fsum(c * _mpf(e) * mp.expm1(_mpf(e)) for e, _d, c in g)
    kov_mean = mp.fsum(c * _mpf(e) * mp.tanh(_mpf(e) / 2) for e, _d, c in g)
    dsum = sum((c * d for _e, d, c in g), Fraction(0))
    return s1, s2, drv_mean, kov_mean, dsum


def ref_basic_epsilon(groups, delta_g):
    """MV Thm 1.2: sum c_i eps_i if delta_g >= sum c_i delta_i (exact), else inf."""
    g = normalise_groups(groups)
    with mp.workdps(DPS):
        s1, *_rest, dsum = _sums(g)
        return s1 if Fraction(float(delta_g)) >= dsum else mp.inf


def ref_basic_delta(groups, eps_g):
    """MV Thm 1.2: min(1, sum c_i delta_i) if eps_g >= sum c_i eps_i (exact), else 1."""
    g = normalise_groups(groups)
    with mp.workdps(DPS):
        if _as_fraction(eps_g) >= _top_atom(g):
            return min(mp.mpf(1), _mpf(sum((c * d for _e, d, c in g), Fraction(0))))
        return mp.mpf(1)


def _gauss_eps(g, delta_g, mean_kind):
    s1, s2, drv_mean, kov_mean, dsum = _sums(g)
    slack = Fraction(float(delta_g)) - dsum
    if s1 == 0:
        return mp.mpf(0) if slack >= 0 else mp.inf
    if slack <= 0:
        return mp.inf
    mean = drv_mean if mean_kind == "drv" else s2 / 2
    return mean + mp.sqrt(2 * mp.log(1 / _mpf(slack)) * s2)


def _gauss_delta(g, eps_g, mean_kind):
    s1, s2, drv_mean, kov_mean, dsum = _sums(g)
    total = _mpf(dsum)
    if s1 == 0:
        return min(mp.mpf(1), total)
    mean = drv_mean if mean_kind == "drv" else s2 / 2
    r = _mpf(_as_fraction(eps_g)) - mean
    if r <= 0:
        return mp.mpf(1)
    return min(mp.mpf(1), total + mp.exp(-r * r / (2 * s2)))


def ref_drv_epsilon(groups, delta_g):
    """MV Thm 1.3 (DRV), heterogeneous form of the README: sqrt(2 ln(1/d') sum eps^2) +
    sum eps (e^eps - 1), d' = delta_g - sum delta_i; inf if d' <= 0; 0 if all eps are 0
    and d' >= 0 (basic composition)."""
    with mp.workdps(DPS):
        return _gauss_eps(normalise_groups(groups), delta_g, "drv")


def ref_drv_delta(groups, eps_g):
    """Least delta_g certified by MV Thm 1.3 at eps_g: sum delta_i + exp(-r^2/(2 sum eps^2)),
    r = eps_g - sum eps (e^eps - 1) > 0, capped at 1; 1 if r <= 0."""
    with mp.workdps(DPS):
        return _gauss_delta(normalise_groups(groups), eps_g, "drv")


def ref_advanced_pure_epsilon(groups, delta_g):
    """Steinke: 1/2 sum eps^2 + sqrt(2 log(1/d') sum eps^2), d' = delta_g - sum delta_i."""
    with mp.workdps(DPS):
        return _gauss_eps(normalise_groups(groups), delta_g, "pure")


def ref_advanced_pure_delta(groups, eps_g):
    with mp.workdps(DPS):
        return _gauss_delta(normalise_groups(groups), eps_g, "pure")


def ref_kov_epsilon(groups, delta_g):
    """KOV Thm 3.4 / 3.5: min{sum eps, m + sqrt(2 s2 log(e + sqrt(s2)/dt)), m + sqrt(2 s2 log(1/dt))},
    m = sum eps tanh(eps/2), dt = 1 - (1 - delta_g)/prod(1 - delta_i); inf if dt < 0 (exact),
    sum eps at dt = 0 (only the first term is valid there)."""
    g = normalise_groups(groups)
    sign = ref_feasible(g, delta_g)
    with mp.workdps(DPS):
        s1, s2, _drv, m, _dsum = _sums(g)
        if sign > 0:
            return mp.inf
        if sign == 0 or s1 == 0:
            return s1
        dt = min(_target(g, delta_g), mp.mpf(1))
        second = m + mp.sqrt(2 * s2 * mp.log(mp.e + mp.sqrt(s2) / dt))
        third = m + mp.sqrt(2 * s2 * mp.log(1 / dt))
        return min(s1, second, third)


def ref_kov_delta(groups, eps_g):
    """Least delta_g certified by KOV Thm 3.4/3.5 at eps_g (inverting each term)."""
    g = normalise_groups(groups)
    with mp.workdps(DPS):
        s1, s2, _drv, m, _dsum = _sums(g)
        x = _mpf(_as_fraction(eps_g))
        lnd = ref_no_delta_log(g)
        if _as_fraction(eps_g) >= _top_atom(g):
            dt = mp.mpf(0)
        else:
            r = x - m
            if r <= 0:
                return mp.mpf(1)
            a = r * r / (2 * s2)
            dt = mp.exp(-a)
            if a > 1:
                dt = min(dt, mp.sqrt(s2) / (mp.exp(a) - mp.e))
            if dt >= 1:
                return mp.mpf(1)
        return min(mp.mpf(1), -mp.expm1(lnd + mp.log1p(-dt)))


# --------------------------------------------------------------------------- brute force


def brute_force_delta(mechs, eps_g, *, dps: int = 60):
    """max_Q P0(Q) - e^{eps_g} P1(Q) over the product of MV Def. 3.1 randomized responses,
    by enumerating the 4^k outcomes {0,1,2,3}^k: the definition of (eps_g, delta)-DP itself.
    ``mechs``: list of (eps, delta) floats, k <= 6."""
    import itertools

    with mp.workdps(dps):
        eg = mp.exp(_mpf(_as_fraction(eps_g)))
        singles = []
        for e, d in mechs:
            e, d = _mpf(Fraction(e)), _mpf(Fraction(d))
            a = 1 - d
            p0 = [d, a * mp.exp(e) / (1 + mp.exp(e)), a / (1 + mp.exp(e)), mp.mpf(0)]
            p1 = [mp.mpf(0), a / (1 + mp.exp(e)), a * mp.exp(e) / (1 + mp.exp(e)), d]
            singles.append((p0, p1))
        total = mp.mpf(0)
        for x in itertools.product(range(4), repeat=len(mechs)):
            q0 = mp.fprod(s[0][xi] for s, xi in zip(singles, x))
            q1 = mp.fprod(s[1][xi] for s, xi in zip(singles, x))
            diff = q0 - eg * q1
            if diff > 0:
                total += diff
        return total


def kov_corner_delta(eps, delta, k: int, i: int, *, dps: int = 60):
    """KOV Thm 3.3: the k-fold composition is ((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i))-DP,
    delta_i = sum_{l<i} C(k,l) (e^{(k-l) eps} - e^{(k-2i+l) eps}) / (1 + e^eps)^k (tight)."""
    with mp.workdps(dps):
        e, d = _mpf(Fraction(eps)), _mpf(Fraction(delta))
        di = mp.fsum(mp.binomial(k, l) * (mp.exp((k - l) * e) - mp.exp((k - 2 * i + l) * e)) for l in range(i))
        di /= (1 + mp.exp(e)) ** k
        return 1 - (1 - d) ** k * (1 - di)


def decreasing_root(f, target, lo, hi, steps: int = 160):
    """The upper end of a bisection bracket [lo, hi] on the x with f(x) = target, f
    nonincreasing (``steps`` halvings, at the current mpmath precision)."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


# --------------------------------------------------------------------------- mechanisms' laws


def _exact_mpf(x):
    """A float (or Fraction) as an exact mpmath number at the working precision."""
    return _mpf(Fraction(x))


def _ih_tail_integral(j: int, beta, L):
    """int_L^j e^{beta y} IH_j(y) dy, IH_j(y) = sum_t (-1)^t C(j, t) (y - t)_+^{j-1} / (j-1)! the
    Irwin-Hall density of a sum of j uniforms on (0, 1), 0 <= L <= j: term by term with the
    antiderivative e^{beta y} sum_m (-1)^m n!/(n-m)! (y - t)^{n-m} / beta^{m+1} of
    e^{beta y} (y - t)^n (n = j - 1; differentiate to check)."""
    n = j - 1

    def anti(y, t):
        return mp.e ** (beta * y) * mp.fsum((-1) ** m * mp.factorial(n) / mp.factorial(n - m) * (y - t) ** (n - m)
                                            / beta ** (m + 1) for m in range(n + 1))

    total = mp.mpf(0)
    for t in range(j):
        lo = max(L, mp.mpf(t))
        total += (-1) ** t * mp.binomial(j, t) * (anti(mp.mpf(j), t) - anti(lo, t))
    return total / mp.factorial(n)


def ref_laplace_delta(a, k: int, x, *, dps: int = 60):
    """delta(x) = E_P[(1 - e^{x - L})_+] of k Laplace mechanisms with loss parameter
    a = Delta/b (one direction; the law is symmetric), from the definition of the law of one
    loss: an atom +a of P-mass 1/2, an atom -a of P-mass e^{-a}/2, and the density
    f(l) = e^{(l - a)/2}/4 on (-a, a) (mass p_c = (1 - e^{-a})/2).

    L is a sum over i copies at +a, k - j - i at -a and j continuous ones (multinomial
    weights); the j-fold convolution of f is (a/2)^j e^{-ja} e^{a y} IH_j(y) dy at
    s = -ja + 2a y, y in (0, j) (f = (e^{-a/2}/4) e^{l/2} on (-a, a); IH_j the Irwin-Hall
    density).  With c = x - (2i - (k - j)) a, the term (1 - e^{c - s})_+ is positive for
    y > y0 = (c + ja)/(2a): its integral is (a/2)^j e^{-ja} [F_a(y0) - e^{c + ja} F_{-a}(y0)],
    F_b(y0) = int_{y0}^{j} e^{b y} IH_j(y) dy (exact antiderivatives, :func:`_ih_tail_integral`);
    for c <= -ja it is p_c^j - e^c p_c^j (int f e^{-l} = p_c), for c >= ja it is 0.  Exact
    up to the working precision (cancellation ~ (j/a)^j digits, far inside 60 for the
    small k used)."""
    with mp.workdps(dps):
        A, X = _exact_mpf(a), _exact_mpf(x)
        pc = -mp.expm1(-A) / 2
        pp, pm = mp.mpf(1) / 2, mp.e ** (-A) / 2
        total = mp.mpf(0)
        for j in range(k + 1):
            n = k - j
            for i in range(n + 1):
                w = mp.binomial(k, j) * mp.binomial(n, i) * pp**i * pm ** (n - i)
                c = X - (2 * i - n) * A
                if j == 0:
                    total += w * (-mp.expm1(c) if c < 0 else 0)
                elif c <= -j * A:
                    total += w * pc**j * -mp.expm1(c)
                elif c < j * A:
                    y0 = (c + j * A) / (2 * A)
                    F = _ih_tail_integral(j, A, y0) - mp.e ** (c + j * A) * _ih_tail_integral(j, -A, y0)
                    total += w * (A / 2) ** j * mp.e ** (-j * A) * F
        return total


def ref_gaussian_delta(mu, x, *, dps: int = 60):
    """delta(x) = Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu) of a Gaussian mechanism with
    mu = Delta/sigma (Balle & Wang 2018, Thm 8; k of them compose to mu sqrt(k))."""
    with mp.workdps(dps):
        m, X = _exact_mpf(mu) if not isinstance(mu, mp.mpf) else mu, _exact_mpf(x)
        return mp.ncdf(m / 2 - X / m) - mp.e**X * mp.ncdf(-m / 2 - X / m)


def ref_ternary_law(eps, k: int, *, dps: int = 60):
    """The law of L = (A - B) eps for k copies of 3-ary randomized response (P-masses e^eps/z
    at loss +eps, 1/z at 0 and 1/z at -eps, z = e^eps + 2; the counts (A, B, k - A - B) are
    multinomial): [(d, P[A - B = d])], P[A - B = d] = sum_b k!/((b + d)! b! (k - 2b - d)!)
    pt^(b + d) po^(k - b - d), each sum by its exact term ratio
    T(b + 1)/T(b) = r (r - 1) pt / ((b + d + 1)(b + 1) po), r = k - 2b - d."""
    with mp.workdps(dps):
        E = _exact_mpf(eps)
        z = mp.e**E + 2
        pt, po = mp.e**E / z, 1 / z
        law = []
        for d in range(-k, k + 1):
            b = max(0, -d)  # the least b with b + d >= 0
            term = mp.factorial(k) / (mp.factorial(b + d) * mp.factorial(b) * mp.factorial(k - 2 * b - d)) \
                * pt ** (b + d) * po ** (k - b - d)
            total = mp.mpf(0)
            while k - 2 * b - d >= 0:
                total += term
                r = k - 2 * b - d
                term = term * r * (r - 1) / ((b + d + 1) * (b + 1)) * (pt / po)
                b += 1
            law.append((d, total))
        return law


def ref_ternary_delta(eps, law, x, *, dps: int = 60):
    """delta(x) = sum_{d eps > x} P[A - B = d] (1 - e^{x - d eps}) for the law of
    :func:`ref_ternary_law` (positions d eps exact: eps and x as exact rationals)."""
    with mp.workdps(dps):
        E, X = _exact_mpf(eps), _exact_mpf(x)
        return mp.fsum(p * -mp.expm1(X - d * E) for d, p in law if d * Fraction(eps) > Fraction(x))


def tuples_hockey_stick(a, b, k: int, x) -> mp.mpf:
    """sum over the k-tuples of outcomes of (A - e^x B)_+ for the product of the pair (a, b)
    (exact rational masses, one list each): the products exact, compared with e^x at 60 digits."""
    from itertools import product

    with mp.workdps(60):
        ex = mp.exp(mp.mpf(x))
        total = mp.mpf(0)
        for tup in product(range(len(a)), repeat=k):
            pa, pb = Fraction(1), Fraction(1)
            for i in tup:
                pa *= a[i]
                pb *= b[i]
            v = mp.mpf(pa.numerator) / pa.denominator - ex * (mp.mpf(pb.numerator) / pb.denominator)
            if v > 0:
                total += v
        return total
