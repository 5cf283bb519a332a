"""GET /api/leaderboard: the board as JSON, public (no token needed)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.test_leaderboard import finished_run, problem


def test_it_serves_the_board_without_a_token(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 2.0, tokens=(100, 20), dollars=0.5)
    finished_run(alice, problem(alice, relu_scale, 2), 0.5)
    r = Client().get("/api/leaderboard", {"gpu_type": "cpu"})
    assert r.status_code == 200
    (row,) = r.json()
    assert row["agent"] == "scripted-demo" and row["protocol"] == "loose" and row["rank"] == 1
    assert (row["runs"], row["attempted"], row["verified"]) == (2, 2, 2)
    assert row["geomean_speedup_vs_compile"] == pytest.approx(1.0)
    assert row["fast_1_0_vs_compile"] == 0.5
    assert row["tokens_per_run"] == 60 and row["dollars_per_run"] == 0.25


def test_it_defaults_to_the_first_gpu_type(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 2.0)
    assert Client().get("/api/leaderboard").json()[0]["geomean_speedup_vs_compile"] == 2.0


def test_it_filters_by_protocol(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 2.0, protocol="fp32-strict")
    assert Client().get("/api/leaderboard", {"protocol": "loose"}).json() == []
    assert len(Client().get("/api/leaderboard", {"protocol": "fp32-strict"}).json()) == 1


def test_it_names_the_known_gpu_types(db):
    r = Client().get("/api/leaderboard", {"gpu_type": "tpu"})
    assert r.status_code == 422
    assert r.json() == {"detail": "unknown GPU type 'tpu': use one of cpu"}


def test_it_is_in_the_openapi_docs(db):
    paths = Client().get("/api/openapi.json").json()["paths"]
    assert "/api/leaderboard" in paths
    assert "security" not in paths["/api/leaderboard"]["get"]
