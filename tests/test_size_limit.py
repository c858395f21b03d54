"""Size limits found before the work, not after it: a Power whose repeated squaring cannot fit
the memory budget is refused from the predicted window of its last product
(:func:`optcomp._lattice.grouped._squared_width`), and the driver's coarser retry then answers.

At 10^8-10^9 subsampled Gaussian steps the squaring used to run ~20 s per direction before
its last level was refused (issue 26: calls over 10 s).  Time is not asserted (shared,
noisy machines); the work is: the number of FFT products the squaring performs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import optcomp
import optcomp._laws as laws
from optcomp._lattice import grouped, leaves
from optcomp._lattice.workload import Source, Workload
from optcomp._refine import step_below
from optcomp.mechanisms import Gaussian, Subsampled


def _power_item(sigma, q, k, h, direction):
    src = Source(Subsampled(Gaussian(sigma), q), k, direction)
    work = Workload(np.zeros(0), np.zeros(0, dtype=np.int64), (src,))
    (item,) = work.plan(h)
    return item.made(-40.0)


@pytest.mark.parametrize("sigma, q, k, h, theta, direction", [
    pytest.param(1.0, 1e-6, 10**9, 5.72e-5, 3.887, laws.FORWARD, marks=pytest.mark.slow),  # the 10^9-step pass
    (0.8, 1e-4, 3 * 10**4, 2.747e-4, 2.076, laws.FORWARD),  # a window drifting with the copies
    (0.8, 1e-4, 3 * 10**4, 2.747e-4, 2.076, laws.REVERSE),
    (2.0, 0.01, 3000, 1e-3, 1.0, laws.FORWARD),
])
def test_the_predicted_window_of_repeated_squaring_is_not_above_the_one_it_keeps(sigma, q, k, h, theta,
                                                                                 direction):
    """The refusal must never turn away a squaring that would fit: the predicted width is
    at most the width of the final node the squaring keeps (its last product is at least
    that long), and close to it (else the prediction would refuse nothing)."""
    h = step_below(h)
    item = _power_item(sigma, q, k, h, direction)
    S = grouped._mgf_grid(theta)
    rows, base, logZ, rho, E2, K, s_leaf = next(leaves.build([item.leaf], h, theta, -40.0, S))
    predicted = grouped._squared_width(K, S, k, theta, h, int(base), float(logZ[0]), float(np.sum(rows[0])),
                                       -40.0, rows.shape[1])
    node, _, _ = grouped._power(item, h, theta, -40.0, S, 1)
    kept = node.rows.shape[1]
    assert predicted <= 1.01 * kept, (predicted, kept)
    assert predicted >= 0.5 * kept, (predicted, kept)


def _count_products(monkeypatch):
    calls = [0]
    merge = grouped._merge

    def counted(*args, **kwargs):
        calls[0] += 1
        return merge(*args, **kwargs)

    monkeypatch.setattr(grouped, "_merge", counted)
    return calls


def test_ten_to_the_eight_subsampled_steps_refuse_the_squaring_before_running_it(monkeypatch):
    """10^8 steps of q = 1e-4, sigma = 0.8: the fine passes' squarings (whose last products
    need 20-50 GiB) are refused from their prediction; a coarser pass per direction gives the
    lower end, the searched Chernoff bound the upper end.  Before: ~50 squaring products
    a direction ran (~20 s) before the budget refused the last."""
    calls = _count_products(monkeypatch)
    with pytest.raises(optcomp.ApproxTooCostly) as info:
        optcomp.epsilon_bounds(Subsampled(Gaussian(0.8), 1e-4), k=10**8, delta_g=1e-5)
    b = info.value.bounds
    # the passes that answer are one FFT each (no product); fewer products than one squaring
    # of 10^8 copies (log2 k squarings) -- the old code ran ~25-50 a direction before refusal
    assert calls[0] < math.log2(10**8), calls[0]
    # mu-GDP scale of the composition: mu = q sqrt(k (e^{1/sigma^2} - 1)) ~ 1.94, eps ~ 8-9 at
    # delta 1e-5; the lower end from a real pass, the upper the searched Chernoff end: at or
    # above the exact-MGF Chernoff minimum of the remove direction (mpmath quadrature), within 1 %
    from test_subsampled_mgf import _chernoff_min

    best = _chernoff_min(1e-4, 1.25, 10**8, 1e-5, "forward", 0.3, 20.0)
    assert 4.0 < b.lower < b.upper, b
    assert best - 1e-6 <= b.upper <= best * 1.01, (b, best)


@pytest.mark.slow
def test_ten_to_the_nine_steps_at_a_coarse_tolerance_answer_from_a_pass_that_fits(monkeypatch):
    """10^9 steps of q = 1e-6, sigma = 1 at delta_g 0.5 and tol 1e-2: delta_g exceeds the
    composition's total variation, so eps_g = 0 exactly -- which only a lattice pass shows
    (the Chernoff end is positive).  The 8x-coarser retry after the predicted refusal finds
    the pass (52-94 s before: two squarings refused after ~20 s each, per direction)."""
    calls = _count_products(monkeypatch)
    b = optcomp.epsilon_bounds(Subsampled(Gaussian(1.0), 1e-6), k=10**9, delta_g=0.5, tol=1e-2)
    assert b.lower == b.upper == 0.0, b
    # at most two squarings that answer (one a direction, ~log2 k squarings and as many
    # products each); the old code ran ~six, four of them refused at their last level
    assert calls[0] <= 2 * 2 * math.ceil(math.log2(10**9)), calls[0]


def test_the_coarse_pass_after_a_size_limit_runs_no_squaring_beyond_its_aim(monkeypatch):
    """10^9 steps of q = 1e-3, sigma = 0.8 at delta_g 1e-10, tol 1e-2 need ~2.6e8 points; the
    coarse pass the driver then tries (aimed at max_points/16 by the workload's estimate) would
    square 10^9 copies of a biased coarse leaf at ~3.5M points (~60 products, 15-30 s a
    direction, for [0, 3260] beside a Chernoff end of 2289).  It is refused from its predicted
    width before any product: the size limit answers with the Chernoff end at once."""
    calls = _count_products(monkeypatch)
    with pytest.raises(optcomp.ApproxTooCostly, match="refused too") as info:
        optcomp.epsilon_bounds(Subsampled(Gaussian(0.8), 1e-3), k=10**9, delta_g=1e-10, tol=1e-2)
    assert calls[0] == 0, calls[0]
    b = info.value.bounds
    # mu-GDP scale: mu = q sqrt(k (e^{1/sigma^2} - 1)) ~ 70: eps_g in the thousands at 1e-10
    assert 0.0 <= b.lower and 1000.0 < b.upper < 3000.0, b
