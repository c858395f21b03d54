"""The default method, ``method="auto"``: the exact optimum where it can be computed, else
a certified upper bound on it within a stated tolerance.

Exact optimal composition is #P-complete (MV Thm 1.6), so ``method="optimal"`` raises
:class:`optcomp.ExactTooLarge` on inputs such as 1000 distinct real eps_i.  A practitioner
asking for "the" eps_g wants an answer on every input, and a certified one:

* ``optimal`` (MV Thm 1.5 / KOV Thm 3.3, rounded up by a few ulps) whenever it answers;
* otherwise the upper end of the certified bracket of :func:`optcomp.epsilon_bounds`
  (MV Thm 1.7, the lattice algorithm) with ``tol = AUTO_TOL``:
  ``OptComp <= eps_g <= OptComp + 1e-4`` (absolute, in eps), and for ``delta_g``
  ``delta_opt <= delta_g <= delta_opt (1 + 1e-4)``;
* where even that tolerance would need a finer lattice than ``max_points`` allows, the
  certified bracket reached so far (:class:`optcomp.ApproxTooCostly` carries it): its upper
  end is still never below the optimum.

The inverse law.  Where ``optimal`` answers, ``delta_g(eps_g=epsilon_g(delta_g=d)) <= d``
holds to the last ulp (``optimal_epsilon`` checks its root with ``optimal_delta``).  Where
the certified approximation answers -- mechanisms of :mod:`optcomp.mechanisms` beyond the
exact paths, or black boxes beyond ``max_atoms`` -- the two directions are computed
independently, each within its tolerance tol: eps_opt(d) <= epsilon_g(d) <= eps_opt(d) +
tol, and delta_opt(x) <= delta_g(x) <= max(delta_opt(x)/(1 - tol), delta_opt(x - tol))
(:func:`optcomp.lattice.lattice_delta_bounds`).  Since delta_opt(epsilon_g(d)) <= d and
delta_opt decreases, ``delta_g(eps_g=epsilon_g(delta_g=d)) <= max(d/(1 - tol),
delta_opt(eps_opt(d) - tol))``: the inverse law holds to the delta tolerance (relative, or
one tol to the left in eps_g), not to the ulp.  A size limit (the bracket fallback below)
carries neither tolerance, hence no inverse law.

Which of these answered is logged at INFO level on the ``optcomp`` logger (silent unless
the caller configures logging) and returned by :func:`resolve_epsilon` /
:func:`resolve_delta`, which the command line prints in its header.  ``method="optimal"``
stays strict for those who ask for the exact value.
"""

from __future__ import annotations

import logging

from . import _memory
from ._inputs import Mechanisms
from ._types import ApproxTooCostly, ExactTooLarge

__all__ = ["AUTO_TOL", "OPTIONS", "auto_epsilon", "auto_delta", "resolve_epsilon", "resolve_delta"]

#: the stated tolerance of the fallback: absolute in eps_g, relative in delta_g
AUTO_TOL = 1e-4
OPTIONS = ("tol", "max_memory", "progress")

_log = logging.getLogger("optcomp")


def _resolve(exact, bounded, what: str, tol, progress) -> tuple[float, str]:
    try:
        return float(exact()), "optimal (exact)"
    except ExactTooLarge as exc:
        reason = str(exc).split(" — ")[0].split("; ")[0]
    tol = AUTO_TOL if tol is None else tol
    kind = "absolute" if what == "eps_g" else "relative"
    try:
        upper = bounded(tol, progress)
        how = f"approx (certified upper bound, {kind} tol {tol:g}; exact out of reach)"
    except ApproxTooCostly as exc:
        if exc.bounds is None:
            raise
        upper = exc.bounds.upper
        how = f"approx (certified upper bound, gap {exc.bounds.gap:.3g}: tol {tol:g} needs a finer lattice)"
    _log.info("method='auto' for %s: %s [%s]", what, how, reason)
    return float(upper), how


def resolve_epsilon(m: Mechanisms, delta_g: float, *, tol=None, max_memory=None, progress=None) -> tuple[float, str]:
    """(eps_g, how it was obtained) for ``method="auto"``; see the module docstring."""
    from .approx import approx_epsilon
    from .methods import METHOD_INFO

    with _memory.limit(max_memory):
        return _resolve(lambda: METHOD_INFO["optimal"].epsilon(m, delta_g),
                        lambda t, p: approx_epsilon(m, delta_g, tol=t, progress=p), "eps_g", tol, progress)


def resolve_delta(m: Mechanisms, eps_g: float, *, tol=None, max_memory=None, progress=None) -> tuple[float, str]:
    """(delta_g, how it was obtained) for ``method="auto"``; see the module docstring."""
    from .approx import approx_delta
    from .methods import METHOD_INFO

    with _memory.limit(max_memory):
        return _resolve(lambda: METHOD_INFO["optimal"].delta(m, eps_g),
                        lambda t, p: approx_delta(m, eps_g, tol=t, progress=p), "delta_g", tol, progress)


def auto_epsilon(m: Mechanisms, delta_g: float, *, tol=None, max_memory=None, progress=None) -> float:
    """eps_g of ``method="auto"``: the exact optimum (``optimal``) where it can be computed,
    else a certified upper bound within ``tol`` (default :data:`AUTO_TOL` = 1e-4, absolute)
    of it; never below the optimum.  ``max_memory``: the call's memory budget in bytes
    (default 1.5 GiB, :mod:`optcomp._memory`)."""
    return resolve_epsilon(m, delta_g, tol=tol, max_memory=max_memory, progress=progress)[0]


def auto_delta(m: Mechanisms, eps_g: float, *, tol=None, max_memory=None, progress=None) -> float:
    """delta_g of ``method="auto"``: the exact optimum (``optimal``) where it can be
    computed, else a certified upper bound within ``tol`` (default :data:`AUTO_TOL` = 1e-4,
    relative) of it; never below the optimum.  ``max_memory`` as for :func:`auto_epsilon`."""
    return resolve_delta(m, eps_g, tol=tol, max_memory=max_memory, progress=progress)[0]
