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
    params:
        timeout=config["notebooks"]["timeout_seconds"],
    wildcard_constraints:
        name="|".join(NOTEBOOK_INPUTS),
    message:
        "notebook {wildcards.name}: executing on results/"
    log:
        "results/logs/notebooks/{name}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/notebook.py"
