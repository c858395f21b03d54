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


def _ticks(ax, x_log=True, y_log=True):
    """At most ~5 labelled ticks per axis whatever the data range (no overlapping labels):
    decades when the axis spans two or more, else 1-2-5 steps; minor ticks unlabelled.
    Call after the data are drawn (it reads the limits)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    def fmt(v, _pos=None):
        return f"{v:g}"

    for axis, log, lim in ((ax.xaxis, x_log, ax.get_xlim()), (ax.yaxis, y_log, ax.get_ylim())):
        if not log:
            axis.set_major_locator(MaxNLocator(nbins=5, integer=True))
            continue
        decades = math.log10(max(lim) / min(lim)) if min(lim) > 0 else 10.0
        if decades >= 2:
            axis.set_major_locator(LogLocator(base=10, numticks=5))
        else:
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades >= 0.8 else
                                              (1.0, 1.5, 2.0, 3.0, 5.0, 7.0), numticks=12))
            axis.set_major_formatter(FuncFormatter(fmt))
        axis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10) * 0.1, numticks=12))
        axis.set_minor_formatter(NullFormatter())


def _fit_line(ax, slopes, experiment, method, g, x):
    """The fitted power law (or exponential) over the sizes it was fitted on, dashed."""
    row = slopes[(slopes["experiment"] == experiment) & (slopes["method"] == method)]
    if row.empty or not math.isfinite(float(row["fitted_slope"].iloc[0])):
        return
    r = row.iloc[0]
    xs = x.to_numpy(dtype=float)
    ys = g["seconds"].to_numpy(dtype=float)
    sel = (xs >= r["x_min"]) & (xs <= r["x_max"])
    if sel.sum() < 2:
        return
    xs, ys = xs[sel], ys[sel]
    if r["fit"].startswith("log2"):
        b = np.mean(np.log2(ys) - r["fitted_slope"] * xs)
        fit = 2.0 ** (b + r["fitted_slope"] * xs)
    else:
        b = np.mean(np.log(ys) - r["fitted_slope"] * np.log(xs))
        fit = np.exp(b + r["fitted_slope"] * np.log(xs))
    ax.plot(xs, fit, color=COLOR_T.get(method), lw=0.8, ls=(0, (3, 2)), alpha=0.9, zorder=2)


def _panel(ax, df, experiment, slopes, x="k"):
    """Median time per call (markers) with the spread of the repetitions (min..max
    whiskers), and the fitted slope over its sizes (dashed)."""
    sub = df[df["experiment"] == experiment]
    for method, g in sub.groupby("method", sort=False):
        g = g.sort_values("eta" if x == "1/eta" else "k", ascending=x != "1/eta")
        xs = 1.0 / g["eta"] if x == "1/eta" else g["k"]
        y = g["seconds"].to_numpy()
        lo = y - g["seconds_min"].to_numpy() if "seconds_min" in g else None
        hi = g["seconds_max"].to_numpy() - y if "seconds_max" in g else None
        ax.errorbar(xs, y, yerr=None if lo is None else [lo, hi], color=COLOR_T.get(method), ls="none",
                     marker=MARK.get(method, "o"), ms=3, mfc="white", mew=0.9, elinewidth=0.7, capsize=1.2, zorder=3)
        _fit_line(ax, slopes, experiment, method, g, xs)
    ax.set_yscale("log")


def _box(ax, text):
    ax.text(0.03, 0.97, text, transform=ax.transAxes, fontsize=5.8, va="top", ha="left",
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "#cccccc", "lw": 0.5, "alpha": 0.9}, zorder=6)


def scaling(vs_k_csv, vs_eta_csv, exact_het_csv, exact_hom_csv, accuracy_csv, slopes_csv) -> plt.Figure:
    """Six panels: (a) time vs k at fixed accuracy (log-log); (b) time vs 1/eta at fixed k;
    (c) exact heterogeneous composition, 2^k brute force vs optcomp (log time vs k);
    (d) exact homogeneous composition up to k = 10^12 vs dp_accounting; (e) error vs time of
    the approximate methods; (f) fitted exponents with 95 % confidence intervals beside
    the theoretical ones.  Markers: median of the repetitions, whiskers: min..max,
    dashed: the fitted slope over the sizes it was fitted on."""
    vs_k, vs_eta = read_csv(vs_k_csv), read_csv(vs_eta_csv)
    het, hom, acc = read_csv(exact_het_csv), read_csv(exact_hom_csv), read_csv(accuracy_csv)
    slopes = read_csv(slopes_csv)
    with use_style():
        fig, axes = plt.subplots(2, 3, figsize=(DOUBLE, 5.6))
        (ax_a, ax_b, ax_c), (ax_d, ax_e, ax_f) = axes

        _panel(ax_a, vs_k, "approx_vs_k", slopes)
        ax_a.set_xscale("log")
        ax_a.set_title(r"(a) time vs $k$")
        ax_a.set_xlabel(r"number of mechanisms $k$")
        eta_of = {m: g["eta"].iloc[0] for m, g in vs_k.groupby("method")}
        lines = []
        if "approx_paper" in eta_of:
            lines.append(rf"published: $\eta$ = {eta_of['approx_paper']:g}")
        if "approx" in eta_of:
            lines.append(rf"fast: $\eta$ = tol = {eta_of['approx']:g}")
        if "dp_accounting" in eta_of:
            lines.append(rf"PLD: interval {eta_of['dp_accounting']:g}")
        _box(ax_a, "\n".join(lines))

        _panel(ax_b, vs_eta, "approx_vs_eta", slopes, x="1/eta")
        ax_b.set_xscale("log")
        k_b = int(vs_eta["k"].iloc[0]) if len(vs_eta) else 0
        ax_b.set_title(rf"(b) time vs $1/\eta$, $k$ = {k_b}")
        ax_b.set_xlabel(r"$1/\eta$ (additive accuracy $\eta$)")

        _panel(ax_c, het, "exact_heterogeneous", slopes)
        ax_c.set_title(r"(c) exact, $k$ different $\varepsilon_i$")
        ax_c.set_xlabel(r"number of mechanisms $k$")

        _panel(ax_d, hom, "exact_homogeneous", slopes)
        ax_d.set_xscale("log")
        ax_d.set_title(r"(d) exact, $k$ identical")
        ax_d.set_xlabel(r"number of mechanisms $k$")
        for method, g in hom.groupby("method", sort=False):  # label the largest k reached
            last = g.loc[g["k"].idxmax()]
            sec = float(last["seconds"])
            when = f"{1e3 * sec:.3g} ms" if sec < 1 else f"{sec:.3g} s"
            # the curves rise to the right: the rightmost curve is labelled above its end (inside
            # the frame, off the markers), the others to the right of their end (free space)
            rightmost = last["k"] >= hom["k"].max()
            ax_d.annotate(rf"$k = 10^{{{math.log10(last['k']):.0f}}}$: {when}", (last["k"], last["seconds"]),
                          xytext=(2, 5) if rightmost else (6, 0), textcoords="offset points",
                          ha="right" if rightmost else "left", va="bottom" if rightmost else "center", fontsize=5.6,
                          color=COLOR_T.get(method),
                          bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})

        for method, g in acc.groupby("method", sort=False):
            err = np.maximum(g["error"].to_numpy(), 1e-12)
            ax_e.errorbar(g["seconds"], err, xerr=[g["seconds"] - g["seconds_min"], g["seconds_max"] - g["seconds"]],
                          color=COLOR_T.get(method), ls=STYLE_T.get(method, "solid"), marker=MARK.get(method, "o"),
                          ms=3, mfc="white", mew=0.9, lw=0.8, elinewidth=0.5, capsize=0)
        fast = acc[acc["method"] == "approx"]
        if len(fast) > 1:  # its time does not grow with the accuracy at this k: say why it zig-zags
            # in the lower right corner, clear of the curves (placed beside the fast curve's
            # lowest point, the text ran over its whiskers and out of the frame)
            ax_e.text(0.97, 0.12, "fast: one lattice pass,\ntime flat in the\ntolerance (order =\ntiming noise, "
                      "whiskers\nmin..max)", transform=ax_e.transAxes, ha="right", va="bottom", multialignment="left",
                      fontsize=5.4, color=COLOR_T.get("approx"))
        ax_e.set_xscale("log")
        ax_e.set_yscale("log")
        k_e = int(acc["k"].iloc[0]) if len(acc) else 0
        kind = acc["reference_kind"].iloc[0] if len(acc) else ""
        ax_e.set_title(rf"(e) error vs time, $k$ = {k_e}")
        ax_e.set_xlabel("wall time per call (s)")
        ax_e.set_ylabel(r"$\varepsilon_g$ $-$ " + ("exact optimum" if kind == "exact" else "lower bound on optimum"))

        for ax in (ax_a, ax_b, ax_c, ax_d):
            ax.set_ylabel("wall time per call (s)")
        for ax, xlog in ((ax_a, True), (ax_b, True), (ax_c, False), (ax_d, True), (ax_e, True)):
            _ticks(ax, x_log=xlog)

        ax_f.axis("off")
        ax_f.set_title("(f) fitted exponents")
        panel = {"approx_vs_k": "a", "approx_vs_eta": "b", "exact_heterogeneous": "c", "exact_homogeneous": "d"}
        rows = [f"{'':4}{'method':<17}{'fit [95% CI]':>17}{'th.':>5}{'n':>3}"]
        for row in slopes.itertuples(index=False):
            if math.isfinite(row.fitted_slope):
                ci = (f" [{row.slope_ci95_low:.2f},{row.slope_ci95_high:.2f}]"
                      if math.isfinite(row.slope_ci95_low) else " [ - ]")
                fitted = f"{row.fitted_slope:.2f}{ci}"
            else:
                fitted = "-"
            rows.append(f"({panel.get(row.experiment, '?')}) {SHORT.get(row.method, row.method):<17}"
                        f"{fitted:>17}{row.theoretical_slope:>5g}{row.points:>3d}")
        ax_f.text(-0.08, 1.0, "\n".join(rows), family="monospace", fontsize=5.5, va="top", ha="left",
                  transform=ax_f.transAxes, linespacing=1.55)
        ax_f.text(-0.08, 0.0, "(c): slope of log$_2$(time) per mechanism;\nothers: log-log slopes over the largest\n"
                  "n sizes (dashed in the panels). Markers:\nmedian of the repetitions, whiskers:\nmin..max. "
                  "Timings depend on the\nmachine and its load (see the CSV's\n.meta.json).", fontsize=5.6,
                  transform=ax_f.transAxes, va="bottom")
        present = [m for m in NAME if any(m in set(d["method"]) for d in (vs_k, vs_eta, het, hom, acc))]
        handles = [Line2D([], [], color=COLOR_T.get(m), ls="none", marker=MARK.get(m, "o"), ms=3.5, mfc="white",
                          mew=0.9, label=NAME[m]) for m in present]
        handles.append(Line2D([], [], color="#555555", lw=0.8, ls=(0, (3, 2)), label="fitted slope"))
        fig.legend(handles=handles, loc="outside upper center", ncols=3)
    return fig
