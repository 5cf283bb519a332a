"""Problems in KernelBench format: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`.

The parent side (`validate`) never imports the problem: it asks a sandboxed child to. The child
side (`load_module`, `build_model`, `make_inputs`, `validate_in_child`) runs only in the sandbox.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpu_workers.harness import sandbox
from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256
from gpu_workers.harness.protocol import Protocol


@dataclass
class ProblemReport:
    ok: bool
    sha256: str
    reasons: list[str] = field(default_factory=list)
    eager_ms: float | None = None
    compile_ms: float | None = None
    flops: int | None = None
    bytes_moved: int | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def validate(source: str, device: str, protocol: Protocol, timeout_s: float = 600) -> ProblemReport:
    """Runs the problem in the sandbox and says whether it can be optimised, and why not."""
    sha = source_sha256(source)
    try:
        check_source(source)
    except ProblemError as exc:
        return ProblemReport(ok=False, sha256=sha, reasons=[str(exc)])
    with tempfile.TemporaryDirectory(prefix="validate-") as tmp:
        problem_path = Path(tmp) / "model.py"
        problem_path.write_text(source)
        request = {
            "problem": str(problem_path),
            "device": device,
            "protocol": protocol.to_request(),
        }
        result, failure = sandbox.run_step("validate", request, Path(tmp), device, timeout_s)
    if failure:
        return ProblemReport(ok=False, sha256=sha, reasons=[failure])
    return ProblemReport(sha256=sha, **result)


# ---- child side: only ever runs inside the sandbox --------------------------------------------


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


def close(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape
        and torch.allclose(x.float(), y.float(), atol=atol, rtol=rtol, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


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


def apply_precision(protocol: Protocol) -> None:
    """Under a strict fp32 protocol the reference and baselines may not use TF32 either."""
    if not protocol.allow_tensor_cores:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def timing_precision(protocol: Protocol) -> None:
    """Baselines race the candidate under the same arithmetic: where the protocol admits tensor
    cores (as a candidate's cuBLAS call may use TF32), eager and torch.compile may use them too.
    Correctness references keep plain fp32 (apply_precision)."""
    if protocol.allow_tensor_cores:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def validate_in_child(request: dict) -> dict:
    from gpu_workers.harness import timing

    device, protocol = request["device"], Protocol.from_request(request["protocol"])
    apply_precision(protocol)
    module = load_module(Path(request["problem"]), "problem_model")
    if not isinstance(getattr(module, "Model", None), type) or not issubclass(
        module.Model, torch.nn.Module
    ):
        return {"ok": False, "reasons": ["Model must be a subclass of torch.nn.Module"]}
    model = build_model(module, device, protocol.init_seed)
    seed_a, seed_b = protocol.public_seeds[:2]
    with torch.no_grad():
        inputs = make_inputs(module, seed_a, device)
        first = [t.clone() for t in flatten(model(*inputs))]
        again = flatten(model(*make_inputs(module, seed_a, device)))
        other = flatten(model(*make_inputs(module, seed_b, device)))
    reasons = _degeneracy_reasons(first, again, other, protocol)
    report = {"inputs": describe(inputs), "outputs": describe(first)}
    if reasons:
        return {"ok": False, "reasons": reasons, **report}
    compiled, reason = _compiled_matches(model, inputs, first, protocol)
    if reason:
        return {"ok": False, "reasons": [reason], **report}
    sets = [make_inputs(module, seed, device) for seed in protocol.timing_seeds]
    timing_precision(protocol)
    with torch.no_grad():
        timings, _ = timing.measure(
            {"eager": model, "compile": compiled},
            sets,
            device=device,
            budget_s=protocol.timing_budget_s,
        )
    return {
        "ok": True,
        "eager_ms": timings["eager"].median_ms,
        "compile_ms": timings["compile"].median_ms,
        "flops": count_flops(model, inputs),
        "bytes_moved": bytes_moved(inputs, model, first),
        **report,
    }


def _degeneracy_reasons(first, again, other, protocol: Protocol) -> list[str]:
    """Threat 8: a problem whose output a constant kernel could match is rejected."""
    if not first:
        return ["forward returned no tensors"]
    if not all(torch.isfinite(t).all() for t in first if t.is_floating_point()):
        return ["forward produces NaN or inf on random inputs"]
    if not close(first, again, atol=1e-6, rtol=1e-5):
        return ["not deterministic: two runs on the same inputs differ (random ops in forward?)"]
    if close(first, other, protocol.atol, protocol.rtol):
        return ["output does not depend on the inputs: two input seeds give the same output"]
    flat = [t for t in first if t.numel() > 1 and t.is_floating_point()]
    if flat and all(
        close([t], [torch.full_like(t, t.float().mean())], protocol.atol, protocol.rtol)
        for t in flat
    ):
        return ["output is (nearly) constant: a kernel returning a constant would pass"]
    return []


def _compiled_matches(model, inputs, expected, protocol: Protocol):
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            got = flatten(compiled(*inputs))
    except Exception as exc:  # noqa: BLE001 - any failure of the user's op under compile
        return None, f"does not run under torch.compile: {type(exc).__name__}: {str(exc)[:200]}"
    if not close(got, expected, protocol.atol, protocol.rtol):
        return None, "torch.compile gives a different result from eager beyond the tolerance"
    return compiled, None
