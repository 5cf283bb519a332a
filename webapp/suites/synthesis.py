"""Synthesizing a suite (issue 17, docs/synthesis.md): the composer's candidates for a seed, in
index order, become public problems of the service account in a suite until it holds `count` of
that seed. Each candidate passes, in order:

1. similarity: not the same source or the same operators as a problem of the reference folder or
   of the suite (gpu_workers.harness.synthesis.signature), nor as an earlier candidate;
2. validation: stored as a private problem and validated by a worker in the sandbox, as an upload
   is (runs eagerly and under torch.compile, deterministic, not constant, follows its inputs);
3. eager time: the validated eager time is inside the window.

A candidate that passes joins the suite with its provenance (composer, seed, index, operators,
shapes and each filter's result); one that does not is listed with the reason. The web process
never runs a candidate: this module only writes source text and reads what workers stored.
Running again with the same seed and count walks the same candidates: those already in the
suite count, those already rejected keep their reasons, only what is missing is tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from gpu_workers.harness.problem_source import source_sha256
from gpu_workers.harness.synthesis.composer import (
    BUDGETS,
    COMPOSER,
    COMPOSERS,
    Budget,
    Candidate,
    compose,
)
from gpu_workers.harness.synthesis.operators import Operator, available
from gpu_workers.harness.synthesis.signature import SignatureIndex
from webapp.accounts.service_account import service_account
from webapp.problems.models import Problem, ProblemStatus, Visibility
from webapp.problems.upload import upload_problem
from webapp.problems.validation import enqueue_validation
from webapp.suites.models import Suite, SuiteProblem


class SynthesisError(ValueError):
    """The options cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class Settings:
    seed: int
    count: int
    device: str = "cpu"  # the target the shapes are chosen for
    max_ops: int = 5
    eager_window_ms: tuple[float, float] | None = None  # None: the budget's, widened
    max_candidates: int | None = None  # None: 4 per wanted problem, plus 20
    reference: Path | None = None
    with_transformers: bool | None = None  # None: when transformers is installed here
    composer: str | None = None  # None: the suite's (what its problems were made with), or COMPOSER

    @property
    def budget(self) -> Budget:
        return BUDGETS[self.device]

    @property
    def window(self) -> tuple[float, float]:
        """The measured eager time admitted: wider than the composer's estimate aims for, as
        the estimate is rough."""
        if self.eager_window_ms is not None:
            return self.eager_window_ms
        return (self.budget.min_ms / 4, self.budget.max_ms * 10)

    @property
    def candidates(self) -> int:
        return self.max_candidates or 4 * self.count + 20


@dataclass
class Outcome:
    candidate: Candidate
    problem: Problem | None = None  # stored (and sent to validation)
    entry: SuiteProblem | None = None  # in the suite
    reason: str = ""  # why it was turned away
    new: bool = False  # joined the suite in this run


@dataclass
class Synthesis:
    """One run of the command over a suite: the index of what new candidates must not copy."""

    suite: Suite
    settings: Settings
    index: SignatureIndex
    operators: tuple[Operator, ...]
    composer: str = COMPOSER
    outcomes: list[Outcome] = field(default_factory=list)

    def have(self) -> int:
        return self.suite.entries.filter(provenance__seed=self.settings.seed).count()

    def wanted(self) -> int:
        return self.settings.count - self.have()


def start(suite_name: str, settings: Settings) -> Synthesis:
    if settings.device not in BUDGETS:
        raise SynthesisError(f"unknown device {settings.device!r}: use one of {', '.join(BUDGETS)}")
    if settings.count < 1:
        raise SynthesisError("--count is at least 1")
    if not 1 <= settings.max_ops <= 5:
        raise SynthesisError("--max-ops is 1 to 5")
    low, high = settings.window
    if not 0 <= low < high:
        raise SynthesisError(f"the eager window {low}..{high} ms is empty")
    index = SignatureIndex()
    if settings.reference is not None:
        if not settings.reference.is_dir():
            raise SynthesisError(f"{settings.reference} is not a folder of problem files")
        if not index.add_folder(settings.reference):
            raise SynthesisError(f"{settings.reference} has no readable .py problem files")
    suite, _ = Suite.objects.get_or_create(
        name=suite_name,
        defaults={"description": f"synthesized (seed {settings.seed}); docs/synthesis.md"},
    )
    for entry in suite.entries.select_related("problem"):
        if entry.problem.source:
            index.add(f"suite {entry.name}", entry.problem.source)
    composer = _composer(suite, settings.composer)
    return Synthesis(suite, settings, index, available(settings.with_transformers), composer)


def _composer(suite: Suite, asked: str | None) -> str:
    """The composer a suite's problems were made with goes on making them (so that a seed's
    candidates are the ones it began with); a new suite's is the one asked for, or COMPOSER."""
    if asked is not None and asked not in COMPOSERS:
        raise SynthesisError(f"unknown composer {asked!r}: use one of {', '.join(COMPOSERS)}")
    made = {e.provenance.get("composer") for e in suite.entries.all() if e.provenance}
    made.discard(None)
    if len(made) > 1:
        raise SynthesisError(f"suite {suite.name} holds problems of {', '.join(sorted(made))}")
    if made and asked is not None and asked not in made:
        raise SynthesisError(
            f"suite {suite.name} was made with {made.pop()}: its seeds go on with it; "
            f"synthesize into a new suite to use {asked}"
        )
    return made.pop() if made else asked or COMPOSER


def offer(synthesis: Synthesis, position: int) -> Outcome:
    """Candidate `position`: already in the suite, turned away with a reason, or stored as a
    problem (its validation sent to a worker, or already done)."""
    settings = synthesis.settings
    candidate = compose(
        settings.seed,
        position,
        settings.max_ops,
        settings.budget,
        synthesis.operators,
        composer=synthesis.composer,
    )
    outcome = Outcome(candidate)
    synthesis.outcomes.append(outcome)
    owner = service_account()
    existing = Problem.objects.filter(owner=owner, sha256=source_sha256(candidate.source)).first()
    entry = existing and synthesis.suite.entries.filter(problem=existing).first()
    if entry:
        outcome.problem, outcome.entry = existing, entry
        return outcome
    match = synthesis.index.match(candidate.source)
    synthesis.index.add(candidate.name, candidate.source)
    if match is not None:
        outcome.reason = f"similar: {match.reason()}"
        return outcome
    title = f"{synthesis.suite.name}/{candidate.name}"
    # the service account's own work, like a suite import: not held to a person's upload limit
    outcome.problem, created = upload_problem(
        owner, title, candidate.source, Visibility.PRIVATE, bounded=False
    )
    if not created and outcome.problem.status == ProblemStatus.PENDING:
        # stored by an earlier run whose send was lost (no broker then): no worker has it
        enqueue_validation(outcome.problem)
    return outcome


def admit(synthesis: Synthesis, outcome: Outcome) -> None:
    """After validation: into the suite with its provenance, or the reason it is not."""
    if outcome.entry is not None or outcome.problem is None:
        return
    problem = Problem.objects.get(pk=outcome.problem.pk)
    outcome.problem = problem
    if problem.status != ProblemStatus.VALID:
        reasons = "; ".join(problem.reasons) or f"validation not finished ({problem.status})"
        outcome.reason = f"validation: {reasons}"
        return
    low, high = synthesis.settings.window
    if problem.eager_ms is None or not low <= problem.eager_ms <= high:
        outcome.reason = (
            f"eager time: {problem.eager_ms} ms on {problem.validated_on}, outside {low}..{high} ms"
        )
        return
    if synthesis.have() >= synthesis.settings.count:
        outcome.reason = "not needed: the suite already has the count asked for"
        return
    with transaction.atomic():
        outcome.entry = SuiteProblem.objects.create(
            suite=synthesis.suite,
            problem=problem,
            name=outcome.candidate.name,
            position=synthesis.suite.entries.count(),
            provenance=provenance(synthesis, outcome.candidate, problem),
        )
        Problem.objects.filter(pk=problem.pk).update(visibility=Visibility.PUBLIC)
    outcome.new = True


def provenance(synthesis: Synthesis, candidate: Candidate, problem: Problem) -> dict:
    settings = synthesis.settings
    low, high = settings.window
    return {
        **candidate.provenance(),
        "device": settings.device,
        "operators": "torch and transformers"
        if any(op.needs for op in synthesis.operators)
        else "torch",
        "filters": {
            "similarity": {
                "passed": True,
                "reference": str(settings.reference) if settings.reference else None,
                # the reference's, the suite's and earlier candidates' sources
                "compared_with": len(synthesis.index.sources),
            },
            "validation": {
                "passed": True,
                "validated_on": problem.validated_on,
                "eager_ms": problem.eager_ms,
                "compile_ms": problem.compile_ms,
                "flops": problem.flops,
                "bytes_moved": problem.bytes_moved,
            },
            "eager_time": {"passed": True, "eager_ms": problem.eager_ms, "window_ms": [low, high]},
        },
    }


def batch(synthesis: Synthesis, first: int) -> range:
    """The next candidates to try: as many as are still wanted (most pass; each costs a
    validation), within the run's limit."""
    size = max(1, synthesis.wanted())
    return range(first, min(first + size, synthesis.settings.candidates))
