# Shared definitions: config checks beyond the schema, job lists, the list of targets.
# (No rules here; the Snakefile includes this first.)
#
# Rule params only *name* things (function, config section, spec function) plus a short
# hash of the job's share of the config (spec_sha256, the parameter rerun trigger), so that
# Snakemake's console lines stay short; optcomp.pipeline recomputes the share from the config.

import optcomp
from optcomp.experiments import heterogeneous, homogeneous
from optcomp.pipeline import spec_hash


def check_config(cfg):
    """Cross-field checks the JSON schema cannot express; errors name the key."""
    hom = cfg["homogeneous"]
    too_big = [k for k in hom["ratio_k"] if k > hom["k_max"]]
    if too_big:
        raise ValueError(
            f"config homogeneous.ratio_k: {too_big} exceed homogeneous.k_max = {hom['k_max']}"
        )
    if hom["zoom_k_max"] > hom["k_max"]:
        raise ValueError(
            f"config homogeneous.zoom_k_max = {hom['zoom_k_max']} exceeds homogeneous.k_max = {hom['k_max']}"
        )
    grids = {
        "budget.k": cfg["budget"]["k"],
        "heterogeneous.k": cfg["heterogeneous"]["k"],
        "runtime.approx_vs_k.k": cfg["runtime"]["approx_vs_k"]["k"],
        "runtime.exact_heterogeneous.bruteforce_k": cfg["runtime"][
            "exact_heterogeneous"
        ]["bruteforce_k"],
        "runtime.exact_heterogeneous.optimal_k": cfg["runtime"]["exact_heterogeneous"][
            "optimal_k"
        ],
        "runtime.exact_homogeneous.k": cfg["runtime"]["exact_homogeneous"]["k"],
    }
    for key, grid in grids.items():
        if isinstance(grid, dict) and grid["from"] > grid["to"]:
            raise ValueError(f"config {key}: from = {grid['from']} > to = {grid['to']}")
    dist = cfg["heterogeneous"]["distribution"]
    if dist["name"] != "choice" and dist["low"] > dist["high"]:
        raise ValueError(
            f"config heterogeneous.distribution: low = {dist['low']} > high = {dist['high']}"
        )
    brute = cfg["runtime"]["exact_heterogeneous"]["bruteforce_k"]
    if max(brute if isinstance(brute, list) else [brute["to"]]) > 24:
        raise ValueError(
            "config runtime.exact_heterogeneous.bruteforce_k: the 2^k brute force is limited to k <= 24"
        )


check_config(config)

HOMOGENEOUS_FAMILIES = homogeneous.family_ids(config["homogeneous"])
HETEROGENEOUS_CHUNKS = [
    f"{i:03d}" for i in range(len(heterogeneous.chunks(config["heterogeneous"])))
]

# timing experiments (functions of optcomp.experiments.runtime); the first four get slopes
TIMING_EXPERIMENTS = [
    "approx_vs_k",
    "approx_vs_eta",
    "exact_heterogeneous",
    "exact_homogeneous",
    "accuracy",
]
# machine-dependent timings: this machine's run (git-ignored) and the committed reference
# run that figures/runtime.* and the runtime notebook are drawn from (no rule writes it)
TIMING_RUNS = ["local", "reference"]
# timing jobs claim every core of a local run so that nothing runs beside them
# (config runtime.exclusive; the test config turns it off to save wall time)
try:
    _CORES = (
        workflow.cores
    )  # raises when no --cores is given (--summary, --report, cluster runs)
except Exception:
    _CORES = None
_CORES = _CORES if isinstance(_CORES, int) and 0 < _CORES < 1024 else 1
TIMING_THREADS = _CORES if config["runtime"]["exclusive"] else 1


def timing_tables(run, slopes=False):
    names = TIMING_EXPERIMENTS + (["slopes"] if slopes else [])
    return [f"results/timing/{run}/{name}.csv" for name in names]


# what each notebook reads (it must not start before these exist)
NOTEBOOK_INPUTS = {
    "01_homogeneous": [
        "results/homogeneous/eps_g.csv",
        "results/homogeneous/ratios.csv",
    ],
    "02_heterogeneous": [
        "results/heterogeneous/eps_g.csv",
        "results/heterogeneous/mechanisms.csv",
    ],
    "03_runtime": timing_tables("reference", slopes=True),
}


def params_hash(section, spec=None):
    """The parameter rerun trigger of a job: a short hash of its share of the config."""
    return lambda wildcards: spec_hash(config, section, spec, dict(wildcards.items()))


def figure(name):
    return [f"figures/{name}.pdf", f"figures/{name}.png"]


ALL_TARGETS = [
    "results/homogeneous/eps_g.csv",
    "results/homogeneous/ratios.csv",
    "results/homogeneous/ratios.md",
    "results/homogeneous/ratios.html",
    *figure("mv_figure2"),
    "results/regions/kov_figure2_boundary.csv",
    "results/regions/kov_figure2_family.csv",
    *figure("kov_figure2"),
    "results/regions/kov_figure3_boundary.csv",
    "results/regions/kov_figure3_family.csv",
    *figure("kov_figure3"),
    "results/budget/laplace.csv",
    *figure("budget_noise"),
    "results/heterogeneous/eps_g.csv",
    "results/heterogeneous/mechanisms.csv",
    *figure("heterogeneous"),
    *timing_tables("local", slopes=True),
    "results/timing/local/runtime.pdf",
    "results/timing/local/runtime.png",
    "results/timing/reference/slopes.csv",
    "results/timing/local/summary.md",
    "results/timing/reference/summary.md",
    *figure("runtime"),
    *[f"results/notebooks/{name}.ipynb" for name in NOTEBOOK_INPUTS],
    *[f"results/notebooks/{name}.html" for name in NOTEBOOK_INPUTS],
]
