"""KOV Figures 2 and 3: privacy regions (false alarm vs missed detection) of compositions.

Each curve is the boundary of the region of a family of guarantees from
:mod:`optcomp.region`: lower boundary ``p_md_min`` = beta(p_fa) and upper boundary
``p_md_max`` = 1 - beta(1 - p_fa), on a grid of P_FA that includes every kink.  Two tables
per figure: the boundaries (for plotting) and the guarantees themselves (the
(eps_g, delta_g) pairs intersected), so the figure can be checked against the theorems.
"""

from __future__ import annotations

from typing import IO

import numpy as np
import pandas as pd

from .. import region
from .grids import float_list
from .io import Progress

__all__ = ["kov_figure2", "kov_figure3", "both", "area", "BOUNDARY_COLUMNS", "FAMILY_COLUMNS"]

BOUNDARY_COLUMNS = ["figure", "eps", "delta", "k", "method", "p_fa", "p_md_min", "p_md_max"]
FAMILY_COLUMNS = ["figure", "eps", "delta", "k", "method", "eps_g", "delta_g"]


def _curve(figure, eps, delta, k, method, points, drv_points):
    e_g, d_g = region.composition_family(method, eps, delta, k=k, num=drv_points)
    alphas = region.boundary_alphas(e_g, d_g, num=points)
    lower = region.tradeoff(alphas, e_g, d_g)
    upper = region.upper_boundary(alphas, e_g, d_g)
    n = alphas.size
    boundary = pd.DataFrame({
        "figure": [figure] * n, "eps": eps, "delta": delta, "k": k, "method": [method] * n,
        "p_fa": alphas, "p_md_min": lower, "p_md_max": upper,
    })
    family = pd.DataFrame({
        "figure": [figure] * e_g.size, "eps": eps, "delta": delta, "k": k, "method": [method] * e_g.size,
        "eps_g": e_g, "delta_g": d_g,
    })
    return boundary[BOUNDARY_COLUMNS], family[FAMILY_COLUMNS]


def _collect(parts):
    b = pd.concat([p[0] for p in parts], ignore_index=True)
    f = pd.concat([p[1] for p in parts], ignore_index=True)
    return b, f


def kov_figure2(cfg: dict, log: IO[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Optimal regions (KOV Thm 3.3) of the k-fold composition, k = 1..k_max, for each delta."""
    fig = cfg["kov_figure2"]
    deltas = float_list(fig["delta"])
    ks = range(1, int(fig["k_max"]) + 1)
    progress = Progress(len(deltas) * len(ks), "KOV figure 2 regions", log)
    parts = []
    for d in deltas:
        for k in ks:
            parts.append(_curve("kov_figure2", float(fig["eps"]), d, k, "optimal", cfg["points"], cfg["drv_points"]))
            progress.step()
    return _collect(parts)


def kov_figure3(cfg: dict, log: IO[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Basic (KOV Thm 3.1), advanced/DRV (Thm 3.2) and optimal (Thm 3.3) regions of one composition."""
    fig = cfg["kov_figure3"]
    methods = list(fig["methods"])
    progress = Progress(len(methods), "KOV figure 3 regions", log)
    parts = []
    for m in methods:
        parts.append(_curve("kov_figure3", float(fig["eps"]), float(fig["delta"]), int(fig["k"]), m,
                            cfg["points"], cfg["drv_points"]))
        progress.step()
    return _collect(parts)


def area(boundary: pd.DataFrame) -> float:
    """Area of a region from its boundary table (trapezoid rule on the P_FA grid)."""
    x = boundary["p_fa"].to_numpy()
    return float(np.trapezoid(boundary["p_md_max"].to_numpy() - boundary["p_md_min"].to_numpy(), x))


def both(cfg: dict, log: IO[str] | None = None) -> tuple[pd.DataFrame, ...]:
    """KOV Figure 2 and 3 tables in one job (both take well under a second):
    (figure 2 boundary, figure 2 family, figure 3 boundary, figure 3 family)."""
    return (*kov_figure2(cfg, log), *kov_figure3(cfg, log))
