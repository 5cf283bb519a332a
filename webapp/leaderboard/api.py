"""GET /api/leaderboard: every suite's board on every GPU type. Public: no token needed. A
suite's full board, with papers' rows and results under review, is /api/suites/{name}/board
(`suite_boards`, mounted beside the suites' own routes)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from webapp.errors import ErrorOut, error
from webapp.leaderboard import metrics
from webapp.leaderboard.problem_results import board_gpu_types
from webapp.leaderboard.schemas import BoardOut, LeaderboardOut
from webapp.suites.api import unknown_suite
from webapp.suites.models import Suite

router = Router(tags=["leaderboard"])
suite_boards = Router(tags=["suites"])


# An empty filter is the same as none (a form's "any" choice sends one).
class BoardParams(Schema):
    gpu_type: str | None = Field(None, description="empty or absent: the first GPU type")
    protocol: str | None = Field(None, description="empty or absent: the suite's protocol")


class IndexParams(Schema):
    gpu_type: str | None = Field(None, description="empty or absent: every GPU type")


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
    if params.gpu_type and params.gpu_type not in known:
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


@suite_boards.get(
    "/{name}/board", auth=None, response={200: BoardOut, 404: ErrorOut, 422: ErrorOut}
)
def get_board(request: HttpRequest, name: str, params: Query[BoardParams]):
    """The suite's board on one GPU type (default: the first configured) and protocol (default:
    the suite's): ranked rows with every metric, papers' rows apart (`reported: true`, never
    ranked), the results under review, and what each field means (`definitions`)."""
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        return unknown_suite(name)
    known = board_gpu_types(suite)
    gpu_type = params.gpu_type or known[0]
    if gpu_type not in known:
        return error(422, f"unknown GPU type {gpu_type!r}: use one of {', '.join(known)}")
    protocol = params.protocol or None
    if protocol is not None and protocol not in settings.PROTOCOLS:
        protocols = ", ".join(settings.PROTOCOLS)
        return error(422, f"unknown protocol {protocol!r}: use one of {protocols}")
    return {**metrics.board(suite, gpu_type, protocol), "definitions": definitions()}
