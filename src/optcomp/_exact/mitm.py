r"""Meet in the middle (layer L3): arbitrary real eps_i, the two halves' sorted subset
sums and their tails by prefix sums (:class:`_MeetInTheMiddle`); near pairs settled exactly."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._rounding import UNIT, exact_dir, up
from ..loss import rounding_bound, suffix_dw
from .atoms import _atom_count, _exact_positions, _position_error, _product, _range, _to_float


def _split(groups):
    """Two halves of the factors with atom counts as balanced as possible (greedy; a
    windowed factor (eps, n, lo, hi) counts its window's hi - lo + 1 atoms)."""
    halves: list[list] = [[], []]
    sizes = [1, 1]
    for g in sorted(groups, key=lambda g: -_width(g)):
        i = 0 if sizes[0] <= sizes[1] else 1
        halves[i].append(g)
        sizes[i] *= _width(g)
    return halves, sizes


def _width(g) -> int:
    lo, hi = _range(g)
    return hi - lo + 1


def _log_ratio(a: float, b: float) -> float:
    """log(a / b) for positive a, b, also when the quotient leaves the float range (scaled
    masses: H ~ 2^900 against a target ~ 2^-80); only steers the search."""
    r = a / b
    return math.log(r) if 0.0 < r < math.inf else math.log(a) - math.log(b)


_MITM_EXACT_PAIRS = 20_000  # ambiguous (query, atom) pairs settled exactly per evaluation


class _MeetInTheMiddle:
    """H(x) of the product of two listed distributions A (queries) and B (suffix D, W):
    ``H(x) = sum_a pa H_B(x - la)`` with ``H_B(y) = D_j + W_j (1 - e^{-(lb_j - y)})``,
    lb_j the first atom of B above y; every term non-negative.  Positions are floats
    within ``pos_err`` of the truth and distances are widened by it (upper bounds), except
    for the pairs where that matters -- y within 2 pos_err of an atom of B (eps_g on or next
    to an atom, e.g. the float sum of all eps_i) -- whose distance is formed exactly from
    the rational positions (up to ``_MITM_EXACT_PAIRS`` of them)."""

    def __init__(self, half_a, half_b, shift: Fraction = Fraction(0), slack: float = 0.0, log2_scale: int = 0):
        # masses scaled by 2^log2_scale (split between the halves, so neither leaves the float
        # range): targets far below 1e-300 keep their digits; ``slack`` is unscaled
        if _atom_count(half_a) > _atom_count(half_b):
            half_a, half_b = half_b, half_a
        s_a = log2_scale // 2
        s_b = log2_scale - s_a
        la, _, pa, ua, oa = _product(half_a, False, s_a)
        lb, _, pb, ub, ob = _product(half_b, False, s_b)
        self.log2_scale = log2_scale
        keep = np.flatnonzero(pa > 0)
        self.la, self.pa = la[keep], pa[keep]
        exact_a = _exact_positions(half_a, oa)
        self.exact_a = lambda i: exact_a(int(keep[i]))
        self.exact_b = _exact_positions(half_b, ob)
        self.lb = lb
        self.exact_budget = 4 * _MITM_EXACT_PAIRS
        if len(half_b) == 1:
            # one binomial factor (whole or a window): consecutive atoms lie exactly 2 eps
            # apart (in reals), whatever the rounding of their float positions
            self.D, self.W = suffix_dw(pb, lb, step=2.0 * half_b[0][0])
        else:
            self.D, self.W = suffix_dw(pb, lb, pos_err=_position_error(half_b))
        self.rel = rounding_bound(lb.size) + 4.0 * rounding_bound(self.la.size)
        self.shift = shift
        # an underflowed mass of one half (or a window's upper tail, :func:`_product`) meets at
        # most the other half's true total (2^its scale)
        scaled_slack = up(math.ldexp(slack, log2_scale), 1) if slack and log2_scale else slack
        self.slack = math.ldexp(ua, s_b) + math.ldexp(ub, s_a) + scaled_slack + 16.0 * (la.size + lb.size) * 2.0**-1070
        groups = list(half_a) + list(half_b)
        # the float positions' errors (each half's own); :meth:`terms` adds its arithmetic's
        self.pos_err = _position_error(half_a) + _position_error(half_b)
        self.max_loss = _to_float(shift + sum((Fraction(g[0]) * g[1] for g in groups), Fraction(0)), True)

    def terms(self, x: float) -> tuple[float, float]:
        """(h, b): h >= H(x) before the relative charge, b = -dH/dx (both before charging)."""
        xs = _to_float(Fraction(x) - self.shift, False) if self.shift else x  # down: H decreases in x
        y = xs - self.la
        # a distance lb - (xs - la) is off by the positions' errors, the rounding of y (one
        # subtraction of floats: <= u |y|, per pair -- not u (|xs| + max |la|), which at xs ~ 1
        # beside an exact la = 1 charged 1e-11 of H) and of the difference (<= u v: the factor below)
        pe = self.pos_err + UNIT * np.abs(y) * (1.0 + 4.0 * UNIT)
        nb = self.lb.size
        j = np.searchsorted(self.lb, y - pe, side="right")  # ambiguous atoms count as above
        jj = np.minimum(j, nb - 1)
        v = np.maximum(self.lb[jj] - y, 0.0) * (1.0 + 2.0 * UNIT) + pe
        inside = j < nb
        ambiguous = np.flatnonzero(inside & (self.lb[jj] - y <= 2.0 * pe))
        if ambiguous.size:
            # what the widening can add on these pairs: pa W (1 - e^{-3 pos_err}); settle them
            # exactly only where that is not negligible next to H (e.g. x at the top atom)
            h_est = float(np.sum(np.where(inside, self.pa * (self.D[jj] + self.W[jj] * -np.expm1(-v)), 0.0)))
            extra = 3.0 * float(np.sum(pe[ambiguous] * self.pa[ambiguous] * self.W[jj[ambiguous]]))
            if extra <= 2.0**-42 * h_est:  # a 2e-13 relative excess at most
                ambiguous = ambiguous[:0]
        if 0 < ambiguous.size <= min(_MITM_EXACT_PAIRS, self.exact_budget):
            self.exact_budget -= ambiguous.size  # bounded work per solve: then widening (safe) only
            fx = Fraction(x) - self.shift
            jj = jj.copy()
            for i in ambiguous.tolist():
                yi = fx - self.exact_a(i)
                k = int(jj[i])
                while k < nb and self.exact_b(k) <= yi:
                    k += 1
                if k >= nb:
                    inside[i] = False
                    continue
                jj[i] = k
                v[i] = max(exact_dir(self.exact_b(k) - yi, up=True), 0.0)
        with np.errstate(under="ignore", over="ignore"):
            e = np.exp(-v)
            h = float(np.sum(np.where(inside, self.pa * (self.D[jj] + self.W[jj] * -np.expm1(-v)), 0.0)))
            b = float(np.sum(np.where(inside, self.pa * self.W[jj] * e, 0.0)))
        return h, b

    def excess(self, x: float) -> float:
        h, _ = self.terms(x)
        v = h * (1.0 + self.rel) + self.slack
        return up(math.ldexp(v, -self.log2_scale), 1) if self.log2_scale else v

    def epsilon(self, t: float, *, scaled: bool = False) -> float:
        """Least x >= 0 with the charged bound on H(x) <= t: safeguarded Newton in e^x
        (``scaled``: t is given in the masses' units, t 2^log2_scale)."""
        rel = self.rel
        target = (math.ldexp(t, self.log2_scale) if self.log2_scale and not scaled else t) - self.slack
        if target < 0.0:
            return math.inf

        def g(x):  # (charged H - target, -dH/dx charged down, charged H)
            h, b = self.terms(x)
            hc = h * (1.0 + rel)
            return hc - target, b * (1.0 - rel), hc

        lo, hi = 0.0, self.max_loss  # g(hi) <= 0 since H(max_loss) = 0: certified
        g_lo, b_lo, h_lo = g(lo)
        if g_lo <= 0.0:
            return 0.0
        h_hi = 0.0  # charged H at hi (kept as computed: g + target would cancel to 0 when H << t)
        for _ in range(200):
            # Newton in y = e^x: H is convex and decreasing in y, so from a point with
            # g > 0 the tangent's root never passes the root:  x' = x + log1p(g / b).
            cands = [lo + math.log1p(g_lo / b_lo) if b_lo > 0.0 else hi]
            if h_hi > 0.0 and h_lo > h_hi:
                # secant on log H (concave in the Gaussian-like tail: stays left of the root)
                r = _log_ratio(h_lo, target) / _log_ratio(h_lo, h_hi)
                cands.append(lo + r * (hi - lo))
            elif b_lo > 0.0 and h_lo > 2.0 * target:
                # no bracket yet: Newton on log H takes long strides (may overshoot)
                cands.append(lo + _log_ratio(h_lo, target) * h_lo / b_lo)
            mid = 0.5 * (lo + hi)
            if h_hi == 0.0 and hi < self.max_loss:
                # the bracket's top lies where H = 0 (above the listed atoms: windowed
                # factors end below the top atom), so neither the secant nor Newton from
                # below can move it: bisect as well, so that it comes down
                cands.append(mid)
            cand = max(c if c < hi else mid for c in cands)
            cand = max(cand, lo + 16.0 * UNIT * max(abs(lo), 1.0))
            if not lo < cand < hi:
                break
            g_c, b_c, h_c = g(cand)
            if g_c <= 0.0:
                hi, h_hi = cand, h_c
            else:
                lo, g_lo, b_lo, h_lo = cand, g_c, b_c, h_c
            if hi - lo <= 64.0 * UNIT * max(abs(hi), 1.0):
                break
        return up(hi, 2)  # hi always satisfies the charged bound: a certified eps_g
