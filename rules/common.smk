# Shared definitions: config checks beyond the schema, chunk lists, the list of targets.
# (No rules here; the Snakefile includes this first.)

import optcomp
from optcomp.experiments import budget, homogeneous


def check_config(cfg):
    """Cross-field checks the JSON schema cannot express; errors name the key."""
    hom = cfg["homogeneous"]
    too_big = [k for k in hom["ratio_k"] if k > hom["k_max"]]
    if too_big:
        raise ValueError(f"config homogeneous.ratio_k: {too_big} exceed homogeneous.k_max = {hom['k_max']}")
    if hom["zoom_k_max"] > hom["k_max"]:
        raise ValueError(
            f"config homogeneous.zoom_k_max = {hom['zoom_k_max']} exceeds homogeneous.k_max = {hom['k_max']}"
        )
    grid = cfg["budget"]["k"]
    if isinstance(grid, dict) and grid["from"] > grid["to"]:
        raise ValueError(f"config budget.k: from = {grid['from']} > to = {grid['to']}")


check_config(config)

HOMOGENEOUS_CHUNKS = homogeneous.chunks(config["homogeneous"])
BUDGET_CHUNKS = budget.chunks(config["budget"])


def chunk_ids(chunks):
    return [f"{i:03d}" for i in range(len(chunks))]


def chunk_spec(chunks):
    return lambda wildcards: chunks[int(wildcards.chunk)]


def figure(name):
    return [f"figures/{name}.pdf", f"figures/{name}.png"]


ALL_TARGETS = [
    "results/homogeneous/eps_g.csv",
    "results/homogeneous/ratios.csv",
    "results/homogeneous/ratios.md",
    *figure("mv_figure2"),
    "results/regions/kov_figure2_boundary.csv",
    "results/regions/kov_figure2_family.csv",
    *figure("kov_figure2"),
    "results/regions/kov_figure3_boundary.csv",
    "results/regions/kov_figure3_family.csv",
    *figure("kov_figure3"),
    "results/budget/laplace.csv",
    *figure("budget_noise"),
]
