"""Runs whose worker died: re-queued, or failed once they have used their attempts.

A running worker touches Run.heartbeat every RUN_HEARTBEAT_S seconds. A run whose heartbeat is
older than RUN_STALE_AFTER_S lost its worker (killed, out of memory, host gone): every worker
calls reap_stale_runs at start and then periodically, so no run stays "running" for good. The
conditional updates make concurrent reapers harmless: one wins, the others match no row.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp.runs.lifecycle import end_event, enqueue_run
from webapp.runs.models import Run, RunStatus
from webapp.runs.trace import record_event

log = logging.getLogger(__name__)


def reap_stale_runs() -> list[int]:
    """Recover every running run with a stale heartbeat; returns the ids recovered."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_STALE_AFTER_S)
    stale = Run.objects.filter(status=RunStatus.RUNNING, heartbeat__lt=cutoff)
    return [run.pk for run in stale if _recover(run, cutoff)]


def _recover(run: Run, cutoff) -> bool:
    silent = (
        f"its worker {run.worker or '?'} stopped answering "
        f"(no heartbeat for over {settings.RUN_STALE_AFTER_S} s)"
    )
    still_stale = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat__lt=cutoff)
    with transaction.atomic():
        if run.attempts < settings.RUN_MAX_ATTEMPTS:
            if not still_stale.update(status=RunStatus.QUEUED, worker="", heartbeat=None):
                return False  # it recovered, ended or another reaper got there first
            detail = f"{silent}; attempt {run.attempts + 1} of {settings.RUN_MAX_ATTEMPTS} queued"
            record_event(run, "status", {"state": "requeued", "detail": detail})
            enqueue_run(run)
        else:
            detail = f"{silent} on all {run.attempts} attempts"
            ended = still_stale.update(
                status=RunStatus.FAILED, error=detail, finished=timezone.now()
            )
            if not ended:
                return False
            end_event(run, RunStatus.FAILED, detail)
    log.warning("run %s: %s", run.pk, detail)
    return True
