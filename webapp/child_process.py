"""Child processes that cannot outlive the process that started them.

Each child leads a process group of its own (a Celery worker's pool children are in it), so that
a Ctrl-C meant for the parent reaches a child only when the parent stops it, and stopping a child
stops everything it forked. On Linux each child also asks the kernel to SIGKILL it when its parent
dies (PR_SET_PDEATHSIG), so a parent killed hard (SIGKILL, out of memory) leaves nothing behind:
Celery's pool children ask the same of the worker, and the sandbox's bubblewrap dies with its
parent too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the forked child only calls it (loading a library after fork can hang).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def start(
    command: list[str], cpus: frozenset[int] | None = None, **popen_options
) -> subprocess.Popen:
    """Starts `command` in a process group of its own, to die with this process; kept to the
    cores `cpus` when given (its children inherit them)."""
    parent = os.getpid()

    def die_with_parent() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took hold
            os.kill(os.getpid(), signal.SIGKILL)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen(
        command, start_new_session=True, preexec_fn=die_with_parent, **popen_options
    )


def stop(process: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM to the child, then SIGKILL to whatever of its group is left after `timeout_s` (a
    worker still finishing its task, a pool child)."""
    # The leader only: a Celery worker then finishes its task and stops its pool itself, where
    # a SIGTERM to the pool child would kill the task at once.
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    kill(process)


def stop_together(processes: list[subprocess.Popen], timeout_s: float) -> None:
    """`stop` for several at once: SIGTERM to each leader, one deadline for all of them, then
    SIGKILL to each group left; so a stack of twelve workers, each finishing a task, stops in
    `timeout_s`, not twelve times that."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + timeout_s
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for process in processes:
        kill(process)


def kill(process: subprocess.Popen) -> None:
    """SIGKILL to the child's group, then reaps the child."""
    _signal_group(process, signal.SIGKILL)
    process.wait()


def exit_reason(returncode: int) -> str:
    """ "killed by SIGKILL" for -9, "exited with code 1" for 1."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)  # the group id is the leader's pid (start_new_session)
    except ProcessLookupError:
        pass  # the whole group has exited
