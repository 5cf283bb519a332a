"""Waiting, from a management command, for work the GPU workers do: polls the database and
prints progress (done of total, failures, an estimate of the time left) whenever it changes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from django.core.management.base import CommandError, OutputWrapper

from webapp.suites.progress import Progress

POLL_S = 2.0


def progress_line(what: str, now: Progress, first: Progress, elapsed_s: float) -> str:
    """The estimate is the pace of what finished while this command watched, so work done
    before it started does not claim a pace nobody saw."""
    finished = now.done - first.done
    paced = elapsed_s / finished * now.done if finished > 0 else None
    return replace(now, elapsed_s=paced).line(what)


def wait_for(
    progress: Callable[[], Progress], timeout_s: float, out: OutputWrapper, what: str
) -> None:
    """Returns once nothing is left; prints a progress line whenever the counts change. Raises a
    CommandError naming what to check when the workers do not finish in time."""
    started = time.monotonic()
    deadline = started + timeout_s
    first = last = None
    while True:
        now = progress()
        first = first or now
        if now != last:
            out.write(progress_line(what, now, first, time.monotonic() - started))
            last = now
        if now.workable_left <= 0:  # what has no source here waits for import_suite
            return
        if time.monotonic() > deadline:
            raise CommandError(
                f"{what}: {now.left} not finished after {timeout_s:.0f} s. Is a worker running "
                "on the queue? (`make run` starts one; in production `celery -A webapp.celery "
                "worker -Q gpu.<type>`.) The work stays queued and finishes when one runs; "
                "run this command again to follow it, or with --no-wait to only enqueue."
            )
        time.sleep(POLL_S)
