r"""A few finite-mechanism outcomes beside many black boxes (layer L3): the composition split
into the listed outcomes of the mechanisms and the black boxes' exact excess.

Let F be the composed law of the finite mechanisms of one global direction (normalised
P-masses p_a at losses l_a, listed exactly: at most ``SPLIT_TUPLES`` count vectors) and B
the randomized responses of the black-box groups (MV Def. 3.1; their delta events are the
composition's :class:`~optcomp._exact.finite.Events`).  The two are independent under both
hypotheses, so from the definition H(x) = E_P[(1 - e^{x - L})_+], L = L_F + L_B,

    H(x) = sum_a p_a E_P[(1 - e^{(x - l_a) - L_B})_+] = sum_a p_a H_B(x - l_a)

exactly, with H_B the black boxes' own hockey-stick excess at any real y:

* y >= sum_j c_j eps_j (the largest black-box loss): H_B(y) = 0;
* y >= 0: the exact producers of :mod:`optcomp._exact.atoms` (MV Thm 1.5 / KOV Thm 3.3: one
  binomial window, or a product of binomials), certified brackets;
* y < 0: sum_b (P_B(b) - e^y Q_B(b))_+ = (1 - e^y) + e^y sum_b (Q_B(b) - e^{-y} P_B(b))_+, and
  the randomized responses are symmetric (swapping P and Q maps the pair to itself with the
  outcomes relabelled), so H_B(y) = -expm1(y) + e^y H_B(-y): positive terms only, no
  cancellation.

H_B decreases in y, so each y = x - l_a enters rounded outward (down for H's upper bound,
up for its lower bound) from l_a's exact rational position, or from its ``PREC``-bit value
and error bound.  The sum over a is formed in mpmath, the masses' relative error (the laws'
own, times the counts) charged to both ends.  This is the route where the multinomial rows
are ill-conditioned: a black box of tiny eps (BlackBox(1e-300) x 10^6 beside a randomized
response) makes their atoms 2 eps apart and the rows' closed-form far sums lose every digit.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import mpmath
import numpy as np

from .._inputs import Mechanisms
from .._rounding import LIBM_ULPS, down, exact_dir, mpf_dir, up
from .._types import ExactTooLarge
from .._binomial import binomial_log_pmf
from .atoms import _TAIL, _chernoff_m, _excess_below_bulk, _low_tail, _split_groups, binomial_window, exact_excess_bounds
from .finite import PREC, Composition, LawSolver, _count_vectors, _multinomial

__all__ = ["SplitLaw", "SPLIT_TUPLES"]

SPLIT_TUPLES = 64  # the finite mechanisms' count vectors listed at most (each costs one H_B an evaluation)
#: several black-box groups: the estimated seconds of one evaluation of H at most (each H_B afresh
#: costs ~2 ms + 5e-7 sqrt(k) s for k black boxes: a product's windows span ~sqrt(k) atoms, and a
#: root takes ~10 evaluations), else no split law
SPLIT_SECONDS = 1.5
WINDOW_SECONDS = 4e-7  # a binomial window's cost per atom, its sums for H_B's two bounds included
WINDOW_BUDGET = 6.0  # one group of black boxes: the estimated seconds of its window at most, else no split law
_SUM_PREC = 160  # bits of the sum over the listed outcomes


class SplitLaw(LawSolver):
    """H(x) = sum_a p_a H_B(x - l_a) (module docstring): ``excess_bounds`` and
    ``epsilon_bounds`` as :class:`~optcomp._exact.finite.SmallLaw`'s."""

    def __init__(self, comp: Composition, boxes: Mechanisms, rest: list):
        self.boxes = boxes
        self.slack = comp.slack
        top = sum((Fraction(float(e)) * int(c) for e, c in zip(boxes.eps.tolist(), boxes.count.tolist())), Fraction(0))
        self.top_b = exact_dir(top, True)  # H_B(y) = 0 from here on
        self._cache: dict = {}
        groups, self._b_shift, self._b_slack = _split_groups(boxes)
        self._group = groups[0] if len(groups) == 1 else None  # one group: windows kept (:meth:`_window_box`)
        self._windows: list = []
        self.floor = 0.0  # an absolute accuracy of H_B enough for the caller (set by epsilon_bounds)
        rel = 0.0
        with mpmath.workprec(PREC):
            tuples = [(Fraction(0), mpmath.mpf(0), mpmath.mpf(0), mpmath.mpf(1))]
            for law, c in rest:
                rel += c * law.rel
                rows = []
                for v in _count_vectors(c, law.size).tolist():
                    coef = _multinomial(c, v)
                    m = mpmath.mpf(coef)
                    pos = mpmath.mpf(0)
                    err = mpmath.mpf(0)
                    ex = Fraction(0)
                    for n, e, p, d, w in zip(v, law.exact, law.pos, law.perr, law.mass):
                        if n:
                            m *= w**n
                            pos += n * p
                            err += n * d
                            ex = None if (ex is None or e is None) else ex + n * e
                    rows.append((ex, pos, err, m))
                tuples = [(None if (a[0] is None or b[0] is None) else a[0] + b[0], a[1] + b[1], a[2] + b[2],
                           a[3] * b[3]) for a in tuples for b in rows]
            # each mass: at most ~4 c roundings of PREC bits (powers, products, the coefficient)
            ops = 4 * sum(c for _, c in rest) + 8
            self.atoms = [(ex, pos, err + abs(pos) * mpmath.ldexp(1, 8 - PREC), m) for ex, pos, err, m in tuples]
        self.rel = rel + ops * 2.0**-(PREC - 4)
        poss = [float(pos) for _, pos, _, _ in self.atoms]
        self.span = max(poss) - min(poss) if poss else 0.0  # (how far apart the y = x - l_a of one x lie)
        # (the composed loss's CGF, for first guesses only: :class:`LawSolver`)
        self._cgf_laws = [(np.array([float(p) for p in lw.pos]), np.array([float(mpmath.log(w)) for w in lw.mass]), cc)
                          for lw, cc in comp.factors]

    # ------------------------------------------------------------------ H_B
    def _box(self, y: float) -> tuple[float, float]:
        """Certified (lower, upper) on the black boxes' excess H_B(y) at a float y."""
        if y >= self.top_b:
            return 0.0, 0.0
        if y in self._cache:
            return self._cache[y]
        if y < 0.0:
            n = LIBM_ULPS + 1
            a = -math.expm1(y)  # in (0, 1]
            e = math.exp(y)
            r_lo, r_hi = self._box(-y)
            lo = max(0.0, down(down(a, n) + max(0.0, down(down(e, n) * r_lo, 1)), 1))
            hi = min(1.0, up(up(a, n) + up(up(e, n) * r_hi, 1), 1))
            out = (lo, hi)
        else:
            res = self._window_box(y) if self._group is not None else None
            if res is None:
                res = exact_excess_bounds(self.boxes, y)
            if res is None:
                raise ExactTooLarge("the black boxes beside these mechanisms have no exact excess within the size "
                                    "limits; use method='approx' or 'auto'")
            out = (max(0.0, float(res[0])), min(1.0, float(res[1])))
        self._cache[y] = out
        return out

    def _window_box(self, y: float):
        """(lower, upper) on H_B(y), y >= 0, for one black-box group (eps, k) from a binomial
        window kept for later y (:func:`~optcomp._exact.atoms.binomial_window`: its upper tail
        charged at +inf, its atoms below the window -- at most 12 standard deviations below
        the mean -- charged with their whole mass for the upper bound, a geometric bound
        (:func:`~optcomp._exact.atoms._low_tail`), and dropped for the lower one, as in
        :func:`~optcomp._exact.atoms._homogeneous_excess`): the H_B of one evaluation of H lie
        within ``span`` of each other and a root moves x little, so one window of ~sqrt(k)
        atoms serves most of them (10^12 black boxes: ~1 s to build, microseconds a query,
        where each H_B afresh costs ~1.5 s).  A window answers only where both charges are
        within 2^-50 of the lower bound it gives (or of ``floor``)."""
        eps, k = self._group
        shift = self._b_shift
        bulk = _excess_below_bulk(eps, k, y, shift)
        if bulk is not None:
            return bulk
        for w in self._windows:
            res = self._window_query(w, y)
            if res is not None:
                return res
        rel = (Fraction(y) - shift) / Fraction(eps)
        m_first = min(max(math.floor((k + rel) / 2) - 1, 0), k)
        p = 1.0 / (1.0 + math.exp(-eps))
        sd = math.sqrt(k * p * (1.0 - p)) + 1.0
        # below: the other offsets of this x and a root's next steps (not beyond 12 sd below
        # the mean); above: 2^-58 of the floor
        m_lo = m_first - int(min(self.span / (2.0 * eps), 4.0 * sd)) - int(2.0 * sd) - 64
        bulk_edge = int(k * p - 12.0 * sd) - 64
        m_zero = min(max(math.floor((k - shift / Fraction(eps)) / 2) - 1, 0), k)  # (every y asked is >= 0)
        m_lo = max(0, m_lo, bulk_edge, min(m_zero, m_first))
        # (the upper tail aimed at 2^-58 of the floor -- every y of a root's steps then finds it
        # long enough -- or, without one, of H_B(y)'s estimate)
        if self.floor > 0.0:
            near = -math.inf
        else:
            near = math.log(0.5) if m_first < k * p else \
                float(binomial_log_pmf(eps, k, np.array([min(m_first + 1, k)]))[0][0])
        aim = max(near, math.log(max(self.floor, 1e-300))) + math.log(_TAIL * 2.0**-8)
        m_hi = min(k, max(m_lo + 64, _chernoff_m(k, eps, aim) + 2))
        for _ in range(40):
            dist = binomial_window(eps, k, m_lo, m_hi, shift, self._b_slack)
            low = _low_tail(eps, k, m_lo, dist.log2_scale)  # (scaled; inf when m_lo is not below the mode)
            upper = replace(dist, slack=up(dist.slack + low, 1), exact_from=-math.inf, _cache={}) \
                if math.isfinite(low) else None
            # (below its edge a window answers only at the bulk's edge, as _homogeneous_excess does)
            if m_lo > bulk_edge or upper is None:
                upper = None
            w = (dist, upper, math.ldexp(low, -dist.log2_scale) * (1.0 + 2.0**-50) if upper else math.inf)
            res = self._window_query(w, y)
            if res is not None:
                self._windows.append(w)
                return res
            if m_hi >= k or not self._tail_short(w, y):
                return None
            m_hi = min(k, m_hi + max(64, m_hi - m_lo))
        return None  # pragma: no cover - the tail falls geometrically

    def _window_query(self, w, y: float):
        """(lower, upper) on H_B(y) from window w = (distribution, its upper-bound version
        with the mass below it charged, that mass), or None when its charges exceed 2^-50 of
        the lower bound (and of ``floor``)."""
        dist, upper, low = w
        if y >= dist.exact_from:
            lo, hi, low = dist.excess_lower(y), dist.excess(y), 0.0
        elif upper is not None:
            lo, hi = dist.excess_lower(dist.exact_from), upper.excess(y)  # (H_B decreases)
        else:
            return None
        tail = dist.tail_slack() - self._b_slack
        if tail + low > _TAIL * max(lo, self.floor, 1e-300):
            return None
        return max(0.0, float(lo)), min(1.0, float(hi))

    def _tail_short(self, w, y: float) -> bool:
        """Whether window w's upper tail alone exceeds 2^-51 of its lower bound at y (and of
        ``floor``): a longer window would answer."""
        dist = w[0]
        lo = dist.excess_lower(max(y, dist.exact_from))
        return dist.tail_slack() - self._b_slack > 0.5 * _TAIL * max(lo, self.floor, 1e-300)

    def _offsets(self, x: float):
        """(y_lo, y_hi) floats around x - l_a for every listed outcome a."""
        fx = Fraction(x)
        out = []
        with mpmath.workprec(PREC):
            mx = mpmath.mpf(x)
            for ex, pos, err, _ in self.atoms:
                if ex is not None:
                    y = fx - ex
                    out.append((exact_dir(y, False), exact_dir(y, True)))
                else:
                    d = mx - pos
                    pad = err + (abs(mx) + abs(pos)) * mpmath.ldexp(1, 4 - PREC)
                    out.append((mpf_dir(d - pad, False), mpf_dir(d + pad, True)))
        return out

    def excess_bounds(self, x: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around H(x)."""
        terms = []
        for (y_lo, y_hi), (_, _, _, m) in zip(self._offsets(x), self.atoms):
            h_hi = self._box(y_lo)[1]
            if h_hi > 0.0:
                terms.append((m, self._box(y_hi)[0], h_hi))
        with mpmath.workprec(_SUM_PREC):
            # (each product and the sum within 2^-(_SUM_PREC - 1) relative per term)
            f = mpmath.mpf(self.rel) + mpmath.ldexp(len(terms) + 4, 8 - _SUM_PREC)
            hi = mpmath.fsum(m * h for m, _, h in terms) * (1 + f) + mpmath.mpf(self.slack)
            lo = mpmath.fsum(m * h for m, h, _ in terms) * (1 - f)
            h_lo = max(0.0, mpf_dir(lo, False))
            h_hi = min(1.0, mpf_dir(hi, True)) if hi > 0 else 0.0
        return h_lo, h_hi

    # ------------------------------------------------------------------ eps_g
    def epsilon_bounds(self, t_low: float, t_high: float, top: float) -> tuple[float, float]:
        """:meth:`LawSolver.epsilon_bounds`, the black boxes' windows cut at 2^-56 t_low
        absolute (H near its root is ~t: a 2^-56 relative charge)."""
        floor = self.floor
        self.floor = max(floor, math.ldexp(max(t_low, 0.0), -6))
        try:
            return super().epsilon_bounds(t_low, t_high, top)
        finally:
            self.floor = floor

    def _root(self, t: float, upper: bool, top: float) -> float:
        """The least float x >= 0 with H's upper bound <= t (``upper``), or the largest with its
        lower bound > t: from the saddle-point guess, the secant on log H (kept inside the
        bracket found so far, bisection where it leaves it), then the end placed beyond the root
        by what the bound's distance from t asks (a linear model of log H) and checked, moved
        outward by doubling steps until it holds, and bisected back toward the last point
        where it failed (:meth:`_tighten`).  (Each evaluation costs one H_B per listed
        outcome: a query of a kept window for one black-box group, else ~1.5 s apiece for 10^12
        black boxes.)"""
        if t < 0.0:
            return math.inf
        side = 1 if upper else 0
        if self.excess_bounds(0.0)[side] <= t:
            return 0.0
        if upper and t <= self.slack:
            return top

        def mid(x):  # (the bound the end is checked with: its root lies on the right side)
            return self.excess_bounds(x)[side]

        if mid(top) > t:  # (H's upper bound at the top above t: only the top certifies; the
            return top if upper else 0.0  # lower bound there is 0, below every t >= 0)
        if not t > 0.0:
            return top if upper else 0.0
        lt = math.log(t)
        a, b = 0.0, top  # mid(a) > t >= mid(b)
        x0, h0 = None, None
        try:
            x = min(max(self._saddle_x(t), 0.0), top)
        except (ValueError, OverflowError, ZeroDivisionError):  # (a guess only)
            x = 0.5 * top
        slope = None  # d log H / dx from the last two points
        for _ in range(100):
            if not a < x < b:
                x = 0.5 * (a + b)
            h = mid(x)
            if h > t:
                a = x
            else:
                b = x
            if h > 0.0 and h0 is not None and h0 > 0.0 and x != x0:
                slope = (math.log(h) - math.log(h0)) / (x - x0)
            x0, h0 = x, h
            if b - a <= 2.0**-50 * b:
                break
            if slope is not None and slope < 0.0 and h > 0.0:
                xn = x + (lt - math.log(h)) / slope
                if abs(xn - x) <= 2.0**-46 * max(x, 2.0**-1000) and a < xn < b:
                    x0 = x = xn
                    break
                x = xn
            else:  # (no slope yet: a small step toward the root gives one)
                x = x + (1.0 if h > t else -1.0) * max(x, 1.0) * 2.0**-8
        x = x0
        lo, hi = self.excess_bounds(x)
        if slope is not None and slope < 0.0 and lo > 0.0:
            d = (max(math.log(hi / t), 0.0) if upper else max(math.log(t / lo), 0.0)) / -slope * 1.25
        else:
            d = 0.0

        def holds(z):  # (the end's certificate at z)
            z_lo, z_hi = self.excess_bounds(z)
            return z_hi <= t if upper else z_lo > t

        step = max(d, abs(x) * 2.0**-52, 5e-324)
        bad = x  # (the end lies beyond x0 unless x0 holds)
        x = up(x + d, 1) if upper else down(x - d, 1)
        for _ in range(200):
            x = min(max(x, 0.0), top)
            if holds(x):
                return self._tighten(x, bad if not holds(bad) else x, holds)
            if upper and x >= top:
                return top
            if not upper and x <= 0.0:
                return x
            bad = x
            x = up(x + step, 1) if upper else down(x - step, 1)
            step *= 2.0
        return top if upper else 0.0  # pragma: no cover - the bracket's end is within a few steps

    @staticmethod
    def _tighten(good: float, bad: float, holds) -> float:
        """The end moved from ``good`` (where its certificate holds) toward ``bad`` (where it
        does not) by bisection, a few evaluations (cheap once the black boxes' windows are
        built), to within a few ulps of the certified bound's own root."""
        for _ in range(12):
            if abs(good - bad) <= 2.0 * math.ulp(good):
                break
            mid = 0.5 * (good + bad)
            if holds(mid):
                good = mid
            else:
                bad = mid
        return good


def split_law(comp: Composition) -> SplitLaw | None:
    """The :class:`SplitLaw` of one direction when it has black boxes, its finite mechanisms
    have at most ``SPLIT_TUPLES`` count vectors and it is estimated within ``WINDOW_BUDGET``
    (one group: its binomial window) or an evaluation within ``SPLIT_SECONDS`` (several),
    else None."""
    nb = len(comp.boxes)
    if not nb:
        return None
    rest = list(comp.factors[nb:])
    total = 1
    for law, c in rest:
        total *= math.comb(c + law.size - 1, law.size - 1)
        if total > SPLIT_TUPLES:
            return None
    if len(comp.boxes) == 1:  # ~one window of min(span / (2 eps), 4 sd) + ~16 sd atoms (:meth:`SplitLaw._window_box`)
        eps, c = comp.boxes[0]
        sd = math.sqrt(c / (2.0 + 2.0 * math.cosh(eps)))  # (of Bin(c, p): p (1 - p) = 1 / (2 + 2 cosh eps))
        span = sum(cc * float(max(law.pos) - min(law.pos)) for law, cc in rest if law.size)
        if WINDOW_SECONDS * (min(span / (2.0 * eps), 4.0 * sd) + 16.0 * sd) > WINDOW_BUDGET:
            return None
    elif total * (2e-3 + 5e-7 * sum(math.sqrt(c) for _, c in comp.boxes)) > SPLIT_SECONDS:
        return None
    eps = np.array([e for e, _ in comp.boxes], dtype=float)
    boxes = Mechanisms(eps=eps, delta=np.zeros(nb), count=np.array([c for _, c in comp.boxes], dtype=np.int64),
                       others=())
    return SplitLaw(comp, boxes, rest)
