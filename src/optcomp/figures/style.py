"""The one style every optcomp figure uses: colours, legend labels, sizes.

Colours are the Okabe-Ito palette (distinguishable with the common colour-vision
deficiencies, and in grey scale through the line styles); each theorem keeps its colour
and line style in every figure, and legends name the theorem the way the papers do.
"""

from __future__ import annotations

import contextlib
from importlib import resources

import sys

import matplotlib

if "ipykernel" not in sys.modules and "matplotlib.pyplot" not in sys.modules:
    # headless: the pipeline never opens windows (in a notebook the kernel's inline backend
    # stays, so figures show up in the executed copy)
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["STYLE", "COLOR", "LINESTYLE", "LABEL", "HET_LABEL", "REGION_LABEL", "OKABE_ITO", "use_style",
           "SINGLE", "DOUBLE", "label", "pow2", "sci"]

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7",
}

COLOR = {
    "basic": OKABE_ITO["orange"],
    "drv": OKABE_ITO["sky_blue"],
    "kov": OKABE_ITO["green"],
    "advanced_pure": OKABE_ITO["yellow"],
    "optimal": OKABE_ITO["black"],
    "approx": OKABE_ITO["vermillion"],
    "approx_paper": OKABE_ITO["purple"],
    "dp_accounting": OKABE_ITO["blue"],
}

LINESTYLE = {
    "basic": (0, (1.2, 1.2)),
    "drv": (0, (4, 1.5)),
    "kov": (0, (6, 1.5, 1.2, 1.5)),
    "advanced_pure": (0, (2, 1)),
    "optimal": "solid",
    "approx": "solid",
    "approx_paper": (0, (3, 1, 1, 1)),
    "dp_accounting": (0, (5, 2)),
}

# MV numbering (Murtagh-Vadhan, Theory of Computing 2018), as in their Figure 2
LABEL = {
    "basic": "Summing (Thm 1.2)",
    "drv": "DRV (Thm 1.3)",
    "kov": "KOV bound (Thm 6.1)",
    "advanced_pure": "Advanced, pure DP (Steinke)",
    "optimal": "Optimal (Thm 1.4)",
    "approx": "Approximation (Thm 1.7)",
    "approx_paper": "Approximation, as published (Thm 1.7)",
    "dp_accounting": "PLD accountant (dp_accounting)",
}

# heterogeneous composition: the general-case theorems
HET_LABEL = dict(LABEL, kov="KOV bound (KOV Thm 3.5)", optimal="Optimal (Thm 1.5)",
                 drv="DRV (Thm 1.3, heterogeneous)", basic="Summing (Thm 1.2)")

# KOV numbering (Kairouz-Oh-Viswanath), as in their Figure 3
REGION_LABEL = {"basic": "Basic (KOV Thm 3.1)", "drv": "Advanced, DRV (KOV Thm 3.2)",
                "optimal": "Optimal (KOV Thm 3.3)", "kov": "KOV bound (KOV Thm 3.4)"}

SINGLE = 3.4  # inches: one column of a two-column paper
DOUBLE = 7.0  # inches: full page width

STYLE = resources.files(__package__).joinpath("optcomp.mplstyle")


@contextlib.contextmanager
def use_style():
    """Context manager: matplotlib's defaults, then ``optcomp.mplstyle``."""
    with resources.as_file(STYLE) as path, plt.style.context(["default", str(path)]):
        yield


def label(method: str, table: dict | None = None) -> str:
    return (table or LABEL).get(method, method)


def pow2(e: int) -> str:
    """2^e for axis labels and legends (mathtext)."""
    return rf"$2^{{{int(e)}}}$"


def sci(x: float) -> str:
    """A number for labels: 0.1 -> 0.1, 1e-06 -> 10^-6, 2.5e-07 -> 2.5x10^-7 (mathtext)."""
    x = float(x)
    if x == 0 or 1e-3 <= abs(x) < 1e4:
        return f"{x:g}"
    mant, exp = f"{x:.3g}".split("e")
    exp = int(exp)
    return rf"$10^{{{exp}}}$" if float(mant) == 1.0 else rf"${mant}\times10^{{{exp}}}$"
