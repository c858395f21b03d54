"""Bad input gets a ValueError naming the parameter (the command line's checks: tests/test_cli.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optcomp

ALL = optcomp.METHODS


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(eps=-0.1, k=3), "eps"),
        (dict(eps=float("nan"), k=3), "eps"),
        (dict(eps=float("inf"), k=3), "eps"),
        (dict(eps=[0.1, -0.2]), "eps"),
        (dict(eps=[0.1, float("nan")]), "eps"),
        (dict(eps="0.1", k=3), "eps"),
        (dict(eps=[[0.1, 0.2]]), "eps"),
        (dict(eps=[]), "eps"),
        (dict(eps=0.1, k=3, delta=-0.01), "delta"),
        (dict(eps=0.1, k=3, delta=1.0), "delta"),
        (dict(eps=0.1, k=3, delta=float("nan")), "delta"),
        (dict(eps=[0.1, 0.2], delta=[0.0, 0.0, 0.0]), "delta"),
        (dict(eps=0.1, k=0), "k"),
        (dict(eps=0.1, k=-5), "k"),
        (dict(eps=0.1, k=2.5), "k"),
        (dict(eps=0.1, k=float("nan")), "k"),
        (dict(eps=0.1, k=True), "k"),
        (dict(eps=0.1, k="3"), "k"),
        (dict(eps=[0.1, 0.2, 0.3], k=2), "k"),
        (dict(eps=0.1), "k"),
    ],
)
def test_bad_mechanisms(method, kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        optcomp.epsilon_g(delta_g=1e-6, method=method, **kwargs)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        optcomp.delta_g(eps_g=1.0, method=method, **kwargs)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("bad", [-1e-9, 1.0, 1.5, float("nan"), float("inf"), "0.1", None, [1e-6]])
def test_bad_delta_g(method, bad):
    with pytest.raises(ValueError, match="delta_g"):
        optcomp.epsilon_g(0.1, k=10, delta_g=bad, method=method)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), "1", None])
def test_bad_eps_g(method, bad):
    with pytest.raises(ValueError, match="eps_g"):
        optcomp.delta_g(0.1, k=10, eps_g=bad, method=method)


def test_bad_method_and_option():
    with pytest.raises(ValueError, match="method"):
        optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method="nope")
    with pytest.raises(ValueError, match="frobnicate"):
        optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method="basic", frobnicate=1)


def test_accepted_shapes():
    # homogeneous via k, numpy scalars, integral float k, arrays, per-mechanism delta
    a = optcomp.epsilon_g(0.1, 1e-6, k=10, delta_g=1e-3)
    assert optcomp.epsilon_g(np.float64(0.1), np.float32(1e-6).item(), k=np.int64(10), delta_g=1e-3) == pytest.approx(a)
    assert optcomp.epsilon_g(0.1, 1e-6, k=10.0, delta_g=1e-3) == a
    assert optcomp.epsilon_g([0.1] * 10, 1e-6, delta_g=1e-3) == a
    assert optcomp.epsilon_g(np.full(10, 0.1), [1e-6] * 10, k=10, delta_g=1e-3) == a
    assert optcomp.epsilon_g(0.1, [1e-6] * 10, delta_g=1e-3) == a  # k from len(delta)
    assert isinstance(a, float)


def test_unattainable_returns_inf_not_nan():
    for method in ALL:
        if method == "approx":
            continue
        v = optcomp.epsilon_g(0.1, 0.01, k=10, delta_g=0.05, method=method)
        assert math.isinf(v) and v > 0, method
        d = optcomp.delta_g(0.1, 0.0, k=10, eps_g=0.0, method=method)
        assert 0.0 <= d <= 1.0


# ------------------------------------------------------------------------- one rule for counts (issue 16, item 10)


def test_integral_floats_are_counts_everywhere():
    """k, counts, num: an integral float (10.0, 1e1) is the integer; a non-integral one is a
    ValueError naming the parameter; a bool or string a TypeError that is also a ValueError."""
    from optcomp._inputs import check_count, check_k, mechanisms

    want = optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method="kov")
    for k in (10.0, 1e1, np.float64(10.0), np.int32(10)):
        assert optcomp.epsilon_g(0.1, k=k, delta_g=1e-6, method="kov") == want
    assert optcomp.epsilon_g([0.1, 0.2], counts=[4.0, 6.0], delta_g=1e-6, method="kov") == \
        optcomp.epsilon_g([0.1, 0.2], counts=[4, 6], delta_g=1e-6, method="kov")
    assert optcomp.calibrate.per_query_epsilon(10.0, 1.0, 1e-6, method="kov") == \
        optcomp.calibrate.per_query_epsilon(10, 1.0, 1e-6, method="kov")
    curve = optcomp.privacy_curve(0.1, k=10.0, num=3.0, num_alpha=5.0, method="kov")
    assert curve.eps_g.size == 3 and curve.alpha.size >= 5
    assert mechanisms(0.1, k=2.0).count.tolist() == [2]
    assert check_count(2.0) == 2 and type(check_count(2.0)) is int and check_count(np.int64(3), "counts[0]") == 3
    assert check_k(1e12) == 10**12
    for bad, name in ((2.5, "k"), (10.000000001, "k"), (float("inf"), "k"), (0.0, "k"), (1e13, "k")):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            check_k(bad)
    with pytest.raises(ValueError, match=r"counts\[1\]"):
        optcomp.epsilon_g([0.1, 0.2], counts=[4, 6.5], delta_g=1e-6)
    with pytest.raises(ValueError, match=r"\bcount must be an integer, got 2\.5"):
        check_count(2.5)
    with pytest.raises(TypeError, match=r"\bcount\b"):
        check_count(True)
    with pytest.raises(ValueError, match=r"\bnum\b"):
        optcomp.privacy_curve(0.1, k=10, num=2.5, method="kov")
