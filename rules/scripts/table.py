"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.table."""

from optcomp.pipeline import table

table(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
