"""A run's life: created and queued, claimed by a worker (Run.claim), cancelled by its owner.
gpu_workers.agent_run drives a claimed run; webapp.runs.recovery re-queues one whose worker died.
An agent's run starts with start_run, a person's own kernel with start_submission (its files
checked by webapp.runs.submission); both count against the same hourly limit and the same
limit of runs queued or running at once per person.

`enqueue_run` sends the run to its GPU type's run queue once the current transaction commits
(webapp.dispatch); Run.queue_position says how many queued runs of that GPU type are before it.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from gpu_workers.harness.vocabulary import SUBMISSION_AGENT
from webapp.dispatch import send_after_commit
from webapp.errors import Conflict, TooManyRequests, Unprocessable, unknown_value
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs import agent_readiness, choices
from webapp.runs.models import ACTIVE, NOTHING_FASTER, Run, RunKind, RunStatus
from webapp.runs.submission import check_files
from webapp.runs.trace import END_STATE, record_event


class RunRefused(Conflict):
    """The request is well-formed but the state forbids it (HTTP 409); the message says why."""


class RateLimited(RunRefused, TooManyRequests):
    """Too many runs started in the last hour (HTTP 429)."""


class TooManyActive(RunRefused, TooManyRequests):
    """As many runs queued or running as one person may have at once (HTTP 429)."""


class BadRunOption(Unprocessable):
    """An unknown agent, GPU type or protocol (HTTP 422); the message lists the known ones."""


def check_option(kind: str, value: str, known: list[str]) -> None:
    if value not in known:
        raise BadRunOption(unknown_value(kind, value, known))


def start_run(owner, problem: Problem, agent: str, gpu_type: str, protocol: str) -> Run:
    """Create a queued run of a valid problem and hand it to the workers after commit."""
    check_option("agent", agent, choices.agent_names())
    _check_options(gpu_type, protocol)
    _check_valid(problem)
    agent_readiness.refuse_if_unavailable(agent, owner)
    return _create_run(owner, problem=problem, agent=agent, gpu_type=gpu_type, protocol=protocol)


def start_submission(
    owner, problem: Problem, sources: dict[str, str], gpu_type: str, protocol: str
) -> Run:
    """Queue a person's own kernel (model_new.py and kernels/…) on a valid problem: the worker
    puts it through the same compile, verify, profile and re-grade as an agent's candidate.
    Raises BadRunOption and BadSubmission (422), RunRefused (409) and RateLimited (429)."""
    _check_options(gpu_type, protocol)
    _check_valid(problem)
    files = check_files(sources, gpu_type)
    return _create_run(
        owner,
        problem=problem,
        agent=SUBMISSION_AGENT,
        kind=RunKind.SUBMISSION,
        submitted_sources=files,
        gpu_type=gpu_type,
        protocol=protocol,
    )


def _check_options(gpu_type: str, protocol: str) -> None:
    check_option("GPU type", gpu_type, choices.gpu_types())
    check_option("protocol", protocol, choices.protocols())


def _check_valid(problem: Problem) -> None:
    if problem.status != ProblemStatus.VALID:
        detail = f"; reasons: {'; '.join(problem.reasons)}" if problem.reasons else ""
        raise RunRefused(
            f"problem {problem.pk} is {problem.status}, not valid: a run can start once "
            f"validation has passed{detail}"
        )
    if not problem.source:
        raise RunRefused(
            f"problem {problem.pk} came from a results file without its source: import its "
            "suite's folder with import_suite to attach the source, then start the run"
        )


def _create_run(owner, **fields) -> Run:
    """The run, created under the owner's hourly limit and queued once the transaction commits."""
    with transaction.atomic():
        # One user's run creations queue on their row, so simultaneous requests cannot all
        # slip under the hourly limit or the limit of active runs.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        _check_rate(owner)
        _check_active(owner)
        run = Run.objects.create(owner=owner, **fields)
        enqueue_run(run)
    return run


def _check_rate(owner) -> None:
    hour_ago = timezone.now() - timedelta(hours=1)
    recent = Run.objects.filter(owner=owner, created__gte=hour_ago).order_by("created")
    count, limit = recent.count(), settings.RUNS_PER_HOUR
    if count >= limit:
        # The run that must leave the window before one more fits; round the wait up.
        oldest = recent.values_list("created", flat=True)[count - limit]
        seconds = (oldest + timedelta(hours=1) - timezone.now()).total_seconds()
        wait = max(1, math.ceil(seconds / 60))
        raise RateLimited(
            f"you started {count} runs in the last hour and the limit is {limit}: "
            f"try again in {wait} minute{'s' if wait > 1 else ''}"
        )


def _check_active(owner) -> None:
    active = Run.objects.filter(owner=owner, status__in=ACTIVE).count()
    limit = settings.ACTIVE_RUNS_PER_USER
    if active >= limit:
        raise TooManyActive(
            f"you have {active} run{'s' if active != 1 else ''} queued or running and the limit "
            f"is {limit}: start this one once one of them has ended, or cancel one (My runs)"
        )


def enqueue_run(run: Run) -> None:
    send_after_commit("run_agent", run.pk, run.gpu_type)


def cancel_run(run: Run) -> None:
    """Cancel a queued or running run. A running worker sees the status at its next step, stops
    and writes the final `ended` event; a queued run ends here."""
    with transaction.atomic():
        # The row lock orders this against the worker's own end of the run.
        runs = Run.objects.select_for_update().filter(pk=run.pk)
        status = runs.values_list("status", flat=True).first()
        if status not in ACTIVE:
            raise RunRefused(f"run {run.pk} has already {status}; only an active run can stop")
        runs.update(status=RunStatus.CANCELLED, finished=timezone.now())
        if status == RunStatus.QUEUED:
            end_event(run, RunStatus.CANCELLED, "cancelled by its owner before it started")
        else:
            record_event(run, "status", {"state": "cancel_requested"})
    run.refresh_from_db()


def end_event(run: Run, status: str, detail: str) -> None:
    """The last event of every run: viewers close their connection on it. Clearing the heartbeat
    says no worker answers for the run any more (webapp.runs.recovery reads it)."""
    Run.objects.filter(pk=run.pk).update(heartbeat=None)
    payload = {"state": END_STATE, "run_status": status, "detail": detail}
    ended = Run.objects.only("status", "best_speedup_vs_eager").get(pk=run.pk)
    if ended.found_nothing_faster:  # the page's badge says so without a reload
        payload["outcome"] = NOTHING_FASTER
    record_event(run, "status", payload)
