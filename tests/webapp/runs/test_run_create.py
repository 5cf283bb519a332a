"""POST /api/runs: only on a valid problem the user can see, with known options."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import api_client, make_problem
from webapp import dispatch
from webapp.problems.models import ProblemStatus
from webapp.runs.models import Run


@pytest.fixture
def run_hook(monkeypatch):
    queued: list[tuple[int, str]] = []
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: queued.append(args))
    return queued


def start(client, problem_id, **options):
    body = {"problem_id": problem_id, "agent": "scripted-demo", "gpu_type": "cpu", **options}
    return client.post("/api/runs", body, content_type="application/json")


def test_it_queues_a_run_after_commit(
    alice, relu_scale, run_hook, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    with django_capture_on_commit_callbacks(execute=True):
        r = start(api_client(alice), problem.pk)
    assert r.status_code == 201, r.json()
    body = r.json()
    assert (body["status"], body["owner"], body["protocol"]) == ("queued", "alice", "loose")
    assert run_hook == [(body["id"], "cpu")]


def test_it_runs_someone_elses_public_problem(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    r = start(api_client(bob), problem.pk)
    assert r.status_code == 201
    assert Run.objects.get().owner == bob


def test_it_hides_someone_elses_private_problem(alice, charlie, relu_scale):
    problem = make_problem(alice, relu_scale)
    r = start(api_client(charlie), problem.pk)
    assert r.status_code == 404
    assert not Run.objects.exists()


def test_it_refuses_a_problem_not_yet_validated(alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)
    r = start(api_client(alice), problem.pk)
    assert r.status_code == 409
    assert "is pending, not valid" in r.json()["detail"]


def test_it_gives_the_reasons_of_a_rejected_problem(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    problem.status, problem.reasons = ProblemStatus.REJECTED, ["outputs are constant"]
    problem.save()
    r = start(api_client(alice), problem.pk)
    assert r.status_code == 409
    assert "rejected" in r.json()["detail"] and "outputs are constant" in r.json()["detail"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"agent": "nope"}, "unknown agent 'nope': use one of "),
        ({"gpu_type": "tpu"}, "unknown GPU type 'tpu': use one of cpu"),
        ({"protocol": "lax"}, "unknown protocol 'lax': use one of loose, fp32-strict"),
    ],
)
def test_it_lists_the_known_options(alice, relu_scale, options, message):
    problem = make_problem(alice, relu_scale)
    r = start(api_client(alice), problem.pk, **options)
    assert r.status_code == 422
    assert message in r.json()["detail"]
