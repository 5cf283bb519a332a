"""Speed: the candidate against eager PyTorch, torch.compile and the speed-of-light floor.

Baselines (eager, torch.compile default and max-autotune) are measured in a process that never
imports a candidate, and cached per (problem hash, device, torch, CUDA, protocol). The candidate
is timed beside eager in its own verify process, after its correctness trials (one process start
instead of two); the outputs of timed calls are re-checked, and host wall time is compared with
event time.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from gpu_workers.harness import environment, roofline, sandbox, settings, timing
from gpu_workers.harness import problem as problem_mod
from gpu_workers.harness.protocol import Protocol
from gpu_workers.harness.source_gate import Violation

if TYPE_CHECKING:
    from gpu_workers.harness.verify import Measurement

# Host wall time above this multiple of event time (plus a fixed allowance for launch and
# synchronisation) means work ran outside the timed stream (threat 5).
_WALL_GAP_FACTOR = 2.0
_WALL_GAP_ALLOWANCE_MS = 0.1


@dataclass
class ProfileResult:
    ok: bool
    eager_ms: float | None = None
    compile_ms: float | None = None
    compile_max_autotune_ms: float | None = None
    candidate_ms: float | None = None
    spread: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sol_ms: float | None = None
    sol_fraction: float | None = None
    flops: int | None = None
    bytes_moved: int | None = None
    samples: int | None = None
    # Eager beside the candidate over eager alone: near 1 on a quiet machine; far above 1 means
    # the candidate (or a neighbour) slowed the process down.
    eager_drift: float | None = None
    baselines_cached: bool = False
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["violations"] = [v.to_dict() for v in self.violations]
        return data


# ---- parent side ------------------------------------------------------------------------------


# Bumped whenever how baselines are measured changes, so no cached number outlives its method.
# 2: TF32 admitted for the baselines where the protocol admits tensor cores.
BASELINE_METHOD = 2


def _baseline_path(sha: str, device: str, protocol: Protocol) -> Path:
    name = environment.device_name(device, settings.gpu_index())
    key = re.sub(
        r"[^A-Za-z0-9.]+", "-", f"{name}-torch{torch.__version__}-cuda{torch.version.cuda}"
    )
    file = f"{sha}-{protocol.name}-m{BASELINE_METHOD}.json"
    return settings.cache_dir() / "baselines" / key / file


def baselines(problem_path: Path, device: str, protocol: Protocol, workdir: Path) -> dict:
    """Eager and torch.compile times for this problem on this device, measured once."""
    path = _baseline_path(problem_mod.source_sha256(problem_path.read_text()), device, protocol)
    if path.is_file():
        return {**json.loads(path.read_text()), "cached": True}
    result = measure_baselines(problem_path, device, protocol, workdir)
    store_baselines(problem_path, device, protocol, result)
    return {**result, "cached": False}


def measure_baselines(problem_path: Path, device: str, protocol: Protocol, workdir: Path) -> dict:
    """Measures the baselines now, in the sandbox, whatever is cached."""
    request = {"problem": str(problem_path), "device": device, "protocol": protocol.to_request()}
    result, failure = sandbox.run_step(
        "baselines",
        request,
        workdir,
        device,
        timeout_s=1800,
        view=sandbox.View(readable=(problem_path,)),
    )
    if failure:
        raise problem_mod.ProblemError(f"measuring baselines failed: {failure}")
    result["environment"] = environment.describe(device, settings.gpu_index())
    return result


def store_baselines(problem_path: Path, device: str, protocol: Protocol, result: dict) -> None:
    """What every later profile of this problem on this device and software is compared with."""
    path = _baseline_path(problem_mod.source_sha256(problem_path.read_text()), device, protocol)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: v for k, v in result.items() if k != "cached"}))


def run(
    problem_path: Path, device: str, protocol: Protocol, workdir: Path, measured: Measurement
) -> ProfileResult:
    """The candidate's timing (taken in its verify process) against the cached baselines and the
    speed-of-light floor."""
    base = baselines(problem_path, device, protocol, workdir)
    return _result(base, measured.timing, list(measured.violations), device, protocol)


def _result(
    base: dict, measured: dict, violations: list[Violation], device: str, protocol: Protocol
) -> ProfileResult:
    cand, eager = measured["candidate"], measured["eager"]
    candidate_ms = cand["median_ms"]
    if cand["wall_median_ms"] > _WALL_GAP_FACTOR * candidate_ms + _WALL_GAP_ALLOWANCE_MS:
        violations.append(
            Violation(
                "async_work",
                f"host wall time {cand['wall_median_ms']:.3f} ms "
                f"vs event time {candidate_ms:.3f} ms: work ran outside the "
                "timed stream",
            )
        )
    peaks = roofline.peaks(device)
    sol_ms = roofline.floor_ms(measured["flops"], measured["bytes_moved"], peaks, protocol)
    if candidate_ms < sol_ms * protocol.sol_slack:
        violations.append(
            Violation(
                "impossible_speed",
                f"{candidate_ms:.4f} ms is under the "
                f"speed-of-light floor {sol_ms:.4f} ms of this device "
                "(held for review, never a record)",
            )
        )
    compile_ms = base.get("compile_ms")
    return ProfileResult(
        ok=not violations,
        eager_ms=base["eager_ms"],
        compile_ms=compile_ms,
        compile_max_autotune_ms=base.get("compile_max_autotune_ms"),
        candidate_ms=candidate_ms,
        spread=cand["spread"],
        speedup_vs_eager=eager["median_ms"] / candidate_ms,
        speedup_vs_compile=compile_ms / candidate_ms if compile_ms else None,
        sol_ms=sol_ms,
        sol_fraction=sol_ms / candidate_ms,
        flops=measured["flops"],
        bytes_moved=measured["bytes_moved"],
        samples=cand["samples"],
        eager_drift=eager["median_ms"] / base["eager_ms"],
        baselines_cached=base["cached"],
        violations=violations,
    )


# ---- child side: only ever runs inside the sandbox --------------------------------------------


def _mode_key(mode: str) -> str:
    return "compile_ms" if mode == "default" else f"compile_{mode.replace('-', '_')}_ms"


def baselines_in_child(request: dict) -> dict:
    device, protocol = request["device"], Protocol.from_request(request["protocol"])
    problem_mod.apply_precision(protocol)
    problem_mod.timing_precision(protocol)
    problem = problem_mod.load_module(Path(request["problem"]), "problem_model")
    model = problem_mod.build_model(problem, device, protocol.init_seed)
    fns = {"eager_ms": model}
    for mode in protocol.compile_modes:
        fns[_mode_key(mode)] = torch.compile(model, mode=None if mode == "default" else mode)
    sets = [problem_mod.make_inputs(problem, s, device) for s in protocol.timing_seeds]
    with torch.no_grad():
        timings, _ = timing.measure(fns, sets, device=device, budget_s=protocol.timing_budget_s)
    result = {name: t.median_ms for name, t in timings.items()}
    result["spread"] = {name: t.spread for name, t in timings.items()}
    return result


def time_candidate(problem, model_new, device: str, protocol: Protocol, out_dir: Path) -> dict:
    """Times the candidate beside eager on rotating inputs; saves the outputs of its last timed
    call on each input set for the parent to re-check."""
    problem_mod.timing_precision(protocol)  # the correctness trials are over by now
    reference = problem_mod.build_model(problem, device, protocol.init_seed)
    sets = [problem_mod.make_inputs(problem, s, device) for s in protocol.timing_seeds]
    with torch.no_grad():
        outputs = problem_mod.flatten(reference(*sets[0]))
        flops = problem_mod.count_flops(reference, sets[0])
        nbytes = problem_mod.bytes_moved(sets[0], reference, outputs)
        del outputs
        timings, kept = timing.measure(
            {"candidate": model_new, "eager": reference},
            sets,
            device=device,
            budget_s=protocol.timing_budget_s,
        )
    for seed, out in zip(protocol.timing_seeds, kept["candidate"], strict=True):
        tensors = problem_mod.flatten(out)
        torch.save([t.detach().cpu() for t in tensors], out_dir / f"timed-{seed}.pt")
    return {
        "candidate": timings["candidate"].summary(),
        "eager": timings["eager"].summary(),
        "flops": flops,
        "bytes_moved": nbytes,
    }
