"""profile_epsilon's bisection on a mechanism without ``profile_side`` reads each
``profile_bounds`` evaluation once (it may cost a quadrature), and brackets the root of the
profile it is given."""

from __future__ import annotations

import math

from optcomp._directions import profile_epsilon
from optcomp._types import Bounds


class _Linear:
    """delta(x) = (1 - x)_+ / 2, its bracket [delta - 1e-12, delta + 1e-12]; calls counted."""

    kind = "cells"

    def __init__(self):
        self.calls = 0
        self.points = []

    def profile_bounds(self, x):
        self.calls += 1
        self.points.append(x)
        d = max(0.0, 1.0 - x) / 2.0
        return Bounds(max(0.0, d - 1e-12), d + 1e-12 if d > 0.0 else 0.0)


def test_one_profile_evaluation_per_decision():
    mech = _Linear()
    b = profile_epsilon(mech, 0.25)  # root x = 0.5
    assert b.lower <= 0.5 <= b.upper and b.upper - b.lower <= 1e-10
    # each decision one call: a point evaluated twice in a row only where the search's last
    # step and the lower end's first meet (two calls a decision repeated every point below)
    assert sum(a == b for a, b in zip(mech.points, mech.points[1:])) <= 1
    assert mech.calls <= 2 * 64 + 4
