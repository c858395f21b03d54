"""KOV Section 4 checked exactly: noise for k queries, the geometric mechanism (Thm 4.4), black
box vs mechanism-aware composition.  CSVs of :mod:`optcomp.experiments.kov_section4` in,
Figures out; nothing is recomputed here."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from ..experiments.io import read_csv
from .style import DOUBLE, OKABE_ITO, sci, use_style

__all__ = ["noise", "geometric", "black_box", "MECHANISM_COLOR", "ROUTE_STYLE"]

MECHANISM_COLOR = {"gaussian": OKABE_ITO["black"], "laplace": OKABE_ITO["vermillion"],
                   "staircase": OKABE_ITO["blue"], "geometric": OKABE_ITO["green"]}
# the three pure-DP mechanisms need nearly the same noise: hollow markers of different shapes
# keep all of them visible where the lines coincide
MECHANISM_MARKER = {"gaussian": None, "laplace": "o", "staircase": "s", "geometric": "^"}
MECHANISM_LABEL = {"gaussian": "Gaussian", "laplace": "Laplace", "staircase": "staircase", "geometric": "geometric"}
ROUTE_STYLE = {"exact": "solid", "kov": (0, (5, 2)), "black_box": (0, (1, 1.3))}
ROUTE_LABEL = {"exact": "exact (least certified noise)", "kov": "KOV Thm 4.2/4.3, Cor. 4.1",
               "black_box": "black box: per-query (eps_0, delta_0), optimal"}
ROUTE_WIDTH = {"exact": 1.5, "kov": 1.1, "black_box": 1.3}
_BUDGET_STYLE = ["solid", (0, (4, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2))]
_K_COLOR = [OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["green"], OKABE_ITO["purple"], OKABE_ITO["orange"],
            OKABE_ITO["sky_blue"], OKABE_ITO["black"]]
_WORKLOAD_COLOR = [OKABE_ITO["vermillion"], OKABE_ITO["green"], OKABE_ITO["blue"], OKABE_ITO["purple"],
                   OKABE_ITO["orange"], OKABE_ITO["sky_blue"]]


def _marks(name: str, show: bool = True) -> dict:
    marker = MECHANISM_MARKER.get(name) if show else None
    return {"marker": marker, "ms": 3.2, "mfc": "none", "mew": 0.8} if marker else {}


def _ratios_by_mechanism(ax, df, names, budgets) -> list:
    """Each pure-DP mechanism's exact variance over the Gaussian's: colour = mechanism, line
    style = budget (up to four budgets); the legend's handles."""
    for style, (eg, dg) in zip(_BUDGET_STYLE, budgets):
        sub = df[(df["eps_g"] == eg) & (df["delta_g"] == dg) & (df["route"] == "exact")]
        for name in names:
            if name == "gaussian":
                continue
            g = sub[sub["mechanism"] == name]
            ax.plot(g["k"], g["variance_over_gaussian"], color=MECHANISM_COLOR[name], ls=style, lw=1.0,
                    **_marks(name))
    return [Line2D([], [], color="#555555", ls=s, label=_budget_label(eg, dg))
            for s, (eg, dg) in zip(_BUDGET_STYLE, budgets)]


def _ratios_by_budget(ax, df, name, budgets) -> list:
    """One mechanism's exact variance over the Gaussian's for every budget: colour = eps_g
    (viridis, in increasing order), line style = delta_g; the legend's handles."""
    eps = sorted({eg for eg, _ in budgets})
    deltas = sorted({dg for _, dg in budgets}, reverse=True)
    cmap = plt.get_cmap("viridis")
    color = {e: cmap(0.9 * i / max(1, len(eps) - 1)) for i, e in enumerate(eps)}
    style = {d: _BUDGET_STYLE[i % len(_BUDGET_STYLE)] for i, d in enumerate(deltas)}
    for eg, dg in budgets:
        g = df[(df["eps_g"] == eg) & (df["delta_g"] == dg) & (df["route"] == "exact") & (df["mechanism"] == name)]
        ax.plot(g["k"], g["variance_over_gaussian"], color=color[eg], ls=style[dg], lw=1.1)
    return ([Line2D([], [], color=color[e], lw=1.5, label=rf"$\varepsilon_g$ = {e:g}") for e in eps]
            + [Line2D([], [], color="#555555", ls=style[d], label=rf"$\delta_g$ = {sci(d)}") for d in deltas])


def _budget_label(eps_g: float, delta_g: float) -> str:
    return rf"$\varepsilon_g$ = {eps_g:g}, $\delta_g$ = {sci(delta_g)}"


def noise(noise_csv) -> plt.Figure:
    """(a) Noise variance per query / k for the first budget: colour = mechanism, line style =
    route (exact, KOV's sufficient noise, black box); (b) each mechanism's exact variance over
    the Gaussian's, every budget (KOV: "nothing special about Gaussian"); (c) each route's
    variance over the exact one of the same mechanism, first budget."""
    df = read_csv(noise_csv)
    names = [m for m in MECHANISM_COLOR if m in set(df["mechanism"])]
    budgets = [tuple(b) for b in df[["eps_g", "delta_g"]].drop_duplicates().itertuples(index=False)]
    eg0, dg0 = budgets[0]
    first = df[(df["eps_g"] == eg0) & (df["delta_g"] == dg0)]
    with use_style():
        fig, (ax_a, ax_b, ax_c) = plt.subplots(1, 3, figsize=(DOUBLE, 2.9))
        for name in names:
            for route in ("kov", "black_box", "exact"):
                g = first[(first["mechanism"] == name) & (first["route"] == route)]
                ax_a.plot(g["k"], g["variance"] / g["k"], color=MECHANISM_COLOR[name], ls=ROUTE_STYLE[route],
                          lw=ROUTE_WIDTH[route], **_marks(name, route == "exact"))
        ax_a.set_xscale("log")
        ax_a.set_yscale("log")
        ax_a.set_xlabel(r"number of queries $k$ (sensitivity 1)")
        ax_a.set_ylabel(r"noise variance per query / $k$")
        ax_a.set_title(f"(a) {_budget_label(eg0, dg0)}")

        if len(budgets) <= len(_BUDGET_STYLE):
            budget_handles = _ratios_by_mechanism(ax_b, df, names, budgets)
            ax_b.set_title("(b) vs the Gaussian, all budgets")
        else:  # too many budgets for line styles: one mechanism, colour = eps_g, style = delta_g
            name = next((n for n in ("laplace", "staircase", "geometric") if n in names), None)
            budget_handles = _ratios_by_budget(ax_b, df, name, budgets) if name else []
            ax_b.set_title(f"(b) {MECHANISM_LABEL.get(name, '')} / Gaussian, all budgets")
        ax_b.axhline(1.0, color=MECHANISM_COLOR["gaussian"], lw=1.5)
        ax_b.set_xscale("log")
        ax_b.set_yscale("log")
        ticks = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0]
        ax_b.yaxis.set_major_locator(FixedLocator(ticks if len(budgets) <= len(_BUDGET_STYLE)
                                                  else [1 / 64, 1 / 32, 1 / 16] + ticks))
        ax_b.yaxis.set_minor_locator(NullLocator())
        ax_b.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax_b.set_xlabel(r"number of queries $k$")
        ax_b.set_ylabel("exact variance / Gaussian's")
        if len(budgets) <= len(_BUDGET_STYLE):
            ax_b.legend(handles=budget_handles, loc="lower right", title="line style = budget")
        else:
            ax_b.legend(handles=budget_handles, loc="lower right", fontsize="x-small", ncols=2)

        for name in names:
            for route in ("kov", "black_box"):
                g = first[(first["mechanism"] == name) & (first["route"] == route)]
                ax_c.plot(g["k"], g["variance_over_exact"], color=MECHANISM_COLOR[name], ls=ROUTE_STYLE[route],
                          lw=ROUTE_WIDTH[route], **_marks(name, route == "kov"))
        ax_c.axhline(1.0, color="#555555", lw=0.8)
        ax_c.set_xscale("log")
        ax_c.set_yscale("log")
        ax_c.set_xlabel(r"number of queries $k$")
        ax_c.set_ylabel("variance / exact variance")
        ax_c.set_title("(c) KOV, black box vs exact")

        handles = [Line2D([], [], color=MECHANISM_COLOR[n], lw=1.8, label=MECHANISM_LABEL[n], **_marks(n))
                   for n in names]
        handles += [Line2D([], [], color="#555555", ls=ROUTE_STYLE[r], lw=ROUTE_WIDTH[r], label=ROUTE_LABEL[r])
                    for r in ("exact", "kov", "black_box")]
        fig.legend(handles=handles, loc="outside upper center", ncols=4,
                   title="colour = mechanism, line style = route to a k-fold composition within the budget "
                         "(panels a, c)")
    return fig


def geometric(region_csv) -> plt.Figure:
    """KOV Thm 4.4: (a) delta(eps_g) of k-fold optimal composition of (eps, 0)-DP mechanisms
    (lines) and the certified bracket on the k-fold geometric mechanism's delta from its own
    privacy-loss distribution (markers: lower and upper ends), eps_g as a fraction of k·eps;
    (b) the largest distance from the optimum to the bracket's ends, relative to the optimum,
    beside the engine's relative tolerance (hollow: eps_g near an atom of the composed loss,
    where the engine's tolerance is horizontal instead)."""
    df = read_csv(region_csv)
    if df["eps"].nunique() > 1:
        return _geometric_by_eps(df)
    pairs = [tuple(p) for p in df[["eps", "k"]].drop_duplicates().itertuples(index=False)]
    with use_style():
        fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(DOUBLE, 3.0))
        handles = []
        for i, (eps, k) in enumerate(pairs):
            g = df[(df["eps"] == eps) & (df["k"] == k)]
            x = g["eps_g"] / (k * eps)
            color = _K_COLOR[i % len(_K_COLOR)]
            ax_a.plot(x, g["delta_optimal"], color=color, lw=1.2)
            ax_a.plot(x, g["delta_upper"], ls="none", marker="^", ms=3, mfc="none", mec=color, mew=0.7)
            ax_a.plot(x, g["delta_lower"], ls="none", marker="v", ms=3, mfc="none", mec=color, mew=0.7)
            pos = g[g["delta_optimal"] > 0]
            ax_b.plot(pos["eps_g"] / (k * eps), pos["relative_deviation"], color=color, lw=0.8)
            off, near = pos[~pos["near_atom"]], pos[pos["near_atom"]]
            ax_b.plot(off["eps_g"] / (k * eps), off["relative_deviation"], ls="none", color=color, marker="o", ms=2.4)
            ax_b.plot(near["eps_g"] / (k * eps), near["relative_deviation"], ls="none", marker="o", ms=4.5,
                      mfc="none", mec=color, mew=0.9)
            handles.append(Line2D([], [], color=color, lw=1.5, label=rf"$k$ = {k}, $\varepsilon$ = {eps:g}"))
        for t in sorted(df["tol"].unique()):
            ax_b.axhline(t, color="#555555", lw=0.8, ls=(0, (4, 2)))
        ax_a.set_yscale("log")
        ax_a.set_xlabel(r"$\varepsilon_g / (k\varepsilon)$")
        ax_a.set_ylabel(r"$\delta(\varepsilon_g)$")
        ax_a.set_title("(a) optimal (lines) vs geometric's bracket (markers)")
        ax_b.set_yscale("log")
        ax_b.set_xlabel(r"$\varepsilon_g / (k\varepsilon)$")
        ax_b.set_ylabel("max |bracket end - optimal| / optimal")
        ax_b.set_title("(b) distance to the optimum")
        # one legend above both panels: inside either it covered data or the axis labels
        # (first row: colour = k; second row: the markers; legends fill column by column)
        marks = [Line2D([], [], ls="none", marker="^", ms=3.5, mfc="none", mec="#555555", mew=0.8,
                        label="bracket: upper end"),
                 Line2D([], [], ls="none", marker="v", ms=3.5, mfc="none", mec="#555555", mew=0.8,
                        label="bracket: lower end"),
                 Line2D([], [], ls="none", marker="o", ms=4.5, mfc="none", mec="#555555", mew=0.9,
                        label="near an atom of the loss"),
                 Line2D([], [], color="#555555", lw=0.8, ls=(0, (4, 2)), label="engine tolerance (relative)")]
        ncols = max(len(handles), len(marks))
        blank = [Line2D([], [], ls="none", label=" ")]
        rows = [handles + blank * (ncols - len(handles)), marks + blank * (ncols - len(marks))]
        fig.legend(handles=[h for pair in zip(*rows) for h in pair], loc="outside upper center", ncols=ncols)
    return fig


def _geometric_by_eps(df) -> plt.Figure:
    """:func:`geometric` for several eps (config/paper.yaml): a column per eps, the rows (a)
    and (b) as there, colour = k (the same in every column), one legend for the figure."""
    eps_values = list(df["eps"].drop_duplicates())
    ks = sorted(df["k"].unique())
    color = {k: _K_COLOR[i % len(_K_COLOR)] for i, k in enumerate(ks)}
    with use_style():
        fig, axes = plt.subplots(2, len(eps_values), figsize=(DOUBLE, 4.6), squeeze=False, sharex=True)
        for j, eps in enumerate(eps_values):
            ax_a, ax_b = axes[0, j], axes[1, j]
            for k in ks:
                g = df[(df["eps"] == eps) & (df["k"] == k)]
                if g.empty:
                    continue
                x = g["eps_g"] / (k * eps)
                ax_a.plot(x, g["delta_optimal"], color=color[k], lw=1.1)
                ax_a.plot(x, g["delta_upper"], ls="none", marker="^", ms=2.6, mfc="none", mec=color[k], mew=0.6)
                ax_a.plot(x, g["delta_lower"], ls="none", marker="v", ms=2.6, mfc="none", mec=color[k], mew=0.6)
                pos = g[g["delta_optimal"] > 0]
                off, near = pos[~pos["near_atom"]], pos[pos["near_atom"]]
                ax_b.plot(pos["eps_g"] / (k * eps), pos["relative_deviation"], color=color[k], lw=0.7)
                ax_b.plot(off["eps_g"] / (k * eps), off["relative_deviation"], ls="none", color=color[k],
                          marker="o", ms=2.0)
                ax_b.plot(near["eps_g"] / (k * eps), near["relative_deviation"], ls="none", marker="o", ms=4.0,
                          mfc="none", mec=color[k], mew=0.8)
            for t in sorted(df[df["eps"] == eps]["tol"].unique()):
                ax_b.axhline(t, color="#555555", lw=0.8, ls=(0, (4, 2)))
            ax_a.set_yscale("log")
            ax_b.set_yscale("log")
            ax_a.set_title(rf"(a) $\varepsilon$ = {eps:g}: $\delta(\varepsilon_g)$")
            ax_b.set_title("(b) distance to the optimum")
            ax_b.set_xlabel(r"$\varepsilon_g / (k\varepsilon)$")
        axes[0, 0].set_ylabel(r"$\delta(\varepsilon_g)$: optimal (line), bracket ($\blacktriangle\blacktriangledown$)")
        axes[1, 0].set_ylabel("|bracket end - optimal| / optimal")
        handles = [Line2D([], [], color=color[k], lw=1.5, label=rf"$k$ = {k}") for k in ks]
        handles += [Line2D([], [], ls="none", marker="o", ms=4.0, mfc="none", mec="#555555",
                           label="near an atom of the loss"),
                    Line2D([], [], color="#555555", lw=0.8, ls=(0, (4, 2)), label="engine tolerance")]
        fig.legend(handles=handles, loc="outside upper center", ncols=len(handles))
    return fig


def black_box(black_box_csv) -> plt.Figure:
    """(a) eps_g saved by knowing the mechanism: black-box eps_g (each query's pure eps_0
    composed optimally, exact) minus the mechanism-aware certified upper bound; (b)
    mechanism-aware over black box (line: the bracket's upper end, band: down to its lower
    end)."""
    df = read_csv(black_box_csv)
    workloads = list(df["workload"].drop_duplicates())
    delta_g = df["delta_g"].iloc[0]
    eps0 = sorted(df["eps_0"].unique())
    same_eps0 = len(eps0) == 1
    with use_style():
        fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(DOUBLE, 2.8))
        for i, w in enumerate(workloads):
            g = df[df["workload"] == w]
            color = _WORKLOAD_COLOR[i % len(_WORKLOAD_COLOR)]
            label = w if same_eps0 else rf"{w} ({g['eps_0'].iloc[0]:g}-DP)"
            ax_a.plot(g["k"], g["eps_g_black_box"] - g["eps_g_upper"], color=color, lw=1.2, marker="o", ms=2.2,
                      label=label)
            ax_b.fill_between(g["k"], g["lower_over_black_box"], g["upper_over_black_box"], color=color, alpha=0.3,
                              lw=0)
            ax_b.plot(g["k"], g["upper_over_black_box"], color=color, lw=1.2, marker="o", ms=2.2, label=label)
        ax_a.axhline(0.0, color="#555555", lw=0.8, ls=(0, (4, 2)))
        ax_b.axhline(1.0, color="#555555", lw=0.8, ls=(0, (4, 2)))
        ax_a.set_xscale("log")
        ax_a.set_xlabel(r"number of queries $k$")
        ax_a.set_ylabel(rf"black-box $\varepsilon_g$ $-$ mechanism-aware (upper)")
        ax_a.set_title(rf"(a) $\varepsilon_g$ saved at $\delta_g$ = {sci(delta_g)}")
        ax_b.set_xscale("log")
        ax_b.set_xlabel(r"number of queries $k$")
        ax_b.set_ylabel(r"mechanism-aware $\varepsilon_g$ / black-box $\varepsilon_g$")
        ax_b.set_title("(b) relative to the black box")
        handles, labels = ax_b.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncols=min(len(workloads), 3),
                   title="workload: k identical queries" + (f", each {eps0[0]:g}-DP" if same_eps0 else ""))
    return fig
