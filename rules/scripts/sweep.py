"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.sweep."""

from optcomp.pipeline import sweep

sweep(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
