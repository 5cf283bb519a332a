"""Handing a finished run to the re-grade (gpu_workers.regrade) and reading where it stands.

`enqueue_regrade` creates the run's pending Grade and, once the transaction commits, sends the
run to its GPU type's grade queue (webapp.dispatch). Only a run whose best
candidate verified is graded: a run without one has nothing to count. Grade.queue_position says how
many pending re-grades of that GPU type are before one.
"""

from __future__ import annotations

from webapp.dispatch import send_after_commit
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.models import Run


def enqueue_regrade(run: Run) -> Grade | None:
    """The run's Grade, pending and handed to the workers; None when there is nothing to grade.
    Calling it again for a graded run starts over (a re-grade after a fix, say)."""
    if run.best_candidate_id is None:
        return None
    grade, _ = Grade.objects.update_or_create(
        run=run,
        defaults={"candidate_id": run.best_candidate_id, "status": GradeStatus.PENDING},
    )
    send_after_commit("regrade_run", run.pk, run.gpu_type)
    return grade
