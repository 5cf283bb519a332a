"""A per-GPU lock held while verifying and profiling: several agent runs share a GPU (they mostly
wait on their model) but only one at a time measures on it, so timings stay clean."""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gpu_workers.harness import settings

# Seconds this process has held a device lock, summed: a run's GPU time is the difference over
# the run (a worker process runs one task at a time).
_held_s = 0.0


def held_seconds() -> float:
    return _held_s


@contextmanager
def hold(device: str) -> Iterator[float]:
    """Blocks until this process owns the device; yields the seconds it waited."""
    name = f"gpu{settings.gpu_index()}" if device == "cuda" else "cpu"
    lock_dir = settings.cache_dir() / "locks"
    lock_dir.mkdir(exist_ok=True)
    started = time.monotonic()
    with open(lock_dir / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
        acquired = time.monotonic()
        try:
            yield acquired - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            global _held_s
            _held_s += time.monotonic() - acquired
