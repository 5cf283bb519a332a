"""The worker's own bound on a sandbox's processes (sandbox/census.py), where RLIMIT_NPROC does not
bind (uid 0): the decision to count, on a scripted host task count, over a real process tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gpu_workers.harness.sandbox import census
from gpu_workers.harness.sandbox.census import ProcessWatch, processes_under

# A parent that starts five sleeping children and waits.
_TREE = """
import os, time
for _ in range(5):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


def _tree() -> subprocess.Popen:
    tree = subprocess.Popen(
        [sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert tree.stdout.readline().strip() == "ready"
    assert processes_under(tree.pid) == 6
    return tree


def _watched(tree: subprocess.Popen, host_counts: list[int], limit: int) -> bool:
    """Whether a watch with `limit` over `tree` killed it while the host held `host_counts` tasks
    in turn (the last one repeated). Waits for the watch to have read every count and two more
    (not for a time: a busy host may run its thread late), or for it to kill."""
    calls = []

    def scripted() -> int:
        calls.append(1)
        return host_counts[min(len(calls), len(host_counts)) - 1]

    real = census.host_tasks
    census.host_tasks = scripted
    pidfd = os.pidfd_open(tree.pid)
    try:
        watch = ProcessWatch(tree.pid, pidfd, limit)
        deadline = time.monotonic() + 60
        while len(calls) < len(host_counts) + 2 and not watch.tripped:
            assert time.monotonic() < deadline, "the watch never read the host's task count"
            time.sleep(census.PERIOD_S)
        watch.stop()
        return watch.tripped
    finally:
        census.host_tasks = real
        os.close(pidfd)
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()


def test_a_sandbox_that_grows_while_the_hosts_other_work_ends_is_still_counted():
    # 1000 tasks on the host when the watch began; 600 of the others ended, then the sandbox
    # grew by 6 (the tree already holds them: the watch sees its count only when it counts)
    tree = _tree()
    assert _watched(tree, [1000, 400, 406], limit=3)
    assert tree.returncode == -signal.SIGKILL
    # known-bad: the same tree under a limit above what it holds is left alone
    assert not _watched(_tree(), [1000, 400, 406], limit=10)


def test_a_host_whose_other_work_grew_never_kills_a_sandbox_within_its_limit():
    # the host gained 500 tasks, none of them the sandbox's: counted once, found within
    assert not _watched(_tree(), [1000, 1500], limit=10)
