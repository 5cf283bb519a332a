"""Starting a suite evaluation: one agent configuration, one run per valid problem, under the
suite's protocol and a fixed budget. The runs belong to the service account and skip the hourly
per-user limit (an operator starts them from the command line); they queue like any other run
and are re-graded like any other run.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agent.config import load_agent
from webapp.accounts.service_account import service_account
from webapp.leaderboard.grading import enqueue_regrade
from webapp.leaderboard.models import GradeStatus
from webapp.runs import agent_readiness, choices
from webapp.runs.lifecycle import BadRunOption, RunRefused, check_option, end_event, enqueue_run
from webapp.runs.models import ACTIVE, Run, RunStatus
from webapp.suites.models import Evaluation, Suite
from webapp.suites.progress import Progress


def start_evaluation(
    suite: Suite, agent: str, gpu_type: str, max_turns: int | None = None
) -> Evaluation:
    check_option("agent", agent, choices.agent_names())
    check_option("GPU type", gpu_type, choices.gpu_types())
    if max_turns is not None and max_turns < 1:
        raise BadRunOption(f"max turns must be at least 1, not {max_turns}")
    problems = list(suite.valid_problems().order_by("suite_entries__position"))
    if not problems:
        raise RunRefused(
            f"suite {suite.name} has no valid problems yet: import it and let a worker validate "
            "its problems first"
        )
    if missing := suite.sources_missing():
        raise RunRefused(missing)
    owner = service_account()
    agent_readiness.refuse_if_unavailable(agent, owner)  # else every run would fail at once
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            suite=suite,
            owner=owner,
            agent=agent,
            gpu_type=gpu_type,
            protocol=suite.protocol,
            max_turns=max_turns,
            agent_identity=load_agent(agent).identity(),
        )
        _queue_runs(evaluation, problems)
    return evaluation


class AgentChanged(RunRefused):
    """The agent's configuration is no longer the one an evaluation started with."""


def agent_change(evaluation: Evaluation) -> str:
    """Why the agent is not the evaluation's any more, or "" where it still is."""
    identity = load_agent(evaluation.agent).identity()
    if identity.get("fingerprint") == evaluation.agent_identity.get("fingerprint"):
        return ""
    return (
        f"agent {evaluation.agent} changed since evaluation {evaluation.pk} started "
        "(its configuration's fingerprint differs)"
    )


def retire(evaluation: Evaluation, reason: str) -> int:
    """Cancels the evaluation's queued runs, saying why, and returns how many: after its agent
    changed none of them may run (a worker would cancel each as it took it). Its ended runs, and
    their re-grades, stay: the board shows what that configuration did."""
    cancelled = 0
    for run in evaluation.runs.filter(status=RunStatus.QUEUED):
        with transaction.atomic():
            queued = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED)
            if queued.update(status=RunStatus.CANCELLED, error=reason, finished=timezone.now()):
                end_event(run, RunStatus.CANCELLED, reason)
                cancelled += 1
    return cancelled


def resume_evaluation(evaluation: Evaluation) -> tuple[int, int]:
    """Queues a run of the evaluation's agent for each valid problem of its suite that it has no
    run of, as when its machine was lost with runs unfinished and only its results file (ended
    runs) came on, and the re-grade of each ended run with a verified candidate and no grade (a
    results file leaves out a pending one); returns how many of each. Refused (AgentChanged)
    when the agent changed since it started: its runs would mix two agents under one entrant."""
    suite = evaluation.suite
    if missing := suite.sources_missing():
        raise RunRefused(missing)
    if changed := agent_change(evaluation):
        raise AgentChanged(changed)
    agent_readiness.refuse_if_unavailable(evaluation.agent, service_account())
    with transaction.atomic():
        problems = list(
            suite.valid_problems()
            .exclude(runs__evaluation=evaluation)
            .order_by("suite_entries__position")
        )
        _queue_runs(evaluation, problems)
        ungraded = evaluation.runs.filter(
            status=RunStatus.SUCCEEDED, best_candidate__isnull=False, grade__isnull=True
        )
        regrades = [enqueue_regrade(run) for run in ungraded]
    return len(problems), len(regrades)


def _queue_runs(evaluation: Evaluation, problems: list) -> None:
    owner = service_account()
    for problem in problems:
        run = Run.objects.create(
            problem=problem,
            owner=owner,
            agent=evaluation.agent,
            gpu_type=evaluation.gpu_type,
            protocol=evaluation.protocol,
            evaluation=evaluation,
            max_turns=evaluation.max_turns,
        )
        enqueue_run(run)


def unfinished(evaluation: Evaluation) -> int:
    """Runs still queued or running, plus finished ones whose re-grade is still pending."""
    runs = evaluation.runs.all()
    pending = runs.filter(grade__status=GradeStatus.PENDING).count()
    return runs.filter(status__in=ACTIVE).count() + pending


def progress(evaluation: Evaluation) -> Progress:
    """Runs finished and re-graded of one per valid problem, the failed ones, at the pace since
    it started; the valid problems without a run in it are counted apart (not queued)."""
    runs = evaluation.runs.all()
    queued = runs.count()
    unqueued = evaluation.suite.valid_problems().exclude(runs__evaluation=evaluation).count()
    last = runs.aggregate(last=Max("finished"))["last"]
    return Progress(
        done=queued - unfinished(evaluation),
        total=queued + unqueued,
        unqueued=unqueued,
        failed=runs.filter(status=RunStatus.FAILED).count(),
        elapsed_s=(last - evaluation.created).total_seconds() if last else None,
    )
