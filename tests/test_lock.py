"""requirements.lock pins every package the pipeline and the tests use, consistently with
pyproject.toml: each dependency pyproject names (core and the pipeline, compare and dev
extras) is locked at a version satisfying its lower bound, every pin has hashes, and the
file says how to regenerate it (the command README documents)."""

from __future__ import annotations

import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
COMMAND = ("uv pip compile pyproject.toml --extra pipeline --extra compare --extra dev --generate-hashes "
           "--python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-emit-package optcomp "
           "-o requirements.lock")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes)."""
    out, current = {}, None
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", line)
        if m:
            current = _normalise(m.group(1))
            out[current] = (m.group(2), 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, n = out[current]
            out[current] = (version, n + 1)
    return out


def _declared() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("pipeline", "compare", "dev"):
        reqs += [r for r in project["optional-dependencies"][extra] if not r.startswith("optcomp")]
    out = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", r)
        assert m, f"pyproject requirement without a plain lower bound: {r}"
        out[_normalise(m.group(1))] = m.group(2)
    return out


def _version(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.findall(r"\d+", v)[:4])


def test_lock_pins_every_declared_dependency_within_its_bound():
    locked = _locked()
    assert len(locked) > 50
    for name, lower in _declared().items():
        assert name in locked, f"{name} (pyproject.toml) is not in requirements.lock: regenerate it ({COMMAND})"
        version = locked[name][0]
        assert _version(version) >= _version(lower), f"{name}=={version} in the lock is below pyproject's >={lower}"


def test_every_pin_is_exact_and_hashed():
    for name, (version, hashes) in _locked().items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version), (name, version)
        assert hashes >= 1, f"{name} has no hash"
    assert "optcomp" not in _locked()  # the package itself is installed from the checkout


def test_lock_records_the_documented_command():
    header = LOCK.read_text().splitlines()[:3]
    assert any(COMMAND in line for line in header), header
    assert COMMAND in (ROOT / "docs" / "reproducing.rst").read_text()  # "Exact environment"
