"""POST /api/problems: stores a checked source, queues validation after commit."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import api_client
from webapp import dispatch
from webapp.problems.models import Problem


@pytest.fixture
def validation_hook(monkeypatch):
    queued: list[int] = []
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", queued.append)
    return queued


def post(client, **body):
    return client.post("/api/problems", body, content_type="application/json")


def test_it_creates_a_private_pending_problem(
    alice, relu_scale, validation_hook, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        r = post(api_client(alice), title="relu", source=relu_scale)
    assert r.status_code == 201, r.json()
    body = r.json()
    problem = Problem.objects.get(pk=body["id"])
    assert (body["owner"], body["visibility"], body["status"]) == ("alice", "private", "pending")
    assert body["sha256"] == problem.sha256 and len(problem.sha256) == 64
    assert validation_hook == [problem.pk]


def test_it_returns_the_existing_problem_for_the_same_source(alice, relu_scale):
    client = api_client(alice)
    first = post(client, title="relu", source=relu_scale)
    again = post(client, title="other title", source=relu_scale.replace("\n", "  \r\n"))
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert Problem.objects.count() == 1


def test_it_lets_two_owners_upload_the_same_source(alice, bob, relu_scale):
    assert post(api_client(alice), source=relu_scale).status_code == 201
    assert post(api_client(bob), source=relu_scale).status_code == 201


def test_it_names_an_untitled_problem_by_its_hash(alice, relu_scale):
    body = post(api_client(alice), source=relu_scale).json()
    assert body["title"] == f"problem {body['sha256'][:12]}"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("#" * (256 * 1024 + 1), "the limit is 256 KiB"),
        ("class Model(:\n", "syntax error on line 1"),
        ("class Model: pass\n", "missing get_inputs, get_init_inputs"),
    ],
)
def test_it_rejects_a_bad_source_with_what_to_fix(alice, source, message):
    r = post(api_client(alice), source=source)
    assert r.status_code == 422
    assert message in r.json()["detail"]
    assert not Problem.objects.exists()


def test_it_explains_a_malformed_body(alice):
    r = post(api_client(alice), title="no source")
    assert r.status_code == 422
    assert r.json()["detail"] == "source: Field required"
