"""optcomp.Accountant: a multiset ledger whose answers are those of the public API.

The references are independent of the accountant's bookkeeping: the same mechanisms
written out one by one (a plain list, no counts), closed forms computed here, and the
JSON text of the ledger parsed back.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optcomp
from optcomp import Accountant


def test_compose_is_chainable_and_merges_equal_pairs():
    acc = Accountant()
    assert acc.compose(0.1) is acc
    acc.compose(0.2, 1e-6, count=3).compose(0.1, count=4).compose(0.1, 0.0)
    assert acc.mechanisms == ((0.1, 0.0, 6), (0.2, 1e-6, 3))
    assert len(acc) == acc.k == 9
    assert Accountant([(0.1, 0.0, 6), (0.2, 1e-6, 3)]) == acc
    assert Accountant([(0.2, 1e-6, 3), (0.1, 0.0, 6)]) == acc  # order does not matter
    assert Accountant().compose(-0.0) == Accountant().compose(0.0)


def test_answers_equal_the_mechanisms_written_out():
    acc = Accountant().compose(0.1, count=7).compose(0.3, 1e-7, count=2).compose(0.05)
    eps = [0.1] * 7 + [0.3] * 2 + [0.05]
    delta = [0.0] * 7 + [1e-7] * 2 + [0.0]
    # grouped and written-out inputs may round differently in the last ulps (both certified)
    for method in ("basic", "drv", "kov", "advanced_pure", "optimal"):
        assert acc.get_epsilon(1e-6, method=method) == pytest.approx(
            optcomp.epsilon_g(eps, delta, delta_g=1e-6, method=method), rel=1e-12)
        assert acc.get_delta(1.0, method=method) == pytest.approx(
            optcomp.delta_g(eps, delta, eps_g=1.0, method=method), rel=1e-12)
    b = acc.bounds(delta_g=1e-6, tol=1e-6)
    assert b.lower <= optcomp.epsilon_g(eps, delta, delta_g=1e-6) <= b.upper and b.gap <= 1e-6
    b = acc.bounds(eps_g=1.0)
    assert b.lower <= optcomp.delta_g(eps, delta, eps_g=1.0) <= b.upper


def test_homogeneous_ledger_matches_basic_composition_closed_form():
    acc = Accountant().compose(0.25, 1e-8, count=40)
    assert acc.get_epsilon(0.5, method="basic") == pytest.approx(10.0, rel=1e-14)
    assert acc.get_epsilon(40e-8 * 0.999, method="basic") == math.inf  # basic needs delta_g >= sum delta_i


def test_a_million_identical_steps():
    acc = Accountant()
    for _ in range(10):
        acc.compose(0.01, count=100_000)
    assert acc.mechanisms == ((0.01, 0.0, 10**6),)
    assert acc.get_epsilon(2.0**-25) == pytest.approx(optcomp.epsilon_g(0.01, k=10**6, delta_g=2.0**-25), rel=1e-12)


def test_empty_ledger():
    acc = Accountant()
    assert len(acc) == 0 and not acc
    assert acc.get_epsilon(1e-6) == 0.0 and acc.get_delta(0.0) == 0.0
    assert repr(acc) == "Accountant(k=0)"
    assert acc.remaining(1.0, 1e-6, method="basic") == 1.0


def test_repr_is_readable():
    acc = Accountant().compose(0.1, count=1000).compose(0.5, 1e-6)
    assert repr(acc) == "Accountant(k=1001: 1000 x (eps=0.1, delta=0.0), 1 x (eps=0.5, delta=1e-06))"
    many = Accountant([(0.01 * i, 0.0) for i in range(1, 21)])
    assert "15 more pairs" in repr(many) and len(repr(many)) < 300


def test_json_round_trip_is_exact():
    acc = Accountant().compose(0.1, count=10**12).compose(1 / 3, 1e-300).compose(math.nextafter(0.1, 1.0), count=2)
    text = json.dumps(acc.to_dict())
    back = Accountant.from_dict(json.loads(text))
    assert back == acc and back.mechanisms == acc.mechanisms
    assert back is not acc and back.copy() == back
    # a list of mechanisms without format/version (what the CLI's --file reads) also loads
    assert Accountant.from_dict({"mechanisms": [{"eps": 0.1}]}) == Accountant().compose(0.1)


@pytest.mark.parametrize("data, error, match", [
    ([], TypeError, "dict"),
    ({"format": "other"}, ValueError, "format"),
    ({"mechanisms": [], "version": 3}, ValueError, "version"),
    ({"mechanisms": [], "extra": 1}, ValueError, "extra"),
    ({"mechanisms": "x"}, ValueError, "mechanisms must be a list"),
    ({"mechanisms": [{"eps": 0.1, "delta": 0.0, "cnt": 1}]}, ValueError, "cnt"),
    ({"mechanisms": [{"delta": 0.0}]}, ValueError, r"mechanisms\[0\]"),
    ({"mechanisms": [{"eps": 0.1}, {"eps": -1}]}, ValueError, r"mechanisms\[1\]: eps"),
    ({"mechanisms": [{"eps": 0.1, "count": 0}]}, ValueError, "count"),
    ({"mechanisms": [{"eps": 0.1, "count": 1.5}]}, ValueError, r"mechanisms\[0\]: count must be an integer"),
    ({"mechanisms": [{"eps": 0.1, "count": "2"}]}, TypeError, "count"),
])
def test_from_dict_rejects_bad_records(data, error, match):
    with pytest.raises(error, match=match):
        Accountant.from_dict(data)


def test_bad_input_names_the_parameter():
    acc = Accountant()
    with pytest.raises(ValueError, match="eps"):
        acc.compose(math.inf)
    with pytest.raises(ValueError, match="delta"):
        acc.compose(0.1, 1.0)
    with pytest.raises(TypeError, match="eps"):
        acc.compose("0.1")
    with pytest.raises(ValueError, match="count"):
        acc.compose(0.1, count=2.5)  # integral floats (2.0) are accepted, as k= everywhere
    with pytest.raises(TypeError, match="count"):
        acc.compose(0.1, count="2")
    with pytest.raises(ValueError, match="count"):
        acc.compose(0.1, count=0)
    acc.compose(0.1)
    with pytest.raises(ValueError, match="delta_g"):
        acc.get_epsilon(1.5)
    with pytest.raises(ValueError, match="eps_g"):
        acc.get_delta(-1.0)
    with pytest.raises(ValueError, match="method"):
        acc.get_epsilon(1e-6, method="nope")
    with pytest.raises(ValueError, match="exactly one"):
        acc.bounds()
    with pytest.raises(ValueError, match="eta"):
        acc.get_epsilon(1e-6, eta=0.1)  # optimal takes max_atoms only
    assert acc.mechanisms == ((0.1, 0.0, 1),)  # failed calls left the ledger alone


def test_can_afford_and_remaining_are_certified():
    acc = Accountant().compose(0.1, count=100)
    eps_g, delta_g = 6.0, 1e-6
    for method in ("kov", "optimal"):
        r = acc.remaining(eps_g, delta_g, method=method)
        assert r > 0
        assert acc.can_afford(r, eps_g=eps_g, delta_g=delta_g, method=method)
        assert not acc.can_afford(r * (1 + 1e-9), eps_g=eps_g, delta_g=delta_g, method=method)
        # the ledger plus that mechanism, written out, is certified within budget
        assert optcomp.epsilon_g([0.1] * 100 + [r], delta_g=delta_g, method=method) <= eps_g
    assert acc.mechanisms == ((0.1, 0.0, 100),)  # asking does not compose
    # several more mechanisms of the same size
    r5 = acc.remaining(eps_g, delta_g, count=5)
    assert r5 < acc.remaining(eps_g, delta_g)
    assert acc.can_afford(r5, eps_g=eps_g, delta_g=delta_g, count=5)
    # a spent budget: nothing fits, not even eps = 0 with a delta that breaks delta_g
    spent = Accountant().compose(0.1, count=100)
    assert spent.remaining(1.0, 1e-6) == -math.inf  # nothing fits: not even eps = 0
    assert not spent.can_afford(0.0, eps_g=1.0, delta_g=1e-6)


@settings(max_examples=25, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from([0.01, 0.05, 0.1, 0.3]), st.sampled_from([0.0, 1e-8]),
                                st.integers(1, 50)), min_size=1, max_size=6),
       delta_g=st.sampled_from([1e-6, 1e-3]))
def test_property_ledger_equals_expanded_list(pairs, delta_g):
    acc = Accountant(pairs)
    eps = [e for e, _, n in pairs for _ in range(n)]
    delta = [d for _, d, n in pairs for _ in range(n)]
    assert len(acc) == len(eps)
    for method in ("drv", "kov", "optimal"):
        assert acc.get_epsilon(delta_g, method=method) == pytest.approx(
            optcomp.epsilon_g(eps, delta, delta_g=delta_g, method=method), rel=1e-12)
    assert Accountant.from_dict(json.loads(json.dumps(acc.to_dict()))) == acc


# ---------------------------------------------------------------- planning answers (issue 16)


def test_unattainable_plan_is_minus_inf_not_zero():
    """Ten mechanisms with delta 1e-8 never fit delta_g = 1e-9: nothing fits, not even eps = 0,
    and remaining says so with -inf (0.0 would read as "eps = 0 still fits")."""
    acc = Accountant([(2.5, 0.0, 1)])
    budget = dict(eps_g=3.2499999988097072, delta_g=1e-9)
    r = acc.remaining(budget["eps_g"], budget["delta_g"], delta=1e-8, count=10)
    assert r == -math.inf
    assert not acc.can_afford(0.0, 1e-8, count=10, **budget)
    # the plan written out: the library certifies nothing at this delta_g
    assert optcomp.epsilon_g([2.5] + [0.0] * 10, [0.0] + [1e-8] * 10, delta_g=1e-9) == math.inf
    with pytest.raises(ValueError, match="eps"):
        acc.compose(r, 1e-8)  # cannot be mistaken for an eps a mechanism can have
    # a spent eps budget under basic composition (sum of eps already above eps_g)
    assert Accountant([(0.5, 0.0, 3)]).remaining(1.0, 0.0, method="basic") == -math.inf


def test_only_eps_zero_fits_gives_zero():
    acc = Accountant([(1.0, 0.0, 1)])
    assert acc.remaining(1.0, 1e-6, method="basic") == 0.0
    assert acc.can_afford(0.0, eps_g=1.0, delta_g=1e-6, method="basic")
    assert not acc.can_afford(5e-324, eps_g=1.0, delta_g=1e-6, method="basic")


@settings(max_examples=40, deadline=None)
@given(ledger=st.lists(st.tuples(st.sampled_from([0.0, 0.01, 0.1, 0.7]), st.sampled_from([0.0, 1e-9, 1e-7]),
                                 st.integers(1, 30)), max_size=3),
       eps_g=st.sampled_from([0.0, 0.3, 1.0, 4.0]), delta_g=st.sampled_from([0.0, 1e-8, 1e-6, 0.1]),
       delta=st.sampled_from([0.0, 1e-9, 1e-6]), count=st.integers(1, 20),
       method=st.sampled_from(["basic", "drv", "kov", "advanced_pure", "optimal"]))
def test_remaining_and_can_afford_agree(ledger, eps_g, delta_g, delta, count, method):
    """can_afford(x) == (x <= remaining) at the answer, the next float up, 0 and half of it:
    one shared function, and the search stops only with the next float up evaluated."""
    acc = Accountant(ledger)
    r = acc.remaining(eps_g, delta_g, delta=delta, count=count, method=method)
    assert not math.isnan(r)
    points = [0.0]
    if r >= 0.0:
        points += [r, r / 2]
        if r < sys.float_info.max:
            points.append(math.nextafter(r, math.inf))
    for x in points:
        ok = acc.can_afford(x, delta, eps_g=eps_g, delta_g=delta_g, count=count, method=method)
        assert ok == (x <= r), (x, r)


def test_remaining_is_safe_against_the_exact_reference():
    """The ledger plus count copies of remaining(): the 50-digit reference delta at eps_g is
    within delta_g (safe), and 1e-9 more per mechanism is not (the answer is the largest)."""
    import reference as ref

    acc = Accountant([(0.1, 0.0, 20), (0.3, 1e-9, 2)])
    eps_g, delta_g, count = 4.0, 1e-6, 5
    r = acc.remaining(eps_g, delta_g, count=count)
    assert r > 0
    groups = [(0.1, 0.0, 20), (0.3, 1e-9, 2)]
    assert ref.ref_delta(groups + [(r, 0.0, count)], eps_g) <= delta_g
    assert ref.ref_delta(groups + [(r * (1 + 1e-9), 0.0, count)], eps_g) > delta_g


def test_remaining_for_a_billion_identical_steps_uses_few_evaluations():
    """Secant steps from the KOV bound's answer, not a ~70-step bisection (k = 10^12 took
    34 s); the answer certified and the next float up refused."""
    seen = []
    r = Accountant().remaining(1.0, 1e-6, count=10**9, progress=seen.append)
    assert 0 < len(seen) <= 15
    assert optcomp.epsilon_g(r, k=10**9, delta_g=1e-6) <= 1.0
    assert optcomp.epsilon_g(math.nextafter(r, 1.0), k=10**9, delta_g=1e-6) > 1.0
    assert all({"stage", "lower", "upper", "seconds"} <= set(s) for s in seen)


@pytest.mark.slow
def test_remaining_for_10_to_the_12_steps():
    r = Accountant().remaining(1.0, 1e-6, count=10**12)
    assert optcomp.epsilon_g(r, k=10**12, delta_g=1e-6) <= 1.0
    assert optcomp.epsilon_g(math.nextafter(r, 1.0), k=10**12, delta_g=1e-6) > 1.0


def test_integral_float_counts_are_accepted():
    acc = Accountant().compose(0.1, count=2.0).compose(0.1, count=np.float64(3.0))
    assert acc.mechanisms == ((0.1, 0.0, 5),) and isinstance(acc.mechanisms[0][2], int)
    assert acc.can_afford(0.1, eps_g=2.0, delta_g=1e-6, count=2.0) == acc.can_afford(0.1, eps_g=2.0, delta_g=1e-6,
                                                                                       count=2)
    assert acc.remaining(2.0, 1e-6, count=4.0) == acc.remaining(2.0, 1e-6, count=4)
    for bad in (2.5, math.inf, math.nan):
        with pytest.raises(ValueError, match="count"):
            acc.compose(0.1, count=bad)
        with pytest.raises(ValueError, match="count"):
            acc.remaining(2.0, 1e-6, count=bad)


def test_a_ledger_past_10_to_the_12_says_so_not_counts():
    acc = Accountant().compose(0.1, count=10**12).compose(0.2)  # the ledger records what ran
    assert acc.k == 10**12 + 1
    for ask in (lambda: acc.get_epsilon(1e-6), lambda: acc.get_delta(1.0), lambda: acc.bounds(1e-6),
                lambda: acc.can_afford(0.1, eps_g=1.0, delta_g=1e-6), lambda: acc.remaining(1.0, 1e-6)):
        with pytest.raises(ValueError, match="accountant") as info:
            ask()
        assert "counts" not in str(info.value)
    full = Accountant().compose(0.1, count=10**12)
    with pytest.raises(ValueError, match=r"would exceed 1e\+12 .*count=1\b") as info:
        full.can_afford(0.1, eps_g=1.0, delta_g=1e-6)
    assert "counts" not in str(info.value)
    with pytest.raises(ValueError, match="would exceed"):
        Accountant().compose(0.1, count=10**12 - 1).remaining(1.0, 1e-6, count=2)


def test_huge_eps_ledger_answers_without_overflow():
    acc = Accountant([(1e308, 0.0, 2)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = acc.bounds(1e-6)  # positional delta_g, as get_epsilon
        assert b == acc.bounds(delta_g=1e-6)
        assert b.lower <= b.upper and b.upper == math.inf  # the sum 2e308 lies beyond the floats
        assert acc.get_epsilon(1e-6) == math.inf
        assert acc.remaining(1e308, 1e-6) == -math.inf
        assert not acc.can_afford(0.0, eps_g=1e308, delta_g=1e-6)


# ---------------------------------------------------------------- the ledger is the library's multiset (issue 17)

# pickle.dumps(Accountant().compose(0.1, count=3).compose(0.5, 1e-6).compose(0.05, count=10**12), protocol=4),
# written by the accountant that held its ledger as a dict (eps, delta) -> count (commit cf47892)
_DICT_LEDGER_PICKLE = bytes.fromhex(
    "80049585000000000000008c126f7074636f6d702e6163636f756e74616e74948c0a4163636f756e74616e749493942981944e7d94"
    "8c075f636f756e7473947d9428473fb999999999999a47000000000000000086944b03473fe0000000000000473eb0c6f7a0b5ed8d"
    "86944b01473fa999999999999a47000000000000000086948a060010a5d4e80075738694622e")


def test_pickles_of_the_dict_ledger_load_and_the_format_is_kept():
    acc = pickle.loads(_DICT_LEDGER_PICKLE)
    assert acc.mechanisms == ((0.1, 0.0, 3), (0.5, 1e-6, 1), (0.05, 0.0, 10**12))
    assert acc.k == 10**12 + 4 and repr(acc).startswith("Accountant(k=1000000000004: 3 x (eps=0.1, delta=0.0), ")
    assert pickle.dumps(acc, protocol=4) == _DICT_LEDGER_PICKLE
    # a pair's merged count may pass 10^12 (the ledger records what ran); it survives a pickle
    big = acc.copy().compose(0.05, count=10**12).compose(0.1)
    back = pickle.loads(pickle.dumps(big))
    assert back == big and back.mechanisms == ((0.1, 0.0, 4), (0.5, 1e-6, 1), (0.05, 0.0, 2 * 10**12))


def test_copies_are_independent_ledgers():
    acc = Accountant().compose(0.1)
    for other in (acc.copy(), copy.copy(acc), copy.deepcopy(acc), pickle.loads(pickle.dumps(acc))):
        assert other == acc
        other.compose(0.2)
        assert acc.mechanisms == ((0.1, 0.0, 1),) and other.mechanisms == ((0.1, 0.0, 1), (0.2, 0.0, 1))
        assert other != acc


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.tuples(st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.30000000000000004, 1e-300]),
                                st.sampled_from([0.0, 1e-9, 0.5]), st.integers(1, 3)), max_size=30),
       reads=st.sets(st.integers(0, 30)))
def test_ledger_lists_pairs_in_order_of_first_appearance(items, reads):
    """Against a plain dict built here: composing one by one (with reads in between, which merge
    what was composed) or all at once gives the same ledger, in order of first appearance."""
    ref: dict = {}
    acc = Accountant()
    for i, (e, d, n) in enumerate(items):
        acc.compose(e, d, n)
        ref[(e + 0.0, d)] = ref.get((e + 0.0, d), 0) + n
        if i in reads:
            assert acc.mechanisms == tuple((e, d, n) for (e, d), n in ref.items())
    expected = tuple((e, d, n) for (e, d), n in ref.items())
    assert acc.mechanisms == expected and acc.k == sum(ref.values()) and bool(acc) == bool(ref)
    at_once = Accountant(items)
    assert at_once == acc and at_once.mechanisms == expected
    assert Accountant(reversed(items)) == acc  # the same multiset, listed in another order


def test_the_accountant_hands_out_its_multiset():
    """``Accountant.multiset`` is the ledger as the validated multiset the methods evaluate:
    equal to the same mechanisms written out, updated by compose, and evaluated to the same
    answer as the public function."""
    from optcomp._inputs import Mechanisms, mechanisms

    acc = Accountant().compose(0.3, count=2).compose(0.1, 1e-9).compose(0.3, count=5)
    m = acc.multiset
    assert isinstance(m, Mechanisms) and m == mechanisms([0.3] * 7 + [0.1], [0.0] * 7 + [1e-9])
    assert acc.compose(0.2).multiset != m and m.k == 8  # composing rebinds: the multiset read stays
    assert acc.get_epsilon(1e-6) == optcomp.epsilon_g([0.3, 0.1, 0.2], [0.0, 1e-9, 0.0], counts=[7, 1, 1],
                                                       delta_g=1e-6)


def test_the_ledger_is_the_library_multiset():
    """One type (optcomp._inputs.Mechanisms) for the public inputs and the ledger: built from
    items it equals the multiset of the same mechanisms written out one by one."""
    from optcomp._inputs import Mechanisms, mechanisms

    m = Mechanisms.from_items([(0.3, 0.0, 2), (0.1, 1e-9), (0.3, 0.0, 5), (0.1, 0.0, 4)])
    written_out = mechanisms([0.3] * 7 + [0.1] * 5, [0.0] * 7 + [1e-9] + [0.0] * 4)
    assert m == written_out and m.k == written_out.k == 12
    assert m.items() == ((0.3, 0.0, 7), (0.1, 1e-9, 1), (0.1, 0.0, 4))  # order of arrival
    assert written_out.items() == ((0.1, 0.0, 4), (0.1, 1e-9, 1), (0.3, 0.0, 7))  # no arrival: (eps, delta)
    more = m.plus([(0.2, 0.0), (0.3, 0.0, 1)])
    assert more.items() == ((0.3, 0.0, 8), (0.1, 1e-9, 1), (0.1, 0.0, 4), (0.2, 0.0, 1))
    assert m.items() == ((0.3, 0.0, 7), (0.1, 1e-9, 1), (0.1, 0.0, 4))  # immutable
    assert more == mechanisms([0.3] * 8 + [0.1] * 5 + [0.2], [0.0] * 8 + [1e-9] + [0.0] * 5) and more != m
    with pytest.raises(ValueError, match=r"^ledger\[1\]: delta must lie in \[0, 1\)"):
        Mechanisms.from_items([(0.1,), (0.1, 1.0)], name="ledger")
    with pytest.raises(ValueError, match="count must be an integer"):
        m.plus([(0.1, 0.0, 0)])
