"""Shared fixtures of the test suite."""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

import pytest
from hypothesis import settings

# The default run is deterministic: every property test draws the same examples on every
# machine and run (derandomized, no example database), so CI can never fail by chance and a
# failure reproduces anywhere.  Exploration -- fresh random examples, with a local database
# that replays what failed -- is one flag away:
#   pytest --hypothesis-profile=explore        (or OPTCOMP_HYPOTHESIS_PROFILE=explore)
# Tests that pin their own settings (derandomize, max_examples) keep them under both.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("OPTCOMP_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def address_space_cap():
    """Cap this process's address space at 4 GiB for a module: a huge k or count must
    never allocate O(k), and a regression is then a MemoryError here, not an OOM on a
    shared machine.  Modules opt in with ``pytestmark = pytest.mark.usefixtures(...)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = 4 * 2**30
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ------------------------------------------------------------- the workflow run, in the background
#
# tests/test_pipeline.py checks one run of the whole figure workflow on config/test.yaml (its
# module fixture ``pipeline``).  That run is some 60 jobs, each a fresh interpreter: minutes of
# CPU on two cores, while the rest of the suite runs on one core in this process.  So when the
# session is going to need it, the run starts at the session's first test, in a copy of the
# workflow, as its own process group beside the other tests (niced); ``pipeline`` waits for it.
# The run and every check on it are the same as when it ran in the fixture itself (a
# ``pytest tests/test_pipeline.py`` starts it at once, as before).

PIPELINE_COPY = ["Snakefile", "rules", "config", "notebooks", "profiles", "results/timing/reference"]
PIPELINE_COMMAND = ["--cores", "2", "--configfile", "config/test.yaml"]


class PipelineRun:
    """``python -m snakemake --cores 2 --configfile config/test.yaml`` in a fresh copy of the
    workflow (``work``: no results/ or figures/ but the committed reference timings), started
    at once; its merged output goes to ``log`` (beside ``work``, not in it)."""

    def __init__(self, base: Path):
        import shutil
        import subprocess
        import sys

        root = Path(__file__).resolve().parents[1]
        self.work, self.log = base / "work", base / "snakemake.log"
        for name in PIPELINE_COPY:
            src, dst = root / name, self.work / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        with open(self.log, "wb") as out:
            # its own process group (stop() ends the run and every job it started, nothing else),
            # at a lower priority than this process: the tests that run meanwhile keep their core,
            # the workflow takes what is left (and all of it while ``pipeline`` waits)
            self.proc = subprocess.Popen([sys.executable, "-m", "snakemake", *PIPELINE_COMMAND], cwd=self.work,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=lambda: os.nice(10))

    def wait(self, timeout: float) -> int:
        """The run's exit status (it is stopped, and the status is -1, after ``timeout`` s)."""
        import subprocess

        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            return -1

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        import signal
        import subprocess

        if self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):  # Snakemake's own shutdown first, then the rest
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)


@pytest.fixture(scope="session", autouse=True)
def _provenance_cache(tmp_path_factory):
    """The session's code-hash cache (:mod:`optcomp.provenance`): a fresh folder of its own,
    shared with the processes the session starts (the workflow's jobs), so that a test run
    neither reads nor fills the user's ~/.cache (a value already set is kept)."""
    if "OPTCOMP_PROVENANCE_CACHE" in os.environ:
        yield
        return
    os.environ["OPTCOMP_PROVENANCE_CACHE"] = str(tmp_path_factory.mktemp("provenance-cache"))
    yield
    os.environ.pop("OPTCOMP_PROVENANCE_CACHE", None)


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory, _provenance_cache):
    """The workflow run of tests/test_pipeline.py (see above), stopped at the end of the session
    if it is still going (an interrupted session)."""
    run = PipelineRun(tmp_path_factory.mktemp("pipeline"))
    yield run
    run.stop()


@pytest.fixture(scope="session", autouse=True)
def _pipeline_starts_with_the_session(request):
    """Start ``pipeline_run`` at the first test if any selected test will use the run."""
    if any("pipeline" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("pipeline_run")
