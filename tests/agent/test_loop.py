"""The real loop over the real harness Session (cpu target), with a scripted model.

Only test_it_ends_with_the_correct_kernel_as_best, test_it_keeps_its_best_without_finish and
test_a_run_cut_short_profiles_what_it_last_compiled build an extension (content-hash cached, so
the one C++ build is shared); the rest never compile.
"""

from __future__ import annotations

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.backends.text_actions import TextActionBackend
from agent.config import AgentConfig, Budget, Prices
from agent.loop import EVENT_KINDS, Agent
from agent.reward import FAILURE

BROKEN_MODEL_NEW = """import torch.nn as nn

import kernel_ext


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return kernel_ext.no_such_function(x)
"""


def write_all(files: dict[str, str]) -> dict:
    return {
        "calls": [
            {"tool": "write_file", "args": {"path": p, "content": t}} for p, t in files.items()
        ]
    }


def look() -> dict:
    return {"tool": "list_files"}


# ---- runs that build a kernel ----


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # its profile passes on a busy host too
def test_it_ends_with_the_correct_kernel_as_best(run_script, good_relu_scale):
    run = run_script(
        [
            {"thought": "Read the task first.", "tool": "read_file", "args": {"path": "model.py"}},
            write_all(good_relu_scale),
            {"tool": "compile"},
            {"tool": "verify"},
            {"tool": "profile"},
            {"tool": "finish", "args": {"summary": "fused relu and scale"}},
        ]
    )
    result = run.result
    assert result.status == "finished" and result.detail == "fused relu and scale"
    assert result.turns == 6
    assert result.best is not None and result.best.verified
    assert result.best.sources == good_relu_scale
    assert result.best.speedup_vs_eager is not None and result.best.reward >= 1
    assert [c.index for c in result.candidates] == [0]  # verify and profile: one candidate
    texts = run.tool_texts()
    assert any(t.startswith("compile: OK") for t in texts)
    assert any(t.startswith("verify: PASSED") for t in texts)
    assert any("Best so far: candidate 1," in t for t in texts)
    assert run.of_kind("candidate")[-1]["best"] is True
    assert run.of_kind("status")[-1]["state"] == "finished"


def test_it_keeps_its_best_without_finish(run_script, good_relu_scale):
    run = run_script(
        [
            write_all(good_relu_scale),
            {"tool": "verify"},
            {"tool": "write_file", "args": {"path": "model_new.py", "content": BROKEN_MODEL_NEW}},
            {"tool": "verify"},
            look(),
        ],
        max_turns=5,
    )
    result = run.result
    assert (result.status, result.limit) == ("limits_exceeded", "turns")
    assert [c.verified for c in result.candidates] == [True, False]
    assert result.best is result.candidates[0]
    assert result.best.sources == good_relu_scale
    assert result.candidates[1].reward == FAILURE


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # its profile passes on a busy host too
def test_a_run_cut_short_profiles_what_it_last_compiled(run_script, good_relu_scale):
    run = run_script([write_all(good_relu_scale), {"tool": "compile"}], max_turns=2)
    result = run.result
    assert result.status == "limits_exceeded"
    assert result.best is not None and result.best.profile["ok"]
    assert result.best.sources == good_relu_scale


# ---- malformed actions ----


def test_malformed_replies_are_fed_back_and_a_good_one_resets_the_count(run_script):
    run = run_script(
        [
            {"text": "I think the kernel is done."},  # no tool call
            {"tool": "write_file", "raw_arguments": '{"path": "model_new.py", "cont'},
            look(),  # well formed: the count starts again
            {"tool": "rm_rf", "args": {}},
            {"tool": "read_file", "args": {}},
            {"tool": "read_file", "args": {"path": 3}},
            look(),  # never reached
        ],
        max_format_errors=3,
    )
    result = run.result
    assert result.status == "format_errors" and result.turns == 6
    feedback = [m["content"] for m in result.messages if m["role"] == "user"][1:]
    assert "no tool call" in feedback[0]
    texts = run.tool_texts()
    assert "not valid JSON" in texts[0]
    assert "unknown tool 'rm_rf'" in texts[2]
    assert "needs the argument(s): path" in texts[3]
    assert "path must be a string" in texts[4]
    assert [e["in_a_row"] for e in run.of_kind("error")] == [1, 2, 1, 2, 3]
    assert result.best is None


def test_every_tool_call_is_answered_so_the_history_stays_valid(run_script):
    run = run_script([{"calls": [{"tool": "list_files"}, {"tool": "nope"}]}], max_turns=1)
    calls = [c["id"] for m in run.result.messages for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in run.result.messages if m["role"] == "tool"]
    assert calls == answered and len(calls) == 2


def test_text_actions_drive_the_loop(run_script, session):
    text = (
        "First the model.\n<function=write_file>\n<parameter=path>model_new.py</parameter>\n"
        "<parameter=content>\nimport torch\n</parameter>\n</function>"
    )
    backend = TextActionBackend(ScriptedBackend([{"text": text}, {"text": "no action"}]))
    run = run_script([], backend=backend, max_turns=2)
    assert session.read_file("model_new.py") == "import torch"
    assert run.of_kind("thought")[0]["text"] == "First the model."
    assert "no action found" in run.result.messages[-1]["content"]


# ---- the workspace's rules hold through the tools ----


def test_path_traversal_is_refused_and_the_run_goes_on(run_script, session, tmp_path):
    attempts = [
        ("write_file", {"path": "../escape.py", "content": "x"}),
        ("write_file", {"path": "kernels/../../escape.cpp", "content": "x"}),
        ("write_file", {"path": str(tmp_path / "escape_absolute.cpp"), "content": "x"}),
        ("read_file", {"path": "../../../../etc/passwd"}),
        ("edit_file", {"path": "../model.py", "old_text": "a", "new_text": "b"}),
    ]
    run = run_script([{"tool": n, "args": a} for n, a in attempts] + [{"tool": "finish"}])
    assert run.result.status == "finished" and run.result.best is None
    assert all(t.startswith("Error:") for t in run.tool_texts()[:5])
    assert list(tmp_path.rglob("escape*")) == []  # nothing written in or around the workspace
    assert run.of_kind("error") == []  # refusals are answers, not format errors


def test_read_only_files_stay_unchanged(run_script, session):
    before = {name: session.read_file(name) for name in ("model.py", "binding.cpp", "SKILL.md")}
    run = run_script(
        [
            {"tool": "write_file", "args": {"path": "model.py", "content": "cheat"}},
            {"tool": "write_file", "args": {"path": "SKILL.md", "content": "cheat"}},
            {
                "tool": "edit_file",
                "args": {"path": "binding.cpp", "old_text": "PYBIND11_MODULE", "new_text": "cheat"},
            },
            {"tool": "write_file", "args": {"path": "notes.txt", "content": "not a kernel file"}},
            {"tool": "finish"},
        ]
    )
    texts = run.tool_texts()
    assert all("read-only" in t for t in texts[:3])
    assert texts[3].startswith("Error:") and "cannot be written" in texts[3]
    assert {name: session.read_file(name) for name in before} == before


# ---- budgets ----


@pytest.mark.parametrize(
    "budget,per_reply,limit",
    [
        ({"max_turns": 2}, {}, "turns"),
        (
            {"max_tokens": 1000},
            {"usage": {"prompt_tokens": 500, "completion_tokens": 100}},
            "tokens",
        ),
        # the third reply would come after the deadline: the wait for it is cut short
        ({"max_seconds": 0.5}, {"delay_s": 0.2}, "seconds"),
        # $10 per million prompt tokens, 100k per reply: $1 a reply
        (
            {"max_dollars": 1.5},
            {"usage": {"prompt_tokens": 100_000, "completion_tokens": 0}},
            "dollars",
        ),
    ],
)
def test_each_budget_ends_the_run(run_script, budget, per_reply, limit):
    actions = [{**look(), **per_reply} for _ in range(10)]
    result = run_script(actions, prices=Prices(input_per_mtok=10.0), **budget).result
    assert (result.status, result.limit) == ("limits_exceeded", limit)
    assert result.turns == 2


def test_a_stop_request_ends_the_run_before_the_next_step(session):
    asked = []

    def should_stop() -> str | None:
        asked.append(True)
        return "cancelled by its owner" if len(asked) > 2 else None

    config = AgentConfig(name="scripted-test", backend="scripted", script="-")
    backend = ScriptedBackend([look() for _ in range(10)])
    result = Agent(config, backend, session, should_stop=should_stop).run()
    assert (result.status, result.detail, result.turns) == (
        "cancelled",
        "cancelled by its owner",
        2,
    )


def test_a_model_that_stops_answering_ends_the_run(run_script):
    run = run_script([look()])
    assert run.result.status == "backend_error"
    assert "all 1 actions replayed" in run.result.detail


# ---- events ----


def test_events_are_numbered_trace_events(run_script):
    run = run_script([{"thought": "look around", **look()}, {"tool": "finish"}])
    assert [e["seq"] for e in run.events] == list(range(len(run.events)))
    assert {e["kind"] for e in run.events} <= set(EVENT_KINDS)
    assert all(set(e) == {"seq", "at", "kind", "payload"} for e in run.events)
    kinds = [e["kind"] for e in run.events]
    assert kinds[:4] == ["status", "thought", "tool_call", "tool_result"]
    assert run.of_kind("status")[-1]["state"] == "finished"


# ---- the loop over a served model (the real openai backend and a local server) ----


def test_a_served_model_gets_feedback_and_a_full_context_ends_the_run(session, chat_server):
    pytest.importorskip("openai")
    from agent.backends.openai import OpenAIBackend

    chat_server.plan_reply("The kernel is surely fast already.")  # no tool call
    chat_server.plan_reply("", ("list_files", "{}"))
    chat_server.plan_failure(
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
    )
    config = AgentConfig(
        name="served", model="kernel-model", base_url=chat_server.url, backoff_s=0.01
    )
    events: list[dict] = []
    result = Agent(config, OpenAIBackend(config), session, on_event=events.append).run()
    assert result.status == "context_length" and "maximum context length" in result.detail
    assert len(chat_server.requests) == 3  # a context-length error is not retried
    feedback = chat_server.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and "no tool call" in feedback["content"]
    answer = chat_server.requests[2]["messages"][-1]
    assert answer["role"] == "tool" and "model.py" in answer["content"]
    assert [e["payload"]["kind"] for e in events if e["kind"] == "error"] == [
        "format",
        "context_length",
    ]
    assert result.usage.total_tokens == 300  # two replies of 150 tokens each


def served_agent(chat_server, **budget) -> AgentConfig:
    return AgentConfig(
        name="served",
        model="kernel-model",
        base_url=chat_server.url,
        backoff_s=0.01,
        budget=Budget(**{"max_turns": 10, **budget}),
    )


def test_a_slow_server_ends_the_run_at_its_time_budget(session, chat_server):
    pytest.importorskip("openai")
    from agent.backends.openai import OpenAIBackend

    chat_server.plan_reply("", ("list_files", "{}"))
    chat_server.plan_reply("much too late", ("list_files", "{}"), delay_s=30)
    config = served_agent(chat_server, max_seconds=2)
    result = Agent(config, OpenAIBackend(config), session).run()
    assert (result.status, result.limit) == ("limits_exceeded", "seconds")
    assert "time budget ran out" in result.detail and chat_server.url in result.detail
    # the 2 s budget, not the reply 30 s away or the 600 s request timeout (with a margin no
    # busy host's scheduling crosses)
    assert result.seconds < 15


def test_a_tool_call_the_server_could_not_parse_is_fed_back_as_such(session, chat_server):
    pytest.importorskip("openai")
    from agent.backends.openai import OpenAIBackend

    chat_server.plan_reply('<tool_call>\n{"name": "list_files", "arguments": {,}}\n</tool_call>')
    chat_server.plan_reply("", ("finish", '{"summary": "done"}'))
    config = served_agent(chat_server)
    result = Agent(config, OpenAIBackend(config), session).run()
    assert result.status == "finished"
    feedback = chat_server.requests[1]["messages"][-1]
    assert feedback["role"] == "user"
    assert "<tool_call> is not valid JSON" in feedback["content"]
    assert "no tool call" not in feedback["content"]


def test_the_reply_reaches_the_trace_while_it_streams(session, chat_server):
    pytest.importorskip("openai")
    from agent.backends.openai import OpenAIBackend

    text = "First fuse relu with the scale, then tune the block size."
    chat_server.plan_reply(text, ("finish", "{}"), chunk_delay_s=0.6)
    config = served_agent(chat_server)
    events: list[dict] = []
    Agent(config, OpenAIBackend(config), session, on_event=events.append).run()
    thoughts = [e["payload"] for e in events if e["kind"] == "thought"]
    partial, whole = thoughts[:-1], thoughts[-1]
    assert len(partial) >= 2 and all(p["partial"] and p["turn"] == 1 for p in partial)
    assert "".join(p["text"] for p in partial) == text  # the pieces, each sent once, in order
    assert whole["text"] == text and "partial" not in whole
