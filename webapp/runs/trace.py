"""Appending to a run's trace and reading it back in order."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp.runs.models import Run, TraceEvent


def record_event(run: Run, kind: str, payload: dict) -> TraceEvent:
    """Save the next event of `run`, numbered one past the last."""
    with transaction.atomic():
        # Lock the run row so two writers of one run never take the same seq (PostgreSQL;
        # SQLite serialises writers anyway).
        Run.objects.select_for_update().filter(pk=run.pk).first()
        last = TraceEvent.objects.filter(run=run).aggregate(last=Max("seq"))["last"] or 0
        return TraceEvent.objects.create(
            run=run, seq=last + 1, at=timezone.now(), kind=kind, payload=payload
        )


def events_after(run: Run, after: int, limit: int = 500):
    """Events with seq > after, in order: a client resumes from the last seq it saw."""
    return TraceEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[:limit]
