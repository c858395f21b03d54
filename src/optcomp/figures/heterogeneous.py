"""Heterogeneous composition: the approximation algorithm against the KOV bound (MV poster)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, HET_LABEL, LINESTYLE, pow2, use_style

__all__ = ["comparison", "by_distribution"]

_ORDER = ["basic", "drv", "kov", "approx_paper", "approx", "optimal"]


def _label(m, df):
    eta = df.loc[df["method"] == m, "eta"]
    if m == "approx_paper" and len(eta):
        return rf"Approximation, as published (Thm 1.7, $\eta$ = {eta.iloc[0]:g})"
    if m == "approx" and len(eta):
        return rf"Approximation, certified band (Thm 1.7, width $\leq$ {eta.iloc[0]:g}; see (c))"
    return HET_LABEL.get(m, m)


def comparison(results_csv, mechanisms_csv=None) -> plt.Figure:
    """(a) eps_g vs k for heterogeneous mechanisms: Summing, DRV, the KOV heterogeneous
    bound, the approximation algorithm (published version at its eta, and the certified
    fast version as a band lower..upper), and the exact optimum where computable (dots).
    (b) every curve divided by the certified lower bound on the optimum (the band's
    lower edge; logarithmic, so that no curve leaves the panel): how far above the optimum
    each theorem's guarantee is.  (c) the certified band's width upper - lower (too thin to
    see in (a)) and the published algorithm's excess, against the tolerance.  If
    ``mechanisms_csv`` is given, an inset in (a) shows the histogram of the eps_i.

    A table with ``distribution`` and ``seed`` columns (several instances configured) is
    drawn by :func:`by_distribution` instead: one column of panels per distribution."""

    df = read_csv(results_csv)
    if "distribution" in df.columns:
        return by_distribution(df, None if mechanisms_csv is None else read_csv(mechanisms_csv))
    methods = [m for m in _ORDER if m in set(df["method"])]
    lower = df[df["method"] == "approx"].set_index("k")["eps_g_lower"]
    if lower.empty:
        lower = df[df["method"] == "optimal"].set_index("k")["eps_g"]
    with use_style():
        fig, (ax_a, ax_b, ax_c) = plt.subplots(1, 3, figsize=(DOUBLE, 2.9))
        ratio_max = 1.0
        for m in methods:
            g = df[df["method"] == m]
            ratio = g["eps_g"].to_numpy() / lower.reindex(g["k"]).to_numpy()
            if m == "optimal":
                ax_a.plot(g["k"], g["eps_g"], ls="none", marker="o", ms=3.2, mfc="none", mec=COLOR["optimal"],
                          mew=0.9, zorder=5)
                ax_b.plot(g["k"], ratio, ls="none", marker="o", ms=3.2, mfc="none", mec=COLOR["optimal"], mew=0.9,
                          zorder=5)
                continue
            finite = ratio[np.isfinite(ratio)]
            ratio_max = max(ratio_max, float(finite.max()) if finite.size else 1.0)
            if m == "approx":
                ax_a.fill_between(g["k"], g["eps_g_lower"], g["eps_g"], color=COLOR["approx"], alpha=0.35, lw=0)
            ax_a.plot(g["k"], g["eps_g"], color=COLOR[m], ls=LINESTYLE[m], lw=1.1 if m != "approx" else 0.9)
            ax_b.plot(g["k"], ratio, color=COLOR[m], ls=LINESTYLE[m], lw=1.1 if m != "approx" else 0.9)
        for ax in (ax_a, ax_b, ax_c):
            ax.set_xscale("log")
            ax.set_xlabel(r"number of mechanisms $k$")
        ax_a.set_yscale("log")
        ax_a.set_ylabel(r"global privacy $\varepsilon_g$")
        _ratio_axis(ax_b, ratio_max)
        ax_b.set_ylabel(r"$\varepsilon_g$ / lower bound on optimal $\varepsilon_g$")
        e2, delta = int(df["delta_g_log2"].iloc[0]), float(df["delta"].iloc[0])
        ax_a.set_title(rf"(a) $\delta_i$ = {delta:g}, $\delta_g$ = {pow2(e2)}")
        ax_b.set_title("(b) relative to the optimum")

        # (c) the band that (a) cannot show
        # widths at the rounding level of eps_g (down to 1e-19 where the bracket is exact) are
        # drawn on the floor FLOOR with a downward triangle, and the legend says so
        floor = 1e-16
        ap = df[df["method"] == "approx"]
        if len(ap):
            width = (ap["eps_g"] - ap["eps_g_lower"]).to_numpy()
            ax_c.plot(ap["k"], np.maximum(width, floor), color=COLOR["approx"], marker="o", ms=2.5, lw=1.0,
                      label="band width")
            below = width < floor
            if below.any():
                ax_c.plot(ap["k"].to_numpy()[below], np.full(below.sum(), floor), ls="none", marker="v", ms=3.5,
                          mfc="white", mec=COLOR["approx"], mew=0.9,
                          label="$<10^{-16}$\n(rounding),\ndrawn at $10^{-16}$")
            tol = float(ap["eta"].iloc[0])
            ax_c.axhline(tol, color=COLOR["approx"], ls=(0, (2, 2)), lw=0.8, label=rf"tolerance {tol:g}")
        pp = df[df["method"] == "approx_paper"]
        if len(pp):
            excess = pp["eps_g"].to_numpy() - lower.reindex(pp["k"]).to_numpy()
            ax_c.plot(pp["k"], np.maximum(excess, floor), color=COLOR["approx_paper"], ls=LINESTYLE["approx_paper"],
                      lw=1.0, label="published $-$ lower")
            eta = float(pp["eta"].iloc[0])
            ax_c.axhline(eta, color=COLOR["approx_paper"], ls=(0, (2, 2)), lw=0.8, label=rf"$\eta$ = {eta:g}")
        ax_c.set_yscale("log")
        ax_c.set_ylabel(r"gap in $\varepsilon_g$")
        ax_c.set_title("(c) tightness of Thm 1.7")
        # lower right, under the tolerance lines and right of the band's rise (which the legend
        # touched when it reached out of the frame to the left)
        ax_c.legend(loc="lower right", bbox_to_anchor=(1.03, 0.1), fontsize=5.3, handlelength=1.0, handletextpad=0.3,
                    borderaxespad=0.2)

        if mechanisms_csv is not None:
            mech = read_csv(mechanisms_csv)
            inset = ax_a.inset_axes([0.6, 0.12, 0.36, 0.3])
            inset.hist(mech["eps"], bins=20, color="#999999")
            inset.set_xlabel(r"$\varepsilon_i$ drawn", fontsize=5.5, labelpad=1)
            inset.set_ylabel("count", fontsize=5.5, labelpad=1)
            inset.tick_params(labelsize=5, length=2, pad=1)
            inset.grid(False)
        handles = []
        for m in methods:
            if m == "optimal":
                handles.append(Line2D([], [], ls="none", marker="o", mfc="none", mec=COLOR[m], label=_label(m, df)))
            elif m == "approx":
                handles.append((Patch(color=COLOR[m], alpha=0.35, label=_label(m, df))))
            else:
                handles.append(Line2D([], [], color=COLOR[m], ls=LINESTYLE[m], label=_label(m, df)))
        fig.legend(handles=handles, loc="outside upper center", ncols=2)
    return fig


def _ratio_axis(ax, ratio_max):
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_yscale("log")
    ax.set_ylim(0.97, 1.08 * ratio_max)
    ticks = [t for t in (1, 1.2, 1.5, 2, 3, 5, 10, 20, 50) if t <= 1.08 * ratio_max]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_yticklabels([f"{t:g}" for t in ticks])


def by_distribution(df, mech=None) -> plt.Figure:
    """Several instances (``distribution`` and ``seed`` columns): one column of panels per
    distribution, in the table's order.  Top: eps_g vs k of every method, one line per seed
    (the certified band drawn as a band, the exact optimum as dots), with the histogram of
    the first seed's eps_i as an inset if ``mech`` (the mechanisms table) is given.  Bottom:
    every curve divided by the certified lower bound on the optimum of its own seed (shared
    logarithmic axis across the columns, so the distributions compare directly)."""
    dists = list(dict.fromkeys(df["distribution"]))
    seeds = list(dict.fromkeys(df["seed"]))
    methods = [m for m in _ORDER if m in set(df["method"])]
    n = len(dists)
    letters = "abcdefghijklmnopqrstuvwxyz"
    with use_style():
        fig, axes = plt.subplots(2, n, figsize=(DOUBLE, 5.0), sharex=True, squeeze=False)
        for ax in axes[1, 1:]:
            ax.sharey(axes[1, 0])  # the ratios on one scale; each eps_g panel its own
        ratio_max = 1.0
        for j, dist in enumerate(dists):
            ax_a, ax_b = axes[0, j], axes[1, j]
            sub = df[df["distribution"] == dist]
            for seed in dict.fromkeys(sub["seed"]):
                one = sub[sub["seed"] == seed]
                lower = one[one["method"] == "approx"].set_index("k")["eps_g_lower"]
                if lower.empty:
                    lower = one[one["method"] == "optimal"].set_index("k")["eps_g"]
                for m in methods:
                    g = one[one["method"] == m]
                    ratio = g["eps_g"].to_numpy() / lower.reindex(g["k"]).to_numpy()
                    if m == "optimal":
                        for ax, y in ((ax_a, g["eps_g"]), (ax_b, ratio)):
                            ax.plot(g["k"], y, ls="none", marker="o", ms=2.6, mfc="none", mec=COLOR[m], mew=0.7,
                                    zorder=5)
                        continue
                    finite = ratio[np.isfinite(ratio)]
                    ratio_max = max(ratio_max, float(finite.max()) if finite.size else 1.0)
                    if m == "approx":
                        ax_a.fill_between(g["k"], g["eps_g_lower"], g["eps_g"], color=COLOR[m], alpha=0.35, lw=0)
                    lw = 1.0 if m != "approx" else 0.8
                    ax_a.plot(g["k"], g["eps_g"], color=COLOR[m], ls=LINESTYLE[m], lw=lw)
                    ax_b.plot(g["k"], ratio, color=COLOR[m], ls=LINESTYLE[m], lw=lw)
            ax_a.set_title(f"({letters[j]}) {dist}", fontsize=7)
            ax_b.set_title(f"({letters[n + j]}) relative to the optimum", fontsize=7)
            for ax in (ax_a, ax_b):
                ax.set_xscale("log")
            ax_a.set_yscale("log")
            ax_b.set_xlabel(r"number of mechanisms $k$")
            if mech is not None:
                drawn = mech[(mech["distribution"] == dist) & (mech["seed"] == mech["seed"].iloc[0])]
                if len(drawn):
                    inset = ax_a.inset_axes([0.58, 0.1, 0.38, 0.28])
                    inset.hist(drawn["eps"], bins=20, color="#999999")
                    inset.set_title(r"$\varepsilon_i$ drawn", fontsize=5.5, pad=1)
                    inset.tick_params(labelsize=4.5, length=2, pad=1)
                    inset.set_yticks([])
                    inset.grid(False)
        _ratio_axis(axes[1, 0], ratio_max)
        axes[0, 0].set_ylabel(r"global privacy $\varepsilon_g$")
        axes[1, 0].set_ylabel(r"$\varepsilon_g$ / lower bound on optimal $\varepsilon_g$")
        e2, delta = int(df["delta_g_log2"].iloc[0]), float(df["delta"].iloc[0])
        seed_text = f"one line per seed ({len(seeds)}: {', '.join(map(str, seeds))})" if len(seeds) > 1 else \
            f"seed {seeds[0]}"
        handles = []
        for m in methods:
            if m == "optimal":
                handles.append(Line2D([], [], ls="none", marker="o", mfc="none", mec=COLOR[m], label=_label(m, df)))
            elif m == "approx":
                handles.append(Patch(color=COLOR[m], alpha=0.35, label=_label(m, df).replace("; see (c)", "")))
            else:
                handles.append(Line2D([], [], color=COLOR[m], ls=LINESTYLE[m], label=_label(m, df)))
        fig.legend(handles=handles, loc="outside upper center", ncols=2,
                   title=rf"$\delta_i$ = {delta:g}, $\delta_g$ = {pow2(e2)}; the $\varepsilon_i$ distribution by column, {seed_text}",
                   title_fontsize=6.5)
    return fig
