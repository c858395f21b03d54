"""Placeholder until the approximation module lands (issue 3)."""

OPTIONS = ("eta", "algorithm")


def approx_epsilon(mech, delta_g, **options):
    raise NotImplementedError("method='approx' is not implemented yet")


def approx_delta(mech, eps_g, **options):
    raise NotImplementedError("method='approx' is not implemented yet")
