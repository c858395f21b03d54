"""Adapters that put optcomp's certified composition behind other libraries' interfaces.

* :mod:`optcomp.integrations.dp_accounting` -- :class:`~optcomp.integrations.dp_accounting.OptcompAccountant`,
  a ``dp_accounting.PrivacyAccountant`` that accepts ``DpEvent`` objects (needs the
  ``dp-accounting`` package, the "compare" extra).

Each adapter imports its library itself: ``import optcomp`` (and this package) never needs it.
"""
