"""What tighter composition buys: Laplace noise per query under a global budget (KOV Sec. 4).

For each global budget (eps_g, delta_g), number of queries k and theorem, the largest
per-query eps that keeps the composition within budget (:func:`optcomp.calibrate.per_query_epsilon`,
certified) and the Laplace scale b = sensitivity / eps each query then needs
(standard deviation sqrt(2) b).
"""

from __future__ import annotations

import math
from typing import IO

import pandas as pd

from .. import calibrate
from .grids import float_list, int_grid
from .io import Progress

__all__ = ["budgets", "sweep", "sweep_budget", "COLUMNS"]

COLUMNS = ["eps_g", "delta_g", "k", "method", "eps_per_query", "laplace_scale", "laplace_std", "scale_over_optimal"]


def budgets(cfg: dict) -> list[dict]:
    """One spec per (eps_g, delta_g) budget, all k and methods."""
    out = []
    for eps_g in float_list(cfg["eps_g"]):
        for delta_g in float_list(cfg["delta_g"]):
            out.append({"eps_g": eps_g, "delta_g": delta_g, "k": int_grid(cfg["k"]), "methods": list(cfg["methods"]),
                        "sensitivity": float(cfg["sensitivity"])})
    return out


def sweep(cfg: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Every budget of the config's ``budget`` section (a few seconds in all: one job)."""
    return pd.concat([sweep_budget(spec, log) for spec in budgets(cfg)], ignore_index=True)


def sweep_budget(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Per-query eps and Laplace scale at every k and method, for one budget."""
    ks, methods = spec["k"], spec["methods"]
    progress = Progress(len(ks) * len(methods), f"budget eps_g={spec['eps_g']:g} delta_g={spec['delta_g']:g}", log)
    rows = []
    for k in ks:
        for method in methods:
            eps = calibrate.per_query_epsilon(k, spec["eps_g"], spec["delta_g"], method=method)
            scale = math.inf if eps == 0.0 else spec["sensitivity"] / eps
            rows.append((spec["eps_g"], spec["delta_g"], k, method, eps, scale, math.sqrt(2.0) * scale))
            progress.step()
    df = pd.DataFrame(rows, columns=COLUMNS[:-1])
    opt = df[df["method"] == "optimal"].set_index("k")["laplace_scale"] if "optimal" in methods else None
    df["scale_over_optimal"] = df["laplace_scale"] / df["k"].map(opt) if opt is not None else float("nan")
    return df[COLUMNS]
