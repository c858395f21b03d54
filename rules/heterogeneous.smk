# Figure 2 -- heterogeneous mechanisms: Summing, DRV, KOV Thm 3.5, the approximation
# algorithm of MV Thm 1.7 (published and certified-fast) and the exact optimum where
# computable (the MV poster's "the approximation algorithm outperforms the KOV bound").


rule heterogeneous_chunk:
    """Every method at a share of the k grid (round-robin, to balance the cost; kept), for one
    instance: one distribution and seed of the eps_i (optcomp.experiments.heterogeneous.chunks).
    """
    output:
        "results/chunks/heterogeneous/{chunk}.csv",
    log:
        "results/logs/heterogeneous_chunk/{chunk}.log",
    wildcard_constraints:
        chunk=r"\d+",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (k to 10^5, 3 distributions x 3 seeds x 4 chunks = 36 jobs):
    # <= 346 MiB and 22 CPU-s per job (sacct on the local SLURM)
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        function="optcomp.experiments.heterogeneous.sweep",
        section="heterogeneous",
        spec="optcomp.experiments.heterogeneous.chunk_spec",
        spec_sha256=params_hash(
            "heterogeneous", "optcomp.experiments.heterogeneous.chunk_spec"
        ),
        chunk=True,
    message:
        "heterogeneous: job {wildcards.chunk} (a distribution, a seed, a share of the k grid)"
    script:
        "scripts/sweep.py"


rule heterogeneous_merge:
    """One tidy table, rows sorted by instance (config order), k and method."""
    input:
        expand("results/chunks/heterogeneous/{chunk}.csv", chunk=HETEROGENEOUS_CHUNKS),
    output:
        "results/heterogeneous/eps_g.csv",
    log:
        "results/logs/heterogeneous_merge.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.heterogeneous.sweep",
        sort="optcomp.experiments.heterogeneous.sort_rows",
        section="heterogeneous",
        spec_sha256=params_hash("heterogeneous"),
    script:
        "scripts/merge.py"


rule heterogeneous_mechanisms:
    """The drawn eps_i, so that the instance can be reused outside the pipeline."""
    output:
        "results/heterogeneous/mechanisms.csv",
    log:
        "results/logs/heterogeneous_mechanisms.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.heterogeneous.mechanisms_table",
        section="heterogeneous",
        spec_sha256=params_hash("heterogeneous"),
    script:
        "scripts/sweep.py"


rule heterogeneous_figure:
    """Heterogeneous comparison (three panels; with several distributions, a column each)."""
    input:
        "results/heterogeneous/eps_g.csv",
        "results/heterogeneous/mechanisms.csv",
    output:
        pdf="figures/heterogeneous.pdf",
        png=report(
            "figures/heterogeneous.png",
            caption="report/heterogeneous.rst",
            category="Composition theorems",
            labels={"figure": "Heterogeneous mechanisms"},
        ),
    log:
        "results/logs/heterogeneous_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.heterogeneous.comparison",
    script:
        "scripts/plot.py"
