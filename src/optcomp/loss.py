r"""The privacy-loss distribution and the hockey-stick functional every exact and
approximate method of this package solves.

By MV Lemma 3.2/3.4 (KOV Thm 2.5) composing (eps_i, delta_i)-DP mechanisms is exactly
composing the randomized responses of MV Definition 3.1.  Under the input 0, with
probability prod(1 - delta_i) no "delta event" happens and the privacy loss is the sum
``L = sum_i s_i eps_i`` of independent signs, ``P0[s_i = +1] = e^{eps_i}/(1 + e^{eps_i})``;
otherwise the loss is +inf.  MV Theorem 1.5 rewritten in probabilities reads

    delta(eps_g) = 1 - prod(1 - delta_i) * (1 - H(eps_g)),
    H(x) = E_P0[(1 - e^{x - L})_+]  =  sum_{l > x} P0[L = l] (1 - e^{x - l}),

so (eps_g, delta_g)-DP holds iff ``H(eps_g) <= t`` with the *residual target*
``t = 1 - (1 - delta_g) / prod(1 - delta_i)`` (:func:`residual_target`).  ``H`` is
continuous and decreasing; between consecutive atoms ``l_{j-1} <= x < l_j`` it is
``S_j - e^{x - l_j} W_j`` with the suffix sums ``S_j = sum_{i>=j} p_i`` and
``W_j = sum_{i>=j} p_i e^{l_j - l_i}`` (every exponent <= 0: no overflow even when
the losses reach the thousands), so eps_g follows in closed form on the right segment,
``eps_g = l_j + log((S_j - t) / W_j)`` — no root finder.

Rounding (the safe side is a larger eps_g and a larger delta_g):

* every evaluation of ``H`` is charged a rounding-error bound (:func:`rounding_bound`:
  a few units of 2^-53 times the magnitude of the summed terms, growing with log2 of the
  number of atoms) plus the distribution's own ``slack`` (mass cut off by truncation or
  underflow, placed at +inf, and any numerical error bound its producer reports);
* eps_g is solved against the target lowered by those bounds and then moved up by a
  few ulps of its own; delta_g is computed from ``H`` raised by them.
* certified *lower* bounds (:func:`solve_lower`, :func:`excess_lower`, used by the
  lattice algorithm of :mod:`optcomp.lattice`) mirror this: every error is charged
  downward and the result is moved down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ._inputs import Mechanisms
from ._rounding import UNIT, down, exact_dir, up

__all__ = [
    "LossDistribution",
    "residual_target",
    "delta_from_excess",
    "solve_segments",
    "solve_lower",
    "excess_lower",
    "suffix_sums",
    "rounding_bound",
    "suffix_cumsum",
    "TINY_MASS",
]


_BLOCK = 32  # block length of the cascaded suffix sums
_SPAN = 30.0  # least loss span of one block of W: p e^{-span} is a normal float for p >= TINY_MASS
TINY_MASS = 1e-290  # masses below this are charged as slack (upper) or dropped (lower)


def _levels(n: int) -> int:
    """Levels of :func:`suffix_cumsum` for n terms (ceil(log_BLOCK n), at least 1)."""
    levels, size = 1, _BLOCK
    while size < n:
        levels += 1
        size *= _BLOCK
    return levels


def rounding_bound(n: int) -> float:
    """Relative error bound for the sums of ``n`` non-negative float64 terms this package
    forms (:func:`suffix_cumsum`, NumPy's pairwise ``np.sum``) and the few operations
    around them.

    Recursive summation of b non-negative terms errs by at most (b - 1) u times their sum
    (Higham, *Accuracy and Stability of Numerical Algorithms*, eq. 4.4); the cascade adds
    one block sum and one carry per level, so a suffix sum errs by at most
    ``levels * (BLOCK + 1) u`` of itself; 16 u more cover the products, exponentials and
    subtractions of one H evaluation.  (NumPy's pairwise sum is within this bound too.)
    """
    return (16.0 + _levels(max(n, 2)) * (_BLOCK + 1.0)) * UNIT


def suffix_cumsum(x: np.ndarray) -> np.ndarray:
    """``s_j = sum_{i >= j} x_i`` for non-negative ``x``, with relative error at most
    ``_levels(n) * (BLOCK + 1) u`` per entry (see :func:`rounding_bound`).

    A plain ``np.cumsum`` adds every term to one running total, which can lose
    n u of the total (e.g. 10^5 tiny masses added to 0.5); here blocks of ``BLOCK`` terms
    are summed locally and the blocks' totals are combined by the same scheme, recursively.
    """
    n = x.size
    if n <= _BLOCK:
        return np.cumsum(x[::-1])[::-1]
    nb = -(-n // _BLOCK)
    padded = np.zeros(nb * _BLOCK)
    padded[:n] = x
    local = np.cumsum(padded.reshape(nb, _BLOCK)[:, ::-1], axis=1)[:, ::-1]
    carry = suffix_cumsum(local[:, 0].copy())  # sum of the totals of blocks >= b
    local[:-1] += carry[1:, None]  # add the blocks after this one
    return local.ravel()[:n]


def residual_target(m: Mechanisms, delta_g: float, *, round_up: bool = False) -> float:
    """t = 1 - (1 - delta_g) / prod_i (1 - delta_i), rounded down (the safe side for an
    upper bound on eps_g), or up with ``round_up=True`` (the safe side for a lower bound).

    ``t < 0`` means delta_g < 1 - prod(1 - delta_i): no finite eps_g is possible.  In
    floating point ``t`` carries an absolute error of a few ulps of delta_g; when that is
    not small relative to ``t`` itself (delta_g just above 1 - prod(1 - delta_i), or the
    KOV corner delta_g = 1 - (1 - delta)^k exactly), ``t`` is recomputed in exact rational
    arithmetic from the binary inputs and rounded, so its sign and digits are right.
    """
    if not np.any(m.delta):
        return delta_g  # exact: prod(1 - delta_i) = 1
    log_nd = m.log_no_delta
    l1 = math.log1p(-delta_g)
    a = l1 - log_nd
    err_a = 8.0 * UNIT * (abs(l1) + abs(log_nd) + m.k * UNIT * abs(log_nd))
    t_low = -math.expm1(a + err_a)
    t_low -= 4.0 * UNIT * abs(t_low)
    t_high = -math.expm1(a - err_a)
    t_high += 4.0 * UNIT * abs(t_high)
    chosen = t_high if round_up else t_low
    width = t_high - t_low
    if (t_low > 0.0 and width <= 1e-9 * t_low) or (t_high < 0.0 and width <= -1e-9 * t_high):
        return chosen
    exact = _exact_residual(m, delta_g)
    if exact is None:  # too large to settle exactly: the safe side of the float bracket
        if round_up:
            return t_high
        return t_low if t_low > 0.0 else (t_high if t_high < 0.0 else -UNIT)
    return exact_dir(exact, up=round_up)


def _exact_residual(m: Mechanisms, delta_g: float):
    """1 - (1 - delta_g)/prod(1 - delta_i) as an exact Fraction (None if too costly)."""
    one = Fraction(1)
    if m.homogeneous:
        if m.k > 100_000:
            return None
        prod = (one - Fraction(float(m.delta[0]))) ** m.k
    else:
        if m.k > 5_000:
            return None
        prod = one
        for d in m.delta:
            prod *= one - Fraction(float(d))
    return one - (one - Fraction(delta_g)) / prod


def delta_from_excess(m: Mechanisms, excess: float, *, round_up: bool = True) -> float:
    """delta_g = 1 - prod(1 - delta_i) (1 - H) from a bound ``excess`` on H, rounded up (an
    upper bound on H gives a certified delta_g) or down (a lower bound on H, a lower bound)."""
    excess = min(max(excess, 0.0), 1.0)
    log_nd = m.log_no_delta
    if log_nd == 0.0:
        return min(1.0, up(excess, 1)) if round_up else max(0.0, down(excess, 1))
    # 1 - e^{log_nd} (1 - H) = -expm1(log_nd + log1p(-H))
    s = log_nd + (math.log1p(-excess) if excess < 1.0 else -math.inf)
    value = -math.expm1(s)
    err = 8.0 * UNIT * (abs(value) + abs(log_nd) + m.k * UNIT * abs(log_nd))
    if round_up:
        return min(1.0, up(value + err, 1))
    return max(0.0, down(value - err, 1))


def suffix_sums(loss: np.ndarray, p0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Suffix sums ``S_j = sum_{i>=j} p_i`` and ``W_j = sum_{i>=j} p_i e^{l_j - l_i}``.

    Both arrays get a trailing 0 (index n).  ``W`` is accumulated block-wise with a
    local reference loss so that no exponent exceeds ``_SPAN`` in magnitude: the losses
    may span thousands (k * eps large) without overflow, and masses >= TINY_MASS stay
    normal floats (callers remove smaller ones, see :class:`LossDistribution`).
    """
    n = loss.size
    S = np.zeros(n + 1)
    S[:n] = suffix_cumsum(p0)
    W = np.zeros(n + 1)
    if n == 0:
        return S, W
    # the widest span over which the smallest mass times e^{-span} stays a normal float
    positive = p0[p0 > 0.0]
    smallest = float(positive.min()) if positive.size else 1.0
    span = min(600.0, max(_SPAN, math.log(smallest / 2.3e-308) - 1.0))
    end = n
    carry = 0.0  # W at index `end` (0 for the very top)
    while end > 0:
        top = loss[end - 1]
        start = int(np.searchsorted(loss, top - span, side="left"))
        start = min(start, end - 1)
        seg_l = loss[start:end]
        ref = seg_l[0]
        # sum_{i in [j, end)} p_i e^{ref - l_i}, then rescale by e^{l_j - ref}
        terms = p0[start:end] * np.exp(ref - seg_l)
        local = suffix_cumsum(terms)
        scale = np.exp(seg_l - ref)  # <= e^{span}
        W[start:end] = local * scale
        if carry:
            W[start:end] += carry * np.exp(seg_l - loss[end]) if end < n else 0.0
        carry = W[start]
        end = start
    return S, W


@dataclass(frozen=True)
class LossDistribution:
    """Finite atoms of a privacy-loss distribution under P0 (given no delta event).

    ``loss`` ascending, ``p0`` their P0 masses (summing to <= 1).  ``slack`` is an
    absolute amount added to every evaluation of ``H`` (mass that was cut off and is
    accounted for as if it sat at +inf, and numerical error bounds), so any use of the
    distribution errs toward the safe side.  ``exact_from``: ``H(x)`` is exact for
    ``x >= exact_from`` (atoms below it may have been omitted, as by windowing).
    """

    loss: np.ndarray
    p0: np.ndarray
    slack: float = 0.0
    exact_from: float = -math.inf
    _suffix: tuple = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        # Masses below TINY_MASS would turn subnormal inside W (p e^{-span}) and lose
        # their relative accuracy; they are moved to +inf (slack), the safe side for H.
        tiny = self.p0 < TINY_MASS
        if np.any(tiny):
            object.__setattr__(self, "slack", self.slack + float(np.sum(self.p0[tiny])) * (1.0 + 1e-12))
            object.__setattr__(self, "p0", np.where(tiny, 0.0, self.p0))

    def suffix(self):
        if self._suffix is None:
            object.__setattr__(self, "_suffix", suffix_sums(self.loss, self.p0))
        return self._suffix

    @property
    def error(self) -> float:
        """Relative rounding-error bound charged to each evaluation of H."""
        return rounding_bound(self.loss.size)

    def excess(self, x: float) -> float:
        """An upper bound on H(x) = sum_{l > x} p0 (1 - e^{x - l}) (plus ``slack``)."""
        if x < self.exact_from:
            raise ValueError("excess evaluated below the distribution's exact range")
        S, W = self.suffix()
        j = int(np.searchsorted(self.loss, x, side="right"))
        if j >= self.loss.size:
            return self.slack
        a = S[j]
        b = math.exp(x - self.loss[j]) * W[j]
        return max(a - b, 0.0) + self.error * (a + b) + self.slack

    def delta(self, m: Mechanisms, eps_g: float) -> float:
        """Certified delta_g at eps_g: 1 - prod(1-delta_i)(1 - H(eps_g)), rounded up."""
        return delta_from_excess(m, self.excess(eps_g))

    def epsilon(self, t: float) -> float:
        """Least x >= 0 with H(x) <= t (see :func:`solve_segments`)."""
        return solve_segments(self, t)


class WindowTooNarrow(Exception):
    """Raised when the root lies below ``exact_from`` (the producer must widen)."""


def solve_segments(dist: LossDistribution, t: float) -> float:
    """Least x >= 0 with H(x) <= t for an explicitly listed distribution, rounded up.

    Works segment by segment: the atoms' H values locate the segment holding the root,
    where H(x) = S_j - e^{x - l_j} W_j is inverted in closed form.  Returns ``math.inf``
    when even x -> inf leaves H above the (error-lowered) target.
    """
    if t < 0.0:
        return math.inf
    loss = dist.loss
    n = loss.size
    rel = dist.error
    # Safe target: H_computed * (1 + rel) + slack <= t  =>  compare S - (1 - rel) e^{..} W
    target = t - dist.slack
    if target < 0.0 or n == 0:
        return math.inf if target < 0.0 else 0.0
    S, W = dist.suffix()
    # Upper bounds on H at each atom l_j (H(l_j) uses atoms i > j).
    if n > 1:
        expo = np.exp(loss[:-1] - loss[1:])
        b = expo * W[1:n]
        a = S[1:n]
        h_at = np.empty(n)
        h_at[:-1] = np.maximum(a - b, 0.0) + rel * (a + b)
        h_at[-1] = 0.0
    else:
        h_at = np.zeros(1)
    # enforce monotonicity (non-increasing) upward: a safe envelope of rounding noise
    h_at = np.maximum.accumulate(h_at[::-1])[::-1]
    # J = first atom with H(l_J) <= target; the root lies in (l_{J-1}, l_J].
    J = int(np.searchsorted(-h_at, -target, side="left"))
    # On (l_{J-1}, l_J]:  H(x) = S_J - e^{x - l_J} W_J; solve the charged bound
    #   S_J - e^{u} W_J + rel (S_J + e^{u} W_J) = target,   u = x - l_J <= 0.
    lo = loss[J - 1] if J > 0 else dist.exact_from
    num = S[J] * (1.0 + rel) - target
    den = W[J] * (1.0 - rel)
    if num <= 0.0:
        x = lo  # H is already below the target where the segment starts
    else:
        x = loss[J] + min(math.log(num / den), 0.0)
        x = max(x, lo)
    if J == 0 and x <= dist.exact_from and dist.exact_from > 0.0:
        raise WindowTooNarrow  # the root is below the atoms this distribution lists
    if x <= 0.0:
        return 0.0
    # a few ulps for exp/log/rounding of the closed form itself
    return up(x + 4.0 * UNIT * (abs(loss[J]) + abs(x)), 2)


# --------------------------------------------------------------------------- lower bounds


def solve_lower(loss: np.ndarray, p0: np.ndarray, t: float) -> float:
    """Least x >= 0 with H(x) <= t for the listed atoms, every error charged *downward*:
    the lower-bound mirror of :func:`solve_segments`.

    ``loss`` ascending (atoms with loss <= 0 may be omitted: they never contribute for
    x >= 0), ``p0`` masses that are lower bounds of the true ones.  With the summation
    error of the suffix sums (:func:`rounding_bound`) subtracted, the computed
    H_lo(x) <= H(x), so the least root of H_lo is <= the least root of H; it is found
    segment by segment from the left (no monotonicity of the noisy values assumed) and
    rounded down.  ``math.inf`` when t < 0.
    """
    if t < 0.0:
        return math.inf
    n = loss.size
    if n == 0:
        return 0.0
    rel = rounding_bound(n)
    S, W = suffix_sums(loss, np.where(p0 < TINY_MASS, 0.0, p0))  # dropping mass: lower
    # H_lo at x = 0 (all atoms are > 0)
    h0 = S[0] * (1.0 - rel) - math.exp(-loss[0]) * W[0] * (1.0 + rel)
    if h0 <= t:
        return 0.0
    # H_lo at the atoms: x = l_j uses atoms > j
    h_at = np.zeros(n)
    if n > 1:
        with np.errstate(under="ignore"):
            h_at[:-1] = S[1:n] * (1.0 - rel) - np.exp(loss[:-1] - loss[1:]) * W[1:n] * (1.0 + rel)
    J = int(np.argmax(h_at <= t))  # first atom at which H_lo <= t (h_at[-1] = 0 <= t)
    lo = loss[J - 1] if J > 0 else 0.0
    num = S[J] * (1.0 - rel) - t
    den = W[J] * (1.0 + rel)
    if num <= 0.0 or den <= 0.0:
        x = lo
    else:
        x = loss[J] + min(math.log(num / den), 0.0)
        x = max(x, lo)
    x -= 4.0 * UNIT * (abs(loss[J]) + abs(x))
    return max(0.0, down(x, 2))


def excess_lower(loss: np.ndarray, p0: np.ndarray, x: float) -> float:
    """A lower bound on H(x) = sum_{l > x} p0 (1 - e^{x - l}) (errors charged downward): the
    lower-bound mirror of :meth:`LossDistribution.excess` for atoms whose ``p0`` are lower
    bounds."""
    n = loss.size
    if n == 0:
        return 0.0
    rel = rounding_bound(n)
    S, W = suffix_sums(loss, np.where(p0 < TINY_MASS, 0.0, p0))  # dropping mass: lower
    j = int(np.searchsorted(loss, x, side="right"))
    if j >= n:
        return 0.0
    a = S[j]
    b = math.exp(x - loss[j]) * W[j]
    return max(a * (1.0 - rel) - b * (1.0 + rel), 0.0)
