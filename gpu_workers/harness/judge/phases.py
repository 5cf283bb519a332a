"""Seconds per named phase of a piece of judging work: where a judged step's time goes (waiting
for the GPU lock, starting runners, eager alone, trials, timing, stopping the candidate; its
verdict's `phases_s`) and a baselines measurement's (the reference's start, the lock, each
function's first call, where torch.compile compiles, the timing, the counts)."""

from __future__ import annotations

import time
from contextlib import contextmanager


class Phases:
    """Seconds per phase, summed where a phase comes back (a step's attempts)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + seconds, 3)
