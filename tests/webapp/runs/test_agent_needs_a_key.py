"""An agent that takes an API key runs for a person who saved their own (Model keys) or where the
operator has one. With neither, it is marked on the run form and the agents page and refused
before the run: API 409 and a form error, naming the Model keys page and the operator's fix.
Whether the operator has a key is the workers' word (their latest check of the agent); before
any check, this process's environment (the stack's services share one). Known-bad: before this,
such a run started and failed on the worker with a traceback."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from tests.webapp.conftest import api_client, make_problem
from webapp.errors import RequestRefused
from webapp.leaderboard.evaluation import start_evaluation
from webapp.runs.models import AgentHealth, HealthLevel, Run
from webapp.suites.models import Suite, SuiteProblem

pytestmark = pytest.mark.django_db
MODEL_KEYS_URL = "/keys/"


@pytest.fixture(autouse=True)
def agents(agents_file, monkeypatch):
    agents_file(
        '[agents.frontier]\nbackend = "openai"\nmodel = "gpt"\n'
        'base_url = "https://api.example.invalid/v1"\napi_key_env = "FRONTIER_KEY"\n'
        '[agents.fusion]\nbackend = "fusion"\n'
    )
    monkeypatch.delenv("FRONTIER_KEY", raising=False)  # the operator has no key


def start(user, problem, agent: str = "frontier"):
    body = {"problem_id": problem.pk, "agent": agent, "gpu_type": "cpu"}
    return api_client(user).post("/api/runs", body, content_type="application/json")


def checked(level: str, report: dict) -> None:
    summary = "not checked" if level == HealthLevel.UNUSABLE else "serves 'gpt'"
    AgentHealth.objects.create(
        agent="frontier", level=level, summary=summary, report=report, checked=timezone.now()
    )


def save_key(user) -> None:
    body = {"key": "sk-alice-own-key-123456"}
    answer = api_client(user).put("/api/model-keys/frontier", body, content_type="application/json")
    assert answer.status_code == 200


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_without_any_key_the_api_refuses_before_the_run_naming_model_keys(alice, relu_scale):
    answer = start(alice, make_problem(alice, relu_scale))
    assert answer.status_code == 409
    detail = answer.json()["detail"]
    assert f"save yours on the Model keys page ({MODEL_KEYS_URL})" in detail
    assert "$FRONTIER_KEY on the workers" in detail  # the operator's fix
    assert not Run.objects.exists()


def test_the_workers_check_without_an_operator_key_refuses_too(alice, relu_scale, monkeypatch):
    monkeypatch.setenv("FRONTIER_KEY", "sk-only-the-web-process-has-it")
    checked(HealthLevel.UNUSABLE, dict(AgentHealth.NO_OPERATOR_KEY))
    assert start(alice, make_problem(alice, relu_scale)).status_code == 409


@pytest.mark.parametrize("how", ["own key", "workers have one", "environment has one"])
def test_a_key_from_the_person_or_the_operator_lets_the_run_start(
    alice, relu_scale, monkeypatch, how
):
    if how == "own key":
        checked(HealthLevel.UNUSABLE, dict(AgentHealth.NO_OPERATOR_KEY))
        save_key(alice)
    elif how == "workers have one":
        checked(HealthLevel.OK, {})
    else:
        monkeypatch.setenv("FRONTIER_KEY", "sk-operator-key")
    assert start(alice, make_problem(alice, relu_scale)).status_code == 201


def test_a_suite_evaluation_names_the_operators_fix(alice, relu_scale):
    suite = Suite.objects.create(name="one", protocol="loose")
    problem = make_problem(alice, relu_scale, public=True)
    SuiteProblem.objects.create(suite=suite, problem=problem, name="P1", position=1)
    with pytest.raises(RequestRefused, match=r"set \$FRONTIER_KEY on the workers"):
        start_evaluation(suite, "frontier", "cpu")


def test_the_run_form_marks_the_agent_and_links_model_keys(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale, public=True)
    page = logged_in(alice).get(f"/problems/{problem.pk}/").content.decode()
    assert "frontier (unavailable: needs your API key)" in page
    assert f'<a href="{MODEL_KEYS_URL}">Open Model keys</a>' in page
    assert "fusion (unavailable" not in page
    save_key(bob)
    page = logged_in(bob).get(f"/problems/{problem.pk}/").content.decode()
    assert "unavailable" not in page


def test_choosing_it_on_the_page_shows_the_refusal_with_the_model_keys_hint(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    answer = logged_in(alice).post(
        f"/problems/{problem.pk}/optimize",
        {"agent": "frontier", "gpu_type": "cpu", "protocol": "loose"},
    )
    assert answer.status_code == 409
    assert f"save yours on the Model keys page ({MODEL_KEYS_URL})" in answer.content.decode()
    assert not Run.objects.exists()


def test_the_agents_page_says_who_can_run_what(alice):
    alice.is_staff = True
    alice.save()
    page = logged_in(alice).get("/staff/agents/").content.decode()
    assert "needs your API key" in page and "can run" in page  # frontier, fusion
    save_key(alice)
    page = logged_in(alice).get("/staff/agents/").content.decode()
    assert "needs your API key" not in page
