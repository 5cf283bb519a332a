"""Storing an uploaded problem."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from gpu_workers.harness.problem_source import check_source, source_sha256
from webapp.errors import TooManyRequests
from webapp.problems.models import Problem, Visibility
from webapp.problems.validation import enqueue_validation, unfinished_of


class ValidationsLimited(TooManyRequests):
    """The person has as many problems waiting for validation as one may (HTTP 429)."""


def upload_problem(
    owner, title: str, source: str, visibility: str = Visibility.PRIVATE, bounded: bool = True
):
    """Check and store a problem; returns (problem, created).

    Uploading a source the owner already has (same normalised hash) returns the existing problem
    with created=False, so a retried upload is harmless. Raises ProblemError on a bad source,
    and ValidationsLimited when `bounded` (a person's upload, not a suite import) and the owner
    already has settings.PENDING_VALIDATIONS_PER_USER problems waiting for or in validation.
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
            if bounded:
                _check_unfinished(owner)
            problem = Problem.objects.create(
                owner=owner, title=title, source=source, visibility=visibility
            )
    except IntegrityError:
        return Problem.objects.get(owner=owner, sha256=source_sha256(source)), False
    enqueue_validation(problem)
    return problem, True


def _check_unfinished(owner) -> None:
    # One user's uploads queue on their row, so simultaneous uploads cannot all slip under the
    # limit.
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    count, limit = unfinished_of(owner), settings.PENDING_VALIDATIONS_PER_USER
    if count >= limit:
        raise ValidationsLimited(
            f"you have {count} problem{'s' if count != 1 else ''} waiting for or in validation "
            f"and the limit is {limit}: upload this one once one of them is validated"
        )
