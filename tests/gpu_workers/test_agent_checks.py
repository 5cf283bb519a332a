"""Each model agent's health, checked from the worker (gpu_workers/agent_checks.py) against a
real local chat server and a port where nothing listens, stored as AgentHealth."""

from __future__ import annotations

import socket

import pytest

from gpu_workers import agent_checks
from tests.agent.conftest import chat_server as chat_server  # noqa: F401 (the fixture)
from webapp.runs.models import AgentHealth, HealthLevel

pytestmark = pytest.mark.django_db
pytest.importorskip("openai")


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


@pytest.fixture
def agents(tmp_path, monkeypatch, chat_server):
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.served]\nbackend = "openai"\nmodel = "kernel-model"\n'
        f'base_url = "{chat_server.url}"\n'
        f'[agents.gone]\nbackend = "text"\nmodel = "m"\nbase_url = "{closed_port_url()}"\n'
        '[agents.keyed]\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "KEYED_KEY_NOT_SET"\n'
        '[agents.fusion]\nbackend = "fusion"\n'
    )
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(path))
    monkeypatch.delenv("KEYED_KEY_NOT_SET", raising=False)


def test_every_model_agent_is_checked_and_its_health_stored(agents, chat_server):
    chat_server.models = [{"id": "kernel-model", "object": "model", "max_model_len": 8192}]
    chat_server.plan_reply("", ("list_files", "{}"))
    chat_server.plan_reply("<function=list_files>\n</function>")

    levels = agent_checks.check_agents(worker="host-a:1")

    assert levels == {"served": "ok", "gone": "fail", "keyed": "unusable"}  # fusion has no model
    served, gone, keyed = (AgentHealth.objects.get(agent=n) for n in ("served", "gone", "keyed"))
    assert served.report["context_length"] == 8192 and served.worker == "host-a:1"
    assert "cannot reach" in gone.summary and "connection refused" in gone.summary
    assert "$KEYED_KEY_NOT_SET" in keyed.summary and keyed.operator_key_missing
    assert not served.operator_key_missing and not gone.operator_key_missing
    assert not AgentHealth.objects.filter(agent="fusion").exists()


def test_a_reply_without_a_tool_call_is_a_warning_and_a_second_check_replaces_the_first(
    agents, chat_server
):
    chat_server.models = [{"id": "kernel-model", "object": "model"}]
    chat_server.plan_reply("I would rather explain in prose.")
    chat_server.plan_reply("Still prose.")
    assert agent_checks.check_agents(["served"]) == {"served": "warn"}
    assert "tool call" in AgentHealth.objects.get(agent="served").summary

    chat_server.plan_reply("", ("list_files", "{}"))
    chat_server.plan_reply("<function=list_files>\n</function>")
    agent_checks.check_agents(["served"])
    (health,) = AgentHealth.objects.filter(agent="served")
    assert health.level == HealthLevel.OK
