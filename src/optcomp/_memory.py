"""The memory budget of a call (layer L0): every large array the engine allocates is
estimated and checked against it *before* it is allocated.

``max_memory`` (bytes; default :data:`MAX_MEMORY` = 1.5 GiB) is an option of the methods
``"approx"``, ``"auto"`` and ``"optimal"`` and of :func:`optcomp.epsilon_bounds` /
:func:`optcomp.delta_bounds` (threaded like ``max_points``).  A public call opens a
:class:`Budget` for its duration (:func:`limit`); the code below it reads the open one
(:func:`current`; a context variable, handed to the lattice pass's worker threads) and

* ``budget.need(nbytes, what)`` before an allocation: the bytes the budget already holds
  plus ``nbytes`` must fit, else the size limit is raised -- :class:`ApproxTooCostly`
  for the certified lattice (the drivers attach the best bracket reached so far, as for
  ``max_points``) and :class:`ExactTooLarge` for the exact method (``auto`` then falls back
  to the certified lattice);
* ``budget.hold(nbytes)`` / ``release(nbytes)`` for arrays that stay alive across steps
  (the nodes of a lattice pass's tree), ``reserve(nbytes, what)`` for a block of code;
* caches that keep arrays between calls (the mechanisms' lattice leaves) count against
  every budget and are emptied before it refuses anything (:func:`register_cache`).

What is counted: the engine's arrays whose size grows with the input or the lattice (FFT
rows and their transforms, leaf tables, atom lists, dynamic-programming tables), each
estimated from its shape before it exists, with the temporaries the step allocates beside
it.  Not counted: the interpreter, NumPy and SciPy themselves (~300 MB of address space,
~60 MB resident), the caller's own inputs, and small arrays (O(number of groups)).  So a
call at ``max_memory = B`` stays within about B of resident memory above what the process
held before it (``tests/test_memory.py`` measures it under an address-space limit).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from contextvars import ContextVar

from ._types import ApproxTooCostly

__all__ = ["MAX_MEMORY", "MIN_MEMORY", "Budget", "current", "limit", "check_max_memory", "mib", "register_cache",
           "resident", "budgeted"]

MAX_MEMORY = 3 * 2**29  # the default budget of one call, in bytes (1.5 GiB: with the interpreter, NumPy, SciPy
#                        and the allocator's slack, a call at default settings peaks below 2 GiB)
MIN_MEMORY = 2**20  # the least budget accepted (1 MiB): max_memory counts bytes, not GiB


def mib(nbytes: float) -> str:
    """``nbytes`` in MiB for messages (one decimal below 10 MiB)."""
    v = nbytes / 2**20
    return f"{v:,.1f} MiB" if v < 10 else f"{v:,.0f} MiB"


class Budget:
    """The memory budget of one call: ``limit`` bytes, of which ``held`` are held by arrays
    that outlive one step (thread-safe: the two halves of a lattice pass share it)."""

    __slots__ = ("limit", "held", "peak", "_lock")

    def __init__(self, limit: int):
        self.limit, self.held, self.peak = int(limit), 0, 0
        self._lock = threading.RLock()  # re-entrant: a finaliser may release a hold while this thread checks one

    def _fits(self, nbytes: float, what: str, error) -> None:
        need = self.held + resident() + nbytes
        if need > self.limit:
            for _, clear in _CACHES:  # the caches go first
                clear()
            need = self.held + resident() + nbytes
        if need > self.limit:
            exc = error(f"{what} needs about {mib(nbytes)} of memory ({mib(self.held)} already held; "
                        f"max_memory={self.limit:,} bytes = {mib(self.limit)})")
            exc.memory = (need, self.limit)  # (what the step would hold, the budget): how far off
            raise exc
        self.peak = max(self.peak, need)

    def need(self, nbytes: float, what: str, error=ApproxTooCostly) -> None:
        """Raise ``error`` (a size limit, without a bracket) unless ``nbytes`` more fit."""
        with self._lock:
            self._fits(nbytes, what, error)

    def hold(self, nbytes: float, what: str | None = None, error=ApproxTooCostly) -> None:
        """Count ``nbytes`` as held (after :meth:`need`'s check when ``what`` is given; else
        the allocation was checked already, as part of a larger estimate)."""
        with self._lock:
            if what is not None:
                self._fits(nbytes, what, error)
            self.held += int(nbytes)
            self.peak = max(self.peak, self.held)

    def release(self, nbytes: float) -> None:
        with self._lock:
            self.held -= int(nbytes)

    @contextlib.contextmanager
    def reserve(self, nbytes: float, what: str, error=ApproxTooCostly):
        """Hold ``nbytes`` (checked) for the duration of a block."""
        self.hold(nbytes, what, error)
        try:
            yield self
        finally:
            self.release(nbytes)


_CACHES: list = []  # (bytes(), clear()) of the caches that keep arrays between calls


def register_cache(size, clear) -> None:
    """A cache whose arrays count against every budget (``size()`` bytes) and are dropped
    (``clear()``) before a budget refuses an allocation."""
    _CACHES.append((size, clear))


def resident() -> int:
    """Bytes the registered caches hold."""
    return sum(size() for size, _ in _CACHES)


_CURRENT: ContextVar[Budget | None] = ContextVar("optcomp_memory_budget", default=None)
_PROCESS = Budget(MAX_MEMORY)  # for engine code run outside any public call (e.g. by tests)


def current() -> Budget:
    """The budget of the call in progress (the default one outside any)."""
    b = _CURRENT.get()
    return b if b is not None else _PROCESS


def check_max_memory(max_memory) -> int:
    """``max_memory`` validated: an integer number of bytes >= :data:`MIN_MEMORY`."""
    if isinstance(max_memory, bool) or not hasattr(max_memory, "__index__") or int(max_memory) < MIN_MEMORY:
        raise ValueError(f"max_memory must be an integer number of bytes >= {MIN_MEMORY} (1 MiB), "
                         f"got {max_memory!r}")
    return int(max_memory)


@contextlib.contextmanager
def limit(max_memory=None):
    """The budget of a public call: ``max_memory`` bytes (None: :data:`MAX_MEMORY`, or, inside
    another call, that call's budget).  A budget opened inside another is at most what the
    outer one has left."""
    outer = _CURRENT.get()
    if max_memory is None and outer is not None:
        yield outer
        return
    value = MAX_MEMORY if max_memory is None else check_max_memory(max_memory)
    if outer is not None:
        value = min(value, max(outer.limit - outer.held, 0))
    token = _CURRENT.set(Budget(value))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def budgeted(fn):
    """``fn`` with a keyword ``max_memory`` (bytes; default :data:`MAX_MEMORY`): the body runs
    within that budget (:func:`limit`)."""

    @functools.wraps(fn)
    def run(*args, max_memory=None, **kwargs):
        with limit(max_memory):
            return fn(*args, **kwargs)

    return run


def _libc_trim():
    """glibc's ``malloc_trim``, or None elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _libc_trim()


def trim_heap() -> None:
    """Return the allocator's free memory to the system (glibc: ``malloc_trim(0)``; nothing
    elsewhere).  glibc serves arrays below its (adaptive, up to 32 MB) mmap threshold from
    its heap and keeps them when freed: after a tree of large transforms that retention
    reached ~60% of a 256 MiB budget, ~20% once trimmed."""
    if _TRIM is not None:
        _TRIM(0)
