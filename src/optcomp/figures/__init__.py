"""Plotting functions: CSV in, :class:`matplotlib.figure.Figure` out, one shared style.

Figures never compute privacy numbers: they read the tidy CSVs the experiments wrote
(``results/``) and only arrange them.  Every function takes CSV paths and returns a
Figure drawn inside :func:`style.use_style` (``optcomp.mplstyle``); :func:`save` writes the
PDF (for papers) and PNG (for the repository page) atomically and reproducibly.

* :func:`homogeneous.mv_figure2` — MV Figure 2, four panels;
* :func:`heterogeneous.comparison` — heterogeneous mechanisms (the poster's figure);
* :func:`regions.kov_figure2`, :func:`regions.kov_figure3` — KOV privacy regions;
* :func:`runtime.scaling` — wall-clock scaling and accuracy vs time (six panels);
* :func:`budget.noise` — Laplace noise per query under a global budget.
"""

from __future__ import annotations

import io
import os

from .style import use_style

__all__ = ["save", "use_style"]


def save(fig, *, pdf: str | os.PathLike | None = None, png: str | os.PathLike | None = None) -> None:
    """Save ``fig`` as PDF and/or PNG, atomically, without timestamps (same input, same bytes)."""
    from ..experiments.io import atomic_write_bytes

    with use_style():  # savefig.* settings (dpi, padding) of optcomp.mplstyle
        _save(fig, pdf, png, atomic_write_bytes)
    import matplotlib.pyplot as plt

    plt.close(fig)


def _save(fig, pdf, png, write) -> None:
    if pdf is not None:
        buf = io.BytesIO()
        fig.savefig(buf, format="pdf", metadata={"CreationDate": None, "ModDate": None, "Producer": None})
        write(pdf, buf.getvalue())
    if png is not None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
        write(png, buf.getvalue())
