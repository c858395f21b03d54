"""The reproducers the subsampled family of the Hypothesis domain test found
(``tests/test_mechanism_domain.py``, family "subsampled"), each checked by that test's
``check_domain``: every entry point (bounds, delta_g, epsilon_g, and method="optimal" where the
composed law is small) against the reference composed from the definitions in mpmath (Poisson
add/remove: remove ((1 - s)Q + sP, Q), add (Q, (1 - s)Q + sP), written outcome by outcome
from the base's pair), no exception but the documented ones, no warning.

* tiny rates: the remove loss log1p(s expm1(l)) of Subsampled(Geometric(1e-157, 4), 3e-284) is
  ~1e-440; it was computed as log(1 - s + s e^l), whose rounding under the unit of 1 charged
  it 2.5e-57 of position error, and the exact path summed distances with an absolute floor
  of 2^-252: delta_g at 0 bracketed [0, 5.5e-76] (ExactTooLarge) where the truth is ~1e-440;
* an atom 1 + 5e-301 (a black box of eps 1e-300 subsampled, beside randomized response of
  eps 1) at x = 1: its distance 5e-301 was held at 3.4e-76 (the same floor, and an exact
  position's own 2^-254 charged as its error);
* eps 1e308: Subsampled(RandomizedResponse(1e308), q) raised OverflowError/ValueError ("cannot
  convert Infinity/NaN to integer ratio") through every entry point -- a base position given
  with 2 ulps of error (1e250) made e^{-l} of the mixed mass uncertain by e^{1e250};
* beside a black box, Subsampled(BlackBox(1e308), 1e-300) warned "overflow encountered in
  multiply" (the exact path's moment estimates squared positions of 1e308);
* and alone, its profile search evaluated e^x at x ~ 1e308 in mpmath (~10 ms each, 17 s a
  call): the threshold x' = log1p(expm1(x)/s) is now x - log s beyond x = 4 prec, and the add
  direction's c = 1 - e^x (1 - s) is known negative without e^x once x + log(1 - s) > 1.
"""

from __future__ import annotations

import pytest

from optcomp.mechanisms import BlackBox, Geometric, RandomizedResponse, Staircase, Subsampled

import test_mechanism_domain as D

CASES = [
    # (mechanism, count, beside, x, delta_g)
    (Subsampled(Geometric(1.0349775724022168e-157, 4), 3.2693271715561115e-284), 3, None, 0.0, 5.05232549438118e-66),
    (Subsampled(Geometric(1.0349775724022168e-157, 4), 3.2693271715561115e-284), 3, None, 33.375, 1e-300),
    (Subsampled(BlackBox(1e-300, 0.0), 0.5), 1, RandomizedResponse(1.0, 3), 1.0, 1e-300),
    (Subsampled(RandomizedResponse(1e308, 2), 1e-300), 2, None, 1.0000000000000002e308, 1e-300),
    (Subsampled(RandomizedResponse(1e308, 2), 0.5), 1, None, 0.0, 1e-300),
    (Subsampled(RandomizedResponse(1e308, 2), 1.0), 1, None, 0.0, 1e-300),
    (Subsampled(BlackBox(1e308, 0.0), 1e-300), 1, BlackBox(3.0, 0.0), 0.0, 1e-300),
    (Subsampled(BlackBox(1e308, 0.0), 1e-300), 1, None, 0.0, 1e-300),
    (Subsampled(Staircase(1000.0, 0.0), 0.5), 2, None, 0.0, 1e-300),
    # the reference's own finding: three atoms of randomized response of eps 0 at loss 0 (its
    # mirror map gave each the Q-mass of the last, and the add direction a P-mass of ~3)
    (Subsampled(RandomizedResponse(0.0, 1000), 1.0), 1, BlackBox(0.5, 1e-6), 0.0, 1e-300),
    (Subsampled(RandomizedResponse(0.0, 1000), 0.5), 2, BlackBox(0.5, 1e-6), 0.0, 1e-300),
]


@pytest.mark.parametrize("mech, count, beside, x, d", CASES)
def test_subsampled_edges_bracket_the_definitions(mech, count, beside, x, d):
    D.check_domain(mech, count, beside, x, d, None)
