"""Shared fixtures of the test suite."""

from __future__ import annotations

import os
import resource

import pytest
from hypothesis import settings

# The default run is deterministic: every property test draws the same examples on every
# machine and run (derandomized, no example database), so CI can never fail by chance and a
# failure reproduces anywhere.  Exploration -- fresh random examples, with a local database
# that replays what failed -- is one flag away:
#   pytest --hypothesis-profile=explore        (or OPTCOMP_HYPOTHESIS_PROFILE=explore)
# Tests that pin their own settings (derandomize, max_examples) keep them under both.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("OPTCOMP_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def address_space_cap():
    """Cap this process's address space at 4 GiB for a module: a huge k or count must
    never allocate O(k), and a regression is then a MemoryError here, not an OOM on a
    shared machine.  Modules opt in with ``pytestmark = pytest.mark.usefixtures(...)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = 4 * 2**30
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
