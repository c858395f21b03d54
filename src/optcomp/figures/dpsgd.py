"""DP-SGD as published: eps against training steps, every accountant against optcomp's
certified bracket."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
import textwrap

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..experiments.io import read_csv
from .style import DOUBLE, OKABE_ITO, sci, use_style

__all__ = ["eps_steps", "ACCOUNTANT_STYLE"]

# colour, line style, label per accountant (one grammar in every panel)
ACCOUNTANT_STYLE = {
    "optcomp": (OKABE_ITO["black"], "solid", "optcomp, certified upper end (grey band: bracket)"),
    "rdp": (OKABE_ITO["orange"], (0, (4, 1.5)), "RDP (dp_accounting)"),
    "pld": (OKABE_ITO["blue"], (0, (6, 1.5, 1.2, 1.5)), "PLD (dp_accounting)"),
    "prv": (OKABE_ITO["green"], (0, (1.2, 1.2)), "PRV (its reported upper value)"),
}


def eps_steps(eps_csv, published_csv) -> plt.Figure:
    """Top row, one panel per workload: eps at delta against the number of steps, log-log,
    for every accountant, optcomp's bracket as a band (lower to upper end; narrower than the
    line at this scale), the published eps as a star at the published run's length.  Bottom
    row: each accountant's eps relative to optcomp's certified upper end, in per cent (above 0:
    it reports more than the certified bound; a value below optcomp's lower end -- marked with
    a cross -- under-reports the privacy loss)."""
    df = read_csv(eps_csv)
    pub = read_csv(published_csv)
    names = list(dict.fromkeys(df["workload"]))
    with use_style():
        fig, axes = plt.subplots(2, len(names), figsize=(DOUBLE, 4.4), squeeze=False, sharex="col",
                                 gridspec_kw={"height_ratios": [1.5, 1.0]})
        for j, name in enumerate(names):
            ax_a, ax_b = axes[0, j], axes[1, j]
            rows = df[df["workload"] == name]
            w = pub[pub["workload"] == name].iloc[0]
            ours = rows[rows["accountant"] == "optcomp"].sort_values("steps")
            ax_a.fill_between(ours["steps"], ours["lower"], ours["upper"], color=OKABE_ITO["black"], alpha=0.25, lw=0)
            for acc, (color, ls, _) in ACCOUNTANT_STYLE.items():
                g = rows[rows["accountant"] == acc].sort_values("steps")
                width = 1.6 if acc == "optcomp" else 1.1
                ax_a.plot(g["steps"], g["epsilon"], color=color, ls=ls, lw=width)
                if acc != "optcomp":
                    ax_b.plot(g["steps"], 100 * g["excess"], color=color, ls=ls, lw=1.1, marker="o", ms=2.2)
                    below = g[g["position"] == "below"]
                    ax_b.plot(below["steps"], 100 * below["excess"], ls="none", marker="x", ms=5, mew=1.2,
                              color=OKABE_ITO["vermillion"])
            if w["published_epsilon"] == w["published_epsilon"]:  # not NaN
                ax_a.plot([w["steps"]], [w["published_epsilon"]], ls="none", marker="*", ms=8,
                          color=OKABE_ITO["vermillion"])
                ax_a.annotate(f"published\n{w['published_epsilon']:g}", (w["steps"], w["published_epsilon"]),
                              xytext=(-6, 0), textcoords="offset points", ha="right", va="center", fontsize=6)
            ax_b.axhline(0.0, color=OKABE_ITO["black"], lw=1.6)
            low = 100 * (ours["lower"] / ours["upper"] - 1)
            ax_b.fill_between(ours["steps"], low, 0.0, color=OKABE_ITO["black"], alpha=0.25, lw=0)
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            for ax in (ax_a, ax_b):
                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(plain)
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax_a.set_yscale("log")
            ax_a.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax_a.yaxis.set_major_formatter(plain)
            ax_a.yaxis.set_minor_formatter(NullFormatter())
            ax_b.set_yscale("symlog", linthresh=0.1, linscale=0.6)  # linear within 0.1 %
            ax_b.yaxis.set_major_formatter(plain)
            title = textwrap.fill(f"({'abcdefgh'[j]}) {w['label']}", 30)
            ax_a.set_title(title + "\n" + rf"$\sigma$ = {w['noise_multiplier']:g}, $q$ = {w['sample_rate']:.3g}",
                           fontsize=6.5)
            ax_b.set_xlabel("training steps")
            if j == 0:
                ax_a.set_ylabel(rf"$\varepsilon$ at $\delta$ = {sci(w['delta_g'])}")
                ax_b.set_ylabel("vs optcomp's upper end (%)")
        excess = 100 * df.loc[df["accountant"] != "optcomp", "excess"]
        low = 100 * (df.loc[df["accountant"] == "optcomp", "lower"] / df.loc[df["accountant"] == "optcomp", "upper"] - 1)
        for ax in axes[1]:  # one scale for every workload, from the data
            ax.set_ylim(1.5 * min(-0.1, excess.min(), low.min()), 1.5 * max(0.1, excess.max()))
        handles = [Line2D([], [], color=c, ls=ls, lw=1.6, label=lab) for c, ls, lab in ACCOUNTANT_STYLE.values()]
        handles.append(Line2D([], [], ls="none", marker="*", ms=8, color=OKABE_ITO["vermillion"],
                              label="published (RDP)"))
        handles.append(Line2D([], [], ls="none", marker="x", ms=5, mew=1.2, color=OKABE_ITO["vermillion"],
                              label="below optcomp's certified lower end"))
        fig.legend(handles=handles, loc="outside upper center", ncols=3, fontsize=6)
    return fig
