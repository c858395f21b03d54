"""optcomp.integrations.opacus against Opacus's own classes (marker ``opacus``: excluded from the
default run; needs Opacus and PyTorch -- ``pip install 'optcomp[opacus]'``):

    pytest -m opacus

Skipped, with the reason, where Opacus is not installed.  Checks: the accountant is an
``opacus.accountants.IAccountant`` registered as ``"optcomp"`` (``create_accountant``);
``get_noise_multiplier(..., accountant="optcomp")`` returns a noise multiplier whose certified
eps meets the target; a ``PrivacyEngine(accountant="optcomp")`` trains a tiny model with
Poisson sampling and its ``get_epsilon`` is our certified upper bound of the history it
recorded; a checkpoint's accountant state loads back; Opacus's RDP and PRV accountants on the
same history are placed against our bracket (RDP is an upper bound: never below our lower end).
"""

from __future__ import annotations

import warnings

import pytest

pytestmark = pytest.mark.opacus

opacus = pytest.importorskip("opacus", reason="Opacus is not installed (pip install 'optcomp[opacus]')")
torch = pytest.importorskip("torch")

from opacus.accountants import IAccountant, PRVAccountant, RDPAccountant, create_accountant  # noqa: E402
from opacus.accountants.utils import get_noise_multiplier  # noqa: E402

from optcomp.integrations.opacus import OptcompAccountant  # noqa: E402  (registers "optcomp")


def test_is_an_opacus_accountant_and_registered():
    acc = create_accountant("optcomp")
    assert isinstance(acc, OptcompAccountant) and isinstance(acc, IAccountant)
    assert acc.mechanism() == "optcomp"


def test_get_noise_multiplier_with_optcomp():
    q, steps, target = 0.01, 200, 2.0
    sigma = get_noise_multiplier(target_epsilon=target, target_delta=1e-5, sample_rate=q, steps=steps,
                                 accountant="optcomp")
    acc = OptcompAccountant()
    acc.history = [(sigma, q, steps)]
    assert acc.get_epsilon(1e-5) <= target
    rdp_sigma = get_noise_multiplier(target_epsilon=target, target_delta=1e-5, sample_rate=q, steps=steps,
                                     accountant="rdp")
    assert sigma <= rdp_sigma  # a tighter accountant never needs more noise (both bisect to 0.01 in eps)


def test_privacy_engine_trains_with_optcomp(tmp_path):
    from opacus import PrivacyEngine

    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="optcomp")
    model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                   noise_multiplier=1.0, max_grad_norm=1.0,
                                                   poisson_sampling=True)
    for xb, yb in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    acc = engine.accountant
    assert isinstance(acc, OptcompAccountant)
    assert acc.history == [(1.0, 1 / 8, 8)]
    eps = engine.get_epsilon(1e-5)
    b = acc.bounds_epsilon(1e-5, tol=1e-3)
    assert b.lower <= eps and eps == acc.get_epsilon(1e-5)
    path = tmp_path / "ckpt.pt"
    engine.save_checkpoint(path=path, module=model, optimizer=optimizer)
    other = PrivacyEngine(accountant="optcomp")
    other.load_checkpoint(path=path, module=model, optimizer=optimizer)
    assert other.accountant.history == acc.history


def test_opacus_accountants_against_our_bracket():
    history = [(1.1, 0.004, 500)]
    ours = OptcompAccountant()
    ours.history = list(history)
    b = ours.bounds_epsilon(1e-5, tol=1e-3)
    rdp, prv = RDPAccountant(), PRVAccountant()
    rdp.history = list(history)
    prv.history = list(history)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, p = rdp.get_epsilon(1e-5), prv.get_epsilon(1e-5)
    print(f"\nours [{b.lower:.6f}, {b.upper:.6f}]  Opacus RDP {r:.6f}  Opacus PRV (upper) {p:.6f}")
    assert b.lower <= r
    assert b.lower <= p + 1e-9  # PRV's upper estimate; a value below our lower end would under-report
