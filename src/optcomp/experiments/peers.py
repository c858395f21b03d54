"""The peers optcomp is compared with, wrapped once for the experiments, the benchmarks and the
tests: Google's ``dp_accounting`` (its PLD and RDP accountants) and Microsoft's PRV
accountant (the ``prv-accountant`` package), both in the "compare" extra.

:func:`pld_epsilon` is the accountant used at its best for a multiset of (eps_i, delta_i)-DP
mechanisms: one worst-case privacy-loss distribution per distinct pair
(``from_privacy_parameters``, pessimistic discretization with step ``interval``), identical
mechanisms self-composed (``self_compose``), the groups composed in order of (eps, delta),
then ``get_epsilon_for_delta``.  Its value is an upper bound up to the accountant's own
truncation of the distributions; ``dp_accounting`` does not state what its floating-point
result guarantees, so it is a point of comparison here, never a certificate.

DP-SGD (a Poisson-subsampled Gaussian per training step, add/remove neighbours) as each
library's user runs it, for a training run given as Opacus's ``history``: a list of
``(noise_multiplier, sample_rate, steps)``:

* :func:`rdp_dpsgd_epsilon` -- ``dp_accounting.rdp.RdpAccountant`` with its default orders,
  one ``PoissonSampledDpEvent(sample_rate, GaussianDpEvent(noise_multiplier))`` composed
  ``steps`` times per entry (Mironov, Talwar and Zhang 2019; the accountant of TensorFlow
  Privacy's tutorials);
* :func:`rdp_classic_dpsgd_epsilon` -- the RDP bound as TensorFlow Privacy and Opacus
  converted it when the MNIST tutorials published their numbers: the same RDP curve at the
  orders 1.1, 1.2, ..., 10.9, 12, ..., 63, and eps = min over orders a of
  RDP(a) + log(1/delta)/(a − 1) (Mironov, *Rényi Differential Privacy*, CSF 2017, Prop. 3;
  dp_accounting now converts with a tighter bound);
* :func:`pld_dpsgd_epsilon` -- ``dp_accounting.pld.PLDAccountant`` (pessimistic
  connect-the-dots discretisation at ``value_discretization_interval``, default 1e-4) with
  the same events;
* :func:`prv_dpsgd_epsilon` -- ``prv_accountant.PRVAccountant`` (Gopi, Lee and Wutschitz,
  NeurIPS 2021) with Opacus's defaults (``eps_error`` 0.01, ``delta_error`` = delta / 1000):
  its (lower, estimate, upper); Opacus's PRV accountant reports the upper value.

None of them certifies its floating-point result; each is placed against optcomp's
certified bracket, never taken as a reference.
"""

from __future__ import annotations

from .._inputs import mechanisms

__all__ = ["available", "prv_available", "pld_epsilon", "rdp_dpsgd_epsilon", "rdp_classic_dpsgd_epsilon",
           "pld_dpsgd_epsilon", "prv_dpsgd_epsilon", "dpsgd_history", "CLASSIC_ORDERS"]

# the RDP orders of TensorFlow Privacy's compute_dp_sgd_privacy and Opacus's RDPAccountant
CLASSIC_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))


def available() -> bool:
    """Whether ``dp_accounting`` (the optional "compare" extra) can be imported; imports what
    :func:`pld_epsilon` uses, so a timing that calls this first does not count the imports."""
    try:
        from dp_accounting.pld import common, privacy_loss_distribution  # noqa: F401
    except ImportError:
        return False
    return True


def prv_available() -> bool:
    """Whether Microsoft's ``prv-accountant`` package (the "compare" extra) can be imported;
    imports what :func:`prv_dpsgd_epsilon` uses."""
    try:
        import prv_accountant  # noqa: F401
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


def dpsgd_history(history) -> list[tuple[float, float, int]]:
    """A training run as a list of ``(noise_multiplier, sample_rate, steps)`` (Opacus's
    ``history``), checked: noise multiplier > 0, sample rate in (0, 1], steps >= 1
    (ValueError naming the entry)."""
    out = []
    for i, entry in enumerate(history):
        try:
            sigma, q, steps = entry
        except (TypeError, ValueError):
            raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {entry!r}") from None
        sigma, q = float(sigma), float(q)
        if not (0.0 < sigma < float("inf")) or not (0.0 < q <= 1.0) or int(steps) != steps or steps < 1:
            raise ValueError(f"history[{i}] = {entry!r}: need noise_multiplier > 0, 0 < sample_rate <= 1, steps >= 1")
        out.append((sigma, q, int(steps)))
    if not out:
        raise ValueError("history must hold at least one (noise_multiplier, sample_rate, steps)")
    return out


def _dpsgd_events(history):
    from dp_accounting import dp_event

    return [(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
            for sigma, q, steps in dpsgd_history(history)]


def rdp_dpsgd_epsilon(history, *, delta_g: float) -> float:
    """eps at ``delta_g`` of a DP-SGD run from ``dp_accounting``'s RDP accountant (module
    docstring; its default orders)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    acc = rdp.RdpAccountant()
    for event, steps in _dpsgd_events(history):
        acc.compose(event, steps)
    return float(acc.get_epsilon(delta_g))


def rdp_classic_dpsgd_epsilon(history, *, delta_g: float) -> float:
    """eps at ``delta_g`` of a DP-SGD run by the RDP conversion of the tutorials' time
    (module docstring): dp_accounting's RDP of the Poisson-subsampled Gaussian at
    :data:`CLASSIC_ORDERS`, converted by Mironov's Prop. 3."""
    import math

    import numpy as np
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = np.array(CLASSIC_ORDERS)
    total = sum(steps * rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, orders)
                for sigma, q, steps in dpsgd_history(history))
    return float(np.min(total + math.log(1.0 / delta_g) / (orders - 1.0)))


def pld_dpsgd_epsilon(history, *, delta_g: float, interval: float = 1e-4) -> float:
    """eps at ``delta_g`` of a DP-SGD run from ``dp_accounting``'s PLD accountant at value
    discretisation ``interval`` (module docstring)."""
    from dp_accounting.pld import pld_privacy_accountant as pld

    acc = pld.PLDAccountant(value_discretization_interval=interval)
    for event, steps in _dpsgd_events(history):
        acc.compose(event, steps)
    return float(acc.get_epsilon(delta_g))


def prv_dpsgd_epsilon(history, *, delta_g: float, eps_error: float = 0.01,
                      delta_error: float | None = None) -> tuple[float, float, float]:
    """(lower, estimate, upper) of eps at ``delta_g`` of a DP-SGD run from the PRV accountant
    (module docstring; ``delta_error`` defaults to ``delta_g / 1000`` as in Opacus)."""
    import warnings

    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    runs = dpsgd_history(history)
    prvs = [PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q) for sigma, q, _ in runs]
    counts = [steps for _, _, steps in runs]
    with warnings.catch_warnings():  # its own deprecation and domain warnings are not ours to raise
        warnings.simplefilter("ignore")
        acc = PRVAccountant(prvs=prvs, max_self_compositions=counts, eps_error=eps_error,
                            delta_error=delta_g / 1000 if delta_error is None else delta_error)
        lo, est, up = acc.compute_epsilon(delta=delta_g, num_self_compositions=counts)
    return float(lo), float(est), float(up)
