"""Figure conventions that a reader relies on across reruns."""

from __future__ import annotations

from pathlib import Path

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


def _heterogeneous_tables(tmp_path, distributions, seeds):
    """A small sweep (k = 1, 4, 16) of the heterogeneous experiment, written as the pipeline
    writes it: (eps_g.csv, mechanisms.csv)."""
    from optcomp.experiments import heterogeneous as H
    from optcomp.experiments import io

    cfg = {"distribution": distributions, "seed": seeds, "delta": 0.0, "delta_g_log2": -25, "k": [1, 4, 16],
           "methods": ["basic", "kov", "approx", "optimal"], "eta": 0.001, "paper_eta": 0.1, "paper_max_k": 16,
           "optimal_max_k": 4, "chunks": 1}
    df = H.sort_rows(__import__("pandas").concat([H.sweep(s) for s in H.chunks(cfg)], ignore_index=True))
    io.write_csv(df, tmp_path / "eps_g.csv")
    io.write_csv(H.mechanisms_table(cfg), tmp_path / "mechanisms.csv")
    return tmp_path / "eps_g.csv", tmp_path / "mechanisms.csv"


def test_several_distributions_get_one_column_of_panels_each(tmp_path):
    """Several instances: a column per distribution (config order), eps_g on top with one
    line per seed, the ratios below on one shared axis; one instance: the three panels."""
    import matplotlib.pyplot as plt

    from optcomp.figures.heterogeneous import comparison
    from optcomp.figures.style import COLOR

    dists = [{"name": "loguniform", "low": 0.001, "high": 0.1}, {"name": "uniform", "low": 0.005, "high": 0.1},
             {"name": "choice", "values": [0.01, 0.1]}]
    fig = comparison(*_heterogeneous_tables(tmp_path, dists, [1, 2]))
    grid = fig.axes
    assert len(grid) == 6
    def place(ax):
        spec = ax.get_subplotspec()
        return spec.rowspan.start, spec.colspan.start

    top = sorted((ax for ax in grid if place(ax)[0] == 0), key=place)
    bottom = [ax for ax in grid if place(ax)[0] == 1]
    assert [ax.get_title(loc="left").split(") ", 1)[1] for ax in top] == [
        "loguniform 0.001..0.1", "uniform 0.005..0.1", "choice 0.01|0.1"]
    assert all(sum(line.get_color() == COLOR["basic"] and line.get_linestyle() != "None" for line in ax.get_lines())
               == 2 for ax in top)  # a line per seed
    assert len({ax.get_ylim() for ax in bottom}) == 1  # the ratios on one scale
    assert [len(ax.child_axes) for ax in top] == [1, 1, 1]  # an inset: the histogram of the eps_i drawn
    plt.close(fig)
    one = tmp_path / "one"
    one.mkdir()
    fig = comparison(*_heterogeneous_tables(one, dists[1], 1))
    assert len(fig.axes) == 3 and "distribution" not in " ".join(ax.get_title(loc="left") for ax in fig.axes)
    plt.close(fig)


def test_kov_section4_figures_draw_every_mechanism_route_and_budget(tmp_path):
    """KOV Section 4 figures, drawn from small synthetic tables (figures only read CSVs): the
    noise figure has one line per (mechanism, route) in panel (a), one per (pure-DP mechanism,
    budget) beside the Gaussian's reference in (b); the Thm 4.4 figure draws the points near an
    atom apart from the others; the black-box figure one line per workload."""
    import itertools

    import matplotlib.pyplot as plt
    import pandas as pd

    from optcomp.experiments import io, kov_section4 as exp
    from optcomp.figures import kov_section4 as fig

    rows = []
    for (eps_g, delta_g), k, m, route in itertools.product([(1.0, 1e-5), (0.5, 1e-6)], [1, 10, 100],
                                                           exp.MECHANISMS, exp.ROUTES):
        rows.append(dict(eps_g=eps_g, delta_g=delta_g, sensitivity=1, k=k, mechanism=m, route=route,
                         stated_domain=True, noise_parameter="x", noise_value=1.0, gamma=float("nan"),
                         eps_0=float("nan"), delta_0=float("nan"), variance=k * (2.0 + exp.ROUTES.index(route)),
                         certified=True, delta_g_certified=float("nan"), variance_over_exact=1.5,
                         variance_over_gaussian=0.5 + k / 100))
    io.write_csv(pd.DataFrame(rows, columns=exp.NOISE_COLUMNS), tmp_path / "noise.csv")
    f = fig.noise(tmp_path / "noise.csv")
    a, b, c = f.axes
    assert len(a.lines) == len(exp.MECHANISMS) * len(exp.ROUTES)
    assert len(b.lines) == 3 * 2 + 1 and len(c.lines) == len(exp.MECHANISMS) * 2 + 1
    plt.close(f)
    # config/paper.yaml's 8 budgets (more than line styles): panel (b) draws every budget, one
    # mechanism, colour = eps_g and line style = delta_g, with a legend entry for each value
    many = pd.concat([pd.DataFrame(rows, columns=exp.NOISE_COLUMNS).assign(eps_g=e, delta_g=d)
                      for e in (0.1, 0.5, 1.0, 2.0) for d in (1e-5, 1e-10)], ignore_index=True)
    io.write_csv(many, tmp_path / "many.csv")
    f = fig.noise(tmp_path / "many.csv")
    b = f.axes[1]
    assert len(b.lines) == 8 + 1 and len({line.get_color() for line in b.lines[:8]}) == 4
    assert len({str(line.get_linestyle()) for line in b.lines[:8]}) == 2
    assert len(b.get_legend().get_texts()) == 4 + 2 and "Laplace / Gaussian" in b.get_title(loc="left")
    plt.close(f)

    region = pd.DataFrame([dict(eps=0.1, k=10, eps_g=x, atom_distance=0.0, near_atom=x in (0.0, 0.2), tol=1e-4,
                                delta_lower=0.1 - x / 10, delta_upper=0.1 - x / 10, delta_optimal=0.1 - x / 10,
                                contains=True, deviation=1e-9, relative_deviation=1e-8)
                           for x in (0.0, 0.1, 0.2, 0.3)], columns=exp.GEOMETRIC_COLUMNS)
    io.write_csv(region, tmp_path / "region.csv")
    f = fig.geometric(tmp_path / "region.csv")
    near = [line for line in f.axes[1].lines if line.get_marker() == "o" and line.get_markerfacecolor() == "none"]
    assert sorted(len(line.get_xdata()) for line in near) == [2]  # the two points (the legend is the figure's)
    assert [ax.get_legend() for ax in f.axes] == [None, None] and len(f.legends) == 1
    plt.close(f)
    # several eps (config/paper.yaml): a column per eps, colour = k, one figure legend
    many = pd.concat([region.assign(eps=e, k=k) for e in (0.01, 0.1, 0.5) for k in (10, 100)], ignore_index=True)
    io.write_csv(many, tmp_path / "many_region.csv")
    f = fig.geometric(tmp_path / "many_region.csv")
    assert len(f.axes) == 6 and "0.5" in f.axes[2].get_title(loc="left")
    assert len(f.legends) == 1 and len(f.legends[0].get_texts()) == 2 + 2
    plt.close(f)

    black = pd.DataFrame([dict(workload=w, mechanism="laplace", noise_parameter="scale", noise_value=10.0,
                               sensitivity=1, eps_0=0.1, delta_g=1e-5, k=k, tol=1e-6, eps_g_black_box=0.1 * k,
                               eps_g_lower=0.09 * k, eps_g_upper=0.095 * k, lower_over_black_box=0.9,
                               upper_over_black_box=0.95) for w in ("a", "b") for k in (1, 10)],
                         columns=exp.BLACK_BOX_COLUMNS)
    io.write_csv(black, tmp_path / "black.csv")
    f = fig.black_box(tmp_path / "black.csv")
    assert [line.get_label() for line in f.axes[1].lines[:2]] == ["a", "b"]
    plt.close(f)


# ------------------------------------------------------------------------- legends and notes off the data


def _crossed(ax, box, pad: float = 1.5) -> list[str]:
    """What ``ax`` draws inside the display-space ``box`` (grown by ``pad`` pixels): the lines
    (their segments, sampled), the markers, the error bars' whiskers."""
    import numpy as np

    x0, y0, x1, y1 = box.x0 - pad, box.y0 - pad, box.x1 + pad, box.y1 + pad

    def inside(points) -> bool:
        p = np.asarray(points, dtype=float).reshape(-1, 2)
        p = p[np.isfinite(p).all(axis=1)]
        return bool(np.any((p[:, 0] >= x0) & (p[:, 0] <= x1) & (p[:, 1] >= y0) & (p[:, 1] <= y1)))

    def sampled(xy):
        t = np.linspace(0.0, 1.0, 64)[:, None, None]
        return (xy[:-1][None] + t * (xy[1:] - xy[:-1])[None]).reshape(-1, 2)

    hit = []
    for line in ax.get_lines():
        xy = ax.transData.transform(line.get_xydata()) if len(line.get_xydata()) else np.empty((0, 2))
        drawn = line.get_linestyle() not in ("None", "none", "") and len(xy) > 1 and inside(sampled(xy))
        if line.get_marker() not in (None, "None", "none", "", "_", "|") and inside(xy) or drawn:
            hit.append(f"line {line.get_label()!r}")
    for coll in ax.collections:
        for path in coll.get_paths():
            xy = coll.get_transform().transform(path.vertices)
            if len(xy) > 1 and inside(sampled(xy)):
                hit.append(f"collection {coll.get_label()!r}")
                break
    return hit


def test_legends_and_notes_stay_off_the_data():
    """The committed figures, redrawn from the committed tables: the Thm 4.4 figure's legend
    (once inside panel (b), over its y axis and the 10^0 label) sits above both panels; the
    runtime figure's note in panel (e) crosses no curve or whisker and stays in its frame; the
    heterogeneous figure's legend of panel (c) touches no curve."""
    import matplotlib.pyplot as plt

    from optcomp.figures import heterogeneous, kov_section4, runtime, use_style

    root = Path(__file__).resolve().parents[1] / "results"
    with use_style():
        f = kov_section4.geometric(root / "kov_section4" / "geometric_region.csv")
        f.canvas.draw()
        r = f.canvas.get_renderer()
        (legend,) = f.legends
        box = legend.get_window_extent(r)
        assert all(ax.get_legend() is None for ax in f.axes)
        assert all(box.y0 >= ax.get_tightbbox(r).y1 - 1 for ax in f.axes)  # above titles and tick labels
        plt.close(f)

        timing = root / "timing" / "reference"
        f = runtime.scaling(*(timing / f"{n}.csv" for n in ("approx_vs_k", "approx_vs_eta", "exact_heterogeneous",
                                                            "exact_homogeneous", "accuracy", "slopes")))
        f.canvas.draw()
        r = f.canvas.get_renderer()
        ax_e = next(ax for ax in f.axes if ax.get_title(loc="left").startswith("(e)"))
        (note,) = [t for t in ax_e.texts if t.get_text().startswith("fast:")]
        box = note.get_window_extent(r)
        assert _crossed(ax_e, box, pad=3.0) == []
        frame = ax_e.get_window_extent(r)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        plt.close(f)

        f = heterogeneous.comparison(root / "heterogeneous" / "eps_g.csv", root / "heterogeneous" / "mechanisms.csv")
        f.canvas.draw()
        r = f.canvas.get_renderer()
        ax_c = next(ax for ax in f.axes if ax.get_title(loc="left").startswith("(c)"))
        assert _crossed(ax_c, ax_c.get_legend().get_window_extent(r), pad=3.0) == []
        plt.close(f)
