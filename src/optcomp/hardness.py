r"""MV Theorem 1.6 made executable: an optimal-composition oracle counts the solutions of a
#P-complete problem.

Murtagh and Vadhan (MV, Section 4) prove that computing OptComp is #P-hard through the chain

    #INT-PARTITION  <=  #PARTITION  <=  #T-PARTITION  <=  SUM-PARTITION  <=  OptComp

(Definitions 4.6-4.9, Lemmas 4.10, 4.11, 4.13 and the proof of Theorem 1.6 with Claims
4.14-4.18).  This module implements every step as the paper states it.  Each reduction is a
function that receives an *oracle* for the next problem and returns its answer computed only
from that oracle's answers; :func:`count_int_partition` plugs them together on top of
:class:`OptCompOracle`, so the number of solutions of an #INT-PARTITION instance is read off
four values delta_g(eps_g) of optimal composition.  The brute-force counters
(``*_bruteforce``) evaluate the definitions directly and exist to check every count.

The problems (z_1..z_k positive integers, w_i = z_i^{1/D}, products over P and its complement):

* Def. 4.6  #INT-PARTITION(z):        #{P ⊆ [k] : Π_P z_i = Π_{not P} z_i};
* Def. 4.7  #PARTITION(D, z):         #{P : Π_P w_i = Π_{not P} w_i};
* Def. 4.8  #T-PARTITION(D, z, t, t'): #{P : Π_P w_i − Π_{not P} w_i = T},  T = t^{1/D} − t'^{1/D} > 0;
* Def. 4.9  SUM-PARTITION(D, z, r):   Σ_P max{Π_P w_i − r·Π_{not P} w_i, 0},  r > 1 rational,
  computed to within 2^-q (the paper's convention for real-valued functions, Sec. 2);
* OptComp (Thm 1.5, δ-version used in the proof of Thm 1.6): given eps_1..eps_k, delta_i = 0 and
  eps_g, the least delta_g — in this package's privacy-loss form (see :mod:`optcomp.loss`)

      delta_g(eps_g) = Σ_{l > eps_g} P0[L = l] (1 − e^{eps_g − l})
                     = Σ_S (P0[S] − e^{eps_g} P1[S])_+ ,

  L = Σ_{i∈S} eps_i − Σ_{i∉S} eps_i the privacy loss of the composed randomized responses
  (MV Def. 3.1), P0[S] = Π_{i∈S} p_i Π_{i∉S} (1 − p_i), p_i = e^{eps_i}/(1 + e^{eps_i}) and
  P1[S] = P0[S] e^{−l_S} = P0[complement of S].  Multiplying by Π(1 + e^{eps_i}) gives MV eq. (1.2):
  delta_g·Π(1 + w_i) = Σ_S max{Π_S w_i − r Π_{not S} w_i, 0} at eps_i = ln w_i, eps_g = ln r.

Precision.  float64 is far from enough: the gaps the proof has to resolve (Claim 4.14) are
about 1/(D·(Π z_i)^3).  The oracle works in fixed point with ``F`` fractional bits
(Python integers, i.e. mpmath's own mantissa arithmetic; mpmath computes every scalar
e^{eps}, ln z, z^{1/D}), with ``F`` derived from the accuracy its caller asks for and an explicit
error bound (:class:`OptCompOracle`).  Each reduction asks for exactly the accuracy its proof
needs (Claims 4.16 and 4.18), so the bits reported per instance are the proof's, made
concrete: about 3·log2(Π z_i) bits for the sums, plus about 2k for the oracle.

Why it stops scaling: every oracle call enumerates all 2^{k+1} atoms of the loss distribution
(the instance grows by one element in Lemma 4.11) — that is what an exact OptComp evaluator
for arbitrary real eps_i has to do, unless #P collapses — and the precision grows with
log(Π z_i).  The library's exact methods (:mod:`optcomp.optimal`) stop at k ≈ 48 for the
same reason.

Two places where the paper's text is made precise here:

* Lemma 4.11's all-ones special case: with every z_i = 1 *every* P ⊆ [k] has equal (empty or
  unit) products, so the count of Def. 4.6/4.7 is 2^k — the paper says 2^k − 2 ("all except
  P = [k] and P = ∅"), which contradicts its own definition (an empty product is 1).  We
  return 2^k (what the brute-force counter of Def. 4.6 counts) without calling the oracle
  (T would be 0, and #T-PARTITION requires T > 0).
* Lemma 4.11 writes T as 2D-th roots while the w_i are D-th roots; the #T-PARTITION
  instance built here uses one root order for all of them: D' = 2D, z'_i = z_i^2,
  z'_{k+1} = (Π z_i)^2, t = (Π z_i)^3, t' = Π z_i (the same real numbers w_i and T).

Length (~720 lines): one theorem's reduction chain (Lemmas 4.10-4.13, Claims 4.14-4.18),
kept whole so that it reads in the paper's order.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Sequence

import mpmath

from ._memory import current as current_budget
from ._rounding import fraction_mpf, mpf_exact
from ._types import ExactTooLarge

__all__ = [
    "TInstance",
    "ChainResult",
    "OptCompOracle",
    "count_int_partition_bruteforce",
    "count_partition_bruteforce",
    "count_t_partition_bruteforce",
    "sum_partition_bruteforce",
    "partition_instance",
    "count_int_partition_via_partition",
    "t_partition_instance",
    "count_partition_via_t_partition",
    "count_t_partition_via_sum_partition",
    "sum_partition_via_optcomp",
    "count_int_partition",
    "MAX_ORACLE_K",
]

MAX_ORACLE_K = 24  # 2^24 atoms of a few hundred bits each: ~ 1 min and 2 GiB per oracle call
_GUARD = 32  # extra bits for every mpmath evaluation of a scalar


# ------------------------------------------------------------------------- validation


def _check_z(z, name: str = "z") -> tuple[int, ...]:
    if isinstance(z, (str, bytes)) or not hasattr(z, "__len__"):
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got {z!r}")
    if len(z) == 0:
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got an empty sequence")
    out = []
    for i, v in enumerate(z):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1:
            raise ValueError(f"{name} must be positive integers, got {name}[{i}]={v!r}")
        out.append(int(v))
    return tuple(out)


def _check_pos_int(v, name: str, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _check_eps_total(eps_total) -> float:
    if isinstance(eps_total, bool) or not isinstance(eps_total, numbers.Real):
        raise ValueError(f"eps_total must be a number in (0, 2], got {eps_total!r}")
    x = float(eps_total)
    if not (0.0 < x <= 2.0):  # also rejects nan
        raise ValueError(f"eps_total must be in (0, 2] (so that every w_i <= e), got {eps_total!r}")
    return x


def _check_r(r) -> Fraction:
    if isinstance(r, bool) or not isinstance(r, (numbers.Rational, float)):
        raise ValueError(f"r must be a rational number > 1, got {r!r}")
    if isinstance(r, float) and not math.isfinite(r):
        raise ValueError(f"r must be a rational number > 1, got {r!r}")
    fr = Fraction(r)
    if fr <= 1:
        raise ValueError(f"r must be a rational number > 1, got {r!r}")
    return fr


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _subset_products(values: Sequence) -> list:
    """Π_{i∈S} values_i for every S ⊆ [k], S encoded by the bits of the list index
    (bit i set <=> i ∈ S); the complement of index s is (2^k − 1) − s, i.e. reversed order."""
    out = [1]
    for v in values:
        out = out + [a * v for a in out]
    return out


def _ceil_log2(x) -> int:
    """ceil(log2(x)) for x > 0 (mpf, Fraction, float or int), computed safely upward."""
    x = mpmath.mpf(x) if not isinstance(x, Fraction) else fraction_mpf(x)
    if x <= 1:
        return 0 if x == 1 else -int(mpmath.floor(-mpmath.log(x, 2)))
    return int(mpmath.ceil(mpmath.log(x, 2) * (1 + mpmath.mpf(2) ** -40)))


# ------------------------------------------------------------------------- the definitions (brute force)


def count_int_partition_bruteforce(z: Sequence[int]) -> int:
    """#INT-PARTITION (MV Def. 4.6) by enumerating all 2^k subsets: the number of
    P ⊆ [k] with Π_{i∈P} z_i = Π_{i∉P} z_i (exact integer arithmetic)."""
    z = _check_z(z)
    total = _prod(z)
    return sum(1 for a in _subset_products(z) if a * a == total)


def count_partition_bruteforce(D: int, z: Sequence[int]) -> int:
    """#PARTITION (MV Def. 4.7) by enumerating all 2^k subsets of the *real numbers*
    w_i = z_i^{1/D}: the number of P with Π_{i∈P} w_i = Π_{i∉P} w_i.

    Decided numerically, rigorously: the products are evaluated in mpmath and compared with
    the separation Fact 4.12 gives — if Π_P z ≠ Π_{not P} z then
    |Π_P w − Π_{not P} w| = |a^{1/D} − b^{1/D}| ≥ |a − b| / (D·max(a, b)^{(D−1)/D}) ≥ 1/(D·N)
    (N = Π z_i) — so a difference below 1/(2DN) is an equality.  (Deliberately not Lemma
    4.10's argument, which the reduction uses.)"""
    z = _check_z(z)
    D = _check_pos_int(D, "D")
    N = _prod(z)
    prec = (D * N).bit_length() + 2 * len(z) + 64
    with mpmath.workprec(prec):
        w = [mpmath.root(mpmath.mpf(v), D) for v in z]
        prods = _subset_products(w)
        whole = prods[-1]
        threshold = mpmath.mpf(1) / (2 * D * N)
        return sum(1 for a in prods if abs(a - whole / a) < threshold)


@dataclass(frozen=True)
class TInstance:
    """An #T-PARTITION instance (MV Def. 4.8): w_i = z_i^{1/D}, T = t^{1/D} − t'^{1/D} > 0."""

    D: int
    z: tuple[int, ...]
    t: int
    t_prime: int

    def __post_init__(self):
        object.__setattr__(self, "z", _check_z(self.z))
        _check_pos_int(self.D, "D")
        _check_pos_int(self.t, "t")
        _check_pos_int(self.t_prime, "t_prime")
        if self.t <= self.t_prime:
            raise ValueError(f"t must exceed t_prime (T = t^(1/D) - t'^(1/D) > 0), got t={self.t}, t_prime={self.t_prime}")

    @property
    def k(self) -> int:
        return len(self.z)

    @property
    def N(self) -> int:
        return _prod(self.z)

    def T(self) -> mpmath.mpf:
        """T = t^{1/D} − t'^{1/D} at the current mpmath precision."""
        return mpmath.root(mpmath.mpf(self.t), self.D) - mpmath.root(mpmath.mpf(self.t_prime), self.D)


def _gap(m, N: int, D: int) -> mpmath.mpf:
    """x(m) = m^{1/D} − (N/m)^{1/D}: the gap Π_P w − Π_{not P} w of a partition with Π_P z = m
    (MV proof of Lemma 4.13; increasing in m)."""
    m = mpmath.mpf(m)
    return mpmath.root(m, D) - mpmath.root(mpmath.mpf(N) / m, D)


def count_t_partition_bruteforce(inst: TInstance) -> int:
    """#T-PARTITION (MV Def. 4.8) by enumerating all 2^k subsets of the real numbers w_i:
    the number of P with Π_{i∈P} w_i − Π_{i∉P} w_i = T.

    Decided numerically.  When t·t' = Π z_i (every instance Lemma 4.11 builds) T = x(t) for
    the increasing function x(m) = m^{1/D} − (N/m)^{1/D}, every gap is x(a) for an integer
    a ≤ N, and distinct values are at least 1/(D·(max(N, t) + 1)) apart (Fact 4.12, as in
    Claim 4.14): a difference below half of that is an equality.  Otherwise a difference is
    accepted as non-zero when it exceeds 2^{-prec/2} at a high precision, and
    ``NotImplementedError`` is raised if one does not (deciding such equalities of sums of
    radicals needs exact algebraic arithmetic)."""
    if not isinstance(inst, TInstance):
        raise ValueError(f"inst must be a TInstance, got {type(inst).__name__}")
    N, D = inst.N, inst.D
    exact_form = inst.t * inst.t_prime == N
    if exact_form:
        bound = D * (max(N, inst.t) + 1)
        prec = bound.bit_length() + 2 * inst.k + 64
    else:
        prec = 4 * (D * N * inst.t * inst.t_prime).bit_length() + 128
    with mpmath.workprec(prec):
        T = inst.T()
        prods = _subset_products([mpmath.root(mpmath.mpf(v), D) for v in inst.z])
        whole = prods[-1]
        threshold = mpmath.mpf(1) / (2 * bound) if exact_form else mpmath.mpf(2) ** (-prec // 2)
        count = 0
        for a in prods:
            diff = abs(a - whole / a - T)
            if diff < threshold:
                if not exact_form:
                    raise NotImplementedError(
                        "undecided equality of radical differences (t*t_prime != prod(z)); "
                        "exact algebraic arithmetic would be needed")
                count += 1
        return count


def sum_partition_bruteforce(D: int, z: Sequence[int], r, q: int) -> mpmath.mpf:
    """SUM-PARTITION (MV Def. 4.9) straight from the definition, over all 2^k subsets:
    Σ_P max{Π_P w_i − r Π_{not P} w_i, 0}, returned to within 2^-q (mpmath at
    q + k + 64 bits; each of the 2^k terms is below e·r and errs by a few ulps)."""
    z = _check_z(z)
    D = _check_pos_int(D, "D")
    r = _check_r(r)
    q = _check_pos_int(q, "q", 0)
    prec = q + 2 * len(z) + (r.numerator.bit_length() + 2) + 64
    with mpmath.workprec(prec):
        rr = fraction_mpf(r)
        prods = _subset_products([mpmath.root(mpmath.mpf(v), D) for v in z])
        return mpmath.fsum(max(a - rr * b, 0) for a, b in zip(prods, reversed(prods)))


# ------------------------------------------------------------------------- the oracle


@dataclass
class OracleCall:
    k: int
    bits: int
    seconds: float
    atoms: int


class OptCompOracle:
    r"""Exact optimal composition, δ-version (MV Thm 1.5 with eps_g given, as used in the
    proof of Thm 1.6): ``oracle(eps, delta, eps_g, q)`` returns delta_g to within 2^-q,

        delta_g = 1 − Π(1 − delta_i)·(1 − H(eps_g)),
        H(x) = Σ_{l > x} P0[L = l](1 − e^{x − l}) = Σ_S (P0[S] − e^x P1[S])_+   (hockey stick)

    over all 2^k atoms of the privacy-loss distribution of the composed randomized responses
    (:mod:`optcomp.loss` writes the same functional; P1[S] = P0[complement of S]).  With
    delta_i = 0, delta_g = H.  The inputs are exact rationals (``mpf`` values are dyadic
    rationals, as the proof of Thm 1.6 requires: "we can only pass OptComp rational values").

    Arithmetic: fixed point with F fractional bits (Python integers; u = 2^-F).  p_i and
    e^{eps_g} are rounded to within 2u by mpmath, each of the k products per atom truncates
    by at most u, so every P0[S] errs by at most 3ku (all factors lie in [0, 1]); each term
    (P0[S] − e^x P1[S])_+ then errs by at most (3k(R + 2) + 3)u with R = e^{eps_g}
    (x ↦ max(x, 0) is 1-Lipschitz), and the 2^k terms by 2^k times that.  Hence
    F = q + k + ⌈log2(3k(R + 2) + 3)⌉ + 1 gives |error| ≤ 2^-(q+1).

    ``calls`` counts the queries; ``log`` keeps (k, F, seconds, atoms) per query.
    :class:`~optcomp.ExactTooLarge` when the 2^k atoms would not fit the memory budget
    (:mod:`optcomp._memory`; at default settings k = 24 at F <= ~90 bits fits).
    """

    def __init__(self, max_k: int = MAX_ORACLE_K):
        self.max_k = _check_pos_int(max_k, "max_k")
        self.log: list[OracleCall] = []

    @property
    def calls(self) -> int:
        return len(self.log)

    @property
    def max_bits(self) -> int:
        return max((c.bits for c in self.log), default=0)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.log)

    def __call__(self, eps: Sequence, delta: Sequence, eps_g, q: int) -> mpmath.mpf:
        start = time.perf_counter()
        eps = [self._number(e, f"eps[{i}]") for i, e in enumerate(eps)]
        delta = [self._number(d, f"delta[{i}]") for i, d in enumerate(delta)]
        eps_g = self._number(eps_g, "eps_g")
        q = _check_pos_int(q, "q", 0)
        k = len(eps)
        if k == 0:
            raise ValueError("eps must hold at least one mechanism")
        if len(delta) != k:
            raise ValueError(f"delta must have the length of eps ({k}), got {len(delta)}")
        if any(d >= 1 for d in delta):
            raise ValueError("delta must be in [0, 1)")
        if k > self.max_k:
            raise ValueError(f"eps: k = {k} mechanisms exceed max_k = {self.max_k} "
                             f"(the exact oracle enumerates 2^k atoms)")
        with mpmath.workprec(64):
            R_bound = mpmath.exp(_exact_mpf(eps_g)) * (1 + mpmath.mpf(2) ** -20)
        F = q + k + _ceil_log2(3 * k * (R_bound + 2) + 3) + 1
        # 2^k Python integers of F bits (24 bytes + 4 per 30-bit digit, a list slot each), two
        # lists at once while they double (72 bytes an atom measured at F = 50): checked first
        current_budget().need(2.0 * 2**k * (8 + 24 + 4 * (F // 30 + 1)),
                              f"the exact oracle's 2^{k} atoms of {F} bits", ExactTooLarge)
        one = 1 << F
        with mpmath.workprec(F + _GUARD):
            # p_i = e^{eps_i} / (1 + e^{eps_i}) = P0[s_i = +1]
            P = [int(mpmath.floor(mpmath.ldexp(1 / (1 + mpmath.exp(-_exact_mpf(e))), F))) for e in eps]
            R = int(mpmath.floor(mpmath.ldexp(mpmath.exp(_exact_mpf(eps_g)), F)))
        # P0[S] for every S (bit i of the index set <=> sign of mechanism i is +)
        masses = [one]
        for p in P:
            qm = one - p
            masses = [(m * qm) >> F for m in masses] + [(m * p) >> F for m in masses]
        # H(eps_g) = Σ_S (P0[S] − e^{eps_g} P1[S])_+ with P1[S] = P0[complement S]
        H = 0
        for a, b in zip(masses, reversed(masses)):
            d = a - ((R * b) >> F)
            if d > 0:
                H += d
        with mpmath.workprec(F + _GUARD):
            h = mpmath.ldexp(mpmath.mpf(H), -F)
            keep = mpmath.fprod([1 - _exact_mpf(d) for d in delta]) if any(delta) else mpmath.mpf(1)
            result = 1 - keep * (1 - h)
        self.log.append(OracleCall(k=k, bits=F, seconds=time.perf_counter() - start, atoms=len(masses)))
        return result

    @staticmethod
    def _number(x, name: str):
        """Validate a finite number >= 0 and keep it *exact*: an mpf as it is (whatever the
        current precision), a float or Fraction as a Fraction (converted inside the working
        precision)."""
        bad = ValueError(f"{name} must be a finite number >= 0, got {x!r}")
        if isinstance(x, bool):
            raise bad
        if isinstance(x, mpmath.mpf):
            if not mpmath.isfinite(x) or x < 0:
                raise bad
            return x
        if isinstance(x, float) and not math.isfinite(x):
            raise bad
        if not isinstance(x, (numbers.Rational, float)):
            raise bad
        v = Fraction(x)
        if v < 0:
            raise bad
        return v


def _exact_mpf(x) -> mpmath.mpf:
    """An mpf of x at the current precision (an mpf passes through unrounded)."""
    if isinstance(x, mpmath.mpf):
        return x
    return fraction_mpf(Fraction(x))


# ------------------------------------------------------------------------- the reductions


def _step(trace, step: str, quantity: str, value, note: str = "") -> None:
    if trace is not None:
        trace.append({"step": step, "quantity": quantity, "value": value, "note": note})


def _show(x, digits: int = 20) -> str:
    if isinstance(x, Fraction):
        return f"{x.numerator}/{x.denominator}"
    if isinstance(x, mpmath.mpf):
        return mpmath.nstr(x, digits)
    return str(x)


def partition_instance(z: Sequence[int], log_c) -> int:
    """MV Lemma 4.10's root order: D = ⌈log_c(Π z_i)⌉ (at least 1), so that the #PARTITION
    instance w_i = z_i^{1/D} has Π w_i = (Π z_i)^{1/D} ≤ c.  ``log_c`` = ln c > 0."""
    z = _check_z(z)
    if isinstance(log_c, bool) or not isinstance(log_c, numbers.Real) or not (float(log_c) > 0):
        raise ValueError(f"log_c must be a number > 0, got {log_c!r}")
    N = _prod(z)
    if N == 1:
        return 1
    with mpmath.workprec(N.bit_length() + 64):
        lc = mpmath.mpf(float(log_c))
        D = int(mpmath.ceil(mpmath.log(N) / lc))
        # the last step by exact-enough comparison: least D with ln N <= D ln c
        while D > 1 and mpmath.log(N) <= (D - 1) * lc:
            D -= 1
        while mpmath.log(N) > D * lc:
            D += 1
    return max(D, 1)


def count_int_partition_via_partition(z: Sequence[int], partition_oracle: Callable[[int, tuple], int],
                                      log_c, *, trace: list | None = None) -> int:
    """MV Lemma 4.10: #INT-PARTITION ≤ #PARTITION.  With D = ⌈log_c Π z_i⌉ and
    w_i = z_i^{1/D},  Π_P w_i = Π_{not P} w_i ⇔ (Π_P w_i)^D = (Π_{not P} w_i)^D ⇔
    Π_P z_i = Π_{not P} z_i: the solutions correspond one to one, so the answer is the
    #PARTITION oracle's answer on (D, z), whose product Π w_i ≤ c."""
    z = _check_z(z)
    D = partition_instance(z, log_c)
    _step(trace, "Lemma 4.10", "D", D, "D = ceil(log_c prod z_i): w_i = z_i^(1/D), prod w_i <= c")
    count = partition_oracle(D, z)
    _step(trace, "Lemma 4.10", "#PARTITION answer", count, "= #INT-PARTITION (one-to-one)")
    return count


def t_partition_instance(D: int, z: Sequence[int]) -> TInstance:
    """MV Lemma 4.11's instance: W' = W ∪ {w_{k+1}}, w_{k+1} = Π_{i≤k} w_i,
    T = sqrt(w_{k+1})(w_{k+1} − 1) = t^{1/(2D)} − t'^{1/(2D)} with t = (Π z_i)^3, t' = Π z_i.
    Written with one root order D' = 2D (z'_i = z_i^2, z'_{k+1} = (Π z_i)^2), as Def. 4.8
    asks; the real numbers w_i and T are the paper's.  Requires some z_i > 1 (else T = 0)."""
    z = _check_z(z)
    D = _check_pos_int(D, "D")
    N = _prod(z)
    if N == 1:
        raise ValueError("z: all ones gives T = 0; Lemma 4.11 treats this case separately (count 2^k)")
    return TInstance(D=2 * D, z=tuple(v * v for v in z) + (N * N,), t=N ** 3, t_prime=N)


def count_partition_via_t_partition(D: int, z: Sequence[int], t_oracle: Callable[[TInstance], int], *,
                                    trace: list | None = None) -> int:
    """MV Lemma 4.11: #PARTITION ≤ #T-PARTITION.

    If every z_i = 1 (every w_i = 1), every P ⊆ [k] is a solution: return 2^k without an
    oracle call (the paper says 2^k − 2, which contradicts Def. 4.7: empty products are 1;
    here T would be 0, not a valid #T-PARTITION instance).  Otherwise ask the #T-PARTITION
    oracle about :func:`t_partition_instance`: Q ∋ k+1 is a solution iff P = Q ∩ [k]
    satisfies (Π_P w − sqrt(Π w))(Π w·Π_P w + sqrt(Π w)) = 0, i.e. Π_P w = Π_{not P} w
    (Case 1); Q ∌ k+1 would need Π_P w > Π_{[k]} w (Case 2): none.  So the counts agree."""
    z = _check_z(z)
    D = _check_pos_int(D, "D")
    if all(v == 1 for v in z):
        _step(trace, "Lemma 4.11", "all-ones special case", 2 ** len(z),
              "every w_i = 1: all 2^k subsets are solutions, no oracle call")
        return 2 ** len(z)
    inst = t_partition_instance(D, z)
    if trace is not None:
        with mpmath.workprec(inst.N.bit_length() + 96):
            w_last = mpmath.root(mpmath.mpf(inst.z[-1]), inst.D)
            _step(trace, "Lemma 4.11", "w_{k+1} = prod w_i", _show(w_last), f"z'_(k+1) = {inst.z[-1]}, D' = {inst.D}")
            _step(trace, "Lemma 4.11", "T", _show(inst.T()), f"T = t^(1/D') - t'^(1/D'), t = {inst.t}, t' = {inst.t_prime}")
    count = t_oracle(inst)
    _step(trace, "Lemma 4.11", "#T-PARTITION answer", count, "= #PARTITION (Case 1 one-to-one, Case 2 empty)")
    return count


def _r_of(x, W):
    """MV eq. (4.2): r(x) = (x + sqrt(x^2 + 4W))^2 / (4W), so that for v = Π_P w
    v − r(x)·W/v ≥ 0 ⇔ v − W/v ≥ x (x > 0; increasing in x)."""
    return (x + mpmath.sqrt(x * x + 4 * W)) ** 2 / (4 * W)


def _simplest_between(lo: Fraction, hi: Fraction) -> Fraction:
    """The rational with the least denominator in [lo, hi] (0 < lo < hi), by continued
    fractions (Stern-Brocot descent)."""
    h1, h0, k1, k0 = 1, 0, 0, 1  # value = (h1*x + h0) / (k1*x + k0) of the remaining variable x
    while True:
        fl = lo.numerator // lo.denominator
        a = fl if fl == lo else (fl + 1 if fl + 1 <= hi else None)
        if a is not None:
            return Fraction(h1 * a + h0, k1 * a + k0)
        h1, h0, k1, k0 = h1 * fl + h0, h1, k1 * fl + k0, k1
        lo, hi = 1 / (hi - fl), 1 / (lo - fl)


def _two_rationals(lo, hi) -> tuple[Fraction, Fraction]:
    """Two simple rationals r < r' strictly inside (lo, hi): r in [lo + g/6, lo + g/3],
    r' in [lo + 2g/3, lo + 5g/6] (g = hi − lo), so r' − r ≥ g/3 (Claim 4.16's denominator)."""
    lo_f, hi_f = mpf_exact(lo), mpf_exact(hi)
    g = hi_f - lo_f
    return (_simplest_between(lo_f + g / 6, lo_f + g / 3), _simplest_between(lo_f + 2 * g / 3, lo_f + 5 * g / 6))


def _sum_bits(T, r: Fraction, r2: Fraction) -> int:
    """Claim 4.16: S1, S2 within (T/8)(r' − r)/(r' − 1) give Σ_{P^T}(a − b) within T/4.
    Returns q with 2^-q at most a quarter of that (two spare bits for the rounding of the
    linear combination), so the count is off by at most 1/8 + 1/8."""
    tol = T / 8 * fraction_mpf(r2 - r) / fraction_mpf(r2 - 1)
    return -int(mpmath.floor(mpmath.log(tol, 2))) + 2


def count_t_partition_via_sum_partition(inst: TInstance, sum_oracle: Callable, *,
                                        trace: list | None = None) -> int:
    """MV Lemma 4.13: #T-PARTITION ≤ SUM-PARTITION, with four oracle calls.

    1. Every gap is x(m) = m^{1/D} − W/m^{1/D} for the integer m = Π_P z_i (W = Π w_i); solve
       x(j) = T for j.  If j is not an integer the answer is 0.  (For t·t' = Π z_i, every
       instance of Lemma 4.11, j = t exactly; otherwise j is located numerically and a
       non-integer j is proven by a margin, an apparent integer raises NotImplementedError.)
    2. T' = x(j + 1), T'' = x(j − 1): no gap lies in (T'', T) or (T, T') (Claim 4.14: both
       intervals are at least 1/(D(j + 1)) long, by Fact 4.12).
    3. With P^y = {P : gap ≥ y} and T̂ ∈ (T, T'), the count is
       |P^T \\ P^T̂| = (Σ_{P^T}(a − b) − Σ_{P^T̂}(a − b)) / T  (a = Π_P w, b = Π_{not P} w).
    4. Σ_{P^T}(a − b) from two SUM-PARTITION answers S1, S2 at rationals r < r' in
       (max(1, r(T'')), r(T)) (eq. 4.2, Claim 4.15): ((r' − 1) S1 − (r − 1) S2)/(r' − r);
       likewise Σ_{P^T̂}(a − b) with r, r' in (r(T), r(T')).  No partition has a = r·b at
       these r (Lemma 4.13's promise), since r(T'') < r < r(T) < r(T') etc.
    5. Each S within (T/8)(r' − r)/(r' − 1) (Claim 4.16) makes the estimate within 1/2 of
       the integer count: round it."""
    if not isinstance(inst, TInstance):
        raise ValueError(f"inst must be a TInstance, got {type(inst).__name__}")
    D, N = inst.D, inst.N
    if inst.t * inst.t_prime == N:
        j = inst.t
        _step(trace, "Lemma 4.13", "j", j, "x(j) = T solved exactly: t * t' = prod z, so j = t")
    else:
        prec = 4 * (D * N * inst.t * inst.t_prime).bit_length() + 128
        with mpmath.workprec(prec):
            T = inst.T()
            W = mpmath.root(mpmath.mpf(N), D)
            jr = ((T + mpmath.sqrt(T * T + 4 * W)) / 2) ** D
            jn = int(mpmath.nint(jr))
            if abs(jr - jn) > mpmath.mpf(2) ** (-prec // 2) * (1 + jr):
                _step(trace, "Lemma 4.13", "j", _show(jr), "not an integer: no solutions, no oracle call")
                return 0
        raise NotImplementedError("j looks like an integer but t * t_prime != prod(z): deciding it "
                                  "exactly needs algebraic arithmetic")
    # Claim 4.14: T - T'' >= 1/(D j), T' - T >= 1/(D (j+1)); enough bits to place rationals
    wp = 2 * (D * (j + 1)).bit_length() + N.bit_length() + 64
    with mpmath.workprec(wp):
        W = mpmath.root(mpmath.mpf(N), D)
        T = inst.T()
        T_hi = _gap(j + 1, N, D)
        T_lo = _gap(j - 1, N, D) if j >= 2 else mpmath.mpf(-1)
        r_T, r_hi = _r_of(T, W), _r_of(T_hi, W)
        r_lo = max(_r_of(T_lo, W), mpmath.mpf(1)) if T_lo > 0 else mpmath.mpf(1)
        ra, ra2 = _two_rationals(r_lo, r_T)
        rb, rb2 = _two_rationals(r_T, r_hi)
        qa, qb = _sum_bits(T, ra, ra2), _sum_bits(T, rb, rb2)
    _step(trace, "Lemma 4.13", "T'' = x(j-1)", _show(T_lo), "Claim 4.14: no gap in (T'', T)")
    _step(trace, "Lemma 4.13", "T' = x(j+1)", _show(T_hi), "Claim 4.14: no gap in (T, T')")
    _step(trace, "Lemma 4.13", "r(T'')", _show(r_lo), "eq. (4.2), at least 1")
    _step(trace, "Lemma 4.13", "r(T)", _show(r_T), "eq. (4.2)")
    _step(trace, "Lemma 4.13", "r(T')", _show(r_hi), "eq. (4.2)")
    _step(trace, "Lemma 4.13", "r, r' for P^T", f"{_show(ra)}, {_show(ra2)}", "rationals in (r(T''), r(T)), Claim 4.15")
    _step(trace, "Lemma 4.13", "r, r' for P^T-hat", f"{_show(rb)}, {_show(rb2)}", "rationals in (r(T), r(T'))")
    _step(trace, "Lemma 4.13", "q (bits of each SUM-PARTITION answer)", max(qa, qb), "Claim 4.16: within (T/8)(r'-r)/(r'-1)")
    S = [sum_oracle(D, inst.z, r, q) for r, q in ((ra, qa), (ra2, qa), (rb, qb), (rb2, qb))]
    for name, r, s in zip(("S1", "S2", "S3", "S4"), (ra, ra2, rb, rb2), S):
        _step(trace, "Lemma 4.13", f"{name} = SUM-PARTITION(r = {_show(r)})", _show(s), "oracle answer")
    with mpmath.workprec(max(qa, qb) + wp):
        def combine(r, r2, s1, s2):
            r, r2 = fraction_mpf(r), fraction_mpf(r2)
            return ((r2 - 1) * s1 - (r - 1) * s2) / (r2 - r)

        G_T = combine(ra, ra2, S[0], S[1])
        G_hat = combine(rb, rb2, S[2], S[3])
        estimate = (G_T - G_hat) / T
        count = int(mpmath.nint(estimate))
        residual = abs(estimate - count)
    _step(trace, "Lemma 4.13", "sum over P^T of (a - b)", _show(G_T), "((r'-1) S1 - (r-1) S2) / (r'-r)")
    _step(trace, "Lemma 4.13", "sum over P^T-hat of (a - b)", _show(G_hat), "((r'-1) S3 - (r-1) S4) / (r'-r)")
    _step(trace, "Lemma 4.13", "estimate (difference / T)", _show(estimate), f"rounds to {count}; |error| = {mpmath.nstr(residual, 3)}")
    if residual >= 0.5:  # cannot happen within the error budget; a wrong oracle would show here
        raise ArithmeticError(f"estimate {estimate} is not within 1/2 of an integer: oracle too inaccurate")
    return count


def sum_partition_via_optcomp(D: int, z: Sequence[int], r, q: int, oracle: Callable, *,
                              trace: list | None = None, stats: dict | None = None) -> mpmath.mpf:
    """Proof of MV Thm 1.6: SUM-PARTITION ≤ OptComp.  Set eps_i = ln w_i, delta_i = 0,
    eps_g = ln r; by Thm 1.5 eq. (1.2) the oracle's delta_g satisfies
    delta_g·Π(1 + e^{eps_i}) = Σ_S max{Π_S w_i − r·Π_{not S} w_i, 0}.

    OptComp takes rational inputs, so eps_i and eps_g are rounded to p fractional bits
    (|error| ≤ 2^-p).  Claims 4.17-4.18 bound the effect; redone for errors in log space
    (and for eps_g, which the paper leaves implicit): every product over ≤ k factors moves by
    a factor e^{±k 2^-p}, so each of the 2^k terms moves by at most c·2^-p(2k + 2)(1 + 2r)
    (c = Π w_i; x ↦ max(x, 0) is 1-Lipschitz, so Claim 4.17's invariance of the summed set
    is not needed), and p = q + 1 + k + ⌈log2(c(2k + 2)(1 + 2r))⌉ keeps the sum within
    2^-(q+1).  The oracle is asked for delta_g within 2^-(q+2)/Π(1 + e^{eps_i}).  Returns the
    SUM-PARTITION value within 2^-q.  ``stats`` (a dict) receives the bits used and, for
    comparison, Claim 4.17's sufficient bound D·log2(b) + log2(D) + log2(Π z) (r = a/b)."""
    z = _check_z(z)
    D = _check_pos_int(D, "D")
    r = _check_r(r)
    q = _check_pos_int(q, "q", 0)
    k = len(z)
    N = _prod(z)
    with mpmath.workprec(64):
        c = mpmath.root(mpmath.mpf(N), D) * (1 + mpmath.mpf(2) ** -30)
        p = q + 1 + k + _ceil_log2(c * (2 * k + 2) * (1 + 2 * fraction_mpf(r) * (1 + mpmath.mpf(2) ** -30)))
        q_delta = q + 3 + k + _ceil_log2(c)  # Π(1 + e^{eps_i}) ≤ 2^k c (1 + tiny)
    with mpmath.workprec(p + N.bit_length() + _GUARD):
        scale = mpmath.mpf(2) ** (p + 1)
        eps = [mpmath.nint(mpmath.log(v) / D * scale) / scale for v in z]  # |error| <= 2^-(p+1) + tiny
        eps_g = mpmath.nint(mpmath.log(fraction_mpf(r)) * scale) / scale
    # the oracle's inputs are these dyadic rationals exactly
    delta_g = oracle(eps, [0] * k, eps_g, q_delta)
    with mpmath.workprec(q_delta + p + _GUARD + 2 * k):
        weight = mpmath.fprod([1 + mpmath.exp(e) for e in eps])
        value = delta_g * weight
    if stats is not None:
        stats["bits_eps"] = max(stats.get("bits_eps", 0), p)
        stats["bits_delta"] = max(stats.get("bits_delta", 0), q_delta)
        c417 = D * r.denominator.bit_length() + D.bit_length() + N.bit_length()
        stats["bits_claim_4_17"] = max(stats.get("bits_claim_4_17", 0), c417)
    if trace is not None and not any(s["quantity"] == "eps_i = ln w_i" for s in trace):
        _step(trace, "Theorem 1.6", "eps_i = ln w_i", ", ".join(mpmath.nstr(e, 8) for e in eps),
              f"rounded to p = {p} bits; delta_i = 0; sum eps_i = {mpmath.nstr(mpmath.fsum(eps), 8)}")
    if trace is not None:
        _step(trace, "Theorem 1.6", f"delta_g at eps_g = ln({_show(r)}) = {mpmath.nstr(eps_g, 8)}",
              _show(delta_g), f"OptComp oracle; x prod(1 + e^eps_i) = {mpmath.nstr(weight, 12)} gives SUM-PARTITION")
    return value


# ------------------------------------------------------------------------- the whole chain


@dataclass
class ChainResult:
    """The outcome of :func:`count_int_partition`: the count read off the OptComp oracle,
    the oracle's work and the precision each step used."""

    z: tuple[int, ...]
    count: int
    D: int
    oracle_calls: int
    oracle_atoms: int
    bits_sum: int  # Claim 4.16: bits of each SUM-PARTITION answer (max over the calls)
    bits_eps: int  # Claim 4.18: bits of the rational eps_i, eps_g passed to OptComp
    bits_delta: int  # bits of delta_g asked of the oracle
    bits_oracle: int  # the oracle's fixed-point working precision F
    bits_claim_4_17: int  # Claim 4.17's sufficient input precision (reported, not needed)
    sum_eps: float  # Σ eps_i of the OptComp queries (≤ eps_total)
    oracle_seconds: float
    seconds: float
    special_case: bool
    steps: list = field(default_factory=list)


def count_int_partition(z: Sequence[int], eps_total: float = 1.0, *, oracle: OptCompOracle | None = None,
                        trace: bool = False) -> ChainResult:
    """#INT-PARTITION(z) (MV Def. 4.6) computed through the whole chain of MV Section 4:
    Lemma 4.10 (D-th roots, Π w_i ≤ sqrt(c)), Lemma 4.11 (#T-PARTITION with one extra
    element, Π w ≤ c), Lemma 4.13 (four SUM-PARTITION queries), Thm 1.6 (each one OptComp
    query with eps_i = ln w_i, delta_i = 0, eps_g = ln r), with c = e^{eps_total}: every
    OptComp instance has Σ eps_i ≤ eps_total (MV Thm 1.6's "for any constant eps > 0").

    The count returned comes only from the oracle's answers (or, when every z_i = 1, from
    Lemma 4.11's special case, 2^k, with no call).  ``oracle`` defaults to a fresh
    :class:`OptCompOracle`; ``trace=True`` records every intermediate number in ``steps``."""
    z = _check_z(z)
    eps_total = _check_eps_total(eps_total)
    oracle = OptCompOracle() if oracle is None else oracle
    if oracle.max_k < len(z) + 1 and any(v > 1 for v in z):
        raise ValueError(f"z: k = {len(z)} needs oracle queries with k + 1 = {len(z) + 1} > max_k = {oracle.max_k} mechanisms")
    steps: list | None = [] if trace else None
    stats: dict = {}
    sum_bits: list[int] = []
    eps_sums: list[float] = []
    calls_before = oracle.calls
    start = time.perf_counter()
    _step(steps, "Def. 4.6", "z", " ".join(map(str, z)), f"k = {len(z)}, prod z_i = {_prod(z)}")

    def sum_oracle(D, zz, r, q):
        sum_bits.append(q)
        with mpmath.workprec(64):
            eps_sums.append(float(mpmath.log(mpmath.mpf(_prod(zz))) / D))
        return sum_partition_via_optcomp(D, zz, r, q, oracle, trace=steps, stats=stats)

    def t_oracle(inst):
        return count_t_partition_via_sum_partition(inst, sum_oracle, trace=steps)

    def partition_oracle(D, zz):
        return count_partition_via_t_partition(D, zz, t_oracle, trace=steps)

    count = count_int_partition_via_partition(z, partition_oracle, eps_total / 2, trace=steps)
    seconds = time.perf_counter() - start
    calls = oracle.log[calls_before:]
    D = partition_instance(z, eps_total / 2)
    return ChainResult(
        z=z, count=count, D=D, oracle_calls=len(calls), oracle_atoms=sum(c.atoms for c in calls),
        bits_sum=max(sum_bits, default=0), bits_eps=stats.get("bits_eps", 0), bits_delta=stats.get("bits_delta", 0),
        bits_oracle=max((c.bits for c in calls), default=0), bits_claim_4_17=stats.get("bits_claim_4_17", 0),
        sum_eps=max(eps_sums, default=0.0), oracle_seconds=sum(c.seconds for c in calls), seconds=seconds,
        special_case=all(v == 1 for v in z), steps=steps or [],
    )
