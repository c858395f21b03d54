r"""Privacy amplification by subsampling: :class:`Subsampled` runs any mechanism of the
package on a random subsample of the dataset.

Poisson sampling, add/remove neighbours
---------------------------------------
Each record enters the subsample independently with probability s = ``q``.  With (P, Q)
the base mechanism's forward pair (its output law on D, holding the record, and on D' =
D minus the record), the subsampled mechanism has the dominating pairs (Zhu, Dong and
Wang, *Optimal Accounting of Differential Privacy via Characteristic Function*, AISTATS
2022, Thm 11; Balle, Barthe and Gaboardi, *Privacy Amplification by Subsampling*,
NeurIPS 2018, Thm 8 for the profile)

* remove, ``"forward"``:  (P', Q) with P' = (1 - s) Q + s P;
* add, ``"reverse"``:     (Q, P').

The mechanism is not symmetric: a composition takes the larger of the two *global*
directions (all steps remove, or all add), never the worse direction of one step.

**Loss laws.**  An outcome with base loss l = log(dP/dQ) has the remove loss
g(l) = log(1 - s + s e^l), bounded below by log(1 - s), with P'-mass (1 - s) q_b + s p_b =
q_b e^{g(l)}; and the add loss -g(l), bounded above by -log(1 - s), with P''-mass q_b.  g is
increasing, g(0) = 0, 0 < g' <= 1, and g^{-1}(y) = log(1 + (e^y - 1)/s) for y > log(1 - s).
The base's infinite losses map as: P-mass pi at +inf -> remove: s pi at +inf; add: Q''-mass
s pi at -inf.  Q-mass nu at -inf (outcomes P never produces) -> remove: P'-mass (1 - s) nu at
log(1 - s); add: P''-mass nu at -log(1 - s).

**Profiles** in closed form from the base's hockey-stick divergences H (x >= 0):

* remove: H_{e^x}((1 - s) Q + s P || Q) = s H_{e^{x'}}(P || Q),  e^{x'} = 1 + (e^x - 1)/s
  (Balle–Barthe–Gaboardi Thm 8, with equality for the pair);
* add: H_{e^x}(Q || (1 - s) Q + s P) = c H_{g}(Q || P),  c = 1 - e^x (1 - s),
  g = s e^x / c >= 1 (and 0 when c <= 0: the add loss never exceeds -log(1 - s)).

Both follow from (a Q + b P - e^x Q)_+ = b (P - (e^x - a)/b Q)_+ pointwise.  The base's
profile is evaluated in mpmath at the transformed threshold (an mpmath number, compared with
the base's loss atoms exactly); the threshold's own rounding is charged through H's
1-Lipschitz bound in its log-threshold (dH/dx = -e^x Q[L > x] and e^x Q[L > x] <= P[L > x]
<= 1), and an exact 0 is reported only where H vanishes at the threshold lowered by that
error (H is nonincreasing).

**Numerics of the laws.**  A finite base: its mpmath atoms mapped through g, each position's
error carried (g' <= 1) and each mass charged for it; the subsampled law is then finite too,
and ``method="optimal"`` composes it exactly (:func:`optcomp._exact.finite.finite_law`; a
:class:`~optcomp.mechanisms.Pair` base's mixture in exact rationals).  A base with a continuous part: the
cells of the lattice pulled back through g^{-1} and the base's certified interval masses taken
on the preimages rounded outward (upper ends) and inward (lower ends), its P- and Q-tails
(the latter by duality, Q[L < a] = P_reverse[L > -a]) charged beyond its support.  The
connect-the-dots leaf of the engine splits each cell's mass from its P- and Q-brackets, whose
numerators cancel to ~m h/2: a bracket a relative rho wide costs ~rho/h of mass per cell and
step, which over thousands of steps at h ~ 1e-5 needs rho ~ 1e-15.  For a Gaussian base the
preimage masses therefore come from a Hermite series in long double (:meth:`Subsampled.
_gaussian_cells`), not from differences of log Phi.  The engine's coarse picture of the law
(:meth:`Subsampled.guide`) is the base's mapped through g: the subsampled loss crowds its mass
within ~s of 0 in a range set by the far tail.

**Far bases.**  A base whose losses reach beyond :data:`~optcomp._laws.REACH` (a Gaussian of
mu beyond ~1.5e6, to beyond the floats' square root; a Laplace of eps beyond 2^40) has its mass
in two narrow bulks far apart, which no lattice places: its subsampled law is given as
finitely many atoms with position brackets (:func:`_far_atoms`: each bulk cut into
``FAR_PIECES`` pieces, every piece an atom at [g(l0), g(l1)]) and composes as a finite law --
exact to the float resolution of its positions away from them, and to the pieces' width
(relative ~80/(FAR_PIECES mu)) where eps_g falls inside a bulk.

s = 1 is the base mechanism itself (every method delegates to it).

Sampling without replacement, replace-one neighbours
----------------------------------------------------
A batch of m of the n records, drawn uniformly (q = m/n); neighbours differ in one record's
value.  For a mechanism known by (eps, delta)-DP guarantees under replace-one -- a
:class:`~optcomp.mechanisms.BlackBox` (or any mechanism whose ``black_box()`` is its pair) or
a :class:`~optcomp.mechanisms.Profile` -- each guarantee becomes (log(1 + q (e^eps - 1)),
q delta) (Balle, Barthe and Gaboardi 2018, Thm 9), and the subsampled mechanism is the black
box (profile) of the amplified guarantees, rounded up: a dominating pair under composition,
as every (eps, delta)-DP mechanism is dominated by its randomized response (Kairouz, Oh and
Viswanath 2015; Murtagh and Vadhan 2016 Def. 3.1) and a family of guarantees by the pair of
its trade-off function (Dong, Roth and Su 2022).

Refused (``ValueError``)
------------------------
Poisson sampling under replace-one, sampling without replacement under add/remove, and
sampling without replacement under replace-one for mechanisms known by more than (eps,
delta) (Gaussian, Laplace, finite pairs): optcomp implements no dominating pair established
in the literature for them.  (Lebeda, Regehr, Kamath and Steinke, *Avoiding Pitfalls for
Privacy Accounting of Subsampled Mechanisms under Composition*, 2024, show why the pair of
one step's worst-case datasets need not dominate a composition, and that Poisson sampling
and sampling without replacement can differ by an order of magnitude in eps.)

Length (~1000 lines): the generic cells (preimages under the loss map, any base) and the
Gaussian's series cells with their proved error (the order-4 series unrolled, with a slice
path for contiguous runs beside the gathered one) are one law and stay beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import mpmath
import numpy as np

from .._inputs import ParameterTypeError, _describe
from .._laws import FORWARD, MAX_ATOMS, REACH, REVERSE, TAIL, Mechanism, Points
from .._pairs import mpf_err
from .._rounding import LIBM_ULPS, UNIT, exact_dir
from .._types import Bounds
from ._base import AtomMechanism, CellMechanism, _mp, _Registered, _real

__all__ = ["Subsampled", "SCHEMES", "RELATIONS"]

SCHEMES = ("poisson", "without_replacement")
CELL_CHUNK = 2**13  # cells of :meth:`Subsampled._gaussian_cells` evaluated at once (elementwise; its temporaries stay in cache)
RELATIONS = ("add_remove", "replace_one")


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


@dataclass(frozen=True)
class Subsampled(_Registered):
    """``mechanism`` run on a random subsample (module docstring).

    ``scheme="poisson"``, ``relation="add_remove"`` (the default; DP-SGD's accounting):
    each record enters independently with probability ``q`` (0 < q <= 1); the dominating
    pairs of Zhu–Dong–Wang (AISTATS 2022, Thm 11): remove (forward) ((1 - q) Q + q P, Q),
    add (reverse) (Q, (1 - q) Q + q P), (P, Q) the base's forward pair; for every mechanism
    of the package (black boxes, finite pairs, profiles, Laplace, Gaussian, ...); ``q = 1``
    is the base mechanism.

    ``scheme="without_replacement"``, ``relation="replace_one"``: a batch of a fraction
    ``q = m/n`` of the records; for black boxes and profiles (Balle–Barthe–Gaboardi 2018,
    Thm 9).  The base's guarantee must hold under replace-one (for a clipped sum: the
    sensitivity of a replacement, twice the clipping norm).

    Other combinations: ``ValueError`` (no dominating pair established in the literature)."""

    family = "subsampled"

    mechanism: Mechanism
    q: float
    scheme: str = "poisson"
    relation: str = "add_remove"

    def __post_init__(self):
        if not isinstance(self.mechanism, Mechanism):
            raise ParameterTypeError(f"mechanism must be a mechanism of optcomp.mechanisms, "
                                     f"got {_describe(self.mechanism)}")
        object.__setattr__(self, "q", _real("q", self.q, hi=1.0, hi_open=False))
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {_describe(self.scheme)}")
        if self.relation not in RELATIONS:
            raise ValueError(f"relation must be one of {', '.join(RELATIONS)}, got {_describe(self.relation)}")
        object.__setattr__(self, "_dom", None)
        if (self.scheme, self.relation) == ("poisson", "add_remove"):
            return
        if (self.scheme, self.relation) == ("without_replacement", "replace_one"):
            dom = _amplified_black_box(self.mechanism, self.q)
            if dom is not None:
                object.__setattr__(self, "_dom", dom)
                return
            raise ValueError(f"scheme='without_replacement', relation='replace_one': a dominating pair is "
                             f"established only for a black box or a privacy profile (Balle, Barthe and Gaboardi "
                             f"2018, Thm 9), not for {type(self.mechanism).__name__}")
        raise ValueError(f"scheme={self.scheme!r} with relation={self.relation!r}: optcomp implements no dominating "
                         "pair established in the literature for it (Poisson sampling is supported under "
                         "add_remove, sampling without replacement under replace_one for black boxes and profiles)")

    # -- what kind of law: the base's ---------------------------------------------------------
    @property
    def kind(self) -> str:  # type: ignore[override]
        """The base's kind; ``"atoms"`` when the base has a continuous part whose losses lie
        beyond any lattice (:func:`_far`: its law is then given as interval atoms)."""
        return "atoms" if _far(self) else self._inner.kind

    @property
    def _whole(self) -> bool:
        return self.q == 1.0 or self._dom is not None

    @property
    def _inner(self) -> Mechanism:
        """The mechanism every method delegates to when the subsampled law is another
        mechanism's: the base itself (q = 1), or the amplified black box / profile."""
        return self._dom if self._dom is not None else self.mechanism

    def directions(self):
        return self._inner.directions() if self._whole else (FORWARD, REVERSE)

    def black_box(self):
        return self._inner.black_box() if self._whole else None

    def gaussian(self):
        return self._inner.gaussian() if self._whole else None

    def log_mgf_bound(self, theta: float, direction: str = FORWARD) -> float | None:
        """A certified upper bound of log E[e^{theta L}] (theta >= 0) of one step's loss in
        ``direction`` under its first distribution -- forward E_Q[(1 - q + q r)^{theta + 1}],
        reverse E_Q[(1 - q + q r)^{-theta}] -- from the exact law (no lattice, no truncation:
        :func:`optcomp.mechanisms._subsampled_mgf.log_mgf_bound`, at mu = sensitivity/sigma
        rounded up, M being nondecreasing in mu); math.inf where it certifies none.  None
        unless a Poisson add/remove subsample (q < 1) of a Gaussian."""
        if self._whole or (self.scheme, self.relation) != ("poisson", "add_remove"):
            return None
        g = self.mechanism.gaussian()
        if g is None or direction not in (FORWARD, REVERSE):
            return None
        theta = float(theta)
        if not (0.0 <= theta < math.inf):
            return math.inf
        sigma, sens = g
        mu = exact_dir(Fraction(sens) / Fraction(sigma), True)
        from ._subsampled_mgf import log_mgf_bound

        if direction == FORWARD:
            # theta + 1 rounded up: log M(a) is convex in a with log M(0) = log M(1) = 0, so
            # nondecreasing for a >= 1 (a bound at a larger a is a bound)
            a = exact_dir(Fraction(theta) + 1, True)
        else:
            a = -theta
        return log_mgf_bound(mu, self.q, a)

    # -- the contract ----------------------------------------------------------------------------
    def law(self, h, direction: str = FORWARD, *, tail=TAIL, max_atoms=MAX_ATOMS):
        if self._whole:
            return self._inner.law(h, direction, tail=tail, max_atoms=max_atoms)
        impl = AtomMechanism if self.kind == "atoms" else CellMechanism
        return impl.law(self, h, direction, tail=tail, max_atoms=max_atoms)

    _law = AtomMechanism._law  # the finite law's assembly (used by AtomMechanism.law)
    _law_from = AtomMechanism._law_from

    def loss_range(self, direction: str = FORWARD, *, tail=TAIL):
        if self._whole:
            return self._inner.loss_range(direction, tail=tail)
        impl = AtomMechanism if self.kind == "atoms" else CellMechanism
        return impl.loss_range(self, direction, tail=tail)

    def inf_mass(self, direction: str = FORWARD):
        if self._whole:
            return self._inner.inf_mass(direction)
        return super().inf_mass(direction)

    def profile_bounds(self, eps) -> Bounds:
        if self._whole:
            return self._inner.profile_bounds(eps)
        return super().profile_bounds(eps)

    def profile_side(self, eps, delta) -> int:
        if self._whole:
            return self._inner.profile_side(eps, delta)
        return super().profile_side(eps, delta)

    def _pair(self, h, side, direction, tail, max_atoms):
        if self._whole:
            return self._inner._pair(h, side, direction, tail, max_atoms)
        if self.kind != "atoms":
            raise ValueError("discrete_pair: a subsampled mechanism with a continuous part gives its law "
                             "(law(h, direction)), not a discrete pair")
        return AtomMechanism._pair(self, h, side, direction, tail, max_atoms)

    def guide(self, direction: str = FORWARD, *, tail=TAIL, cells: int = 512):
        """The base's coarse picture mapped through g (an estimate for the engine's tilt and
        window, never a bound): the subsampled loss crowds its mass near 0 within a range
        set by the far tail, which cells uniform over that range would not resolve."""
        if self._whole or self.kind == "atoms":
            return super().guide(direction, tail=tail, cells=cells)
        loss, p = self.mechanism.guide(FORWARD, tail=tail, cells=cells)
        s = self.q
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            y = self._g_guide(loss)
            # the Q-mass of each picture atom p e^{-l} (approximately), in logs: e^{-l} underflows
            # for every atom of a law whose P-bulk lies beyond 745
            lq = np.log(p) - loss
            top = np.max(lq)
            q = np.exp(lq - top)
            if top + math.log(np.sum(q)) < math.log(0.5):
                # P's picture misses most of Q's mass (sigma 1e-3: Q's bulk is 10^6 below P's):
                # Q's own picture, the base's reverse one (its P is Q, its loss -l)
                loss_r, p_r = self.mechanism.guide(REVERSE, tail=tail, cells=cells)
                q = p_r / np.sum(p_r)
                p = p / np.sum(p)
                y_q = self._g_guide(-loss_r)
                if direction == FORWARD:
                    return np.concatenate([y, y_q]), np.concatenate([s * p, (1.0 - s) * q])
                return -y_q, q
            # both pictures normalised to one mass: then E_Q'[e^{Y}] - 1 = s (sum p - sum q)
            # vanishes as it does exactly, and the mean of Y (~s^2 chi^2 / 2 a step, which k
            # steps multiply) is not swamped by the picture's first-order error s (sum p - sum q)
            p = p / np.sum(p)
            q = q / np.sum(q)
            if direction == FORWARD:
                return y, np.minimum((1.0 - s) * q + s * p, 1.0)
            return -y, q

    def _g_guide(self, loss):
        """g(l) = log(1 - s + s e^l) in floats (estimates): log1p(s expm1(l)) near 0, logaddexp
        beyond |l| > 30 (e^l overflows past 709: base losses ~5e5 at sigma 1e-3)."""
        s = self.q
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            far = np.abs(loss) > 30.0
            return np.where(far, np.logaddexp(math.log1p(-s) if s < 1.0 else -np.inf, math.log(s) + loss),
                            np.log1p(s * np.expm1(np.where(far, 0.0, loss))))

    # -- the profile: closed forms from the base's ---------------------------------------------
    def _delta_mp(self, x, direction):
        """(value, error) of the hockey-stick divergence at x >= 0 of ``direction`` (module
        docstring), from the base's at the transformed threshold (an mpmath number: the
        base compares it with its loss atoms exactly).  The threshold's own rounding (err)
        is charged by monotonicity: H is nonincreasing, so the true value lies between the
        base's at the threshold raised and lowered by err -- a charge ~2 err e^x Q[L > x],
        where the 1-Lipschitz bound (err itself) would swamp a target of 1e-300 at any
        working precision."""
        base = self.mechanism
        s = mpmath.mpf(self.q)

        def between(t, t_err, d):
            """(lo, hi) of the base's H at a threshold within t_err of t (and >= 0: the true
            ones are, e^{x'} = 1 + (e^x - 1)/s >= 1 and g >= 1 for x >= 0)."""
            v_hi, e_hi = base._delta_mp(max(t - t_err, mpmath.mpf(0)), d)
            v_lo, e_lo = base._delta_mp(t + t_err, d)
            return max(v_lo - e_lo, mpmath.mpf(0)), v_hi + e_hi

        if direction == FORWARD:
            if x > 4 * mpmath.mp.prec:
                # x - log s + log1p(-e^{-x} (1 - s)), the last term within 2 e^{-x} < 2^{-5 prec}
                # of 0: e^x itself (x = 1e308) costs mpmath ~10 ms an evaluation
                xt = x - mpmath.log(s)
                xt_err = mpf_err(xt, bits=6) + mpmath.ldexp(1, -5 * mpmath.mp.prec)
            else:
                xt = mpmath.log1p(mpmath.expm1(x) / s)  # >= x >= 0
                xt_err = mpf_err(xt, bits=6)
            lo, hi = between(xt, xt_err, FORWARD)
            if hi == 0:
                return mpmath.mpf(0), mpmath.mpf(0)  # H is nonincreasing: 0 at the true threshold
            lo, hi = s * lo, s * hi
            return (lo + hi) / 2, (hi - lo) / 2 + mpf_err(hi, bits=2)
        # add: c H_g(Q || P), c = 1 - e^x (1 - s) = -expm1(x + log(1 - s)), log g = log s + x - log c
        ls = mpmath.log1p(-s)
        if x + ls > 1:  # c <= 1 - e < 0, far beyond its rounding: H = 0 (and no e^x of a huge x)
            return mpmath.mpf(0), mpmath.mpf(0)
        c = -mpmath.expm1(x + ls)
        c_err = mpf_err(1, x, ls, bits=6)  # the sum's rounding (times e^{x + ls} <= 1), expm1's
        if c + c_err <= 0:
            return mpmath.mpf(0), mpmath.mpf(0)
        if c <= 2 * c_err:  # x at or beyond -log(1 - s) within rounding: H <= c
            return mpmath.mpf(0), max(c, mpmath.mpf(0)) + c_err
        # log g = x - log1p(-u), u = (1 - s) expm1(x)/s (c = s (1 - u)): relative to x, where
        # log s + x - log c cancels to nothing at x ~ 1e-134 (its error 2^-prec would swamp it)
        u = (1 - s) * mpmath.expm1(x) / s
        if u < 1:
            lu = mpmath.log1p(-u)
            lg = max(x - lu, mpmath.mpf(0))  # g >= 1 for x >= 0
            lg_err = mpf_err(x, lu, lg, bits=6) + mpf_err(u, bits=6) / (1 - u)
        else:
            lc = mpmath.log(c)
            lg = max(mpmath.log(s) + x - lc, mpmath.mpf(0))
            lg_err = mpf_err(mpmath.log(s), x, lc, lg, bits=6) + 2 * c_err / c  # |d log c| <= err/(c - err)
        lo, hi = between(lg, lg_err, REVERSE)
        if hi == 0:
            return mpmath.mpf(0), mpmath.mpf(0)
        lo, hi = (c - c_err) * lo, (c + c_err) * hi
        return (lo + hi) / 2, (hi - lo) / 2 + mpf_err(hi, bits=2)

    # -- finite bases: the atoms -------------------------------------------------------------------
    def _g_mp(self, pos, perr):
        """(y, its error bound): g(pos) = log(1 - s + s e^pos) at the working precision, the
        position's own error ``perr`` carried through g.

        Where t = s expm1(l) is small, log1p(t) (relative to y within a few ulps: the sum
        below loses y under the unit of 1, q = 1e-284 gave it an error of 1e-57); else the
        sum of two positive terms, each within a few ulps (1 - s within 1 ulp, exact unless
        q < 2^-75).  g' = s e^l / (1 - s + s e^l) <= 1, increasing: its value at l + perr
        carries the position's error."""
        s = mpmath.mpf(self.q)
        one_s = 1 - s
        t = s * mpmath.expm1(pos)
        if abs(t) <= 0.5:
            y = mpmath.log1p(t)
            yerr = mpf_err(y, bits=6)
        else:
            y = mpmath.log(one_s + s * mpmath.exp(pos))
            yerr = mpf_err(1, y, bits=4)
        r = s * mpmath.exp(pos + perr)
        return y, yerr + perr * min(mpmath.mpf(1), r / (one_s + r)) * (1 + mpf_err(1, bits=8))

    @lru_cache(maxsize=64)
    def _atoms_at(self, prec, direction):
        """(atoms, +inf mass, its error, -inf Q-mass, its error) of ``direction``."""
        if _far(self):
            return _far_atoms(self, prec, direction)
        base = self.mechanism
        with mpmath.workprec(prec):
            s = mpmath.mpf(self.q)
            one_s = 1 - s  # within 1 ulp (exact unless q < 2^-75): charged with the products below
            atoms_b, inf_b, inf_be = base._atoms(FORWARD)
            neg_b, neg_be = base._neg_q(FORWARD)
            out = []
            fwd = direction == FORWARD
            for pos_exact, pos, perr, m, merr in atoms_b:
                y, yerr = self._g_mp(pos, perr)
                ex = mpmath.exp(-pos)  # the Q-mass of the atom is m e^{-l}
                spread = mpmath.expm1(perr)  # |e^{-l'} - e^{-l}| <= e^{-l} expm1(perr)
                if fwd:
                    w = s + one_s * ex
                    mass = m * w
                    err = merr * (w + one_s * ex * spread) + m * one_s * ex * spread + mpf_err(mass, bits=4)
                else:
                    y = -y
                    mass = m * ex
                    err = merr * ex * (1 + spread) + mass * spread + mpf_err(mass, bits=4)
                exact = Fraction(0) if pos_exact == 0 else None
                out.append((exact, +y if exact is None else mpmath.mpf(0), yerr if exact is None else mpmath.mpf(0),
                            mass, err))
            if neg_b > 0 or neg_be > 0:
                y = mpmath.log1p(-s)
                yerr = mpf_err(y, bits=4)
                if fwd:
                    mass = one_s * neg_b
                    out.append((None, y, yerr, mass, one_s * neg_be + mpf_err(mass, bits=4)))
                else:
                    out.append((None, -y, yerr, neg_b, neg_be))
            s_inf = s * inf_b
            s_inf_err = s * inf_be + mpf_err(s_inf, bits=2)
            if fwd:
                return out, s_inf, s_inf_err, mpmath.mpf(0), mpmath.mpf(0)
            return out, mpmath.mpf(0), mpmath.mpf(0), s_inf, s_inf_err

    def _atoms(self, direction):
        atoms, inf_m, inf_e, _, _ = self._atoms_at(mpmath.mp.prec, direction)
        return atoms, inf_m, inf_e

    def _neg_q(self, direction):
        _, _, _, neg, neg_e = self._atoms_at(mpmath.mp.prec, direction)
        return neg, neg_e

    # -- bases with a continuous part: cells mapped back through g^{-1} ---------------------------
    @lru_cache(maxsize=1024)  # (pure in (self, tail): every law and loss range of a pass asks)
    def _base_box(self, tail):
        """Floats (A, B): the base loss lies in [A, B] except for at most ``tail`` of P-mass
        and of Q-mass on each side (Q[L < a] = P_rev[L > -a] by duality)."""
        base = self.mechanism
        lo_f, hi_f = base._support(FORWARD, tail)
        lo_r, hi_r = base._support(REVERSE, tail)
        A = exact_dir(min(Fraction(lo_f), -Fraction(hi_r)), False)
        B = exact_dir(max(Fraction(hi_f), -Fraction(lo_r)), True)
        return A, B

    def _g(self, v: float, up: bool) -> float:
        """g(v) = log(1 - s + s e^v) rounded to the requested side (float v)."""
        with mpmath.workprec(128):
            s = mpmath.mpf(self.q)
            y = mpmath.log1p(s * mpmath.expm1(mpmath.mpf(v)))
            e = mpf_err(1, y, bits=6)
            val = y + e if up else y - e
        from .._rounding import mpf_dir

        return mpf_dir(val, up)

    @lru_cache(maxsize=1024)
    def _support(self, direction, tail):
        A, B = self._base_box(tail)
        if direction == FORWARD:
            lo, hi = self._g(A, False), self._g(B, True)
        else:
            lo, hi = -self._g(B, True), -self._g(A, False)
        return Fraction(lo), Fraction(hi)

    def _ginv(self, y):
        """Float edges v(y) = g^{-1}(y) = log1p(expm1(y)/s) of float losses y, with bounds of
        their errors; v = -inf where y <= log(1 - s) could hold.

        expm1 within 2 LIBM_ULPS u relative, the division within u: r = t/s within
        rho = (2 LIBM_ULPS + 2) u |r| of R = expm1(y)/s; log1p within 2 LIBM_ULPS u |v| and
        |log1p(r) - log1p(R)| <= rho / (1 + r - rho) (the slope 1/(1 + .) on the segment).
        Below the normal range expm1 and the division err by up to LIBM_ULPS + 1 units of
        2^-1074 absolute, the former amplified by 1/s: that floor, not a fixed 1e-300 (which
        emptied every inner preimage of a base whose losses all lie within 1e-300 of 0)."""
        s = self.q
        y = np.asarray(y, float)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            r = np.expm1(y) / s
            rho = (2 * LIBM_ULPS + 2) * UNIT * np.abs(r) + ((LIBM_ULPS + 2) * 2.0**-1074 / s * (1.0 + 4.0 * UNIT) + 5e-324)
            room = 1.0 + r - rho
            ok = room > 0.0
            v = np.where(ok, np.log1p(np.where(ok, r, 0.0)), -np.inf)
            err = np.where(ok, 2 * LIBM_ULPS * UNIT * np.abs(v) + rho / np.where(ok, room, 1.0), np.inf)
            err = err * (1.0 + 8.0 * UNIT) + 5e-324
        return v, err

    def _interval_masses(self, l0, l1, direction):
        """Certified P- and Q-masses of the subsampled loss on [l0_i, l1_i]: the base's masses
        on the preimage intervals, outer (rounded outward) for the upper ends, inner for the
        lower ends; below the base's box [A, B] its tails (P and Q, by duality) are charged to
        the upper ends.  Remove: (P', Q') = ((1 - s) Q_b + s P_b, Q_b) on g^{-1}[l0, l1];
        add: (P'', Q'') = (Q_b, (1 - s) Q_b + s P_b) on g^{-1}[-l1, -l0]."""
        l0, l1 = np.asarray(l0, float), np.asarray(l1, float)
        y0, y1 = (l0, l1) if direction == FORWARD else (-l1, -l0)
        if self.mechanism.gaussian() is not None:  # narrow preimages: the series of _gaussian_cells
            ok, (q_lo, q_hi, mix_lo, mix_hi) = self._gaussian_cells(y0, y1)
            rest = ~ok
            if rest.any():
                g = self._generic_masses(y0[rest], y1[rest])
                for arr, part in zip((q_lo, q_hi, mix_lo, mix_hi), g):
                    arr[rest] = part
        else:
            q_lo, q_hi, mix_lo, mix_hi = self._generic_masses(y0, y1)
        if direction == FORWARD:
            return mix_lo, mix_hi, q_lo, q_hi
        return q_lo, q_hi, mix_lo, mix_hi

    def _generic_masses(self, y0, y1):
        """(Q_lo, Q_hi, mix_lo, mix_hi): the base's Q- and mixed masses on g^{-1}[y0, y1] from
        its own interval masses, outer / inner edges and tails (see _interval_masses)."""
        base = self.mechanism
        s = self.q
        A, B = _box(self, TAIL)
        y0, y1 = np.asarray(y0, float), np.asarray(y1, float)
        n, shape = y0.size, y0.shape
        v, e = self._ginv(np.concatenate([y0.ravel(), y1.ravel()]))  # (elementwise: both edges in one call)
        v0, v1, e0, e1 = (a.reshape(shape) for a in (v[:n], v[n:], e[:n], e[n:]))
        with np.errstate(invalid="ignore"):
            o0 = np.nextafter(v0 - e0 * (1.0 + 4.0 * UNIT), -np.inf)  # outer lower edge
            o1 = np.nextafter(v1 + e1 * (1.0 + 4.0 * UNIT), np.inf)
            i0 = np.nextafter(v0 + e0 * (1.0 + 4.0 * UNIT), np.inf)
            i1 = np.nextafter(v1 - e1 * (1.0 + 4.0 * UNIT), -np.inf)
        # outside the box [A, B]: the tails, bounded separately (upper ends; cut from the inner
        # intervals); every interval handed to the base lies in the box
        low = ~(o0 >= A)  # includes -inf / nan
        high = ~(o1 <= B)
        o0 = np.clip(np.where(low, A, o0), A, B)
        o1 = np.clip(np.where(high, B, o1), o0, B)
        i0 = np.clip(np.where(np.isfinite(i0), i0, A), A, B)
        i1 = np.clip(np.where(np.isfinite(i1), i1, A), i0, B)
        if base.gaussian() is not None:  # (its masses are elementwise: outer and inner in one call)
            both = base._interval_masses(np.concatenate([o0.ravel(), i0.ravel()]),
                                         np.concatenate([o1.ravel(), i1.ravel()]), FORWARD)
            p_hi_b, q_hi_b = _pick_hi([np.reshape(a[:n], shape) for a in both])
            p_lo_b, q_lo_b = _pick_lo([np.reshape(a[n:], shape) for a in both])
        else:
            p_hi_b, q_hi_b = _pick_hi(base._interval_masses(o0, o1, FORWARD))
            p_lo_b, q_lo_b = _pick_lo(base._interval_masses(i0, i1, FORWARD))
        # tails below A and above B (evaluated only where a cell reaches beyond)
        pa_below, qa_below = _box_tail(self, A, False) if low.any() else (0.0, 0.0)
        pa_above, qa_above = _box_tail(self, B, True) if high.any() else (0.0, 0.0)
        p_hi_b = np.minimum(p_hi_b + np.where(low, pa_below, 0.0) + np.where(high, pa_above, 0.0), 1.0)
        q_hi_b = np.minimum(q_hi_b + np.where(low, qa_below, 0.0) + np.where(high, qa_above, 0.0), 1.0)
        added = low | high
        p_hi_b = np.where(added, np.nextafter(p_hi_b, 2.0), p_hi_b)  # the additions
        q_hi_b = np.where(added, np.nextafter(q_hi_b, 2.0), q_hi_b)
        mix_hi, mix_lo = _mix(s, p_hi_b, q_hi_b, True), _mix(s, p_lo_b, q_lo_b, False)
        return q_lo_b, np.minimum(q_hi_b, 1.0), mix_lo, mix_hi

    #: the working precision of :meth:`_gaussian_cells` (its unit u: ``np.finfo(.).epsneg``)
    CELL_FLOAT = np.float64

    def _gaussian_cells(self, y0, y1, dtype=None):
        r"""Masses of a Gaussian base on the preimages of narrow g-intervals, to some ten
        units of rounding relative (the generic path's log-Phi differences lose ~1e-12/width).

        Working precision: ``dtype`` (default :attr:`CELL_FLOAT`, float64: ~30x faster than
        x87 long double, whose transcendental functions are not vectorised; the engine's
        leaves pay a mass bracket rho wide ~rho of mass per step, so float64's ~1e-14 costs
        ~k 1e-14 relative over k steps).  For [y0, y1] (floats, w_g = y1 - y0 exact in the
        working precision) with D = s + expm1(y0) > 0
        the preimage is [v_a, v_a + w]: e^{v_a} = D/s and w = log1p(e^{y0} expm1(w_g)/D), each
        formed in the working precision (unit u) with no cancellation beyond D's: expm1, exp, log,
        log1p within 2 LIBM_ULPS u (``_rounding``'s assumption 2), so D within
        delta_D = (2 LIBM_ULPS |expm1(y0)| + |D|) u / D relative, w within delta_w =
        delta_D + (6 LIBM_ULPS + 3) u relative (log1p's slope A/((1 + A) log1p A) <= 1), v_a
        within e_v = delta_D + 2 LIBM_ULPS u (|log D| + |log s|) + u |v_a|.

        The base loss is N(mu^2/2, mu^2) under P and N(-mu^2/2, mu^2) under Q (mu = Delta/sigma):
        in z units an interval [c - r, c + r] (c_P = (v_a + w/2 - mu^2/2)/mu, c_Q = c_P + mu,
        r = w/(2 mu)) has mass phi(c) 2r E(c, r), E = sum_m He_2m(c) r^2m/(2m + 1)! (the
        Hermite expansion of phi(c + t)/phi(c) integrated over [-r, r]), kept to m = 2 where
        x = r (|c| + r + 6) <= 1/200 (most cells of a fine step), to m = 5 where x <= 1/10 and
        to m = 12 where x <= 3/2: the Taylor remainder is at most x^n/((n + 1) n!)
        e^{2|c| r + r^2/2} relative, n = 6, 12 or 26 (|He_n(y)| <= (|y| + sqrt n)^n;
        E >= e^{-|c| r - r^2/2}).  Relative errors charged: the remainder; 64 u e^{|c| r + r^2/2} for the
        series (the He recurrence and the sum, terms decreasing at least 4-fold); the
        position of c, (|c| + r) e_c
        (|d log M/dc| <= |c| + r), e_c = (e_v + w delta_w + u (|v_a| + w + mu^2))/mu + ...;
        delta_w for r; phi's exp and c^2, (2 LIBM_ULPS + 2) u + 2 u c^2; mu's rounding (u
        relative) moves the log-density by at most u (1 + (|c| + r)(|v| / mu + mu));
        sqrt(2 pi) (pi to the precision's rounding), the bracket's factors 1 -+ rel and their
        products: 4 u more.  Cells whose masses would leave the normal range (below 2^-960)
        are not served (the generic path serves them).  The
        mixture (1 - s) Q + s P is formed in the working precision (4u) and every bracket end
        rounded outward to float64.  Returns (mask of the cells served, (Q_lo, Q_hi, mix_lo, mix_hi))."""
        ld = dtype if dtype is not None else self.CELL_FLOAT
        u = float(np.finfo(ld).epsneg)
        pi = ld(np.pi) if ld is np.float64 else ld("3.14159265358979323846264338327950288")
        L = LIBM_ULPS
        sigma, sens = self.mechanism.gaussian()
        y0f, y1f = np.asarray(y0, float), np.asarray(y1, float)
        n_all = y0f.size
        # cells with |z| > 40 under both P and Q (a float estimate with margin) hold masses
        # below 1e-348, beneath float's range: their generic brackets cost nothing.  (A cut
        # nearer the bulk would be faster, but a target delta_g of 1e-300 lives out there.)
        # (z_P = (v - mu^2/2)/mu in [-40.5 - mu, 40.5], i.e. the mid-point y between g of
        # those two ends: g is increasing, so two evaluations, not two per cell)
        mu_f = sens / sigma
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y_ends = np.log1p(self.q * np.expm1(np.array([mu_f * mu_f / 2 - (40.5 + mu_f) * mu_f,
                                                          mu_f * mu_f / 2 + 40.5 * mu_f])))
            mid = 0.5 * (y0f + y1f)
            near = (mid > math.log1p(-self.q)) & (mid >= y_ends[0]) & (mid <= y_ends[1])
        idx = np.flatnonzero(near)
        full_ok = np.zeros(n_all, dtype=bool)
        full = [np.zeros(n_all), np.ones(n_all), np.zeros(n_all), np.ones(n_all)]
        if not idx.size:
            return full_ok, full
        s = ld(self.q)
        # (constants of every chunk, hoisted: each is the same rounded operation as inline)
        logs = np.log(s)
        alogs = abs(logs)
        mu = ld(sens) / ld(sigma)
        mu2 = mu * mu
        half_mu2 = mu2 / 2
        two_mu = 2 * mu
        root_2pi = np.sqrt(2 * pi)
        one_s = 1 - s
        u2L, u4, u64, u2 = 2 * L * u, 4 * u, 64 * u, 2 * u
        dw_c = (6 * L + 3) * u
        rel0_c = (2 * L + 8) * u
        zero, one = ld(0), ld(1)
        # a contiguous run of cells (the lattice's: g is increasing) is read and written by slices
        run = idx.size == int(idx[-1]) - int(idx[0]) + 1
        for start in range(0, idx.size, CELL_CHUNK):  # (elementwise: chunks that stay in cache)
            if run:
                sub = slice(int(idx[0]) + start, int(idx[0]) + min(start + CELL_CHUNK, idx.size))
            else:
                sub = idx[start: start + CELL_CHUNK]
            y0 = y0f[sub].astype(ld)
            y1 = y1f[sub].astype(ld)
            wg = y1 - y0
            exact = ((y0 + wg) == y1) & ((y1 - wg) == y0) & (wg > 0)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
                em = np.expm1(y0)  # (inf beyond the range: such a cell is not served, below)
                D = s + em
                dD = np.abs(em)
                dD *= 2 * L
                dD += np.abs(D)
                dD *= u
                dD /= D
                ok = exact & (D > 0) & (dD < 2.0**-20) & np.isfinite(em)
                notok = ~ok
                Dk = D
                Dk[notok] = one  # (D is not used again)
                logD = np.log(Dk)
                va = logD - logs
                abs_va = np.abs(va)
                dd2 = 2 * dD
                dd2 += 1
                dd2 *= dD  # dD (1 + 2 dD)
                ev = np.abs(logD)
                ev += alogs
                ev *= u2L
                ev += dd2
                ev += u * abs_va
                y0[notok] = zero
                wg[notok] = zero
                A = np.exp(y0)
                # (cells of one width -- a lattice's -- share expm1(w_g): the same float, once)
                A *= np.expm1(wg[:1]) if wg[0] == wg.min() == wg.max() else np.expm1(wg)
                A /= Dk
                w = np.log1p(A)
                dw = dd2 + dw_c
                cP = w / 2
                cP += va
                cP -= half_mu2
                cP /= mu
                cQ = cP + mu
                r = w / two_mu
                vmax = va + w
                np.abs(vmax, out=vmax)
                np.maximum(abs_va, vmax, out=vmax)
                acP = np.abs(cP)
                acQ = np.abs(cQ)
                ec = w * dw
                ec += ev  # ev + w dw
                t = abs_va + w
                t += mu2
                t *= u4
                ec += t
                ec /= mu
                t = acP + r
                t *= u4
                ec += t
                cmax = np.maximum(acP, acQ)
                cmax += r
                cmax += 6
                cmax *= r
                ok &= np.isfinite(r) & (cmax <= 1.5) & (np.minimum(acP, acQ) <= 40)
                notok = ~ok
                r[notok] = zero

                def series(c, r, top):
                    """E(c, r) = sum_{m <= top/2} He_2m(c) r^2m/(2m + 1)! (``top`` even)."""
                    r2 = r * r
                    he_prev, he = np.ones_like(c), c  # He_0, He_1
                    total = np.ones_like(c)
                    term_scale = np.ones_like(c)
                    for n in range(1, top):  # He_{n+1} = c He_n - n He_{n-1}
                        he_prev, he = he, c * he - n * he_prev
                        if (n + 1) % 2 == 0:
                            term_scale = term_scale * r2 / ((n + 1) * (n + 2))
                            total = total + he * term_scale
                    return total

                # (the terms shared by P and Q: r^2 and the series' r^2/3!, r^4/5!; the charge
                # rel0 and (e_c + u (vmax/mu + mu)); 2r/sqrt(2 pi))
                r2 = r * r
                half_r2 = r2 / 2
                ts1 = r2 / 6
                ts2 = ts1 * r2
                ts2 /= 20
                rel0 = dw + rel0_c
                vm = vmax / mu
                vm += mu
                vm *= u
                vm += ec  # e_c + u (vmax/mu + mu)
                width = 2 * r
                width /= root_2pi

                def mass(c):
                    c[notok] = zero
                    ac = np.abs(c)
                    acr = ac + r
                    x = acr + 6
                    x *= r  # r (|c| + r + 6)
                    # the order of the series: He up to 4 where x <= 1/200 (most cells of a fine
                    # step), up to 10 where x <= 1/10, up to 24 elsewhere; the remainder starts at
                    # n = top + 2
                    grow = ac * r
                    grow += half_r2
                    np.exp(grow, out=grow)  # 1/E at most
                    # series(c, r, 4), unrolled: 1 + He_2 r^2/3! + He_4 r^4/5!
                    c2 = c * c
                    he2 = c2 - 1.0
                    he3 = c * he2
                    he3 -= 2 * c
                    he4 = c * he3
                    he4 -= 3 * he2
                    total = he2 * ts1
                    total += 1.0
                    he4 *= ts2
                    total += he4
                    x2 = x * x
                    trunc = x2 * x2
                    trunc *= x2
                    trunc /= ld(7 * 720)
                    for top, lim in ((10, 0.005), (24, 0.1)):
                        more = x > lim
                        if more.any():
                            total[more] = series(c[more], r[more], top)
                            n = top + 2
                            trunc[more] = x[more] ** n / ld((n + 1) * math.factorial(n))
                    trunc *= grow
                    trunc *= grow
                    # trunc + 64 u grow + (|c| + r) e_c + dw + u + (2 L + 2) u + 2 u c^2
                    # + u (1 + (|c| + r)(vmax / mu + mu)) + 4 u, regrouped
                    grow *= u64
                    rel = trunc
                    rel += grow
                    acr *= vm
                    rel += acr
                    rel += u2 * c2
                    rel += rel0
                    m = c2
                    m /= -2  # (-c^2/2: the negation is exact)
                    np.exp(m, out=m)
                    m *= width
                    m *= total
                    return m, rel

                mP, rP = mass(cP)
                mQ, rQ = mass(cQ)
                mix = one_s * mQ
                mix += s * mP
                rmix = np.maximum(rP, rQ)
                rmix += u4
                ok &= (rP < 2.0**-30) & (rQ < 2.0**-30) & (mQ >= 2.0**-960) & (mP >= 2.0**-960) & (mix >= 2.0**-960)
            for j, (m, rel) in enumerate(((mQ, rQ), (mix, rmix))):
                lo = 1 - rel
                lo *= m
                hi = rel + 1
                hi *= m
                lo = np.array(lo, dtype=float, copy=ld is not np.float64)
                hi = np.array(hi, dtype=float, copy=ld is not np.float64)
                # rounded outward by one ulp: on a served cell both ends are positive (m >=
                # 2^-960, rel < 1/2) and not NaN, where nextafter(x, -+inf) is x's bits -+ 1
                # (+inf + 1 ulp is a NaN's bits: fmin sends it to 1, as clip does +inf);
                # elsewhere the bits are not read
                lo.view(np.int64)[...] -= 1
                hi.view(np.int64)[...] += 1
                np.fmin(lo, 1.0, out=lo)
                np.fmin(hi, 1.0, out=hi)
                if run:  # (the defaults 0 and 1 stay where a cell is not served)
                    np.copyto(full[2 * j][sub], lo, where=ok)
                    np.copyto(full[2 * j + 1][sub], hi, where=ok)
                else:
                    full[2 * j][sub] = np.where(ok, lo, 0.0)
                    full[2 * j + 1][sub] = np.where(ok, hi, 1.0)
            full_ok[sub] = ok
        return full_ok, full

    def _points(self, direction):
        """The base's point masses, moved to g(l) (remove) or -g(l) (add) with their masses
        mixed (module docstring)."""
        pts = self.mechanism._points(FORWARD)
        if not pts.loss.size:
            return Points.none()
        s = self.q
        y, yerr = [], []
        for l, e in zip(pts.loss, pts.perr):
            with mpmath.workprec(128):
                t = mpmath.mpf(s) * mpmath.expm1(mpmath.mpf(l))
                # log1p(t) within a few ulps of v where |t| <= 1/2; else the sum of two positive
                # terms (1 + t cancels near t = -1: s = 1 - 2^-53, l = -50 lost 2^-128/(1 + t))
                v = mpmath.log1p(t) if abs(t) <= 0.5 else \
                    mpmath.log((1 - mpmath.mpf(s)) + mpmath.mpf(s) * mpmath.exp(mpmath.mpf(l)))
                f = float(v)
                d = abs(mpmath.mpf(f) - v) + mpf_err(1, v, bits=6)
                # the base's position error e moves y by at most e max g' over [l - e, l + e]:
                # g'(l) = s e^l / (1 - s + s e^l) is increasing, <= 1 (q = 1e-284 carries the
                # base's 1e-57 as 1e-341, not as itself)
                r = mpmath.mpf(s) * mpmath.exp(mpmath.mpf(l) + mpmath.mpf(e))
                lip = min(mpmath.mpf(1), r / (1 - mpmath.mpf(s) + r))
                moved = float(lip * mpmath.mpf(e) * (1 + mpmath.mpf(2) ** -100))
            y.append(f)
            yerr.append(_up(moved * (1.0 + 2.0**-50) + float(d) * (1.0 + 2.0**-50) + 5e-324))
        y, yerr = np.array(y), np.array(yerr)
        mix_lo, mix_hi = _mix(s, pts.p_lo, pts.q_lo, False), _mix(s, pts.p_hi, pts.q_hi, True)
        if direction == FORWARD:
            return Points(y, yerr, mix_lo, mix_hi, pts.q_lo, pts.q_hi)
        return Points(-y, yerr, pts.q_lo, pts.q_hi, mix_lo, mix_hi)

    def _tails(self, e0, e1, direction):
        """Upper bounds of the P-mass below e0 and above e1: the base's P- and Q-tails beyond
        the preimages of the edges, rounded outward (remove: y < e0 iff l < g^{-1}(e0); add:
        y < e0 iff l > g^{-1}(-e0))."""
        s = self.q
        if direction == FORWARD:
            a = self._edge(e0, up=True)  # l < g^{-1}(e0) <= a
            b = self._edge(e1, up=False)  # l > g^{-1}(e1) >= b
            below = _mix(s, [self._p_below(a)], [self._q_below(a)], True)[0]
            above = _mix(s, [self._p_above(b)], [self._q_above(b)], True)[0]
            return min(below, 1.0), min(above, 1.0)
        b = self._edge(-e0, up=False)  # y < e0 iff l > g^{-1}(-e0) >= b
        a = self._edge(-e1, up=True)  # y > e1 iff l < g^{-1}(-e1) <= a
        return min(self._q_above(b), 1.0), min(self._q_below(a), 1.0)

    def _edge(self, y: float, up: bool) -> float:
        """g^{-1}(y) rounded outward to the requested side (-inf where y <= log(1 - s) could
        hold: then nothing lies below it, or everything above)."""
        v, err = self._ginv(np.array([y]))
        v, err = float(v[0]), float(err[0])
        if not math.isfinite(v) or not math.isfinite(err):
            return -math.inf if (v == -math.inf or not up) else math.inf
        return _up(v + err * (1.0 + 4.0 * UNIT)) if up else _down(v - err * (1.0 + 4.0 * UNIT))

    # the base's tails: P by its forward law, Q by duality (Q[L < a] = P_rev[L_rev > -a])
    def _p_below(self, a: float) -> float:
        return 0.0 if a == -math.inf else (1.0 if a == math.inf else self.mechanism._tails(a, a, FORWARD)[0])

    def _q_below(self, a: float) -> float:
        return 0.0 if a == -math.inf else (1.0 if a == math.inf else self.mechanism._tails(-a, -a, REVERSE)[1])

    def _p_above(self, b: float) -> float:
        return 1.0 if b == -math.inf else (0.0 if b == math.inf else self.mechanism._tails(b, b, FORWARD)[1])

    def _q_above(self, b: float) -> float:
        return 1.0 if b == -math.inf else (0.0 if b == math.inf else self.mechanism._tails(-b, -b, REVERSE)[0])


# (a leaf build's few generic cells -- the edge of g's range -- read the same box and tails at
# every step: each a function of the mechanism (a frozen dataclass: equal ones hash and
# compare equal by every field) and its argument alone, kept)
@lru_cache(maxsize=256)
def _box(sub: Subsampled, tail: float):
    return sub._base_box(tail)


@lru_cache(maxsize=256)
def _box_tail(sub: Subsampled, x: float, above: bool):
    """(P-mass, Q-mass) of the base below x (above: above x)."""
    return (sub._p_above(x), sub._q_above(x)) if above else (sub._p_below(x), sub._q_below(x))


FAR_PIECES = 8  # pieces of each bulk of a far base (:func:`_far_atoms`)
FAR_TAIL = 2.0**-1074  # the P-mass a far base leaves outside its bulks (at +inf, upper side only)


@lru_cache(maxsize=256)
def _far(sub: Subsampled) -> bool:
    """A Poisson subsample of a symmetric base with a continuous part whose losses reach
    beyond :data:`~optcomp._laws.REACH` (a Gaussian of mu beyond ~1.5e6, up to beyond the
    floats; a Laplace of eps beyond 2^40): no lattice places its law, whose mass sits in two
    narrow bulks far apart (P's near mu^2/2, Q's near -mu^2/2), so it is given as finitely
    many atoms with position brackets (:func:`_far_atoms`) and composes as a finite law."""
    base = sub.mechanism
    if sub._whole or base.kind != "cells" or not base.symmetric:
        return False
    lo, hi = base._support(FORWARD, TAIL)
    return max(abs(Fraction(lo)), abs(Fraction(hi))) > Fraction(REACH)


@lru_cache(maxsize=64)
def _far_atoms(sub: Subsampled, prec: int, direction: str):
    """The subsampled law of a far base (:func:`_far`) as ``_atoms``-style atoms with position
    brackets: (atoms, +inf mass, its error, 0, 0).

    The base's law (P and, the law being symmetric, Q[L in I] = P[L in -I]) in mpmath from
    its ``_continuous`` description truncated at FAR_TAIL: P's bulk [lo, hi] and Q's, its
    mirror [-hi, -lo] (one interval where they meet), each cut into FAR_PIECES pieces of
    equal width.  A piece [l0, l1] of base P-mass p and Q-mass q is an atom of the subsampled
    law at the loss interval [g(l0), g(l1)] (g increasing; remove) or [-g(l1), -g(l0)] (add),
    of P'-mass (1 - s) q + s p (remove) or q (add).  The base's point masses x (P-mass m,
    Q-mass m e^{-x}) and their mirrors -x (Q-mass m, P-mass m e^{-x}) are atoms alike.  Every
    mass outside the bulks -- at most the tails below lo and above hi, for P and by symmetry
    for Q -- is counted at +inf on the upper side and dropped on the lower (a loss raised or a
    P-mass dropped only raises or lowers H)."""
    base = sub.mechanism
    lo, hi, masses, tails, points = base._continuous(FAR_TAIL)
    lo, hi = Fraction(lo), Fraction(hi)
    regions = sorted([(lo, hi), (-hi, -lo)])
    if regions[1][0] <= regions[0][1]:
        regions = [(regions[0][0], max(regions[0][1], regions[1][1]))]
    fwd = direction == FORWARD
    with mpmath.workprec(prec):
        s = mpmath.mpf(sub.q)
        one_s = 1 - s  # within 1 ulp: charged with the mixture below
        out = []

        def atom(l0, l1, p, p_err, q, q_err):
            # (l0, l1: rational edges rounded once to prec bits, within 2^-prec of themselves
            # relative: that error carried through g as the positions')
            y0, e0 = sub._g_mp(l0, mpf_err(l0, bits=1))
            y1, e1 = sub._g_mp(l1, mpf_err(l1, bits=1))
            a, b = y0 - e0, y1 + e1
            pos = (a + b) / 2
            perr = (b - a) / 2 + mpf_err(a, b, bits=2)
            if fwd:
                # (each product's rounding relative to the product: at s = 1e-100 an error relative
                # to p swamped the sampled mass s p, and the atom was dropped as uncertain)
                mass = one_s * q + s * p
                err = one_s * q_err + s * p_err + mpf_err(mass, one_s * q, s * p, bits=4)
            else:
                pos, mass, err = -pos, q, q_err
            out.append((None, pos, perr, mass, err))

        for r0, r1 in regions:
            edges = [r0 + (r1 - r0) * i / FAR_PIECES for i in range(FAR_PIECES + 1)]
            pm = masses(edges)
            qm = masses([-e for e in reversed(edges)])[::-1]
            for e0, e1, (p, pe), (q, qe) in zip(edges[:-1], edges[1:], pm, qm):
                atom(_mp(e0), _mp(e1), p, pe, q, qe)
        listed = {Fraction(x): (m, err) for x, m, err in points}
        for x in sorted(set(listed) | {-x for x in listed}):
            xm = _mp(x)
            if x in listed:
                p, pe = listed[x]
            else:  # the mirror of a listed atom: P-mass m e^{x}
                m, me = listed[-x]
                p = m * mpmath.exp(xm)
                pe = me * mpmath.exp(xm) + p * mpf_err(1, xm, bits=4)  # (x rounded: |x| 2^-prec relative)
            if -x in listed:
                q, qe = listed[-x]
            else:
                m, me = listed[x]
                q = m * mpmath.exp(-xm)
                qe = me * mpmath.exp(-xm) + q * mpf_err(1, xm, bits=4)
            atom(xm, xm, p, pe, q, qe)
        (below, b_err), (above, a_err) = tails(lo, hi)
        t = below + b_err + above + a_err
        return out, t / 2, t / 2 + mpf_err(t, bits=2), mpmath.mpf(0), mpmath.mpf(0)


def _pick_hi(masses):
    p_lo, p_hi, q_lo, q_hi = masses
    return np.asarray(p_hi, float), np.asarray(q_hi, float)


def _pick_lo(masses):
    p_lo, p_hi, q_lo, q_hi = masses
    return np.asarray(p_lo, float), np.asarray(q_lo, float)


def _mix(s: float, p, q, up: bool):
    """(1 - s) q + s p rounded to the requested side (floats; 1 - s, the products and the sum
    each within u relative or, below the normal range, half the least float: a relative 4u
    and two least floats charged -- a positive mixture never rounds up to 0)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    m = (1.0 - s) * q + s * p
    if up:
        return np.where((p > 0.0) | (q > 0.0), np.minimum(np.nextafter(m * (1.0 + 4.0 * UNIT) + 1e-323, 2.0), 1.0),
                        0.0)
    return np.maximum(m * (1.0 - 4.0 * UNIT) - 1e-323, 0.0)


def _amplified_black_box(mech, q: float):
    """Sampling a fraction q = m/n without replacement under replace-one neighbours turns an
    (eps, delta)-DP mechanism into an (log(1 + q (e^eps - 1)), q delta)-DP one (Balle, Barthe
    and Gaboardi, *Privacy Amplification by Subsampling*, NeurIPS 2018, Thm 9), for each of
    its guarantees: a black box (or a privacy profile: every guarantee of the list) maps to
    the black box (profile) of the amplified guarantees, rounded up; None for any other
    mechanism."""
    from fractions import Fraction

    from .._rounding import exact_dir, mpf_dir
    from .finite import BlackBox, Profile

    if isinstance(mech, Profile):
        guarantees = list(mech.guarantees)
    elif mech.black_box() is not None:
        guarantees = [mech.black_box()]
    else:
        return None
    out = []
    for e, d in guarantees:
        with mpmath.workprec(128):
            v = mpmath.log1p(mpmath.mpf(q) * mpmath.expm1(mpmath.mpf(e)))
            eps = mpf_dir(v + mpf_err(1, v, bits=8), True)
        out.append((min(eps, e), exact_dir(Fraction(q) * Fraction(d), True)))
    return BlackBox(*out[0]) if len(out) == 1 else Profile(out)
