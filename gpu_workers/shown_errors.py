"""What a person sees of a failure on the server side: one line. A traceback (an agent that
crashed, a final profile that raised) goes to the worker's log; the run's page, its API `error`
and its trace get the traceback's last line, the exception itself."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
TRACEBACK_HEAD = "Traceback (most recent call last)"


def without_traceback(text: str, run_id: int) -> str:
    """`text` as it is, or, when it holds a traceback, its last line (logged whole)."""
    if TRACEBACK_HEAD not in text:
        return text
    log.error("run %s: %s", run_id, text)
    return text.strip().splitlines()[-1]
