# Figure 1 -- MV Figure 2: eps_g vs k for k identical mechanisms (Summing, DRV, KOV bound,
# Optimal), and the table of ratios to the optimum.


rule homogeneous_family:
    """One curve family of MV Figure 2: eps_g for k = 1..k_max under every theorem (one job
    per family, kept, so a new eps or delta_g value adds a job and reruns no other)."""
    output:
        "results/chunks/homogeneous/{family}.csv",
    log:
        "results/logs/homogeneous_family/{family}.log",
    wildcard_constraints:
        family="|".join(HOMOGENEOUS_FAMILIES),
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (k to 10^4): <= 250 MiB and 2 CPU-minutes per job (sacct)
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        function="optcomp.experiments.homogeneous.sweep_curves",
        section="homogeneous",
        spec="optcomp.experiments.homogeneous.family_spec",
        spec_sha256=params_hash(
            "homogeneous", "optcomp.experiments.homogeneous.family_spec"
        ),
        chunk=True,
    message:
        "MV Figure 2: curve family {wildcards.family}, every k and theorem"
    script:
        "scripts/sweep.py"


rule homogeneous_merge:
    """All curve families of MV Figure 2 in one tidy table."""
    input:
        expand("results/chunks/homogeneous/{family}.csv", family=HOMOGENEOUS_FAMILIES),
    output:
        "results/homogeneous/eps_g.csv",
    log:
        "results/logs/homogeneous_merge.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.homogeneous.sweep_curves",
        section="homogeneous",
        spec_sha256=params_hash("homogeneous"),
    script:
        "scripts/merge.py"


rule homogeneous_ratios:
    """eps_g / optimal eps_g at the config's ratio_k (MV Section 6: KOV ~1.2, DRV ~1.3-1.4)."""
    input:
        "results/homogeneous/eps_g.csv",
    output:
        csv="results/homogeneous/ratios.csv",
        md="results/homogeneous/ratios.md",
        html=report(
            "results/homogeneous/ratios.html",
            caption="report/ratios.rst",
            category="Composition theorems",
            labels={"figure": "Ratio table (MV Section 6)"},
        ),
    log:
        "results/logs/homogeneous_ratios.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.homogeneous.ratio_table",
        markdown="optcomp.experiments.homogeneous.ratio_markdown",
        html="optcomp.experiments.homogeneous.ratio_html",
        section="homogeneous",
        spec="optcomp.experiments.homogeneous.ratio_spec",
        spec_sha256=params_hash(
            "homogeneous", "optcomp.experiments.homogeneous.ratio_spec"
        ),
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
    log:
        "results/logs/mv_figure2.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.homogeneous.mv_figure2",
        section="homogeneous",
        spec="optcomp.experiments.homogeneous.figure_spec",
        spec_sha256=params_hash(
            "homogeneous", "optcomp.experiments.homogeneous.figure_spec"
        ),
    script:
        "scripts/plot.py"
