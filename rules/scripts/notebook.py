"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.notebook."""

from optcomp.pipeline import notebook

notebook(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
