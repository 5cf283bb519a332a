"""The Celery app: `celery -A webapp.celery worker -Q gpu.<type>.<kind>` runs a GPU worker of
one kind of work (validate, run, grade: webapp/work_kinds.py).

The web process only sends tasks, by name: it never imports gpu_workers.tasks, which pulls in the
harness. Each GPU type has a queue per kind of work, `gpu.<type>.<kind>`; problems are validated
on the first type's (settings.VALIDATION_GPU_TYPE). Every CELERY_* setting in webapp/settings.py
applies.
"""

from __future__ import annotations

import os

from celery import Celery

from webapp.work_kinds import GRADE, RUN, VALIDATE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("kernelarena", include=["gpu_workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")

VALIDATE_PROBLEM = "gpu_workers.tasks.validate_problem"
RUN_AGENT = "gpu_workers.tasks.run_agent"
MEASURE_BASELINES = "gpu_workers.tasks.measure_baselines"
REGRADE_RUN = "gpu_workers.tasks.regrade_run"
CHECK_AGENTS = "gpu_workers.tasks.check_agents"
ROLLOUT_EPISODE = "gpu_workers.tasks.rollout_episode"


# Longer than a trainer waits for a batch (agent/train/worker_rollouts.py): a rollout that ends
# early keeps its result while the trainer still waits for one sent before it.
ROLLOUT_RESULT_KEPT_S = 8 * 3600


def rollout_results():
    """Where a rollout's result waits for the trainer that sent it (gpu_workers/rollout.py), in
    the broker's Redis. The rollout task alone has it: a site-wide result store would make every
    task the web process sends subscribe to a result nobody reads (Celery's Redis store does on
    each send)."""
    from celery.app.backends import by_url

    backend, url = by_url(app.conf.broker_url)  # redis+socket://PATH: the store's socket://PATH
    return backend(app=app, url=url, expires=ROLLOUT_RESULT_KEPT_S)


def send_validation(problem_id: int) -> None:
    from django.conf import settings

    queue = VALIDATE.queue(settings.VALIDATION_GPU_TYPE)
    app.send_task(VALIDATE_PROBLEM, args=[problem_id], queue=queue)


def send_run(run_id: int, gpu_type: str) -> None:
    app.send_task(RUN_AGENT, args=[run_id], queue=RUN.queue(gpu_type))


# The broker's (Redis') priorities: 0 is taken first, and a message sent without one has it.
BEHIND_REGRADES = 9


def send_baselines(baseline_id: int, gpu_type: str, repeats: int) -> None:
    # Measuring, as a re-grade is: on the grade worker, never behind a run or a validation. A
    # suite's baselines come by the hundred; a re-grade is what the board counts, so it is taken
    # first (session 42: level 1's re-grades waited behind 83 baselines of level 2).
    app.send_task(
        MEASURE_BASELINES,
        args=[baseline_id, repeats],
        queue=GRADE.queue(gpu_type),
        priority=BEHIND_REGRADES,
    )


def send_regrade(run_id: int, gpu_type: str) -> None:
    app.send_task(REGRADE_RUN, args=[run_id], queue=GRADE.queue(gpu_type))


def send_agent_checks(names: list[str]) -> None:
    """To the first GPU type's grade queue, whose items are short (re-grades, baselines): any
    worker reaches the same model servers as the run workers do."""
    from django.conf import settings

    app.send_task(CHECK_AGENTS, args=[names], queue=GRADE.queue(settings.GPU_TYPES[0]))
