"""Handing a stored problem to the validation workers.

The web process never runs a problem: `enqueue_validation` sends its id to the validation queue
once the current transaction commits (webapp.dispatch).
"""

from __future__ import annotations

from webapp.dispatch import send_after_commit
from webapp.problems.models import Problem


def enqueue_validation(problem: Problem) -> None:
    send_after_commit("validate_problem", problem.pk)
