# Notebooks on top of results/: executed headless, executed copies kept in results/notebooks/.
# They read results/ through $OPTCOMP_RESULTS (set to this run's results/ directory).


rule notebook:
    """Execute notebooks/{name}.ipynb top to bottom; keep the executed copy."""
    input:
        notebook="notebooks/{name}.ipynb",
        data=lambda wildcards: NOTEBOOK_INPUTS[wildcards.name],
    output:
        "results/notebooks/{name}.ipynb",
    params:
        timeout=config["notebooks"]["timeout_seconds"],
    wildcard_constraints:
        name="|".join(NOTEBOOK_INPUTS),
    log:
        "results/logs/notebooks/{name}.log",
    conda:
        "envs/optcomp.yaml"
    script:
        "scripts/notebook.py"
