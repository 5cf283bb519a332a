"""An agent whose last check failed is marked on the run form, and its runs are refused with its
findings (API 409, a form error on the page, a suite evaluation's command); a warning or no
check refuses nothing; a refused key does not stop a person who saved their own. Staff see every
agent's health and can ask for a check; nobody else can."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from tests.webapp.conftest import api_client, make_problem
from webapp import dispatch
from webapp.errors import RequestRefused
from webapp.leaderboard.evaluation import start_evaluation
from webapp.runs.models import AgentHealth, HealthLevel, Run
from webapp.suites.models import Suite, SuiteProblem

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def agents(agents_file, monkeypatch):
    agents_file(
        '[agents.served]\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "SERVED_KEY"\n'
        '[agents.fusion]\nbackend = "fusion"\n'
    )
    # The operator's key: these tests are about checks (test_agent_needs_a_key.py: about keys).
    monkeypatch.setenv("SERVED_KEY", "sk-operator-key")


def health(level: str, summary: str = "endpoint: cannot reach it", **report) -> AgentHealth:
    return AgentHealth.objects.create(
        agent="served", level=level, summary=summary, report=report, checked=timezone.now()
    )


def start(user, problem):
    body = {"problem_id": problem.pk, "agent": "served", "gpu_type": "cpu"}
    return api_client(user).post("/api/runs", body, content_type="application/json")


def test_a_failed_check_refuses_runs_with_its_findings(alice, relu_scale):
    health(HealthLevel.FAIL, "endpoint: cannot reach http://127.0.0.1:1/v1: connection refused")
    answer = start(alice, make_problem(alice, relu_scale))
    assert answer.status_code == 409
    detail = answer.json()["detail"]
    assert "agent 'served' is not ready" in detail and "connection refused" in detail
    assert not Run.objects.exists()


@pytest.mark.parametrize("level", [HealthLevel.OK, HealthLevel.WARN, HealthLevel.UNUSABLE])
def test_a_check_that_did_not_fail_refuses_nothing(alice, relu_scale, level):
    health(level)
    assert start(alice, make_problem(alice, relu_scale)).status_code == 201


def test_an_agent_never_checked_is_not_refused(alice, relu_scale):
    assert start(alice, make_problem(alice, relu_scale)).status_code == 201


def test_a_refused_key_does_not_stop_a_person_with_their_own(alice, bob, relu_scale):
    health(HealthLevel.FAIL, "endpoint: refused the key (HTTP 401)", key_refused=True)
    own = {"key": "sk-alice-own-key-123456"}
    api_client(alice).put("/api/model-keys/served", own, content_type="application/json")
    assert start(alice, make_problem(alice, relu_scale)).status_code == 201
    assert start(bob, make_problem(bob, relu_scale)).status_code == 409


def test_the_page_shows_the_refusal_on_its_form(alice, relu_scale):
    health(HealthLevel.FAIL, "model: 'm' is not served")
    problem = make_problem(alice, relu_scale)
    page = Client()
    page.force_login(alice)
    answer = page.post(
        f"/problems/{problem.pk}/optimize",
        {"agent": "served", "gpu_type": "cpu", "protocol": "loose"},
    )
    assert answer.status_code == 409 and "is not served" in answer.content.decode()
    form = page.get(f"/problems/{problem.pk}/").content.decode()
    assert "served (unavailable: its check failed)" in form and "is not served" in form


def test_a_suite_evaluation_of_a_failing_agent_is_refused(alice, relu_scale):
    health(HealthLevel.FAIL)
    suite = Suite.objects.create(name="one", protocol="loose")
    problem = make_problem(alice, relu_scale, public=True)
    SuiteProblem.objects.create(suite=suite, problem=problem, name="P1", position=1)
    with pytest.raises(RequestRefused, match="is not ready"):
        start_evaluation(suite, "served", "cpu")


def test_staff_see_every_agents_health_and_can_ask_for_a_check(
    alice, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setitem(dispatch.SENDERS, "check_agents", lambda names: sent.append(names))
    health(HealthLevel.FAIL, "endpoint: cannot reach it")
    nobody = Client()
    nobody.force_login(alice)
    assert nobody.get("/staff/agents/").status_code == 302  # to the admin's log-in
    alice.is_staff = True
    alice.save()
    page = nobody.get("/staff/agents/").content.decode()
    assert "served" in page and "cannot reach it" in page and "fusion" in page
    with django_capture_on_commit_callbacks(execute=True):
        nobody.post("/staff/agents/", {"agent": "served"})
        nobody.post("/staff/agents/", {"agent": "fusion"})  # no model: every model agent instead
    assert sent == [["served"], ["served"]]


def test_staff_see_what_a_trained_agent_was_trained_from(alice, agents_file, tmp_path):
    checkpoint = tmp_path / "rft-1"
    checkpoint.mkdir()
    record = {
        "kind": "sft (rejection fine-tuning)",
        "plan": {"base": "Qwen/Qwen2.5-Coder-7B-Instruct", "data": ["runs/"]},
        "data": {"kept": 412},
        "steps": 1236,
    }
    (checkpoint / "kernelarena_training.json").write_text(json.dumps(record))
    agents_file(
        '[agents.trained]\nbackend = "openai"\nmodel = "rft-1"\n'
        'base_url = "http://127.0.0.1:1/v1"\ncheckpoint = "rft-1"\n'
        '[agents.untrained]\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
    )
    alice.is_staff = True
    alice.save()
    client = Client()
    client.force_login(alice)
    page = client.get("/staff/agents/").content.decode()
    base = "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert f"sft (rejection fine-tuning) of {base} on 412 trajectories, 1236 steps" in page
    # known-bad beside it: the agent with no checkpoint shows no training line
    assert "untrained" in page
    assert page.count('class="muted small training"') == 1
