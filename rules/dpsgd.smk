# DP-SGD as published: eps against training steps for published workloads (a
# Poisson-subsampled Gaussian per step), optcomp's certified bracket beside dp_accounting's
# RDP and PLD accountants and the PRV accountant; one job per workload.  Included before
# notebooks.smk: it registers its notebook and targets.

import re

from optcomp.experiments.dpsgd import workload_names as dpsgd_workload_names

DPSGD_TABLES = ["results/dpsgd/eps_steps.csv", "results/dpsgd/published.csv"]
DPSGD_WORKLOADS = dpsgd_workload_names(config["dpsgd"])
NOTEBOOK_INPUTS["dpsgd"] = DPSGD_TABLES
ALL_TARGETS.extend(
    DPSGD_TABLES
    + ["results/dpsgd/claims.csv", "results/dpsgd/claims.md"]
    + figure("dpsgd")
    + ["results/notebooks/dpsgd.ipynb", "results/notebooks/dpsgd.html"]
)


rule dpsgd_workload:
    """Every accountant at every step count of one workload."""
    output:
        "results/chunks/dpsgd/{workload}.csv",
    log:
        "results/logs/dpsgd_workload/{workload}.log",
    wildcard_constraints:
        workload="|".join(map(re.escape, DPSGD_WORKLOADS)),
    conda:
        "envs/optcomp.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        function="optcomp.experiments.dpsgd.workload_sweep",
        section="dpsgd",
        spec="optcomp.experiments.dpsgd.workload_spec",
        spec_sha256=params_hash("dpsgd", "optcomp.experiments.dpsgd.workload_spec"),
        chunk=True,
    message:
        "dpsgd: {wildcards.workload}, eps against steps by every accountant"
    script:
        "scripts/sweep.py"


rule dpsgd:
    """The workloads' rows in config order, and the published values beside them."""
    input:
        expand("results/chunks/dpsgd/{workload}.csv", workload=DPSGD_WORKLOADS),
    output:
        DPSGD_TABLES,
    log:
        "results/logs/dpsgd.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.dpsgd.sweep",
        section="dpsgd",
        spec_sha256=params_hash("dpsgd"),
    message:
        "dpsgd: eps against steps and the published values"
    script:
        "scripts/sweep.py"


rule dpsgd_claims:
    """The claims table the README quotes: published values and peers against the bracket."""
    input:
        DPSGD_TABLES,
    output:
        csv="results/dpsgd/claims.csv",
        md="results/dpsgd/claims.md",
    log:
        "results/logs/dpsgd_claims.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.dpsgd.claims",
        markdown="optcomp.experiments.dpsgd.claims_markdown",
    script:
        "scripts/table.py"


rule dpsgd_figure:
    """eps against steps per workload, every accountant against optcomp's bracket."""
    input:
        DPSGD_TABLES,
    output:
        pdf="figures/dpsgd.pdf",
        png=report(
            "figures/dpsgd.png",
            caption="report/dpsgd.rst",
            category="DP-SGD",
            labels={"figure": "eps against steps"},
        ),
    log:
        "results/logs/dpsgd_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.dpsgd.eps_steps",
    script:
        "scripts/plot.py"
