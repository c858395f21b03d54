"""The Snakemake glue: what every ``script:`` rule of the workflow calls.

It sits above both :mod:`optcomp.experiments` (sweeps -> tidy DataFrames) and
:mod:`optcomp.figures` (CSVs -> Figures), so data flows one way in the package too::

    config -> pipeline.sweep -> experiments.* -> results/*.csv
           -> pipeline.plot  -> figures.*     -> figures/*.pdf|png
           -> pipeline.notebook (run_notebook) -> results/notebooks/*.ipynb

Each entry point takes the ``snakemake`` object of a ``script:`` rule.  A rule's ``params``
only *name* things, so that Snakemake's console lines stay short: ``function`` (the dotted
path of the package function doing the work), ``section`` (the config section), ``spec``
(optional: the dotted path of a function ``spec(config_section, **wildcards)`` that cuts the
job's share out of the section) and ``spec_sha256`` (a short hash of that share: the
parameter rerun trigger).  :func:`job_spec` recomputes the share from ``snakemake.config``.

Provenance (:func:`provenance`): every table's ``.meta.json`` sidecar records the rule, the
function, the job's config and a hash of the code that produced it (:mod:`optcomp.provenance`),
so that it changes only when what produced the table changes -- a fresh clone that reruns the
pipeline leaves the committed sidecars as they are -- and, for timing tables only, the
machine (CPU model, cores, load average).

Beside the glue: the configuration's checks and reference table are
:mod:`optcomp.pipeline_config`, the README's quoted files and console sessions
:mod:`optcomp.reporting`; their names are read here too, and ``python -m optcomp.pipeline
{config-reference | update-readme}`` runs them.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

# the configuration's and the README's functions, at their historical paths (the Snakefile
# imports validate_config from here)
from .pipeline_config import ConfigError, config_problem, config_reference, validate_config
from .reporting import README_QUOTES, quoted_text, update_readme

__all__ = ["sweep", "merge", "table", "timing_summary", "plot", "notebook", "resolve", "job_spec", "spec_hash", "provenance",
           "git_state", "machine", "run_notebook", "validate_config", "config_problem", "ConfigError", "RESULTS_ENV",
           "CODE_PATHS"]

RESULTS_ENV = "OPTCOMP_RESULTS"
# the paths whose last commit (and dirtiness) git_state reports (benchmarks/time_readme_commands.py)
CODE_PATHS = ("src", "rules", "Snakefile", "config", "notebooks", "pyproject.toml")


def resolve(dotted: str):
    """``"optcomp.experiments.homogeneous.sweep_curves"`` -> the function object."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def job_spec(config: dict, section: str, spec: str | None = None, wildcards: dict | None = None):
    """The share of ``config[section]`` a job works on: the section itself, or
    ``resolve(spec)(section, **wildcards)`` (the wildcards it takes)."""
    import inspect

    cfg = config[section]
    if not spec:
        return cfg
    fn = resolve(spec)
    accepted = inspect.signature(fn).parameters
    return fn(cfg, **{k: v for k, v in dict(wildcards or {}).items() if k in accepted})


def spec_hash(config: dict, section: str, spec: str | None = None, wildcards: dict | None = None) -> str:
    """First 16 hex digits of the SHA-256 of the job's spec: a short rerun trigger."""
    from .experiments.io import config_hash

    return config_hash(job_spec(config, section, spec, wildcards))[:16]


def _smk_spec(smk):
    wildcards = {k: v for k, v in smk.wildcards.items()}
    return job_spec(smk.config, smk.params.section, smk.params.get("spec"), wildcards)


# ------------------------------------------------------------------------------ provenance


def git_state(root: str | os.PathLike = ".") -> dict:
    """``{"git_commit": last commit touching CODE_PATHS, "git_dirty": uncommitted changes
    there}``; both None outside a git checkout (e.g. the tests' temporary copies)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=30)

    try:
        inside = git("rev-parse", "--is-inside-work-tree")
        top = git("rev-parse", "--show-toplevel").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    if inside.returncode != 0 or Path(top).resolve() != Path(root).resolve():
        return {"git_commit": None, "git_dirty": None}
    paths = [p for p in CODE_PATHS if (Path(root) / p).exists()]
    commit = git("log", "-1", "--format=%H", "--", *paths).stdout.strip() or None
    status = git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    return {"git_commit": commit, "git_dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def machine() -> dict:
    """CPU model, logical cores (total and usable), load averages: for timing tables."""
    model = platform.processor() or None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(AttributeError, OSError):
        usable = len(os.sched_getaffinity(0))
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"cpu_model": model, "cpu_count": os.cpu_count(), "cpus_usable": locals().get("usable"),
            "platform": platform.platform(), "load_average_1_5_15_min": load}


def provenance(smk, function: str) -> dict | None:
    """The ``.meta.json`` record of a rule's output (:func:`optcomp.provenance.record`: rule,
    function, the job's share of the config section, the code's hash, versions; the machine
    for timing rules); None for chunks, which are merged."""
    from .provenance import record

    if smk.params.get("chunk", False):
        return None
    section = smk.params.get("section")
    meta = record(rule=smk.rule, function=function, section=section,
                  config=_smk_spec(smk) if section is not None else None)
    if smk.params.get("machine", False):
        meta["machine"] = machine()
    return meta


# ---------------------------------------------------------------------------- entry points


@contextlib.contextmanager
def _logged(smk):
    path = Path(smk.log[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        yield log


def sweep(smk) -> None:
    """Call ``params.function(spec, log)`` -- with ``inputs=`` the rule's input paths if the
    function takes them (a sweep collecting per-instance jobs) --; write the DataFrame(s) it
    returns to the rule's outputs, in order (machine-dependent tables also get the load
    before and after)."""
    import inspect

    from .experiments import io

    with _logged(smk) as log:
        fn = resolve(smk.params.function)
        before = machine()["load_average_1_5_15_min"] if smk.params.get("machine", False) else None
        extra = {"inputs": list(smk.input)} if "inputs" in inspect.signature(fn).parameters else {}
        result = fn(_smk_spec(smk), log, **extra)
        frames = result if isinstance(result, tuple) else (result,)
        if len(frames) != len(smk.output):
            raise ValueError(f"{smk.params.function} returned {len(frames)} tables for {len(smk.output)} outputs")
        for df, path in zip(frames, smk.output):
            meta = provenance(smk, smk.params.function)
            if meta is not None and "machine" in meta and "timing" not in Path(path).parts:
                del meta["machine"]  # only timing tables describe the machine (others stay byte-stable)
            elif meta is not None and before is not None:
                meta["machine"]["load_average_before"] = before
            io.write_csv(df, path, meta=meta)
        print(f"wrote {', '.join(smk.output)}", file=log)


def merge(smk) -> None:
    """Concatenate chunk CSVs (same header) in input order into ``output[0]``, byte for byte;
    or, if ``params.sort`` names a function, parse them, concatenate, sort with it and write."""
    import pandas as pd

    from .experiments import io

    with _logged(smk) as log:
        meta = provenance(smk, smk.params.function)
        if smk.params.get("sort"):
            df = pd.concat([io.read_csv(p) for p in smk.input], ignore_index=True)
            df = resolve(smk.params.sort)(df)
            io.write_csv(df, smk.output[0], meta=meta)
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
        if meta is not None:
            meta["rows"] = sum(part.count("\n") for part in body)
            meta["columns"] = header.split(",")
            meta["chunks"] = len(smk.input)
            io.atomic_write_text(io.meta_path(smk.output[0]), json.dumps(meta, indent=2, sort_keys=True) + "\n")
        print(f"merged {len(smk.input)} chunks into {smk.output[0]}", file=log)


def table(smk) -> None:
    """Derived tables: ``params.function(*input DataFrames, **spec)`` -> CSV (``output.csv``)
    and optionally Markdown (``output.md``, via ``params.markdown``) and HTML (``output.html``,
    via ``params.html``, for the report)."""
    from .experiments import io

    with _logged(smk):
        frames = [io.read_csv(p) for p in smk.input]
        spec = _smk_spec(smk) if smk.params.get("spec") else {}
        df = resolve(smk.params.function)(*frames, **spec)
        io.write_csv(df, smk.output.csv, meta=provenance(smk, smk.params.function))
        for kind in ("md", "html"):
            if kind in smk.output.keys():
                text = resolve(smk.params.get("markdown" if kind == "md" else "html"))(df, source=str(smk.output.csv))
                io.atomic_write_text(smk.output[kind], text)


def timing_summary(smk) -> None:
    """``results/timing/<run>/summary.md``: the timing claims the README quotes
    (:func:`optcomp.experiments.runtime.summary_markdown`), from the run's tables."""
    from .experiments import io, runtime

    with _logged(smk):
        *tables, slopes = [io.read_csv(p) for p in smk.input]
        meta = json.loads(io.meta_path(smk.input[0]).read_text())
        text = runtime.summary_markdown(*tables, slopes=slopes, meta=meta, source=str(Path(smk.input[0]).parent))
        io.atomic_write_text(smk.output[0], text)


def plot(smk) -> None:
    """``params.function(*input paths, **spec)`` -> Figure, saved as ``output.pdf`` and
    ``output.png``."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # headless, before matplotlib is imported
    from .figures import save

    with _logged(smk):
        spec = _smk_spec(smk) if smk.params.get("spec") else {}
        fig = resolve(smk.params.function)(*smk.input, **spec)
        save(fig, pdf=smk.output.pdf, png=smk.output.png)


def notebook(smk) -> None:
    """Execute ``input.notebook`` on the results directory that holds ``output.notebook``
    (``results/notebooks/x.ipynb`` -> ``results/``); save the executed copy there, and an HTML
    rendering (``output.html``, for the report) if declared."""
    with _logged(smk) as log:
        results = Path(smk.output.notebook).resolve().parent.parent
        print(f"executing {smk.input.notebook} on {results} (python {sys.version.split()[0]})", file=log)
        run_notebook(smk.input.notebook, smk.output.notebook, results_dir=results, timeout=int(smk.params.timeout))
        if "html" in smk.output.keys():
            from .experiments.io import atomic_write_text

            atomic_write_text(smk.output.html, notebook_to_html(smk.output.notebook))
        print(f"wrote {', '.join(smk.output)}", file=log)


# -------------------------------------------------------------------------------- notebooks


def run_notebook(source: str | os.PathLike, target: str | os.PathLike, *, results_dir: str | os.PathLike,
                 timeout: int = 600, kernel_name: str = "python3") -> None:
    """Run every cell of ``source`` top to bottom in a fresh kernel (working directory: the
    notebook's folder, ``OPTCOMP_RESULTS`` = ``results_dir``) and save the executed copy,
    outputs and inline figures (PNG) included, to ``target`` -- without execution timestamps,
    so a notebook over unchanged results is executed into the same bytes.  Figures are
    drawn with the inline backend (any inherited non-interactive ``MPLBACKEND`` is dropped
    for the kernel).  A failing cell raises with the cell's traceback."""
    import nbformat
    from nbclient import NotebookClient

    from .experiments.io import atomic_write_text

    source = Path(source).resolve()
    nb = nbformat.read(source, as_version=4)
    saved = {key: os.environ.get(key) for key in (RESULTS_ENV, "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION",
                                                "JUPYTER_PLATFORM_DIRS")}
    os.environ[RESULTS_ENV] = str(Path(results_dir).resolve())
    os.environ.pop("MPLBACKEND", None)  # the kernel picks its inline backend
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # no debugger warning from frozen modules
    os.environ["JUPYTER_PLATFORM_DIRS"] = "1"  # no platformdirs migration warning
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, record_timing=False,
                                resources={"metadata": {"path": str(source.parent)}})
        # the kernel process's own stderr (Jupyter's warnings) goes to the job's log, never
        # to the console: the log when stdout is a real file (inside a rule), else discarded
        try:
            sys.stdout.flush()
            kernel_stderr = sys.stdout if sys.stdout.fileno() >= 0 else subprocess.DEVNULL
        except (AttributeError, OSError, ValueError):
            kernel_stderr = subprocess.DEVNULL
        with contextlib.redirect_stderr(sys.stdout):
            client.execute(stderr=kernel_stderr, stdout=kernel_stderr)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    atomic_write_text(target, nbformat.writes(nb))


def notebook_to_html(path: str | os.PathLike) -> str:
    """A self-contained HTML page of an executed notebook (for ``snakemake --report``):
    Markdown cells as text with headings, code in ``<pre>``, outputs as their HTML (tables),
    PNG (inline figures) or plain text.  Deliberately small: no nbconvert needed."""
    import html
    import re

    import nbformat

    nb = nbformat.read(path, as_version=4)
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for block in re.split(r"\n\s*\n", cell.source.strip()):
                m = re.match(r"(#+)\s+(.*)", block)
                if m:
                    level = min(len(m.group(1)) + 1, 6)
                    parts.append(f"<h{level}>{html.escape(m.group(2))}</h{level}>")
                else:
                    text = html.escape(block)
                    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
                    text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
                    parts.append(f"<p>{text}</p>")
        elif cell.cell_type == "code":
            parts.append(f'<pre class="code">{html.escape(cell.source)}</pre>')
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if "image/png" in data:
                    png = data["image/png"].replace("\n", "")
                    parts.append(f'<img style="max-width:100%" src="data:image/png;base64,{png}">')
                elif "text/html" in data:
                    parts.append(f'<div class="table">{data["text/html"]}</div>')
                elif "text/plain" in data:
                    parts.append(f'<pre class="out">{html.escape(data["text/plain"])}</pre>')
                elif out.get("output_type") == "stream":
                    parts.append(f'<pre class="out">{html.escape(out.get("text", ""))}</pre>')
    style = ("body{font-family:sans-serif;max-width:60em;margin:1em auto;line-height:1.4}"
             "pre.code{background:#f4f4f4;padding:.5em;overflow-x:auto}pre.out{padding:.2em .5em;overflow-x:auto}"
             "div.table{overflow-x:auto}table{border-collapse:collapse;font-size:85%}"
             "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}")
    title = html.escape(Path(path).stem)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title><style>{style}</style>"
            f"</head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


if __name__ == "__main__":
    # python -m optcomp.pipeline config-reference [schema.yaml]   -> the table of config/README.md
    # python -m optcomp.pipeline update-readme                    -> copy generated files into README,
    #                                                                rerun its console sessions
    if len(sys.argv) >= 2 and sys.argv[1] == "config-reference":
        print(config_reference(*sys.argv[2:3]), end="")
    elif len(sys.argv) >= 2 and sys.argv[1] == "update-readme":
        print("updated:", ", ".join(update_readme()) or "nothing")
    else:
        print("usage: python -m optcomp.pipeline {config-reference [schema.yaml] | update-readme}", file=sys.stderr)
        sys.exit(2)
