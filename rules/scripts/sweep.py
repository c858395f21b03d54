"""Snakemake `script:` entry point -- all the work is in optcomp.experiments.snake.sweep."""

from optcomp.experiments.snake import sweep

sweep(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
