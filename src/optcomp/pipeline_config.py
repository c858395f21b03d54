"""The workflow's configuration (``config/config.yaml``, ``config/schema.yaml``): its checks
and its reference table.

* :func:`validate_config` -- what the Snakefile runs before any job: the JSON schema (its
  defaults filled in, as ``snakemake.utils.validate`` does) and the cross-field checks the
  schema cannot express; a problem is one line naming the dotted key (an unknown key with
  the nearest valid one) and exit status 1;
* :func:`config_problem` -- the same checks, returning the problem (for tests and tools);
* :func:`config_reference` -- the Markdown table of every key (type, default, description)
  that ``config/README.md`` quotes (``python -m optcomp.pipeline config-reference``).

The Snakemake glue that reads the config for each job is :mod:`optcomp.pipeline`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

__all__ = ["validate_config", "config_problem", "config_reference", "ConfigError"]


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
