"""MV Theorem 1.6 run end to end: partitions counted through an optimal-composition oracle.

For instances z_1..z_k of #INT-PARTITION (MV Def. 4.6) of growing k, from four families,

* ``random``  — z_i uniform in 1..z_max (almost always 0 solutions);
* ``planted`` — ceil(k/2) random integers in 2..z_max, the prime factors of their product
  regrouped at random into the other k − ceil(k/2) numbers (≥ 2 solutions; regrouped
  values may exceed z_max);
* ``powers``  — z_i = 2^{e_i}, e_i uniform in 1..3 (the last one changed if Σ e_i is odd):
  equal products ⇔ equal exponent sums, a subset-sum count with many solutions;
* ``ones``    — every z_i = 1, Lemma 4.11's special case (2^k solutions, no oracle call);

the count is recovered through the whole chain of :mod:`optcomp.hardness` (four exact
OptComp queries with k + 1 mechanisms each) and checked against the brute-force count.
Three tables: one row per instance (counts, oracle calls and atoms, the bits each step used —
deterministic), the walk through one instance step by step, and the wall times
(``results/timing/``, the only machine-dependent numbers).
"""

from __future__ import annotations

import math
import random
import time
from typing import IO

import pandas as pd

from .. import hardness
from .io import Progress

__all__ = ["FAMILIES", "instance", "instances", "sweep", "COLUMNS", "TIMING_COLUMNS", "WALKTHROUGH_COLUMNS"]

FAMILIES = ("random", "planted", "powers", "ones")

COLUMNS = ["family", "k", "z", "log2_product", "eps_total", "D", "true_count", "recovered_count", "correct",
           "oracle_calls", "oracle_atoms", "bits_sum", "bits_eps", "bits_delta", "bits_oracle", "bits_claim_4_17",
           "sum_eps", "special_case"]
TIMING_COLUMNS = ["family", "k", "seconds_bruteforce", "seconds_chain", "seconds_oracle"]
WALKTHROUGH_COLUMNS = ["order", "step", "quantity", "value", "note"]


def _primes(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


def instance(family: str, k: int, *, seed: int, z_max: int) -> list[int]:
    """The instance of ``family`` with k numbers (Python's Mersenne Twister seeded by
    (seed, family, k): the same config gives the same z on every machine)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rng = random.Random(f"{int(seed)}/{family}/{k}")
    if family == "random":
        return [rng.randint(1, z_max) for _ in range(k)]
    if family == "powers":
        e = [rng.randint(1, 3) for _ in range(k)]
        if sum(e) % 2:  # an odd exponent sum has no solution: make it even (1 <-> 2, 3 -> 2)
            e[-1] = {1: 2, 2: 1, 3: 2}[e[-1]]
        return [2 ** v for v in e]
    if family == "ones":
        return [1] * k
    # planted: one side drawn, the other side its prime factors regrouped
    m = (k + 1) // 2
    left = [rng.randint(2, max(2, z_max)) for _ in range(m)]
    right = [1] * (k - m)
    if right:
        primes = _primes(math.prod(left))
        rng.shuffle(primes)
        for i, p in enumerate(primes):  # every group gets one prime first, the rest at random
            right[i if i < len(right) else rng.randrange(len(right))] *= p
    z = left + right
    rng.shuffle(z)
    return z


def instances(cfg: dict) -> list[tuple[str, int, list[int]]]:
    """(family, k, z) for every k listed under ``families`` in the config, families in
    :data:`FAMILIES` order, k ascending."""
    out = []
    for family in FAMILIES:
        for k in sorted(set(cfg["families"].get(family, []))):
            out.append((family, int(k), instance(family, k, seed=cfg["seed"], z_max=cfg["z_max"])))
    return out


def sweep(cfg: dict, log: IO[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every instance of the config's ``hardness`` section through the chain, plus the
    step-by-step record of ``walkthrough``.  Returns (instances, walkthrough, timing)."""
    eps_total = float(cfg["eps_total"])
    todo = instances(cfg)
    progress = Progress(len(todo) + 1, "hardness", log)
    rows, times = [], []
    for family, k, z in todo:
        start = time.perf_counter()
        true = hardness.count_int_partition_bruteforce(z)
        brute_s = time.perf_counter() - start
        res = hardness.count_int_partition(z, eps_total)
        rows.append((family, k, " ".join(map(str, z)), math.log2(math.prod(z)), eps_total, res.D, true, res.count,
                     res.count == true, res.oracle_calls, res.oracle_atoms, res.bits_sum, res.bits_eps,
                     res.bits_delta, res.bits_oracle, res.bits_claim_4_17, res.sum_eps, res.special_case))
        times.append((family, k, brute_s, res.seconds, res.oracle_seconds))
        progress.message(f"{family} k={k}: count {res.count} (brute force {true}), {res.oracle_calls} oracle calls, "
                         f"{res.bits_oracle} bits, {res.seconds:.2f} s")
        if res.count != true:
            raise AssertionError(f"{family} k={k} z={z}: oracle count {res.count} != brute force {true}")
        progress.step()
    walk = hardness.count_int_partition(list(cfg["walkthrough"]), eps_total, trace=True)
    walk_rows = [(i + 1, s["step"], s["quantity"], str(s["value"]), s["note"]) for i, s in enumerate(walk.steps)]
    walk_rows.append((len(walk_rows) + 1, "check", "brute-force count (Def. 4.6)",
                      str(hardness.count_int_partition_bruteforce(list(cfg["walkthrough"]))), "enumerating all 2^k subsets"))
    progress.step()
    return (pd.DataFrame(rows, columns=COLUMNS), pd.DataFrame(walk_rows, columns=WALKTHROUGH_COLUMNS),
            pd.DataFrame(times, columns=TIMING_COLUMNS))
