"""Celery tasks, thin: the work is in gpu_workers.problem_validation, agent_run,
baseline_measurement and regrade.

Each kind of work has its own queue per GPU type and its own worker (webapp/work_kinds.py), so
that a validation that hangs never holds a run. A worker per kind per GPU, pinned:
    CUDA_VISIBLE_DEVICES=0 celery -A webapp.celery worker -Q gpu.h100.run --concurrency 2
    CUDA_VISIBLE_DEVICES=0 celery -A webapp.celery worker -Q gpu.h100.grade --concurrency 1
    CUDA_VISIBLE_DEVICES=0 celery -A webapp.celery worker -Q gpu.h100.validate --concurrency 1
Each task stops at its kind's time limit (settings): Celery's soft limit raises
SoftTimeLimitExceeded in the task, which ends the item saying so; a task that does not stop is
killed GRACE_S later. Tasks are acknowledged late and re-delivered if the worker dies; every job
is idempotent. Each worker, as it starts, sends again the work of its queues that the database
says is waiting (its task may have been lost with the broker: gpu_workers.waiting_work), then
reaps what its kind leaves behind when a worker dies: runs whose worker died
(webapp.runs.recovery), validations past their limit (webapp.problems.validation): at start,
then every REAP_EVERY_S seconds (more often when settings.RUN_STALE_AFTER_S is short, as in
tests).
"""

from __future__ import annotations

import logging
import os
import threading

import billiard.process
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.db import connection

from gpu_workers import (
    agent_checks,
    agent_run,
    baseline_measurement,
    machine_warm_up,
    problem_validation,
    regrade,
    rollout,
    waiting_work,
)
from gpu_workers.harness.vocabulary import device_for
from webapp import local_stacks, work_kinds
from webapp.celery import (
    CHECK_AGENTS,
    MEASURE_BASELINES,
    REGRADE_RUN,
    ROLLOUT_EPISODE,
    RUN_AGENT,
    VALIDATE_PROBLEM,
    app,
    rollout_results,
)
from webapp.problems.validation import fail_overdue_validations
from webapp.runs.recovery import note_workers_stopping, reap_stale_runs

log = logging.getLogger(__name__)
REAP_EVERY_S = max(1.0, min(30.0, settings.RUN_STALE_AFTER_S / 2))
# After the soft limit, the time a task has to record why it stopped before it is killed.
GRACE_S = 60


def _limits(limit_s: int) -> dict[str, int]:
    return {"soft_time_limit": limit_s, "time_limit": limit_s + GRACE_S}


@app.task(name=VALIDATE_PROBLEM, **_limits(settings.VALIDATION_TIME_LIMIT_S))
def validate_problem(problem_id: int) -> str:
    return problem_validation.validate(problem_id)


@app.task(name=RUN_AGENT, **_limits(settings.RUN_TIME_LIMIT_S))
def run_agent(run_id: int) -> str:
    return agent_run.run(run_id, agent_run.worker_name())


@app.task(name=MEASURE_BASELINES, **_limits(settings.BASELINE_TIME_LIMIT_S))
def measure_baselines(baseline_id: int, repeats: int = 1) -> str:
    return baseline_measurement.measure(baseline_id, repeats)


@app.task(name=REGRADE_RUN, **_limits(settings.REGRADE_TIME_LIMIT_S))
def regrade_run(run_id: int) -> str:
    return regrade.regrade(run_id, agent_run.worker_name())


# A run's kind of work, on the run queue; its result goes back to the trainer that sent it.
@app.task(name=ROLLOUT_EPISODE, ignore_result=False, **_limits(settings.RUN_TIME_LIMIT_S))
def rollout_episode(problem: dict, policy_url: str, max_turns: int, gpu_type: str) -> dict:
    return rollout.rollout(problem, policy_url, max_turns, gpu_type)


rollout_episode.backend = rollout_results()


@app.task(name=CHECK_AGENTS, time_limit=300)
def check_agents(names: list[str]) -> str:
    levels = agent_checks.check_agents(names, agent_run.worker_name())
    return ", ".join(f"{name}: {level}" for name, level in levels.items()) or "no agent checked"


_reaper_stop = threading.Event()


def _check_agents_forever() -> None:
    """Every model agent's health, as the worker starts and then every AGENT_CHECK_EVERY_S."""
    try:
        while True:
            try:
                agent_checks.check_agents(worker=agent_run.worker_name())
            except Exception:  # an agents file being edited, the database away: next round
                log.warning("checking the agents failed", exc_info=True)
            every = settings.AGENT_CHECK_EVERY_S
            if not every or _reaper_stop.wait(every):
                return
    finally:
        connection.close()


def _reap_forever(served: dict[str, list[str]]) -> None:
    try:
        _resend_waiting_work(served)
        while True:
            try:
                _reap(served)
            except Exception:  # the database may be briefly away; try again next round
                log.warning("reaping failed", exc_info=True)
            if _reaper_stop.wait(REAP_EVERY_S):
                return
    finally:
        connection.close()


def _reap(served: dict[str, list[str]]) -> None:
    """What a dead worker of a kind this worker serves left behind."""
    if served[work_kinds.RUN.name]:
        reap_stale_runs()
    if served[work_kinds.VALIDATE.name]:
        fail_overdue_validations(GRACE_S)


def _resend_waiting_work(served: dict[str, list[str]]) -> None:
    """Once per start of a stack: its first worker of what this one serves sends (waiting_work
    says why); a worker of no stack sends."""
    stack = os.environ.get(local_stacks.STARTED_AS)
    try:
        if stack is None:
            sent = waiting_work.resend_waiting_work(served)
        else:
            with app.connection_for_write() as broker_connection:
                broker = broker_connection.default_channel.client
                claim = waiting_work.claim_resending(served, broker, stack)
                if claim is None:
                    log.info("waiting work was sent again by another worker of this stack")
                    return
                try:
                    sent = waiting_work.resend_waiting_work(served)
                except Exception:
                    broker.delete(claim)  # so the next worker to start sends it after all
                    raise
    except Exception:  # the database may be away: the tasks still in the broker still run
        log.warning("resending waiting work failed", exc_info=True)
        return
    if any(sent.values()):
        log.info("sent waiting work again: %s", sent)


@worker_ready.connect
def start_reaper(sender, **_) -> None:
    served = work_kinds.served(list(sender.app.amqp.queues.consume_from or ()))
    log.info("serving %s", {kind: types for kind, types in served.items() if types})
    threading.Thread(target=_reap_forever, args=(served,), name="reaper", daemon=True).start()
    if served[work_kinds.RUN.name]:  # the workers that run agents check them
        threading.Thread(target=_check_agents_forever, name="agent-checks", daemon=True).start()
    judging = served[work_kinds.RUN.name] + served[work_kinds.GRADE.name]  # compile and time
    devices = sorted({device_for(gpu_type) for gpu_type in judging})
    if devices:
        threading.Thread(target=_warm_up, args=(devices,), name="warm-up", daemon=True).start()


def _warm_up(devices: list[str]) -> None:
    """The machine's once-only costs (gpu_workers/machine_warm_up.py), so no first run pays
    them; a failure here only means a first run pays them after all."""
    for device in devices:
        try:
            log.info("machine warm-up on %s: %s", device, machine_warm_up.warm(device))
        except Exception:
            log.warning("machine warm-up on %s failed; a first run pays it", device, exc_info=True)


@worker_shutting_down.connect
def note_runs_stopping(**_) -> None:
    """The worker is being stopped (SIGTERM: the stack or its machine stopping): each run its
    pool's processes hold is noted as such, so the reaper sends it again without spending one of
    its attempts (webapp.runs.recovery). Runs that end before the pool is killed keep the note
    and are not sent again. Celery calls this in the main process's signal handler, where the
    main thread does no database work of its own."""
    pool = [agent_run.worker_name(process.pid) for process in billiard.process.active_children()]
    try:
        noted = note_workers_stopping(pool)
    except Exception:  # the database may be away: the runs are then reaped as any silent run
        log.warning("could not note the runs of a stopping worker", exc_info=True)
        return
    if noted:
        log.info("stopping: runs %s will be sent again, their attempts not counted", noted)


@worker_shutdown.connect
def stop_reaper(**_) -> None:
    _reaper_stop.set()
