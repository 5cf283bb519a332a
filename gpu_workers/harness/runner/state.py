"""What a runner holds between the judge's commands, and the commands both roles answer: map
lent buffers into a slot (`bind`), give them back (`release`), and time one call (`time`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpu_workers.harness.judge import timing
from gpu_workers.harness.judge.shared_buffers import LentBuffer, dtype_name, dtype_of, open_lent
from gpu_workers.harness.judge.source_gate import Violation
from gpu_workers.harness.runner import problem as problem_mod


@dataclass
class Slot:
    """One input set and the buffers its outputs go to."""

    inputs: list = field(default_factory=list)  # lent tensors, or plain values
    outputs: list[torch.Tensor] = field(default_factory=list)  # lent, typed
    lent: list[LentBuffer] = field(default_factory=list)
    sink: list[torch.Tensor] = field(default_factory=list)  # private, for untrusted-free copies


@dataclass
class RunnerState:
    role: str
    device: str = "cpu"
    slots: dict[int, Slot] = field(default_factory=dict)
    functions: dict[str, Callable[[], Callable]] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def synchronize(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


def describe(tensors: list[torch.Tensor]) -> list[dict]:
    return [{"dtype": dtype_name(t.dtype), "shape": list(t.shape)} for t in tensors]


def describe_inputs(inputs: list) -> list[dict]:
    described = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            described.append({"dtype": dtype_name(x.dtype), "shape": list(x.shape)})
        elif x is None or isinstance(x, bool | int | float | str):
            described.append({"value": x})
        else:
            raise TypeError(
                f"get_inputs() returned a {type(x).__name__}: inputs must be tensors or plain "
                "numbers"
            )
    return described


def bind(state: RunnerState, message: dict, fds: list[int]) -> dict:
    old = state.slots.pop(message["slot"], None)
    if old:
        _close(old)
    slot = Slot()
    fd_iter = iter(fds)
    for spec in message["inputs"]:
        if "buffer" in spec:
            lent = open_lent(spec["buffer"], next(fd_iter, None), state.device)
            slot.lent.append(lent)
            slot.inputs.append(lent.tensor(dtype_of(spec["dtype"]), spec["shape"]))
        else:
            slot.inputs.append(spec["value"])
    for spec in message["outputs"]:
        lent = open_lent(spec["buffer"], next(fd_iter, None), state.device)
        slot.lent.append(lent)
        slot.outputs.append(lent.tensor(dtype_of(spec["dtype"]), spec["shape"]))
    state.slots[message["slot"]] = slot
    return {}


def release(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """Unmaps the named slots (all by default) and hands the allocator's cached blocks back to
    the driver: a lent buffer's memory is only freed once every process that mapped it let go,
    and sets of several GiB need that room for the next ones."""
    keys = message.get("slots")
    for key in list(state.slots) if keys is None else keys:
        slot = state.slots.pop(key, None)
        if slot:
            _close(slot)
    if state.device == "cuda":
        state.synchronize()
        torch.cuda.empty_cache()
    return {}


def _close(slot: Slot) -> None:
    slot.inputs, slot.outputs, slot.sink = [], [], []
    for lent in slot.lent:
        lent.close()


def copy_outputs(slot: Slot, tensors: list[torch.Tensor], into: str) -> bool:
    """Copies a call's outputs into the slot's lent buffers ("lent") or private ones ("sink");
    False (nothing copied) when they do not match the buffers in number, dtype and shape."""
    if into == "sink":
        if len(slot.sink) != len(tensors) or any(
            s.shape != t.shape or s.dtype != t.dtype
            for s, t in zip(slot.sink, tensors, strict=True)
        ):
            slot.sink = [
                torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors
            ]
        targets = slot.sink
    else:
        targets = slot.outputs
    if len(targets) != len(tensors) or any(
        o.shape != t.shape or o.dtype != t.dtype for o, t in zip(targets, tensors, strict=True)
    ):
        return False
    with torch.no_grad():
        for target, tensor in zip(targets, tensors, strict=True):
            target.copy_(tensor)
    return True


def deliver_outputs(slot: Slot, tensors: list[torch.Tensor] | None, into: str):
    """A call's output tensors described, and copied into the slot's lent buffers ("lent") or
    private ones ("sink"): (None, False) when the call returned something that is not tensors."""
    if tensors is None:
        return None, False
    copied = copy_outputs(slot, [t.detach() for t in tensors], into)
    return describe(tensors), copied


def time_one(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """The reference runner's timed call (eager, torch.compile): the same checked call as the
    candidate's, so both pay the same bookkeeping inside the judge's clock."""
    return checked_call(state, state.functions[message["fn"]](), message, None)


def checked_call(state: RunnerState, fn, message: dict, observer) -> dict:
    """One timed call of `fn` on a slot's inputs (the judge flushed the caches just before),
    under `observer` (a dispatch mode) if given, then what the call did wrong by its own
    account (only ever a reason to fail it), and its outputs copied to their buffers after the
    device is synchronised, outside the time. Both roles run exactly this, so what a call costs
    beyond its claimed time is alike on both sides of the judge's clock check."""
    slot = state.slots[message["slot"]]
    into = message.get("into", "lent")
    threads = _thread_count()
    with torch.no_grad(), observer or contextlib.nullcontext():
        elapsed, out = timing.time_call(fn, slot.inputs, state.device)
    tensors = _flat(out)
    violations = _call_violations(observer, slot.inputs, out, tensors, threads)
    kept = None if into == "none" else tensors
    with torch.no_grad():
        described, copied = deliver_outputs(slot, kept, into)
        del out, tensors, kept
    state.synchronize()
    return {"time_ms": elapsed, "violations": violations, "outputs": described, "copied": copied}


def _thread_count() -> int:
    try:
        return len(list(Path("/proc/self/task").iterdir()))
    except OSError:
        return threading.active_count()


def _flat(out) -> list[torch.Tensor] | None:
    """The call's outputs as a flat list of tensors, None when they are not tensors."""
    try:
        return problem_mod.flatten(out)
    except TypeError:
        return None


def _aliases(tensors: list[torch.Tensor], inputs) -> bool:
    pointers = {
        x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor) and x.numel()
    }
    return any(t.numel() and t.untyped_storage().data_ptr() in pointers for t in tensors)


def _call_violations(observer, inputs, out, tensors, threads_before) -> list[dict]:
    """Without the call's name: the judge names it (a trial or a timed call), so nothing in a
    command tells the candidate which of the two it is running."""
    found = []
    if getattr(observer, "ops", None):
        ops = ", ".join(f"{name} x{count}" for name, count in sorted(observer.ops.items()))
        found.append(Violation("torch_compute", f"forward ran torch ops: {ops}"))
    if tensors is None or any(type(t) is not torch.Tensor for t in tensors):
        found.append(
            Violation(
                "output_type",
                f"forward must return plain torch.Tensor outputs, got {type(out).__name__}",
            )
        )
    elif _aliases(tensors, inputs):
        found.append(
            Violation(
                "output_aliases_input",
                "an output shares memory with an input (return a new tensor)",
            )
        )
    threads_after = _thread_count()
    if threads_after > threads_before:
        found.append(
            Violation(
                "async_work", f"forward left {threads_after - threads_before} new thread(s) running"
            )
        )
    return [v.to_dict() for v in found]


COMMON: dict[str, Callable] = {"bind": bind, "release": release, "time": time_one}
