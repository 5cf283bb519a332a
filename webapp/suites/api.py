"""The suites as JSON, public (no token needed): the list, one suite with its problems and their
baselines, and a suite's board on one GPU type."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from webapp.errors import ErrorOut, error
from webapp.suites.models import Suite
from webapp.suites.schemas import SuiteDetailOut, SuiteOut
from webapp.suites.views import suites_with_counts

router = Router(tags=["suites"])


def unknown_suite(name: str):
    known = ", ".join(Suite.objects.values_list("name", flat=True)) or "none yet"
    return error(404, f"no suite {name!r}: the suites are {known} (GET /api/suites lists them)")


@router.get("", auth=None, response={200: list[SuiteOut]})
def list_suites(request: HttpRequest):
    return suites_with_counts()


# 422: a name the database cannot compare (a NUL character on PostgreSQL).
@router.get("/{name}", auth=None, response={200: SuiteDetailOut, 404: ErrorOut, 422: ErrorOut})
def get_suite(request: HttpRequest, name: str):
    """The suite's problems in order, each with its validation status and its baselines on
    every GPU type and protocol measured so far."""
    suite = suites_with_counts().filter(name=name).first()
    if suite is None:
        return unknown_suite(name)
    entries = suite.entries.select_related("problem").prefetch_related("problem__baselines")
    suite.problem_entries = list(entries.defer("problem__source").order_by("position"))
    return suite
