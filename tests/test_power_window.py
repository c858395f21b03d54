"""The window of a Power (one FFT of k copies of a leaf, :func:`optcomp._lattice.selfcompose._power_window`)
on laws with rare large losses.

A Poisson-subsampled Gaussian at q = 1e-6 puts almost all of a step's mass at loss ~1e-6 and
~1e-25 of it spread up to the leaf's top (~0.17 at h ~ 1.7e-4), which a large tilt (theta ~ 190,
for delta_g = 1e-10) weighs up.  The Chernoff edge of the k-fold window, min over tilts s of
(k log E[e^{s q}] - log alpha)/s, needs s ~ 1/(leaf width) there: the tilt grid used to stop at
2^-3 of one standard deviation, and at 10^4 copies the edge landed at loss ~1000 instead of ~0.2
-- a 6.1M-point pass (10-13 s) where 1350 points answer.  Work is asserted, not time.
"""

from __future__ import annotations

import pytest

import optcomp
from optcomp.mechanisms import Gaussian, Subsampled


def _passes(call):
    seen = []

    def progress(d):
        if d.get("stage") == "lattice":
            seen.append(d)

    try:
        b = call(progress)
    except optcomp.ApproxTooCostly as exc:
        b = exc.bounds
    return b, seen


def test_rare_large_losses_do_not_stretch_the_window_of_ten_thousand_copies():
    b, seen = _passes(lambda p: optcomp.epsilon_bounds(Subsampled(Gaussian(1.0), 1e-6), k=10**4,
                                                       delta_g=1e-10, tol=1e-2, progress=p))
    assert seen, "no lattice pass ran"
    assert max(d["points"] for d in seen) <= 2**16, [d["points"] for d in seen]
    assert b.gap <= 1e-2 and 0.0 <= b.lower, b
    # the remove direction's exact-MGF Chernoff minimum (mpmath quadrature, golden section over
    # theta in [10, 1e5]: tests/test_subsampled_mgf.py's _chernoff_min) is 0.8625: an upper
    # bound of the truth, so of every certified lower end
    assert b.lower <= 0.8626, b


@pytest.mark.slow
def test_the_chernoff_reference_of_the_window_test():
    """The constant above, recomputed (17 s of mpmath)."""
    from test_subsampled_mgf import _chernoff_min

    assert 0.8624 <= _chernoff_min(1e-6, 1.0, 10**4, 1e-10, "forward", 10.0, 1e5) <= 0.8626


def test_a_million_copies_get_a_bracket_from_passes_that_fit():
    """At 10^6 copies (22 s before, for [0.0055, 0.023]): every pass a few hundred thousand
    points to a million (the last the finest step the driver tries)."""
    b, seen = _passes(lambda p: optcomp.epsilon_bounds(Subsampled(Gaussian(1.0), 1e-6), k=10**6,
                                                       delta_g=1e-10, tol=1e-2, progress=p))
    assert seen
    assert max(d["points"] for d in seen) <= 2**21, [d["points"] for d in seen]
    assert 0.0 < b.lower < b.upper < 0.05, b
