"""Tests of optcomp.curves beyond tests/test_region.py: the Chernoff shortcut of
privacy_curve (issue 16: privacy_curve(0.1, k=10**12) took 57 s, one exact evaluation of a
~10^7-atom binomial window per grid point although delta was 1.0 to the last bit at all but
one of them)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
import reference as ref
from optcomp import curves



def _within_2_54_of_one(groups, x) -> bool:
    with mp.workdps(60):
        return 1 - ref.ref_delta(groups, x) <= mp.mpf(2) ** -54


@settings(max_examples=30, deadline=None)
@given(eps=st.lists(st.sampled_from([0.05, 0.3, 1.0, 2.0]), min_size=1, max_size=2, unique=True),
       count=st.integers(1, 60), frac=st.floats(0.0, 1.0))
def test_certainly_one_is_true_only_where_the_exact_delta_is_within_2_54_of_one(eps, count, frac):
    counts = [count] * len(eps)
    total = sum(e * c for e, c in zip(eps, counts))
    grid = np.array([0.0, frac * total, 0.5 * frac * total])
    one = curves.certainly_one(np.array(eps), np.array(counts), grid)
    for x, flag in zip(grid.tolist(), one.tolist()):
        if flag:
            assert _within_2_54_of_one([(e, 0.0, c) for e, c in zip(eps, counts)], x)


def test_certainly_one_fires_far_below_the_bulk():
    # 400 mechanisms of eps = 2: the loss has mean ~ 400 * 2 * tanh(1) = 609, sd ~ 26
    one = curves.certainly_one(np.array([2.0]), np.array([400]), np.array([0.0, 300.0, 500.0, 600.0, 800.0]))
    assert one.tolist() == [True, True, False, False, False]
    assert _within_2_54_of_one([(2.0, 0.0, 400)], 300.0)  # and the reference agrees
    assert not curves.certainly_one(np.array([0.0]), np.array([10]), np.array([0.0])).any()  # no loss at all
    assert not curves.certainly_one(np.array([1e-300]), np.array([10**12]), np.array([0.0])).any()


@pytest.mark.parametrize("eps, counts, method", [([2.0], [400], "optimal"), ([0.5, 1.5], [300, 200], "optimal"),
                                                 ([2.0], [400], "kov"), ([2.0], [400], "basic")])
def test_curve_equals_pointwise_evaluation(eps, counts, method):
    """The shortcut changes no value: every grid point equals its own library call."""
    c = optcomp.privacy_curve(eps, counts=counts, method=method, num=41)
    one = curves.certainly_one(np.array(eps), np.array(counts), c.eps_g)
    assert one.any() and not one.all()  # both paths are exercised
    direct = [optcomp.delta_g(eps, counts=counts, eps_g=x, method=method) for x in c.eps_g.tolist()]
    assert c.delta.tolist() == direct


def test_approx_bracket_at_certain_points():
    c = optcomp.privacy_curve([0.5, 1.5], counts=[300, 200], method="approx", num=21)
    one = curves.certainly_one(np.array([0.5, 1.5]), np.array([300, 200]), c.eps_g)
    assert one.any()
    assert (c.delta[one] == 1.0).all() and (c.delta_lower[one] == math.nextafter(1.0, 0.0)).all()
    assert (c.delta_lower <= c.delta).all()


def test_curve_at_10_to_the_12_mechanisms_evaluates_few_points(monkeypatch):
    calls = []
    real = optcomp.delta_g

    def counting(*args, **kwargs):
        calls.append(kwargs.get("eps_g"))
        return real(*args, **kwargs)

    monkeypatch.setattr(optcomp, "delta_g", counting)
    c = curves.privacy_curve(0.1, k=10**12)
    assert len(calls) <= 3  # was 101 exact evaluations (57 s)
    assert c.delta[0] == 1.0 and 0.0 < c.delta[-1] < 1e-12


def test_progress_reports_each_evaluated_point(monkeypatch, capsys):
    seen = []
    c = optcomp.privacy_curve([2.0], counts=[400], num=21, progress=seen.append)
    todo = int(np.count_nonzero(~curves.certainly_one(np.array([2.0]), np.array([400]), c.eps_g)))
    assert [s["evaluated"] for s in seen] == list(range(1, todo + 1))
    assert all(s["to_evaluate"] == todo for s in seen)
    monkeypatch.setattr("optcomp._progress.DELAY", 0.0)  # the module that reads it
    optcomp.privacy_curve(0.1, k=100, num=5, progress=True)
    err = capsys.readouterr().err
    assert "privacy curve under optimal (5/5 points)" in err and err.endswith("\n")


def test_the_toolkit_validates_a_multiset_once_not_per_evaluation(monkeypatch):
    """The toolkit holds a validated multiset and evaluates it through optcomp._evaluate: a
    curve of 40 points (and a family, a ledger's questions) reads its arguments once, not
    once per point through the public functions; and the answers are the public ones."""
    from optcomp import _inputs, region
    from optcomp.mechanisms import Laplace

    calls = []
    real = _inputs._split_mechanisms
    monkeypatch.setattr(_inputs, "_split_mechanisms", lambda eps: calls.append(1) or real(eps))
    curve = optcomp.privacy_curve([0.1, 0.3, Laplace(5.0)], counts=[20, 3, 2], num=40, method="approx")
    assert len(calls) == 1, len(calls)  # the curve's own validation (its grid's end included)
    calls.clear()
    w = np.linspace(0.1, 1.0, 12)
    c = optcomp.calibrate.largest_scale(w, 1.0, 1e-6, method="optimal", rtol=1e-9)  # ~10 evaluations
    assert len(calls) == 1, len(calls)
    calls.clear()
    e1 = optcomp.calibrate.per_query_epsilon(100, 1.0, 1e-6, delta=1e-9, rtol=1e-9)
    assert len(calls) == 1, len(calls)
    calls.clear()
    xs, dg = region.family_from_eps_grid(0.2, k=30, method="optimal", num=40)
    assert len(calls) == 1 and xs.size > 10
    acc = optcomp.Accountant().compose(0.1, count=20).compose(Laplace(5.0), count=2)
    calls.clear()
    e = [acc.get_epsilon(d) for d in (1e-3, 1e-6, 1e-9)]
    assert calls == []
    ledger_curve = curves.privacy_curve_of(acc.multiset, eps_g=[0.5, 1.0, 2.0])
    assert calls == []  # the command line's curve: from the ledger's multiset
    assert ledger_curve.delta.tolist() == optcomp.privacy_curve([0.1, Laplace(5.0)], counts=[20, 2],
                                                                eps_g=[0.5, 1.0, 2.0]).delta.tolist()
    with pytest.raises(ValueError, match="m must hold at least one mechanism"):
        curves.privacy_curve_of(optcomp.Accountant().multiset)
    big = _inputs.Mechanisms.from_items([(1e-7, 0.0, 10**12), (2e-7, 0.0, 10**12)])  # a ledger may hold more
    with pytest.raises(ValueError, match="more than the 1e\\+12 optcomp composes"):
        curves.privacy_curve_of(big, method="kov")
    monkeypatch.setattr(_inputs, "_split_mechanisms", real)
    assert optcomp.epsilon_g(c * w, delta_g=1e-6, method="optimal") <= 1.0  # rescaled = validated anew
    assert optcomp.epsilon_g(c * (1 + 2e-9) * w, delta_g=1e-6, method="optimal") > 1.0
    assert optcomp.epsilon_g(e1, 1e-9, k=100, delta_g=1e-6) <= 1.0
    assert e == [optcomp.epsilon_g([0.1, Laplace(5.0)], counts=[20, 2], delta_g=d) for d in (1e-3, 1e-6, 1e-9)]
    i = curve.eps_g.size // 2
    assert curve.delta[i] == optcomp.delta_bounds([0.1, 0.3, Laplace(5.0)], counts=[20, 3, 2],
                                                  eps_g=float(curve.eps_g[i])).upper
