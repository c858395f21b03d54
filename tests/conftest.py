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
# CPU on two cores, while the rest of the suite runs beside it.  So when the session is going to
# need it, the run starts at the session's first test, in a copy of the workflow, as its own
# process group beside the other tests (niced); ``pipeline`` waits for it.  The run and every
# check on it are the same as when it ran in the fixture itself (a ``pytest tests/test_pipeline.py``
# starts it at once, as before).
#
# Under pytest-xdist (``-n 2``) every worker collects the whole session, so each would start the
# run: the first to take the lock in the session's shared temporary folder starts it, the others
# find its process group there; the run's exit status is a file in that folder, so whichever
# worker runs the tests of tests/test_pipeline.py can wait for it.  Those tests share one copy of
# the workflow (and Snakemake's lock on it), so they run on one worker, in file order (the
# ``xdist_group`` below, with ``--dist loadgroup``), and the run is stopped by the controller at
# the end of the session (a worker that finishes early must not stop it under the other's tests).

PIPELINE_COPY = ["Snakefile", "rules", "config", "notebooks", "profiles", "results/timing/reference"]
PIPELINE_COMMAND = ["--cores", "2", "--configfile", "config/test.yaml"]

# The process the run is: ``python -m snakemake ...`` as its child, whose exit status it writes
# (atomically) to a file, so that a process other than its parent can wait for it.  It outlives
# a SIGTERM to the group (a handler, not SIG_IGN, so the child gets the default action), so that
# ``stop`` gives Snakemake its own shutdown before the SIGKILL.
_RECORD_STATUS = """\
import os, signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *_: None)
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(status))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


def _xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


class PipelineRun:
    """``python -m snakemake --cores 2 --configfile config/test.yaml`` in a fresh copy of the
    workflow (``work``: no results/ or figures/ but the committed reference timings), started
    at once in ``base`` unless a process of this session already started it there (``attach``
    then only finds it); its merged output goes to ``log`` (beside ``work``, not in it)."""

    def __init__(self, base: Path, attach: bool = False):
        import fcntl
        import shutil
        import subprocess
        import sys
        import threading

        root = Path(__file__).resolve().parents[1]
        self.work, self.log = base / "work", base / "snakemake.log"
        self.status, pid = base / "status", base / "pid"
        base.mkdir(parents=True, exist_ok=True)
        with open(base / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
            if pid.exists() or attach:
                self.pgid = int(pid.read_text())
                return
            for name in PIPELINE_COPY:
                src, dst = root / name, self.work / name
                dst.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
            with open(self.log, "wb") as out:
                # its own process group (stop() ends the run and every job it started, nothing else),
                # at a lower priority than the tests: the tests that run meanwhile keep their core,
                # the workflow takes what is left (and all of it while ``pipeline`` waits)
                proc = subprocess.Popen([sys.executable, "-c", _RECORD_STATUS, str(self.status),
                                         sys.executable, "-m", "snakemake", *PIPELINE_COMMAND], cwd=self.work,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=lambda: os.nice(10))
            threading.Thread(target=proc.wait, daemon=True).start()  # reaped as soon as it ends
            self.pgid = proc.pid
            pid.write_text(str(proc.pid))

    def _exit_status(self) -> int | None:
        """The run's exit status, -1 if it is gone without one (killed), None while it runs."""
        with contextlib.suppress(FileNotFoundError):
            return int(self.status.read_text())
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):  # (it may have ended since the first look)
                return int(self.status.read_text())
            return -1
        return None

    def _wait(self, timeout: float) -> int | None:
        import time

        deadline = time.monotonic() + timeout
        while (status := self._exit_status()) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        return status

    def wait(self, timeout: float) -> int:
        """The run's exit status (it is stopped, and the status is -1, after ``timeout`` s)."""
        status = self._wait(timeout)
        if status is None:
            self.stop()
            return -1
        return status

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        import signal

        if self._exit_status() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):  # Snakemake's own shutdown first, then the rest
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            self._wait(timeout=30)


@pytest.fixture(scope="session", autouse=True)
def _provenance_cache(tmp_path_factory):
    """The session's code-hash cache (:mod:`optcomp.provenance`): a fresh folder of its own,
    shared with the processes the session starts (the workflow's jobs), so that a test run
    neither reads nor fills the user's ~/.cache (a value already set is kept).  (Under
    pytest-xdist each worker has its own: a cache is only a cache.)"""
    if "OPTCOMP_PROVENANCE_CACHE" in os.environ:
        yield
        return
    os.environ["OPTCOMP_PROVENANCE_CACHE"] = str(tmp_path_factory.mktemp("provenance-cache"))
    yield
    os.environ.pop("OPTCOMP_PROVENANCE_CACHE", None)


def _pipeline_base(basetemp: Path) -> Path:
    """The run's folder: in the session's temporary folder, which under pytest-xdist is the
    controller's, the parent of every worker's own."""
    return (basetemp.parent if _xdist_worker() else basetemp) / "pipeline"


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory, _provenance_cache):
    """The workflow run of tests/test_pipeline.py (see above), stopped at the end of the session
    if it is still going (an interrupted session)."""
    run = PipelineRun(_pipeline_base(tmp_path_factory.getbasetemp()))
    yield run
    if not _xdist_worker():  # (under xdist: the controller, at the end of the session)
        run.stop()


@pytest.fixture(scope="session", autouse=True)
def _pipeline_starts_with_the_session(request):
    """Start ``pipeline_run`` at the first test if any selected test will use the run."""
    if any("pipeline" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("pipeline_run")


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests that use a module-scoped fixture of their test module (the
    workflow run's ``pipeline``, the built HTML of tests/test_docs.py, the hang cases' processes
    of tests/test_domain.py, ...) go to one worker, in file order (``--dist loadgroup``): the
    fixture is made once, as in one process, and the tests on the workflow run never run two at
    once in its copy.  The rest go to whichever worker is free."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for name in getattr(item, "fixturenames", ()):
            defs = getattr(info, "name2fixturedefs", {}).get(name) or ()
            if name == "pipeline" or any(d.scope == "module" and d.baseid.endswith(".py") for d in defs[-1:]):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
                break


def pytest_sessionfinish(session):
    """Under pytest-xdist, the controller stops the workflow run if it is still going, once every
    worker is done (an interrupted session)."""
    if session.config.pluginmanager.hasplugin("dsession") and not _xdist_worker():
        base = _pipeline_base(session.config._tmp_path_factory.getbasetemp())
        if (base / "pid").is_file():
            PipelineRun(base, attach=True).stop()
