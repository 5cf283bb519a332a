"""The lock on a device's measurements. Several agent runs share a GPU (they mostly wait on their
model) but only one at a time measures on it, so timings stay clean: verify, profile, a re-grade
and baselines `hold` it exclusively.

On the cpu target the device is the host's cores, and compiling uses every one of them (ninja
runs a job per core): a re-grade timed while a run compiled beside it measured 0.37x for a
kernel that measured 1.43x alone. So there a build holds the same lock shared (`compiling`):
builds never wait for each other, and a timing waits until every build under way has finished.
A timing that waits goes through a turnstile that new builds must pass too, so a stream of
overlapping builds cannot keep it waiting forever. On a GPU a build touches no device, and a
judged step does not wait for builds; but baselines (eager and torch.compile, which carry more
host work per call than a candidate) are measured `quiet`: no build under way beside them. On
one H200 with four runs compiling, torch.compile measured a median 5% slower (up to 27%) than
on a quieter host, and every ratio divided by it grew (threat 11, by the harness itself). There
builds hold a lock of their own shared, and a quiet measurement holds it exclusively, through
the same turnstile, before the GPU lock."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from gpu_workers.harness import settings

log = logging.getLogger(__name__)

# A wait or a hold this long is logged, the wait again at each further multiple, naming the
# holder: on one H200 four runs once went four minutes with no judged step ended, and nothing
# said which step held the device.
SLOW_S = 60.0

# Seconds this process has held a device lock, summed: a run's GPU time is the difference over
# the run (a worker process runs one task at a time).
_held_s = 0.0


def held_seconds() -> float:
    return _held_s


def _lock_path(device: str, suffix: str = "", host_wide: bool = False) -> Path:
    """A lock file of this device (on a GPU host, of the worker's GPU), or with `host_wide` of
    the whole host's builds: a host's GPUs share its cores."""
    name = "cpu" if device != "cuda" else "gpus" if host_wide else f"gpu{settings.gpu_index()}"
    lock_dir = settings.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    return lock_dir / f"{name}{suffix}.lock"


@contextmanager
def _flocked(path: Path, mode: int) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, mode)  # released by the kernel if this process dies
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _turnstile(device: str) -> Iterator[None]:
    """Passed by every build, and by every timing that waits for builds (on cpu all of them, on
    a GPU the quiet ones), before its lock: a timing waits in it, so builds that come after it
    wait for it."""
    with _flocked(_lock_path(device, ".turnstile", host_wide=True), fcntl.LOCK_EX):
        yield


def _builds_lock(device: str) -> Path:
    """What builds hold shared: on cpu the measurement lock itself, on a GPU host a lock of
    their own, the host's, that only quiet measurements take exclusively."""
    return _lock_path(device) if device == "cpu" else _lock_path(device, ".builds", host_wide=True)


@contextmanager
def hold(device: str, what: str = "", quiet: bool = False) -> Iterator[float]:
    """Blocks until this process owns the device (no other timing, and on cpu, or where `quiet`,
    no build under way); yields the seconds it waited. `what` names the measurement for whoever
    waits behind it (the holder's note) and for the log. Baselines are measured quiet."""
    started = time.monotonic()
    what = what or "a measurement"
    with ExitStack() as held:
        with _waiting_reported(device, what):
            if device == "cpu" or quiet:
                with _turnstile(device):
                    held.enter_context(_flocked(_builds_lock(device), fcntl.LOCK_EX))
            if device != "cpu":
                held.enter_context(_flocked(_lock_path(device), fcntl.LOCK_EX))
        acquired = time.monotonic()
        log.debug("%s measurement lock taken after %.2f s", device, acquired - started)
        _note_holder(device, what)
        try:
            yield acquired - started
        finally:
            global _held_s
            took = time.monotonic() - acquired
            _held_s += took
            if took > SLOW_S:
                log.warning("%s measurement lock held %.0f s by %s", device, took, what)


def holder(device: str) -> str:
    """The note of the process that took the device's lock last (it may have let go since)."""
    try:
        return _lock_path(device, ".holder").read_text().strip()
    except OSError:
        return ""


def _note_holder(device: str, what: str) -> None:
    """Written by the holder alone, under the lock: its pid, what it measures, and since when."""
    since = time.strftime("%H:%M:%S")
    try:
        _lock_path(device, ".holder").write_text(f"pid {os.getpid()}: {what}, since {since}\n")
    except OSError:  # a note for the logs, never a reason to fail a measurement
        pass


@contextmanager
def _waiting_reported(device: str, what: str) -> Iterator[None]:
    """While the caller waits for the lock, a warning every SLOW_S naming the holder."""
    done = threading.Event()

    def report() -> None:
        waited = 0.0
        while not done.wait(SLOW_S):
            waited += SLOW_S
            log.warning(
                "%s waited %.0f s for the %s measurement lock, held by %s",
                what,
                waited,
                device,
                holder(device) or "an unknown process",
            )

    reporter = threading.Thread(target=report, name="gpu-lock-wait", daemon=True)
    reporter.start()
    try:
        yield
    finally:
        done.set()


@contextmanager
def compiling(device: str) -> Iterator[None]:
    """Held while a build runs, shared: on cpu no timing runs beside a build, on a GPU no quiet
    one (a build takes no device time, but it takes the host's cores)."""
    with ExitStack() as held:
        with _turnstile(device):
            held.enter_context(_flocked(_builds_lock(device), fcntl.LOCK_SH))
        yield
