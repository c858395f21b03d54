"""Snakemake `script:` entry point -- all the work is in optcomp.experiments.snake.notebook."""

from optcomp.experiments.snake import notebook

notebook(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
