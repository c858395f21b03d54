# MV Theorem 1.6 -- the #P-hardness chain of reductions, run: #INT-PARTITION solutions counted
# through an exact optimal-composition oracle (optcomp.hardness), one job per instance
# (family, k), collected by the rule `hardness`.  Included before notebooks.smk: it registers
# its notebook and targets.

from optcomp.experiments.hardness import instances as hardness_instances
from optcomp.experiments.hardness import resources as hardness_resources

HARDNESS_OUTPUTS = [
    "results/hardness/instances.csv",
    "results/hardness/walkthrough.csv",
    # wall times measure the machine: this run's go to results/timing/local/ (git-ignored);
    # the notebook reads the committed reference run, results/timing/reference/hardness.csv
    "results/timing/local/hardness.csv",
]
# one job per instance, in the table's order (families, then k ascending)
HARDNESS_INSTANCES = [
    f"{family}/{k}" for family, k, _ in hardness_instances(config["hardness"])
]
NOTEBOOK_INPUTS["hardness"] = HARDNESS_OUTPUTS[:2] + [
    "results/timing/reference/hardness.csv"
]
ALL_TARGETS.extend(
    HARDNESS_OUTPUTS
    + ["results/notebooks/hardness.ipynb", "results/notebooks/hardness.html"]
)


rule hardness_instance:
    """One instance through the chain (count, oracle calls, bits) and its wall times."""
    output:
        "results/chunks/hardness/{family}/{k}.csv",
        # wall times measure the machine: under timing/, like every timing table
        "results/chunks/timing/hardness/{family}/{k}.csv",
    log:
        "results/logs/hardness_instance/{family}/{k}.log",
    wildcard_constraints:
        family="random|planted|powers|ones",
        k=r"\d+",
    conda:
        "envs/optcomp.yaml"
    # measured: k = 24 (2^25 atoms per oracle query) 4.5 GiB peak and ~2 CPU-minutes, k = 23
    # 2.4 GiB; the request grows with 2^k (optcomp.experiments.hardness.resources)
    threads: 1
    resources:
        mem_mb=lambda w: hardness_resources(
            w.family, w.k, config["hardness"]["z_max"]
        )["mem_mb"],
        runtime=lambda w: hardness_resources(
            w.family, w.k, config["hardness"]["z_max"]
        )["runtime"],
    params:
        function="optcomp.experiments.hardness.instance_sweep",
        section="hardness",
        spec="optcomp.experiments.hardness.instance_spec",
        spec_sha256=params_hash(
            "hardness", "optcomp.experiments.hardness.instance_spec"
        ),
        chunk=True,
    message:
        "hardness: {wildcards.family} k={wildcards.k} through the chain (MV Thm 1.6)"
    script:
        "scripts/sweep.py"


rule hardness:
    """The instances' rows collected in order, the walkthrough, and the wall times."""
    input:
        [
            f"results/chunks/{kind}hardness/{name}.csv"
            for name in HARDNESS_INSTANCES
            for kind in ("", "timing/")
        ],
    output:
        HARDNESS_OUTPUTS,
    log:
        "results/logs/hardness.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.hardness.sweep",
        section="hardness",
        spec_sha256=params_hash("hardness"),
        machine=True,
    message:
        "hardness: #INT-PARTITION counts through an exact OptComp oracle (MV Thm 1.6)"
    script:
        "scripts/sweep.py"
