"""A person's own model API key reaches the model server and nothing else: a run of a frontier
agent with a known key, through the real worker code, the real openai backend, a real local
model server and the real database, then a search of every artifact for the key (every table,
the pages, the API, the trace, the bundle and the logs). The search is shown to find a key that
is there (the known-bad beside it)."""

from __future__ import annotations

import json
import logging
import secrets

import pytest
from django.apps import apps
from django.test import Client

from gpu_workers import agent_run
from tests.agent.conftest import ChatServer
from tests.agent.conftest import chat_server as chat_server  # noqa: F401 (the fixture)
from tests.conftest import candidate_dir
from tests.webapp.conftest import api_client, make_problem
from webapp.runs.models import ModelKey, Run, RunStatus, TraceEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]
pytest.importorskip("openai")


@pytest.fixture
def frontier_agent(tmp_path, monkeypatch, chat_server):
    """An agents file whose `frontier` agent takes a key from $FRONTIER_KEY, which is unset: the
    only key there is, is the person's own."""
    path = tmp_path / "agents.toml"
    path.write_text(
        "[agents.frontier]\n"
        'backend = "openai"\n'
        'model = "frontier-model"\n'
        f'base_url = "{chat_server.url}"\n'
        'api_key_env = "FRONTIER_KEY"\n'
        "backoff_s = 0.01\n"
    )
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(path))
    monkeypatch.delenv("FRONTIER_KEY", raising=False)
    return "frontier"


def plan_a_good_run(server: ChatServer) -> None:
    root = candidate_dir("cpu", "good_relu_scale")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        arguments = {"path": path.relative_to(root).as_posix(), "content": path.read_text()}
        server.plan_reply("Writing a file.", ("write_file", json.dumps(arguments)))
    server.plan_reply("Check it.", ("verify", "{}"))
    server.plan_reply("Done.", ("finish", '{"summary": "fused relu and scale"}'))


def every_stored_value() -> str:
    """Every row of every table, as text."""
    rows = []
    for model in apps.get_models():
        rows += [repr(row) for row in model.objects.values_list()]
    return "\n".join(rows)


def everything_shown(run: Run) -> str:
    """Every page and API answer about the run and the keys, as its owner sees them."""
    client = Client()
    client.force_login(run.owner)
    shown = []
    for url in (
        f"/runs/{run.pk}/",
        "/keys/",
        f"/api/runs/{run.pk}",
        f"/api/runs/{run.pk}/events",
        f"/api/runs/{run.pk}/candidates",
        "/api/model-keys",
        f"/problems/{run.problem_id}/",
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        shown.append(response.content.decode())
    bundle = client.get(f"/api/runs/{run.pk}/bundle")
    assert bundle.status_code == 200
    shown.append(bundle.content.decode("latin-1"))  # the zip's bytes, every file stored
    return "\n".join(shown)


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # finish profiles it: succeeds on a busy host
def test_a_persons_key_reaches_the_chat_server_and_nothing_else(
    alice, relu_scale, frontier_agent, chat_server, caplog, capfd
):
    key = f"sk-leaktest-{secrets.token_hex(20)}"
    client = api_client(alice)
    saved = client.put(
        f"/api/model-keys/{frontier_agent}", {"key": key}, content_type="application/json"
    )
    assert saved.status_code == 200 and saved.json()["last4"] == key[-4:]
    assert key not in saved.content.decode()

    plan_a_good_run(chat_server)
    run = Run.objects.create(
        problem=make_problem(alice, relu_scale),
        owner=alice,
        agent=frontier_agent,
        gpu_type="cpu",
        protocol="loose",
    )
    caplog.set_level(logging.DEBUG)  # the SDK's and every library's debug logs too
    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} succeeded"

    assert {h["authorization"] for h in chat_server.headers} == {f"Bearer {key}"}
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    logs = caplog.text + "".join(capfd.readouterr())
    for where, text in {
        "database": every_stored_value(),
        "pages, API and bundle": everything_shown(run),
        "logs": logs,
    }.items():
        assert key not in text, f"the key is in the {where}"
        assert key[:-4] not in text, f"most of the key is in the {where}"


def test_the_search_finds_a_key_where_there_is_one(alice, relu_scale):
    """The known-bad: a key planted in a trace event is found by the same searches."""
    key = f"sk-planted-{secrets.token_hex(20)}"
    run = Run.objects.create(
        problem=make_problem(alice, relu_scale), owner=alice, agent="x", gpu_type="cpu"
    )
    TraceEvent.objects.create(run=run, seq=1, kind="thought", payload={"text": key})
    assert key in every_stored_value()
    client = api_client(alice)
    assert key in client.get(f"/api/runs/{run.pk}/events").content.decode()


def test_a_saved_key_is_stored_encrypted(alice, frontier_agent):
    key = f"sk-atrest-{secrets.token_hex(20)}"
    api_client(alice).put(
        f"/api/model-keys/{frontier_agent}", {"key": key}, content_type="application/json"
    )
    stored = ModelKey.objects.get(owner=alice)
    assert key not in stored.encrypted and stored.last4 == key[-4:]
