"""The per-GPU readers-writer lock between processes: timing alone, untimed work shared, and a
process waiting to time not starved by sharers. Each contender is a process of its own, holding
until the test tells it to let go; whether one waits is read from the kernel's table of flock
waiters (/proc/locks), never from how long it took, so a busy host cannot fail these."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu_workers.harness.judge import gpu_lock

CONTENDER = """
import sys
from gpu_workers.harness.judge import gpu_lock
take = {"alone": gpu_lock.hold, "shared": gpu_lock.share}[sys.argv[1]]
with take("cpu"):
    print("held", flush=True)
    sys.stdin.readline()
print("let go", flush=True)
"""


class Contender:
    def __init__(self, mode: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CONTENDER, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def state(self, deadline_s: float = 120) -> str:
        """ "held" once it holds the lock, "waiting" once the kernel lists it as a flock waiter
        (on the lock or its turnstile). Asked only where nothing was just let go: a waiter
        stays listed for a moment after its turn has come."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                return self.lines.get(timeout=0.02)
            except queue.Empty:
                if self.proc.pid in _flock_waiters():
                    return "waiting"
        raise AssertionError("the contender neither took the lock nor waited for it")

    def holds(self) -> bool:
        return self.lines.get(timeout=120) == "held"

    def let_go(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.lines.get(timeout=120) == "let go"
        self.proc.wait(timeout=120)


def _flock_waiters() -> set[int]:
    """Pids blocked in flock: /proc/locks lists each waiter as `N: -> FLOCK ... PID ...`."""
    waiters = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[2] == "FLOCK":
            waiters.add(int(fields[5]))
    return waiters


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path / "cache"))
    os.makedirs(tmp_path / "cache", exist_ok=True)
    contenders: list[Contender] = []
    yield contenders
    for contender in contenders:
        contender.proc.kill()


def _contend(contenders: list[Contender], mode: str) -> Contender:
    contender = Contender(mode)
    contenders.append(contender)
    return contender


def test_sharers_hold_the_lock_together(_own_cache):
    first = _contend(_own_cache, "shared")
    assert first.state() == "held"
    second = _contend(_own_cache, "shared")
    # known-bad (a shared hold taken alone): "waiting"
    assert second.state() == "held"
    first.let_go()
    second.let_go()


def test_timing_waits_for_sharers_and_they_for_it(_own_cache):
    sharer = _contend(_own_cache, "shared")
    assert sharer.state() == "held"
    timer = _contend(_own_cache, "alone")
    assert timer.state() == "waiting"
    sharer.let_go()
    assert timer.holds()
    later = _contend(_own_cache, "shared")
    assert later.state() == "waiting"
    other_timer = _contend(_own_cache, "alone")
    assert other_timer.state() == "waiting"
    timer.let_go()
    winner = _first_to_hold(later, other_timer)
    loser = other_timer if winner is later else later
    assert loser.state() == "waiting"  # a sharer and a timer never hold it together
    winner.let_go()
    assert loser.holds()
    loser.let_go()


def _first_to_hold(*contenders: Contender) -> Contender:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for contender in contenders:
            try:
                assert contender.lines.get(timeout=0.02) == "held"
                return contender
            except queue.Empty:
                pass
    raise AssertionError("neither took the lock")


def test_a_process_waiting_to_time_keeps_later_sharers_out(_own_cache):
    """A run's untimed steps come one after another; without the turnstile a sharer arriving
    while another shares would pass a waiting timer every time, and timing could wait for
    ever (known-bad: the later sharer "held" at once)."""
    sharer = _contend(_own_cache, "shared")
    assert sharer.state() == "held"
    timer = _contend(_own_cache, "alone")
    assert timer.state() == "waiting"
    later = _contend(_own_cache, "shared")
    assert later.state() == "waiting"
    sharer.let_go()
    assert timer.holds()
    assert later.state() == "waiting"
    timer.let_go()
    assert later.holds()
    later.let_go()


def test_seconds_held_are_counted_per_mode():
    alone, shared = gpu_lock.held_seconds("alone"), gpu_lock.held_seconds("shared")
    with gpu_lock.hold("cpu"):
        time.sleep(0.01)
    assert gpu_lock.held_seconds("alone") > alone and gpu_lock.held_seconds("shared") == shared
    with gpu_lock.share("cpu"):
        time.sleep(0.01)
    assert gpu_lock.held_seconds("shared") > shared
    assert gpu_lock.held_seconds() == pytest.approx(
        gpu_lock.held_seconds("alone") + gpu_lock.held_seconds("shared")
    )
