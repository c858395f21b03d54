"""Validation and normalisation of the public inputs.

Every public entry point funnels its arguments through :func:`mechanisms`, so the
rest of the package works with one shape only: a :class:`Mechanisms` record holding
1-D float arrays ``eps`` and ``delta`` of equal length ``k >= 1``.  Errors are
``ValueError`` with a message that names the offending parameter and its value.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["Mechanisms", "mechanisms", "check_delta_g", "check_eps_g", "check_k", "check_unit_open"]


@dataclass(frozen=True)
class Mechanisms:
    """k mechanisms, mechanism i being (eps[i], delta[i])-DP.

    ``homogeneous`` is true when every (eps_i, delta_i) pair is the same, which lets
    the closed forms and the exact binomial algorithm run in O(1)/O(window) time
    instead of touching every mechanism.
    """

    eps: np.ndarray
    delta: np.ndarray

    @property
    def k(self) -> int:
        return int(self.eps.size)

    @property
    def homogeneous(self) -> bool:
        return bool(np.all(self.eps == self.eps[0]) and np.all(self.delta == self.delta[0]))

    @property
    def log_no_delta(self) -> float:
        """log prod_i (1 - delta_i), accurately (log1p, exact summation)."""
        if not np.any(self.delta):
            return 0.0
        if self.homogeneous:
            return self.k * math.log1p(-float(self.delta[0]))
        return math.fsum(np.log1p(-self.delta).tolist())


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_k(k) -> int:
    """k must be an integer >= 1 (an integral float such as 1e6 is accepted)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Real):
        raise ValueError(f"k must be an integer >= 1, got {_describe(k)}")
    if isinstance(k, numbers.Integral):
        value = int(k)
    else:
        kf = float(k)
        if not math.isfinite(kf) or kf != math.floor(kf):
            raise ValueError(f"k must be an integer >= 1, got {_describe(k)}")
        value = int(kf)
    if value < 1:
        raise ValueError(f"k must be an integer >= 1, got {_describe(k)}")
    return value


def _as_vector(name: str, value) -> np.ndarray:
    if isinstance(value, (str, bytes)) or value is None:
        raise ValueError(f"{name} must be a number or a 1-D sequence of numbers, got {_describe(value)}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or a 1-D sequence of numbers, got {_describe(value)}") from None
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a number or a 1-D sequence, got an array of shape {arr.shape}")
    return arr


def mechanisms(eps, delta=0.0, k=None, counts=None) -> Mechanisms:
    """Normalise (eps, delta, k, counts) to a :class:`Mechanisms` record, or raise ValueError.

    * ``eps`` a number and ``k`` given: k identical mechanisms (homogeneous);
    * ``eps`` a 1-D sequence: one mechanism per entry (``k``, if given, must match);
    * ``delta`` a number (applies to every mechanism) or a sequence of length k;
    * ``counts`` (with a sequence ``eps``): entry i stands for ``counts[i]`` identical
      mechanisms (eps[i], delta[i]); ``k``, if given, must equal ``sum(counts)``.
    """
    eps_arr = _as_vector("eps", eps)
    delta_arr = _as_vector("delta", delta)
    if counts is not None:
        # TEMPORARY: expanded; the multiset representation replaces this
        cnt = np.asarray(counts, dtype=np.int64)
        eps_arr = np.repeat(np.atleast_1d(eps_arr), cnt)
        if delta_arr.ndim == 1:
            delta_arr = np.repeat(delta_arr, cnt)
    if k is not None:
        k = check_k(k)
    if eps_arr.ndim == 0:
        if k is None:
            if delta_arr.ndim == 1:
                k = delta_arr.size
            else:
                raise ValueError(
                    "k is required when eps is a single number (k mechanisms, each (eps, delta)-DP); "
                    "pass k=... or a sequence of per-mechanism eps"
                )
        if k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k}")
        eps_arr = np.full(k, float(eps_arr))
    else:
        if eps_arr.size < 1:
            raise ValueError("eps must hold at least one mechanism (k >= 1), got an empty sequence")
        if k is not None and k != eps_arr.size:
            raise ValueError(f"k={k} does not match len(eps)={eps_arr.size}")
    k = eps_arr.size
    if delta_arr.ndim == 0:
        delta_arr = np.full(k, float(delta_arr))
    elif delta_arr.size != k:
        raise ValueError(f"delta has length {delta_arr.size} but there are {k} mechanisms (len(eps) or k)")
    bad = ~np.isfinite(eps_arr) | (eps_arr < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"eps must be finite and >= 0, got eps[{i}]={float(eps_arr[i])!r}")
    bad = ~np.isfinite(delta_arr) | (delta_arr < 0) | (delta_arr >= 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"delta must lie in [0, 1), got delta[{i}]={float(delta_arr[i])!r}")
    eps_arr.setflags(write=False)
    delta_arr.setflags(write=False)
    return Mechanisms(eps_arr, delta_arr)


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            arr = np.asarray(value)
        except Exception:  # pragma: no cover - exotic objects
            arr = None
        if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf":
            raise ValueError(f"{name} must be a real number, got {_describe(value)}")
        value = arr.item()
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must be a real number, got nan")
    return x


def check_delta_g(delta_g) -> float:
    """delta_g must be a real number in [0, 1)."""
    x = _check_real("delta_g", delta_g)
    if not 0.0 <= x < 1.0:
        raise ValueError(f"delta_g must lie in [0, 1), got {x!r}")
    return x


def check_eps_g(eps_g) -> float:
    """eps_g must be a finite real number >= 0."""
    x = _check_real("eps_g", eps_g)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"eps_g must be finite and >= 0, got {x!r}")
    return x


def check_unit_open(name: str, value) -> float:
    """A parameter that must lie strictly between 0 and 1 (e.g. eta)."""
    x = _check_real(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {x!r}")
    return x
