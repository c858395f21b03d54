"""DP-SGD as published: eps against training steps, optcomp's certified bracket beside the
accountants practitioners run.

A DP-SGD step clips every per-example gradient to norm C, sums a Poisson sample (each record
in with probability q) and adds N(0, (sigma C)^2) noise: a Poisson-subsampled Gaussian with
noise multiplier sigma, composed once per step, under add/remove neighbours.  For each
workload of the config's ``dpsgd`` section (the TensorFlow Privacy MNIST tutorial, the Opacus
MNIST example, ...) and a grid of step counts ending at the published run's length:

* ``optcomp`` -- :func:`optcomp.epsilon_bounds` of ``steps`` copies of
  :class:`~optcomp.mechanisms.Subsampled` ``(Gaussian(sigma), q)``: a certified bracket
  ``lower <= optimal eps <= upper`` (width at most ``tol`` = ``rtol`` times the RDP value,
  itself an upper bound of the optimum; where the engine's lattice would exceed its size
  limit at that width, 10 and then 100 times it, recorded in the ``tol`` column), both
  global directions (remove and add) across the run;
* ``rdp`` -- ``dp_accounting``'s RDP accountant (the accountant of TensorFlow Privacy's and
  Opacus's published numbers), ``pld`` -- its PLD accountant at ``pld_interval``, ``prv`` --
  Microsoft's PRV accountant with Opacus's defaults (``eps_error`` 0.01, ``delta_error`` =
  delta / 1000; the value reported is its upper estimate, as Opacus reports it, with its
  lower and middle estimates beside): each as the user runs it
  (:mod:`optcomp.experiments.peers`).

Every peer value is placed against our bracket (``position``: inside, above or below;
``excess``: its ratio to our upper end, minus 1): a value below ``lower`` under-reports the
privacy loss.  :func:`published` sets each workload's published eps beside the bracket at
its last step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import IO

import pandas as pd

from .grids import int_grid
from .io import Progress, read_csv

__all__ = ["workloads", "workload_names", "workload_spec", "step_grid", "workload_sweep", "sweep", "published",
           "claims", "claims_markdown", "COLUMNS", "PUBLISHED_COLUMNS", "CLAIMS_COLUMNS", "ACCOUNTANTS", "PEER_LABEL"]

ACCOUNTANTS = ("optcomp", "rdp", "pld", "prv")
COLUMNS = ["workload", "noise_multiplier", "sample_rate", "steps", "delta_g", "accountant", "epsilon", "lower",
           "estimate", "upper", "tol", "excess", "position"]
CLAIMS_COLUMNS = ["claim", "published", "measured", "verdict"]
PEER_LABEL = {"rdp": "dp_accounting's RDP accountant", "pld": "dp_accounting's PLD accountant",
              "prv": "the PRV accountant (Opacus's defaults)"}
PUBLISHED_COLUMNS = ["workload", "label", "noise_multiplier", "sample_rate", "steps", "epochs", "delta_g",
                     "published_epsilon", "published_by", "rdp_classic", "optcomp_lower", "optcomp_upper",
                     "overstatement", "rdp", "pld", "prv"]


def _sample_rate(w: dict) -> float:
    has_rate = "sample_rate" in w
    has_batch = "batch_size" in w or "dataset_size" in w
    if has_rate == has_batch:
        raise ValueError(f"dpsgd.workloads[{w.get('name')!r}]: give sample_rate or batch_size and dataset_size")
    if has_rate:
        return float(w["sample_rate"])
    return int(w["batch_size"]) / int(w["dataset_size"])  # the rate a user passes: one float division


def workloads(cfg: dict) -> list[dict]:
    """The section's workloads, resolved: name, label, noise_multiplier, sample_rate
    (``batch_size / dataset_size`` where given so), steps, epochs, the published eps and who
    published it; ValueError for a duplicate name or an ambiguous sample rate."""
    out, seen = [], set()
    for w in cfg["workloads"]:
        if w["name"] in seen:
            raise ValueError(f"dpsgd.workloads: duplicate name {w['name']!r}")
        seen.add(w["name"])
        out.append({"name": str(w["name"]), "label": str(w.get("label", w["name"])),
                    "noise_multiplier": float(w["noise_multiplier"]), "sample_rate": _sample_rate(w),
                    "steps": int(w["steps"]), "epochs": float(w.get("epochs", math.nan)),
                    "published_epsilon": float(w.get("published_epsilon", math.nan)),
                    "published_by": str(w.get("published_by", ""))})
    return out


def workload_names(cfg: dict) -> list[str]:
    return [w["name"] for w in workloads(cfg)]


def workload_spec(cfg: dict, workload: str) -> dict:
    """The share of the section one workload's job needs (its rerun trigger)."""
    for w in workloads(cfg):
        if w["name"] == workload:
            return {"workload": w, "delta_g": float(cfg["delta_g"]), "rtol": float(cfg["rtol"]),
                    "points": int(cfg["points"]), "first_step": int(cfg["first_step"]),
                    "pld_interval": float(cfg["pld_interval"]), "prv_eps_error": float(cfg["prv_eps_error"])}
    raise ValueError(f"dpsgd: no workload named {workload!r} (have {', '.join(workload_names(cfg))})")


def step_grid(steps: int, points: int, first_step: int) -> list[int]:
    """``points`` step counts spaced geometrically from ``first_step`` to ``steps`` (both
    included; fewer where rounding merges them)."""
    if steps <= first_step or points < 2:
        return [steps]
    return int_grid({"from": first_step, "to": steps, "num": points})


def _place(value: float, lower: float, upper: float) -> str:
    if lower <= value <= upper:
        return "inside"
    return "above" if value > upper else "below"


def workload_sweep(spec: dict, log: IO[str] | None = None) -> pd.DataFrame:
    """Every accountant at every step count of one workload (module docstring)."""
    import optcomp

    from .._types import ApproxTooCostly
    from ..mechanisms import Gaussian, Subsampled
    from . import peers

    if not (peers.available() and peers.prv_available()):
        raise ImportError("the DP-SGD experiment needs dp-accounting and prv-accountant "
                          "(pip install 'optcomp[compare]')")
    w, delta = spec["workload"], spec["delta_g"]
    sigma, q = w["noise_multiplier"], w["sample_rate"]
    grid = step_grid(w["steps"], spec["points"], spec["first_step"])
    progress = Progress(len(grid), f"dpsgd {w['name']}", log)
    mech = Subsampled(Gaussian(sigma), q)
    nan = math.nan
    rows = []
    for steps in grid:
        history = [(sigma, q, steps)]
        rdp = peers.rdp_dpsgd_epsilon(history, delta_g=delta)
        tol = spec["rtol"] * rdp
        for attempt in range(3):
            try:
                ours = optcomp.epsilon_bounds([mech], counts=[steps], delta_g=delta, tol=tol)
                break
            except ApproxTooCostly:
                if attempt == 2:
                    raise
                progress.message(f"steps={steps}: a bracket of width {tol:.3g} exceeds the engine's size limit; "
                                 f"trying {10 * tol:.3g}")
                tol *= 10
        pld = peers.pld_dpsgd_epsilon(history, delta_g=delta, interval=spec["pld_interval"])
        prv_lo, prv_est, prv_up = peers.prv_dpsgd_epsilon(history, delta_g=delta, eps_error=spec["prv_eps_error"])
        found = [("optcomp", ours.upper, ours.lower, nan, ours.upper, tol), ("rdp", rdp, nan, nan, nan, nan),
                 ("pld", pld, nan, nan, nan, nan), ("prv", prv_up, prv_lo, prv_est, prv_up, nan)]
        for name, value, lo, est, up, width in found:
            excess = value / ours.upper - 1.0 if ours.upper > 0 else nan
            rows.append((w["name"], sigma, q, steps, delta, name, value, lo, est, up, width, excess,
                         _place(value, ours.lower, ours.upper)))
        progress.step()
    return pd.DataFrame(rows, columns=COLUMNS)


def published(cfg: dict, table: pd.DataFrame) -> pd.DataFrame:
    """Each workload's published eps beside every accountant at its last step:
    ``overstatement`` = published / optcomp's certified upper end − 1 (at least how much
    the published value overstates the optimum); ``rdp_classic`` recomputes the published
    value by the RDP conversion of the tutorials' time
    (:func:`optcomp.experiments.peers.rdp_classic_dpsgd_epsilon`)."""
    from . import peers

    rows = []
    for w in workloads(cfg):
        last = table[(table["workload"] == w["name"]) & (table["steps"] == w["steps"])].set_index("accountant")
        if last.empty:
            raise ValueError(f"dpsgd: no rows at the last step ({w['steps']}) of workload {w['name']!r}")
        upper = float(last.loc["optcomp", "upper"])
        rows.append((w["name"], w["label"], w["noise_multiplier"], w["sample_rate"], w["steps"], w["epochs"],
                     float(cfg["delta_g"]), w["published_epsilon"], w["published_by"],
                     peers.rdp_classic_dpsgd_epsilon([(w["noise_multiplier"], w["sample_rate"], w["steps"])],
                                                     delta_g=float(cfg["delta_g"])),
                     float(last.loc["optcomp", "lower"]), upper, w["published_epsilon"] / upper - 1.0,
                     float(last.loc["rdp", "epsilon"]), float(last.loc["pld", "epsilon"]),
                     float(last.loc["prv", "epsilon"])))
    return pd.DataFrame(rows, columns=PUBLISHED_COLUMNS)


def sweep(cfg: dict, log: IO[str] | None = None, inputs: list | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every workload of the section (``inputs``: the tables the per-workload jobs wrote, in
    any order; else computed here).  Returns (eps against steps, published values)."""
    names = workload_names(cfg)
    if inputs is not None:
        frames = {Path(p).stem: read_csv(p) for p in inputs}
        if sorted(frames) != sorted(names):
            raise ValueError(f"dpsgd: tables for {sorted(frames)}, expected the workloads {sorted(names)}")
        for name, df in frames.items():
            if list(df.columns) != COLUMNS:
                raise ValueError(f"dpsgd table {name}: columns {list(df.columns)}, expected {COLUMNS}")
        table = pd.concat([frames[n] for n in names], ignore_index=True)
    else:
        table = pd.concat([workload_sweep(workload_spec(cfg, n), log) for n in names], ignore_index=True)
    return table, published(cfg, table)


def _f(x: float) -> str:
    return f"{x:.6g}"


def claims(table: pd.DataFrame, pub: pd.DataFrame) -> pd.DataFrame:
    """The claims table the README quotes: each published eps beside optcomp's certified
    bracket at the published run's length, and where every peer lands against the bracket
    over the whole step grid."""
    rows = []
    for _, w in pub.iterrows():
        over = 100 * w["overstatement"]
        verdict = (f"overstates the optimum by at least {over:.1f} %" if over > 0 else
                   "BELOW optcomp's certified upper end" + (" and lower end: an under-report"
                                                          if w["published_epsilon"] < w["optcomp_lower"] else ""))
        rows.append((f"{w['label']}: eps = {w['published_epsilon']:g} after {int(w['steps'])} steps "
                     f"(sigma {w['noise_multiplier']:g}, q {w['sample_rate']:.4g}, delta {w['delta_g']:g})",
                     f"{w['published_epsilon']:g} ({w['published_by']}; recomputed {w['rdp_classic']:.4f})",
                     f"[{_f(w['optcomp_lower'])}, {_f(w['optcomp_upper'])}]", verdict))
    points = table[table["accountant"] == "optcomp"][["workload", "steps"]].drop_duplicates()
    for acc, label in PEER_LABEL.items():
        g = table[table["accountant"] == acc]
        counts = {pos: int((g["position"] == pos).sum()) for pos in ("inside", "above", "below")}
        excess = 100 * g["excess"]
        below = g[g["position"] == "below"]
        verdict = ", ".join(f"{n} {pos}" for pos, n in counts.items() if n)
        if len(below):
            worst = below.loc[below["excess"].idxmin()]
            verdict += (f"; under-reports, e.g. {_f(worst['epsilon'])} at {int(worst['steps'])} steps of "
                        f"{worst['workload']}")
        rows.append((f"{label} on the {len(points)} (workload, steps) points",
                     f"{excess.min():+.3g} % to {excess.max():+.3g} % of optcomp's upper end",
                     "optcomp's certified bracket at each point", verdict))
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def claims_markdown(df: pd.DataFrame, source: str = "results/dpsgd/claims.csv") -> str:
    """:func:`claims` as the Markdown table the README quotes."""
    lines = [f"<!-- generated from {source} by optcomp.experiments.dpsgd.claims_markdown: do not edit -->",
             "| claim | published / reported | optcomp, certified | verdict |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"
