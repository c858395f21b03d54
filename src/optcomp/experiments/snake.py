"""The entry points the Snakemake rules call (``script:`` files are one import and one call).

Each function takes the ``snakemake`` object of a ``script:`` rule; the rule's ``params``
name the package function that does the work (``params.function``, a dotted path) and
its parameters (``params.spec``), so the workflow stays thin and every output is
traceable to one function.  Everything a job prints goes to its ``log:`` file.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import pandas as pd

from . import io

__all__ = ["sweep", "merge", "table", "plot", "notebook", "resolve"]


def resolve(dotted: str):
    """``"optcomp.experiments.homogeneous.sweep_curves"`` -> the function object."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


@contextlib.contextmanager
def _logged(smk):
    path = Path(smk.log[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        yield log


def _meta(smk, function: str) -> dict | None:
    if smk.params.get("chunk", False):
        return None
    return io.provenance(function=function, config=smk.params.get("config"), section=smk.params.get("section"),
                         extra={"rule": smk.rule})


def sweep(smk) -> None:
    """Call ``params.function(params.spec, log)``; write the DataFrame(s) it returns to the
    rule's outputs, in order."""
    with _logged(smk) as log:
        fn = resolve(smk.params.function)
        result = fn(smk.params.spec, log)
        frames = result if isinstance(result, tuple) else (result,)
        if len(frames) != len(smk.output):
            raise ValueError(f"{smk.params.function} returned {len(frames)} tables for {len(smk.output)} outputs")
        for df, path in zip(frames, smk.output):
            io.write_csv(df, path, meta=_meta(smk, smk.params.function))
        print(f"wrote {', '.join(smk.output)}", file=log)


def merge(smk) -> None:
    """Concatenate chunk CSVs (same header) in input order into ``output[0]``, byte for byte;
    or, if ``params.sort`` names a function, parse them, concatenate, sort with it and write."""
    with _logged(smk) as log:
        if smk.params.get("sort"):
            df = pd.concat([io.read_csv(p) for p in smk.input], ignore_index=True)
            df = resolve(smk.params.sort)(df)
            io.write_csv(df, smk.output[0], meta=_meta(smk, smk.params.function))
            print(f"merged and sorted {len(smk.input)} chunks into {smk.output[0]}", file=log)
            return
        header, body = None, []
        for path in smk.input:
            text = Path(path).read_text()
            first, _, rest = text.partition("\n")
            if header is None:
                header = first
            elif first != header:
                raise ValueError(f"{path}: header {first!r} differs from {header!r}")
            body.append(rest)
        io.atomic_write_text(smk.output[0], header + "\n" + "".join(body))
        meta = _meta(smk, smk.params.function)
        if meta is not None:
            meta["rows"] = sum(part.count("\n") for part in body)
            meta["columns"] = header.split(",")
            meta["chunks"] = len(smk.input)
            io.atomic_write_text(io.meta_path(smk.output[0]), json.dumps(meta, indent=2, sort_keys=True) + "\n")
        print(f"merged {len(smk.input)} chunks into {smk.output[0]}", file=log)


def table(smk) -> None:
    """Derived tables: ``params.function(*input DataFrames, **params.spec)`` -> CSV
    (``output.csv``) and optionally Markdown (``output.md``, via ``params.markdown``)."""
    with _logged(smk):
        frames = [io.read_csv(p) for p in smk.input]
        df = resolve(smk.params.function)(*frames, **smk.params.spec)
        io.write_csv(df, smk.output.csv, meta=_meta(smk, smk.params.function))
        if "md" in smk.output.keys():
            md = resolve(smk.params.markdown)(df, source=str(smk.output.csv))
            io.atomic_write_text(smk.output.md, md)


def plot(smk) -> None:
    """``params.function(*input paths, **params.spec)`` -> Figure, saved as ``output.pdf``
    and ``output.png``."""
    from ..figures import save

    with _logged(smk):
        fig = resolve(smk.params.function)(*smk.input, **smk.params.get("spec", {}))
        save(fig, pdf=smk.output.pdf, png=smk.output.png)


def notebook(smk) -> None:
    """Execute ``input.notebook`` on the results directory that holds ``output[0]``
    (``results/notebooks/x.ipynb`` -> ``results/``); save the executed copy there."""
    from .notebook import run_notebook

    with _logged(smk) as log:
        results = Path(smk.output[0]).resolve().parent.parent
        print(f"executing {smk.input.notebook} on {results} (python {sys.version.split()[0]})", file=log)
        run_notebook(smk.input.notebook, smk.output[0], results_dir=results, timeout=int(smk.params.timeout))
        print(f"wrote {smk.output[0]}", file=log)
