"""The suites as JSON, public (no token needed): the list, one suite with its problems and their
baselines, and a suite's board on one GPU type."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Schema

from webapp.errors import ErrorOut, error
from webapp.leaderboard import metrics
from webapp.leaderboard.api import definitions
from webapp.leaderboard.problem_results import board_gpu_types
from webapp.leaderboard.schemas import BoardOut
from webapp.suites.models import Suite
from webapp.suites.schemas import SuiteDetailOut, SuiteOut
from webapp.suites.views import suites_with_counts

router = Router(tags=["suites"])


class BoardParams(Schema):
    gpu_type: str | None = None
    protocol: str | None = None


def _unknown_suite(name: str):
    known = ", ".join(Suite.objects.values_list("name", flat=True)) or "none yet"
    return error(404, f"no suite {name!r}: the suites are {known} (GET /api/suites lists them)")


@router.get("", auth=None, response={200: list[SuiteOut]})
def list_suites(request: HttpRequest):
    return suites_with_counts()


@router.get("/{name}", auth=None, response={200: SuiteDetailOut, 404: ErrorOut})
def get_suite(request: HttpRequest, name: str):
    """The suite's problems in order, each with its validation status and its baselines on
    every GPU type and protocol measured so far."""
    suite = suites_with_counts().filter(name=name).first()
    if suite is None:
        return _unknown_suite(name)
    entries = suite.entries.select_related("problem").prefetch_related("problem__baselines")
    suite.problem_entries = list(entries.defer("problem__source").order_by("position"))
    return suite


@router.get("/{name}/board", auth=None, response={200: BoardOut, 404: ErrorOut, 422: ErrorOut})
def get_board(request: HttpRequest, name: str, params: Query[BoardParams]):
    """The suite's board on one GPU type (default: the first configured) and protocol (default:
    the suite's): ranked rows with every metric, papers' rows apart (`reported: true`, never
    ranked), the results under review, and what each field means (`definitions`)."""
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        return _unknown_suite(name)
    known = board_gpu_types(suite)
    gpu_type = params.gpu_type or known[0]
    if gpu_type not in known:
        return error(422, f"unknown GPU type {gpu_type!r}: use one of {', '.join(known)}")
    if params.protocol is not None and params.protocol not in settings.PROTOCOLS:
        protocols = ", ".join(settings.PROTOCOLS)
        return error(422, f"unknown protocol {params.protocol!r}: use one of {protocols}")
    return {**metrics.board(suite, gpu_type, params.protocol), "definitions": definitions()}
