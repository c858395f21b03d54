"""Ledgers from text: an :class:`~optcomp.accountant.Accountant` read from a CSV or JSON file
(or stdin), and mechanism objects from their one-line specs (``laplace:scale=10,count=5``).

What the command line's ``--file`` and ``--mechanism`` read, here beside the ledger they
fill rather than inside the argument parser:

* :func:`read_accountant` -- a file (``-``: stdin) as an Accountant.  Hostile input is
  refused in one line naming the file, line and column: a byte-order mark is dropped
  (spreadsheets write one), CRLF and CR-only files read as LF but a file mixing them is
  refused, quoting is strict (an unterminated quote is an error, not the rest of the
  file), fields are limited by the csv module's field size and JSON by its nesting depth
  and integer length;
* ``_parse_mechanism`` / ``_spec`` -- a spec ``NAME[:KEY=VALUE,...]`` to (mechanism,
  count or None) and a mechanism back to its spec (``_spec`` is read back exactly);
* ``_real`` / ``_integer`` / ``_count`` -- the number syntax of files and flags (the
  command line wraps them as its argument types).

Every problem is a ``ValueError`` with a one-line message; :func:`read_accountant`'s is a
:class:`LedgerError` naming the file.
"""

from __future__ import annotations

import math
import re
import sys

from ._inputs import MAX_K

__all__ = ["read_accountant", "LedgerError"]


class LedgerError(ValueError):
    """A file that does not read as a ledger: one line naming the file (and line, column)."""


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _show(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error line, cut after ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}\u2026 ({len(text):,} characters)"


# ----------------------------------------------------------------------------------- numbers


def _real(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {_show(text)}") from None
    if math.isnan(value):
        raise ValueError(f"expected a number, got {_show(text)}")
    return value


def _integer(text: str, hi: int | None = None, lo: int = 1) -> int:
    """An integer >= ``lo`` (and <= ``hi``); integral scientific notation (1e6) is accepted."""
    t = text.strip().replace("_", "")
    try:
        value = int(t)
    except ValueError:
        try:
            f = float(t)
        except ValueError:
            raise ValueError(f"expected an integer, got {_show(text)}") from None
        if not (math.isfinite(f) and f == math.floor(f)):
            raise ValueError(f"expected an integer, got {_show(text)}") from None
        value = int(f)
    if value < lo or (hi is not None and value > hi):
        what = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi:.0e}]"
        raise ValueError(f"expected {what}, got {_show(text)}")
    return value


def _count(text: str) -> int:
    """A number of mechanisms (--k, --count): an integer in [1, 10^12]."""
    return _integer(text, MAX_K)


# ----------------------------------------------------------------------------------- mechanism specs


#: the keys of a subsampled mechanism's spec, on top of its base's (``q`` only where the
#: base has no parameter of that name: a pair's ``q`` is its distribution)
_SAMPLING_KEYS = ("sampling_rate", "q", "scheme", "relation")


def _parse_mechanism(text: str):
    """(mechanism object, count or None) of a spec ``NAME[:KEY=VALUE,...]`` (NAME a family of
    ``optcomp.mechanisms.REGISTRY``); ValueError naming the bad key (the object's own checks
    name its parameter).  A sampling rate (``q=`` or ``sampling_rate=``, with ``scheme=`` and
    ``relation=`` words) makes it that mechanism subsampled
    (:class:`~optcomp.mechanisms.Subsampled`): ``gaussian:sigma=1.1,q=0.0042``."""
    from . import mechanisms as mech

    name, _, rest = text.strip().partition(":")
    try:
        cls = mech.family(name)
    except ValueError:
        raise ValueError(f"unknown mechanism {_show(name.strip())} (choose from {', '.join(mech.REGISTRY)})") from None
    if cls is mech.Subsampled:
        raise ValueError("give the sampled mechanism's spec with its sampling rate, e.g. gaussian:sigma=1.1,q=0.01")
    keys = cls.spec_keys()
    sampling = [k for k in _SAMPLING_KEYS if k not in keys]
    values: dict = {}
    sampled: dict = {}
    count = None
    for item in rest.split(",") if rest.strip() else ():
        key, eq, value = (part.strip() for part in item.partition("="))
        key = key.lower()
        if not eq or not key or not value:
            raise ValueError(f"expected KEY=VALUE, got {_show(item.strip())}")
        if key in values or ("q" if key == "sampling_rate" else key) in sampled or (key == "count" and count is not None):
            raise ValueError(f"{key} given twice")
        if key != "count" and key not in keys and key not in sampling:
            raise ValueError(f"unknown key {key!r} for {cls.family} (expected {', '.join(keys + sampling + ['count'])})")
        try:
            if key == "count":
                count = _count(value)
            elif key in ("scheme", "relation"):
                sampled[key] = value.lower()
            elif key in sampling:
                sampled["q" if key == "sampling_rate" else key] = _real(value)
            elif key in cls.list_keys:
                values[key] = [_real(v.strip()) for v in value.split("/")]
            else:
                values[key] = _real(value)
        except ValueError as exc:  # a number that does not parse: named by its key
            raise ValueError(f"{key}: {exc}") from None
    base = cls.from_spec(values)
    if not sampled:
        return base, count
    if "q" not in sampled:
        raise ValueError(f"{', '.join(sorted(sampled))} without a sampling rate (q=... or sampling_rate=...)")
    return mech.Subsampled(base, sampled.pop("q"), **sampled), count


def _sampled(mech, q: float):
    """``mech`` Poisson-subsampled at rate ``q`` (the q column of a ledger file)."""
    from .mechanisms import Subsampled

    if isinstance(mech, Subsampled):
        raise ValueError("a sampling rate in both the q column and the mechanism spec")
    return Subsampled(mech, q)


def _spec(m) -> str:
    """The --mechanism spec of a mechanism object (what _parse_mechanism reads back)."""
    from .mechanisms import Subsampled

    if isinstance(m, Subsampled):
        rate = "q" if "q" not in type(m.mechanism).spec_keys() else "sampling_rate"
        extra = "" if (m.scheme, m.relation) == ("poisson", "add_remove") else \
            f",scheme={m.scheme},relation={m.relation}"
        return f"{_spec(m.mechanism)},{rate}={m.q!r}{extra}"
    parts = []
    for key, v in m.spec_values().items():
        parts.append(f"{key}={'/'.join(repr(x) for x in v) if isinstance(v, tuple) else repr(v)}")
    return f"{m.family}:{','.join(parts)}"


# ----------------------------------------------------------------------------------- files


def _read_source(path: str) -> tuple[str, str]:
    """The text of ``path`` (``-``: stdin) and its name for messages.  A file and the same
    bytes on stdin read alike: UTF-8, a leading byte-order mark dropped (spreadsheets write
    one), line endings left as they are (:func:`_csv_accountant` checks them)."""
    name = "stdin" if path == "-" else path if len(path) <= 60 else _show(path, 60)
    if path == "-":
        raw = getattr(sys.stdin, "buffer", None)
        if raw is None:  # a text stream (e.g. replaced in tests)
            text = sys.stdin.read()
            return (text[1:] if text.startswith("\ufeff") else text), name
        data = raw.read()
    else:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise LedgerError(f"{name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig"), name
    except UnicodeDecodeError:
        raise LedgerError(f"{name}: not a UTF-8 text file (expected CSV or JSON)") from None


def _integral(value):
    """JSON/CSV count: an int, or an integral float such as 1e6."""
    if isinstance(value, float) and math.isfinite(value) and value == math.floor(value):
        return int(value)
    return value


def read_accountant(path: str):
    """The :class:`~optcomp.accountant.Accountant` of the mechanisms in a CSV or JSON file
    (``path="-"``: stdin), as the command line's ``--file`` reads it.

    CSV: a header naming ``eps`` and/or ``mechanism`` columns (``delta`` and ``count``
    optional), one mechanism per row -- an (eps, delta) pair, or a spec such as
    ``laplace:scale=10`` in the mechanism column.  JSON: a list of records
    (``{"eps": .., "delta": .., "count": ..}`` or ``{"mechanism": "Laplace", "scale": 10}``)
    or a saved :meth:`Accountant.to_dict`.  A ``.json``/``.csv`` suffix decides the format,
    else the first character (``[`` or ``{``: JSON).

    Raises:
        LedgerError: (a ``ValueError``) one line naming the file, the line and the column
            of the first problem -- an unreadable or non-UTF-8 file, malformed CSV or JSON,
            an unknown column or field, a bad value, no mechanisms.
    """
    from .accountant import Accountant

    text, name = _read_source(path)
    stripped = text.lstrip()
    is_json = path.lower().endswith(".json") or (not path.lower().endswith(".csv") and stripped[:1] in "[{")
    if not stripped:
        raise LedgerError(f"{name}: empty (expected CSV or JSON mechanisms)")
    if is_json:
        import json

        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LedgerError(f"{name}: invalid JSON: {exc}") from None
        except RecursionError:
            raise LedgerError(f"{name}: invalid JSON: nested too deeply") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            msg = "a number with too many digits" if "digits" in str(exc) else _one_line(exc)
            raise LedgerError(f"{name}: invalid JSON: {msg}") from None
        if isinstance(data, list):
            data = {"mechanisms": data}
        if isinstance(data, dict) and isinstance(data.get("mechanisms"), list):
            data = dict(data, mechanisms=[dict(m, count=_integral(m["count"])) if isinstance(m, dict) and "count" in m
                                          else m for m in data["mechanisms"]])
        try:
            acc = Accountant.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"{name}: {exc}") from None
    else:
        acc = _csv_accountant(text, name)
    if not acc:
        raise LedgerError(f"{name}: no mechanisms")
    return acc


def _csv_accountant(text: str, name: str):
    import csv
    import io

    from .accountant import Accountant

    lone_cr = re.search(r"\r(?!\n)", text)
    if lone_cr and "\n" in text:
        line = text.count("\n", 0, lone_cr.start()) + 1
        raise LedgerError(f"{name} line {line}: a bare carriage return (\\r) amid newline-ended lines "
                          f"(mixed line endings; save the file with one kind)")
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # CRLF or CR-only files
    reader = csv.reader(io.StringIO(text), strict=True)  # strict: an unterminated quote is an error
    try:
        rows = [(i, r) for i, r in enumerate(reader, 1) if r and any(c.strip() for c in r)]
    except csv.Error as exc:
        msg = str(exc)
        if "field limit" in msg:
            msg = f"a field longer than {csv.field_size_limit():,} characters"
        elif "end of data" in msg:
            msg = "unterminated quote (a field opened with \" is never closed)"
        raise LedgerError(f"{name} line {reader.line_num}: malformed CSV: {msg}") from None
    if not rows:
        raise LedgerError(f"{name}: no mechanisms")
    line, header = rows[0]
    header = [h.strip().lower() for h in header]
    for h in header:
        if h not in ("eps", "delta", "count", "mechanism", "q"):
            raise LedgerError(f"{name}: unknown column {_show(h)} (expected eps, delta, count, mechanism, q)")
    if len(set(header)) != len(header):
        raise LedgerError(f"{name}: duplicate column in header {','.join(header)}")
    if "eps" not in header and "mechanism" not in header:
        raise LedgerError(f"{name}: the header must name an eps column or a mechanism column (got {','.join(header)})")
    acc = Accountant()
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise LedgerError(f"{name} line {line}: {len(row)} fields, the header has {len(header)}")
        cells = {col: cell.strip() for col, cell in zip(header, row)}
        spec = cells.pop("mechanism", "")
        rate = cells.pop("q", "")  # a Poisson sampling rate: the row's mechanism subsampled
        if spec:  # a mechanism: its spec gives its parameters, eps and delta stay empty
            given = [col for col in ("eps", "delta") if cells.get(col)]
            if given:
                raise LedgerError(f"{name} line {line}: give {given[0]} or a mechanism, not both")
            cells = {col: cell for col, cell in cells.items() if col == "count"}
        elif not cells.get("eps"):
            raise LedgerError(f"{name} line {line}: empty mechanism")
        values = {}
        for col, cell in cells.items():
            if not cell:
                raise LedgerError(f"{name} line {line}: empty {col}")
            try:
                values[col] = _count(cell) if col == "count" else _real(cell)
            except ValueError as exc:
                raise LedgerError(f"{name} line {line}, {col}: {exc}") from None
        try:
            q = None
            if rate:
                try:
                    q = _real(rate)
                except ValueError as exc:
                    raise LedgerError(f"{name} line {line}, q: {exc}") from None
            if spec:
                try:
                    mech, count = _parse_mechanism(spec)
                except (TypeError, ValueError) as exc:
                    raise LedgerError(f"{name} line {line}, mechanism {_show(spec)}: {_one_line(exc)}") from None
                if count is not None and "count" in values:
                    raise LedgerError(f"{name} line {line}: count given twice (count column and count= in "
                                      f"the mechanism)")
                if q is not None:
                    mech = _sampled(mech, q)
                acc.compose(mech, count=count if count is not None else values.get("count", 1))
            elif q is not None:
                from .mechanisms import BlackBox

                acc.compose(_sampled(BlackBox(values["eps"], values.get("delta", 0.0)), q),
                            count=values.get("count", 1))
            else:
                acc.compose(values["eps"], values.get("delta", 0.0), values.get("count", 1))
        except LedgerError:
            raise
        except (TypeError, ValueError) as exc:
            raise LedgerError(f"{name} line {line}: {exc}") from None
    return acc
