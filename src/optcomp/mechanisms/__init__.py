"""Mechanisms known by more than (eps, delta): their exact privacy profiles, their privacy
loss laws in both global directions, and certified discrete dominating pairs.

Every mechanism is a frozen, hashable value object implementing the contract of
:class:`Mechanism` (:mod:`optcomp._laws`):

* ``profile(eps)`` -- its exact privacy profile delta(eps) = sup over the directions of the
  hockey-stick divergence H_{e^eps}(M(D) || M(D')) = E_P[(1 − e^{eps − L})_+], rounded
  **up**; ``profile_bounds(eps)`` gives the certified ``Bounds(lower, upper)`` around it
  (mpmath with an explicit error charge, precision raised until the bracket is 2^-64
  relative; loss positions that are rational are compared with eps exactly).
* ``law(h, direction)`` -- the privacy loss law of one global direction, as finite atoms
  (:class:`~optcomp._laws.AtomLaw`) or as certified cells of the lattice h·ℤ
  (:class:`~optcomp._laws.CellLaw`); this is all the composition engine reads.
* ``discrete_pair(h, side, direction)`` -- a :class:`~optcomp._pairs.DiscretePair` on h·ℤ:
  ``side="upper"`` rounds every loss atom up (a dominating pair), ``"lower"`` down
  (Meiser–Mohammadi 2018; Doroshenko et al., *Connect the Dots*, PoPETs 2022; Zhu–Dong–Wang,
  AISTATS 2022; the argument is in :mod:`optcomp._pairs`).
* ``relation`` -- its neighbouring relation; ``black_box()`` / ``gaussian()`` -- the
  closed forms it composes through, when it has one.

Directions: ``"forward"`` is (M(D), M(D')) with D holding the record (the *remove*
direction under add/remove neighbours), ``"reverse"`` the other order (*add*).  The
noise-adding mechanisms are symmetric (one law for both); a :class:`Pair` is not.  A
composition takes the larger of the two *global* directions (every mechanism sees the same
two datasets), never the worst direction of one step.  (The method is ``profile``, not
``delta``: ``BlackBox(eps, delta).delta`` is its parameter.)

Adding a mechanism
------------------
One class in one module of this package, plus its tests:

1. derive a frozen dataclass from :class:`~optcomp.mechanisms._base.AtomMechanism` (a finite
   loss law: implement ``_atoms(direction)`` in mpmath, and ``_neg_q`` if P leaves Q-mass
   at loss −∞) or from :class:`~optcomp.mechanisms._base.CellMechanism` (a continuous part:
   ``_delta_mp``, ``_support``, ``_interval_masses``, ``_points``, ``_tails``,
   ``_continuous``); validate the parameters in ``__post_init__`` with errors naming them;
2. set ``family = "name"`` (the registry key: the command line's ``--mechanism name:...``,
   the JSON ledger and the docs read it from :data:`REGISTRY`), ``relation`` (the
   neighbouring relation, in words), ``symmetric = False`` if the directions differ, and
   override ``black_box``/``gaussian`` if a closed form applies;
3. import it here and list it in ``docs/api.rst``; ``tests/test_registry.py`` fails until
   every consumer knows the family;
4. test its profile against a reference written from its definition (mpmath), and its
   compositions against exact enumeration or quadrature, in both directions.
"""

from __future__ import annotations

from .._laws import DIRECTIONS, FORWARD, MAX_ATOMS, REVERSE, AtomLaw, CellLaw, Mechanism, Points
from .._pairs import DiscretePair
from ._base import REGISTRY, AtomMechanism, CellMechanism
from .finite import BlackBox, Geometric, Pair, Profile, RandomizedResponse, Staircase
from .discrete_gaussian import DiscreteGaussian  # noqa: I001 (registry order: after the finite laws)
from .continuous import Gaussian, Laplace  # noqa: E402,I001 (registry order: finite laws first)
from .subsampled import Subsampled  # noqa: E402,I001



__all__ = ["Mechanism", "BlackBox", "Laplace", "Gaussian", "Geometric", "DiscreteGaussian", "Staircase",
           "RandomizedResponse", "Pair", "Profile", "Subsampled", "DiscretePair", "FORWARD", "REVERSE", "DIRECTIONS", "REGISTRY",
           "AtomLaw", "CellLaw", "Points", "AtomMechanism", "CellMechanism", "family"]


def family(name: str) -> type:
    """The mechanism class registered under ``name`` (lower case; '-' and '_' ignored; the
    classes' ``aliases`` accepted); ValueError naming the known families otherwise."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    for fam, cls in REGISTRY.items():
        if key == fam.replace("_", "") or key in cls.aliases:
            return cls
    raise ValueError(f"unknown mechanism {name!r} (choose from {', '.join(REGISTRY)})")
