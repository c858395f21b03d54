"""MV Figure 2 (Section 6): eps_g versus k for k identical mechanisms, four theorems.

Sweeps ``optcomp.epsilon_g(eps, delta, k=k, delta_g=delta_g, method=m)`` for k = 1..k_max
and m in the config's methods ("basic" = Summing, MV Thm 1.2; "drv", Thm 1.3; "kov", the
KOV bound, Thm 6.1; "optimal", Thm 1.4).  A curve family is one (eps, delta_g) pair, every
method, every k; each family is one job (named by :func:`family_id`), so adding a value to
the config adds one job and reruns none of the others.  The merged table has one row per (panel, eps,
delta_g, k, method); :func:`ratio_table` reads the ratios to the optimum off it.
"""

from __future__ import annotations

from typing import IO

import pandas as pd

import optcomp

from .grids import delta_from_log2, float_list
from .io import Progress

__all__ = ["curves", "family_id", "family_ids", "family_spec", "ratio_spec", "figure_spec", "sweep_curves", "ratio_table", "ratio_markdown", "ratio_html", "COLUMNS"]

COLUMNS = ["panel", "eps", "delta", "delta_g_log2", "delta_g", "k", "method", "eps_g"]


def curves(cfg: dict) -> list[dict]:
    """The curve families of the config's ``homogeneous`` section, in a fixed order:
    panel "by_eps" (one per eps, shared delta_g), then panel "by_delta_g" (one per delta_g)."""
    out = []
    a = cfg["by_eps"]
    for eps in float_list(a["eps"]):
        out.append({"panel": "by_eps", "eps": eps, "delta": float(a["delta"]), "delta_g_log2": int(a["delta_g_log2"])})
    b = cfg["by_delta_g"]
    for e2 in b["delta_g_log2"]:
        out.append({"panel": "by_delta_g", "eps": float(b["eps"]), "delta": float(b["delta"]), "delta_g_log2": int(e2)})
    return out


def family_id(curve: dict) -> str:
    """A curve family's job name, e.g. ``by_eps-eps0.1-dg-25`` (panel, eps, log2 delta_g;
    delta too when it is not 0)."""
    name = f"{curve['panel']}-eps{curve['eps']!r}-dg{curve['delta_g_log2']}"
    return name if curve["delta"] == 0 else f"{name}-delta{curve['delta']!r}"


def family_ids(cfg: dict) -> list[str]:
    """The job names of the config's curve families, in :func:`curves` order."""
    ids = [family_id(c) for c in curves(cfg)]
    if len(set(ids)) != len(ids):
        raise ValueError(f"config homogeneous: repeated curve families {sorted({i for i in ids if ids.count(i) > 1})}")
    return ids


def family_spec(cfg: dict, family: str) -> dict:
    """The spec of one job: one curve family, every k up to ``k_max``, every method."""
    for curve in curves(cfg):
        if family_id(curve) == family:
            return {"curves": [curve], "k_max": int(cfg["k_max"]), "methods": list(cfg["methods"])}
    raise ValueError(f"no curve family {family!r} in the config (have {', '.join(family_ids(cfg))})")


def ratio_spec(cfg: dict) -> dict:
    return {"ks": list(cfg["ratio_k"])}


def figure_spec(cfg: dict) -> dict:
    return {"zoom_k_max": int(cfg["zoom_k_max"])}


def sweep_curves(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """eps_g for k = 1..spec["k_max"], every method of ``spec``, every curve family of the
    chunk (one row per family, method, k; in that order)."""
    ks = range(1, int(spec["k_max"]) + 1)
    methods = list(spec["methods"])
    progress = Progress(len(spec["curves"]) * len(methods) * len(ks), "homogeneous eps_g", log)
    rows = []
    for curve in spec["curves"]:
        delta_g = delta_from_log2(curve["delta_g_log2"])
        progress.message(f"eps={curve['eps']:g} delta={curve['delta']:g} delta_g=2^{curve['delta_g_log2']}")
        for method in methods:
            for k in ks:
                eps_g = optcomp.epsilon_g(curve["eps"], curve["delta"], k=k, delta_g=delta_g, method=method)
                rows.append((curve["panel"], curve["eps"], curve["delta"], curve["delta_g_log2"], delta_g, k, method,
                             eps_g))
                progress.step()
    return pd.DataFrame(rows, columns=COLUMNS)


def ratio_table(curves: pd.DataFrame, ks) -> pd.DataFrame:
    """eps_g(method) / eps_g(optimal) at the given k, for every curve family and method.

    One row per (panel, eps, delta_g_log2, k), curves in the order they appear in
    ``curves``, with a column ``<method>_over_optimal`` per non-optimal method (MV
    Section 6 claims about 1.2 for the KOV bound and 1.3-1.4 for DRV at large k)."""
    curve_keys = ["panel", "eps", "delta", "delta_g_log2"]
    ks = sorted(int(k) for k in ks)
    missing = sorted(set(ks) - set(curves["k"]))
    if missing:
        raise ValueError(f"ratio_k {missing} not in the sweep (k_max = {curves['k'].max()})")
    order = curves[curve_keys].drop_duplicates().reset_index(drop=True)
    order["curve"] = range(len(order))
    sub = curves[curves["k"].isin(ks)].merge(order, on=curve_keys)
    wide = sub.pivot_table(index=["curve", "k"], columns="method", values="eps_g").reset_index()
    wide = wide.merge(order, on="curve").sort_values(["curve", "k"], kind="stable")
    methods = [m for m in curves["method"].drop_duplicates() if m != "optimal"]
    out = wide[curve_keys + ["k", "optimal"]].rename(columns={"optimal": "optimal_eps_g"}).copy()
    for m in methods:
        out[f"{m}_over_optimal"] = wide[m].to_numpy() / wide["optimal"].to_numpy()
    return out.reset_index(drop=True)


_NAMES = {"basic": "Summing", "drv": "DRV", "kov": "KOV bound", "advanced_pure": "Adv. (pure)"}


def ratio_markdown(table: pd.DataFrame, source: str) -> str:
    """The ratio table as Markdown: one row per curve (eps, delta_g), for each method one
    column per k (ratios to 2 decimals), plus the optimal eps_g at the largest k."""
    ratio_cols = [c for c in table.columns if c.endswith("_over_optimal")]
    ks = sorted(table["k"].unique())
    kmax = ks[-1]
    head = ["eps", "delta_g", f"Optimal eps_g (k={kmax})"]
    head += [f"{_NAMES.get(c[:-13], c[:-13])} / Optimal, k={k}" for c in ratio_cols for k in ks]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for _, group in table.groupby(["panel", "eps", "delta_g_log2"], sort=False):
        by_k = group.set_index("k")
        first = group.iloc[0]
        cells = [f"{first['eps']:g}", f"2^{int(first['delta_g_log2'])}", f"{by_k.loc[kmax, 'optimal_eps_g']:.4g}"]
        cells += [f"{by_k.loc[k, c]:.2f}" for c in ratio_cols for k in ks]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += _ratio_summary(table)
    lines.append(f"<!-- generated by optcomp.experiments.homogeneous.ratio_markdown from {source}; do not edit -->")
    return "\n".join(lines) + "\n"


def _pct(lo: float, hi: float) -> str:
    a, b = round(100 * (lo - 1)), round(100 * (hi - 1))
    return f"{a} %" if a == b else f"{a}–{b} %"


def _ratio_summary(table: pd.DataFrame) -> list[str]:
    """One paragraph of the ratio table's numbers, read off the table itself (the README
    quotes it: no number typed by hand)."""
    if not {"kov_over_optimal", "drv_over_optimal"} <= set(table.columns):
        return []
    ks = sorted(table["k"].unique())
    kmin, kmax = ks[0], ks[-1]
    a = table[table["panel"] == "by_eps"]
    if a.empty:
        return []
    e2 = int(a["delta_g_log2"].iloc[0])
    lo, hi = a[a["k"] == kmax], a[a["k"] == kmin]
    text = (f"At the paper's delta_g = 2^{e2} the KOV bound ends {_pct(lo.kov_over_optimal.min(), lo.kov_over_optimal.max())} "
            f"above the optimum at k = {kmax} ({_pct(hi.kov_over_optimal.min(), hi.kov_over_optimal.max())} at k = {kmin}) "
            f"and DRV {_pct(lo.drv_over_optimal.min(), lo.drv_over_optimal.max())} "
            f"({_pct(hi.drv_over_optimal.min(), hi.drv_over_optimal.max())} at k = {kmin}).")
    b = table[(table["panel"] == "by_delta_g") & (table["k"] == kmax)]
    if len(b):
        top = b.loc[b["delta_g_log2"].idxmax()]
        text += (f" The excess grows with delta_g: at delta_g = 2^{int(top.delta_g_log2)} (eps = {top.eps:g}) the KOV bound "
                 f"is {_pct(top.kov_over_optimal, top.kov_over_optimal)} and DRV {_pct(top.drv_over_optimal, top.drv_over_optimal)} "
                 f"above the optimum at k = {kmax}.")
    if "basic_over_optimal" in table:
        every = table[table["k"] == kmax]
        text += (f" Summing is {every.basic_over_optimal.min():.1f}–{every.basic_over_optimal.max():.1f}× the optimum "
                 f"at k = {kmax}.")
    return [text, ""]


def ratio_html(table: pd.DataFrame, source: str) -> str:
    """The Markdown table of :func:`ratio_markdown` as a small HTML page (for the report)."""
    import html

    md = ratio_markdown(table, source)
    rows = [line for line in md.splitlines() if line.startswith("|")]
    prose = [line for line in md.splitlines() if line and not line.startswith(("|", "<!--"))]
    cells = [[html.escape(c.strip()) for c in line.strip("|").split("|")] for line in rows]
    head, body = cells[0], cells[2:]
    out = ['<!DOCTYPE html>', '<html><head><meta charset="utf-8"><title>Ratio table</title>',
           "<style>body{font-family:sans-serif}table{border-collapse:collapse;font-size:90%}"
           "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}</style>",
           "</head><body>", "<table>", "<tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body]
    out += ["</table>", *[f"<p>{html.escape(line)}</p>" for line in prose],
            f"<p>eps_g of each theorem / optimal eps_g; generated from {html.escape(source)}.</p>",
            "</body></html>", ""]
    return "\n".join(out)
