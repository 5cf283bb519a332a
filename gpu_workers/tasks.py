"""Celery tasks, thin: the work is in gpu_workers.problem_validation, agent_run,
baseline_measurement and regrade.

Start a worker per GPU, pinned, on its type's queue:
    CUDA_VISIBLE_DEVICES=0 celery -A webapp.celery worker -Q gpu.h100 --concurrency 2
Tasks are acknowledged late and re-delivered if the worker dies; every job is idempotent.
Each worker, as it starts, sends again the work the database says is waiting (its task may have
been lost with the broker: gpu_workers.waiting_work), then reaps runs whose worker died
(webapp.runs.recovery): at start, then every REAP_EVERY_S seconds (more often when
settings.RUN_STALE_AFTER_S is short, as in tests).
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from gpu_workers import (
    agent_checks,
    agent_run,
    baseline_measurement,
    problem_validation,
    regrade,
    waiting_work,
)
from webapp.celery import (
    CHECK_AGENTS,
    MEASURE_BASELINES,
    REGRADE_RUN,
    RUN_AGENT,
    VALIDATE_PROBLEM,
    app,
)
from webapp.runs.recovery import reap_stale_runs

log = logging.getLogger(__name__)
REAP_EVERY_S = max(1.0, min(30.0, settings.RUN_STALE_AFTER_S / 2))
VALIDATION_TIME_LIMIT_S = 1800


@app.task(name=VALIDATE_PROBLEM, time_limit=VALIDATION_TIME_LIMIT_S)
def validate_problem(problem_id: int) -> str:
    return problem_validation.validate(problem_id)


@app.task(name=RUN_AGENT, time_limit=settings.RUN_TIME_LIMIT_S)
def run_agent(run_id: int) -> str:
    return agent_run.run(run_id, agent_run.worker_name())


@app.task(name=MEASURE_BASELINES, time_limit=VALIDATION_TIME_LIMIT_S * 2)
def measure_baselines(baseline_id: int, repeats: int = 1) -> str:
    return baseline_measurement.measure(baseline_id, repeats)


@app.task(name=REGRADE_RUN, time_limit=VALIDATION_TIME_LIMIT_S)
def regrade_run(run_id: int) -> str:
    return regrade.regrade(run_id, agent_run.worker_name())


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


def _reap_forever() -> None:
    try:
        _resend_waiting_work()
        while True:
            try:
                reap_stale_runs()
            except Exception:  # the database may be briefly away; try again next round
                log.warning("reaping stale runs failed", exc_info=True)
            if _reaper_stop.wait(REAP_EVERY_S):
                return
    finally:
        connection.close()


def _resend_waiting_work() -> None:
    try:
        sent = waiting_work.resend_waiting_work(settings.GPU_TYPES)
    except Exception:  # the database may be away: the tasks still in the broker still run
        log.warning("resending waiting work failed", exc_info=True)
        return
    if any(sent.values()):
        log.info("sent waiting work again: %s", sent)


@worker_ready.connect
def start_reaper(**_) -> None:
    threading.Thread(target=_reap_forever, name="reaper", daemon=True).start()
    threading.Thread(target=_check_agents_forever, name="agent-checks", daemon=True).start()


@worker_shutdown.connect
def stop_reaper(**_) -> None:
    _reaper_stop.set()
