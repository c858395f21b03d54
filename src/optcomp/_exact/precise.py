r"""40-digit settlement (layer L3): small products of binomials from their exact rational
atom positions in mpmath, for ill-conditioned roots and loose delta brackets."""

from __future__ import annotations

import math
from functools import lru_cache
from fractions import Fraction

import numpy as np

from .._inputs import Mechanisms
from .._rounding import UNIT, fraction_mpf, mpf_dir, up
from .atoms import _range, _to_float


@lru_cache(maxsize=4)
def _precise_atoms(groups: tuple, shift: Fraction):
    """The product-of-binomials distribution in 40-digit arithmetic: exact rational atom
    positions (sorted) and their P0 masses (mpmath, 40 digits; cached: bisections over
    eps_g evaluate the same distribution again)."""
    import itertools

    import mpmath as mp

    with mp.workdps(40):
        one = mp.mpf(1)
        factors = []
        for eps, n in groups:
            q = one / (1 + mp.exp(mp.mpf(eps)))
            r = (1 - q) / q  # C(n, j+1) p^(j+1) q^(n-j-1) = C(n, j) p^j q^(n-j) (n - j)/(j + 1) p/q
            fe = Fraction(eps)
            masses = [q**n]
            for j in range(n):
                masses.append(masses[-1] * r * (n - j) / (j + 1))
            factors.append([(fe * (2 * j - n), masses[j]) for j in range(n + 1)])
        atoms = {}
        for combo in itertools.product(*factors):
            pos = shift + sum((c[0] for c in combo), Fraction(0))
            atoms[pos] = atoms.get(pos, 0) + mp.fprod(c[1] for c in combo)
    pos = sorted(atoms)
    return pos, [atoms[x] for x in pos]


def _precise_epsilon(m: Mechanisms, groups, shift: Fraction, slack: float, delta_g: float,
                     shrink: float = 0.0) -> float:
    """OptComp from the definition in 40-digit arithmetic, for at most REFINE_ATOMS atoms:
    exact rational positions, binomial masses and the target t = 1 - (1 - delta_g) /
    prod(1 - delta_i) in mpmath, the root of H(x) = t on its segment in closed form, and
    the result moved up by a margin far above the 40-digit rounding (1e-30 relative, plus
    the mass ``slack`` of huge-eps mechanisms charged to the target).  An upper bound."""
    import mpmath as mp

    with mp.workdps(40):
        lnd = mp.fsum(int(c) * mp.log1p(-mp.mpf(float(d))) for d, c in zip(m.delta.tolist(), m.count.tolist()) if d)
        t = -mp.expm1(mp.log1p(-mp.mpf(delta_g)) - lnd) * (1 - mp.mpf(shrink))
        t = t - abs(t) * mp.mpf("1e-32") - mp.mpf(slack) - mp.mpf("1e-320")
        if t <= 0:
            return math.inf if t < 0 else _to_float(shift + sum((Fraction(e) * n for e, n in groups), Fraction(0)), True)
        lmp, D, W = _precise_table(tuple(groups), shift)
        J = next(j for j in range(len(lmp)) if D[j] <= t)
        # on [l_{J-1}, l_J]: H(x) = D_J + W_J (1 - e^{x - l_J}) = t
        y = (t - D[J]) / W[J]
        x = lmp[J] + mp.log1p(-y) if y < 1 else (lmp[J - 1] if J > 0 else mp.mpf(0))
        if J > 0:
            x = max(x, lmp[J - 1])
        if x <= 0:
            return 0.0
        return mpf_dir(x + abs(x) * mp.mpf("1e-30") + mp.mpf("1e-300"), True)


@lru_cache(maxsize=4)
def _precise_table(groups: tuple, shift: Fraction):
    """Positions l_j, D_j = H(l_j) and W_j of :func:`_precise_atoms` in 40 digits, by the
    module's recurrences W_j = p_j + e^{-g_j} W_{j+1}, D_j = D_{j+1} + W_{j+1} (1 - e^{-g_j})
    (positive terms, no cancellation; cached: the inverse law may solve the same
    distribution again for a slightly smaller target)."""
    import mpmath as mp

    with mp.workdps(40):
        pos, mass = _precise_atoms(groups, shift)
        lmp = [fraction_mpf(x) for x in pos]
        D, W = [mp.mpf(0)] * len(pos), [mp.mpf(0)] * len(pos)
        W[-1] = mass[-1]
        for j in range(len(pos) - 2, -1, -1):
            g = fraction_mpf(pos[j + 1] - pos[j])
            D[j] = D[j + 1] + W[j + 1] * -mp.expm1(-g)
            W[j] = mass[j] + W[j + 1] * mp.exp(-g)
    return lmp, D, W


def _exact_distance_excess(groups, shift: Fraction, slack: float, x: float, product) -> float:
    """An upper bound on H(x) for a product of binomials with exact distances: every atom's
    position is an integer over a common power-of-two denominator (so l - x is exact and
    rounded once, up), each term p (1 - e^{-(l - x)}) is formed from the masses' upper
    bounds (expm1 within 2 u, the distance's rounding and the product: 6 u), and the terms are
    summed exactly (``math.fsum``).  No position error at all: the remedy for atoms closer to
    x, or to each other, than the float positions' error (a large eps_i beside tiny ones),
    in O(atoms) with Python integers.  ``product``: :func:`_product` of ``groups`` (unscaled;
    its unlisted mass -- underflow, windows' upper tails -- is charged in full)."""
    _, _, p_up, underflow, order = product
    den = max([Fraction(g[0]).denominator for g in groups] + [Fraction(shift).denominator, Fraction(x).denominator])
    pos = np.zeros(1, dtype=object)
    for g in groups:
        f, n = Fraction(g[0]), g[1]
        lo, hi = _range(g)  # a window (eps, n, lo, hi) lists its range only (as _product does)
        unit = f.numerator * (den // f.denominator)
        pos = np.add.outer(pos, np.array([(2 * j - n) * unit for j in range(lo, hi + 1)], dtype=object)).ravel()
    rel = int(Fraction(shift) * den) - int(Fraction(x) * den)  # exact: den is a multiple of both denominators
    diff = pos[order] + rel
    above = np.flatnonzero(diff > 0)
    d = np.array([int(v) / den for v in diff[above]], dtype=float)  # correctly rounded
    terms = p_up[above] * -np.expm1(-d * (1.0 + 2.0 * UNIT))
    h = math.fsum(terms.tolist()) * (1.0 + 8.0 * UNIT) + underflow + slack + 2.0**-1070 * (above.size + 1)
    return up(h, 1)


def _precise_excess(groups, shift: Fraction, slack: float, x: float) -> float:
    """An upper bound on H(x) from the definition in 40-digit arithmetic (at most
    PRECISE_ATOMS atoms): exact distances l - x, sum_{l > x} p (1 - e^{-(l - x)}) (positive
    terms), moved up by 1e-30 relative, plus ``slack`` (mass at +inf)."""
    import mpmath as mp

    fx = Fraction(x)
    with mp.workdps(40):
        pos, mass = _precise_atoms(tuple(groups), shift)
        h = mp.fsum(p * -mp.expm1(-fraction_mpf(l - fx)) for l, p in zip(pos, mass) if l > fx)
        return mpf_dir(h * (1 + mp.mpf("1e-30")) + mp.mpf(slack) + mp.mpf("1e-320"), True)
