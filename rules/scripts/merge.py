"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.merge."""

from optcomp.pipeline import merge

merge(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
