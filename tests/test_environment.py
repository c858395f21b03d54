"""environment.yml (conda) cannot drift from pyproject.toml and requirements.lock.

conda cannot reach its channels here, so the file is checked by parsing it: it names exactly
the packages pyproject.toml names (core and every extra) with the same lower bounds, Python's
included; every bound is met by the version requirements.lock pins; the packages conda-forge
would not give are the ones under ``pip:``; and the rules' conda environment
(rules/envs/optcomp.yaml) asks for nothing environment.yml does not, at the same bounds.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
SPEC = re.compile(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)")
# packages conda-forge does not carry (or not at these versions): installed by pip inside the env
PIP_ONLY = {"snakemake-executor-plugin-slurm", "dp-accounting", "prv-accountant"}
# extras outside the environment: Opacus needs PyTorch (gigabytes; pip install 'optcomp[opacus]')
NOT_IN_ENV = {"opacus"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:4])


def parse_spec(spec: str, where: str) -> tuple[str, str]:
    """``"numpy>=1.26"`` or ``"numpy >=1.26"`` -> ("numpy", "1.26"); anything else is an error
    naming the file and the entry (every dependency must carry a plain lower bound)."""
    m = SPEC.fullmatch(spec.strip())
    if not m:
        raise ValueError(f"{where}: dependency {spec!r} is not of the form NAME>=VERSION")
    return normalise(m.group(1)), m.group(2)


def conda_env(path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(conda packages, pip packages, other pip lines such as ``-e .``): name -> lower bound."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("dependencies"), list):
        raise ValueError(f"{path.name}: no 'dependencies' list")
    conda, pip, other = {}, {}, []
    for entry in data["dependencies"]:
        if isinstance(entry, dict):
            if set(entry) != {"pip"}:
                raise ValueError(f"{path.name}: unexpected mapping {entry!r} in dependencies")
            for line in entry["pip"]:
                if line.startswith("-"):
                    other.append(line)
                else:
                    name, low = parse_spec(line, f"{path.name} pip")
                    pip[name] = low
        elif entry == "pip":
            continue
        else:
            name, low = parse_spec(str(entry), path.name)
            conda[name] = low
    return conda, pip, other


def pyproject() -> tuple[dict[str, str], str]:
    """(name -> lower bound over core and every extra but NOT_IN_ENV, requires-python lower
    bound)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra, items in project["optional-dependencies"].items():
        if extra not in NOT_IN_ENV:
            reqs += [r for r in items if not r.startswith("optcomp")]
    out = {}
    for r in reqs:
        name, low = parse_spec(r, "pyproject.toml")
        assert out.get(name, low) == low, f"pyproject.toml names {name} with two lower bounds"
        out[name] = low
    return out, parse_spec("python" + project["requires-python"], "pyproject.toml requires-python")[1]


def locked() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^ \\\n]+)", (ROOT / "requirements.lock").read_text(), re.M)
    return {normalise(n): v for n, v in pins}


def test_environment_names_the_packages_and_bounds_of_pyproject():
    conda, pip, other = conda_env(ROOT / "environment.yml")
    declared, python = pyproject()
    assert conda.pop("python") == python
    both = conda.keys() & pip.keys()
    assert not both, f"in environment.yml both as conda and pip packages: {sorted(both)}"
    env = conda | pip
    assert sorted(env.keys() - declared.keys()) == [], "in environment.yml, not in pyproject.toml"
    assert sorted(declared.keys() - env.keys()) == [], "in pyproject.toml, missing from environment.yml"
    assert {n: (env[n], declared[n]) for n in env if env[n] != declared[n]} == {}, \
        "lower bounds differ: (environment.yml, pyproject.toml)"
    assert other == ["-e ."], "environment.yml installs the checkout itself, editable"


def test_pip_section_holds_exactly_the_packages_conda_forge_lacks():
    conda, pip, _ = conda_env(ROOT / "environment.yml")
    assert set(pip) == PIP_ONLY
    assert not PIP_ONLY & set(conda)


def test_the_lock_meets_every_bound_of_the_environment():
    conda, pip, _ = conda_env(ROOT / "environment.yml")
    python = conda.pop("python")
    pins = locked()
    assert len(pins) > 50
    for name, low in (conda | pip).items():
        assert name in pins, f"{name} (environment.yml) is not pinned in requirements.lock"
        assert version(pins[name]) >= version(low), f"lock pins {name}=={pins[name]}, environment.yml asks >={low}"
    # the lock was resolved for a Python that environment.yml admits
    header = "".join((ROOT / "requirements.lock").read_text().splitlines(keepends=True)[:3])
    m = re.search(r"--python-version (\S+)", header)
    assert m, header
    assert version(m.group(1)) >= version(python), (m.group(1), python)


def test_the_rules_conda_environment_agrees_with_environment_yml():
    conda, pip, _ = conda_env(ROOT / "environment.yml")
    rconda, rpip, _ = conda_env(ROOT / "rules" / "envs" / "optcomp.yaml")
    env = conda | pip
    rules = rconda | rpip
    assert rules.keys() <= env.keys(), sorted(rules.keys() - env.keys())
    assert {n: (rules[n], env[n]) for n in rules if rules[n] != env[n]} == {}


@pytest.mark.parametrize("text, message", [
    ("dependencies:\n  - numpy\n", "'numpy' is not of the form NAME>=VERSION"),
    ("dependencies:\n  - numpy==1.26\n", "'numpy==1.26' is not of the form"),
    ("dependencies:\n  - pip:\n      - dp-accounting<1\n", "pip: dependency 'dp-accounting<1'"),
    ("name: x\n", "no 'dependencies' list"),
])
def test_a_malformed_environment_is_rejected_naming_the_entry(tmp_path, text, message):
    path = tmp_path / "environment.yml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        conda_env(path)
