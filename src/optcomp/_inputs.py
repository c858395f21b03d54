"""Validation and normalisation of the public inputs: the mechanism multiset.

Every public entry point funnels its arguments through :func:`mechanisms`, so the rest
of the package works with one shape only: a :class:`Mechanisms` record, the *multiset*
of the composed mechanisms -- its distinct (eps, delta) pairs with their counts.  k
identical mechanisms are one pair with count k (never a length-k array), so k = 10^12
costs nothing; a list with repeats is grouped once, here.  The same type is the
accountant's ledger (:meth:`Mechanisms.from_items`, :meth:`Mechanisms.plus`: items validated
one by one -- (eps, delta) pairs or :mod:`optcomp.mechanisms` objects --, listed in the order
they first arrived) and calibrate's grouped weights.
Errors are ``ValueError`` (``TypeError`` for a value of the wrong type) with a message that
names the offending parameter and its value.
"""

from __future__ import annotations

import bisect
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ._laws import Mechanism

__all__ = [
    "Mechanisms",
    "ParameterTypeError",
    "MAX_K",
    "MAX_LEDGER",
    "LOG_NO_DELTA_REL",
    "mechanisms",
    "check_delta_g",
    "check_pair",
    "check_item",
    "check_entry",
    "check_probability",
    "check_sensitivity",
    "check_eps_g",
    "check_k",
    "check_count",
    "check_unit_open",
    "canonical_others",
]

class ParameterTypeError(TypeError, ValueError):
    """A parameter of the wrong type (a bool, string, complex, None, nested sequence ...):
    a TypeError that is also a ValueError, so one ``except ValueError`` catches all bad input."""


MAX_K = 10**12  # the documented domain: up to 10^12 mechanisms in all
# relative error bound of Mechanisms.log_no_delta: one log1p (<= 2 ulp), one product by
# an exact integer count (1/2 ulp) and a correctly rounded fsum (1/2 ulp), all one sign
LOG_NO_DELTA_REL = 8.0 * 2.0**-53


MAX_LEDGER = 2**63 - 1  # the most mechanisms a ledger may hold: its int64 counts and their sum stay exact


@dataclass(frozen=True, eq=False)
class Mechanisms:
    """The multiset of composed mechanisms: ``count[i]`` mechanisms, each
    (eps[i], delta[i])-DP.

    ``eps``/``delta`` are read-only float arrays of the *distinct* pairs (sorted by eps,
    then delta) and ``count`` an int64 array of their multiplicities (>= 1, summing to
    ``k`` <= 10^12 when built by :func:`mechanisms`; a ledger built by :meth:`from_items`
    and :meth:`plus` may hold more, and is checked against 10^12 where it is asked a question).
    ``arrival`` (None when the multiset was built at once) orders the pairs by when they first
    arrived: :meth:`items` lists them so.  Two multisets are equal when they hold the same
    pairs with the same counts, whatever their order of arrival.
    """

    eps: np.ndarray
    delta: np.ndarray
    count: np.ndarray
    arrival: np.ndarray | None = field(default=None, repr=False)
    #: mechanisms known by more than (eps, delta) (:mod:`optcomp.mechanisms` objects that are
    #: not a black box), as ((mechanism, count), ...) in canonical order (:func:`canonical_others`),
    #: equal ones merged
    others: tuple = ()
    #: when each of ``others`` first arrived, on the clock of ``arrival`` (None with it)
    others_arrival: tuple | None = field(default=None, repr=False)

    def with_events(self, events) -> "Mechanisms":
        """The black-box pairs with delta events (delta, count) added as black boxes (0, delta)
        -- a mechanism's P-mass at +inf, a truncation tail; ``self`` when there are none (with
        events the mechanisms ``others`` are not carried: the result feeds :mod:`optcomp.loss`,
        which reads the pairs only)."""
        if not events:
            return self
        eps = np.concatenate([self.eps, np.zeros(len(events))])
        delta = np.concatenate([self.delta, [d for d, _ in events]])
        count = np.concatenate([self.count, np.array([c for _, c in events], dtype=np.int64)])
        order = np.lexsort((delta, eps))
        return Mechanisms(eps=eps[order], delta=delta[order], count=count[order])

    @classmethod
    def from_items(cls, items, *, name: str | None = None, max_count: int = MAX_K) -> "Mechanisms":
        """The multiset of ``(eps, delta)`` or ``(eps, delta, count)`` items, where ``eps`` may
        be a mechanism object (:meth:`plus` on the empty multiset): equal entries merged,
        listed in order of first arrival."""
        empty = np.zeros(0)
        return cls._read_only(empty, empty.copy(), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                              (), ()).plus(items, name=name, max_count=max_count)

    def plus(self, items, *, name: str | None = None, max_count: int = MAX_K) -> "Mechanisms":
        """This multiset with more mechanisms: ``(eps, delta)`` or ``(eps, delta, count)``
        items (a count of 1 when left out), each checked by :func:`check_entry` in turn
        (``name``: errors start with ``name[i]: ``, the bad item; ``max_count``: the largest
        count of one item, up to :data:`MAX_LEDGER` for a ledger's own record of merged
        counts).  ``eps`` may be an :mod:`optcomp.mechanisms` object (``delta`` then 0): one
        that is exactly a black box joins as its (eps, delta) pair (as in :func:`mechanisms`),
        the others join ``others``, equal objects merged.  A pair or object already present
        gains the count; new ones arrive after the present ones, in the order of the items."""
        eps, delta, count, stamps = [], [], [], []  # the pairs, with the index of their item
        mechs = []  # (mechanism, count, item index)
        for i, item in enumerate(items):
            try:
                e, d, n = check_entry(*item, max_count=max_count)
            except (TypeError, ValueError) as exc:
                if name is None:
                    raise
                raise type(exc)(f"{name}[{i}]: {exc}") from None
            if _is_mechanism(e):
                pair = e.black_box()
                if pair is None:
                    mechs.append((e, n, i))
                    continue
                e, d = pair[0] + 0.0, pair[1] + 0.0
            eps.append(e)
            delta.append(d)
            count.append(n)
            stamps.append(i)
        total = sum(count) + sum(n for _, n, _ in mechs)
        if self.k + total > MAX_LEDGER:
            raise ValueError(f"count: more than 2^63 - 1 mechanisms in all, got {self.k + total}")
        start = self._next_stamp()
        out = self._plus_pairs(eps, delta, count, [start + i for i in stamps] if start is not None else None)
        if not mechs:
            return out
        others = dict(self.others)
        when = None  # the arrival stamps of others, kept when this multiset keeps arrivals
        if start is not None and (self.others_arrival is not None or not self.others):
            when = dict(zip(others, self.others_arrival or ()))
        for mech, n, i in mechs:
            if mech in others:
                others[mech] += n
            else:
                others[mech] = n
                if when is not None:
                    when[mech] = start + i
        others = canonical_others(others.items())
        return self._read_only(out.eps, out.delta, out.count, out.arrival, others,
                               None if when is None else tuple(when[m] for m, _ in others))

    def _next_stamp(self) -> int | None:
        """The next arrival stamp (None for a multiset built at once, without arrivals)."""
        if self.arrival is None:
            return None
        last = [int(self.arrival.max())] if self.arrival.size else []
        last += list(self.others_arrival or ())
        return max(last) + 1 if last else 0

    def _plus_pairs(self, eps, delta, count, stamps) -> "Mechanisms":
        """This multiset with the checked pairs added (``stamps``: their arrival stamps)."""
        if not eps:
            return self
        if len(eps) == 1:
            return self._plus_one(eps[0], delta[0], count[0], None if stamps is None else stamps[0])
        e, d, c, first = _grouped(np.concatenate((self.eps, eps)), np.concatenate((self.delta, delta)),
                                  np.concatenate((self.count, np.array(count, dtype=np.int64))))
        arrival = None
        if self.arrival is not None:  # the present pairs come first: a merged pair keeps its arrival
            arrival = np.concatenate((self.arrival, np.array(stamps, dtype=np.int64)))[first]
        return self._read_only(e, d, c, arrival, self.others, self.others_arrival)

    def _plus_one(self, e: float, d: float, n: int, stamp: int | None) -> "Mechanisms":
        """:meth:`plus` of one checked pair, by binary search (a ledger grows one item at a time)."""
        eps, delta = self.eps, self.delta
        j = bisect.bisect_left(range(eps.size), (e, d), key=lambda i: (eps[i], delta[i]))  # sorted by (eps, delta)
        if j < eps.size and eps[j] == e and delta[j] == d:
            cnt = self.count.copy()
            cnt[j] += n
            return self._read_only(eps, delta, cnt, self.arrival, self.others, self.others_arrival)
        arrival = None
        if self.arrival is not None:
            arrival = _inserted(self.arrival, j, stamp)
        return self._read_only(_inserted(eps, j, e), _inserted(delta, j, d), _inserted(self.count, j, n), arrival,
                               self.others, self.others_arrival)

    def items(self) -> tuple[tuple[float, float, int], ...]:
        """``(eps, delta, count)`` per distinct pair as Python numbers, in order of arrival
        (of (eps, delta) without one); the pairs only (``others`` aside, see :meth:`entries`)."""
        e, d, c = self.eps.tolist(), self.delta.tolist(), self.count.tolist()
        order = range(len(e)) if self.arrival is None else np.argsort(self.arrival, kind="stable").tolist()
        return tuple((e[i], d[i], c[i]) for i in order)

    def entries(self) -> tuple[tuple, ...]:
        """Every distinct entry as an item :meth:`plus` takes back: ``(eps, delta, count)``
        per pair and ``(mechanism, 0.0, count)`` per object of ``others``, in order of first
        arrival (without arrivals: the pairs by (eps, delta), then ``others``)."""
        pairs = self.items()
        mechs = tuple((mech, 0.0, n) for mech, n in self.others)
        if self.arrival is None or self.others_arrival is None or not mechs:
            return pairs + mechs
        order = sorted(self.arrival.tolist())
        stamped = list(zip(order, pairs)) + list(zip(self.others_arrival, mechs))
        return tuple(entry for _, entry in sorted(stamped, key=lambda t: t[0]))

    def arguments(self) -> tuple:
        """``(eps, delta, counts)`` that the public API (``optcomp.epsilon_g(eps, delta,
        counts=counts, ...)``) reads back as this multiset: the arrays themselves without
        ``others``, else lists with each mechanism object in ``eps`` (its delta 0)."""
        if not self.others:
            return self.eps, self.delta, self.count
        return (self.eps.tolist() + [m for m, _ in self.others], self.delta.tolist() + [0.0] * len(self.others),
                self.count.tolist() + [int(n) for _, n in self.others])

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mechanisms):
            return NotImplemented
        return (np.array_equal(self.eps, other.eps) and np.array_equal(self.delta, other.delta)
                and np.array_equal(self.count, other.count) and dict(self.others) == dict(other.others))

    __hash__ = None  # arrays

    @classmethod
    def _read_only(cls, eps, delta, count, arrival=None, others=(), others_arrival=None) -> "Mechanisms":
        for arr in (eps, delta, count, arrival):
            if arr is not None:
                arr.setflags(write=False)
        return cls(eps, delta, count, arrival, tuple(others), None if others_arrival is None else tuple(others_arrival))

    @property
    def k(self) -> int:
        """The number of mechanisms (sum of the counts), a Python int."""
        return int(self.count.sum()) + sum(int(c) for _, c in self.others)

    def check_total(self, what: str, planned: int = 0) -> None:
        """The documented domain holds up to 10^12 mechanisms in all; a ledger may hold more
        (:meth:`from_items`, :meth:`plus`).  A question about this multiset (plus ``planned``
        mechanisms not yet composed) past it is refused here, in ``what``'s terms (who holds
        it: "get_epsilon: the accountant", or the argument that carried the multiset)."""
        held = self.k
        if held + planned <= MAX_K:
            return
        if planned:
            raise ValueError(f"{what}'s total count would exceed {MAX_K:.0e} mechanisms "
                             f"({held:,} composed + count={planned:,}), beyond what optcomp composes")
        raise ValueError(f"{what} holds {held:,} mechanisms, more than the {MAX_K:.0e} optcomp composes")

    def black_box_only(self, method: str) -> "Mechanisms":
        """This multiset, or a ValueError naming ``method`` when it holds mechanisms that are
        not black boxes (a theorem about (eps, delta) pairs has nothing to say about them)."""
        if self.others:
            mech = self.others[0][0]
            raise ValueError(
                f"method {method!r} composes (eps, delta) pairs only, but eps holds {mech!r}; "
                "use method='auto' or 'approx' for mechanisms (or BlackBox(eps, delta) for a pair)")
        return self

    @property
    def groups(self) -> int:
        """The number of distinct (eps, delta) pairs."""
        return int(self.eps.size)

    @property
    def homogeneous(self) -> bool:
        """True when every mechanism is the same (eps, delta) pair."""
        return self.eps.size == 1

    @property
    def log_no_delta(self) -> float:
        """log prod_i (1 - delta_i) = sum_j count_j log1p(-delta_j), within
        ``LOG_NO_DELTA_REL`` relative error (every term has the same sign)."""
        if not np.any(self.delta):
            return 0.0
        with np.errstate(divide="ignore"):  # a delta event of probability 1: log 0 = -inf
            terms = self.count.astype(float) * np.log1p(-self.delta)
        return math.fsum(terms.tolist())

    def expanded(self, limit: int, what: str) -> np.ndarray:
        """The per-mechanism eps array (length k) for algorithms that need one; raises a
        ValueError naming ``what`` when k exceeds ``limit``, before allocating."""
        if self.k > limit:
            raise ValueError(
                f"{what} works mechanism by mechanism and is limited to k <= {limit:,} here, got k={self.k:,}"
            )
        return np.repeat(self.eps, self.count)

    def scaled(self, c: float) -> "Mechanisms | None":
        """The pairs with every eps multiplied by ``c`` >= 0 (each product rounded to nearest,
        as ``c * eps`` in the caller's hands), deltas and counts kept, equal products merged:
        what :func:`mechanisms` returns for ``(c * eps, delta, counts)``, without checking the
        multiset again.  None when a product overflows (no such mechanism).  Pairs only."""
        if self.others:
            raise ValueError("scaled: a multiset with mechanism objects has no eps to scale")
        with np.errstate(over="ignore"):
            eps = self.eps * float(c) + 0.0
        if not np.all(np.isfinite(eps)):
            return None
        e, d, n, _ = _grouped(eps, self.delta, self.count)
        return Mechanisms._read_only(e, d, n)

    def positive(self) -> tuple[np.ndarray, np.ndarray]:
        """(eps, count) of the mechanisms with eps > 0, equal eps values merged (given no
        delta event, delta does not change the loss distribution); eps ascending."""
        keep = self.eps > 0.0
        e, c = self.eps[keep], self.count[keep]
        if e.size <= 1:
            return e.copy(), c.copy()
        values, _, counts, _ = _grouped(e, np.zeros(e.size), c)
        return values, counts


def _inserted(a: np.ndarray, j: int, value) -> np.ndarray:
    """A copy of ``a`` with ``value`` inserted before index j (np.insert, without its overhead)."""
    out = np.empty(a.size + 1, dtype=a.dtype)
    out[:j], out[j], out[j + 1:] = a[:j], value, a[j:]
    return out


def _grouped(eps: np.ndarray, delta: np.ndarray, count: np.ndarray):
    """(eps, delta, count, first): the distinct (eps, delta) pairs sorted by eps then delta,
    their summed counts, and the index in the input where each first occurs."""
    n = eps.size
    if n <= 1:
        return eps, delta, count, np.arange(n)
    order = np.lexsort((delta, eps))  # stable: a run starts at its pair's first occurrence
    e, d, c = eps[order], delta[order], count[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (e[1:] != e[:-1]) | (d[1:] != d[:-1])
    starts = np.flatnonzero(new)
    return e[starts], d[starts], np.add.reduceat(c, starts), order[starts]


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(name: str, value, lo: int, hi: int) -> int:
    """An integer in [lo, hi], else ValueError/TypeError naming ``name``.

    The one rule for every count of the API (k, counts, a ledger's count, num): an int or
    numpy integer, or an *integral* float such as 10.0 or 1e6 (what arithmetic and
    scientific notation produce); a non-integral float (2.5) is a ValueError, a bool, string
    or other type a TypeError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be an integer, got {_describe(value)}")
    if isinstance(value, numbers.Integral):
        out = int(value)
    else:
        x = float(value)
        if not math.isfinite(x) or x != math.floor(x):
            raise ValueError(f"{name} must be an integer, got {_describe(value)}")
        out = int(x)
    if not lo <= out <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi:.0e}], got {_describe(value)}")
    return out


def check_k(k) -> int:
    """k must be an integer in [1, 10^12] (an integral float such as 1e6 is accepted)."""
    return _integer("k", k, 1, MAX_K)


def check_count(count, name: str = "count") -> int:
    """A number of mechanisms (a multiplicity): an integer in [1, 10^12], an integral float
    such as 2.0 accepted, as for ``k`` (errors name ``name``)."""
    return _integer(name, count, 1, MAX_K)


def check_pair(eps, delta) -> tuple[float, float]:
    """One mechanism's (eps, delta): real numbers (not bools), eps finite and >= 0, delta in
    [0, 1); -0.0 made 0.0 (one key per pair)."""
    for name, value in (("eps", eps), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ParameterTypeError(f"{name} must be a real number, got {value!r}")
    e, d = float(eps), float(delta)
    if not (math.isfinite(e) and e >= 0.0):
        raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
    if not (0.0 <= d < 1.0):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    return e + 0.0, d + 0.0


def check_item(eps, delta=0.0, count=1, *, max_count: int = MAX_K) -> tuple[float, float, int]:
    """``count`` mechanisms, each (eps, delta)-DP: :func:`check_pair`, then the count as
    :func:`check_count` does (an integer in [1, ``max_count``])."""
    e, d = check_pair(eps, delta)
    return e, d, _integer("count", count, 1, max_count)


def check_entry(eps, delta=0.0, count=1, *, max_count: int = MAX_K) -> tuple:
    """:func:`check_item`, where ``eps`` may also be an :mod:`optcomp.mechanisms` object:
    then ``delta`` must be 0 (the object carries its own guarantee) and the entry is
    ``(mechanism, 0.0, count)``."""
    if not _is_mechanism(eps):
        return check_item(eps, delta, count, max_count=max_count)
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or float(delta) != 0.0:
        raise ValueError(f"delta must be 0 for a mechanism object ({_describe(eps)} carries its own guarantee), "
                         f"got {_describe(delta)}")
    return eps, 0.0, _integer("count", count, 1, max_count)


_BAD_KINDS = {"b": "a boolean", "c": "a complex number", "U": "a string", "S": "bytes", "O": "an object"}


def _as_vector(name: str, value, max_ndim: int | None = 1) -> np.ndarray:
    """A float scalar (0-d) or 1-D float array from a number or a flat sequence of numbers
    (an array of any shape with ``max_ndim=None``)."""
    flat = max_ndim is not None and max_ndim <= 1
    what = f"{name} must be a real number or a {'flat sequence' if flat else 'array'} of real numbers"
    if value is None or isinstance(value, (str, bytes, bool, complex, dict, set)):
        raise ParameterTypeError(f"{what}, got {_describe(value)}")
    if isinstance(value, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in value):
        raise ParameterTypeError(f"{what}, got a boolean in {_describe(value)}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        raise ParameterTypeError(f"{what}, got {_describe(value)}") from None
    if raw.dtype.kind in _BAD_KINDS:
        raise ParameterTypeError(f"{what}, got {_BAD_KINDS[raw.dtype.kind]} in {_describe(value)}")
    if max_ndim is not None and raw.ndim > max_ndim:
        raise ParameterTypeError(f"{what}, got an array of shape {raw.shape}")
    try:
        return raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise ParameterTypeError(f"{what}, got {_describe(value)}") from None


def _as_counts(counts, size: int) -> np.ndarray:
    if counts is None or isinstance(counts, (str, bytes, bool)):
        raise ParameterTypeError(f"counts must be a sequence of integers >= 1, got {_describe(counts)}")
    items = list(counts) if isinstance(counts, (list, tuple, np.ndarray)) else None
    if items is None:
        items = [counts]
    values = [_integer(f"counts[{i}]", c, 1, MAX_K) for i, c in enumerate(items)]
    if len(values) != size:
        raise ValueError(f"counts has length {len(values)} but eps has {size} entries")
    return np.asarray(values, dtype=np.int64)


def mechanisms(eps, delta=0.0, k=None, counts=None) -> Mechanisms:
    """Normalise (eps, delta, k, counts) to a :class:`Mechanisms` multiset, or raise.

    * ``eps`` a number and ``k`` given: k identical mechanisms;
    * ``eps`` a 1-D sequence: one mechanism per entry (``k``, if given, must match);
    * ``counts`` (beside a number or a sequence ``eps``): entry i stands for
      ``counts[i]`` identical mechanisms (eps[i], delta[i]); ``k``, if given, must equal
      ``sum(counts)``;
    * ``delta`` a number (applies to every mechanism) or a sequence as long as ``eps``.

    At most 10^12 mechanisms in all.
    """
    eps, mechs = _split_mechanisms(eps)
    eps_arr = _as_vector("eps", eps)
    delta_arr = _as_vector("delta", delta)
    if k is not None:
        k = check_k(k)
    if eps_arr.ndim == 0 and counts is None:
        if k is None:
            if delta_arr.ndim == 1 and delta_arr.size:
                k = delta_arr.size
            else:
                raise ValueError(
                    "k is required when eps is a single number (k mechanisms, each (eps, delta)-DP); "
                    "pass k=... or a sequence of per-mechanism eps"
                )
        if delta_arr.ndim == 1:
            if delta_arr.size != k:
                raise ValueError(f"delta has length {delta_arr.size} but there are k={k} mechanisms")
            eps_arr = np.full(k, float(eps_arr))
            cnt = np.ones(k, dtype=np.int64)
        else:
            eps_arr = eps_arr.reshape(1)
            cnt = np.array([k], dtype=np.int64)
    else:
        eps_arr = np.atleast_1d(eps_arr)
        if eps_arr.size < 1:
            raise ValueError("eps must hold at least one mechanism (k >= 1), got an empty sequence")
        if counts is None:
            cnt = np.ones(eps_arr.size, dtype=np.int64)
            if k is not None and k != eps_arr.size:
                raise ValueError(f"k={k} does not match len(eps)={eps_arr.size}")
        else:
            cnt = _as_counts(counts, eps_arr.size)
            total = sum(int(c) for c in cnt)
            if total > MAX_K:
                raise ValueError(f"counts must sum to at most {MAX_K:.0e} mechanisms, got {total}")
            if k is not None and k != total:
                raise ValueError(f"k={k} does not match sum(counts)={total}")
    n = eps_arr.size
    if delta_arr.ndim == 0:
        delta_arr = np.full(n, float(delta_arr))
    elif delta_arr.size != n:
        raise ValueError(f"delta has length {delta_arr.size} but eps has {n} entries")
    bad = ~np.isfinite(eps_arr) | (eps_arr < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"eps must be finite and >= 0, got eps[{i}]={float(eps_arr[i])!r}")
    bad = ~np.isfinite(delta_arr) | (delta_arr < 0) | (delta_arr >= 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"delta must lie in [0, 1), got delta[{i}]={float(delta_arr[i])!r}")
    eps_arr = eps_arr + 0.0  # -0.0 -> 0.0
    delta_arr = delta_arr + 0.0
    others: dict = {}
    if mechs is not None:
        if mechs.size == 1 and eps_arr.size > 1:  # one mechanism object, k copies
            mechs = np.full(eps_arr.size, mechs[0], dtype=object)
        keep = np.ones(eps_arr.size, dtype=bool)
        for i, mech in enumerate(mechs.tolist()):
            if mech is None:
                continue
            if delta_arr[i] != 0.0:
                raise ValueError(f"delta[{i}] must be 0 for a mechanism object (eps[{i}]={mech!r} carries its own "
                                 f"guarantee), got {float(delta_arr[i])!r}")
            pair = mech.black_box()
            if pair is not None:  # composes exactly as the black box (eps, delta)
                eps_arr[i], delta_arr[i] = pair
            else:
                others[mech] = others.get(mech, 0) + int(cnt[i])
                keep[i] = False
        eps_arr, delta_arr, cnt = eps_arr[keep], delta_arr[keep], cnt[keep]
    eps_arr, delta_arr, cnt, _ = _grouped(eps_arr, delta_arr, cnt)  # equal pairs merged, sorted by (eps, delta)
    return Mechanisms._read_only(eps_arr, delta_arr, cnt, None, canonical_others(others.items()))


def canonical_others(items) -> tuple:
    """(mechanism, count) pairs in one canonical order -- by family, then by the mechanism's
    repr (its parameters, floats written exactly) -- so that a multiset has one answer
    whatever the order its mechanisms were listed or composed in (the engine composes them
    in this order, and float rounding depends on it)."""
    return tuple(sorted(items, key=lambda mc: (getattr(type(mc[0]), "family", ""), type(mc[0]).__name__,
                                               repr(mc[0]))))


def _is_mechanism(x) -> bool:
    if isinstance(x, type) and issubclass(x, Mechanism):
        raise _class_error(x)
    return isinstance(x, Mechanism)


def _class_error(cls: type) -> ParameterTypeError:
    """The error for a mechanism *class* where an instance belongs (``Laplace`` for
    ``Laplace(scale=...)``): named at the boundary, with the class's first parameter."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    example = f"{cls.__name__}({fields[0]}=...)" if fields else f"{cls.__name__}(...)"
    return ParameterTypeError(f"eps: got the class {cls.__name__}, not a mechanism; pass an instance such as "
                              f"{example}")


def _split_mechanisms(eps):
    """(eps with 0.0 in place of every mechanism object, object array of the mechanisms (None
    elsewhere) or None when there are none): :mod:`optcomp.mechanisms` objects may stand in
    ``eps`` beside plain numbers (this layer only recognises them, by their interface)."""
    if _is_mechanism(eps):
        out = np.empty(1, dtype=object)
        out[0] = eps
        return 0.0, out
    if isinstance(eps, (list, tuple)) and any(_is_mechanism(v) for v in eps):
        out = np.empty(len(eps), dtype=object)
        vals = []
        for i, v in enumerate(eps):
            if _is_mechanism(v):
                out[i] = v
                vals.append(0.0)
            else:
                vals.append(v)
        return vals, out
    return eps, None


def _check_real(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        try:
            arr = np.asarray(value)
        except Exception:  # pragma: no cover - exotic objects
            arr = None
        if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf":
            raise ParameterTypeError(f"{name} must be a real number, got {_describe(value)}")
        value = arr.item()
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must be a real number, got nan")
    return x


def check_probability(name: str, value) -> float:
    """A real number in [0, 1) (delta_g, a per-query delta), -0.0 made 0.0."""
    x = _check_real(name, value)
    if not 0.0 <= x < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {x!r}")
    return x + 0.0


def check_sensitivity(sensitivity) -> float:
    """A query's sensitivity: a finite real number > 0."""
    s = _check_real("sensitivity", sensitivity)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return s


def check_delta_g(delta_g) -> float:
    """delta_g must be a real number in [0, 1)."""
    return check_probability("delta_g", delta_g)


def check_eps_g(eps_g) -> float:
    """eps_g must be a finite real number >= 0."""
    x = _check_real("eps_g", eps_g)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"eps_g must be finite and >= 0, got {x!r}")
    return x + 0.0


def check_unit_open(name: str, value) -> float:
    """A parameter that must lie strictly between 0 and 1 (e.g. eta)."""
    x = _check_real(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {x!r}")
    return x
