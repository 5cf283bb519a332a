"""GET /api/leaderboard: every suite's board on every GPU type, public (no token needed)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.suites.test_pages_suites import SCRIPT, baseline, build_arena
from webapp.leaderboard import metrics
from webapp.suites.models import Suite


def test_it_serves_every_suites_board_per_gpu_type_without_a_token(alice, relu_scale):
    arena = build_arena(alice, relu_scale)
    Suite.objects.create(name="level-2")
    baseline(
        arena["problems"][0], "h100", eager_ms=0.2, compile_ms=0.1, compile_max_autotune_ms=0.1
    )
    r = Client().get("/api/leaderboard")
    assert r.status_code == 200
    body = r.json()
    assert [g["gpu_type"] for g in body["gpu_types"]] == ["cpu", "h100"]
    cpu = {board["suite"]: board for board in body["gpu_types"][0]["suites"]}
    assert set(cpu) == {"level-1", "level-2"}
    level_1 = cpu["level-1"]
    assert (level_1["protocol"], level_1["problems"]) == ("loose", 3)
    assert [row["entrant"] for row in level_1["rows"]] == [
        "fusion",
        metrics.COMPILER,
        SCRIPT,
        "naive",
    ]
    fusion = level_1["rows"][0]
    assert fusion["rank"] == 1 and fusion["reported"] is False and fusion["kind"] == "agent"
    assert fusion["geomean_speedup_vs_compile"] == pytest.approx(3**0.5)
    assert fusion["correct_rate"] == pytest.approx(2 / 3) and fusion["under_review"] == 1
    assert cpu["level-2"]["rows"] == []
    assert [d["key"] for d in body["definitions"]] == [k for k, _, _ in metrics.DEFINITIONS]


def test_it_filters_by_gpu_type(alice, relu_scale):
    build_arena(alice, relu_scale)
    body = Client().get("/api/leaderboard", {"gpu_type": "cpu"}).json()
    assert [g["gpu_type"] for g in body["gpu_types"]] == ["cpu"]


def test_it_names_the_known_gpu_types(db):
    r = Client().get("/api/leaderboard", {"gpu_type": "tpu"})
    assert r.status_code == 422
    assert r.json() == {"detail": "unknown GPU type 'tpu': use one of cpu"}


def test_it_is_public_in_the_openapi_docs(db):
    paths = Client().get("/api/openapi.json").json()["paths"]
    assert "security" not in paths["/api/leaderboard"]["get"]
    assert set(paths["/api/leaderboard"]["get"]["responses"]) == {"200", "422"}
