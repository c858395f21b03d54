"""The package version: the single source (pyproject.toml reads it; CITATION.cff is checked against it)."""

__version__ = "0.1.0"
