# MV Theorem 1.6 -- the #P-hardness chain of reductions, run: #INT-PARTITION solutions counted
# through an exact optimal-composition oracle (optcomp.hardness).  Included before
# notebooks.smk: it registers its notebook and targets.

HARDNESS_OUTPUTS = [
    "results/hardness/instances.csv",
    "results/hardness/walkthrough.csv",
    "results/timing/hardness.csv",  # wall times: machine-dependent, hence under results/timing/
]
NOTEBOOK_INPUTS["hardness"] = HARDNESS_OUTPUTS
ALL_TARGETS.extend(HARDNESS_OUTPUTS + ["results/notebooks/hardness.ipynb"])


rule hardness:
    """Every instance through the chain (counts, oracle calls, bits, times) and the walkthrough."""
    output:
        HARDNESS_OUTPUTS,
    params:
        function="optcomp.experiments.hardness.sweep",
        optcomp_version=optcomp.__version__,
        spec=config["hardness"],
        config=config["hardness"],
        section="hardness",
    log:
        "results/logs/hardness.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"
