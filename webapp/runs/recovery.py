"""Runs whose worker died: re-queued, or failed once they have used their attempts.

A claimed run's worker touches Run.heartbeat every RUN_HEARTBEAT_S seconds until it writes the
run's `ended` event, which clears it. A heartbeat older than RUN_STALE_AFTER_S means the worker
is gone (killed, out of memory, host lost): every worker calls reap_stale_runs at start and then
periodically, so no run stays "running", and no trace stays open, for good. Conditional updates
make concurrent reapers harmless: one wins, the others match no row.

Attempts are for workers that die (out of memory, a candidate that takes the machine down): a
run that kills its worker every time must end. A worker that is *stopped* (the stack's SIGTERM,
a lent machine's call ending) first notes a `stopping` event on each run it holds
(note_workers_stopping), and the reaper sends such a run again without counting that attempt:
a level evaluated over many 10-minute calls would otherwise fail every run that two calls' ends
happened to cut (session 43: four level 1 runs were on their last attempt after two calls).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webapp.runs.lifecycle import end_event, enqueue_run
from webapp.runs.models import Run, RunStatus
from webapp.runs.trace import record_event

log = logging.getLogger(__name__)
STOPPING = "stopping"


def reap_stale_runs() -> list[int]:
    """Recover every running run with a stale heartbeat; returns the ids recovered."""
    cutoff = timezone.now() - timedelta(seconds=settings.RUN_STALE_AFTER_S)
    stale = Run.objects.filter(status=RunStatus.RUNNING, heartbeat__lt=cutoff)
    recovered = [run.pk for run in stale if _recover(run, cutoff)]
    # Cancelled while running, then the worker died before it could close the trace.
    orphans = Run.objects.filter(status=RunStatus.CANCELLED, heartbeat__lt=cutoff)
    return recovered + [run.pk for run in orphans if _close_cancelled(run, cutoff)]


def _close_cancelled(run: Run, cutoff) -> bool:
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, heartbeat__lt=cutoff).update(heartbeat=None):
            return False
        end_event(run, RunStatus.CANCELLED, f"cancelled; its worker {run.worker} stopped answering")
    return True


def note_workers_stopping(workers: list[str]) -> list[int]:
    """A `stopping` event on each run these workers (`host:pid`, as they claimed it) hold, as
    their worker is being stopped on purpose; returns the runs' ids. A run that still ends before
    its worker goes keeps the event and is never reaped."""
    noted = []
    for run in Run.objects.filter(status=RunStatus.RUNNING, worker__in=workers):
        detail = (
            f"its worker {run.worker} is being stopped; unless the run ends while its worker "
            "finishes, it will be sent again"
        )
        record_event(run, "status", {"state": STOPPING, "detail": detail})
        noted.append(run.pk)
    return noted


def _stopped_on_purpose(run: Run) -> bool:
    """Whether this attempt's worker noted that it was being stopped (after the attempt's
    `claimed` event)."""
    statuses = run.events.filter(kind="status").order_by("-seq").values_list("payload", flat=True)
    for payload in statuses:
        state = payload.get("state") if isinstance(payload, dict) else None
        if state == STOPPING:
            return True
        if state == "claimed":
            return False
    return False


def _recover(run: Run, cutoff) -> bool:
    silent = (
        f"its worker {run.worker or '?'} stopped answering "
        f"(no heartbeat for over {settings.RUN_STALE_AFTER_S} s)"
    )
    still_stale = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, heartbeat__lt=cutoff)
    stopped = _stopped_on_purpose(run)
    with transaction.atomic():
        if stopped or run.attempts < settings.RUN_MAX_ATTEMPTS:
            attempts = F("attempts") - 1 if stopped else F("attempts")
            requeued = still_stale.update(
                status=RunStatus.QUEUED, worker="", heartbeat=None, attempts=attempts
            )
            if not requeued:
                return False  # it recovered, ended or another reaper got there first
            if stopped:
                detail = (
                    f"its worker {run.worker or '?'} was stopped while it ran; sent again, "
                    "that attempt not counted"
                )
            else:
                detail = (
                    f"{silent}; attempt {run.attempts + 1} of {settings.RUN_MAX_ATTEMPTS} queued"
                )
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
