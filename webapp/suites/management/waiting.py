"""Waiting, from a management command, for work the GPU workers do: polls the database and
prints progress whenever it changes."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.management.base import CommandError, OutputWrapper

POLL_S = 2.0


def wait_for(
    remaining: Callable[[], tuple[int, str]], timeout_s: float, out: OutputWrapper, what: str
) -> None:
    """Returns once `remaining()` reports 0 left; its text is the progress line. Raises a
    CommandError naming what to check when the workers do not finish in time."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        left, progress = remaining()
        if progress != last:
            out.write(progress)
            last = progress
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise CommandError(
                f"{what}: {left} not finished after {timeout_s:.0f} s. Is a worker running on "
                "the queue? (`make run` starts one; in production `celery -A webapp.celery "
                "worker -Q gpu.<type>`.) The work stays queued and finishes when one runs; "
                "run this command again with --no-wait to only enqueue."
            )
        time.sleep(POLL_S)
