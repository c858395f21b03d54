"""Every entry point speaks Subsampled: the Accountant and its JSON ledger, privacy_curve,
heterogeneous training runs (a multiset of steps) and the DP-SGD searches of
optcomp.dpsgd -- each checked against the references of tests/test_subsampled.py (written
from the definitions) or against a certified side of the engine's own bracket."""

from __future__ import annotations

import json
import math

import mpmath
import pytest

import optcomp
from optcomp import dpsgd
from optcomp._laws import FORWARD, REVERSE
from optcomp.mechanisms import BlackBox, Gaussian, Laplace, Pair, Subsampled
from test_subsampled import _gauss_pair, _mixed, gauss_h_closed


def two_gaussian_steps(a, b, x):
    """H(x) of step a = (sigma, s) then step b, both global directions: E over a's outcome of
    b's one-step curve at x - L_a (a 1-d quadrature; the inner curve in closed form)."""
    out = []
    for d in (FORWARD, REVERSE):
        p, q = _gauss_pair(a[0])
        f, g = _mixed(p, q, a[1])
        if d == REVERSE:
            f, g = g, f
        out.append(mpmath.quad(lambda t: f(t) * gauss_h_closed(b[0], b[1], x - mpmath.log(f(t) / g(t)), d),
                               [-mpmath.inf, -5 * a[0], 0, 1, 5 * a[0] + 1, mpmath.inf]))
    return max(out)


def test_heterogeneous_run_against_quadrature():
    """sigma and q change during training: the steps are a multiset, each with its count."""
    a, b = (1.0, 0.2), (2.0, 0.6)
    items = [Subsampled(Gaussian(a[0]), a[1]), Subsampled(Gaussian(b[0]), b[1])]
    for x in (0.5,):
        with mpmath.workdps(15):
            ref = two_gaussian_steps(a, b, x)
        got = optcomp.delta_bounds(items, counts=[1, 1], eps_g=x, tol=1e-4)
        assert got.lower * (1 - 1e-12) <= ref <= got.upper * (1 + 1e-12)
    # a run of many steps in a few phases equals the same steps listed with counts, in any order
    phases = [Subsampled(Gaussian(1.1), 0.01), Subsampled(Gaussian(0.9), 0.02), Subsampled(Gaussian(1.1), 0.01)]
    merged = optcomp.epsilon_bounds(phases[:2], counts=[30, 10], delta_g=1e-5)
    split = optcomp.epsilon_bounds(phases, counts=[10, 10, 20], delta_g=1e-5)
    assert merged.lower <= split.upper and split.lower <= merged.upper


def test_accountant_and_its_json():
    steps = Subsampled(Gaussian(1.1), 0.01)
    acc = optcomp.Accountant()
    acc.compose(steps, count=50)
    acc.compose(Subsampled(Pair((0.6, 0.4), (0.3, 0.7)), 0.1), count=3)
    acc.compose(BlackBox(0.1, 1e-7))
    acc.compose(0.05, 1e-8, count=2)
    record = json.loads(json.dumps(acc.to_dict()))
    sub = record["mechanisms"][0]
    assert sub["mechanism"] == "Subsampled" and sub["base"] == {"mechanism": "Gaussian", "sigma": 1.1,
                                                                  "sensitivity": 1.0}
    again = optcomp.Accountant.from_dict(record)
    assert again.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    direct = optcomp.epsilon_g([steps, Subsampled(Pair((0.6, 0.4), (0.3, 0.7)), 0.1), BlackBox(0.1, 1e-7),
                                0.05], delta=[0, 0, 0, 1e-8], counts=[50, 3, 1, 2], delta_g=1e-5)
    assert acc.get_epsilon(1e-5) == direct
    with pytest.raises(ValueError, match=r"mechanisms\[0\]\.base: Gaussian"):
        optcomp.Accountant.from_dict({**record, "mechanisms": [{**sub, "base": {"mechanism": "Gaussian",
                                                                                 "sigma": -1.0}}]})
    with pytest.raises(ValueError, match=r"mechanisms\[0\]: Subsampled: base must be a mechanism record"):
        optcomp.Accountant.from_dict({**record, "mechanisms": [{**sub, "base": 1.1}]})


def test_privacy_curve_holds_the_profile():
    m = Subsampled(Gaussian(0.8), 0.05)
    curve = optcomp.privacy_curve(m, k=1, eps_g=[0.0, 0.1, 0.5, 1.5], method="approx")
    for x, hi, lo in zip(curve.eps_g, curve.delta, curve.delta_lower):
        with mpmath.workdps(40):
            ref = max(gauss_h_closed(0.8, 0.05, mpmath.mpf(x), d) for d in (FORWARD, REVERSE))
        assert lo * (1 - 1e-12) <= ref <= hi * (1 + 1e-12)
    curve = optcomp.privacy_curve([m, Subsampled(Laplace(3.0), 0.5)], counts=[20, 4], num=4)
    assert curve.method == "approx" and all(0.0 <= d <= 1.0 for d in curve.delta)


def test_optimal_method_refuses_the_continuous_base():
    with pytest.raises((ValueError, TypeError)):
        optcomp.epsilon_g(Subsampled(Gaussian(1.0), 0.1), k=2, delta_g=1e-5, method="optimal")


# ---------------------------------------------------------------------------------------------
# DP-SGD searches


def _one_step_delta(sigma, q, x):
    with mpmath.workdps(40):
        return max(gauss_h_closed(sigma, q, mpmath.mpf(x), d) for d in (FORWARD, REVERSE))


def test_noise_multiplier_is_the_least():
    q, eps, delta, rtol = 0.05, 0.5, 1e-6, 1e-3
    c = dpsgd.noise_multiplier(q, 1, eps, delta, rtol=rtol)
    assert c.epsilon.upper <= eps
    assert _one_step_delta(c.value, q, eps) <= delta  # the reference agrees: within budget
    assert _one_step_delta(c.value / (1 + 2 * rtol), q, eps) > delta  # and it is the least to rtol


def test_max_sampling_rate_is_the_largest():
    sigma, eps, delta, rtol = 1.0, 0.3, 1e-5, 1e-3
    c = dpsgd.max_sampling_rate(sigma, 1, eps, delta, rtol=rtol)
    assert 0.0 < c.value < 1.0 and c.epsilon.upper <= eps
    assert _one_step_delta(sigma, c.value, eps) <= delta
    assert _one_step_delta(sigma, c.value * (1 + 2 * rtol), eps) > delta
    assert dpsgd.max_sampling_rate(10.0, 1, 1.0, 1e-5).value == 1.0  # the unsampled Gaussian fits


def test_max_steps_is_certified():
    sigma, q, eps, delta = 1.0, 0.05, 1.5, 1e-5
    c = dpsgd.max_steps(sigma, q, eps, delta)
    m = Subsampled(Gaussian(sigma), q)
    assert c.value >= 1 and c.epsilon.upper <= eps
    assert optcomp.epsilon_bounds(m, k=c.value, delta_g=delta, tol=1e-4).upper <= eps
    assert optcomp.epsilon_bounds(m, k=c.value + 1, delta_g=delta, tol=1e-5).upper > eps  # one more: not certified
    assert dpsgd.max_steps(0.5, 0.9, 1e-3, 1e-9).value == 0  # one step is already over budget


def test_dpsgd_bad_input():
    with pytest.raises(ValueError, match="sampling_rate"):
        dpsgd.noise_multiplier(0.0, 10, 1.0, 1e-5)
    with pytest.raises(ValueError, match="steps"):
        dpsgd.noise_multiplier(0.1, 0, 1.0, 1e-5)
    with pytest.raises(TypeError, match="steps"):
        dpsgd.max_sampling_rate(1.0, 2.5, 1.0, 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        dpsgd.max_steps(-1.0, 0.1, 1.0, 1e-5)
    with pytest.raises(ValueError, match="rtol"):
        dpsgd.noise_multiplier(0.1, 10, 1.0, 1e-5, rtol=0.0)


# ---------------------------------------------------------------------------------------------
# command line


def _cli_rows(*args):
    import io
    import sys

    from optcomp import cli

    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        assert cli.main([*args, "--json"]) == 0
    finally:
        sys.stdout = saved
    return json.loads(out.getvalue())["rows"]


def test_command_line_mechanism_with_a_sampling_rate(tmp_path):
    m = Subsampled(Gaussian(1.1), 0.05)
    want = optcomp.epsilon_g(m, k=20, delta_g=1e-5)
    rows = _cli_rows("epsilon", "--mechanism", "gaussian:sigma=1.1,q=0.05,count=20", "--delta-g", "1e-5")
    assert rows[0]["eps_g"] == want
    # a ledger file with a q column: an (eps, delta) row and a mechanism row, each subsampled
    path = tmp_path / "run.csv"
    path.write_text("eps,delta,count,mechanism,q\n1.0,1e-7,3,,0.1\n,,20,gaussian:sigma=1.1,0.05\n0.2,0,1,,\n")
    rows = _cli_rows("epsilon", "--file", str(path), "--delta-g", "1e-5")
    direct = optcomp.epsilon_g([Subsampled(BlackBox(1.0, 1e-7), 0.1), m, 0.2], counts=[3, 20, 1], delta_g=1e-5)
    assert rows[0]["eps_g"] == direct


@pytest.mark.parametrize("spec, match", [("gaussian:sigma=1.1,q=1.5", "q must be"),
                                         ("gaussian:sigma=1.1,q=0.1,relation=replace_one", "established"),
                                         ("gaussian:sigma=1.1,scheme=poisson", "sampling rate"),
                                         ("subsampled:q=0.1", "sampling rate")])
def test_command_line_refuses_bad_sampling(spec, match, capsys):
    from optcomp import cli

    try:
        status = cli.main(["epsilon", "--mechanism", spec, "--delta-g", "1e-5"])
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and match in err
