"""Appending to a run's trace, reading it back in order, and sending it to live viewers.

An event is saved first and sent to the run's channel group only once its transaction commits:
a viewer never sees an event the database does not have, so resuming from the database after
a dropped connection can neither skip nor repeat one (runs/consumers.py relies on this).
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp.runs.models import Run, TraceEvent
from webapp.storable import storable

log = logging.getLogger(__name__)


END_STATE = "ended"  # the state of a run's last event (webapp.runs.lifecycle.end_event)


def is_end(event: dict) -> bool:
    """Whether an event (as event_json writes it) is its run's last."""
    return event["kind"] == "status" and event["payload"].get("state") == END_STATE


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


def event_json(event: TraceEvent) -> dict:
    """What the API and the websocket send for one event."""
    return {
        "seq": event.seq,
        "at": DjangoJSONEncoder().default(event.at),  # as the REST API writes it
        "kind": event.kind,
        "payload": event.payload,
    }


def record_event(run: Run, kind: str, payload: dict) -> TraceEvent:
    """Save the next event of `run`, numbered one past the last, and send it after commit."""
    payload = storable(payload)
    with transaction.atomic():
        # Lock the run row so two writers of one run never take the same seq (PostgreSQL;
        # SQLite serialises writers anyway).
        Run.objects.select_for_update().filter(pk=run.pk).first()
        last = TraceEvent.objects.filter(run=run).aggregate(last=Max("seq"))["last"] or 0
        event = TraceEvent.objects.create(
            run=run, seq=last + 1, at=timezone.now(), kind=kind, payload=payload
        )
        message = {"type": "trace.event", "event": event_json(event)}
        transaction.on_commit(lambda: broadcast(run.pk, message))
    return event


def broadcast(run_id: int, message: dict) -> None:
    """Best effort: a viewer that misses a message fills the gap from the database."""
    try:
        async_to_sync(get_channel_layer().group_send)(run_group(run_id), message)
    except Exception:  # Redis down must not fail the run; the trace is already saved
        log.warning("could not send event of run %s to its viewers", run_id, exc_info=True)


def events_after(run: Run, after: int, limit: int = 500):
    """Events with seq > after, in order: a client resumes from the last seq it saw."""
    return TraceEvent.objects.filter(run=run, seq__gt=after).order_by("seq")[:limit]
