"""Problems in KernelBench format: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`:
what a runner does with them (load, build, draw inputs, count work) inside the sandbox. The
judge's side of validation is gpu_workers.harness.validation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256  # noqa: F401
from gpu_workers.harness.protocol import Protocol


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _seeded(seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def build_model(problem, device: str, seed: int, cls: type | None = None) -> torch.nn.Module:
    """The problem's Model (or `cls`, e.g. ModelNew) built from get_init_inputs() under `seed`."""
    _seeded(seed)
    init_inputs = problem.get_init_inputs()
    model = (cls or problem.Model)(*init_inputs)
    return model.to(device)


def make_inputs(module, seed: int, device: str) -> list:
    """Inputs drawn from a seeded generator on the device itself (drawing hundreds of MB on the
    host costs seconds per trial); every process on this device draws the same values."""
    _seeded(seed)
    with torch.device(device):
        inputs = module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def flatten(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, list | tuple):
        return [t for item in out for t in flatten(item)]
    raise TypeError(f"outputs must be tensors or tuples of tensors, got {type(out).__name__}")


def describe(tensors) -> list[str]:
    return [
        f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        for t in tensors
        if isinstance(t, torch.Tensor)
    ]


def bytes_moved(inputs: list, model: torch.nn.Module, outputs: list[torch.Tensor]) -> int:
    """Minimum traffic: every input, parameter, buffer and output touched once."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers()) + outputs
    return sum(t.numel() * t.element_size() for t in tensors)


def count_flops(model: torch.nn.Module, inputs: list) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return int(counter.get_total_flops())


def reference_precision(protocol: Protocol) -> None:
    """References are plain fp32 matmuls (torch's default); under a strict protocol convolutions
    may not use TF32 either. Set before every reference, since timing may have admitted TF32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = protocol.allow_tensor_cores


def timing_precision(protocol: Protocol) -> None:
    """Baselines race the candidate under the same arithmetic: where the protocol admits tensor
    cores (as a candidate's cuBLAS call may use TF32), eager and torch.compile may use them too.
    Correctness references keep plain fp32 (reference_precision)."""
    if protocol.allow_tensor_cores:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
