"""A per-GPU readers-writer lock. Timing holds it alone (`hold`): several agent runs share a GPU,
but only one at a time measures on it, so timings stay clean. GPU work that times nothing (a
candidate's trials, loading and lowering a problem, making inputs, counting FLOPs) shares it
(`share`): such work of several runs overlaps, and never runs beside a measurement.

Two `flock`s per device, both released by the kernel if a process dies: the lock itself
(exclusive or shared) and a turnstile every taker passes through first, so a process waiting to
time keeps later sharers out and is not starved by a stream of them."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpu_workers.harness import settings

# Seconds this process has held a device lock, summed per mode: a run's GPU time is the
# difference over the run (a worker process runs one task at a time).
_held_s = {"alone": 0.0, "shared": 0.0}


def held_seconds(mode: str | None = None) -> float:
    """Seconds held alone (timing) or shared; both, summed, without a mode."""
    return _held_s[mode] if mode else sum(_held_s.values())


@contextmanager
def hold(device: str) -> Iterator[float]:
    """Blocks until this process owns the device alone; yields the seconds it waited."""
    with _locked(device, fcntl.LOCK_EX, "alone") as waited:
        yield waited


@contextmanager
def share(device: str) -> Iterator[float]:
    """Blocks until no process holds the device alone and none waits to; yields the seconds it
    waited. Never taken inside `hold` or another `share` of the same process: two open files of
    one lock exclude each other, so that would wait forever."""
    with _locked(device, fcntl.LOCK_SH, "shared") as waited:
        yield waited


@contextmanager
def _locked(device: str, operation: int, mode: str) -> Iterator[float]:
    lock_file, turnstile_file = _paths(device)
    started = time.monotonic()
    with open(lock_file, "a") as lock, open(turnstile_file, "a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, operation)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        acquired = time.monotonic()
        try:
            yield acquired - started
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            _held_s[mode] += time.monotonic() - acquired


def _paths(device: str) -> tuple[Path, Path]:
    name = f"gpu{settings.gpu_index()}" if device == "cuda" else "cpu"
    lock_dir = settings.cache_dir() / "locks"
    lock_dir.mkdir(exist_ok=True)
    return lock_dir / f"{name}.lock", lock_dir / f"{name}.turnstile"
