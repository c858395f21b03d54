"""Writing results: tidy CSVs with provenance, atomically, byte-for-byte reproducibly.

Every CSV the pipeline writes goes through :func:`write_csv`, which

* formats floats with ``repr`` (the shortest string that round-trips to the same
  double), integers as integers, NaN as an empty field, ``inf`` as ``inf``;
* keeps the row order it is given (the sweeps sort their rows) and uses ``\\n`` line
  ends, so the same config gives the same bytes on every run and machine;
* writes to a temporary file in the target directory and ``os.replace``-s it into place,
  so an interrupted job never leaves a half-written CSV behind;
* writes a sidecar ``<name>.meta.json`` (package version, config section and its
  SHA-256, the function that produced the table, Python/NumPy/SciPy/pandas versions;
  :func:`optcomp.provenance.record` adds the rule and the hash of the producing code, and
  :func:`optcomp.pipeline.provenance`, for timings, the machine) — provenance without
  extra columns.

Timing CSVs (``results/timing/``) go through the same writer; only their values differ
between runs.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Mapping

import numpy as np
import pandas as pd

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "canonical_json",
    "config_hash",
    "format_frame",
    "read_csv",
    "write_csv",
    "provenance",
    "Progress",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory + ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace variation: the input of :func:`config_hash`."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def config_hash(obj: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of a config section."""
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()


def _format_value(x) -> str:
    if x is None:
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isnan(x):
            return ""
        return repr(x)  # shortest round-trip; 'inf' / '-inf' for infinities
    text = str(x)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def format_frame(df: pd.DataFrame) -> str:
    """The CSV text of ``df`` (header + rows, ``\\n`` line ends), floats via ``repr``."""
    out = io.StringIO()
    out.write(",".join(_format_value(c) for c in df.columns) + "\n")
    columns = [df[c].tolist() for c in df.columns]
    for row in zip(*columns):
        out.write(",".join(_format_value(v) for v in row) + "\n")
    return out.getvalue()


def provenance(*, function: str, config: Any = None, section: str | None = None, extra: Mapping | None = None) -> dict:
    """The provenance record written beside every CSV (deterministic: no timestamps)."""
    from .. import __version__

    record = {
        "optcomp_version": __version__,
        "function": function,
        "config_section": section,
        "config_sha256": config_hash(config) if config is not None else None,
        "config": config,
        "python": ".".join(map(str, sys.version_info[:3])),
        "numpy": np.__version__,
        "scipy": _scipy_version(),
        "pandas": pd.__version__,
    }
    if extra:
        record.update(extra)
    return record


def _scipy_version() -> str | None:
    try:
        import scipy
    except ImportError:
        return None
    return scipy.__version__


def write_csv(df: pd.DataFrame, path: str | os.PathLike, *, meta: Mapping | None = None) -> None:
    """Write ``df`` to ``path`` atomically, plus ``path`` with ``.meta.json`` if ``meta`` is given."""
    path = Path(path)
    atomic_write_text(path, format_frame(df))
    if meta is not None:
        meta = dict(meta)
        meta["rows"] = int(len(df))
        meta["columns"] = [str(c) for c in df.columns]
        atomic_write_text(meta_path(path), json.dumps(meta, indent=2, sort_keys=True, allow_nan=True) + "\n")


def meta_path(path: str | os.PathLike) -> Path:
    """``results/x/y.csv`` -> ``results/x/y.meta.json``."""
    path = Path(path)
    return path.with_name(path.stem + ".meta.json")


_PANDAS_MAJOR = int(pd.__version__.split(".")[0])


def read_csv(path: str | os.PathLike) -> pd.DataFrame:
    """Read a CSV written by :func:`write_csv` (exact float round trip: pandas >= 3 parses
    floats exactly by default; older versions need ``float_precision="round_trip"``)."""
    extra = {} if _PANDAS_MAJOR >= 3 else {"float_precision": "round_trip"}
    return pd.read_csv(path, keep_default_na=False, na_values=[""], **extra)


class Progress:
    """A progress line for long sweeps, written to a job's log (no tqdm needed).

    ``Progress(total, "label", stream)``; call ``step()`` after each unit of work.  A line
    ``label: 120/1000 (12%) 3.1 s elapsed, ~23 s left`` is written at most every
    ``every`` seconds and once at the end.
    """

    def __init__(self, total: int, label: str, stream: IO[str] | None = None, every: float = 2.0):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.done = 0
        self.start = time.perf_counter()
        self._last = self.start
        print(f"{label}: {self.total} steps", file=self.stream, flush=True)

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.done >= self.total or now - self._last >= self.every:
            self._last = now
            self._write(now)

    def message(self, text: str) -> None:
        print(f"{self.label}: {text}", file=self.stream, flush=True)

    def _write(self, now: float) -> None:
        elapsed = now - self.start
        frac = self.done / self.total if self.total else 1.0
        left = elapsed * (1 - frac) / frac if frac > 0 else math.inf
        eta = f", ~{left:.0f} s left" if self.done < self.total and math.isfinite(left) else ""
        print(
            f"{self.label}: {self.done}/{self.total} ({100 * frac:.0f}%) {elapsed:.1f} s elapsed{eta}",
            file=self.stream,
            flush=True,
        )
