# Figure 5 -- what tighter composition buys: Laplace noise per query under a global budget.


rule budget_chunk:
    """Per-query eps and Laplace scale for one global budget, every k and theorem."""
    output:
        temp("results/chunks/budget/{chunk}.csv"),
    params:
        function="optcomp.experiments.budget.sweep",
        spec=chunk_spec(BUDGET_CHUNKS),
        chunk=True,
    wildcard_constraints:
        chunk=r"\d+",
    log:
        "results/logs/budget_chunk/{chunk}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"


rule budget_merge:
    input:
        expand("results/chunks/budget/{chunk}.csv", chunk=chunk_ids(BUDGET_CHUNKS)),
    output:
        "results/budget/laplace.csv",
    params:
        function="optcomp.experiments.budget.sweep",
        config=config["budget"],
        section="budget",
    log:
        "results/logs/budget_merge.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/merge.py"


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
    params:
        function="optcomp.figures.budget.noise",
    log:
        "results/logs/budget_noise.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/plot.py"
