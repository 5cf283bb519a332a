"""Per-person limits on concurrent work: runs queued or running (settings.ACTIVE_RUNS_PER_USER)
and problems waiting for or in validation (settings.PENDING_VALIDATIONS_PER_USER). Past either,
the API answers 429 and the page's form says the limit and how many are active; ended work
frees its place, and other people and the operator's imports are not counted."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.conftest import problem_source
from tests.webapp.conftest import api_client, make_problem
from webapp import dispatch
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.upload import upload_problem
from webapp.runs.models import Run, RunStatus


@pytest.fixture(autouse=True)
def no_workers(monkeypatch, settings):
    """Nothing leaves for a worker: runs stay queued, uploads stay pending."""
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: None)
    monkeypatch.setitem(dispatch.SENDERS, "validate_problem", lambda *args: None)
    settings.ACTIVE_RUNS_PER_USER = 2
    settings.PENDING_VALIDATIONS_PER_USER = 2


def start(client, problem_id: int):
    body = {"problem_id": problem_id, "agent": "scripted-demo", "gpu_type": "cpu"}
    return client.post("/api/runs", body, content_type="application/json")


def upload(client, source: str):
    return client.post("/api/problems", {"source": source}, content_type="application/json")


def sources(n: int) -> list[str]:
    return [problem_source("relu_scale") + f"\n# variant {i}\n" for i in range(n)]


def test_it_refuses_a_run_past_the_active_limit_saying_how_many(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    assert [start(client, problem.pk).status_code for _ in range(2)] == [201, 201]
    r = start(client, problem.pk)
    assert r.status_code == 429
    assert r.json()["detail"].startswith(
        "you have 2 runs queued or running and the limit is 2: start this one once one of them "
        "has ended, or cancel one"
    )
    assert Run.objects.filter(owner=alice).count() == 2


def test_an_ended_run_frees_its_place(alice, relu_scale):
    """Known-bad beside the test above: the same three starts, one run ended in between."""
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    first = start(client, problem.pk).json()
    assert start(client, problem.pk).status_code == 201
    Run.objects.filter(pk=first["id"]).update(status=RunStatus.FAILED)
    assert start(client, problem.pk).status_code == 201
    assert client.post(f"/api/runs/{first['id']}/cancel").status_code == 409  # ended already


def test_each_person_has_their_own_share(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    for _ in range(2):
        start(api_client(alice), problem.pk)
    assert start(api_client(alice), problem.pk).status_code == 429
    assert start(api_client(bob), problem.pk).status_code == 201


def test_the_problem_page_says_the_limit_on_its_form(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    for _ in range(2):
        start(api_client(alice), problem.pk)
    client = Client()
    client.force_login(alice)
    body = {"agent": "scripted-demo", "gpu_type": "cpu", "protocol": "loose"}
    r = client.post(f"/problems/{problem.pk}/optimize", body)
    assert r.status_code == 429
    assert "you have 2 runs queued or running and the limit is 2" in r.content.decode()


def test_it_refuses_an_upload_past_the_pending_validations_limit(alice):
    client = api_client(alice)
    first, second, third = sources(3)
    assert [upload(client, s).status_code for s in (first, second)] == [201, 201]
    r = upload(client, third)
    assert r.status_code == 429
    assert r.json()["detail"] == (
        "you have 2 problems waiting for or in validation and the limit is 2: upload this one "
        "once one of them is validated"
    )
    assert upload(client, first).status_code == 200  # the same source again is no new work


def test_a_validated_problem_frees_its_place(alice):
    """Known-bad beside the test above: the same uploads, one problem validated in between."""
    client = api_client(alice)
    first, second, third = sources(3)
    upload(client, first)
    upload(client, second)
    Problem.objects.filter(owner=alice).exclude(source=second).update(status=ProblemStatus.VALID)
    assert upload(client, third).status_code == 201


def test_the_upload_page_says_the_limit_on_its_form(alice):
    client = Client()
    client.force_login(alice)
    first, second, third = sources(3)
    for source in (first, second):
        upload(api_client(alice), source)
    body = {"title": "", "visibility": "private", "source": third}
    r = client.post("/problems/new/", body)
    assert r.status_code == 429
    html = r.content.decode()
    assert "you have 2 problems waiting for or in validation and the limit is 2" in html
    assert "variant 2" in html  # the source is kept in the form


def test_a_suite_import_is_not_bounded_by_a_persons_share(alice):
    for source in sources(4):
        upload_problem(alice, "", source, bounded=False)
    assert Problem.objects.filter(owner=alice, status=ProblemStatus.PENDING).count() == 4
