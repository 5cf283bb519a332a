"""Stopping a candidate's whole sandbox between the judge's commands, and counting what it holds.

A candidate's code runs in its runner's process, so anything it starts there (a native thread,
a forked child) would otherwise run while the judge writes its inputs, times eager or flushes
the caches, and could compute an output before the timed call begins. Between commands the
judge stops every process of the sandbox with SIGSTOP (the host allows it everywhere; a cgroup
freezer needs a delegated cgroup, which neither the CI host nor the lent GPU machines give a
worker) and waits until every thread of each reports the stopped state; SIGCONT lets them go on
when the next command is sent. Work already queued on a GPU is not stopped by this: see
docs/verification.md, "What remains possible".

Stopped, the sandbox cannot fork or start threads, so one census of it is exact: how many
processes and threads it holds, which the judge compares with what it held after the warm-up
call (threat 5, counted from outside as during trials and timing alike).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from gpu_workers.harness.sandbox.census import descendants

# How long the threads of a stopped sandbox may take to reach the stopped state: a thread in
# the kernel (a driver call, a page fault) stops when it returns to user space.
STOP_WAIT_S = 5.0


class NotStopped(Exception):
    """A thread of the sandbox did not stop in time."""


@dataclass(frozen=True)
class Census:
    processes: int
    threads: int

    def grew_from(self, before: Census) -> str | None:
        """What the sandbox gained since `before`, in words, or None."""
        gained = []
        if self.processes > before.processes:
            gained.append(f"{self.processes - before.processes} process(es)")
        if self.threads > before.threads:
            gained.append(f"{self.threads - before.threads} thread(s)")
        return " and ".join(gained) or None


class Freezer:
    """Stops and resumes every process under `root` (the sandbox's init, or an unconfined
    child's own pid)."""

    def __init__(self, root: int):
        self.root = root
        self.frozen = False

    def freeze(self) -> Census:
        """Stops the sandbox; returns once every thread in it is stopped."""
        deadline = time.monotonic() + STOP_WAIT_S
        signalled: set[int] = set()
        while True:
            pids = descendants(self.root)
            for pid in pids:
                if pid not in signalled:
                    _signal(pid, signal.SIGSTOP)
                    signalled.add(pid)
            threads = _running_threads(pids)
            # a process forked just before its parent stopped is found on the next pass
            if threads is not None and set(pids) == set(descendants(self.root)):
                self.frozen = True
                return Census(processes=len(pids), threads=threads)
            if time.monotonic() > deadline:
                raise NotStopped(f"the sandbox did not stop within {STOP_WAIT_S:.0f} s")
            time.sleep(0.0002)

    def thaw(self) -> None:
        for pid in descendants(self.root):
            _signal(pid, signal.SIGCONT)
        self.frozen = False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _running_threads(pids: list[int]) -> int | None:
    """The number of threads of `pids`, or None while any of them is not yet stopped."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            state = _state(pid, task)
            if state is None:
                continue
            if state not in "TtZX":
                return None
            total += 1
    return total


def _state(pid: int, task: str) -> str | None:
    try:
        with open(f"/proc/{pid}/task/{task}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    return text[text.rindex(")") + 2]
