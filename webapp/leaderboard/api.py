from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Schema

from webapp.errors import ErrorOut, error
from webapp.leaderboard.schemas import StandingOut
from webapp.leaderboard.standings import board_gpu_types, standings

router = Router(tags=["leaderboard"])


class BoardParams(Schema):
    gpu_type: str | None = None
    protocol: str | None = None


@router.get("", auth=None, response={200: list[StandingOut], 422: ErrorOut})
def leaderboard(request: HttpRequest, params: Query[BoardParams]):
    """The board of one GPU type (default: the first configured), one row per agent
    configuration and protocol, over succeeded runs on public problems. Public: no token needed.
    The columns are defined at /leaderboard/#definitions."""
    known = board_gpu_types()
    gpu_type = params.gpu_type or known[0]
    if gpu_type not in known:
        return error(422, f"unknown GPU type {gpu_type!r}: use one of {', '.join(known)}")
    return standings(gpu_type, params.protocol)
