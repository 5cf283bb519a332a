"""A run's error, as its page, the API's `error` and the trace's `ended` event show it, is one
line that says what went wrong and what to do, never a traceback or a server path; the traceback
stays in the worker's log.

A run that reaches the worker without an API key for its agent (the person removed their key
while it was queued, and the operator has none) names the Model keys page and the operator's
fix. Known-bad before: "needs its API key in $FRONTIER_KEY" followed by a Python traceback with
the server's paths. An agent that crashes (a bug in a backend or the harness) shows the
exception's one line.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from django.test import Client

from gpu_workers import agent_run
from tests.webapp.conftest import api_client, make_problem
from webapp.runs.models import Run, RunStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]
pytest.importorskip("openai")
REPO = Path(__file__).resolve().parents[2]
EXPECTED = (
    "agent 'frontier' needs an API key and none is saved for you: save yours on the Model keys "
    "page (/keys/), or ask the operator to set $FRONTIER_KEY on the workers"
)


@pytest.fixture(autouse=True)
def agents(tmp_path, monkeypatch):
    """frontier takes a key from $FRONTIER_KEY, which the operator left unset; crashing's
    scripted reply has a usage the backend cannot read (a TypeError inside the agent's loop)."""
    script = tmp_path / "crashing.json"
    script.write_text(json.dumps([{"thought": "hm", "usage": {"no_such_field": 1}}]))
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.frontier]\nbackend = "openai"\nmodel = "gpt"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "FRONTIER_KEY"\n'
        f'[agents.crashing]\nbackend = "scripted"\nscript = "{script}"\n'
    )
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(path))
    monkeypatch.delenv("FRONTIER_KEY", raising=False)


def shown(run: Run) -> list[str]:
    """The run's error as its page, the API and the trace's last event show it."""
    page = Client()
    page.force_login(run.owner)
    ended = run.events.order_by("seq").last().payload
    assert ended["state"] == "ended"
    return [
        run.error,
        api_client(run.owner).get(f"/api/runs/{run.pk}").json()["error"],
        ended["detail"],
        page.get(f"/runs/{run.pk}/").content.decode(),
    ]


def assert_no_traceback(texts: list[str]) -> None:
    for text in texts:
        assert "Traceback" not in text and str(REPO) not in text and "site-packages" not in text


def queued_then_key_removed(owner, source: str) -> Run:
    client = api_client(owner)
    saved = client.put(
        "/api/model-keys/frontier",
        {"key": "sk-alice-own-key-123456"},
        content_type="application/json",
    )
    assert saved.status_code == 200
    body = {"problem_id": make_problem(owner, source).pk, "agent": "frontier", "gpu_type": "cpu"}
    started = client.post("/api/runs", body, content_type="application/json")
    assert started.status_code == 201, started.content
    assert client.delete("/api/model-keys/frontier").status_code == 204
    return Run.objects.get(pk=started.json()["id"])


def test_a_run_without_a_key_ends_with_one_line_naming_model_keys(alice, relu_scale, caplog):
    run = queued_then_key_removed(alice, relu_scale)
    caplog.set_level(logging.ERROR, logger="gpu_workers.agent_run")

    assert agent_run.run(run.pk, "host-a:1") == EXPECTED

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    error, api_error, ended, page = shown(run)
    assert error == api_error == ended == EXPECTED
    assert EXPECTED.replace("'", "&#x27;") in page
    assert_no_traceback([error, page])
    logged = [r for r in caplog.records if r.name == "gpu_workers.agent_run" and r.exc_info]
    assert logged and "Traceback" in caplog.text  # the worker's log keeps it


def test_a_crashed_agent_shows_the_exception_in_one_line(alice, relu_scale, caplog):
    problem = make_problem(alice, relu_scale)
    run = Run.objects.create(
        problem=problem, owner=alice, agent="crashing", gpu_type="cpu", protocol="loose"
    )
    caplog.set_level(logging.ERROR)

    agent_run.run(run.pk, "host-a:1")

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    error, api_error, ended, page = shown(run)
    assert error == api_error == ended and "\n" not in error
    assert (
        error.startswith("no verified candidate (crashed): TypeError") and "no_such_field" in error
    )
    trace = [json.dumps(payload) for payload in run.events.values_list("payload", flat=True)]
    assert_no_traceback([error, page, *trace])
    assert "Traceback" in caplog.text  # the worker's log keeps it
