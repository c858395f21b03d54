"""The peers optcomp is compared with: Google's ``dp_accounting`` PLD accountant (the
"compare" extra), wrapped once for the runtime experiments, the benchmarks and the tests.

:func:`pld_epsilon` is the accountant used at its best for a multiset of (eps_i, delta_i)-DP
mechanisms: one worst-case privacy-loss distribution per distinct pair
(``from_privacy_parameters``, pessimistic discretization with step ``interval``), identical
mechanisms self-composed (``self_compose``), the groups composed in order of (eps, delta),
then ``get_epsilon_for_delta``.  Its value is an upper bound up to the accountant's own
truncation of the distributions; ``dp_accounting`` does not state what its floating-point
result guarantees, so it is a point of comparison here, never a certificate.
"""

from __future__ import annotations

from .._inputs import mechanisms

__all__ = ["available", "pld_epsilon"]


def available() -> bool:
    """Whether ``dp_accounting`` (the optional "compare" extra) can be imported; imports what
    :func:`pld_epsilon` uses, so a timing that calls this first does not count the imports."""
    try:
        from dp_accounting.pld import common, privacy_loss_distribution  # noqa: F401
    except ImportError:
        return False
    return True


def pld_epsilon(eps, delta=0.0, *, delta_g: float, interval: float, counts=None) -> float:
    """eps_g of the composition at ``delta_g`` from ``dp_accounting``'s PLD accountant.

    ``eps``, ``delta`` and ``counts`` as for :func:`optcomp.epsilon_g` (grouped into the
    multiset of :func:`optcomp._inputs.mechanisms`, so k identical mechanisms cost one
    ``self_compose(k)``); ``interval`` is the accountant's value discretization interval.
    Raises ``ImportError`` without ``dp_accounting`` (see :func:`available`).
    """
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    m = mechanisms(eps, delta, counts=counts)
    composed = None
    for e, d, count in zip(m.eps.tolist(), m.delta.tolist(), m.count.tolist()):
        p = pld.from_privacy_parameters(DifferentialPrivacyParameters(e, d), value_discretization_interval=interval)
        if count > 1:
            p = p.self_compose(count)
        composed = p if composed is None else composed.compose(p)
    return float(composed.get_epsilon_for_delta(delta_g))
