"""The front page and the leaderboard page."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.leaderboard.standings import DEFINITIONS, board_gpu_types, standings
from webapp.problems.models import Visibility
from webapp.runs.models import Run

HOME_ROWS = 5


def home(request: HttpRequest) -> HttpResponse:
    public_runs = Run.objects.filter(problem__visibility=Visibility.PUBLIC)
    mine = None
    if request.user.is_authenticated:
        mine = Run.objects.filter(owner=request.user).select_related("problem")[:5]
    boards = [
        {**board, "rows": board["rows"][:HOME_ROWS], "more": len(board["rows"]) > HOME_ROWS}
        for gpu_type in board_gpu_types()
        for board in _boards(gpu_type)
    ]
    context = {
        "recent_runs": public_runs.select_related("problem")[:10],
        "my_runs": mine,
        "boards": boards,
        "headings": DEFINITIONS,
    }
    return render(request, "home.html", context)


def leaderboard(request: HttpRequest) -> HttpResponse:
    gpu_types = board_gpu_types()
    gpu_type = request.GET.get("gpu_type") or gpu_types[0]
    unknown = gpu_type not in gpu_types
    context = {
        "gpu_types": gpu_types,
        "gpu_type": gpu_type,
        "unknown": unknown,
        "boards": [] if unknown else _boards(gpu_type),
        "headings": DEFINITIONS,
    }
    return render(request, "leaderboard/board.html", context, status=404 if unknown else 200)


def _boards(gpu_type: str) -> list[dict]:
    """One board per protocol that has rows, the configured protocols first."""
    rows = standings(gpu_type)
    order = {name: i for i, name in enumerate(settings.PROTOCOLS)}
    protocols = sorted(
        {row["protocol"] for row in rows}, key=lambda p: (order.get(p, len(order)), p)
    )
    return [
        {
            "gpu_type": gpu_type,
            "protocol": protocol,
            "rows": [_cells(row) for row in rows if row["protocol"] == protocol],
        }
        for protocol in protocols
    ]


def _cells(row: dict) -> list[tuple[str, str]]:
    """(column key, text) in the order of DEFINITIONS."""
    return [(key, _format(key, row[key])) for key, _, _ in DEFINITIONS]


def _format(key: str, value) -> str:
    if value is None:
        return "—"
    if key in ("correct_rate", "fast_1_0_vs_compile"):
        return f"{value:.0%}"
    if key == "geomean_speedup_vs_compile":
        return f"{value:.2f}×"
    if key == "tokens_per_run":
        return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"
    if key == "dollars_per_run":
        return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"
    return str(value)
