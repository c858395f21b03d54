"""The mechanism contract and its one registry: every family of ``optcomp.mechanisms.REGISTRY``
keeps the contract of :mod:`optcomp._laws` in both global directions, and every consumer that
names families -- the JSON ledger, the command line, calibrate, the docs -- knows each one
(adding a family without teaching a consumer fails here)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import optcomp
from optcomp import mechanisms as M
from optcomp._laws import DIRECTIONS, AtomLaw, CellLaw

ROOT = Path(__file__).resolve().parents[1]

#: one instance per family (a new family must add one: test_every_family_has_a_sample)
SAMPLES = {
    "black_box": [M.BlackBox(0.7, 1e-3)],
    "randomized_response": [M.RandomizedResponse(0.9, values=4)],
    "geometric": [M.Geometric(0.4, sensitivity=3)],
    "staircase": [M.Staircase(1.2, 0.3, sensitivity=2.0)],
    "pair": [M.Pair((0.5, 0.3, 0.2, 0.0), (0.1, 0.3, 0.4, 0.2))],
    "profile": [M.Profile([(0.5, 1e-4), (1.5, 0.0)])],
    "discrete_gaussian": [M.DiscreteGaussian(2.5, sensitivity=2)],
    "laplace": [M.Laplace(1.5, sensitivity=2.0)],
    "gaussian": [M.Gaussian(2.0, sensitivity=1.5)],
    "subsampled": [M.Subsampled(M.Gaussian(1.1), 0.01), M.Subsampled(M.Laplace(2.0), 0.3),
                   M.Subsampled(M.Pair((0.5, 0.3, 0.2, 0.0), (0.1, 0.3, 0.4, 0.2)), 0.2)],
}


def _samples():
    return [(fam, m) for fam in M.REGISTRY for m in SAMPLES.get(fam, [])]


def test_every_family_has_a_sample_and_states_its_contract():
    assert set(SAMPLES) <= set(M.REGISTRY), "a sample names an unregistered family"
    for fam, cls in M.REGISTRY.items():
        assert fam in SAMPLES, f"family {fam!r} has no sample in tests/test_registry.py"
        assert cls.family == fam and M.family(fam) is cls
        # (Subsampled's relation is its parameter: add_remove or replace_one)
        assert isinstance(cls.relation, str) and (len(cls.relation) > 10 or cls is M.Subsampled), \
            f"{fam}: state its neighbouring relation"
        # (a kind that depends on the parameters -- Subsampled's is its base's -- is a property)
        assert cls.kind in ("atoms", "cells") or isinstance(cls.kind, property)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        assert issubclass(cls, optcomp.mechanisms.Mechanism)
        for alias in cls.aliases:
            assert M.family(alias) is cls


@pytest.mark.parametrize("fam,mech", _samples())
def test_laws_hold_both_total_masses_in_every_direction(fam, mech):
    """P sums to 1 and Q sums to 1 within the law's brackets, in each global direction (the
    Q-masses of a cell law are the direction's own, the -inf Q-mass of an atom law too)."""
    assert set(mech.directions()) <= set(DIRECTIONS) and mech.directions()[0] == "forward"
    for d in DIRECTIONS:
        law = mech.law(2.0**-8, d, tail=1e-30)
        assert law.direction == d
        if isinstance(law, AtomLaw):
            assert mech.kind == "atoms"
            p_lo = math.fsum(law.p_lo) + law.inf_lo
            p_hi = math.fsum(law.p_hi) + law.inf_hi
            # Q-mass of an atom: p e^{-l}, the position within perr
            q_lo = math.fsum(law.p_lo * np.exp(-(law.loss + law.perr))) + law.neg_q_lo
            q_hi = math.fsum(law.p_hi * np.exp(-(law.loss - law.perr))) + law.neg_q_hi
        else:
            assert isinstance(law, CellLaw) and mech.kind == "cells"
            pts = law.points
            p_lo = math.fsum(law.p_lo) + math.fsum(pts.p_lo)
            p_hi = math.fsum(law.p_hi) + math.fsum(pts.p_hi) + law.below_hi + law.above_hi
            q_lo = math.fsum(law.q_lo) + math.fsum(pts.q_lo)
            q_hi = math.fsum(law.q_hi) + math.fsum(pts.q_hi) + 1e-25  # Q's tails (not reported) are tiny here
        assert p_lo <= 1.0 + 1e-12 and p_hi >= 1.0 - 1e-12, (d, p_lo, p_hi)
        assert q_lo <= 1.0 + 1e-12 and q_hi >= 1.0 - 1e-12, (d, q_lo, q_hi)
        lo, hi = mech.loss_range(d, tail=1e-30)
        assert lo <= hi


@pytest.mark.parametrize("fam,mech", _samples())
def test_json_ledger_knows_every_family(fam, mech):
    acc = optcomp.Accountant().compose(mech, count=3)
    back = optcomp.Accountant.from_dict(acc.to_dict())
    assert back.to_dict() == acc.to_dict()
    assert type(mech).__name__ in optcomp.accountant._CLASSES


@pytest.mark.parametrize("fam,mech", _samples())
def test_command_line_specs_know_every_family(fam, mech):
    from optcomp import cli

    spec = cli._spec(mech)
    # a subsampled mechanism is its base's spec with the sampling rate
    assert spec.startswith((mech.mechanism.family if fam == "subsampled" else fam) + ":")
    back, count = cli._parse_mechanism(spec + ",count=4")
    assert back == mech and count == 4


def test_docs_list_every_family():
    api = (ROOT / "docs" / "api.rst").read_text()
    for cls in M.REGISTRY.values():
        assert cls.__name__ in api, f"docs/api.rst does not list {cls.__name__}"


def test_calibrate_knows_every_noise_family():
    """calibrate's noise search (optcomp.noise) covers exactly the families with a noise knob."""
    from optcomp import calibrate, noise

    noisy = {fam for fam, cls in M.REGISTRY.items() if getattr(cls, "noise_parameter", None)}
    assert noisy == set(calibrate.NOISE_MECHANISMS)
    for fam in calibrate.NOISE_MECHANISMS:
        m = noise._make(fam, 0.5, 1)
        assert m.family == fam
