# MV Theorem 1.6 -- the #P-hardness chain of reductions, run: #INT-PARTITION solutions counted
# through an exact optimal-composition oracle (optcomp.hardness).  Included before
# notebooks.smk: it registers its notebook and targets.

HARDNESS_OUTPUTS = [
    "results/hardness/instances.csv",
    "results/hardness/walkthrough.csv",
    # wall times measure the machine: this run's go to results/timing/local/ (git-ignored);
    # the notebook reads the committed reference run, results/timing/reference/hardness.csv
    "results/timing/local/hardness.csv",
]
NOTEBOOK_INPUTS["hardness"] = HARDNESS_OUTPUTS[:2] + [
    "results/timing/reference/hardness.csv"
]
ALL_TARGETS.extend(
    HARDNESS_OUTPUTS
    + ["results/notebooks/hardness.ipynb", "results/notebooks/hardness.html"]
)


rule hardness:
    """Every instance through the chain (counts, oracle calls, bits, times) and the walkthrough."""
    output:
        HARDNESS_OUTPUTS,
    log:
        "results/logs/hardness.log",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (k to 23: oracle queries of 2^24 atoms): 2.4 GiB peak, 4 CPU-minutes (sacct)
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        function="optcomp.experiments.hardness.sweep",
        section="hardness",
        spec_sha256=params_hash("hardness"),
        machine=True,
    message:
        "hardness: #INT-PARTITION counts through an exact OptComp oracle (MV Thm 1.6)"
    script:
        "scripts/sweep.py"
