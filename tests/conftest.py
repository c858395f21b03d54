"""Shared fixtures of the test suite."""

from __future__ import annotations

import resource

import pytest


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
