"""The candidate runner's commands: it runs the candidate's ModelNew on inputs the judge copied
into buffers it lent, and copies the outputs into other lent buffers. It never holds a
reference output, a seed or the tolerance.

What it reports about itself (torch ops seen by the dispatch observer, threads left running,
outputs aliasing inputs) can only fail the candidate: the judge reads it as failure information,
never as success.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpu_workers.harness.judge import timing
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.runner import problem as problem_mod
from gpu_workers.harness.runner.state import COMMON, RunnerState, checked_call

# Ops ModelNew.forward may dispatch: allocation, metadata and views. Anything else is torch doing
# the work (threat 1), whether called from Python or from C++ inside the extension.
_ALLOWED_ATEN = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "zeros",
    "zeros_like",
    "zero_",
    "fill_",
    "resize_",
    "detach",
    "alias",
    "lift_fresh",
    "_local_scalar_dense",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "is_contiguous",
}


class ComputeOpObserver(TorchDispatchMode):
    """Records every torch compute op dispatched while active."""

    def __init__(self):
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        namespace = func._schema.name.split("::")[0]
        allowed = func.is_view or (namespace == "aten" and packet.__name__ in _ALLOWED_ATEN)
        if not allowed:
            name = f"{namespace}::{packet.__name__}"
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def fill_free_memory_with_nan(device: str, nbytes: int = 1 << 30) -> None:
    """Threat 2: leave the caching allocator's free blocks full of NaN, so an output the kernel
    never writes reads as NaN instead of whatever a previous tensor left there."""
    if device != "cuda":
        return  # the cpu target sets MALLOC_PERTURB_ in the sandbox instead
    free, _ = torch.cuda.mem_get_info()
    big = min(nbytes, free // 4)
    blocks = [torch.full((big // 4,), float("nan"), device="cuda")]
    blocks += [torch.full((1 << 17,), float("nan"), device="cuda") for _ in range(64)]
    torch.cuda.synchronize()
    del blocks


def load_candidate(workspace: Path, extension_dir: str, device: str, protocol: Protocol):
    """A ModelNew with the reference's weights (built here from the problem's own init)."""
    problem = problem_mod.load_module(workspace / "model.py", "problem_model")
    sys.path.insert(0, extension_dir)
    candidate = problem_mod.load_module(workspace / "model_new.py", "model_new")
    if not hasattr(candidate, "ModelNew"):
        raise AttributeError("model_new.py defines no ModelNew class")
    reference = problem_mod.build_model(problem, device, protocol.init_seed)
    model_new = problem_mod.build_model(problem, device, protocol.init_seed, candidate.ModelNew)
    expected = reference.state_dict()
    got = model_new.state_dict()
    if expected.keys() == got.keys() and all(expected[k].shape == got[k].shape for k in got):
        model_new.load_state_dict(expected)
    del reference
    return model_new


def prepare(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """Before any candidate code, and without touching the device (a process may get ready
    while another is timed on it): a first call of the judged-call path (the dispatch observer,
    the clock) on a host tensor of the harness's own. Its one-time costs (imports; seconds on a
    GPU host) would otherwise fall on the first trial, inside the judged step."""
    with torch.no_grad(), ComputeOpObserver():
        timing.time_call(torch.relu, [torch.ones(8)], "cpu")
    return {}


def claim_device(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """Before any candidate code: the process's first use of the device (its context) and the
    allocator's free blocks filled with NaN. What fails here (a device that the runs sharing it
    filled) is the machine's, never the candidate's (runner_process.load_candidate)."""
    state.device = message["device"]
    fill_free_memory_with_nan(state.device)
    return {}


def load(state: RunnerState, message: dict, fds: list[int]) -> dict:
    state.device = message["device"]
    protocol = Protocol.from_request(message["protocol"])
    model_new = load_candidate(
        Path(message["workspace"]), message["extension_dir"], state.device, protocol
    )
    state.extra.update(model_new=model_new, warm=False)
    state.functions["candidate"] = lambda: _timed(protocol, model_new)
    return {}


def _timed(protocol: Protocol, model_new):
    problem_mod.timing_precision(protocol)  # the same arithmetic its baselines race under
    return model_new


def judged_call(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """One call of ModelNew on a slot, for a correctness trial and a timed call alike: the same
    code path, so a candidate cannot tell them apart by its call stack, and every call is
    checked the same way (outputs, aliasing, threads left running). The judge asks for the
    dispatch observer (`observe`) on every trial and on a share of timed calls it draws in
    secret; the judge flushed the caches before a timed call."""
    slot = state.slots[message["slot"]]
    model_new = state.functions["candidate"]()
    if not state.extra["warm"]:
        # One unobserved call first, so thread pools (OpenMP, torch) exist before threads are
        # counted; its output is dropped.
        with torch.no_grad():
            model_new(*slot.inputs)
        state.synchronize()
        state.extra["warm"] = True
    observer = ComputeOpObserver() if message.get("observe") else None
    return checked_call(state, model_new, message, observer)


COMMANDS = {
    **COMMON,
    "prepare": prepare,
    "claim_device": claim_device,
    "load": load,
    "time": judged_call,
}
