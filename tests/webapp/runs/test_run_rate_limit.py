"""POST /api/runs past settings.RUNS_PER_HOUR: 429, saying when to try again. Only the user's own
runs of the last hour count."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from tests.webapp.conftest import api_client, make_problem
from webapp import dispatch
from webapp.runs.models import Run


@pytest.fixture(autouse=True)
def no_workers(monkeypatch, settings):
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: None)
    # Runs stay queued here: only the hourly limit is tested (test_active_limits.py has the other).
    settings.ACTIVE_RUNS_PER_USER = 100


def start(client, problem_id: int):
    body = {"problem_id": problem_id, "agent": "scripted-demo", "gpu_type": "cpu"}
    return client.post("/api/runs", body, content_type="application/json")


def minutes_to_wait(detail: str) -> int:
    match = re.search(r"try again in (\d+) minutes?", detail)
    assert match, detail
    return int(match.group(1))


def test_it_refuses_a_run_past_the_hourly_limit(alice, relu_scale, settings):
    settings.RUNS_PER_HOUR = 2
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)

    codes = [start(client, problem.pk).status_code for _ in range(3)]

    assert codes == [201, 201, 429]
    r = start(client, problem.pk)
    assert r.status_code == 429
    detail = r.json()["detail"]
    assert "you started 2 runs in the last hour and the limit is 2" in detail
    assert 1 <= minutes_to_wait(detail) <= 60
    assert Run.objects.filter(owner=alice).count() == 2


def test_it_admits_a_run_once_the_wait_it_gave_has_passed(alice, relu_scale, settings):
    settings.RUNS_PER_HOUR = 1
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    assert start(client, problem.pk).status_code == 201
    refused = start(client, problem.pk)
    assert refused.status_code == 429
    wait = minutes_to_wait(refused.json()["detail"])

    # As if `wait` minutes had passed.
    Run.objects.update(created=F("created") - timedelta(minutes=wait))

    r = start(client, problem.pk)
    assert r.status_code == 201, f"told to wait {wait} minutes, then: {r.json()['detail']}"


def test_it_does_not_count_runs_older_than_an_hour(alice, relu_scale, settings):
    settings.RUNS_PER_HOUR = 2
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    assert [start(client, problem.pk).status_code for _ in range(3)] == [201, 201, 429]

    Run.objects.update(created=timezone.now() - timedelta(hours=1, minutes=1))

    assert [start(client, problem.pk).status_code for _ in range(3)] == [201, 201, 429]
    assert Run.objects.filter(owner=alice).count() == 4


def test_it_limits_each_user_apart(alice, bob, relu_scale, settings):
    settings.RUNS_PER_HOUR = 1
    problem = make_problem(alice, relu_scale, public=True)
    assert start(api_client(alice), problem.pk).status_code == 201
    assert start(api_client(alice), problem.pk).status_code == 429

    assert start(api_client(bob), problem.pk).status_code == 201
    assert Run.objects.filter(owner=bob).count() == 1
