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
    assert sorted(len(line.get_xdata()) for line in near) == [0, 2]  # the legend's dummy and the two points
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
