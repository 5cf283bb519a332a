"""Work handed to the GPU workers, sent only once the current transaction commits, so a worker
never looks for a row that is not there yet (nor gets work a rollback took back).

SENDERS names each kind of work and the function that sends it (webapp.celery: a task, by name,
to a GPU type's queue); tests replace an entry to run the work in-process or to keep what was
sent.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from webapp import celery

SENDERS: dict[str, Callable[..., None]] = {
    "validate_problem": celery.send_validation,  # (problem id)
    "run_agent": celery.send_run,  # (run id, GPU type)
    "measure_baselines": celery.send_baselines,  # (baseline id, GPU type, repeats)
    "regrade_run": celery.send_regrade,  # (run id, GPU type)
    "check_agents": celery.send_agent_checks,  # (agent names)
}


def send_after_commit(work: str, *args: object) -> None:
    """Sends `work` with these arguments once the transaction commits (at once outside one)."""
    if work not in SENDERS:
        raise ValueError(f"unknown work {work!r}: one of {', '.join(SENDERS)}")
    transaction.on_commit(lambda: SENDERS[work](*args))
