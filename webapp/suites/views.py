"""The suite list. One suite's page, with its board, is webapp.leaderboard.suite_page."""

from __future__ import annotations

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.problems.models import ProblemStatus
from webapp.suites.models import Suite


def suites_with_counts():
    """Suites with `total_count`, `valid_count` (problems) and `evaluation_count`, one query."""
    return Suite.objects.annotate(
        total_count=Count("entries", distinct=True),
        valid_count=Count(
            "entries", filter=Q(entries__problem__status=ProblemStatus.VALID), distinct=True
        ),
        evaluation_count=Count("evaluations", distinct=True),
    )


def suite_list(request: HttpRequest) -> HttpResponse:
    return render(request, "suites/list.html", {"suites": suites_with_counts()})
