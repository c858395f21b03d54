"""Execute the analysis notebooks headless, on top of ``results/``.

Notebooks find the results through the environment variable ``OPTCOMP_RESULTS`` (an
absolute path; they fall back to ``../results`` relative to ``notebooks/``), so the tests
can execute them against a temporary copy.  The executed copy (outputs included) is
written atomically (without execution timestamps); a failing cell raises with the cell's
traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from .io import atomic_write_text

__all__ = ["run_notebook", "RESULTS_ENV"]

RESULTS_ENV = "OPTCOMP_RESULTS"


def run_notebook(source: str | os.PathLike, target: str | os.PathLike, *, results_dir: str | os.PathLike,
                 timeout: int = 600, kernel_name: str = "python3") -> None:
    """Run every cell of ``source`` top to bottom in a fresh kernel (working directory: the
    notebook's folder, ``OPTCOMP_RESULTS`` = ``results_dir``) and save the executed copy
    to ``target``."""
    import nbformat
    from nbclient import NotebookClient

    source = Path(source).resolve()
    nb = nbformat.read(source, as_version=4)
    old = os.environ.get(RESULTS_ENV)
    os.environ[RESULTS_ENV] = str(Path(results_dir).resolve())
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        # record_timing=False: no execution timestamps, so a notebook over unchanged
        # results is executed into the same bytes
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, record_timing=False,
                                resources={"metadata": {"path": str(source.parent)}})
        client.execute()
    finally:
        if old is None:
            os.environ.pop(RESULTS_ENV, None)
        else:
            os.environ[RESULTS_ENV] = old
    atomic_write_text(target, nbformat.writes(nb))
