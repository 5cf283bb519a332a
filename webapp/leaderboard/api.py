"""GET /api/leaderboard: every suite's board on every GPU type. Public: no token needed. A
suite's full board, with papers' rows and results under review, is /api/suites/{name}/board."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Schema

from webapp.errors import ErrorOut, error
from webapp.leaderboard import metrics
from webapp.leaderboard.problem_results import board_gpu_types
from webapp.leaderboard.schemas import LeaderboardOut
from webapp.suites.models import Suite

router = Router(tags=["leaderboard"])


class IndexParams(Schema):
    gpu_type: str | None = None


def definitions() -> list[dict]:
    return [
        {"key": key, "heading": heading, "definition": definition}
        for key, heading, definition in metrics.DEFINITIONS
    ]


@router.get("", auth=None, response={200: LeaderboardOut, 422: ErrorOut})
def leaderboard(request: HttpRequest, params: Query[IndexParams]):
    """Per GPU type (or only `gpu_type`), every suite's ranked rows under the suite's protocol.
    The fields are defined in `definitions`."""
    known = board_gpu_types()
    if params.gpu_type is not None and params.gpu_type not in known:
        return error(422, f"unknown GPU type {params.gpu_type!r}: use one of {', '.join(known)}")
    suites = list(Suite.objects.all())
    chosen = [params.gpu_type] if params.gpu_type else known
    return {
        "gpu_types": [
            {"gpu_type": gpu_type, "suites": [_suite_board(s, gpu_type) for s in suites]}
            for gpu_type in chosen
        ],
        "definitions": definitions(),
    }


def _suite_board(suite: Suite, gpu_type: str) -> dict:
    board = metrics.board(suite, gpu_type)
    return {key: board[key] for key in ("suite", "protocol", "problems", "rows")}
