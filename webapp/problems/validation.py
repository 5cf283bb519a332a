"""Handing a stored problem to the validation workers.

The web process never runs a problem. `enqueue_validation` calls each hook in
VALIDATION_HOOKS with the problem's id once the current transaction commits (so a worker never
sees a row that is not there yet). The problems app registers webapp.celery.send_validation
(the task, sent by name to the validation queue) when Django starts; tests swap the list.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from webapp.problems.models import Problem

VALIDATION_HOOKS: list[Callable[[int], None]] = []


def enqueue_validation(problem: Problem) -> None:
    problem_id = problem.pk

    def send() -> None:
        for hook in VALIDATION_HOOKS:
            hook(problem_id)

    transaction.on_commit(send)
