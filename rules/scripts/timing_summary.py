"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.timing_summary."""

from optcomp.pipeline import timing_summary

timing_summary(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
