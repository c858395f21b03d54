"""Figure conventions that a reader relies on across reruns."""

from __future__ import annotations

from optcomp.figures.homogeneous import delta_g_color, eps_color


def test_a_value_keeps_its_colour_when_another_is_added():
    """MV Fig. 2: adding an eps (or a delta_g) to the config never repaints the others."""
    before = eps_color([0.1, 0.05, 0.01, 0.005])
    after = eps_color([0.1, 0.05, 0.02, 0.01, 0.005])
    assert all(after[e] == c for e, c in before.items())
    assert len(set(after.values())) == len(after)  # still all different
    assert eps_color([0.005, 0.1]) == {0.005: before[0.005], 0.1: before[0.1]}  # order does not matter
    dg = delta_g_color([-10, -20, -30, -40])
    assert delta_g_color([-10, -15, -20, -30, -40])[-30] == dg[-30]
    assert len(set(dg.values())) == 4
