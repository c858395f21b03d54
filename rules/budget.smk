# Figure 5 -- what tighter composition buys: Laplace noise per query under a global budget.


rule budget:
    """Per-query eps and Laplace scale for every global budget, k and theorem."""
    output:
        "results/budget/laplace.csv",
    log:
        "results/logs/budget.log",
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (k to 10^6): 230 MiB, 20 s (sacct)
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        function="optcomp.experiments.budget.sweep",
        section="budget",
        spec_sha256=params_hash("budget"),
    message:
        "budget: per-query eps and Laplace noise for every budget, k and theorem"
    script:
        "scripts/sweep.py"


rule budget_noise:
    """Laplace noise per query under each theorem."""
    input:
        "results/budget/laplace.csv",
    output:
        pdf="figures/budget_noise.pdf",
        png=report(
            "figures/budget_noise.png",
            caption="report/budget_noise.rst",
            category="What it buys",
            labels={"figure": "Noise per query"},
        ),
    log:
        "results/logs/budget_noise.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.budget.noise",
    script:
        "scripts/plot.py"
