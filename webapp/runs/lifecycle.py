"""A run's life: created and queued, claimed by a worker (Run.claim), cancelled by its owner.

`enqueue_run` calls each hook in RUN_HOOKS with the run's id and GPU type once the current
transaction commits. The list is empty here: gpu_workers.tasks registers the Celery task
(`run_agent` on the GPU type's queue) when the Celery app loads. With no hook a run stays
`queued`.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from webapp.problems.models import Problem, ProblemStatus
from webapp.runs import choices
from webapp.runs.models import ACTIVE, Run, RunStatus

RUN_HOOKS: list[Callable[[int, str], None]] = []


class RunRefused(Exception):
    """The request is well-formed but the state forbids it (HTTP 409); the message says why."""


class BadRunOption(ValueError):
    """An unknown agent, GPU type or protocol (HTTP 422); the message lists the known ones."""


def _check_option(kind: str, value: str, known: list[str]) -> None:
    if value not in known:
        raise BadRunOption(f"unknown {kind} {value!r}: use one of {', '.join(known)}")


def start_run(owner, problem: Problem, agent: str, gpu_type: str, protocol: str) -> Run:
    """Create a queued run of a valid problem and hand it to the workers after commit."""
    _check_option("agent", agent, choices.agent_names())
    _check_option("GPU type", gpu_type, choices.gpu_types())
    _check_option("protocol", protocol, choices.protocols())
    if problem.status != ProblemStatus.VALID:
        detail = f"; reasons: {'; '.join(problem.reasons)}" if problem.reasons else ""
        raise RunRefused(
            f"problem {problem.pk} is {problem.status}, not valid: a run can start once "
            f"validation has passed{detail}"
        )
    with transaction.atomic():
        run = Run.objects.create(
            problem=problem, owner=owner, agent=agent, gpu_type=gpu_type, protocol=protocol
        )
        enqueue_run(run)
    return run


def enqueue_run(run: Run) -> None:
    run_id, gpu_type = run.pk, run.gpu_type

    def send() -> None:
        for hook in RUN_HOOKS:
            hook(run_id, gpu_type)

    transaction.on_commit(send)


def cancel_run(run: Run) -> None:
    """Cancel a queued or running run. A running worker sees the status and stops."""
    cancelled = Run.objects.filter(pk=run.pk, status__in=ACTIVE).update(
        status=RunStatus.CANCELLED, finished=timezone.now()
    )
    if not cancelled:
        # Nothing got updated: the run had already ended (perhaps a moment ago).
        run.refresh_from_db(fields=["status"])
        raise RunRefused(f"run {run.pk} has already {run.status}; only an active run can stop")
    run.refresh_from_db()
