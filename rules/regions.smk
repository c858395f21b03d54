# Figure 3 -- KOV Figures 2 and 3: privacy regions (false alarm vs missed detection).


rule regions:
    """Region boundaries and the guarantees intersected, for KOV Figures 2 and 3: optimal
    regions (KOV Thm 3.3) for k = 1..k_max; basic (Thm 3.1), DRV (Thm 3.2) and optimal for one k.
    """
    output:
        "results/regions/kov_figure2_boundary.csv",
        "results/regions/kov_figure2_family.csv",
        "results/regions/kov_figure3_boundary.csv",
        "results/regions/kov_figure3_family.csv",
    log:
        "results/logs/regions.log",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml: 150 MiB, 10 s (sacct)
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        function="optcomp.experiments.regions.both",
        section="regions",
        spec_sha256=params_hash("regions"),
    message:
        "KOV Figures 2 and 3: privacy-region boundaries"
    script:
        "scripts/sweep.py"


rule kov_figure2:
    """KOV Figure 2."""
    input:
        "results/regions/kov_figure2_boundary.csv",
    output:
        pdf="figures/kov_figure2.pdf",
        png=report(
            "figures/kov_figure2.png",
            caption="report/kov_figure2.rst",
            category="Privacy regions",
            labels={"figure": "KOV Figure 2"},
        ),
    log:
        "results/logs/kov_figure2.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.regions.kov_figure2",
    script:
        "scripts/plot.py"


rule kov_figure3:
    """KOV Figure 3."""
    input:
        "results/regions/kov_figure3_boundary.csv",
    output:
        pdf="figures/kov_figure3.pdf",
        png=report(
            "figures/kov_figure3.png",
            caption="report/kov_figure3.rst",
            category="Privacy regions",
            labels={"figure": "KOV Figure 3"},
        ),
    log:
        "results/logs/kov_figure3.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.regions.kov_figure3",
    script:
        "scripts/plot.py"
