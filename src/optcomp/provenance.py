"""Provenance of the pipeline's tables: the ``.meta.json`` sidecar beside every CSV of
``results/``, recorded so that it changes only when what produced the file changes.

A sidecar holds (:func:`record`; :func:`optcomp.pipeline.provenance` writes it):

* ``rule``, ``function`` -- the Snakemake rule and the package function that produced the
  table (its dotted path), ``config_section``, ``config`` (the job's share of that section)
  and ``config_sha256``;
* ``code_sha256`` -- :func:`code_hash` of that function: the source of every module of the
  package it imports, directly or through others, docstrings and comments left out;
* ``optcomp_version`` and the ``python``, ``numpy``, ``scipy``, ``pandas`` versions (the
  figures command installs them from ``requirements.lock``);
* ``rows``, ``columns`` and, for timing tables only, the ``machine``.

**Why a content hash and not a git commit.**  The commit of the last change to the code
changes with every commit, also one that only touches a docstring, the command line or a
figure, and with every rebase; a fresh clone that reruns the pipeline would then rewrite
every sidecar although no table changed.  The hash of the producing code changes exactly
when that code does: it is the same in a clone, an unpacked archive (no git at all) or a
rebased branch, and it can be recomputed from the source alone, so a test checks that
every committed sidecar records the code that is committed beside it
(:func:`problems`).  Which modules count (:func:`code_modules`): the import closure of the
function's module inside ``optcomp`` -- every ``import`` statement, function-level ones
included, and every string constant that names a module of the package, which is how the
facade and the method registry import their functions on first use.  The presentation
layers (the command line, the figures, the third-party integrations and the workflow glue
itself: :data:`PRESENTATION`) are left out: they draw, print or dispatch, but never compute
a number of a table.  Docstrings and comments are removed before hashing: rewording them
never reruns anything.

``python -m optcomp.provenance`` prints every committed sidecar that no longer matches
(exit status 1), or nothing; ``python -m optcomp.provenance hash optcomp.experiments.budget.sweep``
prints one function's code hash and the modules it covers.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import os
import subprocess
import sys
import tokenize
from pathlib import Path

__all__ = ["PRESENTATION", "code_modules", "code_hash", "normalized_source", "record", "sidecars", "problems"]

PACKAGE = Path(__file__).resolve().parent
# modules that present results (command line, plots, third-party adapters) or run the
# workflow: never the source of a number in a table, so never part of a code hash
PRESENTATION = ("optcomp.cli", "optcomp.__main__", "optcomp.figures", "optcomp.integrations",
                "optcomp.pipeline", "optcomp.pipeline_config", "optcomp.reporting", "optcomp.provenance")


def _excluded(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PRESENTATION)


@functools.lru_cache(maxsize=None)
def _package_modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file of the package."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = ["optcomp", *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


# Parsing the ~60 modules of a closure (ast, tokenize) costs ~2 s, once in every workflow job
# (each a fresh interpreter).  What is read from a file -- its normalized source, the import
# targets it names and its short string constants -- depends on its bytes and its package's
# dotted name only, so it is kept in a cache keyed by the SHA-256 of exactly those (and of the
# Python version and this format): a changed byte is a new key, never a stale answer.  The
# cache lives outside the repository (OPTCOMP_PROVENANCE_CACHE, default
# ~/.cache/optcomp/provenance; an empty value turns it off); an entry that cannot be read or
# written is computed as if there were no cache.
CACHE_FORMAT = "optcomp-provenance-facts-1"


def _cache_dir() -> Path | None:
    value = os.environ.get("OPTCOMP_PROVENANCE_CACHE")
    if value is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "optcomp" / "provenance"
    return Path(value) if value else None


def _facts(path: Path, package: str) -> tuple[str, frozenset[str], frozenset[str]]:
    """(normalized source, import targets, string constants under 200 characters) of the file,
    once per version of it (in this process, and across processes through the cache)."""
    stat = path.stat()
    return _facts_cached(str(path), stat.st_mtime_ns, stat.st_size, package)


@functools.lru_cache(maxsize=1024)
def _facts_cached(path: str, mtime_ns: int, size: int, package: str):
    source = Path(path).read_bytes()
    key = hashlib.sha256(b"\0".join([CACHE_FORMAT.encode(), f"{sys.version_info[:2]}".encode(), package.encode(),
                                      source])).hexdigest()
    folder = _cache_dir()
    entry = folder / f"{key}.json" if folder is not None else None
    if entry is not None:
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
            if (isinstance(data, dict) and data.get("format") == CACHE_FORMAT and isinstance(data.get("normalized"), str)
                    and all(isinstance(data.get(k), list) and all(isinstance(v, str) for v in data[k])
                            for k in ("imports", "strings"))):
                return data["normalized"], frozenset(data["imports"]), frozenset(data["strings"])
        except (OSError, ValueError):
            pass
    normalized = normalized_source(source)
    imports: set[str] = set()
    strings: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imports.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            imports.add(target)
            imports.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            strings.add(node.value)
    if entry is not None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": CACHE_FORMAT, "normalized": normalized, "imports": sorted(imports),
                                       "strings": sorted(strings)}), encoding="utf-8")
            os.replace(tmp, entry)  # atomic: a job running beside this one reads all of it or nothing
        except OSError:
            pass
    return normalized, frozenset(imports), frozenset(strings)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _direct(name: str, root: Path) -> frozenset[str]:
    """The package modules ``name`` names: imports anywhere in the file (relative ones
    resolved), and string constants that are a module's dotted path, absolute
    (``"optcomp.lattice"``, ``"optcomp.experiments.budget.sweep"``: the longest module
    prefix) or relative to the package (``"optimal"``, as the lazy registries write them)."""
    modules = _package_modules(root)
    path = modules[name]
    _, imports, strings = _facts(path, _package_of(name, path))
    named: set[str] = set(imports)
    for text in strings:
        if f"optcomp.{text}" in modules:
            named.add(f"optcomp.{text}")
        elif text.startswith("optcomp.") and " " not in text:
            named.add(text)
    found = set()
    for dotted in named:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):  # the longest prefix that is a module of the package
            if ".".join(parts[:i]) in modules:
                found.add(".".join(parts[:i]))
                break
    return frozenset(found)


def _with_parents(name: str) -> list[str]:
    """``optcomp.a.b`` -> ``[optcomp, optcomp.a, optcomp.a.b]``: importing a module runs its
    packages' ``__init__`` first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def code_modules(function: str, package: str | os.PathLike | None = None) -> list[str]:
    """The package modules whose source :func:`code_hash` covers for ``function`` (a dotted
    path ``optcomp.x.y.name``): the import closure of its module, presentation layers left
    out, sorted.  ``package``: the ``optcomp`` source folder (default: this one)."""
    root = Path(package or PACKAGE).resolve()
    modules = _package_modules(root)
    module = function
    while module not in modules:
        if "." not in module:
            raise ValueError(f"function: {function!r} is not in a module of the optcomp package")
        module = module.rpartition(".")[0]
    seen: set[str] = set()
    todo = [m for m in _with_parents(module) if m in modules]
    while todo:
        name = todo.pop()
        if name in seen or _excluded(name):
            continue
        seen.add(name)
        for dep in _direct(name, root):
            todo.extend(m for m in _with_parents(dep) if m in modules and m not in seen)
    return sorted(seen)


def normalized_source(source: bytes | str) -> str:
    """Python source without its docstrings and comments, trailing blanks and empty lines:
    what :func:`code_hash` hashes.  Positions come from the AST and the tokenizer, which
    agree across Python versions, so the result does too."""
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    lines = text.splitlines()
    cut: list[tuple[int, int, int, int]] = []  # (line, column, end line, end column), 1-based lines, characters
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            doc = body[0]

            def column(line: int, byte_offset: int) -> int:  # AST columns count UTF-8 bytes
                return len(lines[line - 1].encode("utf-8")[:byte_offset].decode("utf-8"))

            cut.append((doc.lineno, column(doc.lineno, doc.col_offset),
                        doc.end_lineno, column(doc.end_lineno, doc.end_col_offset)))
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            cut.append((tok.start[0], tok.start[1], tok.end[0], tok.end[1]))
    for line, col, end_line, end_col in sorted(cut, reverse=True):  # from the end: positions stay valid
        if line == end_line:
            lines[line - 1] = lines[line - 1][:col] + lines[line - 1][end_col:]
        else:
            lines[line - 1: end_line] = [lines[line - 1][:col] + lines[end_line - 1][end_col:]]
    return "\n".join(s.rstrip() for s in lines if s.strip()) + "\n"


def code_hash(function: str, package: str | os.PathLike | None = None) -> str:
    """SHA-256 (hex) of the code that produces a table through ``function``: the
    :func:`normalized_source` of each of its :func:`code_modules`, with the module's name."""
    modules = _package_modules(Path(package or PACKAGE).resolve())
    digest = hashlib.sha256()
    for name in code_modules(function, package):
        digest.update(f"{name}\n".encode("utf-8"))
        path = modules[name]
        digest.update(_facts(path, _package_of(name, path))[0].encode("utf-8"))
    return digest.hexdigest()


def record(*, rule: str, function: str, section: str | None, config) -> dict:
    """The sidecar of a table (before its ``rows``, ``columns`` and, for timings, ``machine``):
    what :func:`optcomp.pipeline.provenance` writes, and what :func:`problems` expects."""
    from .experiments import io as results_io

    meta = results_io.provenance(function=function, config=config, section=section, extra={"rule": rule})
    meta["code_sha256"] = code_hash(function)
    return meta


# ------------------------------------------------------------------- checking committed sidecars

# a sidecar under this folder records a past run (a copy of results/timing/local/, which the
# pipeline never writes): its rule and function must exist, its code may be older
REFERENCE = "results/timing/reference/"
# the fields that describe the environment, not the code or the config
ENVIRONMENT = ("optcomp_version", "python", "numpy", "scipy", "pandas")


def sidecars(root: str | os.PathLike = ".") -> list[str]:
    """The committed ``results/**/*.meta.json`` (``git ls-files``); outside a git checkout,
    every sidecar under ``results/`` except this machine's run and the chunks."""
    root = Path(root)
    r = subprocess.run(["git", "ls-files", "results/*.meta.json"], cwd=root, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        return sorted(r.stdout.split())
    return sorted(str(p.relative_to(root)) for p in (root / "results").rglob("*.meta.json")
                  if not {"local", "chunks"} & set(p.relative_to(root).parts))


def _workflow(root: Path):
    """The parsed workflow of ``root/Snakefile`` (its default config, validated and filled in)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ResourceSettings

    cwd = os.getcwd()
    os.chdir(root)  # the Snakefile reads config/ relative to the working directory
    try:
        with SnakemakeApi() as api:
            return api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=Path("Snakefile"),
                                workdir=Path("."))._workflow
    finally:
        os.chdir(cwd)


class _Wildcards(dict):
    """What a rule's params functions receive: the wildcards by name or as attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _producer(workflow, path: str):
    """(rule, its params with this output's wildcards applied) or (None, None)."""
    for rule in workflow.rules:
        if rule.is_producer(path):
            wildcards = _Wildcards(rule.get_wildcards(path))
            params = {k: (v(wildcards) if callable(v) else v) for k, v in rule.params.items()}
            return rule, params, dict(wildcards)
    return None, None, None


def problems(root: str | os.PathLike = ".") -> list[str]:
    """Every way in which a committed sidecar differs from what the current code and
    config would write beside the committed CSV; empty when a fresh clone's figures
    command leaves the sidecars as they are.  Checked: the function exists; the rule exists,
    produces that file and names that function; the table's rows and columns; and, outside
    the reference timing run, the config section, the job's config and its hash, the code
    hash and, for a merged table, the number of chunks merged.  The environment's versions are not compared (they are the lock's)."""
    from .pipeline import job_spec, resolve

    root = Path(root).resolve()
    workflow = _workflow(root)
    config = workflow.config
    rule_names = {rule.name for rule in workflow.rules}
    found = []
    for name in sidecars(root):
        meta = json.loads((root / name).read_text())
        csv = name[: -len(".meta.json")] + ".csv"
        function, rule_name = meta.get("function"), meta.get("rule")
        try:
            resolve(function)
        except (AttributeError, ImportError, ValueError, TypeError):
            found.append(f"{name}: function {function!r} does not exist")
            continue
        if rule_name not in rule_names:
            found.append(f"{name}: rule {rule_name!r} does not exist")
            continue
        reference = name.startswith(REFERENCE)
        produced = "results/timing/local/" + csv[len(REFERENCE):] if reference else csv
        rule, params, wildcards = _producer(workflow, produced)
        if rule is None or rule.name != rule_name:
            found.append(f"{name}: {produced} is produced by rule {rule.name if rule else None!r}, "
                         f"the sidecar names {rule_name!r}")
            continue
        if params.get("function") != function:
            found.append(f"{name}: rule {rule_name} calls {params.get('function')!r}, the sidecar names {function!r}")
            continue
        if (root / csv).exists():
            text = (root / csv).read_text()
            if meta.get("columns") != text.partition("\n")[0].split(",") or meta.get("rows") != text.count("\n") - 1:
                found.append(f"{name}: rows or columns differ from {csv}")
        if reference:
            continue
        section = params.get("section")
        share = job_spec(config, section, params.get("spec"), wildcards) if section is not None else None
        want = record(rule=rule_name, function=function, section=section, config=share)
        if str(rule.script or "").endswith("merge.py") and not params.get("sort"):
            want["chunks"] = len(list(rule.input))  # a byte-for-byte merge counts its chunks
        for key in sorted(set(want) - set(ENVIRONMENT)):
            if meta.get(key) != want[key]:
                found.append(f"{name}: {key} is {_short(meta.get(key))}, the current "
                             f"{'code' if key == 'code_sha256' else 'config'} writes {_short(want[key])}")
        for key in sorted(set(meta) - set(want) - {"rows", "columns", "machine"}):
            found.append(f"{name}: {key} is no longer recorded")
    return found


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 70 else text[:67] + "..."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hash"] and len(argv) == 2:
        print(code_hash(argv[1]))
        print("\n".join(code_modules(argv[1])))
        return 0
    if argv:
        print("usage: python -m optcomp.provenance [hash FUNCTION]", file=sys.stderr)
        return 2
    found = problems(".")
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} sidecar problem(s): rerun the figures command (snakemake --cores 8 --forceall) "
              "and commit results/ and figures/", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
