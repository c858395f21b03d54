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


def pld_epsilon(eps, delta=0.0, *, delta_g: float, interval: float, counts=None, k=None,
                pessimistic: bool = True) -> float:
    """eps_g of the composition at ``delta_g`` from ``dp_accounting``'s PLD accountant.

    ``eps``, ``delta``, ``k`` and ``counts`` as for :func:`optcomp.epsilon_g`, mechanism
    objects of :mod:`optcomp.mechanisms` included (grouped into the multiset of
    :func:`optcomp._inputs.mechanisms`, so k identical mechanisms cost one
    ``self_compose(k)``): black boxes through ``from_privacy_parameters``, ``Laplace``,
    ``Gaussian`` and ``DiscreteGaussian`` through dp_accounting's own mechanism PLDs
    (connect-the-dots where it offers it); ``interval`` is the accountant's value
    discretization interval, ``pessimistic`` its choice of estimate (black boxes are always
    pessimistic there).  Raises ``ImportError`` without ``dp_accounting`` (see
    :func:`available`), ``ValueError`` for a mechanism it has no PLD for.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    m = mechanisms(eps, delta, k, counts)
    parts = []
    for e, d, count in zip(m.eps.tolist(), m.delta.tolist(), m.count.tolist()):
        parts.append((pld.from_privacy_parameters(DifferentialPrivacyParameters(e, d),
                                                  value_discretization_interval=interval), count))
    for mech, count in m.others:
        kind = type(mech).__name__
        kw = dict(pessimistic_estimate=pessimistic, value_discretization_interval=interval)
        if kind == "Laplace":
            p = pld.from_laplace_mechanism(mech.scale, sensitivity=mech.sensitivity, **kw)
        elif kind == "Gaussian":
            p = pld.from_gaussian_mechanism(mech.sigma, sensitivity=mech.sensitivity, **kw)
        elif kind == "DiscreteGaussian":
            p = pld.from_discrete_gaussian_mechanism(mech.sigma, sensitivity=mech.sensitivity, **kw)
        else:
            raise ValueError(f"no dp_accounting PLD for {mech!r} here")
        parts.append((p, count))
    composed = None
    for p, count in parts:
        if count > 1:
            p = p.self_compose(count)
        composed = p if composed is None else composed.compose(p)
    return float(composed.get_epsilon_for_delta(delta_g))
