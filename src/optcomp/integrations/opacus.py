"""An Opacus privacy accountant answering with optcomp's certified bounds.

:class:`OptcompAccountant` implements Opacus's accountant interface
(``opacus.accountants.IAccountant``): ``step(noise_multiplier=, sample_rate=)`` once per
training step, ``get_epsilon(delta)``, ``history`` (a list of ``(noise_multiplier,
sample_rate, steps)``, consecutive equal steps merged, as Opacus's own accountants keep it),
``len()``, ``mechanism()`` (``"optcomp"``), ``state_dict()`` / ``load_state_dict()`` and
``get_optimizer_hook_fn(sample_rate)``.  Each history entry is ``steps`` runs of
:class:`~optcomp.mechanisms.Subsampled` (:class:`~optcomp.mechanisms.Gaussian` (sigma =
noise_multiplier, sensitivity 1), q = sample_rate): Opacus clips every per-sample gradient
to norm C and adds N(0, (noise_multiplier C)^2) noise to the sum of a Poisson sample, under
add/remove neighbours.  ``get_epsilon`` is :func:`optcomp.epsilon_g` of that multiset -- a
certified upper bound on the optimal eps, both global directions (remove and add) taken
across the whole run (Zhu, Dong and Wang, AISTATS 2022, Thm 11), never an estimate.

Opacus is optional (the ``opacus`` extra; it needs PyTorch).  With Opacus installed the class
derives from ``opacus.accountants.IAccountant`` and importing this module registers it with
``opacus.accountants.register_accountant("optcomp", OptcompAccountant)``, so that
``PrivacyEngine(accountant="optcomp")`` and ``get_noise_multiplier(..., accountant="optcomp")``
use it.  Without Opacus it is a plain class with the same interface (same methods, same
state_dict), so it can be used and tested with no PyTorch.

Differences from Opacus's own accountants, all on the safe side or stated: ``len()`` is the
number of steps taken (the interface's documented meaning; Opacus's accountants return the
number of history entries -- both are 0 exactly before the first step); a noise multiplier
of 0 (no noise) makes every later ``get_epsilon`` ``inf``; a sample rate of 0 releases
nothing.  Keyword arguments that Opacus forwards to ``get_epsilon`` (``make_private_with_epsilon``
passes its own) are accepted and ignored, as by Opacus's RDP accountant; ``tol`` sets the
bracket width instead.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from copy import deepcopy

from .. import _inputs

__all__ = ["OptcompAccountant", "MECHANISM", "history_mechanisms"]

MECHANISM = "optcomp"

try:  # the real interface when Opacus is installed (it imports PyTorch)
    from opacus.accountants import IAccountant as _Base
except ImportError:
    _Base = None


class _Interface:
    """The concrete part of Opacus's ``IAccountant`` (used when Opacus is absent): the
    state_dict of ``history`` and ``mechanism()``, and the optimizer hook."""

    def get_optimizer_hook_fn(self, sample_rate: float):
        """The callback Opacus attaches to its ``DPOptimizer``: one ``step`` per optimizer
        step, at ``sample_rate`` times the optimizer's accumulated iterations."""

        def hook_fn(optim):
            self.step(noise_multiplier=optim.noise_multiplier,
                      sample_rate=sample_rate * optim.accumulated_iterations)

        return hook_fn

    def state_dict(self, destination=None):
        """``{"history": a copy of history, "mechanism": "optcomp"}`` (into ``destination``)."""
        if destination is None:
            destination = OrderedDict()
        destination["history"] = deepcopy(self.history)
        destination["mechanism"] = self.mechanism()
        return destination

    def load_state_dict(self, state_dict):
        """Replace ``history`` by the state_dict's; ValueError when it is empty, lacks a key or
        comes from another mechanism."""
        if not state_dict:
            raise ValueError("state_dict is None or empty: nothing to load into the accountant")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise ValueError(f"state_dict has no key {key!r}: cannot be loaded into the accountant")
        if state_dict["mechanism"] != self.mechanism():
            raise ValueError(f"state_dict of mechanism {state_dict['mechanism']!r} cannot be loaded into an "
                             f"accountant of mechanism {self.mechanism()!r}")
        self.history = state_dict["history"]


def history_mechanisms(history) -> tuple[list, list[int], bool]:
    """``(mechanisms, counts, nonprivate)`` of a history of ``(noise_multiplier, sample_rate,
    steps)``: one :class:`~optcomp.mechanisms.Subsampled` Gaussian per distinct (sigma, q)
    with its total steps; entries with sample rate 0 or noise multiplier ``inf`` release
    nothing; ``nonprivate`` is True when an entry has noise multiplier 0 and sample rate > 0.
    ValueError naming the entry for a negative, NaN or non-numeric field."""
    from ..mechanisms import Gaussian, Subsampled

    totals: dict = {}
    nonprivate = False
    for i, entry in enumerate(history):
        try:
            sigma, q, steps = entry
        except (TypeError, ValueError):
            raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {entry!r}") from None
        sigma = _inputs._check_real(f"history[{i}] noise_multiplier", sigma)
        q = _inputs._check_real(f"history[{i}] sample_rate", q)
        steps = _inputs._integer(f"history[{i}] steps", steps, 0, 2**62)
        if not sigma >= 0.0:
            raise ValueError(f"history[{i}] noise_multiplier must be >= 0, got {sigma!r}")
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"history[{i}] sample_rate must be in [0, 1], got {q!r}")
        if steps == 0 or q == 0.0 or sigma == math.inf:
            continue
        if sigma == 0.0:
            nonprivate = True
            continue
        key = (sigma + 0.0, q + 0.0)
        totals[key] = totals.get(key, 0) + steps
    mechs = [Subsampled(Gaussian(sigma), q) for sigma, q in totals]
    return mechs, list(totals.values()), nonprivate


class OptcompAccountant(*(() if _Base is None else (_Base,)), _Interface):
    """Opacus's accountant interface with optcomp's certified answers (module docstring).

    ``method`` and ``options`` go to :func:`optcomp.epsilon_g` (default ``"auto"``: a
    certified upper bound within 1e-4 of the optimum).  Opacus creates accountants with no
    arguments (``create_accountant("optcomp")``), so every argument has a default.

    >>> acc = OptcompAccountant()
    >>> for _ in range(100):
    ...     acc.step(noise_multiplier=1.1, sample_rate=0.01)
    >>> acc.history, len(acc)
    ([(1.1, 0.01, 100)], 100)
    >>> b = acc.bounds_epsilon(1e-5)
    >>> b.lower <= acc.get_epsilon(1e-5)
    True
    """

    def __init__(self, *, method: str = "auto", **options):
        from ..methods import check_method

        check_method(method, options)
        self.history: list = []
        self._method = method
        self._options = dict(options)

    @classmethod
    def mechanism(cls) -> str:
        """The name Opacus knows this accountant by: ``"optcomp"``."""
        return MECHANISM

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one training step (merged into the last history entry when both values are
        equal, as Opacus does); ValueError for a negative or NaN value, or a sample rate
        above 1."""
        sigma = _inputs._check_real("noise_multiplier", noise_multiplier)
        q = _inputs._check_real("sample_rate", sample_rate)
        if not sigma >= 0.0:
            raise ValueError(f"noise_multiplier must be >= 0, got {sigma!r}")
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"sample_rate must be in [0, 1], got {q!r}")
        if self.history and self.history[-1][0] == noise_multiplier and self.history[-1][1] == sample_rate:
            last = self.history.pop()
            self.history.append((last[0], last[1], last[2] + 1))
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def __len__(self) -> int:
        """The number of steps taken (module docstring)."""
        return sum(int(entry[2]) for entry in self.history)

    def _ledger(self):
        return history_mechanisms(self.history)

    @staticmethod
    def _delta(delta) -> float:
        d = _inputs._check_real("delta", delta)
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"delta must be in [0, 1], got {d!r}")
        return d + 0.0

    def get_epsilon(self, delta: float, *args, tol=None, **kwargs) -> float:
        """A certified upper bound on the least eps such that the run so far is
        (eps, ``delta``)-DP: ``inf`` after a step without noise (or where no finite eps is
        certified), 0.0 before any step.  ``tol``: the width of the bracket behind it
        (absolute on eps; default that of ``method``).  Other arguments are ignored, as by
        Opacus's RDP accountant."""
        import optcomp

        d = self._delta(delta)
        mechs, counts, nonprivate = self._ledger()
        if nonprivate:
            return math.inf
        if not mechs or d == 1.0:
            return 0.0
        options = dict(self._options)
        if tol is not None:
            return float(optcomp.epsilon_bounds(mechs, counts=counts, delta_g=d, tol=tol).upper)
        return float(optcomp.epsilon_g(mechs, counts=counts, delta_g=d, method=self._method, **options))

    def get_delta(self, epsilon: float) -> float:
        """A certified upper bound on the least delta such that the run so far is
        (``epsilon``, delta)-DP (1.0 after a step without noise, 0.0 before any step)."""
        import optcomp

        e = _inputs._check_real("epsilon", epsilon)
        if not (math.isfinite(e) and e >= 0.0):
            raise ValueError(f"epsilon must be finite and >= 0, got {e!r}")
        mechs, counts, nonprivate = self._ledger()
        if nonprivate:
            return 1.0
        if not mechs:
            return 0.0
        return float(optcomp.delta_g(mechs, counts=counts, eps_g=e + 0.0, method=self._method, **self._options))

    def bounds_epsilon(self, delta: float, *, tol=None):
        """Certified ``Bounds(lower, upper)`` around the optimal eps of the run so far at
        ``delta`` (:func:`optcomp.epsilon_bounds`, gap at most ``tol``, default 1e-3)."""
        import optcomp
        from .._types import Bounds

        d = self._delta(delta)
        mechs, counts, nonprivate = self._ledger()
        if nonprivate:
            return Bounds(math.inf, math.inf)
        if not mechs or d == 1.0:
            return Bounds(0.0, 0.0)
        return optcomp.epsilon_bounds(mechs, counts=counts, delta_g=d, tol=tol)


if _Base is not None:  # pragma: no cover - exercised by the `opacus` marker's environment
    from opacus.accountants import register_accountant as _register

    try:
        _register(MECHANISM, OptcompAccountant)
    except ValueError:  # already registered (this module reloaded): replace it
        _register(MECHANISM, OptcompAccountant, force=True)
