"""Validating a problem: can it be optimised, and if not, why not (threat 8, degenerate problems).

The judge's side: a sandboxed reference runner computes the problem on seeds drawn here, into
buffers lent to it; the checks (runs, deterministic, depends on its inputs, not constant, runs
under torch.compile with the same result) are decided here, then eager and torch.compile are
timed and the work is counted, as for any baseline.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpu_workers.harness.judge import failure, footprint, profile, runner_process, sensitivity
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge.judge import Judge
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.judge.runner_process import RunnerError
from gpu_workers.harness.judge.sensitivity import close
from gpu_workers.harness.problem_source import ProblemError, check_source, source_sha256
from gpu_workers.harness.runner.problem import describe

_FIRST, _OTHER, _COMPILED = 4, 5, 6  # slots beside the trial and timing ones
_INPUT_INDEPENDENT = (
    "output does not depend on the inputs: two input seeds give the same output, and so do "
    f"the inputs {' or '.join(sensitivity.PROBES)} (a kernel returning a constant would pass)"
)


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
    # "" when two seeds already give different outputs, else the probe that moved the output
    sensitive_to: str = ""
    # whose failure (failure.py) when not ok: the problem's, or the machine's (worth a retry)
    failed_by: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def validate(source: str, device: str, protocol: Protocol, timeout_s: float = 600) -> ProblemReport:
    """Runs the problem in the sandbox and says whether it can be optimised, and why not."""
    sha = source_sha256(source)
    try:
        check_source(source)
    except ProblemError as exc:
        return ProblemReport(ok=False, sha256=sha, reasons=[str(exc)], failed_by=failure.PROBLEM)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="validate-") as tmp:
        problem_path = Path(tmp) / "model.py"
        problem_path.write_text(source)
        try:
            with runner_process.start_reference(
                problem_path, device, protocol, timeout_s, compiles=True
            ) as ref:
                judge = Judge(device, protocol)
                try:
                    found = _judge(judge, ref)
                finally:
                    judge.free()
        except RunnerError as exc:
            found = {
                "ok": False,
                "reasons": [failure.reason_of(exc)],
                "failed_by": failure.of_runner_error(exc),
            }
        except judge_mod.OUT_OF_MEMORY as exc:  # the judge's own buffers did not fit
            reason = f"the judge ran out of device memory: {exc}"
            found = {"ok": False, "reasons": [reason], "failed_by": failure.INFRASTRUCTURE}
    if not found["ok"] and any(map(failure.may_be_out_of_memory, found["reasons"])):
        found = _unless_it_never_fits(found, source, device)
    return ProblemReport(sha256=sha, seconds=time.monotonic() - started, **found)


def _unless_it_never_fits(found: dict, source: str, device: str) -> dict:
    """An out-of-memory is the machine's (worth a retry: the runs sharing a GPU hold memory too)
    unless judging the problem needs more than the whole device: then it is rejected, saying so."""
    needs = footprint.measure(source, device)
    misfit = needs.misfit(device) if needs is not None else None
    if misfit is None:
        return found
    return {**found, "reasons": [misfit, *found["reasons"]], "failed_by": failure.PROBLEM}


def _judge(judge: Judge, reference) -> dict:
    seed_a, seed_b = judge_mod.fresh_seeds(2)
    # never more than two sets and torch.compile's outputs at once: KernelBench's are GiBs
    first_set = judge.make_set(reference, _FIRST, seed_a)
    first = first_set.outputs
    report = {"inputs": describe(first_set.values), "outputs": describe(first)}
    again = judge.make_set(reference, _OTHER, seed_a).outputs
    reasons = degeneracy_reasons(first, again, judge.protocol)
    other = judge.make_set(reference, _OTHER, seed_b).outputs  # over `again`, now judged
    if not reasons and close(first, other, judge.protocol.atol, judge.protocol.rtol):
        # a mean loss, or an output that ignores its inputs: only inputs moved out of their
        # distribution tell the two apart
        probe = sensitivity.revealing_probe(judge, reference, _OTHER, seed_b, first)
        reasons = [] if probe else [_INPUT_INDEPENDENT]
        report["sensitive_to"] = probe or ""
    if reasons:
        return {"ok": False, "reasons": reasons, "failed_by": failure.PROBLEM, **report}
    reason = _compiled_differs(judge, reference, first)
    if reason:
        return {"ok": False, "reasons": [reason], "failed_by": failure.PROBLEM, **report}
    counts = reference.call("counts", slot=_FIRST)
    judge.release(_FIRST, _OTHER, _COMPILED)  # room for the timing sets
    times = profile.time_baselines(judge, reference, modes=("default",))
    return {
        "ok": True,
        "eager_ms": times["eager_ms"],
        "compile_ms": times["compile_ms"],
        "flops": counts["flops"],
        "bytes_moved": counts["bytes_moved"],
        **report,
    }


def _compiled_differs(judge: Judge, reference, expected) -> str | None:
    """torch.compile's outputs on the first set, in buffers of their own, against eager's."""
    first = judge.reference_sets[_FIRST]
    held = judge.lend_outputs(reference, _COMPILED, first)
    reply = reference.call("compiled", slot=_FIRST, into=_COMPILED)
    if "compile_error" in reply:
        return f"does not run under torch.compile: {reply['compile_error']}"
    if not reply["copied"] or not close(
        held.outputs, expected, judge.protocol.atol, judge.protocol.rtol
    ):
        return "torch.compile gives a different result from eager beyond the tolerance"
    return None


def degeneracy_reasons(first, again, protocol: Protocol) -> list[str]:
    """Threat 8: a problem whose output a constant kernel could match is rejected. Whether the
    output follows the inputs is judged apart, with probes (sensitivity.py)."""
    if not first:
        return ["forward returned no tensors"]
    if not all(torch.isfinite(t).all() for t in first if t.is_floating_point()):
        return ["forward produces NaN or inf on random inputs"]
    if not close(first, again, atol=1e-6, rtol=1e-5):
        return ["not deterministic: two runs on the same inputs differ (random ops in forward?)"]
    flat = [t for t in first if t.numel() > 1 and t.is_floating_point()]
    if flat and all(
        close([t], [torch.full_like(t, t.float().mean())], protocol.atol, protocol.rtol)
        for t in flat
    ):
        return ["output is (nearly) constant: a kernel returning a constant would pass"]
    return []
