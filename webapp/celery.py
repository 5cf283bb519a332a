"""The Celery app: `celery -A webapp.celery worker -Q gpu.<type>` runs a GPU worker.

The web process only sends tasks, by name: it never imports gpu_workers.tasks, which pulls in the
harness. Each GPU type has its own queue, `gpu.<type>`; problems are validated on the first
type's queue (settings.VALIDATION_GPU_TYPE). Every CELERY_* setting in webapp/settings.py applies.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("kernelarena", include=["gpu_workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")

VALIDATE_PROBLEM = "gpu_workers.tasks.validate_problem"
RUN_AGENT = "gpu_workers.tasks.run_agent"
MEASURE_BASELINES = "gpu_workers.tasks.measure_baselines"
REGRADE_RUN = "gpu_workers.tasks.regrade_run"
CHECK_AGENTS = "gpu_workers.tasks.check_agents"


def queue_for(gpu_type: str) -> str:
    return f"gpu.{gpu_type}"


def send_validation(problem_id: int) -> None:
    from django.conf import settings

    queue = queue_for(settings.VALIDATION_GPU_TYPE)
    app.send_task(VALIDATE_PROBLEM, args=[problem_id], queue=queue)


def send_run(run_id: int, gpu_type: str) -> None:
    app.send_task(RUN_AGENT, args=[run_id], queue=queue_for(gpu_type))


def send_baselines(baseline_id: int, gpu_type: str, repeats: int) -> None:
    app.send_task(MEASURE_BASELINES, args=[baseline_id, repeats], queue=queue_for(gpu_type))


def send_regrade(run_id: int, gpu_type: str) -> None:
    app.send_task(REGRADE_RUN, args=[run_id], queue=queue_for(gpu_type))


def send_agent_checks(names: list[str]) -> None:
    """To the first GPU type's queue: any worker reaches the same model servers."""
    from django.conf import settings

    app.send_task(CHECK_AGENTS, args=[names], queue=queue_for(settings.GPU_TYPES[0]))
