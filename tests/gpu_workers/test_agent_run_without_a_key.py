"""A run that reaches the worker without an API key for its agent (the person removed their key
while it was queued, and the operator has none) ends failed with one line that names the Model
keys page and the operator's fix: no traceback and no server path on the run page, in the API's
`error` or in the trace; the traceback stays in the worker's log. Known-bad before: "needs its
API key in $FRONTIER_KEY" followed by a Python traceback with the server's paths."""

from __future__ import annotations

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


@pytest.fixture
def frontier_agent(tmp_path, monkeypatch):
    """An agent that takes a key from $FRONTIER_KEY, which the operator left unset."""
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.frontier]\nbackend = "openai"\nmodel = "gpt"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "FRONTIER_KEY"\n'
    )
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(path))
    monkeypatch.delenv("FRONTIER_KEY", raising=False)


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


@pytest.mark.usefixtures("frontier_agent")
def test_a_run_without_a_key_ends_with_one_line_naming_model_keys(alice, relu_scale, caplog):
    run = queued_then_key_removed(alice, relu_scale)
    caplog.set_level(logging.ERROR, logger="gpu_workers.agent_run")

    assert agent_run.run(run.pk, "host-a:1") == EXPECTED

    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.FAILED, EXPECTED)
    assert api_client(alice).get(f"/api/runs/{run.pk}").json()["error"] == EXPECTED
    ended = run.events.order_by("seq").last().payload
    assert (ended["state"], ended["detail"]) == ("ended", EXPECTED)
    page = Client()
    page.force_login(alice)
    shown = page.get(f"/runs/{run.pk}/").content.decode()
    assert EXPECTED.replace("'", "&#x27;") in shown
    for text in (shown, run.error):
        assert "Traceback" not in text and str(REPO) not in text and "site-packages" not in text
    logged = [r for r in caplog.records if r.name == "gpu_workers.agent_run" and r.exc_info]
    assert logged and "Traceback" in caplog.text  # the worker's log keeps it
