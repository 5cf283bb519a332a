"""Correctness: is the candidate's ModelNew the same function as the problem's Model?

The judge (this process; it never imports either) draws fresh seeds, has the reference runner
compute each trial's inputs and outputs into its buffers, lends the candidate runner copies of
the inputs and NaN-poisoned output buffers, and compares on the device. Nothing the candidate
process says can make a trial pass. See docs/verification.md for the threats each check answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_workers.harness import judge as judge_mod
from gpu_workers.harness import source_gate
from gpu_workers.harness.judge import Judge
from gpu_workers.harness.runner_process import RunnerDied, RunnerFailed, RunnerProcess
from gpu_workers.harness.source_gate import Violation

TRIAL_SLOT = 0


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


def static_gate(sources: dict[str, str]) -> VerifyResult | None:
    found = source_gate.check_sources(sources)
    return VerifyResult(ok=False, violations=found) if found else None


def trials(judge: Judge, reference: RunnerProcess, candidate: RunnerProcess) -> VerifyResult:
    """The protocol's trials, each on inputs from a seed drawn now. A reference failure raises
    RunnerFailed/RunnerDied from the reference runner: not the candidate's fault."""
    protocol = judge.protocol
    seeds = judge_mod.fresh_seeds(protocol.trials + len(protocol.secret_seeds))
    violations: list[Violation] = []
    max_abs = max_rel = 0.0
    for trial, seed in enumerate(seeds):
        expected = judge.make_set(reference, TRIAL_SLOT, seed)
        lent = judge.lend_to_candidate(candidate, TRIAL_SLOT)
        try:
            reply = candidate.call("trial", slot=TRIAL_SLOT, trial=trial)
        except RunnerDied as died:
            ended = Violation("process_exit", f"trial {trial}: {died}")
            return VerifyResult(
                ok=False, trials=trial, violations=[*violations, ended], error=str(died)
            )
        except RunnerFailed as failed:
            return VerifyResult(ok=False, trials=trial, error=str(failed))
        violations += _claimed_violations(reply)
        found, abs_err, rel_err = judge_mod.check_outputs(
            judge, expected, lent, reply, f"trial {trial}"
        )
        violations += found
        max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
        changed = judge_mod.inputs_changed(lent, expected)
        violations += [
            Violation("input_mutated", f"trial {trial}: input {i} was modified") for i in changed
        ]
    return VerifyResult(
        ok=not violations,
        trials=len(seeds),
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        violations=list(dict.fromkeys(violations))[:20],
    )


def _claimed_violations(reply: dict) -> list[Violation]:
    """What the candidate's process reported about itself: only ever a reason to fail."""
    found = []
    for item in reply.get("violations") or []:
        if isinstance(item, dict) and isinstance(item.get("code"), str):
            found.append(Violation(item["code"][:40], str(item.get("detail", ""))[:500]))
    return found
