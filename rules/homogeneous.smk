# Figure 1 -- MV Figure 2: eps_g vs k for k identical mechanisms (Summing, DRV, KOV bound,
# Optimal), and the table of ratios to the optimum.


rule homogeneous_chunk:
    """One curve family of MV Figure 2: eps_g for k = 1..k_max under every theorem."""
    output:
        temp("results/chunks/homogeneous/{chunk}.csv"),
    params:
        function="optcomp.experiments.homogeneous.sweep_curves",
        optcomp_version=optcomp.__version__,
        spec=chunk_spec(HOMOGENEOUS_CHUNKS),
        chunk=True,
    wildcard_constraints:
        chunk=r"\d+",
    log:
        "results/logs/homogeneous_chunk/{chunk}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"


rule homogeneous_merge:
    """All curve families of MV Figure 2 in one tidy table."""
    input:
        expand("results/chunks/homogeneous/{chunk}.csv", chunk=chunk_ids(HOMOGENEOUS_CHUNKS)),
    output:
        "results/homogeneous/eps_g.csv",
    params:
        function="optcomp.experiments.homogeneous.sweep_curves",
        config=config["homogeneous"],
        section="homogeneous",
    log:
        "results/logs/homogeneous_merge.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/merge.py"


rule homogeneous_ratios:
    """eps_g / optimal eps_g at the config's ratio_k (MV Section 6: KOV ~1.2, DRV ~1.3-1.4)."""
    input:
        "results/homogeneous/eps_g.csv",
    output:
        csv="results/homogeneous/ratios.csv",
        md="results/homogeneous/ratios.md",
    params:
        function="optcomp.experiments.homogeneous.ratio_table",
        markdown="optcomp.experiments.homogeneous.ratio_markdown",
        spec={"ks": config["homogeneous"]["ratio_k"]},
        config=config["homogeneous"],
        section="homogeneous",
    log:
        "results/logs/homogeneous_ratios.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/table.py"


rule mv_figure2:
    """MV Figure 2, four panels."""
    input:
        "results/homogeneous/eps_g.csv",
    output:
        pdf="figures/mv_figure2.pdf",
        png=report(
            "figures/mv_figure2.png",
            caption="report/mv_figure2.rst",
            category="Composition theorems",
            labels={"figure": "MV Figure 2"},
        ),
    params:
        function="optcomp.figures.homogeneous.mv_figure2",
        spec={"zoom_k_max": config["homogeneous"]["zoom_k_max"]},
    log:
        "results/logs/mv_figure2.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/plot.py"
