r"""What one lattice pass composes (layer L3): randomized-response groups and mechanism
leaves, and the float estimates the drivers aim with.

A :class:`Workload` is the multiset the drivers of :mod:`optcomp.lattice` refine over:
``vals``/``cnts`` -- groups of two-atom randomized responses (the black-box (eps_i, delta_i)
pairs given no delta event) -- and ``sources`` -- mechanisms of :mod:`optcomp.mechanisms`
with their counts, each entering as a :class:`~optcomp._lattice.leaves.Leaf` built for the
pass's step h (:func:`mechanism_leaf`: finite loss laws as their atoms, laws with a
continuous part by connect-the-dots cells on the lattice itself).

Everything here except the leaves is an *estimate*: the tilt that centres the composed
loss at x, the Chernoff guess of eps_g, the tilted spread, the lattice width.  Only the
cost of a pass depends on them, never its bounds."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import expit

from .._cgf import _cumulant_slope, _log_mgf, chernoff_guess, tilt_for
from .._rounding import LIBM_ULPS, UNIT, down, sum_up, up
from .._laws import FORWARD, TAIL, AtomLaw
from .._types import ApproxTooCostly
from . import leaves


@lru_cache(maxsize=32)
def mechanism_leaf(mech, h: float, direction: str = FORWARD, tail: float = TAIL) -> leaves.Leaf:
    """The leaf of one mechanism at the lattice step h, from its law (``Mechanism.law``).

    A finite loss law with P-mass delta_m at +inf (a :class:`~optcomp.mechanisms.Profile`'s
    min delta_j, a :class:`~optcomp.mechanisms.Pair`'s outcomes with q = 0) is split as
    P = delta_m [+inf] + (1 - delta_m) P': the leaf is the conditional law P' (masses
    p/(1 - delta_m): p_hi/(1 - inf_hi) rounded up, p_lo/(1 - inf_lo) rounded down -- each
    the side that matches the delta_m used with it) and delta_m enters as an independent
    delta event, exactly like a black box's delta_i: delta(x) = 1 - prod(1 - delta)(1 - H'(x))
    (:func:`inf_mass`).  A law with a continuous part is the connect-the-dots leaf of its
    cells (:func:`optcomp._lattice.leaves.cells_leaf`)."""
    try:
        law = mech.law(h, direction, tail=tail)
    except ValueError as exc:  # too many cells or atoms at this step: a size limit, not bad input
        raise ApproxTooCostly(f"{mech!r} at lattice step h={h:g}: {exc}", None) from None
    if isinstance(law, AtomLaw):
        p_lo, p_hi, inf_lo, inf_hi = law.p_lo, law.p_hi, law.inf_lo, law.inf_hi
        if inf_hi > 0.0:
            if inf_hi < 1.0:
                p_hi = np.minimum(np.nextafter(p_hi / (1.0 - inf_hi) * (1.0 + 2.0**-52), 2.0), 1.0)
            else:  # +inf mass 1 to float precision beside a sliver of finite mass: each at most 1
                p_hi = np.where(p_hi > 0.0, 1.0, 0.0)
            if inf_lo < 1.0:
                p_lo = np.maximum(np.nextafter(p_lo / (1.0 - inf_lo) * (1.0 - 2.0**-52), -1.0), 0.0)
        return leaves.Leaf.from_masses(law.loss, law.perr, p_lo, p_hi)
    pts = law.points
    points = (pts.loss, pts.perr, pts.p_lo, pts.p_hi) if pts.loss.size else None
    return leaves.cells_leaf(law.h, law.n0, law.p_lo, law.p_hi, law.q_lo, law.q_hi, points, law.below_hi,
                             law.above_hi)


def inf_mass(mech, direction: str = FORWARD) -> tuple[float, float]:
    """Bracket (inf_lo, inf_hi) of one copy's P-mass at loss +inf, handled as a delta event
    (see :func:`mechanism_leaf`); (0, 0) for laws with a continuous part (their truncation
    tails stay in the leaf, charged to the upper side)."""
    return mech.inf_mass(direction)


GUIDE_CELLS = 512  # cells of the coarse leaf a source's CGF estimate is computed from


class Source:
    """``count`` copies of one mechanism in one direction: its leaves by step (cached) and a
    coarse float picture of its loss law (atoms, P-masses) for the estimates."""

    def __init__(self, mech, count: int, direction: str = FORWARD, tail: float = TAIL):
        self.mech, self.count, self.direction, self.tail = mech, int(count), direction, tail
        if mech.kind == "atoms":
            law = mech.law(1.0, direction)
            loss, p = law.loss, law.p_hi
            self.inf_mass = 0.0  # (the leaf is the conditional law: the +inf mass is a delta event)
            self.top_loss = law.top()
        else:
            lo_loss, hi_loss = mech.loss_range(direction, tail=tail)
            # a step giving ~GUIDE_CELLS cells over the law's range
            hg = 2.0 ** math.floor(math.log2(max((hi_loss - lo_loss) / GUIDE_CELLS, 2.0**-40)))
            law = mech.law(hg, direction, tail=tail)
            pts = law.points
            loss = np.concatenate([(np.arange(law.p_hi.size) + law.n0 + 0.5) * hg, pts.loss])
            p = np.concatenate([law.p_hi, pts.p_hi])
            self.inf_mass = float(law.above_hi)
            # a bounded law (no tail above the cells): its largest loss is the upper end of
            # loss_range (the continuous part's end or a point mass's, rounded up)
            self.top_loss = hi_loss if self.inf_mass == 0.0 else math.inf
        keep = p > 0
        self.loss, self.logp = loss[keep], np.log(p[keep])
        self.width = float(np.max(np.abs(self.loss))) if self.loss.size else 0.0

    def leaf(self, h: float) -> leaves.Leaf:
        return mechanism_leaf(self.mech, h, self.direction, self.tail)

    def span(self, h: float) -> float:
        return self.leaf(h).span

    def cgf(self, theta: float) -> tuple[float, float, float]:
        """(K, K', K'') of one copy's coarse law at theta (floats)."""
        w = self.logp + theta * self.loss
        mx = float(np.max(w))
        e = np.exp(w - mx)
        z = float(np.sum(e))
        m1 = float(np.sum(e * self.loss)) / z
        m2 = float(np.sum(e * self.loss**2)) / z
        return mx + math.log(z), m1, max(m2 - m1 * m1, 0.0)


class GaussianSource(Source):
    """All the Gaussian mechanisms of a workload as one: k Gaussians compose exactly to one of
    mu^2 = sum Delta_i^2/sigma_i^2 (Dong-Roth-Su; :mod:`optcomp.gdp`), whose certified
    bracket [mu_lo, mu_hi] gives the leaf's upper atoms (from mu_hi: delta grows with mu)
    and its lower atoms (from mu_lo)."""

    def __init__(self, mu_lo: float, mu_hi: float, tail: float = TAIL):
        from ..mechanisms import Gaussian

        super().__init__(Gaussian(1.0, mu_hi), 1, FORWARD, tail)
        self._low = Gaussian(1.0, mu_lo)

    def leaf(self, h: float) -> leaves.Leaf:
        up = mechanism_leaf(self.mech, h, self.direction, self.tail)
        if self._low == self.mech:
            return up
        lo = mechanism_leaf(self._low, h, self.direction, self.tail)
        return leaves.Leaf(up.upper, lo.lower, up.log_inf)


class Workload:
    """Randomized-response groups (``vals`` ascending, ``cnts``) and mechanism ``sources``."""

    def __init__(self, vals: np.ndarray, cnts: np.ndarray, sources: tuple = ()):
        self.vals, self.cnts, self.sources = vals, cnts, tuple(sources)
        self.cf = cnts.astype(float)
        self.rr_plan = leaves.leaf_plan(vals, cnts)

    def plan(self, h: float) -> list:
        out = list(self.rr_plan)
        for s in self.sources:
            out.append(leaves.Power(s.leaf(h), s.count, s.leaf) if s.count > 1 else s.leaf(h))
        return out

    def leaves_count(self) -> int:
        return len(self.rr_plan) + sum(s.count for s in self.sources)

    def span(self, h: float) -> float:
        """Sum over the leaves of their half-widths (for the 2^49 check of exact positions)."""
        return float(np.sum(self.cnts * self.vals)) + sum(s.count * s.span(h) for s in self.sources)

    def top_bound(self) -> float:
        """An upper bound of the largest composed loss (inf when a leaf has an unbounded law):
        H(x) = 0 for x at or above it."""
        from .._rounding import dot_dir, up

        t = dot_dir(self.cnts, self.vals, True) if self.vals.size else 0.0
        for s in self.sources:
            t = up(t + up(s.count * s.top_loss, 1), 1) if math.isfinite(s.top_loss) else math.inf
        return t

    def top(self) -> float:
        """An estimate of the largest finite composed loss."""
        return float(np.sum(self.cnts * self.vals)) + sum(s.count * s.width for s in self.sources)

    # ---- certified Chernoff bounds (the fallback bracket of the drivers)
    def _mgf_bound(self, theta: float, h: float) -> tuple[float, float]:
        """Certified (K, I) at theta >= 0 for the composition of the leaves' upper pairs at
        step h (which dominates the workload's): log E_P[e^{theta L}; L finite] <= K, and
        P[some leaf at +inf] <= I (union bound)."""
        S = np.array([float(theta)])
        terms = [float(leaves.group_mgf(items, S)[0]) for items in self.rr_plan]
        inf = []
        for s in self.sources:
            leaf = s.leaf(h)
            terms.append(s.count * float(leaves.upper_mgf(leaf, S)[0]))
            if leaf.log_inf > -math.inf:  # exp(log a) may fall |log a| u short of a: 1e-9 covers it
                inf.append(up(s.count * (math.exp(leaf.log_inf) * (1.0 + 1e-9)), 1))
        mag = sum(abs(t) for t in terms)
        K = math.fsum(terms) + (len(terms) + 4) * 2.0 * UNIT * mag  # each c K rounded once, fsum exact
        return K, (sum_up(inf) if inf else 0.0)

    def chernoff_delta(self, x: float, theta: float, h: float) -> float:
        """A certified upper bound of H(x) = E_P[(1 - e^{x - L})_+]: H(x) <= P[L > x] <= I +
        e^{K - theta x} (Markov at theta >= 0; :meth:`_mgf_bound`), at most 1."""
        if not (0.0 <= theta < math.inf):
            return 1.0
        K, inf = self._mgf_bound(theta, h)
        tx = theta * x
        e = K - tx + 2.0 * UNIT * (abs(K) + abs(tx)) + 1e-300
        if e >= 0.0 or inf >= 1.0:
            return 1.0
        tail = math.ulp(0.0) if e < -745.2 else up(math.exp(e), LIBM_ULPS)  # e^-745.2 < 2^-1074
        return min(1.0, up(inf + tail, 1))

    def chernoff_epsilon(self, t: float, theta: float, h: float) -> float:
        """A certified x >= 0 with H(x) <= t (so eps_g <= x), from I + e^{K - theta x} <= t at
        theta > 0; inf when there is none (t <= I, or theta = 0)."""
        if not (0.0 < theta < math.inf) or not t > 0.0:
            return math.inf
        K, inf = self._mgf_bound(theta, h)
        room = down(t - inf, 1)
        if not room > 0.0:
            return math.inf
        num = K - down(math.log(room), LIBM_ULPS)
        num = num + 2.0 * UNIT * abs(num) + 1e-300
        return max(0.0, up(num / theta, 1))

    # ---- estimates (floats): K, K', K'' of the composed loss under P
    def cgf(self, theta: float) -> tuple[float, float, float]:
        K = _log_mgf(self.vals, theta, self.cf) if self.vals.size else 0.0
        K1 = _cumulant_slope(self.vals, theta, self.cf) if self.vals.size else 0.0
        e2 = self.vals * (1.0 + 2.0 * theta)
        K2 = float(np.sum(self.cf * (2.0 * self.vals) ** 2 * expit(e2) * expit(-e2)))
        for s in self.sources:
            k, k1, k2 = s.cgf(theta)
            K, K1, K2 = K + s.count * k, K1 + s.count * k1, K2 + s.count * k2
        return K, K1, K2

    def tilt_for(self, x: float) -> float:
        """theta >= 0 with K'(theta) = x (0 below the mean; large near the top)."""
        if not self.sources:
            return tilt_for(self.vals, x, self.cf)
        if x <= self.cgf(0.0)[1]:
            return 0.0
        lo, hi = 0.0, 1.0
        while self.cgf(hi)[1] < x and hi < 2.0**40:
            lo, hi = hi, 2.0 * hi
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if self.cgf(mid)[1] < x:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-9 * hi:
                break
        return 0.5 * (lo + hi)

    def chernoff_guess(self, t: float) -> float:
        """x = K'(theta) where the Chernoff rate K - theta K' reaches log t."""
        if not self.sources:
            return chernoff_guess(self.vals, t, self.cf)
        logt = math.log(max(t, 1e-300))

        def rate(th):
            K, K1, _ = self.cgf(th)
            return K - th * K1

        if rate(0.0) <= logt:
            return self.cgf(0.0)[1]
        lo, hi = 0.0, 1.0
        while rate(hi) > logt and hi < 2.0**40:
            lo, hi = hi, 2.0 * hi
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if rate(mid) > logt:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-9 * hi:
                break
        return min(self.cgf(hi)[1], self.top())

    def points(self, theta: float, h: float) -> int:
        """Lattice points of the widest node: 30 tilted standard deviations plus the widest
        leaf, capped by the full support."""
        sd = math.sqrt(self.cgf(theta)[2])
        widest = max([float(np.max(self.vals)) if self.vals.size else 0.0] + [s.width for s in self.sources])
        return int(min(2.0 * self.top(), 30.0 * sd + 4.0 * widest + 2.0) / h) + 1

    def weight(self, theta: float) -> float:
        """Sum over the leaves of their measured gap coefficients (gap ~ this x h^2): about
        0.12 (1 + theta) for a binomial group leaf or a mechanism leaf and 0.1 (1 + theta)
        for a bundle (the (1 + lambda) factor of the second-order term, lambda ~ theta =
        |d log H/dx|)."""
        rr = sum(0.12 if (len(items) == 1 and items[0][1] + 1 > leaves.BUNDLE_ATOMS) else 0.1
                 for items in self.rr_plan)
        return (1.0 + theta) * (rr + 0.12 * sum(s.count for s in self.sources) * self._power_gap())

    def _power_gap(self) -> float:
        """For one mechanism's copies alone (a pass by :func:`optcomp._lattice.selfcompose.power_pass`,
        at a step aligned to its law): their gap against generic leaves'
        (:func:`~optcomp._lattice.selfcompose.gap_factor` of the leaf at a probe step); else 1."""
        if self.rr_plan or len(self.sources) != 1 or self.sources[0].count < 2:
            return 1.0
        if not hasattr(self, "_gap"):
            from .selfcompose import gap_factor

            s = self.sources[0]
            probe = 2.0 ** math.floor(math.log2(max(s.width, 2.0**-40) / 256.0))
            try:
                self._gap = gap_factor(s.leaf(probe))
            except (ValueError, ApproxTooCostly):
                self._gap = 1.0
        return self._gap
