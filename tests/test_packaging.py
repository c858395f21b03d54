"""pyproject.toml and environment.yml name the same dependencies with the same lower bounds."""

from __future__ import annotations

import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pyproject_requirements() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra, items in data["optional-dependencies"].items():
        if extra != "opacus":  # needs PyTorch: an extra outside environment.yml
            reqs += [r for r in items if not r.startswith("optcomp")]
    out = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", r)
        assert m, f"pyproject requirement without a plain lower bound: {r}"
        out[m.group(1).lower()] = m.group(2)
    return out


def _environment_requirements() -> dict[str, str]:
    out = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.fullmatch(r"\s*-\s+([A-Za-z0-9_.-]+)>=([0-9.]+)", line)
        if m and m.group(1) != "python":
            out[m.group(1).lower()] = m.group(2)
    return out


def test_environment_mirrors_pyproject():
    assert _pyproject_requirements() == _environment_requirements()


def test_python_lower_bound():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert data["requires-python"] == ">=3.11"
    assert "python>=3.11" in (ROOT / "environment.yml").read_text()
