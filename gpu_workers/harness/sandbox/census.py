"""How many processes a sandbox holds, watched from the worker. RLIMIT_NPROC bounds a sandbox's
processes only where the worker is not root: the kernel exempts uid 0, and a GPU host's worker
runs as root (CUDA IPC needs the sandbox to keep the worker's uid). So a fork bomb in a runner
was bounded only by its step's timeout, time enough to take every pid of the host.

A watcher thread per sandbox reads /proc/loadavg (the host's task count, one small read) every
PERIOD_S; only when the host has gained more tasks than the sandbox may hold does it count the
sandbox's own (its init and every descendant, in /proc), and kills the whole pid namespace
through the init's pidfd when they are too many. A fork bomb gets PERIOD_S (and however long a
busy host keeps the watcher from running), a few thousand processes, before it ends; an honest
step pays one read of /proc/loadavg per period."""

from __future__ import annotations

import os
import signal
import threading

PERIOD_S = 0.05


def host_tasks() -> int:
    with open("/proc/loadavg") as stats:
        return int(stats.read().split()[3].split("/")[1])


def processes_under(pid: int) -> int:
    """`pid` and all its descendants that still exist."""
    return len(descendants(pid))


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, parents before children; a process that ended while
    it was being read is skipped."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone since its parent listed it
        found.append(current)
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as children:
                    stack.extend(int(child) for child in children.read().split())
            except OSError:
                pass
    return found


class ProcessWatch:
    """Kills the sandbox whose init is `init_pid` (signalled through `init_pidfd`) once it holds
    more than `limit` processes; `tripped` says it did. Ends when the init exits or on stop()."""

    def __init__(self, init_pid: int, init_pidfd: int, limit: int):
        self.limit = limit
        self.tripped = False
        self._pid, self._pidfd = init_pid, init_pidfd
        self._stop = threading.Event()
        self._baseline = host_tasks()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(PERIOD_S):
            tasks = host_tasks()
            # the host's other work may end while the sandbox grows: gains count from the least
            # the host held, so what others gave up is never room for the sandbox
            self._baseline = min(self._baseline, tasks)
            if tasks - self._baseline <= self.limit:
                continue
            if not os.path.exists(f"/proc/{self._pid}"):
                return
            held = processes_under(self._pid)
            if held > self.limit:
                self.tripped = True
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except OSError:
                    pass
                return
            # the host's other work grew: count again only once it grows as much more
            self._baseline = host_tasks() - held

    def stop(self) -> None:
        """Before the pidfd is closed: the watcher must not signal a reused descriptor."""
        self._stop.set()
        self._thread.join()
