"""Progress of long calls (layer L5): the one ``progress=`` convention of the package.

``progress`` is None/False (silent), True (one status line on stderr, rewritten in place
with ``\\r`` and ended by a newline when the call returns) or a callable receiving one
status dict per step of the work.  The lattice passes of :mod:`optcomp.approx` report at
once; the searches of :mod:`optcomp.calibrate` and the grid of :func:`optcomp.privacy_curve`
report on stderr only after :data:`DELAY` seconds, so short calls stay silent.
"""

from __future__ import annotations

import sys
import time

DELAY = 2.0  # seconds before a delayed progress=True line is first written


class StderrBar:
    """``progress=True``: one status line on stderr, rewritten in place after each step,
    ended by a newline by :meth:`close`; silent for its first ``delay`` seconds."""

    def __init__(self, stream=None, delay: float = 0.0):
        self.stream = stream
        self.delay = delay
        self.t0 = time.perf_counter()
        self.written = False

    def __call__(self, status: dict) -> None:
        if time.perf_counter() - self.t0 < self.delay:
            return
        stream = self.stream if self.stream is not None else sys.stderr
        gap, tol = status.get("gap"), status.get("tol")
        bits = [f"optcomp {status.get('stage', '')}"]
        if status.get("step") is not None:
            bits.append(f"step {status['step']:.3g}")
        if status.get("points") is not None:
            bits.append(f"{status['points']:,} points")
        if status.get("total"):
            bits.append(f"{100.0 * status.get('done', 0) / status['total']:.0f}% of {status['total']:,} leaves")
        if gap is not None:
            bits.append(f"gap {gap:.3g}" + (f" (tol {tol:.3g})" if tol is not None else ""))
        bits.append(f"{time.perf_counter() - self.t0:.1f} s")
        stream.write("\r" + ", ".join(bits) + "   ")
        stream.flush()
        self.written = True

    def close(self) -> None:
        if self.written:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write("\n")
            stream.flush()


def callback(progress, *, delayed: bool = False):
    """The callback for a ``progress`` argument (None when silent): True gives a
    :class:`StderrBar` (silent for :data:`DELAY` seconds if ``delayed``); a callable is
    returned as it is.  The status dicts carry ``stage`` and, when known, ``step``,
    ``points``, ``lower``, ``upper``, ``gap``, ``tol``, ``done``/``total`` (leaves of a
    lattice pass), ``seconds``."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return StderrBar(delay=DELAY if delayed else 0.0)
    if callable(progress):
        return progress
    raise ValueError(f"progress must be None, a bool or a callable taking a status dict, got {progress!r}")


def close(cb) -> None:
    """End a stderr status line (with its newline) however the call ended."""
    if isinstance(cb, StderrBar):
        cb.close()
