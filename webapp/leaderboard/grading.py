"""Handing a finished run to the re-grade (gpu_workers.regrade) and reading where it stands.

`enqueue_regrade` creates the run's pending Grade and, once the transaction commits, calls each
hook in REGRADE_HOOKS with (run id, GPU type). The leaderboard app registers
webapp.celery.send_regrade when Django starts; tests swap the list. Only a run whose best
candidate verified is graded: a run without one has nothing to count.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.models import Run

REGRADE_HOOKS: list[Callable[[int, str], None]] = []


def enqueue_regrade(run: Run) -> Grade | None:
    """The run's Grade, pending and handed to the workers; None when there is nothing to grade.
    Calling it again for a graded run starts over (a re-grade after a fix, say)."""
    if run.best_candidate_id is None:
        return None
    grade, _ = Grade.objects.update_or_create(
        run=run,
        defaults={"candidate_id": run.best_candidate_id, "status": GradeStatus.PENDING},
    )
    run_id, gpu_type = run.pk, run.gpu_type

    def send() -> None:
        for hook in REGRADE_HOOKS:
            hook(run_id, gpu_type)

    transaction.on_commit(send)
    return grade
