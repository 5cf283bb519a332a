"""Work the database says is waiting, sent to the workers again when a worker starts.

A task lives in the broker: when the broker restarts empty (the embedded Redis of `make run`, a
GPU host that went away with its stack), queued runs, problems waiting for validation, requested
baselines and pending re-grades would wait for good. So every worker, as it starts, sends each
of them again for the GPU types it serves. A second copy of a task that still exists does
nothing: a run is claimed by a conditional update, and validation, baselines and the re-grade
skip or redo work whose result is the same. Running runs are the reaper's (webapp.runs.recovery).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from webapp.leaderboard.grading import enqueue_regrade
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.validation import enqueue_validation
from webapp.runs.lifecycle import enqueue_run
from webapp.runs.models import Run, RunStatus
from webapp.suites.baselines import resend_baseline
from webapp.suites.models import Baseline


def resend_waiting_work(gpu_types: list[str]) -> dict[str, int]:
    """Sends every waiting item of these GPU types again; returns how many of each kind."""
    with transaction.atomic():  # each enqueue sends once this commits
        runs = Run.objects.filter(status=RunStatus.QUEUED, gpu_type__in=gpu_types)
        for run in runs:
            enqueue_run(run)
        problems = _waiting_problems(gpu_types)
        for problem in problems:
            enqueue_validation(problem)
        unanswered = Q(measured__isnull=True) | Q(measured__lt=F("requested"))
        baselines = Baseline.objects.filter(
            unanswered, gpu_type__in=gpu_types, requested__isnull=False, error=""
        )
        for baseline in baselines:
            resend_baseline(baseline)
        grades = Grade.objects.filter(status=GradeStatus.PENDING, run__gpu_type__in=gpu_types)
        for grade in grades.select_related("run"):
            enqueue_regrade(grade.run)
    return {
        "runs": len(runs),
        "problems": len(problems),
        "baselines": len(baselines),
        "grades": len(grades),
    }


def _waiting_problems(gpu_types: list[str]):
    """Validation runs on one GPU type; only its workers send it."""
    if settings.VALIDATION_GPU_TYPE not in gpu_types:
        return Problem.objects.none()
    waiting = Q(status=ProblemStatus.PENDING) | Q(status=ProblemStatus.VALIDATING)
    return Problem.objects.filter(waiting).exclude(source="")
