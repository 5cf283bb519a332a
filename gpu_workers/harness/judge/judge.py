"""The judge: the trusted side of an evaluation. It never imports or runs user code. It draws the
seeds, owns every buffer (gpu_workers.harness.judge.shared_buffers), has the reference runner fill
sets of inputs and reference outputs, lends the candidate runner copies of the inputs, compares
what comes back on the device, and times batches of calls with its own clock.

Sets live in numbered slots: slot 0 for correctness trials, 1..k for the rotating timing sets,
and more for validation. A slot's buffers are reused while the set's shapes stay the same.
"""

from __future__ import annotations

import math
import os
import secrets
import statistics
from dataclasses import dataclass, field

import torch

from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.judge.runner_process import RunnerError, RunnerProcess
from gpu_workers.harness.judge.shared_buffers import (
    DeviceMemoryExhausted,
    SharedBuffer,
    allocate,
    dtype_of,
)
from gpu_workers.harness.judge.source_gate import Violation
from gpu_workers.harness.judge.timing import CacheFlusher

# Elements compared at a time: bounds the judge's scratch memory on multi-GB outputs.
_COMPARE_CHUNK = 1 << 24
TRIAL_SLOT = 0
TIMING_SLOTS = (1, 2, 3)
# The rotating timing sets, each held twice (the reference's and the candidate's copy), may take
# this share of the device's memory; the rest is the runners' own (a forward's outputs and
# intermediates, torch.compile's buffers). KernelBench's activations have 6 GiB inputs.
_TIMING_MEMORY_SHARE = 0.4


def fresh_seeds(count: int) -> list[int]:
    """Drawn when a trial starts; given only to the reference runner."""
    return [secrets.randbelow(2**31 - 2) + 1 for _ in range(count)]


@dataclass
class LentSet:
    """Buffers lent to one runner for one slot: inputs (None for plain values) and outputs."""

    meta: tuple
    values: list  # typed tensors over the buffers, or the plain values themselves
    outputs: list[torch.Tensor]
    buffers: list[SharedBuffer] = field(default_factory=list)
    runner: RunnerProcess | None = None  # the process they are lent to

    def free(self) -> None:
        for buffer in self.buffers:
            buffer.free()


# The judge's own allocations failing for want of device memory (its buffers, or torch's memory
# for its comparisons): the machine's failure (failure.INFRASTRUCTURE), judged again once.
OUT_OF_MEMORY = (DeviceMemoryExhausted, torch.OutOfMemoryError)


def release_cached_memory(device: str) -> None:
    """Hands torch's cached blocks back to the driver, for the runs sharing the device: only
    after the judge ran out of memory, since otherwise the next step's allocations reuse them."""
    if device == "cuda":
        torch.cuda.empty_cache()


def _lend(runner: RunnerProcess, slot: int, inputs: list[dict], outputs: list[dict], device: str):
    """Allocates buffers for `inputs` and `outputs` and maps them into the runner's slot; where
    one cannot be allocated, those before it are freed."""
    specs_in, specs_out, fds, buffers, values, outs = [], [], [], [], [], []
    try:
        for spec in inputs:
            if "value" in spec:
                specs_in.append({"value": spec["value"]})
                values.append(spec["value"])
                continue
            buffer, tensor, exported = _buffer(spec, device)
            buffers.append(buffer)
            values.append(tensor)
            specs_in.append({**spec, "buffer": exported[0]})
            fds += [exported[1]] if exported[1] is not None else []
        for spec in outputs:
            buffer, tensor, exported = _buffer(spec, device)
            buffers.append(buffer)
            outs.append(tensor)
            specs_out.append({**spec, "buffer": exported[0]})
            fds += [exported[1]] if exported[1] is not None else []
    except BaseException:
        for buffer in buffers:
            buffer.free()
        raise
    runner.call("bind", fds=fds, slot=slot, inputs=specs_in, outputs=specs_out)
    return LentSet(_meta(inputs, outputs), values, outs, buffers, runner)


def _buffer(spec: dict, device: str):
    dtype = dtype_of(spec["dtype"])
    shape = [int(n) for n in spec["shape"]]
    buffer = allocate(_nbytes(spec), device)
    try:
        return buffer, buffer.tensor(dtype, shape), buffer.export()
    except BaseException:
        buffer.free()
        raise


def _meta(inputs: list[dict], outputs: list[dict]) -> tuple:
    def key(spec):
        return ("value",) if "value" in spec else (spec["dtype"], tuple(spec["shape"]))

    return tuple(map(key, inputs)), tuple(map(key, outputs))


class Judge:
    """One evaluation's trusted state: the sets it made and the buffers it lent."""

    def __init__(self, device: str, protocol: Protocol):
        self.device = device
        self.protocol = protocol
        self.reference_sets: dict[int, LentSet] = {}
        self.candidate_sets: dict[int, LentSet] = {}
        self.largest_set_bytes = 0
        self._flusher: CacheFlusher | None = None

    def flush_caches(self) -> None:
        """Evicts the last-level cache from this process, just before a runner's timed call."""
        if self._flusher is None:
            self._flusher = CacheFlusher(self.device)
        self._flusher()

    # ---- sets ----
    def make_set(
        self, reference: RunnerProcess, slot: int, seed: int, probe: str | None = None
    ) -> LentSet:
        """The reference runner draws inputs for `seed` (moved by an input-sensitivity `probe`)
        and computes the reference outputs into this slot's buffers (lent anew when the shapes
        change)."""
        reply = reference.call("make", slot=slot, seed=seed, probe=probe)
        meta = _meta(reply["inputs"], reply["outputs"])
        set_bytes = sum(map(_nbytes, (*reply["inputs"], *reply["outputs"])))
        self.largest_set_bytes = max(self.largest_set_bytes, set_bytes)
        held = self.reference_sets.get(slot)
        if held and held.meta == meta and held.runner is reference and reply["shared"]:
            held.values = [
                spec["value"] if "value" in spec else value
                for spec, value in zip(reply["inputs"], held.values, strict=True)
            ]
            return held
        if held:
            held.free()
        held = _lend(reference, slot, reply["inputs"], reply["outputs"], self.device)
        self.reference_sets[slot] = held
        reference.call("share", slot=slot)
        return held

    def lend_to_candidate(self, candidate: RunnerProcess, slot: int) -> LentSet:
        """Copies of the slot's inputs, and output buffers poisoned with NaN, lent to the
        candidate: it never sees the reference's buffers."""
        reference = self.reference_sets[slot]
        held = self.candidate_sets.get(slot)
        # a Python number among the inputs (A * s) is bound by value: drawn anew for another
        # seed, it is lent anew, or the candidate would be judged on the first seed's number
        stale = held and _numbers(held.values) != _numbers(reference.values)
        if not held or held.meta != reference.meta or held.runner is not candidate or stale:
            if held:
                held.free()
            inputs = [_spec_of(v) for v in reference.values]
            outputs = [_spec_of(t) for t in reference.outputs]
            held = _lend(candidate, slot, inputs, outputs, self.device)
            self.candidate_sets[slot] = held
        with torch.no_grad():
            for mine, theirs in zip(held.values, reference.values, strict=True):
                if isinstance(mine, torch.Tensor):
                    mine.copy_(theirs)
            for out in held.outputs:
                _poison(out)
        if self.device == "cuda":
            torch.cuda.synchronize()
        return held

    def lend_outputs(self, runner: RunnerProcess, slot: int, like: LentSet) -> LentSet:
        """Output buffers shaped like another set's outputs, lent in a slot of their own."""
        held = _lend(runner, slot, [], [_spec_of(t) for t in like.outputs], self.device)
        self.reference_sets[slot] = held
        return held

    def timing_slots(self) -> tuple[int, ...]:
        """The slots timed batches rotate through: three where they fit, fewer for sets of
        several GiB. Any number is safe against replayed results, since every set is drawn
        afresh each round and every timed output is checked; more sets only vary the inputs
        within a batch. Asked before any set exists, the answer would be three for any size."""
        if not self.largest_set_bytes:
            raise RuntimeError("timing_slots: make a set first, its size decides how many fit")
        per_slot = 2 * self.largest_set_bytes
        fit = int(_TIMING_MEMORY_SHARE * device_memory_bytes(self.device) // per_slot)
        return TIMING_SLOTS[: max(1, min(len(TIMING_SLOTS), fit))]

    def release(self, *slots: int) -> None:
        """Frees the sets of `slots`, on both sides, so their memory can hold the next ones: the
        runner unmaps them first, since memory a process still maps stays allocated."""
        for sets in (self.reference_sets, self.candidate_sets):
            for slot in slots:
                held = sets.pop(slot, None)
                if held:
                    _unmap(held, slot)
                    held.free()

    def free(self) -> None:
        for held in (*self.reference_sets.values(), *self.candidate_sets.values()):
            held.free()
        self.reference_sets.clear()
        self.candidate_sets.clear()
        self._flusher = None


def _numbers(values: list) -> list:
    return [v for v in values if not isinstance(v, torch.Tensor)]


def _unmap(held: LentSet, slot: int) -> None:
    try:
        held.runner.call("release", slots=[slot])
    except RunnerError:
        pass  # a runner that died or hung has no mappings left once it is stopped


def device_memory_bytes(device: str) -> int:
    if device == "cuda":
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _nbytes(spec: dict) -> int:
    if "value" in spec:
        return 0
    return math.prod(int(n) for n in spec["shape"]) * dtype_of(spec["dtype"]).itemsize


def _spec_of(value) -> dict:
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape)}
    return {"value": value}


def _poison(out: torch.Tensor) -> None:
    if out.is_floating_point() or out.is_complex():
        out.fill_(float("nan"))
    elif out.dtype == torch.bool:
        out.fill_(True)
    else:
        out.fill_(torch.iinfo(out.dtype).max)


# ---- comparing ----


def meta_mismatch(expected: list[torch.Tensor], got: list[dict] | None, label: str):
    """A violation when the candidate's outputs differ in number, dtype or shape."""
    if got is None:
        return Violation("output_type", f"{label}: forward must return tensors")
    if len(got) != len(expected):
        return Violation("mismatch", f"{label}: {len(got)} outputs, expected {len(expected)}")
    for i, (ref, spec) in enumerate(zip(expected, got, strict=True)):
        want = (str(ref.dtype).removeprefix("torch."), list(ref.shape))
        if (spec["dtype"], list(spec["shape"])) != want:
            return Violation(
                "mismatch",
                f"{label} output {i}: got {tuple(spec['shape'])} {spec['dtype']}, "
                f"expected {tuple(ref.shape)} {want[0]}",
            )
    return None


def check_outputs(judge: Judge, expected: LentSet, lent: LentSet, reply: dict, label: str):
    """A candidate call's outputs, in the buffers lent to it, against the reference's."""
    inf = float("inf")
    wrong = meta_mismatch(expected.outputs, reply.get("outputs"), label)
    if wrong:
        return [wrong], inf, inf
    if not reply.get("copied"):
        return [Violation("mismatch", f"{label}: the outputs never arrived")], inf, inf
    return compare(expected.outputs, lent.outputs, judge.protocol, label)


def compare(
    reference: list[torch.Tensor], candidate: list[torch.Tensor], protocol: Protocol, label: str
) -> tuple[list[Violation], float, float]:
    """Violations, max abs error and relative error ‖out−ref‖/‖ref‖, computed in chunks on the
    device the tensors live on."""
    found, max_abs, max_rel = [], 0.0, 0.0
    for i, (ref, out) in enumerate(zip(reference, candidate, strict=True)):
        name = f"{label} output {i}"
        stats = _chunked_stats(ref.reshape(-1), out.reshape(-1), protocol)
        abs_err, nan_bad, bad = stats["max_abs"], stats["nan_bad"], stats["bad"]
        rel_err = math.sqrt(stats["sq_diff"]) / max(math.sqrt(stats["sq_ref"]), 1e-30)
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        if nan_bad:
            found.append(
                Violation(
                    "nan_output",
                    f"{name}: NaN where the reference has a number "
                    "(an output element never written?)",
                )
            )
        if bad:
            found.append(
                Violation(
                    "mismatch",
                    f"{name}: {bad} of {ref.numel()} elements outside "
                    f"atol={protocol.atol} rtol={protocol.rtol} "
                    f"(max abs err {abs_err:.3g}, rel err {rel_err:.3g})",
                )
            )
    return found, max_abs, max_rel


def _chunked_stats(ref: torch.Tensor, out: torch.Tensor, protocol: Protocol) -> dict:
    """The comparison's sums over chunks of the outputs, kept on the device and read once at
    the end (a read per chunk and statistic waited on the device ~500 times for a 6 GiB
    output). Floating outputs with no NaN or infinity on either side (nearly every call) are
    compared in fp32, in a few passes; the rest, in float64 with NaN and infinities placed."""
    stats = {"max_abs": 0.0, "nan_bad": 0, "bad": 0, "sq_diff": 0.0, "sq_ref": 0.0}
    if torch.equal(ref, out) and not (ref.is_floating_point() and bool(ref.isnan().any())):
        return stats  # bit-exact: nothing to measure (most integer and many pointwise outputs)
    chunk_stats = _finite_chunk if _all_finite(ref, out) else _any_chunk
    # max abs error, NaN where the reference has a number, squared error, squared reference,
    # elements outside the tolerance (counts are exact in float64 up to 2**53)
    totals = torch.zeros(5, dtype=torch.float64, device=ref.device)
    with torch.no_grad():
        for start in range(0, ref.numel(), _COMPARE_CHUNK):
            chunk = chunk_stats(
                ref[start : start + _COMPARE_CHUNK], out[start : start + _COMPARE_CHUNK], protocol
            )
            totals[0] = torch.maximum(totals[0], chunk[0])
            totals[1:] += chunk[1:]
    max_abs, nan_bad, sq_diff, sq_ref, bad = totals.tolist()
    return {
        "max_abs": max_abs,
        "nan_bad": int(nan_bad),
        "bad": int(bad),
        "sq_diff": sq_diff,
        "sq_ref": sq_ref,
    }


# Floating dtypes whose values fp32 holds exactly, for the fp32 comparison.
_FP32_EXACT = frozenset({torch.float32, torch.float16, torch.bfloat16})


def _all_finite(ref: torch.Tensor, out: torch.Tensor) -> bool:
    if ref.dtype not in _FP32_EXACT or out.dtype != ref.dtype:
        return False
    finite = torch.ones((), dtype=torch.bool, device=ref.device)
    for start in range(0, ref.numel(), _COMPARE_CHUNK):
        for tensor in (ref, out):
            finite &= tensor[start : start + _COMPARE_CHUNK].isfinite().all()
    return bool(finite)


def _finite_chunk(ref: torch.Tensor, out: torch.Tensor, protocol: Protocol) -> torch.Tensor:
    """isclose's rule, |out - ref| <= atol + rtol * |ref|, in fp32 with no NaN to place."""
    r, o = ref.float(), out.float()
    error = torch.sub(o, r).abs_()
    allowed = r.abs().mul_(protocol.rtol).add_(protocol.atol)
    return torch.stack(
        [
            error.max().double(),
            torch.zeros((), dtype=torch.float64, device=ref.device),
            torch.sum(error * error, dtype=torch.float64),
            torch.sum(r * r, dtype=torch.float64),
            (error > allowed).sum().double(),
        ]
    )


def _any_chunk(ref: torch.Tensor, out: torch.Tensor, protocol: Protocol) -> torch.Tensor:
    """In float64: NaN on both sides agrees, NaN or infinity against a number does not."""
    r, o = ref.double(), out.double()
    delta = (o - r).nan_to_num(nan=float("inf"))
    delta = delta.masked_fill(o.isnan() & r.isnan(), 0.0)
    close = torch.isclose(o, r, atol=protocol.atol, rtol=protocol.rtol, equal_nan=True)
    return torch.stack(
        [
            delta.abs().max(),
            (o.isnan() & ~r.isnan()).sum(),
            (delta * delta).sum(),
            (r.nan_to_num(0.0) ** 2).sum(),
            (~close).sum(),
        ]
    ).double()


def inputs_changed(lent: LentSet, reference: LentSet) -> list[int]:
    """Which inputs the candidate modified (threat 3), against the reference runner's copies."""
    return [
        i
        for i, (mine, theirs) in enumerate(zip(lent.values, reference.values, strict=True))
        if isinstance(mine, torch.Tensor) and not bitwise_equal(mine, theirs)
    ]


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same bits: an input holding NaN (never equal to itself) is unchanged when its bits
    are, and a candidate that rewrites a NaN's payload or a zero's sign has changed it."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():
        as_int = _SAME_SIZE_INT[a.element_size()]
        a, b = a.view(as_int), b.view(as_int)
    return torch.equal(a, b)


# ---- timing ----


@dataclass
class Batches:
    """What one participant's timed batches gave: each call's claimed time, and the judge's
    own wall time around each batch."""

    times_ms: list[float] = field(default_factory=list)
    walls_ms: list[float] = field(default_factory=list)
    overheads_ms: list[float] = field(default_factory=list)  # wall minus the claimed times

    def add(self, times: list[float], wall_ms: float) -> None:
        self.times_ms += times
        self.walls_ms.append(wall_ms)
        self.overheads_ms.append(wall_ms - sum(times))

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def spread(self) -> float:
        if len(self.times_ms) < 4:
            return float("inf")
        q = statistics.quantiles(self.times_ms, n=4)
        return (q[2] - q[0]) / self.median_ms if self.median_ms > 0 else float("inf")

    @property
    def median_error(self) -> float:
        """The median's standard error over the median: 1.2533 sigma / sqrt(n), sigma from the
        median absolute deviation, which a busy host's stray stalls do not inflate. What
        decides when timing has enough calls: an IQR under 1% is rare for a GPU call's
        microseconds of launch jitter, however many calls were timed."""
        if len(self.times_ms) < 4 or self.median_ms <= 0:
            return float("inf")
        middle = self.median_ms
        deviation = statistics.median(abs(t - middle) for t in self.times_ms)
        return 1.2533 * 1.4826 * deviation / math.sqrt(len(self.times_ms)) / middle

    def summary(self) -> dict:
        if not self.times_ms:
            return {}  # stopped by a violation before any call was recorded
        return {
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "spread": self.spread,
            "samples": len(self.times_ms),
        }


def timed_call(
    judge: Judge, runner: RunnerProcess, fn: str, slot: int, into: str, timeout_s: float, **extra
):
    """One timed call on the runner, the caches flushed here first and the call observed from
    here: (claimed ms, judge wall ms, the reply)."""
    judge.flush_caches()
    reply = runner.call("time", fn=fn, slot=slot, into=into, timeout_s=timeout_s, **extra)
    claimed = reply.get("time_ms")
    if not isinstance(claimed, int | float) or not math.isfinite(claimed) or claimed < 0:
        claimed = float("inf")  # a nonsense claim is no time at all
    return float(claimed), runner.last_wall_ms, reply


def judge_call(judge: Judge, expected: LentSet, lent: LentSet, reply: dict, label: str):
    """Everything the judge checks of one candidate call, a trial or a timed one: what its
    process reported against itself, its outputs against the reference's, its inputs against
    the reference runner's copies, and what its stopped sandbox holds. (violations, max abs
    error, relative error)"""
    found = claimed_violations(reply, label)
    wrong, abs_err, rel_err = check_outputs(judge, expected, lent, reply, label)
    found += wrong
    found += [
        Violation("input_mutated", f"{label}: input {i} was modified")
        for i in inputs_changed(lent, expected)
    ]
    found += sandbox_violations(lent.runner, label)
    return found, abs_err, rel_err


def claimed_violations(reply: dict, label: str) -> list[Violation]:
    """What the candidate's process reported about itself, named by the judge's label for the
    call: only ever a reason to fail."""
    found = []
    for item in reply.get("violations") or []:
        if isinstance(item, dict) and isinstance(item.get("code"), str):
            detail = str(item.get("detail", ""))[:500]
            found.append(Violation(item["code"][:40], f"{label}: {detail}"))
    return found


def sandbox_violations(runner: RunnerProcess, label: str) -> list[Violation]:
    """Processes or threads the candidate's sandbox gained since its first call (counted from
    outside while it is stopped): work that could run beside the judge's. The first call's
    census is the warm one."""
    if runner.warm_census is None:
        runner.mark_warm()
        return []
    gained = runner.gained_since_warm()
    if not gained:
        return []
    detail = f"{label}: its sandbox holds {gained} more than after its first call"
    return [Violation("async_work", detail)]


def unexplained_ms(candidate: Batches, calibration: Batches) -> tuple[float, float]:
    """How much longer, per batch, the judge saw the candidate's batches take than its claimed
    times explain, beyond what the same batch costs a process whose times are believed (the
    reference runner's eager batch of the same round: flushes, copies, the round trip); and the
    noise of that difference. Rounds are paired, so a slow moment of the host cancels."""
    gaps = [
        mine - theirs
        for mine, theirs in zip(candidate.overheads_ms, calibration.overheads_ms, strict=False)
    ]
    middle = statistics.median(gaps)
    spread = statistics.median(abs(g - middle) for g in gaps)  # median absolute deviation
    return middle, spread


def unexplained_floor_ms(candidate: Batches, calibration: Batches) -> float:
    """The same gap between each side's cheapest batch. A busy host only ever adds time, so
    the least overhead each side reached is its cost on a quiet moment: a candidate that hides
    work in every call cannot bring its floor down to the calibration's, however noisy the
    rounds that make the median's deviation too wide to tell."""
    return min(candidate.overheads_ms) - min(calibration.overheads_ms)
