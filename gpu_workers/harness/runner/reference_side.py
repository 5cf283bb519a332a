"""The reference runner's commands: it runs the problem (untrusted too: its author is a user)
on seeds the judge draws, and copies inputs and outputs into buffers the judge lends it.

prepare (the process is up) -> load -> make(seed, probe) -> [bind] -> share: a set's inputs and
fp32 reference outputs, in the judge's buffers. time: eager or torch.compile on those inputs (no
candidate ever runs here). counts: FLOPs and minimum bytes. compiled: torch.compile's outputs,
for validation. graph: the problem's Graph IR (capture/graph.py), for a Session's inspect_graph.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from gpu_workers.harness.capture import graph as graph_mod
from gpu_workers.harness.judge import compiler_seed, sensitivity
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.runner import problem as problem_mod
from gpu_workers.harness.runner.state import (
    COMMON,
    RunnerState,
    copy_outputs,
    describe,
    describe_inputs,
)

_COMPILE_MODES = {"compile": None, "compile_max_autotune": "max-autotune"}


def prepare(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """Answers once the process is up (its interpreter, torch and the harness imported) and, on
    a GPU, its context is made (`load` made it, under the GPU lock), so the judge waits for that
    outside the lock; nothing here touches the problem. A runner that will time torch.compile
    (`compiles`) imports the compiler here too, and one given the machine's compiler seed
    starts its compile caches from it (judge/compiler_seed.py)."""
    if message.get("compiler_seed"):  # before any compile; in validation `compiled` compiles
        compiler_seed.lend(Path(message["compiler_seed"]))
    if message.get("device") == "cuda":
        torch.zeros(1, device="cuda")
    if message.get("compiles"):
        _import_compiler()
    return {}


# What a process's first torch.compile imports: 7-11 s of a first compile's 10-13 s, all of it
# cpu work that needs no device, so it is paid before the GPU lock is taken. Importing starts no
# thread and no compile pool (Inductor starts its pool at the first compile, under the lock).
_COMPILER_MODULES = (
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.graph",
    "torch._inductor.codecache",
    "torch._inductor.async_compile",
    "torch._inductor.codegen.cpp",
    "torch._inductor.codegen.triton",  # needs triton: a cpu-only torch has none
    "torch._inductor.runtime.triton_heuristics",
)


def _import_compiler() -> None:
    for name in _COMPILER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the compile imports it, or says why, at its first use


def load(state: RunnerState, message: dict, fds: list[int]) -> dict:
    state.device = message["device"]
    protocol = Protocol.from_request(message["protocol"])
    state.extra["protocol"] = protocol
    module = problem_mod.load_module(Path(message["problem"]), "problem_model")
    if not isinstance(getattr(module, "Model", None), type) or not issubclass(
        module.Model, torch.nn.Module
    ):
        return {"error": "Model must be a subclass of torch.nn.Module"}
    model = problem_mod.build_model(module, state.device, protocol.init_seed)
    state.extra.update(module=module, model=model, pending={})
    state.functions["eager"] = lambda: _timed(state, model)
    for name, mode in _COMPILE_MODES.items():
        state.functions[name] = lambda mode=mode, name=name: _timed(
            state, _compiled(state, name, mode)
        )
    return {}


def _compiled(state: RunnerState, name: str, mode: str | None):
    if name not in state.extra:
        state.extra[name] = torch.compile(state.extra["model"], mode=mode)
    return state.extra[name]


def _timed(state: RunnerState, fn):
    """Baselines race the candidate under the protocol's arithmetic (TF32 where admitted)."""
    problem_mod.timing_precision(state.extra["protocol"])
    return fn


def make(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """A fresh input set for the judge's seed and its reference outputs, in plain fp32."""
    protocol = state.extra["protocol"]
    problem_mod.reference_precision(protocol)
    inputs = problem_mod.make_inputs(state.extra["module"], message["seed"], state.device)
    inputs = sensitivity.probe_inputs(message.get("probe"), inputs)
    with torch.no_grad():
        outputs = [t.detach() for t in problem_mod.flatten(state.extra["model"](*inputs))]
    state.extra["pending"][message["slot"]] = (inputs, outputs)
    reply = {"inputs": describe_inputs(inputs), "outputs": describe(outputs)}
    slot = state.slots.get(message["slot"])
    reply["shared"] = bool(slot) and _share(state, message["slot"])
    return reply


def share(state: RunnerState, message: dict, fds: list[int]) -> dict:
    if not _share(state, message["slot"]):
        return {"error": "the lent buffers do not match the set"}
    return {}


def _share(state: RunnerState, key: int) -> bool:
    inputs, outputs = state.extra["pending"][key]
    slot = state.slots[key]
    tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
    lent_in = [x for x in slot.inputs if isinstance(x, torch.Tensor)]
    if len(tensors_in) != len(lent_in) or any(
        a.shape != b.shape or a.dtype != b.dtype for a, b in zip(tensors_in, lent_in, strict=True)
    ):
        return False
    if not copy_outputs(slot, outputs, "lent"):
        return False
    with torch.no_grad():
        for target, source in zip(lent_in, tensors_in, strict=True):
            target.copy_(source)
    # bind put the lent tensors (and the plain values) in slot.inputs: later calls read those
    del state.extra["pending"][key]
    state.synchronize()
    return True


def counts(state: RunnerState, message: dict, fds: list[int]) -> dict:
    inputs = state.slots[message["slot"]].inputs
    model = state.extra["model"]
    with torch.no_grad():
        outputs = problem_mod.flatten(model(*inputs))
        flops = problem_mod.count_flops(model, inputs)
        nbytes = problem_mod.bytes_moved(inputs, model, outputs)
    return {"flops": flops, "bytes_moved": nbytes}


def compiled(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """torch.compile's outputs on one slot's inputs, into another slot's output buffers."""
    problem_mod.reference_precision(state.extra["protocol"])
    try:
        with torch.no_grad():
            got = problem_mod.flatten(
                _compiled(state, "compile", None)(*state.slots[message["slot"]].inputs)
            )
    except Exception as exc:  # noqa: BLE001 - any failure of the user's op under compile
        return {"compile_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    copied = copy_outputs(state.slots[message["into"]], got, "lent")
    state.synchronize()
    return {"outputs": describe(got), "copied": copied}


def graph(state: RunnerState, message: dict, fds: list[int]) -> dict:
    """The loaded problem's Graph IR, on the first public seed's inputs (dropped after)."""
    module, model = state.extra["module"], state.extra["model"]
    return graph_mod.lower_problem(module, model, state.device, state.extra["protocol"])


COMMANDS = {
    **COMMON,
    "prepare": prepare,
    "load": load,
    "make": make,
    "share": share,
    "counts": counts,
    "compiled": compiled,
    "graph": graph,
}
