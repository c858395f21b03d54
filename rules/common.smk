# Shared definitions: job lists, the list of targets.
# (No rules here; the Snakefile includes this first.)
#
# Rule params only *name* things (function, config section, spec function) plus a short
# hash of the job's share of the config (spec_sha256, the parameter rerun trigger), so that
# Snakemake's console lines stay short; optcomp.pipeline recomputes the share from the config.

import optcomp
from optcomp.experiments import heterogeneous, homogeneous, kov_section4
from optcomp.pipeline import spec_hash

# config checks (schema and cross-field): optcomp.pipeline.validate_config, run by the Snakefile

HOMOGENEOUS_FAMILIES = homogeneous.family_ids(config["homogeneous"])
HETEROGENEOUS_CHUNKS = [
    f"{i:03d}" for i in range(len(heterogeneous.chunks(config["heterogeneous"])))
]
# KOV Section 4: a job per (budget, mechanism, share of k), per (eps, k), per (workload, share)
KOV_SECTION4_JOBS = {
    part: [f"{i:03d}" for i in range(len(chunks(config["kov_section4"])))]
    for part, chunks in (
        ("noise", kov_section4.noise_chunks),
        ("geometric", kov_section4.geometric_chunks),
        ("black_box", kov_section4.black_box_chunks),
    )
}

# timing experiments (functions of optcomp.experiments.runtime); the first four get slopes
TIMING_EXPERIMENTS = [
    "approx_vs_k",
    "approx_vs_eta",
    "exact_heterogeneous",
    "exact_homogeneous",
    "accuracy",
]
# machine-dependent timings: this machine's run (results/timing/local/, git-ignored) gets its
# slopes, summary and figure here; figures/runtime.* and the runtime notebook are drawn from the
# committed reference run (results/timing/reference/: a copy of such a run, slopes and summary
# included), which no rule writes
TIMING_RUNS = ["local"]
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
    "results/timing/local/summary.md",
    *figure("runtime"),
    *[f"results/notebooks/{name}.ipynb" for name in NOTEBOOK_INPUTS],
    *[f"results/notebooks/{name}.html" for name in NOTEBOOK_INPUTS],
]
