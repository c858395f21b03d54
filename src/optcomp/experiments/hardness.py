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

The pipeline runs one job per instance (:func:`instance_spec`, :func:`instance_sweep`, each
declaring the memory and time of :func:`resources`) and collects them with
:func:`sweep` (``inputs=`` the jobs' tables); called without ``inputs``, :func:`sweep` runs
every instance itself.  k goes up to :data:`MAX_K` = 24 (oracle queries of 25 mechanisms,
2^25 atoms: measured 4.5 GiB and ~2 CPU-minutes, see :func:`resources`).
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import IO

import pandas as pd

from .. import hardness
from .io import Progress

__all__ = ["FAMILIES", "MAX_K", "instance", "instances", "instance_spec", "instance_sweep", "resources", "sweep",
           "COLUMNS", "TIMING_COLUMNS", "WALKTHROUGH_COLUMNS"]

FAMILIES = ("random", "planted", "powers", "ones")
# the largest instance: its oracle queries have MAX_K + 1 = 25 mechanisms (2^25 atoms)
MAX_K = 24

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


def instance_spec(cfg: dict, family: str, k) -> dict:
    """The share of the ``hardness`` section one instance's job needs (its rerun trigger:
    a change to another family, size or the walkthrough leaves the job alone)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
    return {"eps_total": cfg["eps_total"], "seed": cfg["seed"], "z_max": cfg["z_max"], "family": family, "k": int(k)}


def resources(family: str, k, z_max: int = 50) -> dict:
    """What one instance's job asks the scheduler for: ``mem_mb`` and ``runtime`` (minutes).

    Measured on this 2-core machine (peak RSS, CPU time): planted k = 24 -- 4 oracle queries
    of 25 mechanisms, 2^25 atoms of 401 bits -- 4596 MiB and 127 CPU-s, 207 s wall at load 4
    (getrusage); random k = 24 through the local SLURM 4548-4608 MiB (sacct MaxRSS) and
    130-133 CPU-s, but 533 s wall in a --cores 2 run at load 5-7; k = 23 2164-2452 MiB;
    random k = 22 1212 MiB and 26 CPU-s.  The oracle's list of 2^(k+1) Python integers
    dominates: 4596 MiB / 2^25 = 1.56 integers' worth per atom (the last step's halves beside
    the list).

    The model: an estimate of the oracle's bits from above (3 log2 of the product, as in the
    proof, <= 3 k log2 z_max, plus 2k + 64), 1.6 integers of that size (8-byte pointer,
    28-byte header, 4 bytes per 30-bit digit) per atom, plus 200 MiB, at least 1000 MiB
    (k = 24, z_max = 50: 5730 MiB; k = 23: 2863 MiB); the time scales with atoms x digits:
    10x the measured k = 24 CPU time so scaled (a busy node ran it 4x slower), at least 10
    minutes (k = 24: 28 minutes).  ``ones`` never calls the oracle (Lemma 4.11's special
    case): only the brute force's 2^k subset products of 1, 1000 MiB."""
    k = int(k)
    if family == "ones":
        return {"mem_mb": 1000, "runtime": 10}
    bits = 3 * k * math.log2(max(2, int(z_max))) + 2 * k + 64
    per_atom = 1.6 * (8 + 28 + 4 * math.ceil(bits / 30))
    atoms = 2 ** (k + 1)
    mem_mb = max(1000, math.ceil(200 + per_atom * atoms / 2**20))
    runtime = max(10, math.ceil(10 * 127 * 2.0 ** (k - 24) * bits / 401 / 60))
    return {"mem_mb": mem_mb, "runtime": runtime}


def _run(family: str, k: int, z: list[int], eps_total: float, progress: Progress) -> tuple[tuple, tuple]:
    """(instance row, timing row) of one instance through the chain, checked against the
    brute force."""
    start = time.perf_counter()
    true = hardness.count_int_partition_bruteforce(z)
    brute_s = time.perf_counter() - start
    oracle = hardness.OptCompOracle(max_k=max(hardness.MAX_ORACLE_K, k + 1))
    res = hardness.count_int_partition(z, eps_total, oracle=oracle)
    row = (family, k, " ".join(map(str, z)), math.log2(math.prod(z)), eps_total, res.D, true, res.count,
           res.count == true, res.oracle_calls, res.oracle_atoms, res.bits_sum, res.bits_eps,
           res.bits_delta, res.bits_oracle, res.bits_claim_4_17, res.sum_eps, res.special_case)
    progress.message(f"{family} k={k}: count {res.count} (brute force {true}), {res.oracle_calls} oracle calls, "
                     f"{res.bits_oracle} bits, {res.seconds:.2f} s")
    if res.count != true:
        raise AssertionError(f"{family} k={k} z={z}: oracle count {res.count} != brute force {true}")
    return row, (family, k, brute_s, res.seconds, res.oracle_seconds)


def instance_sweep(spec: dict, log: IO[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One instance (``spec`` from :func:`instance_spec`) through the chain: its row of the
    instance table and of the timing table."""
    family, k = spec["family"], int(spec["k"])
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be in 1..{MAX_K}, got {k}")
    z = instance(family, k, seed=spec["seed"], z_max=spec["z_max"])
    progress = Progress(1, f"hardness {family} k={k}", log)
    row, times = _run(family, k, z, float(spec["eps_total"]), progress)
    progress.step()
    return pd.DataFrame([row], columns=COLUMNS), pd.DataFrame([times], columns=TIMING_COLUMNS)


def _read_text(path) -> pd.DataFrame:
    # every field as the text the instance job wrote, so the collected table is its bytes
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def sweep(cfg: dict, log: IO[str] | None = None, inputs: list | None = None
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every instance of the config's ``hardness`` section through the chain, plus the
    step-by-step record of ``walkthrough``.  Returns (instances, walkthrough, timing).

    ``inputs``: the tables the per-instance jobs wrote (:func:`instance_sweep`; a path with
    a ``timing`` directory holds a timing row, any other an instance row), collected in
    :func:`instances` order -- field by field as written -- instead of running them here."""
    eps_total = float(cfg["eps_total"])
    todo = instances(cfg)
    progress = Progress((0 if inputs is not None else len(todo)) + 1, "hardness", log)
    if inputs is not None:
        order = {(family, str(k)): i for i, (family, k, _) in enumerate(todo)}
        paths = [Path(p) for p in inputs]
        tables = []
        for suffix, columns in (("instance", COLUMNS), ("timing", TIMING_COLUMNS)):
            chosen = [p for p in paths if ("timing" in p.parts) == (suffix == "timing")]
            frames = [_read_text(p) for p in chosen]
            df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
            if list(df.columns) != columns:
                raise ValueError(f"{suffix} tables: columns {list(df.columns)}, expected {columns}")
            keys = list(zip(df["family"], df["k"]))
            if sorted(order[key] for key in keys if key in order) != list(range(len(todo))) or len(keys) != len(todo):
                raise ValueError(f"{suffix} tables: instances {keys} are not the config's "
                                 f"{[(f, k) for f, k, _ in todo]}")
            tables.append(df.iloc[sorted(range(len(df)), key=lambda i: order[keys[i]])].reset_index(drop=True))
        table, timing = tables
    else:
        rows, times = [], []
        for family, k, z in todo:
            row, t = _run(family, k, z, eps_total, progress)
            rows.append(row)
            times.append(t)
            progress.step()
        table, timing = pd.DataFrame(rows, columns=COLUMNS), pd.DataFrame(times, columns=TIMING_COLUMNS)
    walk = hardness.count_int_partition(list(cfg["walkthrough"]), eps_total, trace=True)
    walk_rows = [(i + 1, s["step"], s["quantity"], str(s["value"]), s["note"]) for i, s in enumerate(walk.steps)]
    walk_rows.append((len(walk_rows) + 1, "check", "brute-force count (Def. 4.6)",
                      str(hardness.count_int_partition_bruteforce(list(cfg["walkthrough"]))), "enumerating all 2^k subsets"))
    progress.step()
    return table, pd.DataFrame(walk_rows, columns=WALKTHROUGH_COLUMNS), timing
