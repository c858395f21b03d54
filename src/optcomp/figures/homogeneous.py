"""MV Figure 2: eps_g versus k under four composition theorems (four panels)."""

from __future__ import annotations

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, LABEL, LINESTYLE, pow2, use_style

__all__ = ["mv_figure2", "excess_over_optimal", "eps_color", "delta_g_color"]

_ORDER = ["basic", "drv", "kov", "advanced_pure", "optimal"]


def _methods(df):
    present = list(df["method"].drop_duplicates())
    return [m for m in _ORDER if m in present] + [m for m in present if m not in _ORDER]


# colour = the curve family's parameter (eps in (a), (b), (d); delta_g in (c)), line style =
# theorem: every curve of a panel is told apart by the two-part legend.  A value keeps its
# colour whatever else the config lists (adding an eps never repaints the others): Okabe-Ito
# without yellow (too pale on white), ordered so that neighbours contrast.
FAMILY_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
THEOREM_STYLE = {"basic": (0, (1, 1.4)), "drv": (0, (4, 1.6)), "kov": (0, (6, 1.5, 1.2, 1.5)),
                 "advanced_pure": (0, (2, 1)), "optimal": "solid"}
THEOREM_WIDTH = {"optimal": 1.6}


def _style(method):
    return {"ls": THEOREM_STYLE.get(method, LINESTYLE.get(method, "solid")), "lw": THEOREM_WIDTH.get(method, 1.0)}


def _curves(ax, df, group_key, methods, colors, kmax=None):
    for value, group in df.groupby(group_key, sort=False):
        for m in methods:
            g = group[group["method"] == m]
            if kmax is not None:
                g = g[g["k"] <= kmax]
            ax.plot(g["k"], g["eps_g"], color=colors[value], **_style(m))


def _palette(values, slot):
    """Colour per value from the value alone (``slot``: its place on a 1-2-5 or step-5 scale);
    two values that share a slot (rare: 2.3 decades apart for eps) take the next free colours
    in increasing order of the value."""
    colors, taken = {}, set()
    for v in sorted(set(values)):
        i = slot(v) % len(FAMILY_COLORS)
        for j in range(len(FAMILY_COLORS)):
            if (i + j) % len(FAMILY_COLORS) not in taken:
                i = (i + j) % len(FAMILY_COLORS)
                break
        taken.add(i)
        colors[v] = FAMILY_COLORS[i]
    return {v: colors[v] for v in values}


def _eps_slot(eps: float) -> int:
    # 3 log10(eps) is an integer on the 1-2-5 scale (0.01, 0.02, 0.05, 0.1, ...): consecutive
    # values there take consecutive colours
    return round(3 * np.log10(eps)) if eps > 0 else 0


def _delta_g_slot(log2_delta_g: int) -> int:
    return round(log2_delta_g / 5)  # 2^-10, 2^-15, ..., 2^-40: consecutive colours


def eps_color(values) -> dict:
    """The colour of each per-mechanism eps, a function of the value (MV Fig. 2 (a), (b), (d))."""
    return _palette(list(values), _eps_slot)


def delta_g_color(log2_values) -> dict:
    """The colour of each delta_g = 2^e, a function of e (MV Fig. 2 (c))."""
    return _palette([int(v) for v in log2_values], _delta_g_slot)


def mv_figure2(curves_csv, *, zoom_k_max: int = 99) -> plt.Figure:
    """Murtagh-Vadhan Figure 2 from ``results/homogeneous/eps_g.csv``.

    (a) eps_g vs k (both axes logarithmic) for several per-mechanism eps at one delta_g;
    (b) the same for k <= ``zoom_k_max`` (linear k); (c) eps = const, several delta_g;
    (d) each curve of (a) divided by the optimal one.  Colour = eps (in (c): delta_g), line
    style = theorem; a two-part legend says which is which.
    """
    df = read_csv(curves_csv)
    methods = _methods(df)
    a = df[df["panel"] == "by_eps"]
    b = df[df["panel"] == "by_delta_g"]
    kmax = int(df["k"].max())
    eps_colors = eps_color(a["eps"].drop_duplicates())
    dg_colors = delta_g_color(b["delta_g_log2"].drop_duplicates())
    with use_style():
        fig, axes = plt.subplots(2, 2, figsize=(DOUBLE, 5.6))
        (ax_a, ax_b), (ax_c, ax_d) = axes

        e2 = int(a["delta_g_log2"].iloc[0]) if len(a) else 0
        _curves(ax_a, a, "eps", methods, eps_colors)
        ax_a.set_xscale("log")
        ax_a.set_yscale("log")
        ax_a.set_xlim(1, kmax)
        ax_a.set_title(rf"(a) $\delta=0$, $\delta_g$ = {pow2(e2)}")

        _curves(ax_b, a, "eps", methods, eps_colors, kmax=zoom_k_max)
        ax_b.set_yscale("log")
        ax_b.set_xlim(0, zoom_k_max + 1)
        ax_b.set_title(rf"(b) zoom: $k \leq {zoom_k_max}$")

        eps_c = float(b["eps"].iloc[0]) if len(b) else float("nan")
        _curves(ax_c, b, "delta_g_log2", [m for m in methods if m != "basic"], dg_colors)
        basic = b[b["method"] == "basic"].drop_duplicates("k")  # independent of delta_g
        if len(basic):
            ax_c.plot(basic["k"], basic["eps_g"], color="#777777", **_style("basic"))
        ax_c.set_xlim(0, kmax)
        top = b[b["method"] != "basic"]["eps_g"].replace(np.inf, np.nan).max()
        ax_c.set_ylim(0, 1.08 * top if np.isfinite(top) else None)
        ax_c.set_title(rf"(c) $\varepsilon$ = {eps_c:g}, $\delta=0$, several $\delta_g$")
        ax_c.legend(handles=[Line2D([], [], color=c, lw=1.6, label=rf"$\delta_g$ = {pow2(v)}")
                             for v, c in dg_colors.items()] +
                    [Line2D([], [], color="#777777", **_style("basic"), label="Summing (any $\\delta_g$)")],
                    loc="upper left", fontsize=6.5)

        opt = a[a["method"] == "optimal"].set_index(["eps", "k"])["eps_g"]
        for e, group in a.groupby("eps", sort=False):
            ref = opt.loc[e].reindex(group["k"].unique())
            for m in methods:
                if m == "optimal":
                    continue
                g = group[group["method"] == m]
                ax_d.plot(g["k"], g["eps_g"].to_numpy() / ref.to_numpy(), color=eps_colors[e], **_style(m))
        ax_d.axhline(1.0, color="#333333", **_style("optimal"))
        ax_d.set_xscale("log")
        ax_d.set_xlim(1, kmax)
        ax_d.set_ylim(0.95, 2.5)
        ax_d.set_title(r"(d) each curve of (a) divided by Optimal")
        # name the three bundles where they are apart (DRV falls from the left, Summing
        # rises to the right, the KOV bound settles lowest)
        for text, xy, ha in [("DRV", (5.5, 2.3), "right"), ("Summing", (230, 2.3), "left"),
                             ("KOV bound", (400, 1.06), "center"), ("Optimal", (1.3, 1.07), "left")]:
            if xy[0] <= kmax:
                ax_d.text(*xy, text, fontsize=6.5, ha=ha, va="center", color="#333333",
                          bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})

        for ax in (ax_a, ax_b, ax_c, ax_d):
            ax.set_xlabel(r"number of mechanisms $k$")
        for ax in (ax_a, ax_b, ax_c):
            ax.set_ylabel(r"global privacy $\varepsilon_g$")
        ax_d.set_ylabel(r"$\varepsilon_g$ / optimal $\varepsilon_g$")

        theorem = [Line2D([], [], color="#333333", **_style(m), label=LABEL.get(m, m)) for m in methods]
        colours = [Line2D([], [], color=c, lw=2.0, label=rf"$\varepsilon$ = {e:g}") for e, c in eps_colors.items()]
        fig.legend(handles=theorem, loc="outside upper center", ncols=len(theorem), title="line style = theorem",
                   title_fontproperties={"size": 7, "weight": "bold"})
        ax_a.legend(handles=colours, loc="upper left", ncols=2, fontsize=6.5,
                    title=r"colour = $\varepsilon$ per mechanism" + "\n" + "(also in (b) and (d))",
                    title_fontproperties={"size": 6.5})
    return fig


def excess_over_optimal(curves_csv, *, methods=("kov", "drv")) -> plt.Figure:
    """How far the closed forms sit above the optimum in MV Fig. 2 (c) (one eps, several
    delta_g): 100 (bound / optimal - 1) % against k.  Colour = delta_g (as in Fig. 2 (c)),
    line style = theorem."""
    df = read_csv(curves_csv)
    c = df[df["panel"] == "by_delta_g"]
    wide = c.pivot_table(index=["delta_g_log2", "k"], columns="method", values="eps_g").reset_index()
    colors = delta_g_color(sorted(wide["delta_g_log2"].unique(), reverse=True))
    methods = [m for m in methods if m in wide]
    with use_style():
        fig, ax = plt.subplots(figsize=(DOUBLE * 0.62, 2.9))
        top = 0.0
        for e2, g in wide.groupby("delta_g_log2", sort=False):
            for m in methods:
                pct = 100 * (g[m] / g["optimal"] - 1)
                ax.plot(g["k"], pct, color=colors[e2], **_style(m))
                top = max(top, float(pct[g["k"] >= 10].max()))
        ax.set_xscale("log")
        ax.set_xlim(1, wide["k"].max())
        ax.set_ylim(0, min(1.05 * top, 150))
        ax.set_xlabel(r"number of mechanisms $k$")
        ax.set_ylabel(r"% above the optimal $\varepsilon_g$")
        eps = float(c["eps"].iloc[0]) if len(c) else float("nan")
        ax.set_title(rf"$\varepsilon$ = {eps:g} per mechanism, $\delta$ = 0")
        theorem = [Line2D([], [], color="#333333", **_style(m), label=LABEL.get(m, m)) for m in methods]
        colour = [Line2D([], [], color=col, lw=1.6, label=rf"$\delta_g$ = {pow2(e2)}") for e2, col in colors.items()]
        spacer = Line2D([], [], ls="none", label=" ")
        fig.legend(handles=theorem + [spacer] + colour, loc="outside right center", alignment="left",
                   title=r"line style = theorem" + "\n" + r"colour = $\delta_g$")
    return fig
