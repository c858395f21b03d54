"""Wall-clock scaling of the algorithms, and accuracy versus time (timing CSVs)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from ..experiments.io import read_csv
from .style import COLOR, DOUBLE, LINESTYLE, use_style

__all__ = ["scaling"]

NAME = {
    "approx_paper": "Approximation, as published (Thm 1.7)",
    "approx": "Approximation, certified fast (Thm 1.7)",
    "dp_accounting": "PLD accountant (dp_accounting)",
    "optimal": "Exact (optcomp)",
    "bruteforce": r"Exact, $2^k$ brute force (Thm 1.5)",
}
SHORT = {
    "approx_paper": "Thm 1.7, published",
    "approx": "Thm 1.7, fast",
    "dp_accounting": "dp_accounting PLD",
    "optimal": "exact (optcomp)",
    "bruteforce": "exact, brute force",
}
MARK = {"approx_paper": "s", "approx": "o", "dp_accounting": "^", "optimal": "D", "bruteforce": "v"}
COLOR_T = dict(COLOR, bruteforce="#999999")
STYLE_T = dict(LINESTYLE, bruteforce=(0, (1, 1)))


def _panel(ax, df, experiment, x="k"):
    sub = df[df["experiment"] == experiment]
    for method, g in sub.groupby("method", sort=False):
        xs = 1.0 / g["eta"] if x == "1/eta" else g["k"]
        ax.plot(xs, g["seconds"], color=COLOR_T.get(method), ls=STYLE_T.get(method, "solid"),
                marker=MARK.get(method, "o"), ms=3, lw=1.0)
    ax.set_yscale("log")


def scaling(vs_k_csv, vs_eta_csv, exact_het_csv, exact_hom_csv, accuracy_csv, slopes_csv) -> plt.Figure:
    """Six panels: (a) time vs k at fixed accuracy (log-log); (b) time vs 1/eta at fixed k;
    (c) exact heterogeneous composition, 2^k brute force vs optcomp (log time vs k);
    (d) exact homogeneous composition up to k = 10^6 vs dp_accounting; (e) error vs time of
    the approximate methods; (f) fitted vs theoretical exponents.  Legends give each
    fitted slope (over the larger half of the sizes) beside the theoretical one."""
    vs_k, vs_eta = read_csv(vs_k_csv), read_csv(vs_eta_csv)
    het, hom, acc = read_csv(exact_het_csv), read_csv(exact_hom_csv), read_csv(accuracy_csv)
    slopes = read_csv(slopes_csv)
    with use_style():
        fig, axes = plt.subplots(2, 3, figsize=(DOUBLE, 5.2))
        (ax_a, ax_b, ax_c), (ax_d, ax_e, ax_f) = axes

        _panel(ax_a, vs_k, "approx_vs_k")
        ax_a.set_xscale("log")
        ax_a.set_title(r"(a) time vs $k$, fixed $\eta$")
        ax_a.set_xlabel(r"number of mechanisms $k$")

        _panel(ax_b, vs_eta, "approx_vs_eta", x="1/eta")
        ax_b.set_xscale("log")
        k_b = int(vs_eta["k"].iloc[0]) if len(vs_eta) else 0
        ax_b.set_title(rf"(b) time vs accuracy, $k$ = {k_b}")
        ax_b.set_xlabel(r"$1/\eta$ (additive accuracy $\eta$)")

        _panel(ax_c, het, "exact_heterogeneous")
        ax_c.set_title(r"(c) exact, heterogeneous")
        ax_c.set_xlabel(r"number of mechanisms $k$ (distinct $\varepsilon_i$)")

        _panel(ax_d, hom, "exact_homogeneous")
        ax_d.set_xscale("log")
        ax_d.set_title(r"(d) exact, $k$ identical mechanisms")
        ax_d.set_xlabel(r"number of mechanisms $k$")

        for method, g in acc.groupby("method", sort=False):
            err = np.maximum(g["error"].to_numpy(), 1e-12)
            ax_e.plot(g["seconds"], err, color=COLOR_T.get(method), ls=STYLE_T.get(method, "solid"),
                      marker=MARK.get(method, "o"), ms=3, lw=1.0)
        ax_e.set_xscale("log")
        ax_e.set_yscale("log")
        k_e = int(acc["k"].iloc[0]) if len(acc) else 0
        kind = acc["reference_kind"].iloc[0] if len(acc) else ""
        ax_e.set_title(rf"(e) accuracy vs time, $k$ = {k_e}")
        ax_e.set_xlabel("wall time per call (s)")
        ax_e.set_ylabel(r"$\varepsilon_g$ $-$ " + ("exact optimum" if kind == "exact" else "lower bound on optimum"))

        for ax in (ax_a, ax_b, ax_c, ax_d):
            ax.set_ylabel("wall time per call (s)")

        ax_f.axis("off")
        ax_f.set_title("(f) exponents: fit vs theory")
        panel = {"approx_vs_k": "a", "approx_vs_eta": "b", "exact_heterogeneous": "c", "exact_homogeneous": "d"}
        rows = [f"{'':4}{'method':<22}{'fit':>6}{'theory':>8}"]
        for row in slopes.itertuples(index=False):
            fitted = f"{row.fitted_slope:.2f}" if math.isfinite(row.fitted_slope) else "-"
            rows.append(f"({panel.get(row.experiment, '?')}) {SHORT.get(row.method, row.method):<22}"
                        f"{fitted:>6}{row.theoretical_slope:>8g}")
        ax_f.text(0.0, 1.0, "\n".join(rows), family="monospace", fontsize=6.2, va="top", ha="left",
                  transform=ax_f.transAxes, linespacing=1.5)
        ax_f.text(0.0, 0.0, "(c): slope of log$_2$(time) per mechanism;\nothers: log-log slopes, larger half of the\n"
                  "sizes. Timings depend on the machine\nand its load.", fontsize=5.8,
                  transform=ax_f.transAxes, va="bottom")
        present = [m for m in NAME if any(m in set(d["method"]) for d in (vs_k, vs_eta, het, hom, acc))]
        handles = [Line2D([], [], color=COLOR_T.get(m), ls=STYLE_T.get(m, "solid"), marker=MARK.get(m, "o"), ms=3,
                          label=NAME[m]) for m in present]
        fig.legend(handles=handles, loc="outside upper center", ncols=3)
    return fig

