"""GET /api/suites, /api/suites/{name} and /api/suites/{name}/board: public (no token needed).
The suite and its results come from test_pages_suites.build_arena."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.suites.test_pages_suites import HELD_REASON, PAPER, SCRIPT, build_arena
from webapp.leaderboard import metrics
from webapp.suites.models import Suite


@pytest.fixture
def arena(alice, relu_scale) -> dict:
    return build_arena(alice, relu_scale)


def get(path: str, **params):
    return Client().get(path, params)


def test_it_lists_the_suites_with_their_counts(arena):
    Suite.objects.create(name="level-2", protocol="fp32-strict", description="later")
    r = get("/api/suites")
    assert r.status_code == 200
    assert r.json() == [
        {
            "name": "level-1",
            "level": 1,
            "protocol": "loose",
            "description": "",
            "valid_problems": 3,
            "total_problems": 4,
            "evaluations": 3,
        },
        {
            "name": "level-2",
            "level": None,
            "protocol": "fp32-strict",
            "description": "later",
            "valid_problems": 0,
            "total_problems": 0,
            "evaluations": 0,
        },
    ]


def test_it_gives_a_suites_problems_with_status_and_baselines(arena):
    p1, p2, p3, rejected = arena["problems"]
    r = get("/api/suites/level-1")
    assert r.status_code == 200
    body = r.json()
    assert (body["name"], body["valid_problems"], body["source_path"]) == ("level-1", 3, "")
    problems = body["problems"]
    assert [(p["position"], p["name"], p["problem"]) for p in problems] == [
        (1, "P1", p1.pk),
        (2, "P2", p2.pk),
        (3, "P3", p3.pk),
        (4, "R", rejected.pk),
    ]
    assert problems[3]["status"] == "rejected"
    assert problems[3]["reasons"] == ["its output does not depend on its inputs"]
    (measured,) = problems[0]["baselines"]
    assert measured["gpu_type"] == "cpu" and measured["protocol"] == "loose"
    assert (measured["eager_ms"], measured["compile_ms"], measured["compile_max_autotune_ms"]) == (
        2.0,
        1.0,
        0.8,
    )
    assert measured["sol_ms"] == 0.1 and measured["measured"] and measured["error"] == ""
    (failed,) = problems[1]["baselines"]
    assert failed["error"] == "out of memory" and failed["eager_ms"] is None
    assert problems[3]["baselines"] == []


def test_it_gives_the_board_with_every_metric_reported_rows_apart_and_definitions(arena):
    r = get("/api/suites/level-1/board", gpu_type="cpu")
    assert r.status_code == 200
    body = r.json()
    assert (body["suite"], body["gpu_type"], body["protocol"], body["problems"]) == (
        "level-1",
        "cpu",
        "loose",
        3,
    )
    rows = body["rows"]
    assert [row["entrant"] for row in rows] == ["fusion", metrics.COMPILER, SCRIPT, "naive"]
    assert [row["rank"] for row in rows] == [1, 2, 3, 4]
    metric_keys = {key for key, _, _ in metrics.DEFINITIONS}
    assert all(metric_keys <= set(row) and row["reported"] is False for row in rows)
    fusion = rows[0]
    assert fusion["dollars_per_run"] == pytest.approx(0.5)
    assert fusion["median_sol_fraction"] == pytest.approx(0.375)
    (paper,) = body["reported"]
    assert paper["reported"] is True and paper["entrant"] == PAPER
    assert paper["correct_rate"] == 0.98 and paper["fast_1_0_vs_eager"] is None
    assert PAPER not in {row["entrant"] for row in rows}
    (held,) = body["under_review"]
    assert held["run"] == arena["held"].pk and held["reasons"] == [HELD_REASON]
    assert held["agent"] == "fusion" and held["problem"] == "P2"
    assert body["definitions"][0] == {
        "key": "rank",
        "heading": metrics.DEFINITIONS[0][1],
        "definition": metrics.DEFINITIONS[0][2],
    }


def test_the_board_defaults_to_the_first_gpu_type_and_takes_a_protocol(arena):
    assert get("/api/suites/level-1/board").json()["gpu_type"] == "cpu"
    strict = get("/api/suites/level-1/board", protocol="fp32-strict").json()
    assert strict["protocol"] == "fp32-strict" and strict["rows"] == []


def test_an_unknown_suite_is_404_and_names_the_suites(arena):
    for path in ("/api/suites/level-9", "/api/suites/level-9/board"):
        r = get(path)
        assert r.status_code == 404
        assert r.json() == {
            "detail": "no suite 'level-9': the suites are level-1 (GET /api/suites lists them)"
        }


def test_an_unknown_gpu_type_or_protocol_is_422_and_names_the_known_ones(arena):
    r = get("/api/suites/level-1/board", gpu_type="tpu")
    assert r.status_code == 422
    assert r.json() == {"detail": "unknown GPU type 'tpu': use one of cpu"}
    r = get("/api/suites/level-1/board", protocol="exact")
    assert r.status_code == 422
    assert r.json() == {"detail": "unknown protocol 'exact': use one of loose, fp32-strict"}


def test_they_are_public_in_the_openapi_docs(db):
    paths = Client().get("/api/openapi.json").json()["paths"]
    for path, codes in (
        ("/api/suites", {"200"}),
        ("/api/suites/{name}", {"200", "404", "422"}),
        ("/api/suites/{name}/board", {"200", "404", "422"}),
    ):
        assert "security" not in paths[path]["get"]
        assert set(paths[path]["get"]["responses"]) == codes
