"""MV Figure 2: eps_g versus k under four composition theorems (four panels)."""

from __future__ import annotations

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, LABEL, LINESTYLE, pow2, use_style

__all__ = ["mv_figure2"]

_ORDER = ["basic", "drv", "kov", "advanced_pure", "optimal"]


def _methods(df):
    present = list(df["method"].drop_duplicates())
    return [m for m in _ORDER if m in present] + [m for m in present if m not in _ORDER]


def _curves(ax, df, group_key, methods, kmax=None, end_label=None):
    for value, group in df.groupby(group_key, sort=False):
        for m in methods:
            g = group[group["method"] == m]
            if kmax is not None:
                g = g[g["k"] <= kmax]
            ax.plot(g["k"], g["eps_g"], color=COLOR.get(m), ls=LINESTYLE.get(m, "solid"), lw=1.1)
        if end_label is not None:
            g = group[group["method"] == "optimal"]
            if kmax is not None:
                g = g[g["k"] <= kmax]
            if len(g):
                ax.annotate(end_label(value), (g["k"].iloc[-1], g["eps_g"].iloc[-1]), xytext=(3, 0),
                            textcoords="offset points", va="center", ha="left", fontsize=6.5)


def mv_figure2(curves_csv, *, zoom_k_max: int = 99) -> plt.Figure:
    """Murtagh-Vadhan Figure 2 from ``results/homogeneous/eps_g.csv``.

    (a) eps_g vs k for several per-mechanism eps at one delta_g; (b) the same for
    k <= ``zoom_k_max``; (c) eps = const, several delta_g; (d) each curve of (a) divided by
    the optimal one.  Colour and line style = theorem; each family is labelled at its
    optimal curve's right end.
    """
    df = read_csv(curves_csv)
    methods = _methods(df)
    a = df[df["panel"] == "by_eps"]
    b = df[df["panel"] == "by_delta_g"]
    kmax = int(df["k"].max())
    with use_style():
        fig, axes = plt.subplots(2, 2, figsize=(DOUBLE, 5.4))
        (ax_a, ax_b), (ax_c, ax_d) = axes

        e2 = int(a["delta_g_log2"].iloc[0]) if len(a) else 0
        _curves(ax_a, a, "eps", methods, end_label=lambda e: rf"$\varepsilon$={e:g}")
        ax_a.set_yscale("log")
        ax_a.set_xlim(0, kmax * 1.12)
        ax_a.set_title(rf"(a) $\delta=0$, $\delta_g$ = {pow2(e2)}")

        _curves(ax_b, a, "eps", methods, kmax=zoom_k_max, end_label=lambda e: rf"$\varepsilon$={e:g}")
        ax_b.set_yscale("log")
        ax_b.set_xlim(0, zoom_k_max * 1.15)
        ax_b.set_title(rf"(b) zoom: $k \leq {zoom_k_max}$")

        eps_c = float(b["eps"].iloc[0]) if len(b) else float("nan")
        _curves(ax_c, b, "delta_g_log2", [m for m in methods if m != "basic"],
                end_label=lambda x: rf"$\delta_g$={pow2(x)}")
        basic = b[b["method"] == "basic"].drop_duplicates("k")  # independent of delta_g
        if len(basic):
            ax_c.plot(basic["k"], basic["eps_g"], color=COLOR["basic"], ls=LINESTYLE["basic"], lw=1.1)
        ax_c.set_xlim(0, kmax * 1.18)
        top = b[b["method"] != "basic"]["eps_g"].replace(np.inf, np.nan).max()
        ax_c.set_ylim(0, 1.08 * top if np.isfinite(top) else None)
        ax_c.set_title(rf"(c) $\varepsilon$ = {eps_c:g}, $\delta=0$, several $\delta_g$")

        opt = a[a["method"] == "optimal"].set_index(["eps", "k"])["eps_g"]
        for e, group in a.groupby("eps", sort=False):
            ref = opt.loc[e].reindex(group["k"].unique())
            for m in methods:
                if m == "optimal":
                    continue
                g = group[group["method"] == m]
                ax_d.plot(g["k"], g["eps_g"].to_numpy() / ref.to_numpy(), color=COLOR.get(m),
                          ls=LINESTYLE.get(m, "solid"), lw=0.9, alpha=0.85)
        ax_d.axhline(1.0, color=COLOR["optimal"], lw=1.1)
        ax_d.set_xscale("log")
        ax_d.set_xlim(1, kmax)
        ax_d.set_ylim(0.95, 2.5)
        ax_d.set_title(r"(d) each curve of (a) divided by Optimal")

        for ax in (ax_a, ax_b, ax_c, ax_d):
            ax.set_xlabel(r"number of mechanisms $k$")
        for ax in (ax_a, ax_b, ax_c):
            ax.set_ylabel(r"global privacy $\varepsilon_g$")
        ax_d.set_ylabel(r"$\varepsilon_g$ / optimal $\varepsilon_g$")

        handles = [Line2D([], [], color=COLOR.get(m), ls=LINESTYLE.get(m, "solid"), lw=1.3, label=LABEL.get(m, m))
                   for m in methods]
        fig.legend(handles=handles, loc="outside upper center", ncols=len(handles))
    return fig
