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

Provenance (:func:`provenance`) adds to :func:`optcomp.experiments.io.provenance` the git
commit of the last change to the code and workflow (``src/``, ``rules/``, ``Snakefile``,
``config/``, ``notebooks/``, ``pyproject.toml``) and whether those paths had uncommitted
changes, and -- for timing tables only -- the machine (CPU model, cores, load average).
Results committed after the code they come from therefore carry the same record when a
fresh clone regenerates them, byte for byte.
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

__all__ = ["sweep", "merge", "table", "timing_summary", "plot", "notebook", "resolve", "job_spec", "spec_hash", "provenance",
           "git_state", "machine", "run_notebook", "validate_config", "config_problem", "ConfigError", "RESULTS_ENV",
           "CODE_PATHS"]

RESULTS_ENV = "OPTCOMP_RESULTS"
# the paths whose last commit (and dirtiness) the provenance records
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


def provenance(smk, function: str, *, config=None) -> dict | None:
    """The ``.meta.json`` record of a rule's output (None for chunks, which are merged)."""
    from .experiments import io

    if smk.params.get("chunk", False):
        return None
    section = smk.params.get("section")
    if config is None and section is not None:
        config = _smk_spec(smk)
    record = io.provenance(function=function, config=config, section=section, extra={"rule": smk.rule})
    record.update(git_state(Path.cwd()))
    if smk.params.get("machine", False):
        record["machine"] = machine()
    return record


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
        io.write_csv(df, smk.output.csv, meta=provenance(smk, smk.params.function, config=spec))
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


# ------------------------------------------------------------------------ config reference


# --------------------------------------------------------------------------- config validation


class ConfigError(ValueError):
    """A bad workflow config; the message is one line naming the dotted key."""


def _schema_problem(config: dict, schema: dict) -> str | None:
    """The first schema violation as one line naming the dotted key (an unknown key with
    the nearest valid one), or None."""
    import difflib

    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        valid = list(error.schema.get("properties", {}))
        unknown = sorted(key for key in error.instance if key not in valid)
        if unknown:
            key = f"{where}.{unknown[0]}" if where else str(unknown[0])
            near = difflib.get_close_matches(str(unknown[0]), valid, n=1)
            hint = (f"did you mean {where + '.' if where else ''}{near[0]}?" if near
                    else f"valid keys here: {', '.join(valid)}")
            return f"config {key}: unknown key ({hint})"
    message = " ".join(error.message.split())
    if len(message) > 160:
        message = message[:159] + "\u2026"
    return f"config {where or '(top level)'}: {message}"


def _cross_field_problem(cfg: dict) -> str | None:
    """Cross-field checks the JSON schema cannot express (on a default-filled config)."""
    hom = cfg["homogeneous"]
    too_big = [k for k in hom["ratio_k"] if k > hom["k_max"]]
    if too_big:
        return f"config homogeneous.ratio_k: {too_big} exceed homogeneous.k_max = {hom['k_max']}"
    if hom["zoom_k_max"] > hom["k_max"]:
        return f"config homogeneous.zoom_k_max = {hom['zoom_k_max']} exceeds homogeneous.k_max = {hom['k_max']}"
    runtime = cfg["runtime"]
    grids = {
        "budget.k": cfg["budget"]["k"],
        "heterogeneous.k": cfg["heterogeneous"]["k"],
        "runtime.approx_vs_k.k": runtime["approx_vs_k"]["k"],
        "runtime.exact_heterogeneous.bruteforce_k": runtime["exact_heterogeneous"]["bruteforce_k"],
        "runtime.exact_heterogeneous.optimal_k": runtime["exact_heterogeneous"]["optimal_k"],
        "runtime.exact_homogeneous.k": runtime["exact_homogeneous"]["k"],
        "kov_section4.k": cfg["kov_section4"]["k"],
        "kov_section4.geometric.k": cfg["kov_section4"]["geometric"]["k"],
    }
    for key, grid in grids.items():
        if isinstance(grid, dict) and grid["from"] > grid["to"]:
            return f"config {key}: from = {grid['from']} > to = {grid['to']}"
    dists = cfg["heterogeneous"]["distribution"]
    for i, dist in enumerate(dists if isinstance(dists, list) else [dists]):
        key = "heterogeneous.distribution" + (f"[{i}]" if isinstance(dists, list) else "")
        if dist["name"] != "choice" and dist["low"] > dist["high"]:
            return f"config {key}: low = {dist['low']} > high = {dist['high']}"
        if dist["name"] == "choice" and dist.get("p") is not None:
            if len(dist["p"]) != len(dist["values"]):
                return f"config {key}.p: {len(dist['p'])} probabilities for {len(dist['values'])} values"
            if abs(sum(dist["p"]) - 1) > 1e-8:
                return f"config {key}.p: the probabilities sum to {sum(dist['p'])!r}, not 1"
    brute = runtime["exact_heterogeneous"]["bruteforce_k"]
    if max(brute if isinstance(brute, list) else [brute["to"]]) > 24:
        return "config runtime.exact_heterogeneous.bruteforce_k: the 2^k brute force is limited to k <= 24"
    names = set()
    for i, w in enumerate(cfg["dpsgd"]["workloads"]):
        key = f"config dpsgd.workloads[{i}]"
        if w["name"] in names:
            return f"{key}.name: {w['name']!r} names two workloads"
        names.add(w["name"])
        if ("sample_rate" in w) == ("batch_size" in w or "dataset_size" in w):
            return f"{key}: give sample_rate, or batch_size and dataset_size"
        if "sample_rate" not in w and not ("batch_size" in w and "dataset_size" in w):
            return f"{key}: batch_size and dataset_size go together"
        if "batch_size" in w and w["batch_size"] > w["dataset_size"]:
            return f"{key}: batch_size = {w['batch_size']} exceeds dataset_size = {w['dataset_size']}"
    return None


def config_problem(config: dict, schema_path: str | os.PathLike = "config/schema.yaml") -> str | None:
    """Validate ``config`` against the JSON schema, filling its defaults in place (as
    ``snakemake.utils.validate`` does), then the cross-field checks; returns the first
    problem as one line naming the dotted key (an unknown key: with the nearest valid key),
    or None."""
    import yaml
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, str(schema_path))
    except WorkflowError:
        schema = yaml.safe_load(Path(schema_path).read_text())
        return _schema_problem(config, schema) or "config: does not match config/schema.yaml"
    return _cross_field_problem(config)


def validate_config(config: dict, schema_path: str | os.PathLike = "config/schema.yaml") -> None:
    """For the Snakefile: :func:`config_problem`, and on a problem one line on stderr and
    exit status 1, before any job (no traceback, no dump of the config)."""
    problem = config_problem(config, schema_path)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        sys.stderr.flush()
        sys.exit(1)


def config_reference(schema_path: str | os.PathLike = "config/schema.yaml") -> str:
    """A Markdown table of every key of the config schema: dotted key, type, default,
    description (what ``config/README.md`` quotes between its ``config-keys`` markers;
    ``python -m optcomp.pipeline config-reference`` prints it)."""
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    defs = schema.get("$defs", {})

    def deref(node):
        while isinstance(node, dict) and "$ref" in node:
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = dict(defs[node["$ref"].rsplit("/", 1)[1]], **extra)
        return node

    def kind(node):
        node = deref(node)
        if "oneOf" in node:
            return " or ".join(dict.fromkeys(kind(n) for n in node["oneOf"]))
        if "enum" in node:
            return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
        if "const" in node:
            return f"`{node['const']}`"
        t = node.get("type", "")
        if t == "array" and "items" in node:
            return f"list of {kind(node['items'])}"
        bounds = []
        for key, sym in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if key in node:
                bounds.append(f"{sym} {node[key]}")
        return t + (f" ({', '.join(bounds)})" if bounds else "")

    def text(v):
        return json.dumps(v, separators=(", ", ": ")) if not isinstance(v, str) else v

    rows = ["| key | type | default | description |", "|---|---|---|---|"]

    def walk(node, prefix):
        for name, sub in node.get("properties", {}).items():
            key = f"{prefix}{name}"
            full = deref(sub)
            desc = " ".join(str(full.get("description", "")).split()).replace("|", "\\|")
            if full.get("type") == "object" and "properties" in full:
                rows.append(f"| `{key}` | section | | {desc} |")
                walk(full, key + ".")
            else:
                default = f"`{text(full['default'])}`" if "default" in full else ""
                rows.append(f"| `{key}` | {kind(sub)} | {default} | {desc} |")

    walk(schema, "")
    return "\n".join(rows) + "\n"


# README blocks that quote generated files: <!-- name:start --> ... <!-- name:end -->
README_QUOTES = {
    "ratios": "results/homogeneous/ratios.md",
    "timing-summary": "results/timing/reference/summary.md",
    "command-times": "results/timing/reference/commands.md",
    "bench-scale": "benchmarks/results/bench_scale.md",
    "bench-exact": "benchmarks/results/bench_exact.md",
    "bench-approx": "benchmarks/results/bench_approx.md",
    "bench-mechanisms": "benchmarks/results/bench_mechanisms.md",
    # config/paper.yaml through the local SLURM: sacct's CPU time and peak memory per rule
    # (workflow/cluster/job-report.py)
    "cluster-paper": "benchmarks/results/cluster_paper.md",
    "kov-section4-claims": "results/kov_section4/claims.md",
    "dpsgd-claims": "results/dpsgd/claims.md",
    "bench-dpsgd": "benchmarks/results/bench_dpsgd.md",
}


def quoted_text(generated: str) -> str:
    """What the README quotes of a generated Markdown file: the file without its generator
    comment and outer blank lines (inner blank lines stay: they end tables and paragraphs)."""
    return "\n".join(line for line in generated.splitlines() if not line.startswith("<!--")).strip()


def update_readme(readme: str | os.PathLike = "README.md", root: str | os.PathLike = ".") -> list[str]:
    """Copy every generated file of :data:`README_QUOTES` into its README block (the
    numbers the README quotes are never typed by hand); returns the blocks changed."""
    import re

    path = Path(readme)
    text = path.read_text()
    changed = []
    for name, source in README_QUOTES.items():
        generated = Path(root, source)
        if not generated.exists():
            continue
        new = f"<!-- {name}:start -->\n" + quoted_text(generated.read_text()) + f"\n<!-- {name}:end -->"
        pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
        if pattern.search(text) and pattern.search(text).group(0) != new:
            text = pattern.sub(lambda _m: new, text)
            changed.append(name)
    refreshed = _refresh_console(text, Path(root))
    if refreshed != text:
        text = refreshed
        changed.append("console sessions")
    path.write_text(text)
    return changed


def _refresh_console(text: str, root: Path) -> str:
    """Rerun every ``$ optcomp ...`` line of the README's ``console`` blocks (as
    ``python -m optcomp`` from ``root/src``) and put its output (stdout and stderr) below it."""
    import re
    import subprocess
    import tempfile

    env = dict(os.environ, PYTHONPATH=str((root / "src").resolve()))

    def run_block(match) -> str:
        out = []
        with tempfile.TemporaryDirectory() as tmp:
            for line in match.group(1).splitlines(keepends=True):
                if not line.startswith("$ "):
                    continue
                command = line[2:].rstrip("\n")
                shell = re.sub(r"(^|\| )optcomp ", rf"\g<1>{sys.executable} -m optcomp ", command)
                r = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
                out.append(line + r.stdout + r.stderr)
        return "```console\n" + "".join(out) + "```"

    return re.sub(r"```console\n(.*?)```", run_block, text, flags=re.S)


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
