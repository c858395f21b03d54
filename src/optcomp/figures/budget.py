"""What tighter composition buys: Laplace noise per query under a global budget."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, LABEL, LINESTYLE, sci, use_style

__all__ = ["noise"]

_ORDER = ["basic", "drv", "kov", "advanced_pure", "optimal"]
_BUDGET_STYLE = ["solid", (0, (4, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2))]


def noise(budget_csv) -> plt.Figure:
    """(a) Laplace scale b = 1/eps per query (sensitivity 1) needed so that k queries stay
    within the first global budget, per theorem; (b) the noise relative to what the
    optimal theorem needs, for every budget.  One legend grammar in both panels:
    colour = theorem, line style = budget.  The per-query eps is what each composition
    theorem certifies for *any* eps-DP mechanism (optimal composition is optimal over all
    of them), not an accounting specific to the Laplace mechanism."""
    df = read_csv(budget_csv)
    methods = [m for m in _ORDER if m in set(df["method"])]
    budgets = df[["eps_g", "delta_g"]].drop_duplicates().itertuples(index=False)
    budgets = [tuple(b) for b in budgets]
    width = {"optimal": 1.6}
    with use_style():
        fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(DOUBLE, 3.0))
        eg0, dg0 = budgets[0]
        first = df[(df["eps_g"] == eg0) & (df["delta_g"] == dg0)]
        for m in methods:
            g = first[first["method"] == m]
            ax_a.plot(g["k"], g["laplace_scale"], color=COLOR[m], ls=_BUDGET_STYLE[0], lw=width.get(m, 1.1))
        ax_a.set_xscale("log")
        ax_a.set_yscale("log")
        ax_a.set_xlabel(r"number of queries $k$ (sensitivity 1)")
        ax_a.set_ylabel(r"Laplace scale $b = 1/\varepsilon$ per query")
        ax_a.set_title(rf"(a) global budget $\varepsilon_g$ = {eg0:g}, $\delta_g$ = {sci(dg0)}")

        for style, (eg, dg) in zip(_BUDGET_STYLE, budgets):
            sub = df[(df["eps_g"] == eg) & (df["delta_g"] == dg)]
            for m in methods:
                if m == "optimal":
                    continue
                g = sub[sub["method"] == m]
                ax_b.plot(g["k"], g["scale_over_optimal"], color=COLOR[m], ls=style, lw=1.1)
        ax_b.axhline(1.0, color=COLOR["optimal"], lw=width["optimal"])
        ax_b.set_xscale("log")
        ax_b.set_ylim(0.95, 2.0)
        ax_b.set_xlabel(r"number of queries $k$")
        ax_b.set_ylabel("noise / noise under Optimal")
        ax_b.set_title("(b) noise relative to Optimal, every budget")
        budget_handles = [Line2D([], [], color="#555555", ls=s, label=rf"$\varepsilon_g$ = {eg:g}, $\delta_g$ = {sci(dg)}")
                          for s, (eg, dg) in zip(_BUDGET_STYLE, budgets)]
        ax_b.legend(handles=budget_handles, loc="upper right", title="line style = budget")

        handles = [Line2D([], [], color=COLOR[m], lw=width.get(m, 1.6) + 0.4, label=LABEL[m]) for m in methods]
        fig.legend(handles=handles, loc="outside upper center", ncols=len(handles),
                   title="colour = composition theorem (per-query $\\varepsilon$ certified for any "
                         "$\\varepsilon$-DP mechanism, Laplace as the example)",
                   title_fontproperties={"size": 7})
    return fig
