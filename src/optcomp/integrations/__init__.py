"""Adapters that put optcomp's certified composition behind other libraries' interfaces.

* :mod:`optcomp.integrations.dp_accounting` -- :class:`~optcomp.integrations.dp_accounting.OptcompAccountant`,
  a ``dp_accounting.PrivacyAccountant`` that accepts ``DpEvent`` objects (needs the
  ``dp-accounting`` package, the "compare" extra); sampled events (DP-SGD's
  ``PoissonSampledDpEvent``) become :class:`~optcomp.mechanisms.Subsampled` mechanisms.
* :mod:`optcomp.integrations.opacus` -- :class:`~optcomp.integrations.opacus.OptcompAccountant`,
  Opacus's accountant interface (``step``, ``get_epsilon``, ``history``), registered with Opacus
  as ``"optcomp"`` when Opacus is installed (the "opacus" extra; it needs PyTorch) and usable
  without it.

Each adapter imports its library itself: ``import optcomp`` (and this package) never needs it.
"""
