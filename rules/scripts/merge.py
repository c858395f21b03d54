"""Snakemake `script:` entry point -- all the work is in optcomp.experiments.snake.merge."""

from optcomp.experiments.snake import merge

merge(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
