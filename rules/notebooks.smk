# Notebooks on top of results/: executed headless (figures inline), executed copies kept in
# results/notebooks/ with an HTML rendering for the report.  They read results/ through
# $OPTCOMP_RESULTS (set to this run's results/ directory).


rule notebook:
    """Execute notebooks/{name}.ipynb top to bottom; keep the executed copy."""
    input:
        notebook="notebooks/{name}.ipynb",
        data=lambda wildcards: NOTEBOOK_INPUTS[wildcards.name],
    output:
        notebook="results/notebooks/{name}.ipynb",
        html=report(
            "results/notebooks/{name}.html",
            caption="report/notebook.rst",
            category="Notebooks",
            labels={"notebook": "{name}"},
        ),
    log:
        "results/logs/notebooks/{name}.log",
    wildcard_constraints:
        name="|".join(NOTEBOOK_INPUTS),
    conda:
        "envs/optcomp.yaml"
    # config/paper.yaml: <= 600 MiB, under a minute per notebook (sacct)
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        timeout=config["notebooks"]["timeout_seconds"],
    message:
        "notebook {wildcards.name}: executing on results/"
    script:
        "scripts/notebook.py"
