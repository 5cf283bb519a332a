"""The trainer's policy endpoint (agent/train/policy_server.py) answers the agent's own OpenAI
backend, as a worker's rollout uses it, the way a model server does: the replies a policy writes
reach the loop as tool calls; what it cannot answer gets an error that says what to send, and a
policy that fails is a 5xx the backend reports (and retries)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("openai")

from agent.backend_choice import make_backend  # noqa: E402
from agent.backends import BackendError  # noqa: E402
from agent.backends.scripted import ScriptedBackend  # noqa: E402
from agent.config import AgentConfig  # noqa: E402
from agent.tools import TOOLS  # noqa: E402
from agent.train.policy_server import MODEL, PolicyServer  # noqa: E402
from tests.webapp.live_stack import DEMO_SCRIPT  # noqa: E402


class DemoPolicy:
    """A scripted model, one action a turn, by the conversation's own length: requests of
    several conversations at once each get their own next action."""

    def __init__(self, actions: list[dict]):
        self.actions = actions

    def complete(self, messages, tools, deadline=None, on_text=None):
        turn = sum(m["role"] == "assistant" for m in messages)
        return ScriptedBackend(self.actions[turn : turn + 1]).complete(messages, tools)


class FailingPolicy:
    def complete(self, messages, tools, deadline=None, on_text=None):
        raise RuntimeError("CUDA out of memory")


def backend_for(server: PolicyServer):
    config = AgentConfig(
        name="policy", model=MODEL, base_url=server.url, stream=False, max_retries=0
    )
    return make_backend(config)


def post(server: PolicyServer, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(server.url.removesuffix("/v1") + path, data=body)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_worker_s_backend_gets_the_policy_s_tool_calls():
    actions = json.loads(DEMO_SCRIPT.read_text())
    with PolicyServer(DemoPolicy(actions)) as server:
        backend = backend_for(server)
        first = backend.complete([{"role": "user", "content": "optimize"}], TOOLS)
        history = [
            {"role": "user", "content": "optimize"},
            first.message(),
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "model.py"},
        ]
        second = backend.complete(history, TOOLS)
    assert [call.name for call in first.tool_calls] == ["list_files"]
    assert [call.name for call in second.tool_calls] == ["write_file"] * 3
    written = {call.arguments["path"]: call.arguments["content"] for call in second.tool_calls}
    expected = {c["args"]["path"]: c["args"]["content"] for c in actions[1]["calls"]}
    assert written == expected  # the kernel's text, whole
    assert second.usage.completion_tokens > 0


def test_what_it_cannot_answer_says_what_to_send():
    with PolicyServer(DemoPolicy([])) as server:
        with urllib.request.urlopen(server.url + "/models", timeout=30) as response:
            assert json.loads(response.read())["data"][0]["id"] == MODEL
        not_json = post(server, "/v1/chat/completions", b"{messages")
        streamed = post(server, "/v1/chat/completions", b'{"messages": [], "stream": true}')
        elsewhere = post(server, "/v1/completions", b"{}")
    assert not_json[0] == 400 and "not JSON" in not_json[1]["error"]["message"]
    assert streamed[0] == 400 and "stream = false" in streamed[1]["error"]["message"]
    assert elsewhere[0] == 404 and "/v1/chat/completions" in elsewhere[1]["error"]["message"]


def test_a_policy_that_fails_is_a_server_error_the_backend_reports():
    with PolicyServer(FailingPolicy()) as server:
        with pytest.raises(BackendError, match="500.*the policy failed.*CUDA out of memory"):
            backend_for(server).complete([{"role": "user", "content": "go"}], TOOLS)
