"""Snakemake `script:` entry point -- all the work is in optcomp.pipeline.plot."""

from optcomp.pipeline import plot

plot(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
