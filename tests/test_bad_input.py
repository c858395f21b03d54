"""Bad input in every public function: ValueError or TypeError naming the parameter (issue 7).

Covered: ``optcomp.epsilon_g``, ``delta_g``, ``epsilon_bounds``, ``delta_bounds``, every function
of ``optcomp.calibrate`` and ``optcomp.region``, and the command line (exit status 2, exactly
one line on stderr, no traceback, no RuntimeWarning).  Also: calibration never answers a
finite budget with infinite or zero noise.

A "bad value" is one outside the documented domain: bool (a bool is not a number here),
complex, strings, None, nested or ragged sequences, NaN, inf, negative, k non-integral or
above 10^12, counts non-integral / negative / zero / bool.
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import optcomp
from optcomp import calibrate, region

NAN, INF = float("nan"), float("inf")


# huge k / counts must fail fast or stay O(#groups): an O(k) allocation is a MemoryError
pytestmark = pytest.mark.usefixtures("address_space_cap")


def raises_naming(name, fn, *args, **kwargs):
    """fn(*args, **kwargs) must raise ValueError/TypeError whose message names ``name``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            fn(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            msg = str(exc)
            assert re.search(rf"\b{re.escape(name)}\b", msg), f"{fn.__name__}: message does not name {name!r}: {type(exc).__name__}: {msg}"
            return
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{fn.__name__}(*{args!r}, **{kwargs!r}) raised {type(exc).__name__}: {exc} (want ValueError naming {name!r})")
    pytest.fail(f"{fn.__name__}(*{args!r}, **{kwargs!r}) accepted bad {name}")


# ----------------------------------------------------------------------------- value catalogues

BAD_EPS = [True, 1 + 2j, "0.1", None, NAN, INF, -0.1, [[0.1, 0.2]], [0.1, [0.2, 0.3]], [0.1, True],
           [0.1, "x"], [0.1, NAN], [0.1, -1.0], [0.1, 1 + 1j], [], {"a": 1}]
BAD_DELTA = [True, 1 + 2j, "0", None, NAN, INF, -0.1, 1.0, 1.5, [[0.0, 0.0]], [0.0, [0.0]], [0.0, True]]
BAD_K = [True, 2.5, "3", NAN, INF, -1, 0, 1e300, 10**12 + 1, 10**13, 1 + 0j, [3]]
BAD_COUNTS = [[True, 1], [1.5, 2], [0, 1], [-1, 2], "12", [[1, 2]], [1], [NAN, 1], [1, 10**13], [1, "2"], 3]
BAD_DELTA_G = [True, "0.1", None, NAN, INF, -0.1, 1.0, 1.5, 1 + 0j, [0.1]]
BAD_EPS_G = [True, "1", None, NAN, INF, -1.0, 1j, [1.0]]


def _ids(values):
    return [repr(v)[:30] for v in values]


# ----------------------------------------------------------------------------- the four entry points

ENTRY = {
    "epsilon_g": lambda **kw: optcomp.epsilon_g(**{"delta_g": 1e-6, **kw}),
    "delta_g": lambda **kw: optcomp.delta_g(**{"eps_g": 1.0, **kw}),
    "epsilon_bounds": lambda **kw: optcomp.epsilon_bounds(**{"delta_g": 1e-6, **kw}),
    "delta_bounds": lambda **kw: optcomp.delta_bounds(**{"eps_g": 1.0, **kw}),
}


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize("value", BAD_EPS, ids=_ids(BAD_EPS))
def test_bad_eps(entry, value):
    kw = {"k": 3} if not isinstance(value, list) else {}
    raises_naming("eps", ENTRY[entry], eps=value, **kw)


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize("value", BAD_DELTA, ids=_ids(BAD_DELTA))
def test_bad_delta(entry, value):
    eps = [0.1, 0.2] if isinstance(value, list) else 0.1
    kw = {} if isinstance(value, list) else {"k": 3}
    raises_naming("delta", ENTRY[entry], eps=eps, delta=value, **kw)


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize("value", BAD_K, ids=_ids(BAD_K))
def test_bad_k(entry, value):
    raises_naming("k", ENTRY[entry], eps=0.1, k=value)


@pytest.mark.parametrize("entry", list(ENTRY))
def test_missing_k(entry):
    raises_naming("k", ENTRY[entry], eps=0.1)


@pytest.mark.parametrize("entry", list(ENTRY))
@pytest.mark.parametrize("value", BAD_COUNTS, ids=_ids(BAD_COUNTS))
def test_bad_counts(entry, value):
    raises_naming("counts", ENTRY[entry], eps=[0.1, 0.2], counts=value)


@pytest.mark.parametrize("entry", ["epsilon_g", "epsilon_bounds"])
@pytest.mark.parametrize("value", BAD_DELTA_G, ids=_ids(BAD_DELTA_G))
def test_bad_delta_g(entry, value):
    raises_naming("delta_g", ENTRY[entry], eps=0.1, k=3, delta_g=value)


@pytest.mark.parametrize("entry", ["delta_g", "delta_bounds"])
@pytest.mark.parametrize("value", BAD_EPS_G, ids=_ids(BAD_EPS_G))
def test_bad_eps_g(entry, value):
    raises_naming("eps_g", ENTRY[entry], eps=0.1, k=3, eps_g=value)


@pytest.mark.parametrize("value", [3, None, "bogus", True, ["optimal"]], ids=_ids([3, None, "bogus", True, ["optimal"]]))
def test_bad_method(value):
    raises_naming("method", optcomp.epsilon_g, 0.1, k=3, delta_g=1e-6, method=value)
    raises_naming("method", optcomp.delta_g, 0.1, k=3, eps_g=1.0, method=value)


@pytest.mark.parametrize("name,value", [("eta", True), ("eta", NAN), ("eta", 0.0), ("eta", 1.5), ("eta", "0.1"),
                                        ("tol", NAN), ("tol", -1.0), ("tol", True), ("max_points", True),
                                        ("max_points", 2.5), ("max_points", -3)])
def test_bad_bounds_options(name, value):
    raises_naming(name, optcomp.epsilon_bounds, 0.1, k=3, delta_g=1e-6, **{name: value})
    raises_naming(name, optcomp.delta_bounds, 0.1, k=3, eps_g=1.0, **{name: value})


# ----------------------------------------------------------------------------- calibrate

CAL = {
    "per_query_epsilon": lambda **kw: calibrate.per_query_epsilon(**{"k": 10, "eps_g": 1.0, "delta_g": 1e-6, **kw}),
    "laplace_scale": lambda **kw: calibrate.laplace_scale(**{"k": 10, "eps_g": 1.0, "delta_g": 1e-6, **kw}),
    "split_budget": lambda **kw: calibrate.split_budget(**{"weights": [1.0, 2.0], "eps_g": 1.0, "delta_g": 1e-6, **kw}),
}


@pytest.mark.parametrize("fn", ["per_query_epsilon", "laplace_scale"])
@pytest.mark.parametrize("value", BAD_K, ids=_ids(BAD_K))
def test_calibrate_bad_k(fn, value):
    raises_naming("k", CAL[fn], k=value)


@pytest.mark.parametrize("fn", list(CAL))
@pytest.mark.parametrize("value", BAD_EPS_G, ids=_ids(BAD_EPS_G))
def test_calibrate_bad_eps_g(fn, value):
    raises_naming("eps_g", CAL[fn], eps_g=value)


@pytest.mark.parametrize("fn", list(CAL))
@pytest.mark.parametrize("value", BAD_DELTA_G, ids=_ids(BAD_DELTA_G))
def test_calibrate_bad_delta_g(fn, value):
    raises_naming("delta_g", CAL[fn], delta_g=value)


@pytest.mark.parametrize("fn", ["per_query_epsilon", "split_budget"])
@pytest.mark.parametrize("value", [True, "x", None, NAN, INF, -0.1, 1.0, 1 + 1j], ids=_ids([True, "x", None, NAN, INF, -0.1, 1.0, 1 + 1j]))
def test_calibrate_bad_delta(fn, value):
    raises_naming("delta", CAL[fn], delta=value)


BAD_WEIGHTS = ["ab", None, [], [[1.0, 2.0]], [1.0, [2.0]], [1.0, -1.0], [1.0, 0.0], [1.0, NAN], [1.0, INF],
               [True, 1.0], [1.0, "a"], 1 + 1j, True]


@pytest.mark.parametrize("value", BAD_WEIGHTS, ids=_ids(BAD_WEIGHTS))
def test_split_budget_bad_weights(value):
    raises_naming("weights", CAL["split_budget"], weights=value)


@pytest.mark.parametrize("value", [True, "1", None, NAN, INF, 0.0, -1.0, 1j, [1.0]], ids=_ids([True, "1", None, NAN, INF, 0.0, -1.0, 1j, [1.0]]))
def test_laplace_bad_sensitivity(value):
    raises_naming("sensitivity", CAL["laplace_scale"], sensitivity=value)


@pytest.mark.parametrize("fn", ["per_query_epsilon", "split_budget"])  # laplace_scale has no rtol
@pytest.mark.parametrize("value", [NAN, -1.0, True, "x"], ids=_ids([NAN, -1.0, True, "x"]))
def test_calibrate_bad_rtol(fn, value):
    raises_naming("rtol", CAL[fn], rtol=value)


@pytest.mark.parametrize("fn", list(CAL))
def test_calibrate_bad_method(fn):
    raises_naming("method", CAL[fn], method="bogus")


@pytest.mark.parametrize("value", [True, "1", None, NAN, INF, 0.0, -1.0], ids=_ids([True, "1", None, NAN, INF, 0.0, -1.0]))
def test_largest_passing_bad_start(value):
    raises_naming("start", calibrate.largest_passing, lambda x: x < 1.0, value)


def test_largest_passing_bad_passes():
    raises_naming("passes", calibrate.largest_passing, 3, 1.0)


@pytest.mark.parametrize("value", [NAN, -1.0, True, "x"], ids=_ids([NAN, -1.0, True, "x"]))
def test_largest_passing_bad_rtol(value):
    raises_naming("rtol", calibrate.largest_passing, lambda x: x < 1.0, 1.0, rtol=value)


# calibration on finite budgets: never inf or zero noise
FINITE_BUDGETS = [(1, 1e308, 1e-6), (1, 1e300, 1e-300), (10, 1e308, 0.5), (1, 1e-300, 1e-6), (1000, 700.0, 1e-12),
                  (10**4, 1.0, 1e-6)]


@pytest.mark.parametrize("method", ["optimal", "kov", "basic"])
@pytest.mark.parametrize("k,eps_g,delta_g", FINITE_BUDGETS)
def test_calibration_finite_budget_finite_noise(method, k, eps_g, delta_g):
    """A finite budget eps_g > 0 (pure-DP queries, so delta never blocks) buys a finite,
    positive per-query eps and a finite, positive Laplace scale; and it is certified."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eps = calibrate.per_query_epsilon(k, eps_g, delta_g, method=method)
        assert math.isfinite(eps) and eps > 0, f"per_query_epsilon({k}, {eps_g}, {delta_g}, method={method!r}) = {eps!r}"
        assert optcomp.epsilon_g(eps, k=k, delta_g=delta_g, method=method) <= eps_g
        b = calibrate.laplace_scale(k, eps_g, delta_g, method=method)
        assert math.isfinite(b) and b > 0, f"laplace_scale({k}, {eps_g}, {delta_g}, method={method!r}) = {b!r}"
        w = calibrate.split_budget([1.0, 3.0], eps_g, delta_g, method=method)
        assert np.all(np.isfinite(w)) and np.all(w > 0), f"split_budget([1, 3], {eps_g}, {delta_g}) = {w!r}"


def test_calibration_issue7_row():
    """issue 7: per_query_epsilon(1, 1e308, 1e-6) returned inf, laplace_scale 0.0."""
    eps = calibrate.per_query_epsilon(1, 1e308, 1e-6)
    assert math.isfinite(eps) and eps > 0, eps
    assert calibrate.laplace_scale(1, 1e308, 1e-6) > 0


# ----------------------------------------------------------------------------- region

ALPHA_BAD = [NAN, -0.1, 1.5, "0.5", None, True, 1j, [[0.1], [0.2, 0.3]]]


@pytest.mark.parametrize("fn", [region.tradeoff, region.upper_boundary])
@pytest.mark.parametrize("value", ALPHA_BAD, ids=_ids(ALPHA_BAD))
def test_region_bad_alpha(fn, value):
    raises_naming("alpha", fn, value, 0.5, 0.0)


def test_rr_tradeoff_bad_alpha():
    for value in ALPHA_BAD:
        raises_naming("alpha", region.randomized_response_tradeoff, value, 0.5, 0.0, k=2)


# in tradeoff/upper_boundary/contains/boundary_alphas eps = +inf is documented as valid (a vacuous constraint)
REGION_EPS_BAD = [NAN, -0.1, "0.5", None, True, 1j, [[0.1, 0.2]], [0.1, [0.2]], [0.1, True]]
REGION_DELTA_BAD = [NAN, -0.1, 1.5, "0", None, True, 1j, [[0.0, 0.0]]]


def _k(eps):
    return None if isinstance(eps, list) else 3


def _region_calls():
    """(name, callable taking eps=, delta=) for every region function (k=3 for a scalar eps)."""
    return {
        "tradeoff": lambda eps, delta=0.0: region.tradeoff([0.1, 0.5], eps, delta),
        "upper_boundary": lambda eps, delta=0.0: region.upper_boundary([0.1, 0.5], eps, delta),
        "contains": lambda eps, delta=0.0: region.contains(0.1, 0.5, eps, delta),
        "boundary_alphas": lambda eps, delta=0.0: region.boundary_alphas(eps, delta),
        "optimal_family": lambda eps, delta=0.0: region.optimal_family(eps, delta, k=3),
        "basic_family": lambda eps, delta=0.0: region.basic_family(eps, delta, k=_k(eps)),
        "drv_family": lambda eps, delta=0.0: region.drv_family(eps, delta, k=_k(eps), num=5),
        "family_from_eps_grid": lambda eps, delta=0.0: region.family_from_eps_grid(eps, delta, k=_k(eps), num=5),
        "composition_family": lambda eps, delta=0.0: region.composition_family("kov", eps, delta, k=_k(eps), num=5),
        "randomized_response_tradeoff": lambda eps, delta=0.0: region.randomized_response_tradeoff([0.1], eps, delta, k=_k(eps)),
    }


@pytest.mark.parametrize(
    "fn,value",
    [(fn, v) for fn in _region_calls() for v in REGION_EPS_BAD
     if not (fn == "optimal_family" and isinstance(v, list))],  # a scalar eps there: see below
    ids=[f"{fn}-{repr(v)[:20]}" for fn in _region_calls() for v in REGION_EPS_BAD
         if not (fn == "optimal_family" and isinstance(v, list))],
)
def test_region_bad_eps(fn, value):
    raises_naming("eps", _region_calls()[fn], value)


@pytest.mark.parametrize("fn", ["optimal_family", "basic_family", "drv_family", "family_from_eps_grid",
                                "composition_family", "randomized_response_tradeoff"])
def test_region_composition_eps_inf(fn):
    """For the composition families eps is a mechanism's eps: +inf is not a valid input."""
    raises_naming("eps", _region_calls()[fn], INF)


def test_optimal_family_rejects_a_list():
    raises_naming("eps", region.optimal_family, [0.1, 0.2], 0.0, k=2)


@pytest.mark.parametrize("fn", list(_region_calls()))
@pytest.mark.parametrize("value", REGION_DELTA_BAD, ids=_ids(REGION_DELTA_BAD))
def test_region_bad_delta(fn, value):
    raises_naming("delta", _region_calls()[fn], 0.5, value)


@pytest.mark.parametrize("fn", ["optimal_family", "basic_family", "drv_family", "family_from_eps_grid", "composition_family"])
@pytest.mark.parametrize("value", [True, 2.5, "3", NAN, 0, -1, 1e300, 10**13], ids=_ids([True, 2.5, "3", NAN, 0, -1, 1e300, 10**13]))
def test_region_bad_k(fn, value):
    calls = {
        "optimal_family": lambda: region.optimal_family(0.1, 0.0, k=value),
        "basic_family": lambda: region.basic_family(0.1, 0.0, k=value),
        "drv_family": lambda: region.drv_family(0.1, 0.0, k=value, num=5),
        "family_from_eps_grid": lambda: region.family_from_eps_grid(0.1, 0.0, k=value, num=5),
        "composition_family": lambda: region.composition_family("kov", 0.1, 0.0, k=value, num=5),
    }
    raises_naming("k", calls[fn])


@pytest.mark.parametrize("value", [True, 1.5, "5", NAN, 0, -3], ids=_ids([True, 1.5, "5", NAN, 0, -3]))
def test_region_bad_num(value):
    raises_naming("num", region.boundary_alphas, 0.5, 0.0, num=value)
    raises_naming("num", region.drv_family, 0.1, 0.0, k=3, num=value)
    raises_naming("num", region.family_from_eps_grid, 0.1, 0.0, k=3, num=value)


def test_boundary_alphas_needs_two_points():
    raises_naming("num", region.boundary_alphas, 0.5, 0.0, num=1)


@pytest.mark.parametrize("fn", ["optimal_family", "basic_family", "drv_family", "family_from_eps_grid",
                                "composition_family", "randomized_response_tradeoff"])
def test_region_composition_delta_one(fn):
    """A mechanism's delta must be < 1 (as in optcomp.epsilon_g)."""
    raises_naming("delta", _region_calls()[fn], 0.5, 1.0)


@pytest.mark.parametrize("value", [NAN, -0.1, True, "0"], ids=_ids([NAN, -0.1, True, "0"]))
def test_region_contains_bad_tol(value):
    raises_naming("tol", region.contains, 0.1, 0.5, 0.5, 0.0, tol=value)


@pytest.mark.parametrize("name", ["p_fa", "p_md"])
@pytest.mark.parametrize("value", [NAN, "0.1", None, True, 1j], ids=_ids([NAN, "0.1", None, True, 1j]))
def test_region_contains_bad_point(name, value):
    kw = {"p_fa": 0.1, "p_md": 0.5, name: value}
    raises_naming(name, region.contains, kw["p_fa"], kw["p_md"], 0.5, 0.0)


def test_region_family_bad_eps_g_and_method():
    raises_naming("eps_g", region.family_from_eps_grid, 0.1, 0.0, k=3, eps_g=[0.1, NAN])
    raises_naming("eps_g", region.family_from_eps_grid, 0.1, 0.0, k=3, eps_g=[0.1, -1.0])
    raises_naming("eps_g", region.family_from_eps_grid, 0.1, 0.0, k=3, eps_g="ab")
    raises_naming("method", region.family_from_eps_grid, 0.1, 0.0, k=3, method="bogus")
    raises_naming("method", region.composition_family, "bogus", 0.1, 0.0, k=3)


# ----------------------------------------------------------------------------- the command line

CLI_CASES = [  # (argv, the parameter the one-line message must name; None: argparse usage error)
    (["epsilon", "--eps", "abc", "--k", "3", "--delta-g", "1e-6"], "eps"),
    (["epsilon", "--eps", "0.1", "--k", "2.5", "--delta-g", "1e-6"], "k"),
    (["epsilon", "--eps", "0.1", "--k", "1e300", "--delta-g", "1e-6"], "k"),
    (["epsilon", "--eps", "0.1", "--k", "1e13", "--delta-g", "1e-6"], "k"),
    (["epsilon", "--eps", "0.1", "--k", "nan", "--delta-g", "1e-6"], "k"),
    (["epsilon", "--eps", "nan", "--k", "3", "--delta-g", "1e-6"], "eps"),
    (["epsilon", "--eps", "inf", "--k", "3", "--delta-g", "1e-6"], "eps"),
    (["epsilon", "--eps", "0.1", "--delta-g", "1e-6"], "k"),
    (["epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "1.5"], "delta_g"),
    (["epsilon", "--eps", "0.1", "--k", "3", "--delta", "1", "--delta-g", "1e-6"], "delta"),
    (["epsilon", "--eps", "0.1,0.2", "--delta", "0.1,0.2,0.3", "--delta-g", "1e-6"], "delta"),
    (["epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "1e-6", "--method", "bogus"], "method"),
    (["epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "1e-6", "--method", "approx", "--eta", "0"], "eta"),
    (["epsilon", "--eps", "0.1", "--k", "3"], "delta_g"),
    (["delta", "--eps", "0.1", "--k", "3", "--eps-g", "inf"], "eps_g"),
    (["delta", "--eps", "0.1", "--k", "3", "--eps-g", "nan"], "eps_g"),
    (["delta", "--eps", "1e309", "--k", "3", "--eps-g", "1"], "eps"),
    (["epsilon", "--eps", "0.1", "--k", "3", "--delta-g", "-1e-6"], "delta_g"),  # issue 16, item 10
    (["curve", "--eps", "0.1", "--k", "3", "--num", "1"], "num"),
    (["bogus"], None),
]
CLI_BAD = [argv for argv, _name in CLI_CASES]


# the process boundary (``python -m optcomp``: exit status, stderr, PYTHONWARNINGS=default) for
# one case of each kind: argparse's own error, a bad number the library names, a bad range; every
# case also runs in process below (the same checks, warnings recorded rather than read off stderr)
CLI_SUBPROCESS = [CLI_BAD[0], CLI_BAD[2], CLI_BAD[-1]]


def _check_cli_failure(code, out, err, name):
    lines = err.splitlines()
    assert "Traceback" not in err, f"traceback: {err[-300:]}"
    assert "Warning" not in err, f"warning on stderr: {err}"
    assert code == 2, f"exit status {code}, stdout {out!r}, stderr {err[-300:]!r}"
    assert len(lines) == 1, f"want exactly one line on stderr, got {len(lines)}: {err[-300:]!r}"
    assert out == "", f"printed {out!r} on bad input"
    if name is not None:  # the library's message or argparse's, naming the parameter or its option
        pattern = r"(?<![\w-])(--)?" + re.escape(name).replace("_", "[_-]") + r"(?![\w-])"
        assert re.search(pattern, lines[0]), f"the message does not name {name!r}: {lines[0]!r}"


@pytest.mark.parametrize("argv,name", CLI_CASES, ids=[" ".join(a)[:60] for a, _ in CLI_CASES])
def test_cli_bad_input(argv, name, capsys):
    """``cli.main`` in this process: status 2 (returned, or argparse's SystemExit), one line on
    stderr naming the parameter, nothing on stdout, and no warning at all (every warning
    recorded, none ignored: stronger than PYTHONWARNINGS=default's stderr)."""
    from optcomp import cli

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code
    out, err = capsys.readouterr()
    assert not caught, [str(w.message) for w in caught]
    _check_cli_failure(code, out, err, name)


def test_cli_bad_input_through_a_subprocess():
    """A few of the cases above end to end, each in its own process, side by side."""
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "default"  # a RuntimeWarning would show on stderr
    names = dict((tuple(a), n) for a, n in CLI_CASES)
    procs = [(a, subprocess.Popen([sys.executable, "-m", "optcomp", *a], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)) for a in CLI_SUBPROCESS]
    for argv, p in procs:
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        _check_cli_failure(p.returncode, out, err, names[tuple(argv)])


# ----------------------------------------------------------------------------- no warnings, no NaN (issue 16, item 12)


def test_region_lines_with_overflowing_slope_no_warning_no_nan():
    """eps_g > 709: e^eps_g overflows; the line 1 - delta - e^eps alpha is vertical at alpha = 0
    (beta(0) = 1 - delta, not inf * 0 = NaN), and no RuntimeWarning reaches the user."""
    alpha = np.array([0.0, 1e-300, 0.5, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        beta = region.tradeoff(alpha, [1000.0, 1.0], [0.0, 0.1])
        upper = region.upper_boundary(alpha, [1000.0, 1.0], [0.0, 0.1])
        kinks = region.boundary_alphas([1000.0], [0.0], num=3)
    assert beta[0] == 1.0 and beta[1] == 0.9 and beta[3] == 0.0
    assert upper[3] == 0.0 and not np.isnan(upper).any()
    assert kinks.tolist() == [0.0, 0.5, 1.0]
    # the finite case is unchanged: the max of the four lines of KOV's region
    want = max(0.0, 0.9 - math.exp(1.0) * 0.5, math.exp(-1.0) * (0.9 - 0.5))
    assert region.tradeoff(np.array([0.5]), 1.0, 0.1)[0] == want


# ----------------------------------------------------------------------------- the workflow config (issue 16, item 10)


def _config(**overrides):
    import copy

    import yaml
    from snakemake.utils import update_config

    root = pathlib.Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config" / "test.yaml").read_text())
    update_config(cfg, copy.deepcopy(overrides))
    return cfg, root / "config" / "schema.yaml"


@pytest.mark.parametrize("overrides, want", [
    ({"homogeneous": {"ratio_kk": [10]}}, "config homogeneous.ratio_kk: unknown key (did you mean homogeneous.ratio_k?)"),
    ({"regoins": {}}, "config regoins: unknown key (did you mean regions?)"),
    ({"homogeneous": {"zzz": 1}}, "config homogeneous.zzz: unknown key (valid keys here: "),
    ({"homogeneous": {"k_max": 50, "ratio_k": [10, 100]}}, "config homogeneous.ratio_k: [100] exceed homogeneous.k_max = 50"),
    ({"regions": {"kov_figure2": {"delta": [0.0, 1.5]}}}, "config regions.kov_figure2.delta[1]: 1.5 is greater than"),
    ({"notebooks": {"timeout_seconds": "long"}}, "config notebooks.timeout_seconds: 'long' is not of type 'integer'"),
])
def test_config_problem_is_one_line_naming_the_key(overrides, want):
    from optcomp.pipeline import config_problem

    cfg, schema = _config(**overrides)
    problem = config_problem(cfg, schema)
    assert problem is not None and problem.startswith(want), problem
    assert "\n" not in problem and len(problem) < 300


def test_valid_config_gets_its_defaults():
    from optcomp.pipeline import config_problem

    cfg, schema = _config()
    assert config_problem(cfg, schema) is None
    assert cfg["homogeneous"]["by_eps"]["delta_g_log2"] == -25  # filled from the schema


def test_snakemake_with_a_config_typo_prints_one_line(tmp_path):
    """The Snakefile stops at validation with one line (not the schema and config dumped)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    shutil.copy(root / "Snakefile", tmp_path / "Snakefile")
    shutil.copytree(root / "config", tmp_path / "config")
    (tmp_path / "typo.yaml").write_text("homogeneous:\n  ratio_kk: [10]\n")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile", "config/test.yaml",
                           "typo.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "ratio_k" in line or "Error" in line
              or line.startswith(("  ", "error"))]
    assert errors == ["error: config homogeneous.ratio_kk: unknown key (did you mean homogeneous.ratio_k?)"], proc.stderr


def test_huge_valid_inputs_print_no_warning():
    """Issue 16, item 12: valid input near the float limits gives an honest answer and no
    RuntimeWarning (formerly 24 overflow warnings from the lattice, then an error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = optcomp.epsilon_bounds(1e308, k=2, delta_g=1e-6)
        assert b.upper == math.inf and b.lower <= b.upper  # 2e308 is not a float: inf is the honest upper end
        d = optcomp.delta_bounds(1e308, k=2, eps_g=1.0)
        assert 0.0 <= d.lower <= d.upper <= 1.0
        curve = optcomp.privacy_curve(0.1, k=100, eps_g=[1.0, 800.0, 1e300], method="approx", num_alpha=5)
        assert not np.isnan(curve.beta).any() and not np.isnan(curve.beta_upper).any()
