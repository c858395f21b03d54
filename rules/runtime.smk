# Figure 4 -- wall-clock scaling of the exact and approximate algorithms, and dp_accounting.
# Timing jobs claim every core (threads = --cores) so that nothing runs beside them; their
# CSVs (results/timing/) are the only outputs that differ between runs.


rule timing:
    """One timing experiment of optcomp.experiments.runtime (named by the wildcard)."""
    output:
        "results/timing/{experiment}.csv",
    params:
        function=lambda wildcards: f"optcomp.experiments.runtime.{wildcards.experiment}",
        optcomp_version=optcomp.__version__,
        spec=config["runtime"],
        config=config["runtime"],
        section="runtime",
    wildcard_constraints:
        experiment="|".join(TIMING_EXPERIMENTS),
    threads: TIMING_THREADS
    priority: 50  # measure first, while nothing else of this run loads the machine
    log:
        "results/logs/timing/{experiment}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/sweep.py"


rule timing_slopes:
    """Fitted log-log slopes beside the theoretical exponents."""
    input:
        expand("results/timing/{experiment}.csv", experiment=TIMING_EXPERIMENTS[:4]),
    output:
        csv="results/timing/slopes.csv",
    params:
        function="optcomp.experiments.runtime.fit_slopes",
        spec={},
        config=config["runtime"],
        section="runtime",
    log:
        "results/logs/timing_slopes.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/table.py"


rule runtime_figure:
    """Runtime scaling, six panels."""
    input:
        expand("results/timing/{experiment}.csv", experiment=TIMING_EXPERIMENTS),
        "results/timing/slopes.csv",
    output:
        pdf="figures/runtime.pdf",
        png=report(
            "figures/runtime.png",
            caption="report/runtime.rst",
            category="Running time",
            labels={"figure": "Runtime scaling"},
        ),
    params:
        function="optcomp.figures.runtime.scaling",
    log:
        "results/logs/runtime_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/plot.py"
