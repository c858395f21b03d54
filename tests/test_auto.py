"""The default method="auto": exact where feasible, else a certified upper bound within
AUTO_TOL of the optimum -- never below it, and never an ExactTooLarge for the common call."""

from __future__ import annotations

import logging
import math
import random

import pytest

import optcomp
from optcomp import auto
from optcomp._inputs import mechanisms
from optcomp import ApproxTooCostly, Bounds, ExactTooLarge

_RNG = random.Random(1)
EPS_1000 = [_RNG.uniform(0.05, 0.2) for _ in range(1000)]  # 1000 distinct reals: exact is out of reach
SMALL = ([0.1, 0.3, 0.7, 1.1, 0.05, 0.2], [0.0, 1e-7, 0.0, 0.0, 1e-8, 0.0])  # exact: 64 atoms


def _no_exact(monkeypatch):
    """Make the exact path refuse, as it does for inputs beyond meet in the middle."""
    def refuse(*args, **kwargs):
        raise ExactTooLarge("exact optimal composition of these mechanisms needs too many atoms — test")

    monkeypatch.setattr("optcomp.optimal.optimal_epsilon", refuse)
    monkeypatch.setattr("optcomp.optimal.optimal_delta", refuse)


def test_the_default_is_auto():
    assert optcomp.METHOD_INFO["auto"].options == auto.OPTIONS
    import inspect

    assert inspect.signature(optcomp.epsilon_g).parameters["method"].default == "auto"
    assert inspect.signature(optcomp.delta_g).parameters["method"].default == "auto"


def test_common_first_call_answers_where_optimal_raises():
    with pytest.raises(ExactTooLarge):
        optcomp.epsilon_g(EPS_1000, delta_g=1e-6, method="optimal")
    value = optcomp.epsilon_g(EPS_1000, delta_g=1e-6)
    tight = optcomp.epsilon_bounds(EPS_1000, delta_g=1e-6, tol=1e-6)  # (1% of AUTO_TOL)
    assert tight.lower <= value <= tight.lower + auto.AUTO_TOL
    # below basic composition and the KOV closed form, as an optimum must be
    assert value < optcomp.epsilon_g(EPS_1000, delta_g=1e-6, method="kov") < sum(EPS_1000)


def test_exact_where_feasible_is_the_optimal_value():
    eps, delta = SMALL
    assert optcomp.epsilon_g(eps, delta, delta_g=1e-5) == optcomp.epsilon_g(eps, delta, delta_g=1e-5, method="optimal")
    assert optcomp.delta_g(eps, delta, eps_g=1.0) == optcomp.delta_g(eps, delta, eps_g=1.0, method="optimal")
    assert optcomp.epsilon_g(0.1, k=10**12, delta_g=1e-6) == optcomp.epsilon_g(0.1, k=10**12, delta_g=1e-6,
                                                                               method="optimal")


@pytest.mark.parametrize("delta_g", [1.2e-7, 1e-6, 0.1])
def test_fallback_brackets_the_exact_value(monkeypatch, delta_g):
    eps, delta = SMALL
    exact = optcomp.epsilon_g(eps, delta, delta_g=delta_g, method="optimal")
    _no_exact(monkeypatch)
    value = optcomp.epsilon_g(eps, delta, delta_g=delta_g)
    assert exact - 1e-12 * exact <= value <= exact + auto.AUTO_TOL


@pytest.mark.parametrize("eps_g", [0.0, 0.5, 1.5])
def test_fallback_delta_brackets_the_exact_value(monkeypatch, eps_g):
    eps, delta = SMALL
    exact = optcomp.delta_g(eps, delta, eps_g=eps_g, method="optimal")
    _no_exact(monkeypatch)
    value = optcomp.delta_g(eps, delta, eps_g=eps_g)
    assert exact * (1 - 1e-12) <= value <= exact * (1 + auto.AUTO_TOL) + 1e-300


def test_fallback_says_which_answered(monkeypatch, caplog):
    _no_exact(monkeypatch)
    eps, delta = SMALL
    with caplog.at_level(logging.INFO, logger="optcomp"):
        value, how = auto.resolve_epsilon(mechanisms(eps, delta, None, None), 1e-6)
    assert how.startswith("approx (certified upper bound") and "exact out of reach" in how
    assert any("method='auto'" in r.getMessage() and "too many atoms" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    value2, how2 = auto.resolve_epsilon(mechanisms(0.1, 0.0, 10, None), 1e-6)
    assert how2 == "optimal (exact)"


def test_fallback_past_max_points_returns_the_carried_bracket(monkeypatch):
    _no_exact(monkeypatch)

    def costly(m, delta_g, **kw):
        raise ApproxTooCostly("too fine", Bounds(3.0, 3.5))

    monkeypatch.setattr("optcomp.approx.approx_epsilon", costly)
    value, how = auto.resolve_epsilon(mechanisms(0.1, 0.0, 10, None), 1e-6)
    assert value == 3.5 and "gap 0.5" in how

    def costly_bare(m, delta_g, **kw):
        raise ApproxTooCostly("too fine")

    monkeypatch.setattr("optcomp.approx.approx_epsilon", costly_bare)
    with pytest.raises(ApproxTooCostly):
        auto.resolve_epsilon(mechanisms(0.1, 0.0, 10, None), 1e-6)


def test_unattainable_and_options():
    assert optcomp.epsilon_g(0.1, 0.01, k=10, delta_g=0.05) == math.inf
    assert optcomp.epsilon_g(EPS_1000, 0.001, delta_g=0.5) == math.inf  # 1 - 0.999^1000 = 0.63
    with pytest.raises(ValueError, match="max_atoms"):
        optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, max_atoms=100)
    with pytest.raises(ValueError, match="tol"):
        optcomp.epsilon_g(EPS_1000, delta_g=1e-6, tol=-1.0)


def test_the_toolkit_defaults_to_auto():
    """privacy_curve, the Accountant and calibrate answer where optimal raises; a curve says
    which method ran, and its brackets hold the values of the pointwise calls."""
    import inspect

    from optcomp import calibrate

    for fn in (optcomp.privacy_curve, optcomp.Accountant.get_epsilon, optcomp.Accountant.get_delta,
               optcomp.Accountant.can_afford, optcomp.Accountant.remaining, calibrate.per_query_epsilon,
               calibrate.largest_scale, calibrate.split_budget, calibrate.laplace_scale):
        assert inspect.signature(fn).parameters["method"].default == "auto", fn
    curve = optcomp.privacy_curve(EPS_1000, num=4)
    assert curve.method == "approx" and curve.delta_lower is not None
    for x, lo, hi in zip(curve.eps_g, curve.delta_lower, curve.delta):
        assert lo <= hi <= lo * (1 + auto.AUTO_TOL) + 1e-300
        assert lo <= optcomp.delta_g(EPS_1000, eps_g=float(x))
    assert optcomp.privacy_curve(0.1, k=50, num=4).method == "optimal"
    acc = optcomp.Accountant()
    for e in EPS_1000:
        acc.compose(e)
    assert acc.get_epsilon(1e-6) == optcomp.epsilon_g(EPS_1000, delta_g=1e-6)
