# Figure 4 -- wall-clock scaling of the exact and approximate algorithms, and dp_accounting.
# Timings measure the machine: this machine's run goes to results/timing/local/ (git-ignored,
# with its own figure there); figures/runtime.* and the runtime notebook are drawn from the
# committed reference run in results/timing/reference/, which no rule writes.  Timing jobs
# claim every core (threads = --cores) so that nothing runs beside them.


rule timing:
    """One timing experiment of optcomp.experiments.runtime (named by the wildcard)."""
    output:
        "results/timing/local/{experiment}.csv",
    log:
        "results/logs/timing/{experiment}.log",
    wildcard_constraints:
        experiment="|".join(TIMING_EXPERIMENTS),
    priority: 50  # measure first, while nothing else of this run loads the machine
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml (= the default curves): <= 740 MiB, <= 3 CPU-minutes per experiment (sacct)
    threads: TIMING_THREADS
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        function=lambda wildcards: f"optcomp.experiments.runtime.{wildcards.experiment}",
        section="runtime",
        spec="optcomp.experiments.runtime.experiment_spec",
        spec_sha256=params_hash(
            "runtime", "optcomp.experiments.runtime.experiment_spec"
        ),
        machine=True,
    message:
        "timing {wildcards.experiment} on this machine (progress: results/logs/timing/{wildcards.experiment}.log)"
    script:
        "scripts/sweep.py"


rule timing_slopes:
    """Fitted log-log slopes (95 % confidence intervals) beside the theoretical exponents."""
    input:
        lambda wildcards: timing_tables(wildcards.run)[:4],
    output:
        csv="results/timing/{run}/slopes.csv",
    log:
        "results/logs/timing_slopes_{run}.log",
    wildcard_constraints:
        run="|".join(TIMING_RUNS),
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.experiments.runtime.fit_slopes",
        section="runtime",
        spec="optcomp.experiments.runtime.slopes_spec",
        spec_sha256=params_hash("runtime", "optcomp.experiments.runtime.slopes_spec"),
    script:
        "scripts/table.py"


rule runtime_figure:
    """Runtime scaling, six panels, from the committed reference run."""
    input:
        timing_tables("reference", slopes=True),
    output:
        pdf="figures/runtime.pdf",
        png=report(
            "figures/runtime.png",
            caption="report/runtime.rst",
            category="Running time",
            labels={"figure": "Runtime scaling (reference run)"},
        ),
    log:
        "results/logs/runtime_figure.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.runtime.scaling",
    script:
        "scripts/plot.py"


rule runtime_figure_local:
    """The same figure from this machine's run (git-ignored)."""
    input:
        timing_tables("local", slopes=True),
    output:
        pdf="results/timing/local/runtime.pdf",
        png="results/timing/local/runtime.png",
    log:
        "results/logs/runtime_figure_local.log",
    localrule: True
    conda:
        "envs/optcomp.yaml"
    params:
        function="optcomp.figures.runtime.scaling",
    script:
        "scripts/plot.py"


rule timing_summary:
    """The timing claims the README quotes: largest sizes with median (min..max), exponents."""
    input:
        lambda wildcards: timing_tables(wildcards.run)[:4]
        + [f"results/timing/{wildcards.run}/slopes.csv"],
    output:
        "results/timing/{run}/summary.md",
    log:
        "results/logs/timing_summary_{run}.log",
    wildcard_constraints:
        run="|".join(TIMING_RUNS),
    localrule: True
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/timing_summary.py"
