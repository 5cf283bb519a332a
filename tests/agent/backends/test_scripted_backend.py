"""The scripted backend: recorded actions in, replies out, an error when the script is spent."""

from __future__ import annotations

import json

import pytest

from agent.backends import BackendError
from agent.backends.scripted import ScriptedBackend, actions_from_messages
from agent.config import DEFAULT_AGENTS_FILE, load_agents
from agent.tools import TOOL_NAMES, TOOLS


def test_it_replays_actions_in_order_then_stops():
    backend = ScriptedBackend(
        [
            {"thought": "look", "tool": "list_files"},
            {
                "calls": [{"tool": "compile"}, {"tool": "verify"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            },
        ]
    )
    first = backend.complete([], TOOLS)
    assert (first.content, [c.name for c in first.tool_calls]) == ("look", ["list_files"])
    assert first.usage.estimated
    second = backend.complete([], TOOLS)
    assert [c.name for c in second.tool_calls] == ["compile", "verify"]
    assert len({c.id for c in second.tool_calls}) == 2
    assert second.usage.total_tokens == 10 and not second.usage.estimated
    with pytest.raises(BackendError, match="all 2 actions replayed"):
        backend.complete([], TOOLS)


def test_raw_arguments_are_replayed_exactly():
    reply = ScriptedBackend([{"tool": "read_file", "raw_arguments": '{"path": '}]).complete([], [])
    assert reply.tool_calls[0].raw_arguments == '{"path": '
    assert reply.tool_calls[0].arguments is None


def test_a_recorded_run_becomes_a_script():
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "hm",
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "compile", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": "compile: OK"},
        {"role": "assistant", "content": "no action"},
    ]
    replayed = ScriptedBackend(actions_from_messages(messages))
    assert [c.name for c in replayed.complete([], []).tool_calls] == ["compile"]
    assert replayed.complete([], []).content == "no action"


def test_the_shipped_demo_script_uses_only_real_tools():
    script = load_agents(DEFAULT_AGENTS_FILE)["scripted-demo"].script
    actions = json.loads(open(script).read())
    names = [c["tool"] for a in actions for c in (a.get("calls") or [a])]
    assert set(names) <= set(TOOL_NAMES) and names[-1] == "finish"
