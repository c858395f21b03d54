"""Heterogeneous composition (the MV poster's "the algorithm outperforms the KOV bound").

k mechanisms with different eps_i, drawn once from a seeded distribution (the first k of
one draw, so the curves are nested and smooth in k), delta_i = delta.  For each k on the
grid: Summing (MV Thm 1.2), DRV (Thm 1.3, heterogeneous form), the KOV heterogeneous bound
(KOV Thm 3.5), the approximation algorithm of MV Thm 1.7 -- the certified fast algorithm
with its (lower, upper) bracket and, up to ``paper_max_k``, the published algorithm at
``eta`` -- and exact optimal composition (MV Thm 1.5) up to ``optimal_max_k`` (beyond, it is
#P-hard, MV Thm 1.6, and ``optcomp`` raises ``ExactTooLarge``).

One row per (k, method); ``eps_g_lower`` is a certified lower bound on the optimum where the
method provides one (the fast approximation; the exact method, where lower = value).

Several instances.  ``distribution`` and ``seed`` may each be a list: every (distribution,
seed) pair is its own instance (its own draw of eps_i), swept over the same k grid, and
:func:`chunks` gives one job per (distribution, seed, share of the k grid) so that a cluster
can spread them.  The tables then start with two columns, ``distribution``
(:func:`distribution_label`) and ``seed``; they appear whenever either key is a list (a list
of one included), never for the single-value form, whose tables stay exactly as they were.
"""

from __future__ import annotations

import math
from typing import IO

import numpy as np
import pandas as pd

import optcomp

from .grids import delta_from_log2, int_grid
from .io import Progress

__all__ = ["draw_eps", "distribution_label", "cases", "several", "chunks", "chunk_spec", "sweep", "sort_rows",
           "mechanisms_table", "COLUMNS", "CASE_COLUMNS", "METHOD_NAMES"]

COLUMNS = ["delta", "delta_g_log2", "k", "method", "eta", "eps_g", "eps_g_lower"]
# the leading columns of every table when several instances are configured (see :func:`several`)
CASE_COLUMNS = ["distribution", "seed"]

# row labels: the library's method names, the two approximation algorithms told apart
METHOD_NAMES = ("basic", "drv", "kov", "approx", "approx_paper", "optimal")


def draw_eps(distribution: dict, seed: int, n: int) -> np.ndarray:
    """n per-mechanism eps values from the config's distribution, with NumPy's PCG64 seeded
    by ``seed`` (same config, same values on every machine).

    ``{name: uniform, low, high}``, ``{name: loguniform, low, high}`` or
    ``{name: choice, values: [...], p: [...]}`` (p optional, default uniform)."""
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    name = distribution["name"]
    if name == "uniform":
        return rng.uniform(float(distribution["low"]), float(distribution["high"]), n)
    if name == "loguniform":
        lo, hi = math.log(float(distribution["low"])), math.log(float(distribution["high"]))
        return np.exp(rng.uniform(lo, hi, n))
    if name == "choice":
        values = np.asarray(distribution["values"], dtype=float)
        p = distribution.get("p")
        return rng.choice(values, size=n, p=None if p is None else np.asarray(p, dtype=float))
    raise ValueError(f"unknown distribution name {name!r} (uniform, loguniform, choice)")


def _number(x) -> str:
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def distribution_label(distribution: dict) -> str:
    """A short name of a distribution of the config, exact in its numbers (no comma, so it
    stays one plain CSV field): ``uniform 0.005..0.1``, ``loguniform 0.001..1``,
    ``choice 0.01|0.1`` or, with probabilities, ``choice 0.01|0.1 p 0.9|0.1``."""
    name = distribution["name"]
    if name in ("uniform", "loguniform"):
        return f"{name} {_number(distribution['low'])}..{_number(distribution['high'])}"
    if name == "choice":
        label = "choice " + "|".join(_number(v) for v in distribution["values"])
        if distribution.get("p") is not None:
            label += " p " + "|".join(_number(v) for v in distribution["p"])
        return label
    raise ValueError(f"unknown distribution name {name!r} (uniform, loguniform, choice)")


def several(cfg: dict) -> bool:
    """True when ``distribution`` or ``seed`` is a list: the tables then carry the
    :data:`CASE_COLUMNS` (also for a list of one, so that a table's columns follow the form
    of the config, not the number of entries)."""
    return isinstance(cfg["distribution"], list) or isinstance(cfg["seed"], list)


def cases(cfg: dict) -> list[tuple[dict, int]]:
    """Every (distribution, seed) instance of the section, distributions in config order,
    then seeds in config order."""
    dists = cfg["distribution"] if isinstance(cfg["distribution"], list) else [cfg["distribution"]]
    seeds = cfg["seed"] if isinstance(cfg["seed"], list) else [cfg["seed"]]
    return [(dist, int(seed)) for dist in dists for seed in seeds]


def chunks(cfg: dict) -> list[dict]:
    """One job spec per (distribution, seed, share of the k grid): the k grid split into
    ``cfg["chunks"]`` shares round-robin (balances the cost, which grows with k) for each
    instance of :func:`cases`; the merged table is sorted afterwards by :func:`sort_rows`.
    With several instances a spec also names its ``case`` (the values of the
    :data:`CASE_COLUMNS`); the single-value form's specs are those of one instance."""
    ks = int_grid(cfg["k"])
    n = max(1, min(int(cfg["chunks"]), len(ks)))
    base = {key: cfg[key] for key in ("seed", "distribution", "delta", "delta_g_log2", "methods", "eta",
                                     "paper_eta", "paper_max_k", "optimal_max_k")}
    base["k_max"] = ks[-1]
    if not several(cfg):
        return [dict(base, k=ks[i::n]) for i in range(n)]
    out = []
    for dist, seed in cases(cfg):
        case = {"distribution": distribution_label(dist), "seed": seed}
        out.extend(dict(base, distribution=dist, seed=seed, case=case, k=ks[i::n]) for i in range(n))
    return out


def chunk_spec(cfg: dict, chunk: str) -> dict:
    """The spec of job number ``chunk`` of :func:`chunks`."""
    return chunks(cfg)[int(chunk)]


def _row(k, method, eta, value, lower=math.nan):
    return (int(k), method, float(eta), float(value), float(lower))


def sweep(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """All methods at every k of the chunk (see the module docstring)."""
    from .. import approx
    from ..optimal import ExactTooLarge

    eps_all = draw_eps(spec["distribution"], spec["seed"], int(spec["k_max"]))
    delta, delta_g = float(spec["delta"]), delta_from_log2(spec["delta_g_log2"])
    methods = list(spec["methods"])
    case = spec.get("case")
    label = "heterogeneous" + (f" ({case['distribution']}, seed {case['seed']})" if case else "")
    progress = Progress(len(spec["k"]) * len(methods), label, log)
    rows = []
    for k in spec["k"]:
        eps = eps_all[:k]
        for method in methods:
            if method in ("basic", "drv", "kov"):
                rows.append(_row(k, method, math.nan, optcomp.epsilon_g(eps, delta, delta_g=delta_g, method=method)))
            elif method == "approx":
                try:
                    b = approx.epsilon_bounds(eps, delta, delta_g=delta_g, eta=float(spec["eta"]))
                except approx.ApproxTooCostly as exc:  # the bracket reached is still certified
                    if exc.bounds is None:
                        raise
                    progress.message(f"k={k}: {exc}")
                    b = exc.bounds
                rows.append(_row(k, "approx", float(spec["eta"]), b.upper, b.lower))
            elif method == "approx_paper":
                if k <= int(spec["paper_max_k"]):
                    value = optcomp.epsilon_g(eps, delta, delta_g=delta_g, method="approx", algorithm="paper",
                                              eta=float(spec["paper_eta"]))
                    rows.append(_row(k, "approx_paper", float(spec["paper_eta"]), value))
            elif method == "optimal":
                if k <= int(spec["optimal_max_k"]):
                    try:
                        value = optcomp.epsilon_g(eps, delta, delta_g=delta_g, method="optimal")
                    except ExactTooLarge as exc:  # record nothing rather than a wrong number
                        progress.message(f"k={k}: exact optimum out of reach ({exc})")
                    else:
                        rows.append(_row(k, "optimal", math.nan, value, value))
            else:
                raise ValueError(f"unknown method {method!r} (expected one of {', '.join(METHOD_NAMES)})")
            progress.step()
    df = pd.DataFrame(rows, columns=COLUMNS[2:])
    df.insert(0, "delta_g_log2", int(spec["delta_g_log2"]))
    df.insert(0, "delta", delta)
    if case:
        df.insert(0, "seed", int(case["seed"]))
        df.insert(0, "distribution", str(case["distribution"]))
    return df


def sort_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows ordered by k, then by method in :data:`METHOD_NAMES` order (stable); with the
    :data:`CASE_COLUMNS`, by instance first, in the order the instances first appear (the
    merge reads the chunks in :func:`chunks` order, i.e. the config's)."""
    order = {m: i for i, m in enumerate(METHOD_NAMES)}
    df = df.assign(_o=df["method"].map(order))
    by = ["k", "_o"]
    if "distribution" in df.columns:
        pairs = list(zip(df["distribution"], df["seed"]))
        first = {pair: i for i, pair in enumerate(dict.fromkeys(pairs))}
        df = df.assign(_c=[first[pair] for pair in pairs])
        by = ["_c", *by]
    return df.sort_values(by, kind="stable").drop(columns=[c for c in ("_c", "_o") if c in df]).reset_index(drop=True)


def mechanisms_table(cfg: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """The drawn eps_i (index i = 1..k_max), so readers can reuse the exact instance; with
    several instances, one block per (distribution, seed) with the :data:`CASE_COLUMNS`."""
    ks = int_grid(cfg["k"])
    if not several(cfg):
        eps = draw_eps(cfg["distribution"], cfg["seed"], ks[-1])
        return pd.DataFrame({"i": np.arange(1, eps.size + 1), "eps": eps, "delta": float(cfg["delta"])})
    blocks = []
    for dist, seed in cases(cfg):
        eps = draw_eps(dist, seed, ks[-1])
        blocks.append(pd.DataFrame({"distribution": distribution_label(dist), "seed": seed,
                                    "i": np.arange(1, eps.size + 1), "eps": eps, "delta": float(cfg["delta"])}))
    return pd.concat(blocks, ignore_index=True)
