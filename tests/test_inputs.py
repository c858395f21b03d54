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
