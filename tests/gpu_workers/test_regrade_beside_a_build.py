"""On the cpu target a re-grade never times while another candidate is being built on the same
cores: the build, a real compile in another process, holds the measurement lock shared, and the
re-grade's every timing waits for it (gpu_workers/harness/judge/gpu_lock.py). Known-bad, before
builds took the lock: the re-grade timed while the other process's compiler ran, as in the
re-grade that measured 0.37x for a kernel the run had measured at 1.43x."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gpu_workers.harness.judge import gpu_lock
from tests.conftest import REPO, problem_source
from tests.gpu_workers.test_agent_run import fixture_files
from tests.gpu_workers.test_regrade import finished_run, graded
from webapp import dispatch
from webapp.leaderboard.models import GradeStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
COMPILERS = {"cc1plus", "ninja", "g++", "c++", "as", "ld", "collect2"}

# A candidate whose build takes tens of seconds by construction: g++ evaluates each assertion's
# loop at compile time (about 0.5 s each on a busy 2-core host), longer than a re-grade takes
# to reach its first timing. The nonce keeps it out of the compile cache.
SLOW_TO_BUILD = """
constexpr long spin(long n, long k) {
  long x = k;
  for (long i = 0; i < n; ++i) x += (i ^ k) % 7;
  return x;
}
#define S(k) static_assert(spin(250000, k) > 0, "spin");
#define S10(k) S(k##0) S(k##1) S(k##2) S(k##3) S(k##4) S(k##5) S(k##6) S(k##7) S(k##8) S(k##9)
S10(1) S10(2) S10(3)
"""

BUILDER = """
import sys
from pathlib import Path
from gpu_workers.harness.build import compile, workspace
from tests.conftest import candidate_dir

space = workspace.create(Path(sys.argv[1]), "class Model: ...", "cpu")
workspace.copy_candidate(space, candidate_dir("cpu", "good_relu_scale"))
space.write_file("kernels/slow.cpp", sys.stdin.read())
print("building", flush=True)
result = compile.build(space, "cpu")
print("built" if result.ok else result.log, flush=True)
"""


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setitem(dispatch.SENDERS, "regrade_run", lambda *args: None)


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process below `pid`, read from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended while read
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        parents[int(stat.parent.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), name)
    found, frontier = [], {pid}
    while frontier:
        children = [(p, n) for p, (ppid, n) in parents.items() if ppid in frontier]
        found += children
        frontier = {p for p, _ in children}
    return found


def compiling_below(pid: int) -> bool:
    return any(name in COMPILERS for _, name in descendants(pid))


class LockTakings(logging.Handler):
    """At the moment this process takes the measurement lock, whether the other process's
    compiler is running."""

    def __init__(self, builder_pid: int):
        super().__init__(logging.DEBUG)
        self.builder_pid, self.compiler_alive = builder_pid, []

    def emit(self, record: logging.LogRecord) -> None:
        if "measurement lock taken" in record.getMessage():
            self.compiler_alive.append(compiling_below(self.builder_pid))


@pytest.mark.usefixtures(
    "drift_of_a_quiet_host", "regrade_of_a_quiet_host"
)  # ranked, whatever the host
def test_a_regrade_does_not_time_while_another_candidate_builds(alice, tmp_path):
    builder = subprocess.Popen(
        [sys.executable, "-c", BUILDER, str(tmp_path / "other-run")],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    builder.stdin.write(SLOW_TO_BUILD + f"// {uuid.uuid4()}\n")
    builder.stdin.close()
    assert builder.stdout.readline().strip() == "building"
    deadline = time.monotonic() + 300
    while not compiling_below(builder.pid):
        assert builder.poll() is None and time.monotonic() < deadline, "no compiler ever ran"
        time.sleep(0.1)

    takings = LockTakings(builder.pid)
    lock_log = logging.getLogger(gpu_lock.__name__)
    lock_log.addHandler(takings)
    # a logging dictConfig run by an earlier test (Django's) may have disabled existing loggers
    level, disabled = lock_log.level, lock_log.disabled
    lock_log.setLevel(logging.DEBUG)  # setLevel, not .level: it clears the level cache
    lock_log.disabled = False
    try:
        run = finished_run(alice, problem_source("relu_scale"), fixture_files("good_relu_scale"))
        grade = graded(run)
    finally:
        lock_log.removeHandler(takings)
        lock_log.setLevel(level)
        lock_log.disabled = disabled
    assert builder.stdout.read().strip() == "built" and builder.wait() == 0

    assert grade.status == GradeStatus.RANKED, grade.reasons
    assert takings.compiler_alive, "the re-grade never took the measurement lock"
    assert not any(takings.compiler_alive), takings.compiler_alive  # it waited for the build
