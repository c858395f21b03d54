"""Snakemake `script:` entry point -- all the work is in optcomp.experiments.snake.table."""

from optcomp.experiments.snake import table

table(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
