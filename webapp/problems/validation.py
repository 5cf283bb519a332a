"""Handing a stored problem to the validation workers, and where its validation stands.

The web process never runs a problem: `enqueue_validation` sends its id to the validation queue
once the current transaction commits (webapp.dispatch). Validation has a queue and a worker of
its own and a time limit (webapp/work_kinds.py, VALIDATE): Problem.queue_position says how
many problems wait before one, `fail_overdue_validations` ends one whose worker was killed at
the limit without saying so.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from gpu_workers.harness.vocabulary import DOES_NOT_FIT
from webapp.dispatch import send_after_commit
from webapp.problems.models import Problem, ProblemStatus
from webapp.work_kinds import VALIDATE

# States a problem's validation is not done in: waiting for a worker, or running on one.
UNFINISHED = (ProblemStatus.PENDING, ProblemStatus.VALIDATING)
# How a rejection the worker's machine caused begins (out of memory, a reference killed, twice):
# a report counts such problems as lost to the machine, not as defects of their own.
MACHINE_FAILED = "the worker could not validate it, twice (not a defect of the problem)"
HARNESS_FAILED = "the validator failed"  # the harness raised: its own bug, never the problem's


def rejection_cause(reasons: list[str]) -> str:
    """Why a rejected problem was rejected: "machine" (the worker's or the harness's failure),
    "limit" (its validation ran out of time: a hang, or too slow to validate), "memory" (judging
    it needs more than the GPU's memory) or "defect" (its own)."""
    if any(reason.startswith((MACHINE_FAILED, HARNESS_FAILED)) for reason in reasons):
        return "machine"
    if any(reason.startswith(DOES_NOT_FIT) for reason in reasons):
        return "memory"
    if VALIDATE.limit_reached() in reasons:
        return "limit"
    return "defect"


def enqueue_validation(problem: Problem) -> None:
    send_after_commit("validate_problem", problem.pk)


def validation_elapsed_s(problem: Problem) -> float | None:
    """Seconds a worker has been validating it, or None when no worker is."""
    if problem.status != ProblemStatus.VALIDATING or problem.validation_started is None:
        return None
    return (timezone.now() - problem.validation_started).total_seconds()


def unfinished_of(owner) -> int:
    """How many of the owner's problems wait for or are in validation."""
    return Problem.objects.filter(owner=owner, status__in=UNFINISHED).count()


def fail_overdue_validations(grace_s: float) -> int:
    """Rejects the validations that ran past their limit and a grace: their worker was killed
    there (the hard limit) or died, and no task will end them. Returns how many."""
    deadline = timezone.now() - timedelta(seconds=VALIDATE.time_limit_s + grace_s)
    overdue = Q(status=ProblemStatus.VALIDATING, validation_started__lt=deadline)
    return Problem.objects.filter(overdue).update(
        status=ProblemStatus.REJECTED, reasons=[VALIDATE.limit_reached()]
    )
