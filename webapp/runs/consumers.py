"""The live trace: /ws/runs/<id>/?after=SEQ streams a run's events as
{"type": "event", "event": {seq, at, kind, payload}} text frames.

A viewer joins the run's group before reading the saved events, so nothing committed while it
reads is missed; anything that arrives both ways is dropped by seq, and a seq past the next
expected one (a message the channel layer lost) is filled from the database. The viewer gets
every event after `after` exactly once, in order, however late it joins or often it resumes.
Only users who may see the run can subscribe: anyone else is closed with 4404.

The run's last event is the `ended` status event (webapp.runs.lifecycle.end_event): the server
closes the socket with 1000 (normal closure) right after sending it, or at once when the client
resumes after it, so a client that waits for the end of the run exits. A run imported from a
results file has no trace here (it stays with the site that ran it) and ends as it was measured:
its socket is closed with 1000 at once.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.runs.models import Run
from webapp.runs.trace import END_STATE, event_json, events_after, is_end, run_group

CLOSE_NOT_FOUND = 4404  # no such run, or not one this user may see (the same, on purpose)
CLOSE_BAD_REQUEST = 4400
CLOSE_RUN_ENDED = 1000  # normal closure: the run's trace is complete
BACKLOG_PAGE = 500


@database_sync_to_async
def _visible_run(user, run_id: int) -> Run | None:
    return Run.objects.visible_to(user).filter(pk=run_id).first()


@database_sync_to_async
def _ended_by(run: Run, seq: int) -> bool:
    """Whether the run's `ended` event is at or before `seq`: nothing more will come."""
    return run.events.filter(seq__lte=seq, kind="status", payload__state=END_STATE).exists()


@database_sync_to_async
def _saved_after(run: Run, after: int) -> list[dict]:
    return [event_json(event) for event in events_after(run, after, BACKLOG_PAGE)]


class RunTraceConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    ended = False  # the run's `ended` event was sent (or lies before `after`): socket closed

    async def connect(self) -> None:
        await self.accept()
        after = _after(self.scope.get("query_string", b""))
        if after is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        self.run = await _visible_run(
            self.scope["user"], self.scope["url_route"]["kwargs"]["run_id"]
        )
        if self.run is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.last_seq = after
        self.group = run_group(self.run.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_saved()
        if self.ended:
            return
        if self.run.imported_from or await _ended_by(self.run, self.last_seq):
            await self.close_ended()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        """Viewers only listen; whatever they send is ignored."""

    async def trace_event(self, message: dict) -> None:
        """A live event from the run's group (type "trace.event")."""
        seq = message["event"]["seq"]
        if self.ended or seq <= self.last_seq:
            return  # already sent from the database
        if seq > self.last_seq + 1:
            await self.send_saved()  # a lost message: the database has it, and this one
            return
        await self.send_event(message["event"])

    async def send_saved(self) -> None:
        while not self.ended:
            events = await _saved_after(self.run, self.last_seq)
            for event in events:
                await self.send_event(event)
            if len(events) < BACKLOG_PAGE:
                return

    async def send_event(self, event: dict) -> None:
        if self.ended:
            return
        await self.send_json({"type": "event", "event": event})
        self.last_seq = event["seq"]
        if is_end(event):
            await self.close_ended()

    async def close_ended(self) -> None:
        self.ended = True
        await self.close(code=CLOSE_RUN_ENDED)


def _after(query_string: bytes) -> int | None:
    """`after` from the query string: 0 when absent, None when not a whole number ≥ 0."""
    values = parse_qs(query_string.decode("latin-1")).get("after", ["0"])
    try:
        after = int(values[-1])
    except ValueError:
        return None
    return after if after >= 0 else None
