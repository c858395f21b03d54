"""optcomp.integrations.opacus through Opacus's documented accountant interface, without
importing Opacus (it needs PyTorch; ``tests/test_opacus_real.py``, marker ``opacus``, runs the
accountant against Opacus's own classes).

The interface, as Opacus 1.6 documents it (``opacus.accountants.IAccountant``): an accountant
is created with no arguments; ``step(*, noise_multiplier, sample_rate)`` once per optimizer
step; ``get_epsilon(delta, *args, **kwargs)``; ``__len__``; the class method ``mechanism()``;
``history``, a list of ``(noise_multiplier, sample_rate, num_steps)`` (consecutive equal steps
merged); ``state_dict()`` -> ``{"history", "mechanism"}`` and ``load_state_dict`` (ValueError
for an empty dict, a missing key or another mechanism); ``get_optimizer_hook_fn(sample_rate)``
(one step per optimizer step at sample_rate x accumulated_iterations).  Opacus's
``get_noise_multiplier`` assigns ``accountant.history = [(sigma, q, steps)]`` directly and
calls ``get_epsilon(delta=..., **kwargs)``: the accountant must read the history it is given.

References: one step against ``tests/reference_dpsgd.py`` (from the definitions); longer runs
against the dp_accounting adapter's ledger of the same events (the same mechanisms) and
dp_accounting's RDP accountant (an upper bound: never below our lower end).
"""

from __future__ import annotations

import abc
import inspect
import math
import subprocess
import sys

import mpmath as mp
import pytest

import optcomp
from optcomp.integrations.opacus import MECHANISM, OptcompAccountant, history_mechanisms
from optcomp.mechanisms import Gaussian, Subsampled
from reference_dpsgd import DPS, gauss, ref_eps_poisson


class IAccountantSpec(abc.ABC):
    """Opacus's abstract methods, as documented (the signatures the tests check against)."""

    @abc.abstractmethod
    def step(self, *, noise_multiplier: float, sample_rate: float): ...

    @abc.abstractmethod
    def get_epsilon(self, delta: float, *args, **kwargs) -> float: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @classmethod
    @abc.abstractmethod
    def mechanism(cls) -> str: ...


def test_implements_the_documented_interface():
    acc = OptcompAccountant()  # created with no arguments, as create_accountant does
    for name in ("step", "get_epsilon", "__len__", "mechanism", "state_dict", "load_state_dict",
                 "get_optimizer_hook_fn"):
        assert callable(getattr(acc, name)), name
    step = inspect.signature(acc.step).parameters
    assert [p.kind for p in step.values()] == [inspect.Parameter.KEYWORD_ONLY] * 2
    assert set(step) == {"noise_multiplier", "sample_rate"}
    assert list(inspect.signature(acc.get_epsilon).parameters)[0] == "delta"
    assert OptcompAccountant.mechanism() == acc.mechanism() == MECHANISM == "optcomp"
    assert acc.history == [] and len(acc) == 0 and acc.get_epsilon(1e-5) == 0.0


def test_history_merges_consecutive_equal_steps_as_opacus_does():
    acc = OptcompAccountant()
    for sigma, q, n in ((1.1, 0.01, 3), (1.3, 0.01, 2), (1.1, 0.01, 1), (1.1, 0.02, 4)):
        for _ in range(n):
            acc.step(noise_multiplier=sigma, sample_rate=q)
    assert acc.history == [(1.1, 0.01, 3), (1.3, 0.01, 2), (1.1, 0.01, 1), (1.1, 0.02, 4)]
    assert len(acc) == 10
    mechs, counts, nonprivate = history_mechanisms(acc.history)  # equal entries grouped
    assert mechs == [Subsampled(Gaussian(1.1), 0.01), Subsampled(Gaussian(1.3), 0.01),
                     Subsampled(Gaussian(1.1), 0.02)]
    assert counts == [4, 2, 4] and not nonprivate


def test_one_step_brackets_the_reference():
    acc = OptcompAccountant()
    acc.step(noise_multiplier=1.0, sample_rate=0.2)
    with mp.workdps(DPS):
        ref = ref_eps_poisson(gauss(1.0), 0.2, 1e-5)
    b = acc.bounds_epsilon(1e-5, tol=1e-3)
    assert b.lower <= ref <= b.upper
    assert acc.get_epsilon(1e-5, tol=1e-3) == b.upper


def test_history_assigned_directly_as_get_noise_multiplier_does():
    """Opacus's get_noise_multiplier: ``accountant.history = [(sigma, q, steps)]`` and
    ``get_epsilon(delta=..., **kwargs)`` with the kwargs it was given."""
    acc = OptcompAccountant()
    acc.history = [(0.8, 0.1, 20)]
    e = acc.get_epsilon(delta=1e-5, epsilon_tolerance_unused=1)  # forwarded kwargs are ignored
    direct = optcomp.epsilon_g([Subsampled(Gaussian(0.8), 0.1)], counts=[20], delta_g=1e-5)
    assert e == direct
    acc.history = [(2.0, 0.1, 20)]  # a new history, not a cached answer
    assert acc.get_epsilon(delta=1e-5) < e


def test_agrees_with_the_dp_accounting_adapter_and_rdp():
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import dp_event as E
    from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

    from optcomp.integrations.dp_accounting import OptcompAccountant as DpaAccountant

    history = [(0.9, 0.1, 10), (1.5, 0.05, 20)]
    acc = OptcompAccountant()
    acc.history = list(history)
    events = [(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(s)), n) for s, q, n in history]
    other, rdp = DpaAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE), RdpAccountant()
    for event, n in events:
        other.compose(event, n)
        rdp.compose(event, n)
    mechs, counts, _ = history_mechanisms(acc.history)
    assert other.mechanisms == tuple(zip(mechs, counts))  # the same ledger, so the same answers
    assert acc.bounds_epsilon(1e-5, tol=1e-2).lower <= rdp.get_epsilon(1e-5)


def test_state_dict_round_trip_and_refusals():
    acc = OptcompAccountant()
    for _ in range(5):
        acc.step(noise_multiplier=1.0, sample_rate=0.01)
    state = acc.state_dict()
    assert dict(state) == {"history": [(1.0, 0.01, 5)], "mechanism": "optcomp"}
    state["history"].append((9.0, 0.5, 1))  # a copy: the accountant is unchanged
    assert acc.history == [(1.0, 0.01, 5)]
    new = OptcompAccountant()
    new.load_state_dict(acc.state_dict())
    assert new.history == acc.history and new.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    dest = {"other": 1}
    assert acc.state_dict(dest) is dest and dest["mechanism"] == "optcomp"
    for bad, word in (({}, "empty"), ({"history": []}, "mechanism"), ({"mechanism": "optcomp"}, "history"),
                      ({"history": [], "mechanism": "rdp"}, "rdp")):
        with pytest.raises(ValueError, match=word):
            new.load_state_dict(bad)


def test_optimizer_hook_steps_at_the_accumulated_rate():
    class Optim:  # the two attributes of Opacus's DPOptimizer the hook reads
        noise_multiplier = 1.2
        accumulated_iterations = 2

    acc = OptcompAccountant()
    hook = acc.get_optimizer_hook_fn(sample_rate=0.01)
    hook(Optim())
    hook(Optim())
    assert acc.history == [(1.2, 0.02, 2)]


def test_degenerate_steps():
    acc = OptcompAccountant()
    acc.step(noise_multiplier=1.0, sample_rate=0.0)  # nobody sampled: nothing released
    acc.step(noise_multiplier=math.inf, sample_rate=0.5)  # infinite noise: nothing released
    assert len(acc) == 2 and acc.get_epsilon(1e-5) == 0.0 and acc.get_delta(0.0) == 0.0
    acc.step(noise_multiplier=1.0, sample_rate=1.0)  # the whole dataset: the Gaussian itself
    assert acc.get_epsilon(1e-5) == optcomp.epsilon_g([Gaussian(1.0)], delta_g=1e-5)
    acc.step(noise_multiplier=0.0, sample_rate=0.1)  # no noise: non-private from then on
    assert acc.get_epsilon(1e-5) == math.inf and acc.get_delta(5.0) == 1.0
    assert acc.bounds_epsilon(1e-5) == (math.inf, math.inf)


@pytest.mark.parametrize("kwargs, word", [
    (dict(noise_multiplier=-1.0, sample_rate=0.1), "noise_multiplier"),
    (dict(noise_multiplier=float("nan"), sample_rate=0.1), "noise_multiplier"),
    (dict(noise_multiplier=1.0, sample_rate=1.5), "sample_rate"),
    (dict(noise_multiplier=1.0, sample_rate="0.1"), "sample_rate"),
])
def test_bad_steps_name_the_parameter(kwargs, word):
    acc = OptcompAccountant()
    with pytest.raises((ValueError, TypeError), match=word):
        acc.step(**kwargs)
    assert acc.history == []


def test_bad_queries_and_histories_name_the_parameter():
    acc = OptcompAccountant()
    acc.step(noise_multiplier=1.0, sample_rate=0.1)
    for call, word in ((lambda: acc.get_epsilon(1.5), "delta"), (lambda: acc.get_epsilon(-1e-5), "delta"),
                       (lambda: acc.get_delta(-1.0), "epsilon"), (lambda: acc.get_delta(math.inf), "epsilon")):
        with pytest.raises(ValueError, match=word):
            call()
    acc.history = [(1.0, 0.1)]
    with pytest.raises(ValueError, match=r"history\[0\]"):
        acc.get_epsilon(1e-5)
    acc.history = [(1.0, -0.1, 3)]
    with pytest.raises(ValueError, match=r"history\[0\] sample_rate"):
        acc.get_epsilon(1e-5)
    with pytest.raises(ValueError, match="method"):
        OptcompAccountant(method="nonsense")


def test_imports_without_opacus_as_a_standalone_class():
    """With Opacus unimportable the module still imports, registers nothing, and the class
    is the standalone interface (no PyTorch needed)."""
    code = ("import sys; sys.modules['opacus'] = None; sys.modules['opacus.accountants'] = None\n"
            "from optcomp.integrations.opacus import OptcompAccountant, _Base\n"
            "a = OptcompAccountant(); a.step(noise_multiplier=2.0, sample_rate=0.5)\n"
            "print(_Base is None, a.history, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "[(2.0,", "0.5,", "1)]", "False"]
