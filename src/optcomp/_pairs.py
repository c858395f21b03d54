"""Certified finite discrete dominating pairs on a lattice h·ℤ: the leaf of the producer seam.

A mechanism enters the lattice engine as a :class:`DiscretePair`: atoms of its privacy loss
L = log(dP/dQ) under P (the first distribution of the pair) placed on the lattice h·ℤ, with
float brackets of their P-masses and of the mass at loss +∞.  Q-masses follow from the loss
(q = p·e^{−n·h}; what Q has left sits at loss −∞ and never enters delta).

Why rounding is enough (the argument every producer here relies on).  For a product of
independent pairs the privacy loss is the sum of the per-pair losses, and the hockey-stick
divergence of the composition is

    delta(x) = H_{e^x}(P || Q) = E_P[(1 − e^{x − L})_+],   L = L_1 + … + L_k,

with (1 − e^{x−∞}) = 1 (Meiser–Mohammadi, CCS 2018, Lemma 5; Sommer–Meiser–Mohammadi, PoPETs
2019).  The integrand is non-decreasing in L, so:

* rounding every atom of every L_i *up* (to the next lattice point, or to +∞) gives, under
  the obvious coupling, L↑ ≥ L pointwise and delta↑(x) ≥ delta(x) for every x and every
  composition -- the "pessimistic" PLD of Meiser–Mohammadi and of Doroshenko, Ghazi, Kamath,
  Kumar and Manurangsi, *Connect the Dots: Tighter Discrete Approximations of Privacy Loss
  Distributions* (PoPETs 2022), Section 3.  The rounded pair (P↑, Q↑ = P↑·e^{−L↑}, rest at
  −∞) is a genuine pair of distributions (E_P[e^{−L↑}] ≤ E_P[e^{−L}] ≤ 1) and a *dominating
  pair* of the mechanism in the sense of Zhu, Dong and Wang, *Optimal Accounting of
  Differential Privacy via Characteristic Function* (AISTATS 2022), Def. 7: its hockey-stick
  curve lies above the mechanism's at every x, and composition preserves domination (their
  Thm. 10).
* rounding every atom *down* (to the previous lattice point, or dropping it to −∞) gives
  L↓ ≤ L and delta↓(x) ≤ delta(x): the "optimistic" PLD.  It need not be a pair of
  distributions (Σ q may exceed 1); only this functional lower bound is claimed.

Masses are non-negative and delta is a positive linear functional of them (of products of
them after composition), so upper bounds of the masses (``p_hi``, ``inf_hi``) keep the
upper side valid and lower bounds (``p_lo``, ``inf_lo``) keep the lower side valid.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np

from ._rounding import UNIT, mpf_dir, sum_dir

__all__ = ["DiscretePair", "UPPER", "LOWER", "N_MAX", "bracket", "settle", "lattice_pair", "lattice_index",
           "lattice_index_mp", "mpf_err"]

UPPER = "upper"
LOWER = "lower"
N_MAX = 2**53  # lattice indices are kept in [-N_MAX, N_MAX]; beyond, rounding goes to ±∞ / the end point
PRECISIONS = (128, 256, 512, 1024, 2048, 4096)  # mpmath working precisions tried by settle()


@dataclass(frozen=True, eq=False)
class DiscretePair:
    """A certified finite discrete pair on the lattice h·ℤ (the producer seam's leaf).

    Fields:

    * ``h`` (float > 0): the lattice step; atom i sits at loss ``n[i]·h``, the *exact* real
      product of the integer and the float (never a rounded float product).
    * ``n`` (int64 array, strictly increasing, |n| ≤ 2^53): the lattice indices.
    * ``p_lo``, ``p_hi`` (float arrays, 0 ≤ p_lo ≤ p_hi ≤ 1): brackets of the P-mass of each
      atom of the discretised pair described below.
    * ``inf_lo``, ``inf_hi`` (floats): bracket of the P-mass at loss +∞ (Q-mass 0 there).
    * ``side``: ``"upper"`` or ``"lower"``.

    Guarantee.  Let L be the mechanism's privacy loss log(dP/dQ) under P, in the direction
    the pair was built for.  ``side="upper"``: there is a coupling with a random variable
    L↑ ≥ L that takes the value n[i]·h with probability m_i ∈ [p_lo[i], p_hi[i]] and +∞ with
    probability m_∞ ∈ [inf_lo, inf_hi]; hence for every x and every composition with other
    independent pairs, the composed delta(x) = E[(1 − e^{x − ΣL})_+] is at most the value
    computed from ``p_hi`` and ``inf_hi``.  ``side="lower"``: L↓ ≤ L instead (mass rounded
    down, or dropped to −∞), and the value computed from ``p_lo`` and ``inf_lo`` is at most
    the composed delta(x).  Q-masses are q_i = m_i·e^{−n_i h}.  See the module docstring for
    the argument (Meiser–Mohammadi 2018; Doroshenko et al. 2022; Zhu–Dong–Wang 2022).
    """

    h: float
    n: np.ndarray
    p_lo: np.ndarray
    p_hi: np.ndarray
    inf_lo: float
    inf_hi: float
    side: str

    def __post_init__(self):
        if self.side not in (UPPER, LOWER):
            raise ValueError(f"side must be 'upper' or 'lower', got {self.side!r}")
        if not (math.isfinite(self.h) and self.h > 0):
            raise ValueError(f"h must be finite and > 0, got {self.h!r}")
        n = np.asarray(self.n, dtype=np.int64)
        lo = np.asarray(self.p_lo, dtype=float)
        hi = np.asarray(self.p_hi, dtype=float)
        if not (n.shape == lo.shape == hi.shape and n.ndim == 1):
            raise ValueError("n, p_lo and p_hi must be 1-D arrays of one length")
        if n.size and (np.any(np.diff(n) <= 0) or abs(int(n[0])) > N_MAX or abs(int(n[-1])) > N_MAX):
            raise ValueError("n must be strictly increasing within [-2^53, 2^53]")
        if not (np.all(lo >= 0) and np.all(lo <= hi) and np.all(hi <= 1)):
            raise ValueError("masses must satisfy 0 <= p_lo <= p_hi <= 1")
        if not 0.0 <= self.inf_lo <= self.inf_hi <= 1.0:
            raise ValueError("inf masses must satisfy 0 <= inf_lo <= inf_hi <= 1")
        for name, arr in (("n", n), ("p_lo", lo), ("p_hi", hi)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def losses(self) -> np.ndarray:
        """The atoms' losses n·h as floats (nearest; the exact positions are n[i]·h)."""
        return self.n * self.h

    def delta(self, x: float) -> float:
        """The hockey-stick divergence E[(1 − e^{x − L})_+] of this one pair at x, from
        ``p_hi``/``inf_hi`` rounded up (``side="upper"``: an upper bound of the mechanism's
        delta(x) in this direction) or from ``p_lo``/``inf_lo`` rounded down (``"lower"``).

        Float evaluation with directed error charges: the exact distance x − n·h is bracketed
        by the float one ± (|x − l| + |l|)·2u (+ 2 subnormal units), each expm1 is charged
        4 ulps and each product 1 ulp, and the sum is rounded by ``sum_dir``."""
        up = self.side == UPPER
        x = float(x)
        if math.isinf(x):
            return (self.inf_hi if up else self.inf_lo) if x > 0 else math.inf
        l = self.n.astype(float) * self.h
        d = x - l
        err = (np.abs(d) + np.abs(l)) * (2 * UNIT) + 1e-323
        d = d - err if up else d + err
        d = np.nextafter(d, -np.inf if up else np.inf)
        keep = d < 0
        with np.errstate(over="ignore"):
            f = -np.expm1(d[keep])
        f = _nudge(f, up, 4)
        f = np.clip(f, 0.0, 1.0)
        mass = (self.p_hi if up else self.p_lo)[keep]
        terms = _nudge(mass * f, up, 1)
        total = sum_dir(np.append(terms, self.inf_hi if up else self.inf_lo), up)
        return min(max(total, 0.0), 1.0)


def _nudge(a: np.ndarray, up: bool, ulps: int) -> np.ndarray:
    for _ in range(ulps):
        a = np.nextafter(a, np.inf if up else -np.inf)
    return a


def bracket(value, err) -> tuple[float, float]:
    """Floats (lo, hi) with lo ≤ value − err ... value + err ≤ hi, clipped to [0, 1] (masses
    and deltas are probabilities)."""
    lo = value - err
    hi = value + err
    flo = 0.0 if lo <= 0 else min(_float_dir(lo, False), 1.0)
    fhi = 0.0 if hi <= 0 else min(_float_dir(hi, True), 1.0)
    return flo, fhi


_TINY_MP = mpmath.ldexp(1, -1080)  # below every subnormal float
_HUGE_MP = mpmath.ldexp(1, 1030)  # above the float range


def _float_dir(v, up: bool) -> float:
    """``mpf_dir`` for a positive mpmath number of any magnitude (exponents far outside the
    float range are decided without forming 2^exponent exactly)."""
    if v < _TINY_MP:
        return 5e-324 if up else 0.0
    if v > _HUGE_MP:
        return math.inf if up else sys.float_info.max
    return mpf_dir(v, up)


def mpf_err(*magnitudes, bits: int = 8):
    """A working-precision error charge: 2^-(prec − bits) · Σ|magnitudes| (a few ulps for each
    operation whose result had that magnitude; ``bits`` is the generous ulp count's log)."""
    s = mpmath.mpf(0)
    for m in magnitudes:
        s += abs(m)
    return s * mpmath.ldexp(1, bits - mpmath.mp.prec)


def settle(compute) -> tuple[float, float]:
    """(lo, hi) floats bracketing a real computed by ``compute() -> (value, err)`` in mpmath.

    ``compute`` returns its value at the current working precision and a bound of its
    error (``mpf_err`` of the magnitudes involved).  The precision grows through
    ``PRECISIONS`` until the bound is below 2^-64 of the value (or the value is exactly 0);
    at the last precision the bracket is returned as it is: wider, but still valid."""
    for prec in PRECISIONS:
        with mpmath.workprec(prec):
            value, err = compute()
            if err == 0 or (value > 0 and err <= value * mpmath.ldexp(1, -64)) or prec == PRECISIONS[-1]:
                return bracket(value, err)
    raise AssertionError("unreachable")  # pragma: no cover


def _group(idx: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Sum the brackets of atoms that share a lattice index (directed: each float sum of c
    non-negative terms is within (c − 1)u relative of the exact sum; charged 2cu + 1 ulp)."""
    order = np.argsort(idx, kind="stable")
    idx, lo, hi = idx[order], lo[order], hi[order]
    if idx.size == 0:
        return idx, lo, hi
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    counts = np.diff(np.r_[starts, idx.size])
    s_lo = np.add.reduceat(lo, starts)
    s_hi = np.add.reduceat(hi, starts)
    charge = 2.0 * counts * UNIT
    s_lo = np.nextafter(s_lo * (1.0 - charge), -np.inf)
    s_hi = np.nextafter(s_hi * (1.0 + charge), np.inf)
    many = counts > 1
    lo_out = np.where(many, np.maximum(s_lo, 0.0), lo[starts])
    hi_out = np.where(many, np.minimum(s_hi, 1.0), hi[starts])
    return idx[starts], lo_out, hi_out


def lattice_index(pos, h: float, up: bool) -> int:
    """ceil(pos/h) (``up``) or floor(pos/h) for a rational position, decided exactly (a
    Python int, possibly beyond ±N_MAX: :func:`lattice_pair` handles those)."""
    q = Fraction(pos) / Fraction(h)
    return math.ceil(q) if up else math.floor(q)


def lattice_index_mp(pos, err, h: float, up: bool) -> int:
    """ceil((pos + err)/h) (``up``) or floor((pos − err)/h) for a position known in mpmath
    within ``err``, widened by the division's own rounding (a further 2^-(prec−8) relative
    and absolute): never below (``up``) or above the exact ceil/floor of the true pos/h."""
    q = (pos + err if up else pos - err) / mpmath.mpf(h)
    margin = (abs(q) + 1) * mpmath.ldexp(1, 8 - mpmath.mp.prec)
    return int(mpmath.ceil(q + margin)) if up else int(mpmath.floor(q - margin))


def lattice_pair(h: float, side: str, idx, lo, hi, inf_lo: float, inf_hi: float) -> DiscretePair:
    """A :class:`DiscretePair` from atoms already placed on the lattice (indices may repeat,
    in any order; atoms of zero upper mass are dropped).  Indices beyond ±N_MAX are handled
    on the safe side: above +N_MAX the upper pair sends the mass to +∞ and the lower pair
    clamps it to +N_MAX (rounding down); below −N_MAX the upper pair clamps it to −N_MAX
    (rounding up) and the lower pair drops it (−∞)."""
    up = side == UPPER
    idx = np.asarray(idx, dtype=object)
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    big = np.array([i > N_MAX for i in idx], dtype=bool)
    small = np.array([i < -N_MAX for i in idx], dtype=bool)
    if up and big.any():
        inf_hi = sum_dir([inf_hi, *hi[big].tolist()], True)
        inf_lo = sum_dir([inf_lo, *lo[big].tolist()], False)
        idx, lo, hi, small = idx[~big], lo[~big], hi[~big], small[~big]
    elif big.any():
        idx = np.where(big, N_MAX, idx)
    if up:
        idx = np.where(small, -N_MAX, idx)
    elif small.any():
        idx, lo, hi = idx[~small], lo[~small], hi[~small]
    n = np.asarray(idx.tolist(), dtype=np.int64)
    n, lo, hi = _group(n, lo, hi)
    keep = hi > 0
    return DiscretePair(float(h), n[keep], lo[keep], hi[keep], min(inf_lo, 1.0), min(inf_hi, 1.0), side)
