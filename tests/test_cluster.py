"""The pipeline through a real SLURM scheduler (marker ``cluster``).

``config/test.yaml`` runs through ``--profile profiles/slurm`` (snakemake-executor-plugin-slurm:
sbatch, status through sacct, outputs back on the shared file system) in one temporary copy
of the workflow and with ``--cores 2`` in another; the tests then check that

* every job of the cluster run was a SLURM job that sacct reports (not a local run);
* the CSVs (and their provenance sidecars) are byte-identical to the local run's, timings aside;
* a job that fails on the cluster -- here the ``notebook`` job of a notebook made unreadable
  for the first run -- is reported with its SLURM log path, and that log holds the error;
* the rerun after the fix resumes: it submits only the failed job, nothing that had finished.

Those four (marker ``cluster``) need a scheduler that answers (``sinfo`` and ``sacct``): ``workflow/cluster/local-slurm.sh up``
brings up a single-node one on this machine.  Without one the tests are skipped, saying why;
with ``OPTCOMP_REQUIRE_CLUSTER=1`` (as ``.ci/run`` sets after ``up``) that is a failure instead.
About 5 minutes on 2 cores (4 min 46 s at load 2).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("snakemake")
pytest.importorskip("snakemake_executor_plugin_slurm")

ROOT = Path(__file__).resolve().parents[1]
COPY = ["Snakefile", "rules", "config", "notebooks", "profiles", "results/timing/reference"]
TEST_CONFIG = ["--configfile", "config/test.yaml"]
# the cluster path as the README gives it; status checks every 10 s instead of the plugin's
# 40 s (a local scheduler answers at once), and no retry of the job meant to fail
CLUSTER = ["--profile", "profiles/slurm", *TEST_CONFIG, "--slurm-init-seconds-before-status-checks", "10"]
BROKEN_NOTEBOOK = "notebooks/01_homogeneous.ipynb"


def run(cmd: list[str], cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)


def snakemake(workdir: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "snakemake", *args], cwd=workdir, timeout=timeout)


def tail(proc: subprocess.CompletedProcess, n: int = 60) -> str:
    return "\n".join(proc.stdout.splitlines()[-n:])


def no_scheduler() -> str | None:
    """Why no SLURM scheduler answers here, or None if sinfo and sacct both answer."""
    for tool in ("sinfo", "sacct", "sbatch"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found: no SLURM here (workflow/cluster/local-slurm.sh up starts a local one)"
    for cmd in (["sinfo", "-h", "-o", "%a"], ["sacct", "-n", "-X", "-o", "JobID"]):
        try:
            proc = run(cmd, timeout=20)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(cmd)}` did not answer within 20 s"
        if proc.returncode != 0:
            last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
            return f"`{' '.join(cmd)}` failed ({last[:200]})"
        if cmd[0] == "sinfo" and "up" not in proc.stdout.split():
            return "sinfo answers but no partition is up"
    return None


@pytest.fixture(scope="module")
def scheduler() -> None:
    reason = no_scheduler()
    if reason is None:
        return
    if os.environ.get("OPTCOMP_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"OPTCOMP_REQUIRE_CLUSTER=1 but no SLURM scheduler answers: {reason}")
    pytest.skip(f"no SLURM scheduler answers: {reason}")


def workflow_copy(work: Path) -> Path:
    for name in COPY:
        src, dst = ROOT / name, work / name
        if src.is_dir():
            shutil.copytree(src, dst)  # (the reference timings are committed inputs: no rule writes them)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return work


def result_files(work: Path) -> dict[str, bytes]:
    """Every CSV, Markdown table and provenance sidecar under results/, timings aside."""
    files = sorted(p for p in (work / "results").rglob("*")
                   if p.is_file() and (p.suffix in {".csv", ".md"} or p.name.endswith(".meta.json")))
    return {str(p.relative_to(work)): p.read_bytes() for p in files if "timing" not in p.relative_to(work).parts}


def submitted(proc: subprocess.CompletedProcess) -> dict[str, str]:
    """SLURM job id -> rule, from the plugin's submission lines
    ("Job 3 has been submitted with SLURM jobid 9 (log: .../slurm_logs/rule_NAME/...)")."""
    return dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/rule_(\w+)/", proc.stdout))


def job_stats(proc: subprocess.CompletedProcess) -> dict[str, int]:
    stats = proc.stdout.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)
            if m.group(1) != "total"}


@pytest.fixture(scope="module")
def local_run(scheduler, tmp_path_factory) -> Path:
    work = workflow_copy(tmp_path_factory.mktemp("local"))
    proc = snakemake(work, "--cores", "2", *TEST_CONFIG)
    assert proc.returncode == 0, tail(proc)
    return work


@pytest.fixture(scope="module")
def cluster_runs(scheduler, tmp_path_factory):
    """(work, first run with one broken notebook, rerun after restoring it, the executed
    notebooks there were after the first run)."""
    work = workflow_copy(tmp_path_factory.mktemp("cluster"))
    (work / BROKEN_NOTEBOOK).write_text("this is not a notebook\n")
    first = snakemake(work, *CLUSTER, "--keep-going", "--retries", "0")
    executed = sorted(p.name for p in (work / "results/notebooks").glob("*.ipynb"))
    shutil.copy(ROOT / BROKEN_NOTEBOOK, work / BROKEN_NOTEBOOK)
    second = snakemake(work, *CLUSTER)
    return work, first, second, executed


@pytest.mark.cluster
def test_every_job_ran_as_a_slurm_job_and_sacct_reports_it(cluster_runs):
    work, first, second, _ = cluster_runs
    jobs = submitted(first) | submitted(second)
    assert len(jobs) >= 15, tail(first)
    assert {"homogeneous_family", "heterogeneous_chunk", "timing", "hardness_instance", "notebook"} <= set(jobs.values())
    proc = run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(jobs)])
    assert proc.returncode == 0, proc.stdout
    states = dict(line.split("|", 1) for line in proc.stdout.splitlines() if line.strip())
    assert set(states) == set(jobs), (sorted(states), sorted(jobs))
    failed = [j for j, s in states.items() if s != "COMPLETED"]
    assert [jobs[j] for j in failed] == ["notebook"], states


@pytest.mark.cluster
def test_cluster_results_are_byte_identical_to_a_local_run(cluster_runs, local_run):
    work, _, second, _ = cluster_runs
    assert second.returncode == 0, tail(second)
    cluster, local = result_files(work), result_files(local_run)
    assert len(local) >= 20 and any(p.endswith(".meta.json") for p in local)
    assert cluster.keys() == local.keys()
    assert [p for p in local if cluster[p] != local[p]] == []
    # the timing tables exist on both sides (their numbers measure the machine, not compared)
    for name in ["approx_vs_k", "exact_heterogeneous", "hardness"]:
        assert (work / f"results/timing/local/{name}.csv").stat().st_size > 0, name


@pytest.mark.cluster
def test_a_failed_job_is_reported_with_its_slurm_log(cluster_runs):
    work, first, _, executed = cluster_runs
    assert first.returncode != 0, tail(first)
    failed = re.findall(r"SLURM-job '(\d+)' failed", first.stdout)
    assert len(failed) == 1, tail(first)
    # "log: results/logs/..., /.../.snakemake/slurm_logs/rule_notebook/01_homogeneous/<id>.log"
    logs = re.findall(rf"log: .*?(\S*slurm_logs/rule_notebook/01_homogeneous/{failed[0]}\.log)", first.stdout)
    assert logs, tail(first)
    log = Path(logs[0]) if Path(logs[0]).is_absolute() else work / logs[0]
    assert log.is_file(), log  # a failed job's SLURM log is kept (successful ones are deleted)
    assert "Notebook does not appear to be JSON" in log.read_text(), log.read_text()[-2000:]
    # the other notebooks and every sweep finished (--keep-going): only the broken one is missing
    sources = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert executed == [name for name in sources if name != Path(BROKEN_NOTEBOOK).name], executed


@pytest.mark.cluster
def test_the_rerun_resumes_with_only_the_failed_job(cluster_runs):
    _, first, second, _ = cluster_runs
    assert second.returncode == 0, tail(second)
    assert job_stats(second) == {"all": 1, "notebook": 1}, tail(second)
    assert list(submitted(second).values()) == ["notebook"]
    assert job_stats(first)["notebook"] >= 4 and job_stats(first)["timing"] >= 5


# ------------------------------------------------------- config/paper.yaml (default suite, no scheduler)


def slurm_rules() -> dict[str, str]:
    """rule name -> its text, for every rule of rules/*.smk that runs as a SLURM job
    (not ``localrule: True``)."""
    out = {}
    for path in sorted((ROOT / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule )", path.read_text()):
            m = re.match(r"rule (\w+):", block)
            if m and "localrule: True" not in block:
                out[m.group(1)] = block
    return out


def test_every_cluster_rule_declares_threads_memory_and_runtime():
    rules = slurm_rules()
    assert {"homogeneous_family", "heterogeneous_chunk", "hardness_instance", "timing", "notebook",
            "kov_section4_noise_chunk", "kov_section4_geometric_chunk", "kov_section4_black_box_chunk"} <= rules.keys()
    for name, block in rules.items():
        for key in ("threads:", "mem_mb=", "runtime="):
            assert key in block, f"rule {name} (a SLURM job) declares no {key.rstrip(':=')}"


def test_paper_config_splits_into_at_least_50_slurm_jobs(tmp_path):
    import yaml

    work = workflow_copy(tmp_path)
    proc = snakemake(work, "-n", "--profile", "profiles/slurm", "--configfile", "config/paper.yaml", timeout=300)
    assert proc.returncode == 0, tail(proc)
    stats = job_stats(proc)
    jobs = {rule: n for rule, n in stats.items() if rule in slurm_rules()}
    assert sum(jobs.values()) >= 50, stats
    assert jobs["heterogeneous_chunk"] >= 30 and jobs["homogeneous_family"] >= 16, jobs
    # one job per (distribution, seed, share of the k grid) and one per hardness instance, to k = 24
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    het, hard = paper["heterogeneous"], paper["hardness"]
    assert jobs["heterogeneous_chunk"] == len(het["distribution"]) * len(het["seed"]) * het["chunks"], jobs
    assert len(het["distribution"]) >= 2 and len(het["seed"]) >= 2 and het["k"]["to"] >= 10**5
    assert jobs["hardness_instance"] == sum(len(ks) for ks in hard["families"].values()), jobs
    assert max(k for ks in hard["families"].values() for k in ks) == 24
    # KOV Section 4: a job per (budget, mechanism, share of k), per (eps, k) and per (workload, share)
    kov = paper["kov_section4"]
    mechanisms = len(kov.get("mechanisms", ["gaussian", "laplace", "staircase", "geometric"]))
    assert jobs["kov_section4_noise_chunk"] == len(kov["budgets"]) * mechanisms * kov["chunks"] >= 50, jobs
    assert jobs["kov_section4_geometric_chunk"] == len(kov["geometric"]["eps"]) * len(kov["geometric"]["k"]), jobs
    assert jobs["kov_section4_black_box_chunk"] == len(kov["black_box"]["workloads"]) * kov["chunks"], jobs
    assert max(kov["k"]) >= 10**6 and len(kov["budgets"]) >= 4
    # the rules' declared requests reach the scheduler: the profile overrides none of them
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    for rule, res in (profile.get("set-resources") or {}).items():
        assert not {"mem_mb", "runtime", "threads", "cpus_per_task"} & set(res), (rule, res)
