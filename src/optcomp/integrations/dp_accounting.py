"""A drop-in ``dp_accounting`` privacy accountant answering with optcomp's certified bounds.

:class:`OptcompAccountant` is a ``dp_accounting.PrivacyAccountant``: it takes the same
``DpEvent`` objects as Google's PLD and RDP accountants (``compose(event, count)``,
``supports(event)``, ``get_epsilon(target_delta)``, ``get_delta(target_epsilon)``, the
``ledger``), turns each into an :mod:`optcomp.mechanisms` object and answers with
:func:`optcomp.epsilon_g` / :func:`optcomp.delta_g` -- a *certified* upper bound (by default
within 1e-4 of the optimum -- absolute on eps, relative on delta; see :mod:`optcomp.auto`),
never an estimate.
:meth:`~OptcompAccountant.bounds_epsilon` and :meth:`~OptcompAccountant.bounds_delta` give
the certified bracket ``lower <= optimum <= upper``.

Events and their mechanisms, per neighbouring relation (the event definitions are those of
``dp_accounting.dp_event``; Δ is the sensitivity the relation implies):

* ``NoOpDpEvent``: nothing.  ``NonPrivateDpEvent``: ``get_epsilon`` is ``inf`` and
  ``get_delta`` is 1 from then on (as the ``dp_event`` module requires of every accountant).
* ``ComposedDpEvent`` and ``SelfComposedDpEvent``: their parts, nested to any depth, counts
  multiplied.  The composition may be adaptive in the mechanisms, not in their parameters
  (optcomp's setting, see :mod:`optcomp`).
* ``GaussianDpEvent(noise_multiplier=z)``: :class:`~optcomp.mechanisms.Gaussian` with
  sigma = z and Δ = 1 under ``ADD_OR_REMOVE_ONE`` and ``REPLACE_SPECIAL``, Δ = 2 under
  ``REPLACE_ONE`` (the sum of the values moves by up to 2C when one value is replaced; the
  same rule as dp_accounting's PLD accountant, whose Gaussian loss uses twice the
  sensitivity for ``REPLACE``).
* ``LaplaceDpEvent(noise_multiplier=b)``: noise density e^{-|x|/b}/(2b) per unit of L1
  sensitivity, so :class:`~optcomp.mechanisms.Laplace` with scale b and Δ = 1
  (``ADD_OR_REMOVE_ONE``, ``REPLACE_SPECIAL``) or Δ = 2 (``REPLACE_ONE``; dp_accounting's PLD
  accountant refuses this relation for Laplace).  Like dp_accounting, this is the
  one-dimensional loss the event's definition reduces to.
* ``DiscreteLaplaceDpEvent(noise_parameter=a, sensitivity=C)``: pmf tanh(a/2)·e^{-a|x|} on the
  integers, i.e. :class:`~optcomp.mechanisms.Geometric` with eps = a and Δ = C (``ADD_OR_REMOVE_ONE``,
  ``REPLACE_SPECIAL``) or 2C (``REPLACE_ONE``, refused by dp_accounting's PLD accountant).
* ``RandomizedResponseDpEvent(noise_parameter=p, num_buckets=k)``: with probability 1 − p the
  input bucket, else a uniform one of the k buckets, so the input bucket has probability
  1 − p + p/k and every other one p/k: exactly k-ary randomized response
  :class:`~optcomp.mechanisms.RandomizedResponse` with values = k and
  e^eps = (1 − p + p/k)/(p/k), eps = log1p(k(1 − p)/p) (then e^eps/(e^eps + k − 1) =
  1 − p + p/k).  Defined for ``REPLACE_ONE`` (the one input changes bucket) only;
  ``ADD_OR_REMOVE_ONE`` and ``REPLACE_SPECIAL`` are not supported.  eps is irrational in
  general: the upper bound uses eps rounded up (k-RR with a smaller eps is a post-processing
  of k-RR with a larger one -- mix the output with a uniform bucket -- so the rounded-up
  mechanism dominates the true one), the lower end of the bracket eps rounded down.
  p = 0 is non-private; p = 1 or k = 1 releases nothing.
* ``EpsilonDeltaDpEvent(epsilon, delta)`` (in dp_accounting's sources after 0.6; used when the
  installed version defines it): :class:`~optcomp.mechanisms.BlackBox`, any relation (the
  guarantee is stated for the accountant's relation).
* ``DiscreteGaussianDpEvent(sigma, sensitivity, dimension)`` (likewise after 0.6):
  :class:`~optcomp.mechanisms.DiscreteGaussian` with Δ = sensitivity (2·sensitivity under
  ``REPLACE_ONE``) for dimension 1 and an integral sensitivity; other shapes are not supported.
* ``PoissonSampledDpEvent(sampling_probability=q, event)``: each record enters the sample
  independently with probability q, then ``event`` runs on the sample:
  :class:`~optcomp.mechanisms.Subsampled` ``(inner, q, scheme="poisson", relation=...)``.
  The inner event is any leaf above but randomized response (whose definition is a
  replace-one pair, with no law for a dataset without the record), mapped as under
  ``ADD_OR_REMOVE_ONE`` (Δ = 1 for a Gaussian or Laplace noise multiplier: the sampled
  relation is carried by the mixture, not by a doubled sensitivity), or a ``ComposedDpEvent``
  / ``SelfComposedDpEvent`` of Gaussians only -- one sample, several Gaussian releases of it:
  a Gaussian of noise multiplier (Σ count_i / z_i²)^{-1/2} (the same reduction as
  dp_accounting's RDP accountant), rounded down for the upper bound and up for the lower end.
  Relations: ``ADD_OR_REMOVE_ONE`` and ``REPLACE_SPECIAL`` (the special record contributes
  nothing, so the sample differs by the record's presence) -> ``"add_remove"``, the
  dominating pairs of Zhu, Dong and Wang (AISTATS 2022, Thm 11), both global directions taken
  across the whole ledger; ``REPLACE_ONE`` -> ``"replace_one"`` (dp_accounting's pair for a
  Poisson-sampled Gaussian: (1 − q)N(0) + qN(−1) against (1 − q)N(0) + qN(+1)).  A
  (scheme, relation) for which :class:`~optcomp.mechanisms.Subsampled` has no established
  dominating pair is refused with its reason.  q = 0 or an inner event that releases nothing
  is a no-op; a non-private inner event makes the ledger non-private (an over-report: a
  sampled non-private release still hides the record with probability 1 − q).
* ``SampledWithoutReplacementDpEvent(source_dataset_size=n, sample_size=m, event)``: a
  uniformly drawn batch of m of the n records (m = 0 releases nothing):
  :class:`~optcomp.mechanisms.Subsampled` ``(inner, m/n, scheme="without_replacement",
  relation=...)`` with the inner event as above; m/n rounded up for the upper bound and down
  for the lower end (the hockey-stick divergence of a mixture (1 − s)Q + sP against Q, and of
  Q against it, is at most s times the base's by joint convexity: increasing in s).  Refused
  with the reason :class:`~optcomp.mechanisms.Subsampled` gives where it has no dominating
  pair for the accountant's relation.
* Everything else -- sampling with replacement, tree aggregation, repeat-and-select,
  mixtures of Gaussians, zCDP, truncated subsampled Gaussians, ``UnsupportedDpEvent``, an
  event of an unknown class, sampled events nested in sampled events -- is not supported:
  ``supports`` is False and ``compose`` raises ``dp_accounting.UnsupportedEventError``
  saying which sub-event and why (the way dp_accounting's own accountants refuse what they
  do not model).

The default relation is ``ADD_OR_REMOVE_ONE``, the default of dp_accounting's
``dp_accounting.pld.PLDAccountant`` and ``dp_accounting.rdp.RdpAccountant`` (checked in
version 0.6).

A finding on the way (dp_accounting 0.6 and its sources at the time of writing): its
``PLDAccountant`` composes a ``RandomizedResponseDpEvent`` once whatever its count --
``compose(rr, 5)`` and ``SelfComposedDpEvent(rr, 5)`` answer as for one release (it never
calls ``self_compose(count)`` for that event): for p = 0.3, k = 4 under ``REPLACE_ONE`` at
delta 1e-6 it reports eps 2.335 where five releases need 11.677 (a ``ComposedDpEvent`` of
the five copies gives 11.677).  This accountant counts them.

A noise parameter of 0 (no noise) is non-private and one of ``inf`` releases nothing, as in
dp_accounting (its PLD accountant likewise treats a zero noise parameter as non-private); a
discrete Laplace parameter a = inf (no noise) is non-private.  Negative or NaN parameters are
a ``ValueError`` naming the event and the field (``supports`` is False for them).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

try:
    from dp_accounting import dp_event as _ev
    from dp_accounting import privacy_accountant as _pa
except ImportError as exc:  # pragma: no cover - exercised only without the optional package
    raise ImportError("optcomp.integrations.dp_accounting needs the dp-accounting package "
                      "(pip install 'optcomp[compare]' or pip install dp-accounting)") from exc

from .. import _inputs
from .. import delta_g as _delta_g
from .. import epsilon_g as _epsilon_g
from .._rounding import mpf_dir
from .._types import Bounds
from .._rounding import exact_dir
from ..mechanisms import BlackBox, DiscreteGaussian, Gaussian, Geometric, Laplace, RandomizedResponse, Subsampled
from ..methods import check_method

__all__ = ["OptcompAccountant", "NeighboringRelation"]

NeighboringRelation = _pa.NeighboringRelation
_ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE
_REPLACE = NeighboringRelation.REPLACE_ONE
_REPLACE_SPECIAL = NeighboringRelation.REPLACE_SPECIAL

_MAX_COUNT = 2**63  # a count beyond is refused here; optcomp refuses earlier for most inputs
_NONPRIVATE = object()  # marker of a non-private release in a plan


class _Unsupported(Exception):
    """An event optcomp does not compose (becomes ``CompositionErrorDetails``)."""

    def __init__(self, event, message):
        super().__init__(message)
        self.event = event
        self.message = message


# ---------------------------------------------------------------------------------------------
# parameters of an event (ValueError naming the event and the field)

def _field(event, name):
    return f"{type(event).__name__}.{name}"


def _nonneg(event, name, *, hi=math.inf) -> float:
    """A real field in [0, hi] (``inf`` allowed when hi is inf)."""
    label = _field(event, name)
    x = _inputs._check_real(label, getattr(event, name))
    if not 0.0 <= x <= hi:
        bound = "" if hi == math.inf else f" and <= {hi:g}"
        raise ValueError(f"{label} must be >= 0{bound}, got {x!r}")
    return x + 0.0


def _count(event, name, value, lo=0) -> int:
    return _inputs._integer(_field(event, name) if event is not None else name, value, lo, _MAX_COUNT)


def _rr_eps(p: float, k: int) -> tuple[float, float]:
    """eps = log1p(k(1 − p)/p) of k-ary randomized response, rounded (up, down) to floats.

    k(1 − p)/p is an exact rational; at 256 bits its mpmath value and log1p are within a few
    units of 2^-256 relative (log1p's condition number r/((1 + r) log1p(r)) is below 1), so
    a relative margin of 2^-200 on each side contains the true eps before the directed
    rounding to a float."""
    r = Fraction(k) * (1 - Fraction(p)) / Fraction(p)
    with mpmath.workprec(256):
        v = mpmath.log1p(mpmath.mpf(r.numerator) / r.denominator)
        margin = v * mpmath.mpf(2) ** -200
        return mpf_dir(v + margin, True), mpf_dir(v - margin, False)


# ---------------------------------------------------------------------------------------------
# the accountant

class OptcompAccountant(_pa.PrivacyAccountant):
    """A ``dp_accounting.PrivacyAccountant`` whose answers are optcomp's certified upper
    bounds (module docstring: the events, their mechanisms and relations).

    ``neighboring_relation``: a ``dp_accounting.NeighboringRelation`` (default
    ``ADD_OR_REMOVE_ONE``, dp_accounting's PLD default).  ``method`` and ``options`` are
    passed to :func:`optcomp.epsilon_g` / :func:`optcomp.delta_g` (default ``"auto"``: the
    exact optimum where it can be computed, else a certified upper bound within 1e-4;
    ``method="approx", tol=...`` for another accuracy).

    >>> from dp_accounting import GaussianDpEvent, LaplaceDpEvent, SelfComposedDpEvent
    >>> acc = OptcompAccountant().compose(SelfComposedDpEvent(LaplaceDpEvent(10.0), 100))
    >>> acc.compose(GaussianDpEvent(5.0), 20).get_epsilon(1e-6) >= acc.bounds_epsilon(1e-6).lower
    True
    """

    def __init__(self, neighboring_relation=_ADD_REMOVE, *, method: str = "auto", **options):
        if not isinstance(neighboring_relation, NeighboringRelation):
            raise _inputs.ParameterTypeError(
                f"neighboring_relation must be a dp_accounting.NeighboringRelation, got "
                f"{_inputs._describe(neighboring_relation)}")
        check_method(method, options)
        super().__init__(neighboring_relation)
        self._method = method
        self._options = dict(options)
        self._upper: dict = {}  # mechanism -> count, the dominating ledger (upper bounds)
        self._lower: dict = {}  # the ledger the lower end of a bracket composes (differs for k-RR)
        self._nonprivate = False

    # -- events -> mechanisms -----------------------------------------------------------------
    def supports(self, event) -> bool:
        """Whether ``compose(event)`` would succeed: False for unsupported events (module
        docstring) and for events with invalid parameters; never raises."""
        try:
            return self._maybe_compose(event, 0, False) is None
        except (TypeError, ValueError):
            return False

    def _maybe_compose(self, event, count, do_compose):
        count = _count(None, "count", count)
        plan: list = []
        try:
            self._plan(event, count, plan)
        except _Unsupported as u:
            return self.CompositionErrorDetails(invalid_event=u.event, error_message=u.message)
        if do_compose:
            for item in plan:
                if item is _NONPRIVATE:
                    self._nonprivate = True
                    continue
                upper, lower, c = item
                self._upper[upper] = self._upper.get(upper, 0) + c
                self._lower[lower] = self._lower.get(lower, 0) + c
        return None

    def _plan(self, event, count: int, plan: list) -> None:
        """Append ``(upper mechanism, lower mechanism, count)`` or the non-private marker for
        every leaf of ``event``; raise ``_Unsupported`` or ``ValueError``."""
        if not isinstance(event, _ev.DpEvent):
            raise _Unsupported(event, f"not a DpEvent: {_inputs._describe(event)}")
        if isinstance(event, _ev.NoOpDpEvent):
            return
        if isinstance(event, _ev.NonPrivateDpEvent):
            if count:
                plan.append(_NONPRIVATE)
            return
        if isinstance(event, _ev.SelfComposedDpEvent):
            self._plan(event.event, count * _count(event, "count", event.count, 1), plan)
            return
        if isinstance(event, _ev.ComposedDpEvent):
            events = event.events
            if isinstance(events, (str, bytes)) or not hasattr(events, "__iter__"):
                raise _inputs.ParameterTypeError(
                    f"ComposedDpEvent.events must be a list of DpEvents, got {_inputs._describe(events)}")
            for e in events:
                self._plan(e, count, plan)
            return
        leaf = self._leaf(event)
        if count == 0 or leaf is None:
            return
        if leaf is _NONPRIVATE:
            plan.append(_NONPRIVATE)
        else:
            plan.append((*leaf, count))

    def _leaf(self, event):
        """(upper, lower) mechanisms of one event, ``_NONPRIVATE``, or None (nothing
        released)."""
        if isinstance(event, _ev.PoissonSampledDpEvent):
            q = _nonneg(event, "sampling_probability", hi=1.0)
            return self._sampled(event, "poisson", q, q)
        if isinstance(event, _ev.SampledWithoutReplacementDpEvent):
            n = _count(event, "source_dataset_size", event.source_dataset_size, 1)
            m = _count(event, "sample_size", event.sample_size)
            if m > n:
                raise ValueError(f"SampledWithoutReplacementDpEvent.sample_size must be <= source_dataset_size "
                                 f"({n}), got {m}")
            rate = Fraction(m, n)
            return self._sampled(event, "without_replacement", exact_dir(rate, True), exact_dir(rate, False))
        rel = self.neighboring_relation
        return self._base(event, 2 if rel == _REPLACE else 1)  # the sensitivity factor of REPLACE_ONE

    def _sampled(self, event, scheme: str, q_up: float, q_dn: float):
        """A sampled event: :class:`~optcomp.mechanisms.Subsampled` of its inner event's
        (upper, lower) mechanisms at the rates (q_up, q_dn) (module docstring)."""
        name = type(event).__name__
        inner = event.event
        if q_up == 0.0:
            return None
        if isinstance(inner, (_ev.PoissonSampledDpEvent, _ev.SampledWithoutReplacementDpEvent,
                              _ev.SampledWithReplacementDpEvent)):
            raise _Unsupported(event, f"{name} of a sampled event ({type(inner).__name__}) is not supported")
        if isinstance(inner, _ev.RandomizedResponseDpEvent):
            raise _Unsupported(event, f"{name} of a RandomizedResponseDpEvent is not supported: its definition is a "
                                      "replace-one pair, with no law for a dataset without the record")
        if isinstance(inner, _ev.NoOpDpEvent):
            return None
        if isinstance(inner, _ev.NonPrivateDpEvent):
            return _NONPRIVATE
        if isinstance(inner, (_ev.ComposedDpEvent, _ev.SelfComposedDpEvent)):
            base = self._gaussian_of(event, inner)
        else:
            base = self._base(inner, 1)
        if base is None or base is _NONPRIVATE:
            return base
        rel = self.neighboring_relation
        relation = "replace_one" if rel == _REPLACE else "add_remove"
        try:
            return Subsampled(base[0], q_up, scheme=scheme, relation=relation), \
                Subsampled(base[1], q_dn, scheme=scheme, relation=relation)
        except ValueError as exc:  # no dominating pair established for this scheme and relation
            raise _Unsupported(event, f"{name} under {rel.name} is not supported: {exc}") from None

    def _gaussian_of(self, event, inner):
        """A ``ComposedDpEvent`` / ``SelfComposedDpEvent`` of Gaussians under one sample: the
        Gaussian of noise multiplier (Σ count_i / z_i²)^{-1/2}, as (upper, lower) mechanisms
        (the multiplier rounded down, up), ``_NONPRIVATE`` or None."""
        precision = Fraction(0)  # Σ count / z², exact
        nonprivate = False

        def walk(e, count):
            nonlocal precision, nonprivate
            if isinstance(e, _ev.SelfComposedDpEvent):
                walk(e.event, count * _count(e, "count", e.count, 1))
            elif isinstance(e, _ev.ComposedDpEvent):
                for part in e.events:
                    walk(part, count)
            elif isinstance(e, _ev.NoOpDpEvent):
                pass
            elif isinstance(e, _ev.GaussianDpEvent):
                z = _nonneg(e, "noise_multiplier")
                if count == 0 or z == math.inf:
                    return
                if z == 0.0:
                    nonprivate = True
                    return
                precision += count / Fraction(z) ** 2
            else:
                raise _Unsupported(event, f"{type(event).__name__} of a composition is supported when every part "
                                          f"is a GaussianDpEvent; found {type(e).__name__}")

        walk(inner, 1)
        if nonprivate:
            return _NONPRIVATE
        if precision == 0:
            return None
        with mpmath.workprec(256):
            z = 1 / mpmath.sqrt(mpmath.mpf(precision.numerator) / precision.denominator)
            margin = z * mpmath.mpf(2) ** -200  # sqrt and the divisions: a few units of 2^-256
            return Gaussian(mpf_dir(z - margin, False)), Gaussian(mpf_dir(z + margin, True))

    def _base(self, event, double: int):
        """(upper, lower) mechanisms of an unsampled leaf event at the sensitivity factor
        ``double``, ``_NONPRIVATE``, or None."""
        rel = self.neighboring_relation
        name = type(event).__name__
        eps_delta = getattr(_ev, "EpsilonDeltaDpEvent", None)
        discrete_gaussian = getattr(_ev, "DiscreteGaussianDpEvent", None)

        if isinstance(event, _ev.GaussianDpEvent):
            z = _nonneg(event, "noise_multiplier")
            if z == 0.0:
                return _NONPRIVATE
            if z == math.inf:
                return None
            m = Gaussian(z, sensitivity=float(double))
            return m, m
        if isinstance(event, _ev.LaplaceDpEvent):
            b = _nonneg(event, "noise_multiplier")
            if b == 0.0:
                return _NONPRIVATE
            if b == math.inf:
                return None
            m = Laplace(b, sensitivity=float(double))
            return m, m
        if isinstance(event, _ev.DiscreteLaplaceDpEvent):
            a = _nonneg(event, "noise_parameter")
            c = _count(event, "sensitivity", event.sensitivity)
            if c == 0:
                return None
            if a == 0.0 or a == math.inf:  # a degenerate law (a = 0) or no noise at all (a = inf)
                return _NONPRIVATE
            m = self._make(event, Geometric, a, sensitivity=c * double)
            return m, m
        if isinstance(event, _ev.RandomizedResponseDpEvent):
            p = _nonneg(event, "noise_parameter", hi=1.0)
            k = _inputs._integer(_field(event, "num_buckets"), event.num_buckets, 1, 2**62)
            if rel != _REPLACE:
                raise _Unsupported(event, f"{name} is defined for the REPLACE_ONE relation (the one input changes "
                                          f"bucket); this accountant's relation is {rel.name}")
            if k == 1 or p == 1.0:
                return None
            if p == 0.0:
                return _NONPRIVATE
            up, dn = _rr_eps(p, k)
            return RandomizedResponse(up, values=k), RandomizedResponse(dn, values=k)
        if eps_delta is not None and isinstance(event, eps_delta):
            e = _nonneg(event, "epsilon")
            d = _nonneg(event, "delta", hi=1.0)
            if e == math.inf or d == 1.0:
                return _NONPRIVATE
            m = BlackBox(e, d)
            return m, m
        if discrete_gaussian is not None and isinstance(event, discrete_gaussian):
            sigma = _nonneg(event, "sigma")
            sens = _nonneg(event, "sensitivity") if hasattr(event, "sensitivity") else 1.0
            dim = getattr(event, "dimension", 1)
            if dim != 1:
                raise _Unsupported(event, f"{name} with dimension {dim!r}: only dimension 1 is supported")
            if sens != math.floor(sens) or sens == math.inf:
                raise _Unsupported(event, f"{name} with a non-integral sensitivity {sens!r} is not supported")
            if sens == 0.0 or sigma == math.inf:
                return None
            if sigma == 0.0:
                return _NONPRIVATE
            m = self._make(event, DiscreteGaussian, sigma, sensitivity=int(sens) * double)
            return m, m
        raise _Unsupported(event, f"{name} is not supported by this accountant")

    @staticmethod
    def _make(event, cls, *args, **kwargs):
        try:
            return cls(*args, **kwargs)
        except ValueError as exc:  # optcomp's own limits (e.g. a sensitivity beyond 2^20)
            raise type(exc)(f"{type(event).__name__}: {exc}") from exc

    # -- answers -----------------------------------------------------------------------------
    @property
    def mechanisms(self) -> tuple:
        """The composed mechanisms as ``((mechanism, count), ...)`` in order of first arrival
        (the ledger ``get_epsilon`` and ``get_delta`` compose)."""
        return tuple(self._upper.items())

    def _args(self, ledger: dict):
        return list(ledger), [ledger[m] for m in ledger]

    @staticmethod
    def _target_delta(target_delta) -> float:
        x = _inputs._check_real("target_delta", target_delta)
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"target_delta must be in [0, 1], got {x!r}")
        return x + 0.0

    @staticmethod
    def _target_epsilon(target_epsilon) -> float:
        x = _inputs._check_real("target_epsilon", target_epsilon)
        if not (math.isfinite(x) and x >= 0.0):
            raise ValueError(f"target_epsilon must be finite and >= 0, got {x!r}")
        return x + 0.0

    def get_epsilon(self, target_delta: float) -> float:
        """A certified upper bound on the least eps with (eps, target_delta)-DP of everything
        composed so far: ``inf`` after a non-private event (or where no finite eps is
        certified), 0.0 for an empty ledger or ``target_delta`` = 1."""
        d = self._target_delta(target_delta)
        if self._nonprivate:
            return math.inf
        if not self._upper or d == 1.0:
            return 0.0
        mechs, counts = self._args(self._upper)
        return float(_epsilon_g(mechs, counts=counts, delta_g=d, method=self._method, **self._options))

    def get_delta(self, target_epsilon: float) -> float:
        """A certified upper bound on the least delta with (target_epsilon, delta)-DP of
        everything composed so far: 1.0 after a non-private event, 0.0 for an empty ledger."""
        e = self._target_epsilon(target_epsilon)
        if self._nonprivate:
            return 1.0
        if not self._upper:
            return 0.0
        mechs, counts = self._args(self._upper)
        return float(_delta_g(mechs, counts=counts, eps_g=e, method=self._method, **self._options))

    def bounds_epsilon(self, target_delta: float, *, tol=None) -> Bounds:
        """Certified ``Bounds(lower, upper)`` around the optimal eps at ``target_delta``
        (:func:`optcomp.epsilon_bounds`; ``tol``: its gap, default 1e-3).  ``(inf, inf)``
        after a non-private event, ``(0, 0)`` for an empty ledger or ``target_delta`` = 1."""
        from ..approx import epsilon_bounds

        d = self._target_delta(target_delta)
        if self._nonprivate:
            return Bounds(math.inf, math.inf)
        if not self._upper or d == 1.0:
            return Bounds(0.0, 0.0)
        return self._bracket(epsilon_bounds, dict(delta_g=d, tol=tol))

    def bounds_delta(self, target_epsilon: float, *, tol=None) -> Bounds:
        """Certified ``Bounds(lower, upper)`` around the optimal delta at ``target_epsilon``
        (:func:`optcomp.delta_bounds`; ``tol``: its relative gap, default 1e-3).  ``(1, 1)``
        after a non-private event, ``(0, 0)`` for an empty ledger."""
        from ..approx import delta_bounds

        e = self._target_epsilon(target_epsilon)
        if self._nonprivate:
            return Bounds(1.0, 1.0)
        if not self._upper:
            return Bounds(0.0, 0.0)
        return self._bracket(delta_bounds, dict(eps_g=e, tol=tol))

    def _bracket(self, fn, kwargs) -> Bounds:
        mechs, counts = self._args(self._upper)
        upper = fn(mechs, counts=counts, **kwargs)
        if self._lower == self._upper:
            return upper
        mechs, counts = self._args(self._lower)
        lower = fn(mechs, counts=counts, **kwargs)
        return Bounds(lower.lower, upper.upper)
