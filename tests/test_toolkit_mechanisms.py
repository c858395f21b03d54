"""The toolkit speaks mechanisms (issue 18 item 2): Accountant, privacy_curve, calibrate.noise_for /
noise_table and the command line with :mod:`optcomp.mechanisms` objects.

The references are written here from the definitions, independently of the code under test:

* Laplace, k = 1 (a = Delta/b): delta(x) = 1 - e^{(x - a)/2} for 0 <= x < a, 0 beyond, so the
  least eps_g at delta_g is a + 2 log(1 - delta_g);
* one Laplace beside one black box (e0, 0): delta(x) = E_{L2}[delta_L(x - L2)] over the black
  box's loss L2 = +-e0 (masses e^e0/(1 + e^e0), 1/(1 + e^e0)), with delta_L(y) = 1 - e^y +
  e^y delta_L(-y) for y < 0 (the hockey-stick identity, the Laplace loss being symmetric);
* Gaussians: mu^2 = sum_i c_i Delta_i^2 / sigma_i^2 and delta(x) = Phi(mu/2 - x/mu) -
  e^x Phi(-mu/2 - x/mu), in 40-digit mpmath;
* staircase, k = 1: delta(x) = p (1 - e^{x - eps})_+ with p = 1/2 + m (1 - e^-eps) / (2 (gamma +
  e^-eps (1 - gamma))), m = min(gamma, 1 - gamma) (Geng--Viswanath);
* Geometric(eps) with sensitivity 1 is the black box (eps, 0) (KOV Thm 4.4): equal answers,
  bit for bit.

Every case composes a handful of mechanisms (small k): the file runs in seconds.
"""

from __future__ import annotations

import json
import math
import pickle

import mpmath as mp
import pytest

import optcomp
from optcomp import Accountant, calibrate
from optcomp._inputs import Mechanisms
from optcomp.mechanisms import (BlackBox, DiscreteGaussian, Gaussian, Geometric, Laplace, Pair, Profile,
                                RandomizedResponse, Staircase)

mp.mp.dps = 40


# ------------------------------------------------------------------------------ references


def ref_laplace_delta(a, x):
    """delta(x) of one Laplace mechanism with a = Delta/b, any real x."""
    a, x = mp.mpf(a), mp.mpf(x)
    if x < 0:
        return 1 - mp.e**x + mp.e**x * ref_laplace_delta(a, -x)
    return 1 - mp.e ** ((x - a) / 2) if x < a else mp.mpf(0)


def ref_laplace_blackbox_delta(a, e0, x):
    """delta(x) of Laplace(a) composed with the black box (e0, 0)."""
    e0 = mp.mpf(e0)
    up, dn = 1 / (1 + mp.e**-e0), 1 / (1 + mp.e**e0)
    return up * ref_laplace_delta(a, x - e0) + dn * ref_laplace_delta(a, x + e0)


def ref_gauss_delta(mu, x):
    mu, x = mp.mpf(mu), mp.mpf(x)
    return mp.ncdf(mu / 2 - x / mu) - mp.e**x * mp.ncdf(-mu / 2 - x / mu)


def ref_gauss_mu(eps_g, delta_g):
    """The largest mu with delta_mu(eps_g) <= delta_g (delta_mu increases in mu), to ~1e-30."""
    lo, hi = mp.mpf(0), mp.mpf(100)
    for _ in range(130):
        mid = (lo + hi) / 2
        if ref_gauss_delta(mid, eps_g) <= delta_g:
            lo = mid
        else:
            hi = mid
    return lo


def ref_gauss_eps(mu, delta_g):
    """The least eps with delta_mu(eps) <= delta_g (delta_mu decreases in eps)."""
    lo, hi = mp.mpf(0), mp.mpf(200)
    for _ in range(130):
        mid = (lo + hi) / 2
        if ref_gauss_delta(mu, mid) > delta_g:
            lo = mid
        else:
            hi = mid
    return hi


def ref_staircase_eps(eps, gamma, delta_g):
    """eps_g at delta_g of one staircase mechanism: eps + log(1 - delta_g / p) (delta_g < p)."""
    e, g = mp.mpf(eps), mp.mpf(gamma)
    b = mp.e**-e
    p = mp.mpf(1) / 2 + min(g, 1 - g) * (1 - b) / (2 * (g + b * (1 - g)))
    return e + mp.log(1 - mp.mpf(delta_g) / p)


# ------------------------------------------------------------------------------ the accountant


def test_ledger_holds_mechanisms_merged_in_order_of_arrival():
    acc = Accountant().compose(Laplace(10.0), count=3).compose(0.1, count=2).compose(Gaussian(2.0))
    acc.compose(Laplace(10), count=2).compose(Geometric(0.3), count=4).compose(0.1)
    # Laplace(10) == Laplace(10.0): merged; Geometric(0.3) is the black box (0.3, 0) (KOV Thm 4.4)
    assert acc.mechanisms == ((Laplace(10.0), 0.0, 5), (0.1, 0.0, 3), (Gaussian(2.0), 0.0, 1), (0.3, 0.0, 4))
    assert acc.k == len(acc) == 13 and acc
    assert Accountant(reversed(acc.mechanisms)) == acc  # order-free equality
    assert Accountant(acc.mechanisms) != Accountant(acc.mechanisms).compose(Laplace(10.0))
    assert Accountant(acc.mechanisms) != Accountant(acc.mechanisms[:-1])
    assert repr(acc) == ("Accountant(k=13: 5 x Laplace(scale=10.0, sensitivity=1.0), 3 x (eps=0.1, delta=0.0), "
                         "1 x Gaussian(sigma=2.0, sensitivity=1.0), 4 x (eps=0.3, delta=0.0))")
    assert Accountant().compose(Geometric(0.3), count=4) == Accountant().compose(0.3, count=4)
    assert Accountant().compose(Gaussian(1.0)) != Accountant().compose(Gaussian(1.0, 2.0))


def test_compose_rejects_a_delta_beside_a_mechanism_and_bad_counts():
    with pytest.raises(ValueError, match="delta must be 0 for a mechanism"):
        Accountant().compose(Laplace(1.0), 1e-6)
    with pytest.raises(ValueError, match="count"):
        Accountant().compose(Laplace(1.0), count=0)
    with pytest.raises(ValueError, match=r"ledger\[1\]: delta must be 0"):
        Mechanisms.from_items([(0.1,), (Gaussian(1.0), 0.5)], name="ledger")
    with pytest.raises(TypeError, match="count"):
        Accountant([(Gaussian(1.0), 0.0, "3")])


ALL = [Laplace(10.0), Gaussian(5.0, 2.0), Geometric(0.2, 3), DiscreteGaussian(2.0, 2), Staircase(0.5, 0.3),
       RandomizedResponse(0.5, 4), Pair([0.5, 0.5], [0.25, 0.75]), Profile([(1.0, 0.0), (0.5, 1e-6)])]


def test_json_and_pickle_round_trips_keep_every_mechanism():
    acc = Accountant().compose(0.1, 1e-7, count=10**12)
    for i, m in enumerate(ALL):
        acc.compose(m, count=i + 1)
    data = acc.to_dict()
    assert data["version"] == 2
    assert data["mechanisms"][1] == {"mechanism": "Laplace", "scale": 10.0, "sensitivity": 1.0, "count": 1}
    assert data["mechanisms"][7] == {"mechanism": "Pair", "p": [0.5, 0.5], "q": [0.25, 0.75], "count": 7}
    back = Accountant.from_dict(json.loads(json.dumps(data)))
    assert back == acc and back.mechanisms == acc.mechanisms
    assert pickle.loads(pickle.dumps(acc)) == acc
    assert Accountant().compose(0.1).to_dict()["version"] == 1  # pairs only: the record of every earlier version
    # a black-box object is recorded as its pair
    assert Accountant().compose(BlackBox(0.5, 1e-6)).to_dict()["mechanisms"] == [
        {"eps": 0.5, "delta": 1e-6, "count": 1}]


@pytest.mark.parametrize("item, match", [
    ({"mechanism": "Foo"}, r"mechanisms\[0\]: mechanism must name a class of optcomp.mechanisms"),
    ({"mechanism": "Mechanism"}, "must name a class"),
    ({"mechanism": "DiscretePair"}, "must name a class"),
    ({"mechanism": 5}, "must name a class"),
    ({"mechanism": "Laplace"}, "Laplace needs the field 'scale'"),
    ({"mechanism": "Laplace", "scale": 1.0, "delta": 0.1}, "unknown field 'delta' for Laplace"),
    ({"mechanism": "Laplace", "scale": -1.0}, "Laplace: scale must be finite and > 0"),
    ({"mechanism": "Geometric", "eps": 0.1, "sensitivity": 1.5}, "sensitivity must be an integer"),
    ({"mechanism": "Pair", "p": [0.5, 0.5], "q": [1.0]}, "q must have the length of p"),
    ({"mechanism": "Gaussian", "sigma": 1.0, "count": 0}, "count must be an integer"),
    ({"mechanism": "Gaussian", "sigma": "1"}, "sigma must be a real number"),
])
def test_from_dict_rejects_bad_mechanism_records(item, match):
    with pytest.raises(ValueError, match=match):
        Accountant.from_dict({"mechanisms": [item]})


def test_one_laplace_matches_its_closed_form():
    acc = Accountant().compose(Laplace(2.0))  # a = 0.5
    for delta_g in (1e-6, 0.1):
        ref = 0.5 + 2 * mp.log(1 - mp.mpf(delta_g))
        b = acc.bounds(delta_g)
        assert b.lower <= ref <= b.upper and b.gap <= 1e-4
        assert acc.get_epsilon(delta_g) >= ref
    for x in (0.0, 0.25, 0.49):
        ref = ref_laplace_delta(0.5, x)
        b = acc.bounds(eps_g=x)
        assert b.lower <= ref <= b.upper
        assert acc.get_delta(x) >= ref
    assert 0.5 <= acc.get_epsilon(0.0) <= 0.5 + 1e-4  # delta_g = 0: the largest loss, a


def test_gaussians_compose_to_the_closed_form():
    acc = Accountant().compose(Gaussian(2.0), count=3).compose(Gaussian(4.0, 2.0))  # mu^2 = 3/4 + 1/4 = 1
    for x in (0.0, 0.5, 2.0):
        ref = ref_gauss_delta(1, x)
        assert ref <= acc.get_delta(x) <= ref * (1 + 1e-9)
        assert ref <= acc.get_delta(x, method="optimal")
    ref = ref_gauss_eps(1, mp.mpf("1e-6"))
    assert ref <= acc.get_epsilon(1e-6) <= ref * (1 + 1e-9)


def test_laplace_beside_a_black_box_is_bracketed():
    acc = Accountant().compose(Laplace(2.0)).compose(0.3)
    for x in (0.0, 0.4, 0.7):
        ref = ref_laplace_blackbox_delta(0.5, 0.3, x)
        b = acc.bounds(eps_g=x)
        assert b.lower <= ref <= b.upper
        assert acc.get_delta(x) >= ref


def test_geometric_answers_are_the_black_box_answers_bit_for_bit():
    geo = Accountant().compose(Geometric(0.3), count=10).compose(Geometric(0.1), count=5)
    box = Accountant().compose(0.3, count=10).compose(0.1, count=5)
    for method in ("optimal", "kov", "auto"):
        assert geo.get_epsilon(1e-6, method=method) == box.get_epsilon(1e-6, method=method)
        assert geo.get_delta(1.0, method=method) == box.get_delta(1.0, method=method)


def test_methods_about_pairs_refuse_mechanisms_by_name():
    acc = Accountant().compose(Laplace(10.0), count=3)
    with pytest.raises(ValueError, match="'kov'"):
        acc.get_epsilon(1e-6, method="kov")
    with pytest.raises(optcomp.ExactTooLarge):
        acc.get_delta(1.0, method="optimal")


def test_can_afford_and_remaining_with_mechanisms():
    acc = Accountant().compose(Laplace(10.0), count=5)
    direct = optcomp.epsilon_g([Laplace(10.0), Laplace(20.0)], counts=[5, 3], delta_g=1e-6)
    assert acc.can_afford(Laplace(20.0), count=3, eps_g=direct, delta_g=1e-6)
    assert not acc.can_afford(Laplace(20.0), count=3, eps_g=math.nextafter(direct, 0.0), delta_g=1e-6)
    x = acc.remaining(1.0, 1e-6, count=2, rtol=1e-3)
    assert x > 0 and acc.can_afford(x, count=2, eps_g=1.0, delta_g=1e-6)
    assert not acc.can_afford(x * 1.01, count=2, eps_g=1.0, delta_g=1e-6)
    with pytest.raises(ValueError, match="delta must be 0"):
        acc.can_afford(Laplace(20.0), 1e-3, eps_g=1.0, delta_g=1e-6)


# ------------------------------------------------------------------------------ privacy curves


def test_curve_of_one_laplace_brackets_its_closed_form():
    curve = optcomp.privacy_curve(Laplace(2.0), k=1, eps_g=[0.0, 0.2, 0.4, 0.6], num_alpha=11)
    assert curve.method == "approx" and curve.delta_lower is not None  # auto: no exact form for Laplace
    for x, lo, up in zip(curve.eps_g.tolist(), curve.delta_lower.tolist(), curve.delta.tolist()):
        ref = ref_laplace_delta(0.5, x)
        assert lo <= ref <= up
    assert curve.delta[-1] == 0.0  # beyond a = 0.5 the loss never exceeds eps_g


def test_curve_of_gaussians_is_the_closed_form_and_ends_where_delta_vanishes():
    curve = optcomp.privacy_curve(Gaussian(2.0), k=4, num=6, num_alpha=11)  # mu = 1
    assert curve.method == "optimal" and curve.delta_lower is None
    assert curve.eps_g[0] == 0.0 and len(curve.eps_g) == 6
    for x, up in zip(curve.eps_g.tolist(), curve.delta.tolist()):
        ref = ref_gauss_delta(1, x)
        assert ref <= up <= ref * (1 + 1e-9) + 1e-300
    assert 1e-14 < curve.delta[-1] < 1e-10  # the right end: delta ~ 1e-12


def test_curve_of_a_mixture_and_refusals():
    curve = optcomp.privacy_curve([Laplace(2.0), 0.3], counts=[1, 1], eps_g=[0.1, 0.5], num_alpha=11)
    for x, lo, up in zip(curve.eps_g.tolist(), curve.delta_lower.tolist(), curve.delta.tolist()):
        assert lo <= ref_laplace_blackbox_delta(0.5, 0.3, x) <= up
    with pytest.raises(ValueError, match="'kov'"):
        optcomp.privacy_curve(Laplace(1.0), k=2, method="kov")
    with pytest.raises(optcomp.ExactTooLarge):
        optcomp.privacy_curve(Laplace(1.0), k=2, method="optimal", eps_g=[0.5])
    with pytest.raises(ValueError, match="delta"):
        optcomp.privacy_curve([Laplace(1.0)], [0.1], counts=[2])


def test_default_grid_of_laplace_mechanisms_ends_at_their_largest_loss():
    curve = optcomp.privacy_curve(Laplace(2.0), k=2, num=5, num_alpha=11)  # the loss is at most 2a = 1
    assert curve.eps_g[0] == 0.0 and 0.99 < curve.eps_g[-1] <= 1.0 + 1e-3
    assert curve.delta[0] > 0.2 and curve.delta[-1] < 1e-6


# ------------------------------------------------------------------------------ calibrate


def test_noise_for_one_laplace_meets_the_closed_form():
    delta_g = 1e-6
    best = 1 - 2 * mp.log(1 - mp.mpf(delta_g))  # the largest a with a + 2 log(1 - delta_g) <= 1
    m = calibrate.noise_for("laplace", 1, 1.0, delta_g, sensitivity=3.0)
    assert isinstance(m, Laplace) and m.sensitivity == 3.0
    a = mp.mpf(m.sensitivity) / mp.mpf(m.scale)
    assert a + 2 * mp.log(1 - mp.mpf(delta_g)) <= 1  # certified: the returned noise fits
    assert a >= best * (1 - 2e-4)  # and it is the least noise, to auto's resolution (1e-4 in eps_g)
    assert optcomp.epsilon_g(m, k=1, delta_g=delta_g) <= 1.0


@pytest.mark.parametrize("k, eps_g, delta_g, sens", [(1, 1.0, 1e-6, 1.0), (100, 0.5, 1e-9, 2.0), (10**12, 3.0, 0.1, 1.0)])
def test_noise_for_gaussians_meets_the_closed_form(k, eps_g, delta_g, sens):
    m = calibrate.noise_for("gaussian", k, eps_g, delta_g, sensitivity=sens)
    assert isinstance(m, Gaussian) and m.sensitivity == sens
    mu = mp.sqrt(k) * mp.mpf(sens) / mp.mpf(m.sigma)
    best = ref_gauss_mu(eps_g, delta_g)
    assert ref_gauss_delta(mu, eps_g) <= delta_g  # certified
    assert mu >= best * (1 - 2e-6)  # rtol = 1e-6 on an exact (closed-form) value


@pytest.mark.parametrize("k", [1, 7, 300])
def test_noise_for_geometric_is_the_optimal_black_box_split(k):
    m = calibrate.noise_for("geometric", k, 0.5, 1e-6, rtol=0.0)
    assert m == Geometric(calibrate.per_query_epsilon(k, 0.5, 1e-6), 1)  # KOV Thm 4.4, bit for bit


def test_noise_for_staircase_uses_the_variance_optimal_gamma():
    delta_g = 1e-3
    m = calibrate.noise_for("staircase", 1, 0.8, delta_g, sensitivity=2.0)
    assert isinstance(m, Staircase) and m.sensitivity == 2.0
    assert abs(m.gamma - 1 / (1 + math.exp(m.eps / 2))) <= 2 * math.ulp(m.gamma)
    assert ref_staircase_eps(m.eps, m.gamma, delta_g) <= 0.8  # certified
    # the largest such eps (its gamma moves with it), to auto's resolution
    lo, hi = mp.mpf(0.5), mp.mpf(1.5)
    for _ in range(100):
        mid = (lo + hi) / 2
        if ref_staircase_eps(mid, 1 / (1 + mp.e ** (mid / 2)), delta_g) <= 0.8:
            lo = mid
        else:
            hi = mid
    assert m.eps >= lo * (1 - 2e-4)
    # mechanism-aware: never more noise than the black-box (eps, 0) split, to the resolution
    assert m.eps >= calibrate.per_query_epsilon(1, 0.8, delta_g) * (1 - 2e-4)


def test_noise_for_discrete_mechanisms_take_integer_sensitivities():
    m = calibrate.noise_for("geometric", 3, 1.0, 1e-6, sensitivity=2)
    assert isinstance(m, Geometric) and m.sensitivity == 2
    assert optcomp.epsilon_g(m, k=3, delta_g=1e-6) <= 1.0
    # sensitivity 2: the loss is 2 eps at most, so 3 copies of eps = 1/6 fit exactly (pure DP)
    assert m.eps >= (1 / 6) * (1 - 1e-9)
    for name in ("geometric", "discrete_gaussian"):
        with pytest.raises(ValueError, match="sensitivity must be an integer"):
            calibrate.noise_for(name, 3, 1.0, 1e-6, sensitivity=2.5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(mechanism="nope"), "mechanism must be one of"),
    (dict(mechanism="Laplace"), "mechanism must be one of"),
    (dict(k=0), "k must be"),
    (dict(eps_g=-1.0), "eps_g"),
    (dict(delta_g=1.0), "delta_g"),
    (dict(sensitivity=0.0), "sensitivity"),
    (dict(rtol=-1.0), "rtol"),
    (dict(method="nope"), "method"),
    (dict(method="kov"), "'kov'"),
    (dict(mechanism="gaussian", delta_g=0.0), "no finite gaussian noise"),
    (dict(eps_g=0.0, delta_g=0.0), "no finite laplace noise"),
])
def test_noise_for_rejects_bad_input(kwargs, match):
    args = dict(mechanism="laplace", k=3, eps_g=1.0, delta_g=1e-6) | kwargs
    with pytest.raises(ValueError, match=match):
        calibrate.noise_for(args.pop("mechanism"), args.pop("k"), args.pop("eps_g"), args.pop("delta_g"), **args)


def test_noise_for_optimal_is_for_gaussians_only():
    with pytest.raises(optcomp.ExactTooLarge):
        calibrate.noise_for("laplace", 3, 1.0, 1e-6, method="optimal")
    assert isinstance(calibrate.noise_for("gaussian", 3, 1.0, 1e-6, method="optimal"), Gaussian)


def test_noise_table_mechanism_rows():
    seen = []
    rows = calibrate.noise_table(50, 0.5, 1e-6, methods=("optimal",), recipe=False,
                                 mechanisms=("laplace", "gaussian"), progress=seen.append)
    assert [r.method for r in rows] == ["optimal", "laplace-aware", "gaussian-aware"]
    opt, lap, gau = rows
    assert opt.noise_std == opt.laplace_std and opt.mechanism is None and opt.vs_optimal == 1.0
    assert isinstance(lap.mechanism, Laplace) and lap.laplace_scale == lap.mechanism.scale
    assert lap.eps == 1.0 / lap.laplace_scale and lap.delta == 0.0
    assert lap.noise_std == lap.laplace_std == math.sqrt(2.0) * lap.laplace_scale
    assert lap.vs_optimal <= 1.0 + 2e-4  # composed as Laplace: never more noise than the black box
    assert optcomp.epsilon_g(lap.mechanism, k=50, delta_g=1e-6) <= 0.5
    # a Gaussian is (eps, 0)-DP for no finite eps (its loss is unbounded): eps inf, delta 0
    assert isinstance(gau.mechanism, Gaussian) and gau.eps == math.inf and gau.delta == 0.0
    assert gau.laplace_scale is None
    assert gau.noise_std == gau.mechanism.sigma and gau.vs_optimal == gau.noise_std / opt.laplace_std
    assert any("noise_for" in s["stage"] for s in seen)
    none = calibrate.noise_table(5, 1.0, 0.0, methods=("optimal",), mechanisms="gaussian")[-1]
    assert none.method == "gaussian-aware" and none.noise_std is None and none.mechanism is None
    assert (none.eps, none.delta) == (0.0, 0.0)  # only infinite noise fits, as a method certifying no eps
    for r in rows + [none]:  # a user's formatting of the budget columns works on every row
        assert isinstance(r.eps, float) and isinstance(r.delta, float) and not math.isnan(r.eps)
        assert f"{r.eps:.3g}" == ("inf" if r is gau else "0" if r is none else f"{float(r.eps):.3g}")
    with pytest.raises(ValueError, match=r"mechanisms\[1\]"):
        calibrate.noise_table(5, 1.0, 1e-6, mechanisms=("laplace", "cauchy"))


def test_discrete_gaussian_row_reports_its_true_standard_deviation():
    row = calibrate.noise_table(1, 2.0, 1e-3, methods=(), recipe=False, mechanisms=("discrete_gaussian",))[0]
    m = row.mechanism
    assert isinstance(m, DiscreteGaussian) and optcomp.epsilon_g(m, k=1, delta_g=1e-3) <= 2.0
    s2 = 2 * mp.mpf(m.sigma) ** 2
    zs = range(-int(40 * m.sigma) - 1, int(40 * m.sigma) + 2)
    var = mp.fsum(z * z * mp.e ** (-z * z / s2) for z in zs) / mp.fsum(mp.e ** (-z * z / s2) for z in zs)
    assert abs(row.noise_std - mp.sqrt(var)) <= 1e-12 * row.noise_std


# ------------------------------------------------------------------------------ the command line


def cli_rows(*args) -> tuple[list[dict], dict]:
    """``optcomp ARGS --json`` in this process: (rows, the whole record)."""
    import contextlib
    import io

    from optcomp import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*args, "--json"]) == 0
    data = json.loads(out.getvalue())
    return data["rows"], data


def cli_fails(args, match, capsys, stdin=None, monkeypatch=None) -> str:
    import io
    import sys

    from optcomp import cli

    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        status = cli.main(list(args))
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    assert status == 2 and out == "", (status, out)
    assert len(err.splitlines()) == 1 and err.startswith("optcomp") and "Traceback" not in err, err
    assert match in err, err
    return err


@pytest.mark.parametrize("m", ALL + [BlackBox(0.5, 1e-6), Staircase(0.5, 0.0)])
def test_every_mechanism_spec_reads_back(m):
    from optcomp import cli

    assert cli._parse_mechanism(cli._spec(m)) == (m, None)  # the command line reads what ledger writes


def test_cli_epsilon_of_mechanisms_is_the_library_value():
    rows, _ = cli_rows("epsilon", "--mechanism", "laplace:scale=2", "--delta-g", "1e-6")
    assert rows[0]["eps_g"] == optcomp.epsilon_g(Laplace(2.0), k=1, delta_g=1e-6)
    assert rows[0]["eps_g"] >= 0.5 + 2 * mp.log(1 - mp.mpf("1e-6"))  # one Laplace, closed form
    rows, _ = cli_rows("delta", "--eps", "0.1,0.3", "--count", "2,1", "--mechanism", "gaussian:sigma=4,count=3",
                       "--mechanism", "geometric:eps=0.2,sensitivity=2", "--eps-g", "1.5")
    want = optcomp.delta_g([0.1, 0.3, Gaussian(4.0), Geometric(0.2, 2)], counts=[2, 1, 3, 1], eps_g=1.5)
    assert rows[0]["delta_g"] == want
    # --k counts a lone --mechanism; --count one per --mechanism
    k, _ = cli_rows("epsilon", "--mechanism", "staircase:eps=0.3", "--k", "4", "--delta-g", "1e-6")
    c, _ = cli_rows("epsilon", "--mechanism", "staircase:eps=0.3", "--count", "4", "--delta-g", "1e-6")
    want = optcomp.epsilon_g(Staircase(0.3, 1 / (1 + math.exp(0.15))), k=4, delta_g=1e-6)
    assert k == c and k[0]["eps_g"] == want


def test_cli_files_with_a_mechanism_column_agree_with_inline(tmp_path):
    inline, _ = cli_rows("epsilon", "--eps", "0.1", "--k", "5", "--mechanism", "laplace:scale=10,count=20",
                         "--mechanism", "gaussian:sigma=5,sensitivity=2,count=3", "--delta-g", "1e-6")
    csv_file = tmp_path / "m.csv"
    csv_file.write_text('eps,delta,count,mechanism\n0.1,0,5,\n,,20,laplace:scale=10\n'
                        ',,3,"gaussian:sigma=5,sensitivity=2"\n')
    acc = Accountant().compose(0.1, count=5).compose(Laplace(10.0), count=20).compose(Gaussian(5.0, 2.0), count=3)
    json_file = tmp_path / "m.json"
    json_file.write_text(json.dumps(acc.to_dict()))
    for path in (csv_file, json_file):
        rows, data = cli_rows("epsilon", "--file", str(path), "--delta-g", "1e-6")
        assert rows == inline
    assert inline[0]["eps_g"] == acc.get_epsilon(1e-6)


def test_cli_split_calibrates_mechanisms_and_its_specs_read_back():
    rows, _ = cli_rows("split", "--eps-g", "1", "--delta-g", "1e-6", "--k", "20", "--method", "optimal",
                       "--mechanism", "gaussian,laplace")
    by = {r["method"]: r for r in rows}
    assert list(by) == ["optimal", "gaussian-aware", "laplace-aware"]
    assert by["laplace-aware"]["noise_vs_optimal"] <= 1.0 + 2e-4
    for name in ("gaussian-aware", "laplace-aware"):
        spec = by[name]["mechanism"]
        back, _ = cli_rows("epsilon", "--mechanism", spec, "--k", "20", "--delta-g", "1e-6")
        assert back[0]["eps_g"] <= 1.0  # the calibrated noise meets the budget
    sigma = float(by["gaussian-aware"]["mechanism"].split("sigma=")[1].split(",")[0])
    assert by["gaussian-aware"]["noise_std"] == sigma
    assert ref_gauss_delta(mp.sqrt(20) / mp.mpf(sigma), 1) <= mp.mpf("1e-6")  # certified, closed form


def test_cli_compare_and_curve_with_mechanisms():
    rows, data = cli_rows("compare", "--mechanism", "laplace:scale=2,count=2", "--delta-g", "1e-6")
    by = {r["method"]: r for r in rows}
    assert by["kov"]["eps_g"] is None and "pairs only" in by["kov"]["note"]
    assert by["optimal"]["eps_g"] is None and by["approx"]["eps_g"] == optcomp.epsilon_bounds(
        Laplace(2.0), k=2, delta_g=1e-6).upper
    rows, _ = cli_rows("curve", "--mechanism", "gaussian:sigma=2", "--k", "4", "--eps-g", "0,1,2")
    for r in rows:
        ref = ref_gauss_delta(1, r["eps_g"])
        assert ref <= r["delta"] <= ref * (1 + 1e-9)
    rows, data = cli_rows("epsilon", "--mechanism", "gaussian:sigma=1", "--delta-g", "0")
    assert rows[0]["eps_g"] == "inf" and "Gaussian noise, needs delta_g > 0" in data["notes"][0]


@pytest.mark.parametrize("args, match", [
    (("--mechanism", "laplace:scale=-1"), "argument --mechanism: 'laplace:scale=-1': scale must be finite and > 0"),
    (("--mechanism", "lap:scale=1"), "unknown mechanism 'lap'"),
    (("--mechanism", "laplace:scal=1"), "unknown key 'scal' for laplace"),
    (("--mechanism", "laplace"), "laplace needs scale=..."),
    (("--mechanism", "laplace:scale"), "expected KEY=VALUE"),
    (("--mechanism", "laplace:scale=1,scale=2"), "scale given twice"),
    (("--mechanism", "laplace:scale=x"), "scale: expected a number"),
    (("--mechanism", "laplace:scale=1,count=0"), "count: expected an integer"),
    (("--mechanism", "geometric:eps=1,sensitivity=1.5"), "sensitivity must be an integer"),
    (("--mechanism", "pair:p=0.5/0.5,q=1"), "q must have the length of p"),
    (("--mechanism", "profile:eps=1/2,delta=0"), "delta has 1 values but eps has 2"),
    (("--mechanism", "laplace:scale=1", "--mechanism", "gaussian:sigma=1", "--k", "3"), "--k goes with a single"),
    (("--mechanism", "laplace:scale=1", "--count", "2,3"), "--count has 2 items but --mechanism is given 1"),
    (("--mechanism", "laplace:scale=1,count=2", "--k", "3"), "count given twice"),
    (("--mechanism", "laplace:scale=1", "--delta", "0.1"), "--delta goes with --eps"),
    (("--mechanism", "laplace:scale=1", "--file", "m.csv"), "not both"),
    (("--mechanism", "laplace:scale=1", "--method", "kov"), "'kov' composes (eps, delta) pairs only"),
])
def test_cli_bad_mechanisms_are_one_line_and_exit_2(args, match, capsys):
    cli_fails(("epsilon", *args, "--delta-g", "1e-6"), match, capsys)


@pytest.mark.parametrize("text, match", [
    ("eps,mechanism\n0.1,laplace:scale=1\n", "line 2: give eps or a mechanism, not both"),
    ('mechanism,count\n"laplace:scale=1,count=2",3\n', "line 2: count given twice"),
    ("mechanism\nlaplace:scale=0\n", "line 2, mechanism 'laplace:scale=0': scale must be finite and > 0"),
    ("count,mechanism\n2,\n", "line 2: empty mechanism"),
    ('[{"mechanism": "laplace", "scale": 1}]', "mechanism must name a class of optcomp.mechanisms"),
    ('[{"mechanism": "Laplace", "scale": 1, "eps": 1}]', "unknown field 'eps' for Laplace"),
])
def test_cli_bad_mechanism_files_are_one_line_and_exit_2(text, match, capsys, monkeypatch):
    cli_fails(("epsilon", "--file", "-", "--delta-g", "1e-6"), match, capsys, stdin=text, monkeypatch=monkeypatch)


def test_cli_split_mechanism_errors(capsys):
    base = ("split", "--eps-g", "1", "--delta-g", "1e-6")
    cli_fails((*base, "--k", "5", "--mechanism", "laplace:scale=1"), "split takes mechanism names only", capsys)
    cli_fails((*base, "--k", "5", "--mechanism", "cauchy"), "unknown mechanism 'cauchy'", capsys)
    cli_fails((*base, "--weights", "1,2", "--mechanism", "laplace"), "--mechanism goes with --k", capsys)
