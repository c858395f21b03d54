"""KOV Figures 2 and 3: privacy regions in the (false alarm, missed detection) plane."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, LINESTYLE, REGION_LABEL, SINGLE, use_style

__all__ = ["kov_figure2", "kov_figure3", "DIAGONAL"]

DIAGONAL = r"$P_{\mathrm{FA}} + P_{\mathrm{MD}} = 1$: perfect privacy (a coin flip)"


def _square(ax):
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel(r"false alarm $P_{\mathrm{FA}}$")
    ax.set_ylabel(r"missed detection $P_{\mathrm{MD}}$")
    # the anti-diagonal P_FA + P_MD = 1: the region of perfect privacy (eps = delta = 0),
    # where the adversary's test is no better than a coin flip
    ax.plot([0, 1], [1, 0], color="#888888", lw=0.7, ls=(0, (2, 2)), zorder=4, label=DIAGONAL)


def _outline(ax, g, **kw):
    x = g["p_fa"].to_numpy()
    ax.plot(x, g["p_md_min"].to_numpy(), **kw)
    kw.pop("label", None)
    ax.plot(x, g["p_md_max"].to_numpy(), **kw)


def kov_figure2(boundary_csv) -> plt.Figure:
    """Regions of the k-fold composition (optimal, KOV Thm 3.3) for k = 1..k_max, one
    panel per delta; each k its own colour (viridis: light = few mechanisms, dark = many =
    larger region, less privacy), boundaries in white."""
    df = read_csv(boundary_csv)
    deltas = list(df["delta"].drop_duplicates())
    ks = sorted(df["k"].unique())
    shades = plt.get_cmap("viridis_r")(np.linspace(0.08, 0.92, len(ks)))
    with use_style():
        fig, axes = plt.subplots(1, len(deltas), figsize=(DOUBLE if len(deltas) > 1 else SINGLE, 3.2),
                                 squeeze=False, layout="compressed")  # fixed-aspect axes
        for i, (ax, d) in enumerate(zip(axes[0], deltas)):
            sub = df[df["delta"] == d]
            eps = sub["eps"].iloc[0]
            for shade, k in zip(shades[::-1], ks[::-1]):  # largest region underneath
                g = sub[sub["k"] == k]
                ax.fill_between(g["p_fa"], g["p_md_min"], g["p_md_max"], color=shade, alpha=0.85, lw=0, zorder=2)
            for shade, k in zip(shades, ks):
                g = sub[sub["k"] == k]
                _outline(ax, g, color="white", lw=0.6, zorder=3)
            _square(ax)
            ax.grid(False)
            ax.set_title(rf"({'abcdefgh'[i % 8]}) $\varepsilon$ = {eps:g}, $\delta$ = {d:g}")
        handles = [plt.Rectangle((0, 0), 1, 1, color=s, alpha=0.85) for s in shades]
        diagonal = plt.Line2D([], [], color="#888888", lw=0.7, ls=(0, (2, 2)))
        fig.legend(handles + [diagonal], [f"k = {k}" for k in ks] + ["perfect privacy\n" + r"($P_{\mathrm{FA}} + P_{\mathrm{MD}} = 1$)"],
                   loc="outside right center", title="mechanisms")
    return fig


def kov_figure3(boundary_csv) -> plt.Figure:
    """Regions certified for one composition by basic (Thm 3.1), advanced/DRV (Thm 3.2) and
    optimal (Thm 3.3) composition; smaller region = stronger privacy guarantee."""
    df = read_csv(boundary_csv)
    order = [m for m in ["basic", "drv", "kov", "optimal"] if m in set(df["method"])]
    first = df.iloc[0]
    with use_style():
        fig, ax = plt.subplots(figsize=(SINGLE, 3.9), layout="compressed")  # fixed-aspect axes
        for m in order:
            g = df[df["method"] == m]
            ax.fill_between(g["p_fa"], g["p_md_min"], g["p_md_max"], color=COLOR[m], alpha=0.12, lw=0, zorder=2)
            _outline(ax, g, color=COLOR[m], ls=LINESTYLE[m], lw=1.2, zorder=3, label=REGION_LABEL.get(m, m))
        _square(ax)
        ax.grid(False)
        ax.set_title(rf"$k$ = {int(first['k'])} mechanisms, each ($\varepsilon$, $\delta$) = "
                     rf"({first['eps']:g}, {first['delta']:g})", loc="center")
        fig.legend(loc="outside lower center", ncols=1)
    return fig
