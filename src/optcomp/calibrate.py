r"""Budget splitting: how much privacy each of k queries may use under a global budget.

The inverse problem of composition (KOV Section 4; the "budget-splitting" use of MV's
optimal composition): given a global budget (eps_g, delta_g) and k queries, find the
largest per-query eps such that the composition theorem certifies

    epsilon_g(eps, delta, k=k, delta_g=delta_g, method=method) <= eps_g,

and from it the Laplace noise each query needs (sensitivity s: scale b = s / eps, standard
deviation sqrt(2) b).  A tighter theorem certifies a larger per-query eps, hence less
noise for the same global guarantee: that difference is what the optimal composition
theorem buys in practice.

How it is computed: a bisection over the public API (:func:`optcomp.epsilon_g`), which is
nondecreasing in eps for every method.  The answer is *certified on the safe side*: the
returned eps is always one at which the check above was evaluated and passed (the library's
eps_g values are themselves rounded up), so using it never exceeds the budget; the
bisection runs until the bracket is narrower than ``rtol`` relative to the answer (default
0: until its ends are adjacent floats), so the answer is the largest admissible value to
that precision.

Heterogeneous splits: with ``weights`` w_1..w_k the queries get eps_i = c w_i and the
largest admissible scale c is returned (:func:`split_budget`).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

import optcomp

from ._inputs import check_delta_g, check_eps_g, check_k

__all__ = ["per_query_epsilon", "laplace_scale", "split_budget", "largest_passing"]

_RTOL = 0.0  # bisect down to adjacent floats
_MAX_DOUBLINGS = 2100  # from 2^-1074 to 2^1024 and then some


def largest_passing(passes: Callable[[float], bool], start: float, *, rtol: float = _RTOL) -> float:
    """Largest x >= 0 (to relative precision ``rtol``) with ``passes(x)`` true, for a
    predicate that is true on [0, x*] and false above (monotone).  Returns a point where
    ``passes`` was evaluated true, or 0.0 if it fails at 0 as well (then nothing passes);
    ``math.inf`` if it never fails.  ``start`` is a first guess of the scale (> 0).
    """
    if not passes(0.0):
        return 0.0
    lo, hi = 0.0, float(start)
    if not (hi > 0 and math.isfinite(hi)):
        raise ValueError(f"start must be a finite number > 0, got {start!r}")
    # bracket: find hi with passes(hi) false
    for _ in range(_MAX_DOUBLINGS):
        if not passes(hi):
            break
        lo, hi = hi, hi * 2.0
        if not math.isfinite(hi):
            return math.inf
    else:  # pragma: no cover - would need > 2^2100
        return math.inf
    if lo == 0.0:
        # shrink until something passes (a tiny positive eps passes for every method
        # that passes at 0, unless the budget is exactly 0)
        while hi > 0.0:
            mid = hi / 2.0
            if mid == 0.0:
                return 0.0
            if passes(mid):
                lo = mid
                break
            hi = mid
    # bisection: passes(lo) true, passes(hi) false
    while hi - lo > rtol * lo:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


def split_budget(weights, eps_g: float, delta_g: float, *, delta=0.0, method: str = "optimal",
                 rtol: float = _RTOL, **options) -> np.ndarray:
    """Per-query eps_i = c w_i with the largest c such that ``method`` certifies the
    composition of the (eps_i, delta_i)-DP queries to be (eps_g, delta_g)-DP.

    ``weights``: positive relative budgets (one per query); ``delta``: per-query delta_i
    (number or array; 0 for pure-DP mechanisms such as Laplace).  Returns the array of
    eps_i (all zeros if even eps_i = 0 does not fit, i.e. delta_g is too small for the
    delta_i).  Certified: ``optcomp.epsilon_g(result, delta, delta_g=delta_g, method=method)
    <= eps_g`` was checked for exactly this c.
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size < 1:
        raise ValueError(f"weights must be a non-empty 1-D sequence, got shape {w.shape}")
    if np.any(~(w > 0)) or np.any(~np.isfinite(w)):
        raise ValueError(f"weights must be finite and > 0, got {w[~((w > 0) & np.isfinite(w))][0]!r}")
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    optcomp.epsilon_g(w, delta, delta_g=delta_g, method=method, **options)  # validate the rest once

    def passes(c: float) -> bool:
        return optcomp.epsilon_g(c * w, delta, delta_g=delta_g, method=method, **options) <= eps_g

    start = max(eps_g, 1e-3) / float(np.sum(w))  # basic composition's answer (>= 1e-3 scale)
    c = largest_passing(passes, start, rtol=rtol)
    return c * w


def per_query_epsilon(k: int, eps_g: float, delta_g: float, *, delta: float = 0.0, method: str = "optimal",
                      rtol: float = _RTOL, **options) -> float:
    """Largest eps such that k (eps, delta)-DP queries compose to (eps_g, delta_g)-DP under
    ``method`` (to relative precision ``rtol``; certified: the check passed at the value
    returned).  0.0 when no eps works (delta_g < 1 - (1 - delta)^k for the optimal method,
    < k delta for the others)."""
    k = check_k(k)
    eps_g = check_eps_g(eps_g)
    delta_g = check_delta_g(delta_g)
    optcomp.epsilon_g(0.0, delta, k=k, delta_g=delta_g, method=method, **options)  # validate once

    def passes(e: float) -> bool:
        return optcomp.epsilon_g(e, delta, k=k, delta_g=delta_g, method=method, **options) <= eps_g

    return largest_passing(passes, max(eps_g, 1e-3) / k, rtol=rtol)


def laplace_scale(k: int, eps_g: float, delta_g: float, *, sensitivity: float = 1.0, method: str = "optimal",
                  **options) -> float:
    """Laplace noise scale b = sensitivity / eps per query (variance 2 b^2) so that k queries
    of that sensitivity, each answered with Lap(b) noise (an (eps, 0)-DP mechanism), are
    (eps_g, delta_g)-DP under ``method``.  ``math.inf`` if no noise level suffices."""
    if not (isinstance(sensitivity, (int, float)) and math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    eps = per_query_epsilon(k, eps_g, delta_g, delta=0.0, method=method, **options)
    return math.inf if eps == 0.0 else sensitivity / eps
