"""Heterogeneous composition: the approximation algorithm against the KOV bound (MV poster)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, HET_LABEL, LINESTYLE, pow2, use_style

__all__ = ["comparison"]

_ORDER = ["basic", "drv", "kov", "approx_paper", "approx", "optimal"]


def _label(m, df):
    eta = df.loc[df["method"] == m, "eta"]
    if m == "approx_paper" and len(eta):
        return rf"Approximation, as published (Thm 1.7, $\eta$ = {eta.iloc[0]:g})"
    if m == "approx" and len(eta):
        return rf"Approximation, certified band (Thm 1.7, width $\leq$ {eta.iloc[0]:g})"
    return HET_LABEL.get(m, m)


def comparison(results_csv, mechanisms_csv=None) -> plt.Figure:
    """(a) eps_g vs k for heterogeneous mechanisms: Summing, DRV, the KOV heterogeneous
    bound, the approximation algorithm (published version at its eta, and the certified
    fast version as a band lower..upper), and the exact optimum where computable (dots).
    (b) every curve divided by the certified lower bound on the optimum (the band's
    lower edge): how far above the optimum each theorem's guarantee is.  If
    ``mechanisms_csv`` is given, an inset shows the histogram of the eps_i."""
    df = read_csv(results_csv)
    methods = [m for m in _ORDER if m in set(df["method"])]
    lower = df[df["method"] == "approx"].set_index("k")["eps_g_lower"]
    if lower.empty:
        lower = df[df["method"] == "optimal"].set_index("k")["eps_g"]
    with use_style():
        fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(DOUBLE, 3.1))
        for m in methods:
            g = df[df["method"] == m]
            if m == "optimal":
                for ax in (ax_a, ax_b):
                    y = g["eps_g"].to_numpy() if ax is ax_a else g["eps_g"].to_numpy() / lower.reindex(g["k"]).to_numpy()
                    ax.plot(g["k"], y, ls="none", marker="o", ms=3.2, mfc="none", mec=COLOR["optimal"], mew=0.9,
                            zorder=5)
                continue
            if m == "approx":
                ax_a.fill_between(g["k"], g["eps_g_lower"], g["eps_g"], color=COLOR["approx"], alpha=0.35, lw=0)
                ratio_hi = g["eps_g"].to_numpy() / g["eps_g_lower"].to_numpy()
                ax_b.fill_between(g["k"], np.ones(len(g)), ratio_hi, color=COLOR["approx"], alpha=0.35, lw=0)
            ax_a.plot(g["k"], g["eps_g"], color=COLOR[m], ls=LINESTYLE[m], lw=1.1 if m != "approx" else 0.9)
            ax_b.plot(g["k"], g["eps_g"].to_numpy() / lower.reindex(g["k"]).to_numpy(), color=COLOR[m],
                      ls=LINESTYLE[m], lw=1.1 if m != "approx" else 0.9)
        for ax in (ax_a, ax_b):
            ax.set_xscale("log")
            ax.set_xlabel(r"number of mechanisms $k$")
        ax_a.set_yscale("log")
        ax_a.set_ylabel(r"global privacy $\varepsilon_g$")
        ax_b.set_ylabel(r"$\varepsilon_g$ / lower bound on optimal $\varepsilon_g$")
        ax_b.set_ylim(0.98, 1.6)
        e2, delta = int(df["delta_g_log2"].iloc[0]), float(df["delta"].iloc[0])
        ax_a.set_title(rf"(a) $k$ different $\varepsilon_i$, $\delta_i$ = {delta:g}, $\delta_g$ = {pow2(e2)}")
        ax_b.set_title("(b) relative to the optimum")
        if mechanisms_csv is not None:
            mech = read_csv(mechanisms_csv)
            inset = ax_a.inset_axes([0.62, 0.1, 0.34, 0.28])
            inset.hist(mech["eps"], bins=20, color="#999999")
            inset.set_title(r"$\varepsilon_i$ drawn", fontsize=6, loc="center", fontweight="normal")
            inset.tick_params(labelsize=5.5)
            inset.set_yticks([])
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
