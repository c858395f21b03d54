"""The memory budget (:mod:`optcomp._memory`, README "Memory"): every call of ``optimal``,
``approx`` and ``auto`` estimates its large arrays before allocating them and raises the size
limit -- ``ExactTooLarge`` / ``ApproxTooCostly`` with the best certified bracket -- instead of
``MemoryError`` or growing past ``max_memory``.

The end-to-end tests run in a subprocess whose address space is capped with
``resource.setrlimit(RLIMIT_AS)`` *before* NumPy and SciPy are imported (they take ~280 MB of
address space and ~60 MB resident here), and measure the resident peak the call adds
(``VmHWM``) against the budget plus the allocator's slack (arrays below glibc's adaptive mmap
threshold stay with the process when freed: measured 25-35 MB at 32-64 MiB budgets)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import optcomp
from optcomp import _memory
from optcomp.mechanisms import RandomizedResponse

SRC = str(Path(__file__).resolve().parents[1] / "src")
MiB = 2**20
SLACK = 150 * MiB  # untracked memory allowed beside the budget (README "Memory")
LINUX = sys.platform.startswith("linux")


def _capped(statement: str, address_space: int, timeout: float = 600.0) -> dict:
    """Run ``statement`` (an expression) in a fresh interpreter whose address space is capped
    at ``address_space`` bytes; returns {"bounds" | "value", "error", "message", "peak"}:
    ``peak`` the resident memory the call added (VmHWM after - before)."""
    code = textwrap.dedent(f"""
        import json, resource
        resource.setrlimit(resource.RLIMIT_AS, ({address_space}, resource.getrlimit(resource.RLIMIT_AS)[1]))
        import numpy as np, scipy.fft, scipy.special
        import optcomp
        from optcomp.mechanisms import Laplace, RandomizedResponse, Pair, Profile

        def hwm():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM"):
                    return int(line.split()[1]) * 1024

        base = hwm()
        out = {{}}
        try:
            r = {statement}
            out["value"] = list(r) if isinstance(r, tuple) else r
        except (optcomp.ApproxTooCostly, optcomp.ExactTooLarge) as exc:
            out["error"] = type(exc).__name__
            out["message"] = str(exc)
            b = getattr(exc, "bounds", None)
            out["value"] = None if b is None else list(b)
        out["peak"] = hwm() - base
        print(json.dumps(out))
    """)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a MemoryError or std::bad_alloc ends here
    return json.loads(proc.stdout.strip().splitlines()[-1])


# the input that reached 22 GB: 10^6 copies of a 3-valued randomized response at eps_g = 0.
# Its optimal delta is 1 - (Q-mass of L > 0 + P-mass of L <= 0), both below e^-1000: 1.0 in
# float64 (the loss has mean 10^6 * 0.5 (e^0.5 - 1)/(e^0.5 + 2) ~ 88,900 and sd ~ 430).
FORMER_22GB = "optcomp.delta_bounds([RandomizedResponse(0.5, values=3)], counts=[10**6], eps_g=0.0, tol=1e-3{})"


@pytest.mark.skipif(not LINUX, reason="address-space limits and /proc measured on Linux")
@pytest.mark.parametrize("budget", [32 * MiB, pytest.param(64 * MiB, marks=pytest.mark.slow)])  # the tighter budget by default
def test_former_22_gb_input_answers_within_a_small_budget(budget):
    """Under a 2 GiB address-space limit with a small budget: a certified bracket of the
    optimum 1.0 within tol (the lattice's pass is refused by the budget; the exact
    multinomial rows of the finite law answer within it), never MemoryError, and the
    resident peak within the budget plus the slack."""
    out = _capped(FORMER_22GB.format(f", max_memory={budget}"), 2 * 2**30)
    assert "error" not in out, out
    lower, upper = out["value"]
    assert 1.0 - 1e-3 <= lower <= 1.0 and upper == 1.0, out
    assert out["peak"] <= budget + SLACK, out


# a continuous law (no exact path): 10^6 Laplace mechanisms of eps 2 at eps_g = 0, whose
# optimal delta is the total variation of the 10^6-fold product laws: 1.0 in float64 (the
# loss has mean 10^6 (2 - 1 + e^-2) and sd ~ 10^3)
LAPLACE_1E6 = "optcomp.delta_bounds([Laplace(0.5)], counts=[10**6], eps_g=0.0, tol=1e-3, max_memory={})"


@pytest.mark.skipif(not LINUX, reason="address-space limits and /proc measured on Linux")
@pytest.mark.parametrize("budget", [32 * MiB, pytest.param(64 * MiB, marks=pytest.mark.slow)])  # the tighter budget by default
def test_a_pass_past_the_budget_gets_the_size_limit_with_its_bracket(budget):
    """Under a 2 GiB address-space limit with a small budget: ApproxTooCostly naming
    max_memory and carrying a certified bracket (the optimum 1.0 inside it), never
    MemoryError, and the resident peak within the budget plus the slack."""
    out = _capped(LAPLACE_1E6.format(budget), 2 * 2**30)
    assert out.get("error") == "ApproxTooCostly", out
    assert "max_memory" in out["message"], out
    lower, upper = out["value"]
    assert lower <= 1.0 and upper == 1.0, out
    assert out["peak"] <= budget + SLACK, out


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="address-space limits and /proc measured on Linux")
def test_former_22_gb_input_at_default_settings_within_2_gib():
    """At default settings (max_memory 1.5 GiB) under a 2 GiB address-space limit: a
    certified bracket of the optimum 1.0 -- answered or carried by the size limit -- within
    the default budget plus the slack (~3 minutes on 2 cores: long-double passes)."""
    out = _capped(FORMER_22GB.format(""), 2 * 2**30, timeout=1800.0)
    lower, upper = out["value"]
    assert lower <= 1.0 and upper == 1.0, out
    assert out["peak"] <= _memory.MAX_MEMORY + SLACK, out


@pytest.mark.skipif(not LINUX, reason="address-space limits and /proc measured on Linux")
@pytest.mark.parametrize("statement,error", [
    # the lattice: 4000 distinct eps at a fine tolerance (a lattice of ~10^6 points per pass)
    ("optcomp.epsilon_bounds(np.random.default_rng(1).uniform(0.05, 0.2, 4000), delta_g=1e-6, tol=1e-6, "
     "max_memory=64 * 2**20)", "ApproxTooCostly"),
    # meet in the middle: 44 distinct real eps (two halves of 2^22 atoms, ~700 MB)
    ("optcomp.epsilon_g(np.random.default_rng(2).uniform(0.1, 0.2, 44), delta_g=1e-6, method='optimal', "
     "max_memory=64 * 2**20)", "ExactTooLarge"),
    # ... which `auto` answers with the lattice instead, within the budget
    ("optcomp.epsilon_g(np.random.default_rng(2).uniform(0.1, 0.2, 44), delta_g=1e-6, max_memory=64 * 2**20)",
     None),
    # the published algorithm's table: 2 x 5 x 10^8 cells
    ("optcomp.epsilon_g(1e4, k=1, delta_g=1e-6, method='approx', algorithm='paper', max_memory=64 * 2**20)",
     "ApproxTooCostly"),
])
def test_calls_stay_within_a_small_budget(statement, error):
    out = _capped(statement, 2 * 2**30)
    assert out.get("error") == error, out
    if error is not None:
        assert "memory" in out["message"], out
    assert out["peak"] <= 64 * MiB + SLACK, out


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize("bad", [True, 2.0, "2G", 1000, -1, 2**20 - 1])
def test_bad_max_memory_names_the_parameter(bad):
    with pytest.raises(ValueError, match="max_memory"):
        optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, max_memory=bad)
    with pytest.raises(ValueError, match="max_memory"):
        optcomp.delta_bounds(0.1, k=10, eps_g=1.0, max_memory=bad)


@pytest.mark.parametrize("method", ["optimal", "approx", "auto"])
def test_max_memory_is_an_option_of_the_three_methods(method):
    assert "max_memory" in optcomp.METHOD_INFO[method].options
    e = optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method=method, max_memory=2**30)
    assert e == optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method=method)


def test_closed_forms_refuse_max_memory():
    with pytest.raises(ValueError, match="unknown option 'max_memory'"):
        optcomp.epsilon_g(0.1, k=10, delta_g=1e-6, method="kov", max_memory=2**30)


def test_exact_refuses_meet_in_the_middle_beyond_the_budget_before_allocating():
    """44 distinct real eps: meet in the middle needs two halves of 2^22 atoms (~800 MB of
    estimates): refused at once below that, with the budget named."""
    eps = np.random.default_rng(2).uniform(0.1, 0.2, 44)
    with pytest.raises(optcomp.ExactTooLarge, match="max_memory"):
        optcomp.epsilon_g(eps, delta_g=1e-6, method="optimal", max_memory=64 * MiB)


def test_a_budget_is_balanced_after_a_call():
    """Every hold is released: a lattice pass (two threads), the commensurable lattice and a
    size limit leave the budget's ledger at 0, and its peak is what was checked."""
    rng = np.random.default_rng(3)
    with _memory.limit(2**30) as budget:
        optcomp.epsilon_bounds(rng.uniform(0.05, 0.2, 300), delta_g=1e-6, tol=1e-4)
        optcomp.epsilon_bounds([0.1, 0.25], counts=[1000, 300], delta_g=1e-6)
        with pytest.raises(optcomp.ApproxTooCostly):
            with _memory.limit(4 * MiB):
                optcomp.epsilon_bounds(rng.uniform(0.05, 0.2, 3000), delta_g=1e-6, tol=1e-6)
        assert budget.held == 0
        assert 0 < budget.peak <= budget.limit


def test_an_inner_budget_is_at_most_what_the_outer_one_has_left():
    with _memory.limit(64 * MiB) as outer:
        outer.hold(40 * MiB)
        with _memory.limit(2**30) as inner:
            assert inner.limit == 24 * MiB
        with _memory.limit() as same:
            assert same is outer
        outer.release(40 * MiB)
    with pytest.raises(optcomp.ApproxTooCostly, match="max_memory"):
        _memory.Budget(8 * MiB).need(9 * MiB, "a test array")


def test_command_line_max_memory():
    from optcomp.cli import main

    assert main(["epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--max-memory", "512M", "--csv"]) == 0
    with pytest.raises(SystemExit) as exc:
        main(["epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--max-memory", "1K"])
    assert exc.value.code == 2
    assert main(["epsilon", "--eps", "0.1", "--k", "10", "--delta-g", "1e-6", "--max-memory", "1G", "--method",
                 "kov"]) == 2  # the closed forms have no memory to budget


def test_the_coarser_retry_answers_what_the_first_step_cannot():
    """1000 copies of RandomizedResponse(20, 3) at eps_g = 19980 (one loss step below the
    top): the first lattice step does not fit 256 MiB; a coarser one does and meets the
    tolerance (before, MemoryError at 4 GiB).  Checked against the optimum computed from the
    definitions: the loss takes 0 or +-20 per copy, so delta(19980) sums the outcomes with
    999 or 1000 copies at +20 (the trinomial's top two rows)."""
    import mpmath as mp

    with mp.workdps(60):
        a, z = mp.e ** 20, mp.e ** 20 + 2  # P = (e^20, 1, 1)/z per copy: losses +20, -20, 0
        p_up, p_zero = a / z, mp.mpf(1) / z
        top = p_up ** 1000  # L = 20000
        below = 1000 * p_up ** 999 * p_zero  # L = 19980 (999 up, one at 0): at x
        ref = top * (1 - mp.e ** (19980 - 20000))
        assert below > 0  # (the atom at x itself adds nothing: (1 - e^0) = 0)
    try:
        b = optcomp.delta_bounds([RandomizedResponse(20.0, 3)], counts=[1000], eps_g=19980.0, tol=1e-3,
                                 max_memory=256 * MiB)
    except optcomp.ApproxTooCostly as exc:
        b = exc.bounds
    assert b.lower <= ref * (1 + 1e-12) and b.upper >= ref * (1 - 1e-12), (b, ref)


@pytest.mark.parametrize("method", ["auto", "approx", "optimal"])
def test_the_toolkit_hands_max_memory_on(method):
    """privacy_curve, the Accountant and calibrate pass ``max_memory`` to the method (a bad
    value is refused by name; a good one gives the same answer as the default)."""
    acc = optcomp.Accountant().compose(0.1, count=10)
    with pytest.raises(ValueError, match="max_memory"):
        optcomp.privacy_curve(0.1, k=10, num=3, method=method, max_memory=1000)
    with pytest.raises(ValueError, match="max_memory"):
        acc.get_epsilon(1e-6, method=method, max_memory=1000)
    with pytest.raises(ValueError, match="max_memory"):
        optcomp.calibrate.per_query_epsilon(10, 1.0, 1e-6, method=method, max_memory=1000)
    c = optcomp.privacy_curve(0.1, k=10, num=3, method=method, max_memory=2**30)
    assert np.array_equal(c.delta, optcomp.privacy_curve(0.1, k=10, num=3, method=method).delta)
    assert acc.get_epsilon(1e-6, method=method, max_memory=2**30) == acc.get_epsilon(1e-6, method=method)


def test_a_bundle_slice_is_held_in_the_budget_while_its_leaves_are_handed_out():
    """The rows of a slice of bundled leaves live until its last leaf is handed out: they are
    counted as held by the call's budget meanwhile (so a pass's later steps see them) and
    released after, also when the pass stops early; a slice holds at most 1/256 of the
    budget in lattice points."""
    from optcomp._lattice import grouped, leaves

    eps = np.sort(np.random.default_rng(3).uniform(0.05, 0.2, 2000))
    plan = leaves.leaf_plan(eps, np.ones(eps.size, dtype=np.int64))
    h, theta = 2.0**-10, 0.5
    S = grouped._mgf_grid(theta)
    with _memory.limit(64 * MiB) as budget:
        built = leaves.build(plan, h, theta, -40.0, S)
        first = next(built)
        held = budget.held
        assert held >= 3 * 8 * first[0].shape[1] * 2  # the slice's rows (several leaves) are held
        assert held <= 3 * 8 * (64 * MiB // 256 + first[0].shape[1])  # ... at most 1/256 of the budget in points
        for _ in built:
            assert budget.held > 0
        assert budget.held == 0
        built = leaves.build(plan, h, theta, -40.0, S)
        next(built)
        assert budget.held > 0
        built.close()  # a pass stopped early (an error elsewhere): the slice released
        assert budget.held == 0
