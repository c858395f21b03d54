"""A privacy accountant: compose as you go, ask for the guarantee at any time.

:class:`Accountant` is a ledger of the mechanisms run so far, held as a *multiset*:
distinct (eps, delta) pairs -- and mechanism objects of :mod:`optcomp.mechanisms`
(``Laplace(10.0)``, ``Gaussian(5.0)``, ...) -- with their counts, so a million identical steps
are one entry.  Every question it answers is one call of the public API
(:func:`optcomp.epsilon_g`, :func:`optcomp.delta_g`, :func:`optcomp.epsilon_bounds`,
:func:`optcomp.delta_bounds`) with the grouped entries and ``counts=``; the methods and their
certificates are those of :data:`optcomp.METHODS` (the theorems about (eps, delta) pairs
refuse a ledger holding mechanisms that are not black boxes, naming the method; ``auto`` and
``approx`` compose them exactly as mechanisms).  The method names follow Google's ``dp_accounting``
``PrivacyAccountant`` (``compose``, ``get_epsilon``, ``get_delta``) where that fits.

Setting (read this before using the accountant to decide what to run next): the
guarantees hold for a sequence of mechanisms whose parameters (eps_i, delta_i) are
fixed in advance -- the mechanisms themselves may be chosen adaptively, each depending
on the outputs of the earlier ones (KOV Sec. 3; MV Sec. 1).  If the *parameters* of the
next mechanism are chosen based on earlier outputs (e.g. "run one more query because the
last answer looked interesting"), the composition theorems do not apply as stated; that
fully adaptive setting needs a privacy filter (Rogers, Roth, Ullman and Vadhan 2016;
Whitehouse, Ramdas, Rogers and Wu 2023), which optcomp does not provide.  Using
:meth:`Accountant.remaining` / :meth:`Accountant.can_afford` to plan a sequence before
running it is within the setting.
"""

from __future__ import annotations

import dataclasses
import math

from . import _evaluate
from . import mechanisms as _mech
from ._inputs import (MAX_LEDGER, Mechanisms, ParameterTypeError, _describe, check_count, check_delta_g,
                      check_entry, check_eps_g, check_pair)
from .methods import check_method

__all__ = ["Accountant"]

_FORMAT = "optcomp.Accountant"
_FORMAT_VERSION = 1  # a ledger of (eps, delta) pairs only (what every earlier version wrote)
_FORMAT_VERSION_MECHANISMS = 2  # with mechanism entries (a reader of version 1 refuses it by its version)
#: the classes a record may name (``{"mechanism": "Laplace", ...}``): optcomp.mechanisms', no other
_CLASSES = {cls.__name__: cls for cls in _mech.REGISTRY.values()}
#: a field holding a mechanism (Subsampled's ``mechanism``) is a nested record under this key
#: (the key "mechanism" names the class)
_NESTED = {"mechanism": "base"}


def _mechanism_record(mech, count: int | None) -> dict:
    """``{"mechanism": class name, field: value ..., "count": n}`` (tuples as JSON lists; a
    field holding a mechanism as a nested record without count, Subsampled's ``mechanism``
    under the key ``"base"``)."""

    def plain(v):
        return [plain(x) for x in v] if isinstance(v, tuple) else v

    out = {"mechanism": type(mech).__name__}
    for f in dataclasses.fields(mech):
        v = getattr(mech, f.name)
        out[_NESTED.get(f.name, f.name)] = _mechanism_record(v, None) if _is_object(v) else plain(v)
    if count is not None:
        out["count"] = count
    return out


def _mechanism_from_record(item: dict, i, *, nested: bool = False):
    """The mechanism object of a record of :func:`_mechanism_record` (fields checked by name,
    values by the class: ``ValueError`` naming ``mechanisms[i]`` and the field)."""
    where = i if isinstance(i, str) else f"mechanisms[{i}]"
    name = item["mechanism"]
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"{where}: mechanism must name a class of optcomp.mechanisms "
                         f"({', '.join(_CLASSES)}), got {_describe(name)}")
    fields = dataclasses.fields(cls)
    keys = {_NESTED.get(f.name, f.name): f.name for f in fields}
    extra = sorted(set(item) - set(keys) - {"mechanism"} - (set() if nested else {"count"}))
    if extra:
        raise ValueError(f"{where}: unknown field {extra[0]!r} for {name} "
                         f"(expected {', '.join(keys)}{'' if nested else ', count'})")
    missing = [key for key, f in zip(keys, fields) if key not in item
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{where}: {name} needs the field {missing[0]!r}")
    values = {}
    for key, field in keys.items():
        if key not in item:
            continue
        v = item[key]
        if key in _NESTED.values():
            if not isinstance(v, dict) or "mechanism" not in v:
                raise ValueError(f"{where}: {name}: {key} must be a mechanism record "
                                 f"({{\"mechanism\": NAME, ...}}), got {_describe(v)}")
            v = _mechanism_from_record(v, f"{where}.{key}", nested=True)
        values[field] = v
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {name}: {exc}") from None


class Accountant:
    """A ledger of mechanisms -- (eps_i, delta_i)-DP black boxes and mechanism objects of
    :mod:`optcomp.mechanisms` -- and the guarantee of their composition.

    Example::

        acc = optcomp.Accountant().compose(0.1, count=100).compose(0.5, 1e-6)
        acc.compose(Laplace(10.0), count=50)  # from optcomp.mechanisms import Laplace
        acc.get_epsilon(1e-5)               # least certified eps_g at delta_g = 1e-5
        acc.can_afford(0.2, eps_g=6.0, delta_g=1e-5)

    The ledger is a multiset: composing a pair (or an equal mechanism object) already present
    adds to its count.  Order does not matter (composition is commutative), but the ledger
    lists its entries in the order they first appeared.  A mechanism object that is exactly a
    black box (``BlackBox(eps, delta)``, binary ``RandomizedResponse``, ``Geometric`` with
    sensitivity 1 -- KOV Thm 4.4 --, a one-guarantee ``Profile``) is recorded as its
    (eps, delta) pair, as :func:`optcomp.epsilon_g` reads it.  The parameters must be fixed in advance (see the module
    docstring: adaptively chosen parameters need a privacy filter, not provided here).
    """

    __slots__ = ("_ledger", "_queued")

    def __init__(self, mechanisms=()):
        """Start empty, or from an iterable of ``(eps, delta)`` or ``(eps, delta, count)``
        (``eps`` a number or a mechanism object, as :meth:`compose` takes)."""
        self._ledger = Mechanisms.from_items(mechanisms)  # the one multiset type (optcomp._inputs)
        self._queued: list[tuple] = []  # composed (checked), not yet merged in

    @property
    def multiset(self) -> Mechanisms:
        """The ledger as the library's validated, immutable multiset
        (:class:`optcomp._inputs.Mechanisms`), which the methods evaluate as it is -- what the
        toolkit and the command line read instead of re-validating :attr:`mechanisms`.  What
        was composed since the last read is merged in here (one :meth:`Mechanisms.plus` per
        read, so composing one step at a time costs O(1))."""
        if self._queued:
            self._ledger, self._queued = self._ledger.plus(self._queued), []
        return self._ledger

    # ------------------------------------------------------------------ the ledger
    def compose(self, eps, delta=0.0, count=1) -> "Accountant":
        """Add ``count`` mechanisms, each (eps, delta)-DP; returns the accountant (chainable).

        ``eps`` may be a mechanism object of :mod:`optcomp.mechanisms` (``compose(Laplace(10.0),
        count=100)``): ``count`` copies of it, composed as that mechanism (``delta`` must then
        be 0: the object carries its own guarantee).

        Raises ``ValueError``/``TypeError`` naming the parameter: eps finite and >= 0,
        delta in [0, 1), count an integer >= 1 (an integral float such as 2.0 is accepted).
        The ledger records any number of mechanisms; its questions are answered for up to
        10^12 in all (beyond that they raise ``ValueError`` saying so).
        """
        self._queued.append(check_entry(eps, delta, count))
        return self

    @property
    def mechanisms(self) -> tuple[tuple, ...]:
        """The ledger: ``(eps, delta, count)`` per distinct pair and ``(mechanism, 0.0, count)``
        per distinct mechanism object, in order of first appearance (each an item
        :meth:`compose` and the constructor take back)."""
        return self.multiset.entries()

    @property
    def k(self) -> int:
        """Number of mechanisms composed (the sum of the counts)."""
        return self.multiset.k

    def __len__(self) -> int:
        return self.k

    def __bool__(self) -> bool:
        m = self.multiset
        return m.groups > 0 or bool(m.others)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Accountant):
            return NotImplemented
        return self.multiset == other.multiset

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        ledger = self.mechanisms
        if not ledger:
            return "Accountant(k=0)"
        items = [f"{n} x {e!r}" if _is_object(e) else f"{n} x (eps={e!r}, delta={d!r})" for e, d, n in ledger[:6]]
        if len(ledger) > 6:
            items[-1] = f"... {len(ledger) - 5} more {'entries' if self.multiset.others else 'pairs'}"
        return f"Accountant(k={self.k}: {', '.join(items)})"

    def copy(self) -> "Accountant":
        """An independent copy of the ledger."""
        new = Accountant()
        new._ledger = self.multiset  # immutable: composing rebinds, never mutates
        return new

    def __getstate__(self):
        """Pickled as before the ledger was a :class:`~optcomp._inputs.Mechanisms`: the slot
        ``_counts``, a dict (eps, delta) -> count in order of first appearance (a mechanism
        object's key is (mechanism, 0.0), as :attr:`mechanisms` lists it)."""
        return None, {"_counts": {(e, d): n for e, d, n in self.mechanisms}}

    def __setstate__(self, state):
        _, slots = state
        items = ((e, d, n) for (e, d), n in slots["_counts"].items())
        self._ledger = Mechanisms.from_items(items, max_count=MAX_LEDGER)  # merged counts may pass 10^12
        self._queued = []

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict:
        """A JSON-serialisable record of the ledger (floats survive ``json`` exactly).

        ``{"format": "optcomp.Accountant", "version": 1, "mechanisms": [{"eps": ...,
        "delta": ..., "count": ...}, ...]}`` -- the same ``mechanisms`` list the command
        line reads with ``--file``.  A mechanism object is recorded by its class and its
        fields, ``{"mechanism": "Laplace", "scale": 10.0, "sensitivity": 1.0, "count": n}``,
        and the record then has version 2 (a reader of version 1 refuses it by its version).
        """
        entries = self.mechanisms
        records = [_mechanism_record(e, n) if _is_object(e) else {"eps": e, "delta": d, "count": n}
                   for e, d, n in entries]
        return {
            "format": _FORMAT,
            "version": _FORMAT_VERSION_MECHANISMS if any(_is_object(e) for e, _, _ in entries) else _FORMAT_VERSION,
            "mechanisms": records,
        }

    @classmethod
    def from_dict(cls, data) -> "Accountant":
        """Rebuild an accountant from :meth:`to_dict`'s record (validated: ``ValueError``
        naming the bad field).  A ``{"mechanism": NAME, ...}`` entry is rebuilt through the
        class NAME of :mod:`optcomp.mechanisms` (no other class) from its fields."""
        if not isinstance(data, dict):
            raise ParameterTypeError(f"from_dict expects a dict, got {type(data).__name__}")
        if data.get("format", _FORMAT) != _FORMAT:
            raise ValueError(f"format must be {_FORMAT!r}, got {data.get('format')!r}")
        version = data.get("version", _FORMAT_VERSION)
        if isinstance(version, bool) or version not in (_FORMAT_VERSION, _FORMAT_VERSION_MECHANISMS):
            raise ValueError(f"version must be {_FORMAT_VERSION} or {_FORMAT_VERSION_MECHANISMS}, "
                             f"got {data.get('version')!r}")
        unknown = sorted(set(data) - {"format", "version", "mechanisms"})
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r} (expected format, version, mechanisms)")
        items = data.get("mechanisms")
        if not isinstance(items, list):
            raise ValueError(f"mechanisms must be a list, got {items!r}")

        def records():  # checked in order, each before its values (Mechanisms.from_items)
            for i, item in enumerate(items):
                if isinstance(item, dict) and "mechanism" in item:
                    yield _mechanism_from_record(item, i), 0.0, item.get("count", 1)
                    continue
                if not isinstance(item, dict) or "eps" not in item:
                    raise ValueError(f"mechanisms[{i}] must be an object with eps, delta, count (or mechanism "
                                     f"and its fields), got {item!r}")
                extra = sorted(set(item) - {"eps", "delta", "count"})
                if extra:
                    raise ValueError(f"mechanisms[{i}]: unknown field {extra[0]!r} (expected eps, delta, count)")
                yield item["eps"], item.get("delta", 0.0), item.get("count", 1)

        acc = cls()
        acc._ledger = Mechanisms.from_items(records(), name="mechanisms")
        return acc

    # ------------------------------------------------------------------ questions
    def get_epsilon(self, delta_g, method: str = "auto", **options) -> float:
        """Least eps_g for which ``method`` certifies (eps_g, delta_g)-DP of the ledger.

        As :func:`optcomp.epsilon_g` (``math.inf`` when nothing is certified at this
        delta_g); 0.0 for an empty ledger.
        """
        delta_g = check_delta_g(delta_g)
        check_method(method, options)
        if not self:
            return 0.0
        self.multiset.check_total("get_epsilon: the accountant")
        return _evaluate.epsilon(self.multiset, delta_g, method, **options)

    def get_delta(self, eps_g, method: str = "auto", **options) -> float:
        """Least delta_g for which ``method`` certifies (eps_g, delta_g)-DP of the ledger.

        As :func:`optcomp.delta_g` (1.0 when nothing better is certified); 0.0 for an
        empty ledger.
        """
        eps_g = check_eps_g(eps_g)
        check_method(method, options)
        if not self:
            return 0.0
        self.multiset.check_total("get_delta: the accountant")
        return _evaluate.delta(self.multiset, eps_g, method, **options)

    def bounds(self, delta_g=None, *, eps_g=None, **options):
        """The certified bracket on the optimum: exactly one of ``delta_g`` / ``eps_g``.

        ``delta_g`` (also positional, as for :meth:`get_epsilon`) gives :func:`optcomp.epsilon_bounds` (``lower <= OptComp(delta_g) <=
        upper``); ``eps_g=`` gives :func:`optcomp.delta_bounds`.  ``options``: ``eta``,
        ``tol``, ``max_points``.
        """
        if (delta_g is None) == (eps_g is None):
            raise ValueError("give exactly one of delta_g= (bounds on eps_g) or eps_g= (bounds on delta_g)")
        from .lattice import Bounds

        if not self:
            if delta_g is not None:
                check_delta_g(delta_g)
            else:
                check_eps_g(eps_g)
            return Bounds(0.0, 0.0)
        self.multiset.check_total("bounds: the accountant")
        if delta_g is not None:
            return _evaluate.epsilon_bounds(self.multiset, delta_g, **options)
        return _evaluate.delta_bounds(self.multiset, eps_g, **options)

    def _planned_epsilon(self, eps, delta: float, n: int, delta_g: float, method: str, options: dict) -> float:
        """The one function behind :meth:`can_afford` and :meth:`remaining`: the eps_g
        ``method`` certifies at delta_g for the ledger plus ``n`` (eps, delta)-DP mechanisms
        (``eps`` a number or a mechanism object; ``optcomp.epsilon_g`` of the extended
        multiset; inputs already validated)."""
        return _evaluate.epsilon(self.multiset.plus([(eps, delta, n)]), delta_g, method, **options)

    def can_afford(self, eps, delta=0.0, *, eps_g, delta_g, count=1, method: str = "auto", **options) -> bool:
        """Whether ``count`` more (eps, delta)-DP mechanisms keep the ledger within the
        budget (eps_g, delta_g) under ``method`` (certified: True only if the method
        certifies the extended composition).  ``eps`` may be a mechanism object, as for
        :meth:`compose`.

        The same test as :meth:`remaining` makes: ``can_afford(x, ...)`` is True at
        x = ``remaining(...)`` and False at the next float above it (both were evaluated
        by the search, through the same function), and False for every x when
        ``remaining`` is ``-inf``.
        """
        e, d, n = check_entry(eps, delta, count)
        eps_g = check_eps_g(eps_g)
        delta_g = check_delta_g(delta_g)
        check_method(method, options)
        self.multiset.check_total("can_afford: the accountant", n)
        return self._planned_epsilon(e, d, n, delta_g, method, options) <= eps_g

    def remaining(self, eps_g, delta_g, *, delta=0.0, count=1, method: str = "auto", rtol: float = 0.0,
                  progress=None, **options) -> float:
        """Largest eps such that ``count`` more (eps, delta)-DP mechanisms fit the budget
        (black boxes; the ledger may hold mechanism objects.  For the least noise of a
        Laplace, Gaussian ... mechanism see :func:`optcomp.calibrate.noise_for`).

        Certified: :meth:`can_afford` holds at the value returned -- it is the largest x
        at which the search (:mod:`optcomp.calibrate`'s, secant steps safeguarded by
        bisection, over the same function as :meth:`can_afford`) found ``can_afford(x)``
        true, to relative precision ``rtol`` (0 = adjacent floats: the next float up was
        evaluated and fails).

        Returns:
            the largest eps >= 0 that fits; ``0.0`` when only eps = 0 fits; **-inf** when
            nothing fits, not even eps = 0 (the budget is already spent, or ``count``
            mechanisms with this ``delta`` alone exceed ``delta_g``): the supremum of an
            empty set, below every eps a mechanism can have, so ``x <= remaining(...)``
            is False for every x and ``compose(remaining(...))`` raises.  Never NaN.
            The largest finite float when every eps fits.

        ``progress``: True for a status line on stderr when the search takes more than
        2 s, or a callable receiving a status dict per evaluation (as ``optcomp.approx``).
        """
        from ._search import _check_rtol, _search

        _, delta = check_pair(0.0, delta)
        n = check_count(count)
        eps_g = check_eps_g(eps_g)
        delta_g = check_delta_g(delta_g)
        rtol = _check_rtol(rtol)
        check_method(method, options)
        self.multiset.check_total("remaining: the accountant", n)

        def value_for(m: str, opts: dict):
            return lambda x: self._planned_epsilon(x, delta, n, delta_g, m, opts)

        x = _search(value_for, method, options, eps_g, max(eps_g, 1e-3) / n, rtol=rtol, progress=progress,
                    what=f"remaining under {method}")
        return -math.inf if x is None else x


def _is_object(x) -> bool:
    """A mechanism object of the ledger (an entry's first element that is not a number)."""
    return isinstance(x, _mech.Mechanism)
