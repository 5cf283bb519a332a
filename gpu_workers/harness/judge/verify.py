"""Correctness: is the candidate's ModelNew the same function as the problem's Model?

The judge (this process; it never imports either) draws fresh seeds, has the reference runner
compute each trial's inputs and outputs into its buffers, lends the candidate runner copies of
the inputs and NaN-poisoned output buffers, and compares on the device. Nothing the candidate
process says can make a trial pass. See docs/verification.md for the threats each check answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge import sensitivity, source_gate
from gpu_workers.harness.judge.failure import CANDIDATE
from gpu_workers.harness.judge.judge import TRIAL_SLOT, Judge
from gpu_workers.harness.judge.runner_process import RunnerDied, RunnerFailed, RunnerProcess
from gpu_workers.harness.judge.source_gate import Violation


@dataclass
class VerifyResult:
    ok: bool
    trials: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None
    # whose failure (failure.py): set whenever ok is False
    failed_by: str | None = None

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "trials": self.trials,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "violations": [v.to_dict() for v in self.violations],
            "error": self.error,
            "failed_by": self.failed_by,
        }


def static_gate(sources: dict[str, str]) -> VerifyResult | None:
    found = source_gate.check_sources(sources)
    return VerifyResult(ok=False, violations=found, failed_by=CANDIDATE) if found else None


class _Ended(Exception):
    """The candidate's process died or failed during a trial: the verdict is decided."""

    def __init__(self, result: VerifyResult):
        self.result = result


def trials(judge: Judge, reference: RunnerProcess, candidate: RunnerProcess) -> VerifyResult:
    """The protocol's trials, each on inputs from a seed drawn now, and one on a probe where the
    seeds alone could not tell the output from a constant. A reference failure raises
    RunnerFailed/RunnerDied from the reference runner: not the candidate's fault."""
    protocol = judge.protocol
    seeds = judge_mod.fresh_seeds(protocol.trials + len(protocol.secret_seeds) + 1)
    probe_seed = seeds.pop()
    result = VerifyResult(ok=False, max_abs_err=0.0, max_rel_err=0.0)
    first = seeds_agree = None
    try:
        for trial, seed in enumerate(seeds):
            expected = judge.make_set(reference, TRIAL_SLOT, seed)
            if trial == 0:
                first = sensitivity.copy_if_small(expected.outputs)
            elif trial == 1 and first is not None:
                seeds_agree = sensitivity.close(
                    first, expected.outputs, protocol.atol, protocol.rtol
                )
            _trial(judge, candidate, expected, trial, result)
        if seeds_agree and not result.violations:
            # a constant would have passed so far (a mean loss): one trial where it cannot
            if sensitivity.revealing_probe(judge, reference, TRIAL_SLOT, probe_seed, first):
                _trial(judge, candidate, judge.reference_sets[TRIAL_SLOT], len(seeds), result)
    except _Ended as ended:
        return ended.result
    result.ok = not result.violations
    result.failed_by = None if result.ok else CANDIDATE
    result.violations = list(dict.fromkeys(result.violations))[:20]
    return result


def _trial(judge: Judge, candidate: RunnerProcess, expected, trial: int, result: VerifyResult):
    """One candidate call on the set in TRIAL_SLOT, judged into `result`: the same command and
    the same checks as a timed call, with the dispatch observer on."""
    lent = judge.lend_to_candidate(candidate, TRIAL_SLOT)
    label = f"trial {trial}"
    try:
        reply = candidate.call("time", fn="candidate", slot=TRIAL_SLOT, into="lent", observe=True)
    except RunnerDied as died:
        ended = Violation("process_exit", f"{label}: {died}")
        violations = [*result.violations, ended]
        ended = VerifyResult(
            ok=False, trials=trial, violations=violations, error=str(died), failed_by=CANDIDATE
        )
        raise _Ended(ended) from None
    except RunnerFailed as failed:
        ended = VerifyResult(ok=False, trials=trial, error=str(failed), failed_by=CANDIDATE)
        raise _Ended(ended) from None
    found, abs_err, rel_err = judge_mod.judge_call(judge, expected, lent, reply, label)
    result.violations += found
    result.max_abs_err = max(result.max_abs_err, abs_err)
    result.max_rel_err = max(result.max_rel_err, rel_err)
    result.trials = trial + 1
