"""One agent run on a worker: claim it, build the workspace, run the agent, record the result.

Whatever happens after the claim, the run ends succeeded (a verified candidate exists), failed
(with a reason) or cancelled, and its last event is `ended`; a worker that dies before that is
covered by webapp.runs.recovery.
"""

from __future__ import annotations

import logging
import os
import socket

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent.backend_choice import make_backend
from agent.config import ConfigError, MissingApiKey, load_agent
from agent.loop import Agent, RunResult
from agent.submission import submission_backend, submission_config
from gpu_workers import stored_baselines
from gpu_workers.harness import settings as harness_settings
from gpu_workers.harness.judge import environment, gpu_lock, protocol
from gpu_workers.harness.session import Session
from gpu_workers.harness.vocabulary import device_for
from gpu_workers.heartbeat import Heartbeat
from gpu_workers.shown_errors import without_traceback
from gpu_workers.trace_recorder import TraceRecorder
from webapp.leaderboard.evaluation import agent_change
from webapp.leaderboard.grading import enqueue_regrade
from webapp.runs import model_keys
from webapp.runs.lifecycle import end_event
from webapp.runs.models import Run, RunKind, RunStatus
from webapp.runs.trace import record_event
from webapp.storable import storable
from webapp.work_kinds import RUN

log = logging.getLogger(__name__)

# The agent's own budget ends a run before the task's hard time limit does.
TIME_LIMIT_MARGIN_S = 120


def worker_name(pid: int | None = None) -> str:
    """What a run's `worker` says of the process that claimed it: this one, or `pid` on this
    host."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def run(run_id: int, worker: str) -> str:
    """Runs the agent for a queued run; returns what happened, for the worker's log."""
    run = Run.objects.select_related("problem").filter(pk=run_id).first()
    if run is None:
        return f"run {run_id} no longer exists"
    if not run.claim(worker):
        return f"run {run_id} was not queued (another worker claimed it, or it was cancelled)"
    record_event(run, "status", {"state": "claimed", "worker": worker, "attempt": run.attempts})
    if changed := agent_changed_since_evaluation(run):
        Run.objects.filter(pk=run.pk).update(
            status=RunStatus.CANCELLED, error=changed, finished=timezone.now(), heartbeat=None
        )
        end_event(run, RunStatus.CANCELLED, changed)
        return f"run {run_id} cancelled: {changed}"
    gpu_held_before = gpu_lock.held_seconds()
    try:
        with Heartbeat(run.pk, settings.RUN_HEARTBEAT_S):
            result = _run_agent(run)
    except Exception as exc:  # a workspace, config or harness failure: the run ends, with why
        log.exception("run %s failed", run_id)  # the traceback is for the logs, not the page
        detail = failure_detail(run, exc)
        gpu_seconds = gpu_lock.held_seconds() - gpu_held_before
        _finish(run, None, detail, gpu_seconds)
        return detail
    gpu_seconds = gpu_lock.held_seconds() - gpu_held_before
    return _finish(run, result, result.detail, gpu_seconds)


def agent_changed_since_evaluation(run: Run) -> str:
    """Why a suite evaluation's run must not start: its agent's configuration (this host's agents
    file) is no longer the one the evaluation started with, and one entrant's row would mix two
    agents' runs. Empty when it may start (or is no evaluation's)."""
    evaluation = run.evaluation
    if evaluation is None or run.kind == RunKind.SUBMISSION:
        return ""
    if not (evaluation.agent_identity or {}).get("fingerprint"):
        return ""  # started with no identity recorded: nothing to compare with
    try:
        changed = agent_change(evaluation)
    except ConfigError:  # a missing agent fails the run as before, saying so
        return ""
    return f"{changed}: start a new evaluation for it" if changed else ""


def failure_detail(run: Run, exc: Exception) -> str:
    """The run's error for a failure outside the agent's own loop: one line that names the fix
    where the person or the operator has one; the traceback stays in the worker's log."""
    if isinstance(exc, SoftTimeLimitExceeded):  # the agent's own budget did not end it
        return RUN.limit_reached()
    if isinstance(exc, MissingApiKey):  # e.g. the person removed their key while it was queued
        return model_keys.missing_key_message(run.agent, exc.variable)
    if isinstance(exc, model_keys.UnusableModelKey):
        return str(exc)
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"the worker could not run the agent: {first_line}"


def _run_agent(run: Run) -> RunResult:
    if run.kind == RunKind.SUBMISSION:
        config, backend = submission_config(), submission_backend(run.submitted_sources)
    else:
        config = load_agent(run.agent)
        if run.max_turns:  # a suite evaluation's fixed budget
            config = config.with_budget(max_turns=run.max_turns)
        # The owner's own key for this agent, if saved, else the operator's; fails fast on a
        # missing or unreadable key, or a missing script.
        backend = make_backend(config, model_keys.key_for_run(run))
    budget_s = settings.RUN_TIME_LIMIT_S - TIME_LIMIT_MARGIN_S
    if not config.budget.max_seconds or config.budget.max_seconds > budget_s:
        config = config.with_budget(max_seconds=budget_s)
    device = device_for(run.gpu_type)
    proto = protocol.by_name(run.protocol)
    context = {
        "environment": environment.describe(device, harness_settings.gpu_index()),
        "protocol": proto.to_dict(),
    }
    recorder = TraceRecorder(run, context)
    stored_baselines.lend(run.problem, run.gpu_type, proto)  # the first profile waits for none
    with Session(
        run.problem.source, device=device, protocol=proto, baselines_ahead=True
    ) as session:
        agent = Agent(config, backend, session, recorder, should_stop=recorder.cancel_reason)
        return agent.run()


def _finish(run: Run, result: RunResult | None, detail: str, gpu_seconds: float) -> str:
    detail = storable(without_traceback(detail, run.pk))  # a finish summary is the model's
    with transaction.atomic():
        # Locked so that a cancel arriving now is either seen here or refused there. The best is
        # the one the recorder stored, ranked across attempts (result.best knows only this one).
        current, best_id = (
            Run.objects.select_for_update()
            .filter(pk=run.pk)
            .values_list("status", "best_candidate_id")
            .get()
        )
        if current == RunStatus.CANCELLED:
            status = RunStatus.CANCELLED
        else:
            status = RunStatus.SUCCEEDED if best_id is not None else RunStatus.FAILED
        error = "" if status == RunStatus.SUCCEEDED else detail
        if status == RunStatus.FAILED and result is not None:
            error = f"no verified candidate ({result.status}): {detail}".strip()
        Run.objects.filter(pk=run.pk).update(
            status=status, error=error, finished=timezone.now(), gpu_seconds=gpu_seconds
        )
        end_event(run, status, error or detail)
        if status == RunStatus.SUCCEEDED:  # its best candidate counts once it is re-graded
            run.best_candidate_id = best_id
            enqueue_regrade(run)
    return f"run {run.pk} {status}"
