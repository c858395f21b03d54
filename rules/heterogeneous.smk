# Figure 2 -- heterogeneous mechanisms: Summing, DRV, KOV Thm 3.5, the approximation
# algorithm of MV Thm 1.7 (published and certified-fast) and the exact optimum where
# computable (the MV poster's "the algorithm outperforms the KOV bound").


rule heterogeneous_chunk:
    """Every method at a share of the k grid (round-robin, to balance the cost)."""
    output:
        temp("results/chunks/heterogeneous/{chunk}.csv"),
    params:
        function="optcomp.experiments.heterogeneous.sweep",
        optcomp_version=optcomp.__version__,
        spec=chunk_spec(HETEROGENEOUS_CHUNKS),
        chunk=True,
    wildcard_constraints:
        chunk=r"\d+",
    log:
        "results/logs/heterogeneous_chunk/{chunk}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"


rule heterogeneous_merge:
    """One tidy table, rows sorted by k and method."""
    input:
        expand("results/chunks/heterogeneous/{chunk}.csv", chunk=chunk_ids(HETEROGENEOUS_CHUNKS)),
    output:
        "results/heterogeneous/eps_g.csv",
    params:
        function="optcomp.experiments.heterogeneous.sweep",
        sort="optcomp.experiments.heterogeneous.sort_rows",
        config=config["heterogeneous"],
        section="heterogeneous",
    log:
        "results/logs/heterogeneous_merge.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/merge.py"


rule heterogeneous_mechanisms:
    """The drawn eps_i, so that the instance can be reused outside the pipeline."""
    output:
        "results/heterogeneous/mechanisms.csv",
    params:
        function="optcomp.experiments.heterogeneous.mechanisms_table",
        optcomp_version=optcomp.__version__,
        spec=config["heterogeneous"],
        config=config["heterogeneous"],
        section="heterogeneous",
    log:
        "results/logs/heterogeneous_mechanisms.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"


rule heterogeneous_figure:
    """Heterogeneous comparison (two panels)."""
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
    params:
        function="optcomp.figures.heterogeneous.comparison",
    log:
        "results/logs/heterogeneous_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/plot.py"
