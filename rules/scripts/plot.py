"""Snakemake `script:` entry point -- all the work is in optcomp.experiments.snake.plot."""

from optcomp.experiments.snake import plot

plot(snakemake)  # noqa: F821 -- the object Snakemake injects into scripts
