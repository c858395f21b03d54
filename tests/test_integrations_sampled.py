"""optcomp.integrations.dp_accounting with sampled events -- ``PoissonSampledDpEvent`` (DP-SGD's
step) and ``SampledWithoutReplacementDpEvent`` -- tested with dp_accounting's own event classes.

References: ``tests/reference_dpsgd.py`` (one release of the Poisson-sampled Gaussian and
Laplace, both directions, and dp_accounting's replace-one pair, from the definitions).

dp_accounting's PLD accountant (pessimistic; discretisation 1e-3 in the default run, its
default 1e-4 under ``-m slow``: the faster one is already seconds) is placed against our
bracket: above it by at most its discretisation error, below it not at all beyond 1e-9.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

dpa = pytest.importorskip("dp_accounting")

from dp_accounting import dp_event as E  # noqa: E402
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant  # noqa: E402

import optcomp  # noqa: E402
from reference_dpsgd import DPS, eps_at, gauss, h_add, h_remove, h_replace_gauss, laplace, ref_eps_poisson  # noqa: E402
from optcomp.integrations.dp_accounting import OptcompAccountant  # noqa: E402
from optcomp.mechanisms import Gaussian, Laplace, Subsampled  # noqa: E402

REL = dpa.NeighboringRelation


def _contains(bounds, ref):
    assert bounds.lower <= ref + mp.mpf(10) ** -30 and ref - mp.mpf(10) ** -30 <= bounds.upper, (bounds, ref)


def test_reference_recovers_the_unsampled_gaussian_at_q_1():
    """A check of the reference itself: q = 1 is the Gaussian, delta(eps) = Φ(1/(2s) − eps s)
    − e^eps Φ(−1/(2s) − eps s) in closed form."""
    with mp.workdps(DPS):
        for s, eps in ((1.0, 0.5), (0.5, 3.0)):
            s_, e = mp.mpf(s), mp.mpf(eps)
            exact = mp.ncdf(1 / (2 * s_) - e * s_) - mp.exp(e) * mp.ncdf(-1 / (2 * s_) - e * s_)
            assert abs(h_remove(gauss(s), 1, e) - exact) < mp.mpf(10) ** -30
            assert abs(h_add(gauss(s), 1, e) - exact) < mp.mpf(10) ** -30


# ---------------------------------------------------------------------------------------------
# Poisson sampling under add/remove

@pytest.mark.parametrize("rel", [REL.ADD_OR_REMOVE_ONE, REL.REPLACE_SPECIAL], ids=lambda r: r.name)
def test_poisson_gaussian_is_the_subsampled_gaussian_and_brackets_the_reference(rel):
    q, z, delta = 0.2, 1.0, 1e-5
    acc = OptcompAccountant(rel).compose(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(z)))
    assert acc.mechanisms == ((Subsampled(Gaussian(z), q), 1),)
    with mp.workdps(DPS):
        ref = ref_eps_poisson(gauss(z), q, delta)
    b = acc.bounds_epsilon(delta, tol=1e-3)
    _contains(b, ref)
    assert acc.get_epsilon(delta) >= ref


@pytest.mark.slow  # ~20 s an example on a loaded machine (the engine's subsampled laws at tiny q)
@settings(max_examples=10, deadline=None)
@given(log_q=st.floats(-4, 0), log_z=st.floats(-0.3, 1), log_delta=st.floats(-12, -2))
def test_poisson_gaussian_property_brackets_the_reference(log_q, log_z, log_delta):
    """One Poisson-sampled Gaussian event, q from 1e-4 to 1, noise multiplier 0.5 to 10, delta
    1e-12 to 1e-2 (log scales): the certified bracket holds the reference."""
    q, z, delta = 10.0**log_q, 10.0**log_z, 10.0**log_delta
    acc = OptcompAccountant().compose(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(z)))
    with mp.workdps(DPS):
        ref = ref_eps_poisson(gauss(z), q, delta)
    _contains(acc.bounds_epsilon(delta, tol=1e-2), ref)


def test_poisson_laplace_brackets_the_reference_in_both_directions():
    """Laplace (scale 5, q = 0.5), one step: the remove direction is the larger here (eps
    0.1028 against 0.0930 for add, at delta 1e-3), and the reference takes both."""
    q, b, delta = 0.5, 5.0, 1e-3
    acc = OptcompAccountant().compose(E.PoissonSampledDpEvent(q, E.LaplaceDpEvent(b)))
    assert acc.mechanisms == ((Subsampled(Laplace(b), q), 1),)
    with mp.workdps(DPS):
        base = laplace(b)
        ref = ref_eps_poisson(base, q, delta)
        e = mp.mpf(ref)
        assert max(h_remove(base, q, e), h_add(base, q, e)) <= delta * (1 + mp.mpf(10) ** -20)
    _contains(acc.bounds_epsilon(delta, tol=1e-4), ref)
    assert acc.get_epsilon(delta) >= ref


def test_poisson_laplace_composition_is_the_subsampled_ledger():
    """Two steps of a Poisson-sampled Laplace (scale 5, q = 0.5), where the add direction
    overtakes remove: the accountant composes exactly the ``Subsampled`` ledger (its brackets
    and :func:`optcomp.delta_bounds` of the same mechanisms overlap; the composition itself is
    tested against references in the mechanism's own tests)."""
    q, b = 0.5, 5.0
    m = Subsampled(Laplace(b), q)
    acc = OptcompAccountant().compose(E.PoissonSampledDpEvent(q, E.LaplaceDpEvent(b)), 2)
    assert acc.mechanisms == ((m, 2),)
    direct = optcomp.delta_bounds([m], counts=[2], eps_g=0.05, tol=1e-6)
    via = acc.bounds_delta(0.05, tol=1e-6)
    assert via.lower <= direct.upper and direct.lower <= via.upper


def test_composed_gaussians_under_one_sample_are_one_gaussian():
    inner = E.ComposedDpEvent([E.GaussianDpEvent(2.0), E.SelfComposedDpEvent(E.GaussianDpEvent(3.0), 2)])
    acc = OptcompAccountant().compose(E.PoissonSampledDpEvent(0.1, inner), 5)
    ((m, count),) = acc.mechanisms
    assert count == 5 and isinstance(m, Subsampled) and m.q == 0.1
    with mp.workdps(60):
        z = 1 / mp.sqrt(mp.mpf(1) / 4 + mp.mpf(2) / 9)
        assert mp.mpf(m.mechanism.sigma) <= z  # the upper bound's sigma rounded down
        lower = acc._lower[next(iter(acc._lower))]
        assert lower == 5
        (lm,) = acc._lower
        assert mp.mpf(lm.mechanism.sigma) >= z
        assert abs(mp.mpf(m.mechanism.sigma) - z) < 2 * mp.mpf(2) ** -52 * z


def test_sampled_edge_cases():
    acc = OptcompAccountant()
    acc.compose(E.PoissonSampledDpEvent(0.0, E.GaussianDpEvent(1.0)), 10)  # q = 0: nothing
    acc.compose(E.PoissonSampledDpEvent(0.3, E.GaussianDpEvent(math.inf)), 10)  # no release
    acc.compose(E.PoissonSampledDpEvent(0.3, E.NoOpDpEvent()))
    assert acc.mechanisms == () and acc.get_epsilon(1e-6) == 0.0
    acc.compose(E.PoissonSampledDpEvent(1.0, E.GaussianDpEvent(2.0)))  # q = 1: the Gaussian itself
    assert acc.mechanisms == ((Subsampled(Gaussian(2.0), 1.0), 1),)
    assert acc.get_epsilon(1e-6) == optcomp.epsilon_g([Gaussian(2.0)], delta_g=1e-6)
    acc.compose(E.PoissonSampledDpEvent(0.3, E.GaussianDpEvent(0.0)))  # no noise: non-private
    assert acc.get_epsilon(1e-6) == math.inf and acc.get_delta(1.0) == 1.0


@pytest.mark.parametrize("event, field", [
    (E.PoissonSampledDpEvent(1.5, E.GaussianDpEvent(1.0)), "sampling_probability"),
    (E.PoissonSampledDpEvent(-0.1, E.GaussianDpEvent(1.0)), "sampling_probability"),
    (E.PoissonSampledDpEvent(float("nan"), E.GaussianDpEvent(1.0)), "sampling_probability"),
    (E.PoissonSampledDpEvent(0.1, E.GaussianDpEvent(-1.0)), "noise_multiplier"),
    (E.SampledWithoutReplacementDpEvent(10, 11, E.GaussianDpEvent(1.0)), "sample_size"),
    (E.SampledWithoutReplacementDpEvent(0, 0, E.GaussianDpEvent(1.0)), "source_dataset_size"),
])
def test_bad_sampled_parameters_name_the_field(event, field):
    acc = OptcompAccountant(REL.REPLACE_ONE)
    assert not acc.supports(event)
    with pytest.raises(ValueError, match=field):
        acc.compose(event)


@pytest.mark.parametrize("event, why", [
    (E.PoissonSampledDpEvent(0.1, E.RandomizedResponseDpEvent(0.5, 2)), "replace-one pair"),
    (E.PoissonSampledDpEvent(0.1, E.PoissonSampledDpEvent(0.5, E.GaussianDpEvent(1.0))), "sampled event"),
    (E.PoissonSampledDpEvent(0.1, E.ComposedDpEvent([E.GaussianDpEvent(1.0), E.LaplaceDpEvent(1.0)])),
     "LaplaceDpEvent"),
    (E.PoissonSampledDpEvent(0.1, E.ZCDpEvent(0.5)), "ZCDpEvent"),
])
def test_sampled_events_it_cannot_model_are_refused_with_the_reason(event, why):
    acc = OptcompAccountant(REL.REPLACE_ONE if "Randomized" in repr(event) else REL.ADD_OR_REMOVE_ONE)
    assert not acc.supports(event)
    with pytest.raises(dpa.UnsupportedEventError, match=why):
        acc.compose(event)
    assert acc.mechanisms == ()


# ---------------------------------------------------------------------------------------------
# replace-one and sampling without replacement: whatever Subsampled establishes

def _has_pair(scheme, relation):
    try:
        Subsampled(Gaussian(1.0), 0.1, scheme=scheme, relation=relation)
    except ValueError as exc:
        return str(exc)
    return None


def test_poisson_under_replace_one():
    q, z, delta = 0.2, 1.0, 1e-5
    event = E.PoissonSampledDpEvent(q, E.GaussianDpEvent(z))
    acc = OptcompAccountant(REL.REPLACE_ONE)
    reason = _has_pair("poisson", "replace_one")
    if reason is not None:
        assert not acc.supports(event)
        with pytest.raises(dpa.UnsupportedEventError, match="REPLACE_ONE"):
            acc.compose(event)
        return
    acc.compose(event)
    assert acc.mechanisms == ((Subsampled(Gaussian(z), q, relation="replace_one"), 1),)
    with mp.workdps(DPS):
        ref = eps_at(lambda e: h_replace_gauss(z, q, e), delta)
    _contains(acc.bounds_epsilon(delta, tol=1e-3), ref)


@pytest.mark.parametrize("rel", [REL.ADD_OR_REMOVE_ONE, REL.REPLACE_ONE], ids=lambda r: r.name)
def test_sampling_without_replacement_where_a_pair_is_established(rel):
    event = E.SampledWithoutReplacementDpEvent(60000, 256, E.GaussianDpEvent(1.1))
    acc = OptcompAccountant(rel)
    relation = "replace_one" if rel == REL.REPLACE_ONE else "add_remove"
    reason = _has_pair("without_replacement", relation)
    if reason is not None:
        assert not acc.supports(event)
        with pytest.raises(dpa.UnsupportedEventError, match="SampledWithoutReplacementDpEvent"):
            acc.compose(event)
        return
    acc.compose(event)
    ((m, _),) = acc.mechanisms
    assert m.scheme == "without_replacement" and m.q >= 256 / 60000


# ---------------------------------------------------------------------------------------------
# dp_accounting's PLD accountant against our bracket

PLD_CASES = [  # (q, noise multiplier, steps, delta)
    (0.1, 0.8, 20, 1e-5),
    (0.01, 1.0, 3, 1e-5),
    (0.2, 2.0, 10, 1e-6),
]


def _place_pld(q, z, steps, delta, interval, above):
    event = E.PoissonSampledDpEvent(q, E.GaussianDpEvent(z))
    ours = OptcompAccountant().compose(event, steps).bounds_epsilon(delta, tol=1e-2)
    theirs = PLDAccountant(value_discretization_interval=interval).compose(event, steps).get_epsilon(delta)
    assert ours.lower - 1e-9 <= theirs <= ours.upper + above, (ours, theirs)


def test_pld_accountant_lands_within_or_near_our_bracket():
    _place_pld(0.2, 2.0, 10, 1e-6, 1e-3, 2e-2)


@pytest.mark.slow
@pytest.mark.parametrize("q, z, steps, delta", PLD_CASES)
def test_pld_accountant_at_its_default_interval(q, z, steps, delta):
    _place_pld(q, z, steps, delta, 1e-4, 2e-3)
