"""Correctness: is the candidate's ModelNew the same function as the problem's Model?

The candidate runs first, alone, in a fresh sandboxed process whose free device memory was filled
with NaN; the reference runs in another; the trusted parent, which never imports either, compares
what they saved. See DESIGN.md, Verification, for the threats each check answers.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpu_workers.harness import problem as problem_mod
from gpu_workers.harness import profile, sandbox, source_gate
from gpu_workers.harness.protocol import Protocol
from gpu_workers.harness.source_gate import Violation
from gpu_workers.harness.workspace import Workspace


@dataclass
class VerifyResult:
    ok: bool
    trials: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "trials": self.trials,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "violations": [v.to_dict() for v in self.violations],
            "error": self.error,
        }


# ---- parent side ------------------------------------------------------------------------------


def compare(
    reference: list[torch.Tensor], candidate: list[torch.Tensor], protocol: Protocol, label: str
) -> tuple[list[Violation], float, float]:
    """Violations, max abs error and relative error ‖out−ref‖/‖ref‖ for one trial."""
    if len(reference) != len(candidate):
        return (
            [
                Violation(
                    "mismatch", f"{label}: {len(candidate)} outputs, expected {len(reference)}"
                )
            ],
            float("inf"),
            float("inf"),
        )
    found, max_abs, max_rel = [], 0.0, 0.0
    for i, (ref, out) in enumerate(zip(reference, candidate, strict=True)):
        name = f"{label} output {i}"
        if out.shape != ref.shape or out.dtype != ref.dtype:
            found.append(
                Violation(
                    "mismatch",
                    f"{name}: got {tuple(out.shape)} {out.dtype}, "
                    f"expected {tuple(ref.shape)} {ref.dtype}",
                )
            )
            max_abs = max_rel = float("inf")
            continue
        r, o = ref.double(), out.double()
        if bool((o.isnan() & ~r.isnan()).any()):
            found.append(
                Violation(
                    "nan_output",
                    f"{name}: NaN where the reference has a number "
                    "(an output element never written?)",
                )
            )
        diff = (o - r).abs().nan_to_num(nan=float("inf"))
        abs_err = float(diff.max()) if diff.numel() else 0.0
        rel_err = float((o - r).nan_to_num(nan=float("inf")).norm() / r.norm().clamp_min(1e-30))
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        if not torch.allclose(o, r, atol=protocol.atol, rtol=protocol.rtol, equal_nan=True):
            bad = int((diff > protocol.atol + protocol.rtol * r.abs()).sum())
            found.append(
                Violation(
                    "mismatch",
                    f"{name}: {bad} of {r.numel()} elements outside "
                    f"atol={protocol.atol} rtol={protocol.rtol} "
                    f"(max abs err {abs_err:.3g}, rel err {rel_err:.3g})",
                )
            )
    return found, max_abs, max_rel


def load_outputs(path: Path, device: str) -> list[torch.Tensor]:
    # mmap: the file sits in tmpfs, so this maps pages instead of deserialising a copy
    tensors = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return [t.to(device) for t in tensors]


@dataclass
class Measurement:
    """What the candidate's process timed, after its trials: handed to profile.result()."""

    timing: dict
    violations: list[Violation]


def run(
    ws: Workspace,
    extension_dir: str,
    device: str,
    protocol: Protocol,
    workdir: Path,
    check_sources: bool = True,
) -> tuple[VerifyResult, Measurement | None]:
    """Static gate; then one sandboxed process runs the candidate's trials, then times it
    beside eager; the comparisons happen here. `check_sources=False` only lets tests reach the
    runtime defences with candidates the gate would stop."""
    static = source_gate.check_sources(ws.sources()) if check_sources else []
    if static:
        return VerifyResult(ok=False, violations=static), None
    seeds = list(protocol.seeds())
    reference_dir = ensure_reference(
        ws.root / "model.py", device, protocol, seeds + list(protocol.timing_seeds), workdir
    )
    out_dir = Path(tempfile.mkdtemp(prefix="candidate-", dir=workdir))
    try:
        request = {
            "workspace": str(ws.root),
            "extension_dir": extension_dir,
            "device": device,
            "protocol": protocol.to_request(),
            "seeds": seeds,
            "warmup_seed": 7,
            "out_dir": str(out_dir),
        }
        result, failure = sandbox.run_step(
            "candidate",
            request,
            out_dir,
            device,
            timeout_s=protocol.step_timeout_s,
            view=sandbox.View(readable=(ws.root, Path(extension_dir))),
        )
        if failure:
            return VerifyResult(ok=False, error=failure), None
        return _judge(result, seeds, reference_dir, out_dir, device, protocol)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _judge(result, seeds, reference_dir, out_dir, device, protocol):
    where = compare_device(device)
    violations = [Violation(**v) for v in result["violations"]]
    max_abs = max_rel = 0.0
    for trial, seed in enumerate(seeds):
        found, abs_err, rel_err = compare(
            load_outputs(reference_dir / f"reference-{seed}.pt", where),
            load_outputs(out_dir / f"candidate-{seed}.pt", where),
            protocol,
            f"trial {trial}",
        )
        violations += found
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
    verdict = VerifyResult(
        ok=not violations,
        trials=len(seeds),
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        violations=list(dict.fromkeys(violations))[:20],
    )
    timed = []  # threat 4: the results of timed calls must be right too
    for seed in protocol.timing_seeds:
        bad, _, _ = compare(
            load_outputs(reference_dir / f"reference-{seed}.pt", where),
            load_outputs(out_dir / f"timed-{seed}.pt", where),
            protocol,
            f"timed call (seed {seed})",
        )
        timed += [Violation("timed_output_mismatch", v.detail) for v in bad]
    return verdict, Measurement(timing=result["timing"], violations=timed)


def compare_device(device: str) -> str:
    """Comparisons run on the GPU when this process may use it: 10x faster on big outputs."""
    return "cuda" if device == "cuda" and torch.cuda.is_available() else "cpu"


def ensure_reference(problem_path: Path, device, protocol: Protocol, seeds, workdir: Path) -> Path:
    """Reference outputs for these seeds, computed once per workdir in their own sandbox."""
    out_dir = workdir / "reference"
    out_dir.mkdir(exist_ok=True)
    missing = [s for s in seeds if not (out_dir / f"reference-{s}.pt").is_file()]
    if missing:
        request = {
            "problem": str(problem_path),
            "device": device,
            "protocol": protocol.to_request(),
            "seeds": missing,
            "out_dir": str(out_dir),
        }
        _, failure = sandbox.run_step(
            "reference",
            request,
            out_dir,
            device,
            timeout_s=600,
            view=sandbox.View(readable=(problem_path,)),
        )
        if failure:
            raise problem_mod.ProblemError(f"the reference failed: {failure}")
    return out_dir


# ---- child side: only ever runs inside the sandbox --------------------------------------------

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
    """The problem module and a ModelNew with the reference's weights."""
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
    return problem, model_new


def _thread_count() -> int:
    try:
        return len(list(Path("/proc/self/task").iterdir()))
    except OSError:
        return threading.active_count()


def candidate_in_child(request: dict) -> dict:
    device = request["device"]
    protocol = Protocol.from_request(request["protocol"])
    out_dir = Path(request["out_dir"])
    fill_free_memory_with_nan(device)
    problem, model_new = load_candidate(
        Path(request["workspace"]), request["extension_dir"], device, protocol
    )
    violations: list[dict] = []
    # One unobserved call first, so thread pools (OpenMP, torch) exist before threads are counted.
    with torch.no_grad():
        kept = [model_new(*problem_mod.make_inputs(problem, request["warmup_seed"], device))]
    for trial, seed in enumerate(request["seeds"]):
        inputs = problem_mod.make_inputs(problem, seed, device)
        originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        threads = _thread_count()
        observer = ComputeOpObserver()
        with torch.no_grad(), observer:
            out = model_new(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        violations += _trial_violations(trial, observer, inputs, originals, out, threads)
        tensors = problem_mod.flatten(out) if not _bad_type(out) else []
        torch.save([t.detach().cpu() for t in tensors], out_dir / f"candidate-{seed}.pt")
        kept.append(out)  # outputs stay alive to the end (threat 2)
    # Timing comes after every trial, so the reference first runs in this process only now.
    timing = profile.time_candidate(problem, model_new, device, protocol, out_dir)
    return {"violations": violations, "timing": timing}


def _bad_type(out) -> bool:
    try:
        return any(type(t) is not torch.Tensor for t in problem_mod.flatten(out))
    except TypeError:
        return True


def _trial_violations(trial, observer, inputs, originals, out, threads_before) -> list[dict]:
    found = []
    if observer.ops:
        ops = ", ".join(f"{name} x{count}" for name, count in sorted(observer.ops.items()))
        found.append(Violation("torch_compute", f"trial {trial}: forward ran torch ops: {ops}"))
    for i, (x, x0) in enumerate(zip(inputs, originals, strict=True)):
        if isinstance(x, torch.Tensor) and not torch.equal(x, x0):
            found.append(Violation("input_mutated", f"trial {trial}: input {i} was modified"))
    if _bad_type(out):
        found.append(
            Violation(
                "output_type",
                f"trial {trial}: forward must return plain "
                f"torch.Tensor outputs, got {type(out).__name__}",
            )
        )
    if _thread_count() > threads_before:
        found.append(
            Violation(
                "async_work",
                f"trial {trial}: forward left "
                f"{_thread_count() - threads_before} new thread(s) running",
            )
        )
    return [v.to_dict() for v in found]


def reference_in_child(request: dict) -> dict:
    device = request["device"]
    protocol = Protocol.from_request(request["protocol"])
    problem_mod.apply_precision(protocol)
    problem = problem_mod.load_module(Path(request["problem"]), "problem_model")
    model = problem_mod.build_model(problem, device, protocol.init_seed)
    out_dir = Path(request["out_dir"])
    for seed in request["seeds"]:
        with torch.no_grad():
            out = problem_mod.flatten(model(*problem_mod.make_inputs(problem, seed, device)))
        torch.save([t.detach().cpu() for t in out], out_dir / f"reference-{seed}.pt")
    return {}
