"""The one timing function: interleaved, cache-flushed, rotated-input timing of several callables.

Every function under test is timed in the same process, round by round in a rotating order, so
drift (clocks, temperature, neighbours) falls on all of them alike. On cuda each call is bracketed
by CUDA events after an L2 flush and the device is synchronised before the time is read; host wall
time is recorded beside it, so work hidden on another stream or thread shows up as a gap.

Imported by sandboxed children before any candidate code, so the clocks it binds at import time
cannot be patched by the candidate afterwards.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

# Bound at import, before any candidate module is imported (threat 6: patched timers).
_perf_counter = time.perf_counter
_monotonic = time.monotonic
_Event = torch.cuda.Event
_elapsed_time = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize


@dataclass
class Timing:
    times_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def spread(self) -> float:
        """Interquartile range over the median."""
        if len(self.times_ms) < 4:
            return float("inf")
        q = statistics.quantiles(self.times_ms, n=4)
        return (q[2] - q[0]) / self.median_ms if self.median_ms > 0 else float("inf")

    @property
    def wall_median_ms(self) -> float:
        return statistics.median(self.wall_ms)

    def summary(self) -> dict:
        return {
            "median_ms": self.median_ms,
            "spread": self.spread,
            "wall_median_ms": self.wall_median_ms,
            "samples": len(self.times_ms),
        }


class CacheFlusher:
    """Writes a buffer larger than the last-level cache, so the next call starts cold. The judge
    runs one in its own process before every timed call of a runner: nothing the timing depends
    on lives where a candidate can reach it (a flush inside the candidate's process could be
    shrunk or skipped by its code)."""

    def __init__(self, device: str):
        self.device = device
        if device == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
            nbytes = max(2 * l2, 128 << 20)
        else:
            nbytes = 64 << 20
        self.buffer = torch.empty(nbytes // 4, dtype=torch.float32, device=device)

    def __call__(self) -> None:
        self.buffer.fill_(1.0)
        if self.device == "cuda":
            _synchronize()  # the flush is done before the runner's call is sent


def _time_call_cuda(fn: Callable, args: Sequence) -> tuple[float, float, object]:
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    t0 = _perf_counter()
    _record(start)
    out = fn(*args)
    _record(end)
    _synchronize()  # the whole device, so work left on other streams is waited for too
    wall = (_perf_counter() - t0) * 1e3
    return _elapsed_time(start, end), wall, out


def _time_call_cpu(fn: Callable, args: Sequence) -> tuple[float, float, object]:
    t0 = _perf_counter()
    out = fn(*args)
    elapsed = (_perf_counter() - t0) * 1e3
    return elapsed, elapsed, out


def time_call(fn: Callable, args: Sequence, device: str) -> tuple[float, object]:
    """One call between CUDA events (a host timer on cpu), the device synchronised before the
    time is read; returns its time and output. What a runner times for the judge, which has
    flushed the caches just before and whose own clock around the command decides whether the
    time is believed. The device is idle when the call starts, so the time includes what it
    costs to launch (as KernelBench times it)."""
    time_one = _time_call_cuda if device == "cuda" else _time_call_cpu
    elapsed, _, out = time_one(fn, args)
    return elapsed, out


def measure(
    fns: dict[str, Callable],
    input_sets: Sequence[Sequence],
    *,
    device: str,
    warmup: int = 3,
    min_rounds: int = 10,
    max_rounds: int = 2000,
    target_spread: float = 0.01,
    budget_s: float = 3.0,
) -> tuple[dict[str, Timing], dict[str, list]]:
    """Times each function on rotating input sets; returns timings and, per function, the output
    of its last timed call on each input set. Outputs stay alive until the end, so no function
    can pick up another's result from freed memory, and the candidate's can be re-checked."""
    time_call = _time_call_cuda if device == "cuda" else _time_call_cpu
    flush = CacheFlusher(device)
    names = list(fns)
    for name in names:
        for args in input_sets[:warmup] or input_sets:
            fns[name](*args)
    if device == "cuda":
        _synchronize()
    timings = {name: Timing() for name in names}
    kept: dict[str, list] = {name: [None] * len(input_sets) for name in names}
    deadline = _monotonic() + budget_s
    for round_index in range(max_rounds):
        set_index = round_index % len(input_sets)
        rotation = round_index % len(names)
        for name in names[rotation:] + names[:rotation]:
            flush()
            event_ms, wall_ms, out = time_call(fns[name], input_sets[set_index])
            timings[name].times_ms.append(event_ms)
            timings[name].wall_ms.append(wall_ms)
            kept[name][set_index] = out
        if round_index + 1 >= min_rounds and (
            all(t.spread < target_spread for t in timings.values()) or _monotonic() > deadline
        ):
            break
    return timings, kept
