r"""Finite mechanism laws, composed exactly (layer L3): the laws, the composition per global
direction, and the small compositions enumerated in high precision.

A mechanism with finitely many outcomes (k-ary randomized response, a geometric with
sensitivity > 1, the staircase, a :class:`~optcomp.mechanisms.Pair`, a
:class:`~optcomp.mechanisms.Profile`, the black boxes beside them, and a Poisson-subsampled
one of them -- the mixture of a finite pair is a finite pair, Zhu, Dong and Wang, AISTATS
2022, Thm 11; a Pair's formed in exact rationals, :func:`exact_pair`) has, in each
direction, a privacy loss L = log(dP/dQ) with finitely many atoms l_a of P-mass p_a, plus
P-mass at +inf.  k copies have a multinomial law: the count vector (n_a) of outcomes,
loss sum_a n_a l_a.  Everything below reads a mechanism through one function,
:func:`finite_law`.

**The delta formula.**  Split each copy's P (a probability law: a
:class:`~optcomp.mechanisms.Pair`'s floats are taken over their exact sums) as its finite mass
F and its mass a_f = 1 - F at +inf (an outcome with q = 0 < p; a black box's delta, a
Profile's min_j delta_j).  The outcomes of the composition with some +inf coordinate give
(P - e^x Q)_+ = P: they are an independent delta event, and

    delta(x) = sum_{tuples} (P - e^x Q)_+ = 1 - prod (1 - a_f)^c (1 - H(x)),
    H(x) = E[(1 - e^{x - L})_+]

with L the composed loss under the *normalised* finite laws p_a / F: the formula of
:mod:`optcomp.loss`, so :func:`optcomp.loss.delta_from_excess` and
:func:`optcomp.loss.residual_target` do the rest (:class:`Events`).  Each global direction (every mechanism seen forward, or every one
in reverse: the same two neighbouring datasets) has its own law; a composition reports the
larger of the two, never a choice per mechanism.

**Small compositions** (:class:`SmallLaw`): at most ``SMALL_ATOMS`` count-vector tuples in
all are listed in long double (x87 extended precision: masses e^{log C + sum n_a log p_a},
positions sum n_a l_a with their error bound) -- the distance to x taken from the exact
rational position (randomized response, geometric, staircase, profiles: multiples of the
float eps) for every atom near it, else from positions within a stated error (a Pair's
log(p/q)) -- and H is summed term by term; an eps_g is solved on its segment in closed
form and then *checked*: the float returned is one at which the certified H bound is below
the target (moved up by ulps until it is).  Larger ones go to the lattice law of
:mod:`optcomp._exact.convolution` when every atom is a multiple of one rational unit (and a
law has three atoms or more), else to the multinomial rows of :mod:`optcomp._exact.multinomial`.

The laws' positions and masses come from the mechanisms at ``PREC`` = 256 bits (their
relative errors, times the counts, are charged to every composed mass): with float masses
k copies would carry k ulps, 1e-10 relative at k = 10^6.

Length (~780 lines): one copy's law (every finite family, subsampled ones included), the
compositions per global direction with their exact delta events, and the small compositions
listed term by term share the 256-bit laws and their error charges; :class:`LawSolver`, the
root bracket and CGF estimates the three exact producers share, lives beside them.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from itertools import combinations

import mpmath
import numpy as np

from .._inputs import Mechanisms
from .._rounding import down, exact_dir, fraction_mpf, mpf_dir, mpf_exact, up
from .._types import ExactTooLarge
from ..loss import delta_from_excess, residual_target

__all__ = ["FiniteLaw", "finite_law", "Composition", "compositions", "Events", "SmallLaw", "SMALL_ATOMS"]

PREC = 256  # bits of the laws' positions and masses (mechanisms compute them at this precision)
SMALL_ATOMS = 512  # up to this many count-vector tuples a composition is listed (SmallLaw)
UNCERTAIN_REL, UNCERTAIN_MASS = 2.0**-30, 2.0**-60  # a listed atom's mass error above the first
# (relative) while its mass is below the second: left out as slack (see :func:`finite_law`)
NEGLIGIBLE = mpmath.ldexp(1, -1100)  # an atom whose count x mass is below this is dropped (charged as slack;
# an mpmath number: the float 2.0**-1100 is 0, and nothing was ever dropped)
#: a composition holding a subsampled law of three atoms or more is composed exactly up to this
#: many count vectors (beyond, ExactTooLarge: auto's lattice answers it within its tolerance).
#: Its atoms are irrational and ~s apart, so the multinomial rows cost seconds where the lattice
#: costs milliseconds (Subsampled(Geometric(0.5, 3), 0.01) x 1000, 1.7e8 vectors: 26 s against
#: 0.07 s; Subsampled(DiscreteGaussian(1.0), 0.1) x 2, 3160 vectors whose far masses need 60-digit
#: log pmfs: 6.5 s against 0.07 s for a bracket 1e-12 wide); a two-atom law (binomial rows,
#: 0.25 s at k = 10^4) is not capped.
SUBSAMPLED_TUPLES = 2**11
EXACT_EVENTS = 256  # delta events (copies with a > 0 or a black box's delta) evaluated as exact rationals


# --------------------------------------------------------------------------- one copy's law


@dataclass(frozen=True, eq=False)
class FiniteLaw:
    """One copy's privacy-loss law given no +inf event, atoms ascending by position.

    Atom a lies at ``pos[a]`` (an mpmath number, ``PREC`` bits) within ``perr[a]`` of the true
    position, which is the Fraction ``exact[a]`` when known (then ``perr[a]`` covers only the
    rounding of ``pos``); ``mass[a]`` (mpmath, summing to 1 at ``PREC`` bits) is the
    normalised P-mass p_a / F, within the relative error ``rel`` of the truth.  ``a_lo``,
    ``a_hi``: floats around a = 1 - F (the delta event of one copy); ``dropped``: mass of
    atoms left out (each below ``NEGLIGIBLE`` / count of the composition, charged as slack
    by the caller)."""

    exact: tuple
    pos: tuple
    perr: tuple
    mass: tuple
    rel: float
    a_lo: float = 0.0
    a_hi: float = 0.0
    dropped: float = 0.0
    #: a as an exact rational when known (a Pair's normalised masses; a law whose +inf mass
    #: bracket is one float), else None
    a_exact: Fraction | None = None
    #: an upper bound of the positions of the dropped atoms (None: none dropped), so that
    #: :meth:`top` bounds every atom of the law: H = 0 above it, slack included (a loosely
    #: known atom of mass ~s at 2e12, dropped, had left eps_g at the kept atoms' top ~s)
    dropped_top: object = None

    @property
    def size(self) -> int:
        return len(self.pos)

    def top(self, up: bool = True):
        """(exact or None, mpmath) of the largest atom's position: its mpmath position plus
        its error (``up``: the dropped atoms' too), or minus it (a lower end: the kept ones')."""
        if up and self.dropped_top is not None and self.dropped_top > self.pos[-1] + self.perr[-1]:
            return None, self.dropped_top
        return self.exact[-1], self.pos[-1] + self.perr[-1] if up else self.pos[-1] - self.perr[-1]


def _law(atoms, rel, a_lo=0.0, a_hi=0.0, dropped=0.0, a_exact=None, dropped_top=None) -> FiniteLaw:
    """A :class:`FiniteLaw` from (exact, pos, perr, mass) tuples (any order, zero masses left
    out, normalised to sum 1 at ``PREC`` bits; ``rel`` the masses' relative error before)."""
    atoms = sorted((a for a in atoms if a[3] > 0), key=lambda a: a[1])
    # atoms at one position merged (rows decompose the law by distinct positions): equal exact
    # positions, or floating ones whose error intervals meet (their union is the new error)
    merged = []
    with mpmath.workprec(PREC):
        for a in atoms:
            if merged:
                b = merged[-1]
                same = (a[0] == b[0]) if (a[0] is not None and b[0] is not None) else \
                    (a[0] is None and b[0] is None and a[1] - a[2] <= b[1] + b[2])
                if same:
                    merged[-1] = (b[0], b[1], max(b[2], a[1] + a[2] - b[1]), b[3] + a[3])
                    continue
            merged.append(a)
    atoms = merged
    with mpmath.workprec(PREC):
        total = mpmath.fsum(a[3] for a in atoms)
        mass = tuple(a[3] / total for a in atoms)
    # normalising by the computed total: each mass within rel of its true share twice over
    # (its own error and the total's), plus the division's rounding
    return FiniteLaw(tuple(a[0] for a in atoms), tuple(a[1] for a in atoms), tuple(a[2] for a in atoms), mass,
                     2.0 * rel + 2.0**-(PREC - 8), a_lo, a_hi, dropped,
                     a_exact if a_exact is not None else (Fraction(a_lo) if a_lo == a_hi else None), dropped_top)


def exact_pair(mech, direction: str):
    """The two output distributions (P, Q) of ``direction`` as tuples of exact rationals outcome
    by outcome, or None: a :class:`~optcomp.mechanisms.Pair` (its floats over their exact sums,
    ``Pair._distributions``), and a Poisson-subsampled mechanism whose base has them: remove
    ((1 - s) Q + s P, Q), add (Q, (1 - s) Q + s P) with (P, Q) the base's forward pair (Zhu,
    Dong and Wang, AISTATS 2022, Thm 11) -- the mixture of a finite pair is a finite pair,
    formed here in exact rationals (s the float q, exactly), so no rounding of it is left to
    charge."""
    if mech.family == "pair":
        return mech._distributions(direction)
    if mech.family == "subsampled" and mech.scheme == "poisson" and mech.relation == "add_remove":
        if mech.q == 1.0:
            return exact_pair(mech.mechanism, direction)
        base = exact_pair(mech.mechanism, "forward")
        if base is None:
            return None
        s = Fraction(mech.q)
        P, Q = base
        mix = tuple((1 - s) * b + s * a for a, b in zip(P, Q))
        return (mix, Q) if direction == "forward" else (Q, mix)
    return None


def _pair_law(pair) -> FiniteLaw:
    """The :class:`FiniteLaw` of exact rational output distributions (P, Q) (:func:`exact_pair`,
    each summing to 1): the +inf mass where Q = 0 < P, outcomes of equal likelihood ratio one
    atom at log(ratio)."""
    p, q = pair
    ratios = {}
    for a, b in zip(p, q):
        if a > 0 and b > 0:
            r = a / b
            ratios[r] = ratios.get(r, Fraction(0)) + a
    rows = []
    with mpmath.workprec(PREC):
        for r, w in ratios.items():
            m = mpmath.mpf(w.numerator) / w.denominator
            if r == 1:
                rows.append((Fraction(0), mpmath.mpf(0), mpmath.mpf(0), m))
            elif abs(r - 1) < Fraction(1, 2):  # log1p of the exact r - 1: no cancellation near 1
                d = r - 1
                pos = mpmath.log1p(mpmath.mpf(d.numerator) / d.denominator)
                rows.append((None, pos, mpmath.ldexp(abs(pos), 8 - PREC), m))
            else:
                pos = mpmath.log(mpmath.mpf(r.numerator)) - mpmath.log(mpmath.mpf(r.denominator))
                rows.append((None, pos, mpmath.ldexp(abs(pos) + 1, 8 - PREC), m))
    rel = 2.0**-(PREC - 8)  # (the masses: exact rationals, rounded once)
    a_exact = sum((a for a, b in zip(p, q) if a > 0 and b == 0), Fraction(0))
    if not rows:
        return FiniteLaw((), (), (), (), 0.0, 1.0, 1.0, a_exact=Fraction(1))
    return _law(rows, rel, exact_dir(a_exact, False), exact_dir(a_exact, True), a_exact=a_exact)


@lru_cache(maxsize=256)
def finite_law(mech, direction: str) -> FiniteLaw | None:
    """One copy of ``mech`` in ``direction`` as a :class:`FiniteLaw`, or None when its law has
    a continuous part (``kind == "cells"``: Laplace, Gaussian, a subsampled one of them).  The
    one place that reads a mechanism, through the mechanism contract (:mod:`optcomp._laws`):
    its :class:`~optcomp._laws.AtomLaw` (the +inf mass bracket), its atoms at ``PREC`` bits (an
    atom law's ``_atoms``: exact rational positions where the family has them, masses with
    error bounds -- the float brackets of the AtomLaw would cost k ulps at k copies) and,
    where the two output distributions are known as exact rationals (:func:`exact_pair`: a
    :class:`~optcomp.mechanisms.Pair`, normalised exactly, and a Poisson-subsampled one),
    their +inf mass as an exact rational.  A subsampled finite mechanism is a finite law (module docstring of
    :mod:`optcomp.mechanisms.subsampled`); one of sampling rate 1, or without replacement,
    is the mechanism it stands for."""
    from ..mechanisms import AtomMechanism, Subsampled

    if isinstance(mech, Subsampled) and mech._whole:
        return finite_law(mech._inner, direction)
    if mech.kind != "atoms" or not isinstance(mech, (AtomMechanism, Subsampled)):
        return None  # (a Laplace beyond the float range is an atom law without mpmath atoms: the
        # lattice path's frames answer it)
    pair = exact_pair(mech, direction)
    if pair is not None:
        return _pair_law(pair)
    # the contract's +inf bracket; for the AtomLaw of the atoms themselves (every atom family
    # but the discrete Gaussian) it is the bracket of their (inf, inf_err), taken below from
    # the PREC-bit atoms without listing the float law (0.5 s for a Geometric of 8,318 atoms)
    own = type(mech).law is AtomMechanism.law and type(mech)._law is AtomMechanism._law
    contract = None if own else mech.law(1.0, direction)
    with mpmath.workprec(PREC):
        atoms, inf, inf_err = mech._atoms(direction)
        rel = 0.0
        rows = []
        dropped = mpmath.mpf(0)
        drop_top = None
        for pos_exact, pos, perr, m, merr in atoms:
            if not m > 0:
                continue
            if merr > m * UNCERTAIN_REL and m + merr <= UNCERTAIN_MASS:
                # a tiny atom known only loosely (a Profile's vertex of mass 1.5e-205 +- 6e-203):
                # left out and charged as slack (its mass at +inf, at most m + merr a copy)
                # rather than its relative error spread over every mass of the law
                dropped += m + merr
                top = (fraction_mpf(pos_exact) if pos_exact is not None else pos) + perr + mpmath.ldexp(abs(pos), 4 - PREC)
                drop_top = top if drop_top is None else max(drop_top, top)
                continue
            rel = max(rel, float(merr / m))
            if pos_exact is not None:  # (perr: the rounding of the PREC-bit position; 0 where it is exact)
                p_mp = mpmath.mpf(pos_exact.numerator) / pos_exact.denominator
                rows.append((pos_exact, p_mp, mpmath.mpf(0) if mpf_exact(p_mp) == pos_exact else
                             mpmath.ldexp(abs(p_mp), 2 - PREC), m))
            else:
                rows.append((None, pos, perr + mpmath.ldexp(abs(pos), 2 - PREC), m))
        if not rows:
            return FiniteLaw((), (), (), (), 0.0, 1.0, 1.0, a_exact=Fraction(1))
        if contract is None or any(abs(r[1]) > sys.float_info.max for r in rows):
            # (with a contract: it counts atoms beyond the float range at +inf, having no float
            # for them; listed here at their exact positions, they are not the delta event, else
            # counted twice: Geometric(1e308, 2) at delta_g = 1e-300 gave eps_g in [inf, inf])
            from .._pairs import bracket

            a_lo, a_hi = bracket(inf, inf_err)
        else:
            a_lo, a_hi = contract.inf_lo, contract.inf_hi
        # the normalised masses p_a / (1 - inf): the computed total stands for 1 - inf (its
        # own error, the masses' and inf's, relative to it)
        total = mpmath.fsum(r[3] for r in rows)
        rel = max(rel, float(abs(total - (1 - inf)) + inf_err + dropped) / float(total))
        return _law(rows, rel, a_lo, a_hi, dropped=up(float(dropped), 2), dropped_top=drop_top)


@lru_cache(maxsize=1024)
def black_box_law(eps: float) -> FiniteLaw:
    """The randomized response of a black box (eps, delta) given no delta event (MV Def. 3.1):
    +eps with e^eps/(1 + e^eps), -eps with 1/(1 + e^eps), exact positions (eps >= 0)."""
    e = Fraction(eps)
    with mpmath.workprec(PREC):
        em = mpmath.mpf(eps)
        up_ = 1 / (1 + mpmath.exp(-em))
        dn = 1 / (1 + mpmath.exp(em))
        z = mpmath.mpf(0)
        atoms = [(e, em, z, up_)] + ([(-e, -em, z, dn)] if eps > 0 else [])
        return _law(atoms, 2.0**-(PREC - 8))


# --------------------------------------------------------------------------- the composition


class Events:
    """The delta events of a composition: delta(x) = 1 - prod(1 - a)(1 - H(x)) with the black
    boxes' delta_i and each mechanism's a_f (see the module docstring), as two multisets of
    (0, a) pairs -- ``m_up`` with every a rounded up, ``m_lo`` down -- that
    :mod:`optcomp.loss` evaluates."""

    def __init__(self, m: Mechanisms, laws):
        up_, lo_ = [], []
        for law, c in laws:
            if law.a_hi > 0.0:
                up_.append((law.a_hi, c))
            if law.a_lo > 0.0:
                lo_.append((law.a_lo, c))
        self.m_up = m.with_events(up_)
        self.m_lo = m.with_events(lo_)
        # an exact rational when every event is known exactly and the copies are few:
        # delta = 1 - N (1 - H), N = prod (1 - a)^c (1 - delta_i)^c, with no float charge (a
        # delta_g equal to the +inf mass, Pair((0.1, 0.9), (0, 1)), is then attained, not inf)
        self.exact = None
        pairs = [(law.a_exact, c) for law, c in laws]
        pairs += [(Fraction(d), int(c)) for d, c in zip(m.delta.tolist(), m.count.tolist()) if d > 0.0]
        if all(a is not None for a, _ in pairs) and sum(c for a, c in pairs if a) <= EXACT_EVENTS:
            nn = Fraction(1)
            for a, c in pairs:
                nn *= (1 - a) ** c
            self.exact = nn

    def _exact_delta(self, h: float, upper: bool) -> float:
        return min(1.0, max(0.0, exact_dir(1 - self.exact * (1 - Fraction(h)), upper)))

    def delta_bounds(self, h_lo: float, h_hi: float) -> tuple[float, float]:
        """(lower, upper) delta from bounds on H."""
        if self.exact is not None:
            return self._exact_delta(h_lo, False), self._exact_delta(h_hi, True)
        return delta_from_excess(self.m_lo, h_lo, round_up=False), delta_from_excess(self.m_up, h_hi)

    def targets(self, delta_g: float) -> tuple[float, float]:
        """(t_low, t_high): H(x) <= t_low implies delta(x) <= delta_g, and delta(x) <= delta_g
        implies H(x) <= t_high (:func:`optcomp.loss.residual_target`; t >= 1 when delta_g >= 1:
        then any x >= 0 will do)."""
        if self.exact is not None:  # H <= t  <=>  delta <= delta_g, t = 1 - (1 - delta_g)/N
            nn = self.exact
            if nn == 0:
                return (1.0, 1.0) if delta_g >= 1 else (-1.0, -1.0)
            t = 1 - (1 - Fraction(delta_g)) / nn
            if t >= 1:
                return 1.0, 1.0
            return exact_dir(t, False), exact_dir(t, True)
        if delta_g >= 1.0:
            return 1.0, 1.0
        return residual_target(self.m_up, delta_g), residual_target(self.m_lo, delta_g, round_up=True)


@dataclass(frozen=True, eq=False)
class Composition:
    """One global direction of a multiset: its factors ((law, count) pairs: black-box groups
    and mechanisms, every law with at least one atom), its delta events, and ``slack``: mass
    dropped with negligible atoms (an absolute charge to H's upper bound).  ``boxes``: the
    black-box groups ((eps, count), eps > 0 ascending), which are the first ``len(boxes)``
    factors.  ``cache``: its exact producer, once built (see
    :func:`optcomp.optimal._finite_solver`)."""

    factors: tuple
    events: Events
    slack: float
    boxes: tuple = ()
    cache: dict = field(default_factory=dict, repr=False)

    def tuples(self, cap: int) -> int:
        """Count vectors of the whole composition (any value above ``cap`` once it passes it)."""
        total = 1
        for law, c in self.factors:
            total *= math.comb(c + law.size - 1, law.size - 1) if law.size > 1 else 1
            if total > cap:
                return cap + 1
        return total

    def top(self, up: bool = True) -> float:
        """The largest composed loss, rounded up (H = 0 from there on) -- or down (``up``
        False: a lower end that must not pass it)."""
        exact, approx = Fraction(0), mpmath.mpf(0)
        known = True
        with mpmath.workprec(PREC):
            for law, c in self.factors:
                e, a = law.top(up)
                approx += c * a
                if e is None:
                    known = False
                else:
                    exact += c * e
            if known:
                return exact_dir(exact, up)
            slack = abs(approx) * mpmath.ldexp(1, 8 - PREC) + mpmath.ldexp(1, -PREC)
            return mpf_dir(approx + slack if up else approx - slack, up)


def _directions(m: Mechanisms) -> tuple:
    """The global directions to evaluate: both when some mechanism's laws differ."""
    return max((mech.directions() for mech, _ in m.others), key=len, default=("forward",))


def compositions(m: Mechanisms) -> list[Composition]:
    """One :class:`Composition` per global direction of ``m`` (black-box pairs and the
    finite mechanisms of ``m.others``); ExactTooLarge when a mechanism has a continuous law.
    Cached by the multiset's value (a curve or a search asks the same multiset again)."""
    return _compositions(tuple(m.eps.tolist()), tuple(m.delta.tolist()), tuple(m.count.tolist()), m.others)


@lru_cache(maxsize=32)
def _compositions(eps: tuple, delta: tuple, count: tuple, others: tuple) -> list[Composition]:
    m = Mechanisms(eps=np.array(eps, dtype=float), delta=np.array(delta, dtype=float),
                   count=np.array(count, dtype=np.int64), others=others)
    out = []
    for direction in _directions(m):
        laws, slack = [], 0.0
        e, c = m.positive()
        for eps, n in zip(e.tolist(), c.tolist()):
            laws.append((black_box_law(eps), int(n)))
        for mech, n in m.others:
            law = finite_law(mech, direction)
            if law is None:
                raise ExactTooLarge(f"no exact composition of {type(mech).__name__} mechanisms is implemented (a "
                                    "continuous privacy loss; exact: finite mechanisms, and Gaussians alone by their "
                                    "closed form); use method='approx' or 'auto' for certified bounds")
            laws.append((law, int(n)))
        factors = []
        for law, n in laws:
            kept, drop = _negligible(law, n)
            slack += drop + (up(law.dropped * n * (1.0 + 1e-9), 1) if law.dropped else 0.0)
            if kept.size:
                factors.append((kept, n))
        comp = Composition(tuple(factors), Events(m, laws), slack, tuple(zip(e.tolist(), [int(n) for n in c.tolist()])))
        if any(mech.family == "subsampled" and not mech._whole and finite_law(mech, direction).size > 2
               for mech, _ in m.others) and comp.tuples(SUBSAMPLED_TUPLES) > SUBSAMPLED_TUPLES:
            raise ExactTooLarge(f"a subsampled law's composition of more than {SUBSAMPLED_TUPLES:,} count vectors "
                                "is left to the certified lattice; use method='approx' or 'auto'")
        out.append(comp)
    return out


def _negligible(law: FiniteLaw, count: int) -> tuple[FiniteLaw, float]:
    """``law`` without its atoms of mass below NEGLIGIBLE / count (their outcomes, in all of
    probability <= count x their mass, are charged as slack; the rest renormalised, which
    moves every kept mass by that relative amount at most), and the charge."""
    small = [m * count < NEGLIGIBLE for m in law.mass]
    if not any(small) or all(small):
        return law, 0.0
    with mpmath.workprec(PREC):
        gone = mpmath.fsum(m for m, s in zip(law.mass, small) if s)
    drop = up(float(gone) * count * (1.0 + 1e-9), 1)
    atoms = [(e, p, d, m) for e, p, d, m, s in zip(law.exact, law.pos, law.perr, law.mass, small) if not s]
    with mpmath.workprec(PREC):
        tops = [p + d for p, d, s in zip(law.pos, law.perr, small) if s]
        if law.dropped_top is not None:
            tops.append(law.dropped_top)
    return _law(atoms, law.rel + float(gone), law.a_lo, law.a_hi, a_exact=law.a_exact, dropped_top=max(tops)), drop


# --------------------------------------------------------------------------- small compositions


def _count_vectors(c: int, m: int) -> np.ndarray:
    """All (n_1, ..., n_m) >= 0 with sum c, as the rows of an int64 array (stars and bars:
    the m - 1 bars among c + m - 1 places)."""
    if m == 1:
        return np.array([[c]], dtype=np.int64)
    bars = np.array(list(combinations(range(c + m - 1), m - 1)), dtype=np.int64).reshape(-1, m - 1)
    edges = np.concatenate([np.full((bars.shape[0], 1), -1), bars, np.full((bars.shape[0], 1), c + m - 1)], axis=1)
    return np.diff(edges, axis=1) - 1


_LD = np.longdouble
_U_LD = float(np.finfo(_LD).epsneg) if np.finfo(_LD).nmant > 52 else 2.0**-53  # unit roundoff of _LD
_LD_TINY = np.finfo(_LD).smallest_subnormal  # bounds a mass that underflowed in long double


def _int_ld(n: int):
    """A (huge) Python integer in long double, truncated to 64 bits: relative error <= 2^-63."""
    s = max(0, n.bit_length() - 64)
    return np.ldexp(_LD(n >> s), s)


def _mp_ld(x):
    """An mpmath number as the nearest long double (two doubles: relative error <= 2^-64);
    beyond the doubles' normal range (a log mass -2e308 of Geometric(1e308, 2); a position
    1e-440 of a subsampling at q = 1e-284, which a double rounds to 0) by its exponent, +-inf
    beyond the long doubles'."""
    hi = float(x)
    if math.isfinite(hi) and (abs(hi) >= sys.float_info.min or not x):
        return _LD(hi) + _LD(float(x - hi))
    m, e = mpmath.frexp(x)  # x = m 2^e, 1/2 <= |m| < 1
    mh = float(m)
    with np.errstate(over="ignore"):
        return np.ldexp(_LD(mh) + _LD(float(m - mh)), e)


class LawSolver:
    """What the exact producers of a composed finite law share (:class:`SmallLaw`, the
    multinomial rows, the lattice law): the bracket on eps_g from two one-sided roots
    (``_root``), and float estimates from the laws' cumulant generating function --
    ``_cgf_laws``, (positions, log masses, count) per law -- which only aim windows and
    first guesses (every answer is then certified on the exact H)."""

    _cgf_laws: list = []

    def epsilon_bounds(self, t_low: float, t_high: float, top: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around the least x >= 0 with H(x) <= t: the upper end
        with H's upper bound below t_low, the lower end with H's lower bound above t_high
        just below it (so the root of any t in [t_low, t_high] lies between)."""
        if t_low >= 1.0:
            return 0.0, 0.0
        hi = self._root(t_low, True, top)
        lo = self._root(t_high, False, top)
        return min(lo, hi), hi

    def _cgf(self, theta: float) -> tuple[float, float, float]:
        """(K, K', K'') of the composed loss at the tilt theta (floats: estimates only)."""
        K = K1 = K2 = 0.0
        for pos, lm, cc in self._cgf_laws:
            # moments of pos / S, S the largest |pos| (positions near 1e308: their squares and
            # sums overflow in NumPy, with a warning; the scale goes back in Python floats,
            # which overflow to inf quietly); a tilt that overflows the exponents: the top atom
            S = float(np.max(np.abs(pos))) or 1.0
            with np.errstate(over="ignore", invalid="ignore"):
                w = lm + theta * pos
            mx = float(np.max(w))
            if not math.isfinite(mx):
                K, K1 = K + cc * mx, K1 + cc * float(np.max(pos))
                continue
            e = np.exp(w - mx)
            z = float(np.sum(e))
            r = pos / S
            a1 = float(np.sum(e * r)) / z
            a2 = float(np.sum(e * r * r)) / z
            K += cc * (mx + math.log(z))
            K1 += cc * (a1 * S)
            K2 += cc * (max(a2 - a1 * a1, 0.0) * S * S)
        return K, K1, K2

    def _tilt(self, x: float, rel: float = 1e-12) -> float:
        """theta >= 0 with K'(theta) = x to ``rel`` (bisection; 0 below the mean)."""
        if x <= self._cgf(0.0)[1]:
            return 0.0
        lo, hi = 0.0, 1.0
        while self._cgf(hi)[1] < x and hi < 1e6:
            lo, hi = hi, hi * 4.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if self._cgf(mid)[1] < x:
                lo = mid
            else:
                hi = mid
            if hi - lo <= rel * hi:
                break
        return 0.5 * (lo + hi)

    def _saddle_x(self, t: float) -> float:
        """A first guess of the root of H(x) = t: the saddle-point estimate H(x) ~
        e^{K - theta x} / (sqrt(2 pi K'') theta (theta + 1)) at K'(theta) = x, solved in theta
        by bisection (an estimate: the root is then found on the exact H)."""
        lt = math.log(t)

        def g(theta):
            K, K1, K2 = self._cgf(theta)
            return K - theta * K1 - math.log(math.sqrt(2.0 * math.pi * max(K2, 1e-300)) * theta * (theta + 1.0)) - lt

        lo, hi = 1e-9, 1.0
        if g(lo) <= 0.0:
            return max(self._cgf(0.0)[1], 0.0)
        while g(hi) > 0.0 and hi < 1e6:
            lo, hi = hi, hi * 4.0
        for _ in range(80):
            mid = math.sqrt(lo * hi)
            if g(mid) > 0.0:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-13 * hi:
                break
        return max(self._cgf(hi)[1], 0.0)


class SmallLaw(LawSolver):
    """The composed law listed tuple by tuple in long double (numpy.longdouble; x87 extended
    precision on x86-64): masses e^{log C + sum n_a log p_a} per factor, positions sum n_a l_a
    with a bound on their error, exact (Fraction) distances for the atoms near x whose
    positions are rational, and certified H bounds and roots (see the module docstring)."""

    def __init__(self, comp: Composition):
        u = _U_LD
        lm = np.zeros(1, dtype=_LD)  # log masses of the tuples so far
        lm_err = np.zeros(1)  # their absolute error bounds
        pos = np.zeros(1, dtype=_LD)
        perr = np.zeros(1)
        mag = np.zeros(1, dtype=_LD)  # sum n |l| (the size of the position sums; long double: an
        # atom near the largest float, counted twice, is beyond float64)
        pmag = np.zeros(1, dtype=_LD)  # sum over factors of (2 nnz + 2) x the factor's sum n |l|
        counts = np.zeros((1, 0), dtype=np.int64)
        exact, mp_pos, rel = [], [], 0.0
        for law, c in comp.factors:
            rel += c * law.rel
            v = _count_vectors(c, law.size)
            coef = [_multinomial(c, row) for row in v.tolist()]
            lc = np.log(np.array([_int_ld(n) for n in coef], dtype=_LD))
            with mpmath.workprec(PREC):  # (mpmath's default 53 bits left each log mass 2^-53 off, uncharged)
                lp = np.array([_mp_ld(mpmath.log(m)) for m in law.mass], dtype=_LD)
            lf = np.array([_mp_ld(p) for p in law.pos], dtype=_LD)
            pf = np.array([_mp_ld(e) for e in law.perr], dtype=_LD)  # (a double drops errors below 1e-308)
            ab = np.abs(lf)
            vl = v.astype(_LD)
            f_lm = lc + vl @ lp
            # (4u, a power of two, scales the counts before the products: a log mass near -1e308
            # counted twice would overflow the sum of |log masses|, not its error)
            f_err = 4.0 * u * (np.abs(lc).astype(float) + 1.0) + (4.0 * u * v) @ np.abs(lp).astype(float)
            f_pos = vl @ lf
            f_perr = v @ pf
            f_mag = vl @ ab
            # the factor's position v . l: each l rounded to long double, nnz products and
            # nnz - 1 sums, each within u of its size (Higham 3.1): (2 nnz + 2) u sum n |l|
            f_pmag = (2.0 * np.count_nonzero(v, axis=1) + 2.0).astype(_LD) * f_mag
            # the cartesian product with the tuples so far
            lm = (lm[:, None] + f_lm[None, :]).ravel()
            lm_err = (lm_err[:, None] + f_err[None, :]).ravel()
            pos = (pos[:, None] + f_pos[None, :]).ravel()
            perr = (perr[:, None] + f_perr[None, :]).ravel()
            mag = (mag[:, None] + f_mag[None, :]).ravel()
            pmag = (pmag[:, None] + f_pmag[None, :]).ravel()
            counts = np.concatenate([np.repeat(counts, v.shape[0], axis=0), np.tile(v, (counts.shape[0], 1))], axis=1)
            exact.extend(law.exact)
            mp_pos.extend(zip(law.pos, law.perr))
        order = np.argsort(pos, kind="stable")
        self.pos, self.counts = pos[order], counts[order]
        self.mass = np.exp(lm[order])
        # a mass below long double's range (~1e-4951, reachable with ~15 copies of a 2^-1100
        # atom) underflows to 0: H's upper bound counts it at the least positive long double
        self.under = (self.mass == 0) & np.isfinite(lm[order])
        # position error: the atoms' own (perr), each factor's dot product (pmag) and the sum
        # across the factors (one rounding each, within u of the running magnitude), relative
        # to the positions' size -- no absolute floor, which at positions ~1e-7 was 2e-12 of them
        nf = len(comp.factors)
        self.perr = perr[order].astype(_LD) + _LD(1.01 * u) * (pmag[order] + _LD(nf + 1) * mag[order])
        self.lm = lm[order]
        self.exact = exact
        self.mp_pos = mp_pos
        # masses: the laws' relative errors times the counts, the log errors, the exp
        # (a tuple below long double's range even at its error's far end, e^-11500 < the least
        # positive long double: counted there by ``under``, its log error, e.g. 2^-64 of 2e308
        # for an atom of mass e^-1e308 taken twice, is no one else's)
        far = (lm + lm_err) < -11500
        self.rel = rel + float(np.max(lm_err[~far], initial=0.0)) * 1.01 + 16.0 * u + 4.0 * self.pos.size * u
        self.slack = comp.slack

    def _exact(self, i: int) -> Fraction | None:
        """The exact position of atom i, when every atom it is made of has one."""
        terms = [(int(n), e) for n, e in zip(self.counts[i].tolist(), self.exact) if n]
        if any(e is None for _, e in terms):
            return None
        return sum((n * e for n, e in terms), Fraction(0))

    def _distances(self, x: float, upper: bool, reach: float = 2.0**20) -> tuple[np.ndarray, np.ndarray]:
        """(indices, distances l - x) of the atoms above x, each distance at its far end
        (upper) or near end (lower) of its error; for the atoms whose long double distance
        is within ``reach`` times its error bound, the distance from the exact rational position
        (rounded to long double) or from the PREC-bit positions (with their errors)."""
        d = self.pos - _LD(x)
        err = self.perr + 4.0 * _U_LD * abs(x)
        close = np.abs(d) <= err * reach
        dd = d + _LD(1.0) * (err if upper else -err)
        if np.any(close):
            fx = Fraction(x)
            for i in np.nonzero(close)[0].tolist():
                e = self._exact(i)
                if e is not None:
                    e -= fx
                    v = _LD(e.numerator) / _LD(e.denominator) if e else _LD(0)
                    dd[i] = v * ((1 + 4 * _U_LD) if upper else (1 - 4 * _U_LD))
                    continue
                with mpmath.workprec(PREC):
                    terms = [(int(n), pe) for n, pe in zip(self.counts[i].tolist(), self.mp_pos) if n]
                    # the distance of the PREC-bit positions, summed as the rationals they are (no
                    # rounding: an atom 1 + 5e-301 at x = 1 is 5e-301 away, where rounding
                    # relative to the terms left it within 1.4e-76), rounded once to PREC bits
                    # (1 ulp of it, charged 16); the positions' own errors summed, a few ulps each
                    v = fraction_mpf(sum((n * mpf_exact(p) for n, (p, _) in terms), Fraction(0)) - Fraction(x))
                    ev = mpmath.fsum(n * e_ for n, (_, e_) in terms) * (1 + mpmath.ldexp(len(terms) + 1, 4 - PREC)) \
                        + mpmath.ldexp(abs(v), 4 - PREC)
                    dd[i] = _mp_ld(v + ev) * (1 + 4 * _U_LD) if upper else _mp_ld(v - ev) * (1 - 4 * _U_LD)
        keep = dd > 0
        return np.nonzero(keep)[0], dd[keep]

    def excess_bounds(self, x: float) -> tuple[float, float]:
        """Certified (lower, upper) floats around H(x).  The long double distances l - x carry
        an error ~2^-64 |x|: an atom 5e-7 above x = 3 is known to 1.3e-12 relative, too wide for
        method="optimal"'s 1e-12 (Geometric(1e-6, sensitivity=2) beside BlackBox(3) at x = 3).
        Where the bracket is wider than 2^-44 relative, the atoms within 2^46 of their error
        bound take exact distances too (at most SMALL_ATOMS of them)."""
        lo, hi = self._excess_bounds(x, 2.0**20)
        if hi - lo > 2.0**-44 * hi:
            lo2, hi2 = self._excess_bounds(x, 2.0**46)
            lo, hi = max(lo, lo2), min(hi, hi2)
        return lo, hi

    def _excess_bounds(self, x: float, reach: float) -> tuple[float, float]:
        out = []
        for upper in (False, True):
            idx, d = self._distances(x, upper, reach)
            h_ld = np.sum(self.mass[idx] * -np.expm1(-d))
            if upper:
                h_ld = h_ld + _LD(np.count_nonzero(self.under[idx])) * _LD_TINY
            h = float(h_ld)
            # expm1 within 8 units, the products and the sum: 4 + n units of u
            f = self.rel + (16.0 + idx.size) * _U_LD
            if upper:
                # a positive long double sum below the least float (long double reaches ~1e-4951)
                # still bounds H from above by that float, never by 0
                out.append(up(h * (1.0 + f) + self.slack, 2) if (h_ld > 0 or self.slack) else 0.0)
            else:
                out.append(max(0.0, down(h * (1.0 - f), 2)))
        return out[0], out[1]

    def _root(self, t: float, upper: bool, top: float) -> float:
        if t < 0.0:
            return math.inf
        if self.excess_bounds(0.0)[1 if upper else 0] <= t:
            return 0.0
        if upper and t <= self.slack:  # (H = 0 exactly from the top atom on)
            return top
        x = self._segment_root(t, upper)
        # check (and move) the float: an upper end needs H_hi(x) <= t, a lower end H_lo(x) > t
        step = max(abs(x) * 2.0**-60, 5e-324)
        for _ in range(64):
            if x == math.inf:  # the root lies beyond the float range (losses summed past it)
                if upper:
                    return math.inf
                x = sys.float_info.max
            hl, hh = self.excess_bounds(x)
            if upper and hh <= t:
                return min(x, top)
            if not upper and (hl > t or x == 0.0):
                return x
            step *= 2.0
            x = up(x + step, 1) if upper else max(0.0, down(x - step, 1))
        return top if upper else 0.0  # pragma: no cover - the closed-form root is far closer

    def _segment_root(self, t: float, upper: bool) -> float:
        """The root of the listed sum on its segment, in closed form, as a float on the
        requested side (then checked by the caller): H(x) = A_j - e^{x - l_j} C_j between
        the atom below and atom j, A_j, C_j the sums of m_i and m_i e^{-(l_i - l_j)} over
        the atoms i >= j; the segment from H at every atom (approximate sums: only a choice)."""
        pos, lm = self.pos, self.lm
        n = pos.size
        A = np.cumsum(self.mass[::-1])[::-1]  # A_j = sum_{i >= j} m_i
        L = np.logaddexp.accumulate((lm - pos)[::-1])[::-1]  # log sum_{i >= j} m_i e^{-l_i}
        # H at atom k: A_{k+1} - e^{l_k} sum_{i > k} m_i e^{-l_i}
        D = np.empty(n, dtype=_LD)
        D[:-1] = A[1:] - np.exp(pos[:-1] + L[1:])
        D[-1] = 0
        if upper:
            D = D + _LD(self.slack)
        above = np.nonzero(D > _LD(t))[0]
        j = int(above[-1]) + 1 if above.size else 0  # the root lies in [l_{j-1}, l_j]
        j = min(j, n - 1)
        a = A[j] + (_LD(self.slack) if upper else _LD(0))
        c = np.sum(self.mass[j:] * np.exp(-(pos[j:] - pos[j])))
        if a <= _LD(t) or c <= 0:
            x = pos[j]
        else:
            x = pos[j] - np.log(c / (a - _LD(t)))
        lj = self._exact(j)
        if lj is not None:
            xe = lj - Fraction(float(pos[j] - x)) - Fraction(float((pos[j] - x) - _LD(float(pos[j] - x))))
            return max(0.0, exact_dir(xe, up=upper))
        return max(0.0, float(x))


def _multinomial(c: int, n) -> int:
    out, rest = 1, c
    for k in n:
        out *= math.comb(rest, k)
        rest -= k
    return out
