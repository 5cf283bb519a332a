"""Storing an uploaded problem."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from gpu_workers.harness.problem_source import check_source, source_sha256
from webapp.problems.models import Problem, Visibility
from webapp.problems.validation import enqueue_validation


def upload_problem(owner, title: str, source: str, visibility: str = Visibility.PRIVATE):
    """Check and store a problem; returns (problem, created).

    Uploading a source the owner already has (same normalised hash) returns the existing problem
    with created=False, so a retried upload is harmless. Raises ProblemError on a bad source.
    """
    check_source(source)
    existing = Problem.objects.filter(owner=owner, sha256=source_sha256(source)).first()
    if existing is not None:
        return existing, False
    title = title.strip() or f"problem {source_sha256(source)[:12]}"
    try:
        # A savepoint, so a concurrent identical upload losing the unique race leaves the
        # caller's transaction usable.
        with transaction.atomic():
            problem = Problem.objects.create(
                owner=owner, title=title, source=source, visibility=visibility
            )
    except IntegrityError:
        return Problem.objects.get(owner=owner, sha256=source_sha256(source)), False
    enqueue_validation(problem)
    return problem, True
