"""Problems in KernelBench format: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`:
what a runner does with them (load, build, draw inputs, count work) inside the sandbox. The
judge's side of validation is gpu_workers.harness.judge.validation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256  # noqa: F401


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
    """Matrix products and convolutions as torch's FlopCounterMode counts them (2*M*N*K ...),
    plus one operation per element of every other op's arithmetic: a pointwise op's output
    elements and a reduction's input elements (relu then a scale: 2 per element). A floor, not
    an estimate of the instructions a kernel runs."""
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    matrix = FlopCounterMode(display=False)
    elementwise = _ElementwiseCounter(skip=set(flop_registry))
    with matrix, elementwise, torch.no_grad():
        model(*inputs)
    return int(matrix.get_total_flops()) + elementwise.total


_REDUCTIONS = {
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
    "var_mean", "std_mean", "norm", "linalg_vector_norm", "logsumexp", "_softmax",
    "_log_softmax", "cumsum", "cumprod", "any", "all", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
}  # fmt: skip


def _elements(value) -> int:
    tensors = [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
    return tensors[0].numel() if tensors else 0


class _ElementwiseCounter(TorchDispatchMode):
    def __init__(self, skip: set):
        super().__init__()
        self.skip, self.total = skip, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func.overloadpacket
        if packet in self.skip or packet.__name__ in ("clone", "lift_fresh"):
            return out  # counted as matrix work, or a copy with no arithmetic
        if torch.Tag.pointwise in func.tags:
            self.total += _elements(out)
        elif packet.__name__ in _REDUCTIONS:
            self.total += _elements(args)
        return out


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
