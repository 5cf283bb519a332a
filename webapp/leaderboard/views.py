"""The front page and the leaderboard index: every suite's board on every GPU type, the top rows
of each, linking to the suite page where the whole board, its charts and definitions are."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.leaderboard import metrics
from webapp.leaderboard.formatting import cells
from webapp.leaderboard.problem_results import board_gpu_types
from webapp.problems.models import Visibility
from webapp.runs.models import Run
from webapp.suites.models import Suite

TOP_ROWS = 3
# The compact board's columns, in the order of metrics.DEFINITIONS.
COMPACT_COLUMNS = ("rank", "entrant", "fast_1_0_vs_compile", "geomean_speedup_vs_compile")


def home(request: HttpRequest) -> HttpResponse:
    public_runs = Run.objects.filter(problem__visibility=Visibility.PUBLIC)
    mine = None
    if request.user.is_authenticated:
        mine = Run.objects.filter(owner=request.user).select_related("problem", "grade")[:5]
    context = {
        "recent_runs": public_runs.select_related("problem", "grade")[:10],
        "my_runs": mine,
        # The front page shows only boards with results: empty ones are on /leaderboard/.
        "boards": [board for board in compact_boards() if board["rows"]],
        "headings": compact_headings(),
    }
    return render(request, "home.html", context)


def leaderboard(request: HttpRequest) -> HttpResponse:
    context = {
        "boards": compact_boards(),
        "headings": compact_headings(),
        "definitions": metrics.DEFINITIONS,
        "top": TOP_ROWS,
    }
    return render(request, "leaderboard/index.html", context)


def compact_boards() -> list[dict]:
    """Per GPU type, per suite: the top rows of its board under the suite's protocol."""
    suites = list(Suite.objects.all())
    boards = []
    for gpu_type in board_gpu_types():
        for suite in suites:
            board = metrics.board(suite, gpu_type)
            boards.append(
                {
                    "gpu_type": gpu_type,
                    "suite": suite,
                    "protocol": board["protocol"],
                    "rows": [cells(row, COMPACT_COLUMNS) for row in board["rows"][:TOP_ROWS]],
                    "more": max(0, len(board["rows"]) - TOP_ROWS),
                }
            )
    return boards


def compact_headings() -> list[tuple[str, str, str]]:
    return [d for d in metrics.DEFINITIONS if d[0] in COMPACT_COLUMNS]
