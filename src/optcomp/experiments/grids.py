"""Parameter grids from the config: integer k grids and power-of-two delta_g values."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["int_grid", "delta_from_log2", "float_list"]


def int_grid(spec: Any) -> list[int]:
    """Sorted distinct integers from a config entry.

    * a list of integers: used as given (sorted, duplicates dropped);
    * ``{from: a, to: b}``: every integer a..b;
    * ``{from: a, to: b, num: n}``: n points spaced geometrically (``spacing: log``, the
      default) or evenly (``spacing: linear``) between a and b, rounded to integers,
      duplicates dropped (so fewer than n points when the low end is crowded).
    """
    if isinstance(spec, (list, tuple)):
        values = sorted({int(v) for v in spec})
    elif isinstance(spec, dict):
        lo, hi = int(spec["from"]), int(spec["to"])
        if "num" not in spec:
            values = list(range(lo, hi + 1))
        else:
            num = int(spec["num"])
            if spec.get("spacing", "log") == "log":
                raw = np.geomspace(lo, hi, num)
            else:
                raw = np.linspace(lo, hi, num)
            values = sorted({int(round(float(v))) for v in raw} | {lo, hi})
    else:
        values = [int(spec)]
    if not values or values[0] < 1:
        raise ValueError(f"a k grid needs integers >= 1, got {spec!r}")
    return values


def delta_from_log2(e: int) -> float:
    """delta_g = 2^e exactly (the papers give delta_g as powers of two)."""
    return float(2.0 ** int(e))


def float_list(x: Any) -> list[float]:
    return [float(v) for v in (x if isinstance(x, (list, tuple)) else [x])]
