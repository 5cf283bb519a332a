"""A running run's pulse: a thread touches Run.heartbeat while the agent works, so the reaper
(webapp.runs.recovery) can tell a long compile from a dead worker."""

from __future__ import annotations

import threading

from django.db import connection
from django.utils import timezone

from webapp.runs.models import Run


class Heartbeat:
    def __init__(self, run_id: int, every_s: float):
        self.run_id = run_id
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{run_id}", daemon=True)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.every_s):
                # Cancelled runs too: the worker still owes them their `ended` event.
                Run.objects.filter(pk=self.run_id, heartbeat__isnull=False).update(
                    heartbeat=timezone.now()
                )
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
