"""MV Theorem 1.6 made runnable: the precision and the time of the #INT-PARTITION chain."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ..experiments.io import read_csv
from .style import DOUBLE, OKABE_ITO, use_style

__all__ = ["precision_and_time"]

# colour = instance family in both panels; marker = quantity in (a)
FAMILY_COLOR = {"random": OKABE_ITO["blue"], "planted": OKABE_ITO["vermillion"], "powers": OKABE_ITO["green"]}
BITS = [("bits_claim_4_17", "s", "Claim 4.17's sufficient input precision"),
        ("bits_oracle", "o", "oracle's working precision"),
        ("bits_sum", "^", "each SUM-PARTITION answer (Claim 4.16)")]


def precision_and_time(instances_csv, timing_csv) -> plt.Figure:
    """(a) bits against log2(prod z_i) for the instances that query the oracle, beside the
    3 log2(prod z_i) of Claims 4.14-4.16; (b) seconds in the four oracle calls against k,
    with a 2^k line through the largest instance.  Colour = family in both panels."""
    table = read_csv(instances_csv)
    timing = read_csv(timing_csv)
    queried = table[table["oracle_calls"] > 0].merge(timing, on=["family", "k"])
    families = [f for f in FAMILY_COLOR if f in set(queried["family"])]
    with use_style():
        fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(DOUBLE, 2.8))
        for fam in families:
            rows = queried[queried["family"] == fam]
            for col, marker, _ in BITS:
                ax_a.plot(rows["log2_product"], rows[col], ls="none", marker=marker, ms=3.2, mfc="white", mew=0.9,
                          color=FAMILY_COLOR[fam])
            ax_b.plot(rows["k"], rows["seconds_oracle"], marker="o", ms=3.2, mfc="white", mew=0.9, lw=1.0,
                      color=FAMILY_COLOR[fam])
        x = np.linspace(max(1.0, queried["log2_product"].min()), queried["log2_product"].max(), 50)
        ax_a.plot(x, 3 * x, color="#555555", ls=(0, (1, 1.5)), lw=0.9)
        ax_a.set_yscale("log")
        ax_a.set_xlabel(r"$\log_2 \Pi_i z_i$")
        ax_a.set_ylabel("bits")
        ax_a.set_title(r"(a) precision grows with $\log \Pi_i z_i$")

        ks = np.arange(queried["k"].min(), queried["k"].max() + 1)
        ref = queried.loc[queried["k"].idxmax()]
        ax_b.plot(ks, ref["seconds_oracle"] * 2.0 ** (ks - ref["k"]), color="#555555", ls=(0, (1, 1.5)), lw=0.9)
        ax_b.set_yscale("log")
        ax_b.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[2, 4, 5, 10]))
        ax_b.set_xlabel(r"number of integers $k$")
        ax_b.set_ylabel("seconds in the 4 oracle calls")
        ax_b.set_title(r"(b) each oracle call lists $2^{k+1}$ atoms")

        quantity = [Line2D([], [], ls="none", marker=m, ms=3.5, mfc="white", mew=0.9, color="#333333", label=lab)
                    for _, m, lab in BITS]
        quantity.append(Line2D([], [], color="#555555", ls=(0, (1, 1.5)), lw=0.9,
                               label=r"(a) $3 \log_2 \Pi z_i$, (b) $\propto 2^k$"))
        family = [Line2D([], [], color=FAMILY_COLOR[f], lw=2.0, label=f) for f in families]
        fig.legend(handles=quantity + family, loc="outside upper center", ncols=2,
                   title="marker = quantity in (a); colour = family of instances", title_fontproperties={"size": 7})
    return fig
