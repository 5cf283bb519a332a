"""The openai backend against a real HTTP server speaking chat completions (conftest.py)."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("openai")

from agent.backends import BackendError, ContextLengthExceeded, DeadlineReached  # noqa: E402
from agent.backends.openai import OpenAIBackend  # noqa: E402
from agent.config import AgentConfig, ConfigError  # noqa: E402
from agent.tools import TOOLS  # noqa: E402

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
WRITE_ARGS = json.dumps({"path": "kernels/relu.cpp", "content": 'extern "C" void f() {}\n'})


def backend_for(server, **changes) -> OpenAIBackend:
    options = {
        "name": "test",
        "model": "kernel-model",
        "base_url": server.url,
        "api_key_env": "TEST_CHAT_KEY",
        "sampling": {"temperature": 0.2, "max_tokens": 512},
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "request_timeout_s": 5.0,
    }
    return OpenAIBackend(AgentConfig(**{**options, **changes}))


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("TEST_CHAT_KEY", "sk-test-123")


def test_it_streams_content_tool_calls_and_usage(chat_server):
    chat_server.plan_reply("Writing the kernel.", ("write_file", WRITE_ARGS), ("compile", "{}"))
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.content == "Writing the kernel."
    assert [c.name for c in reply.tool_calls] == ["write_file", "compile"]
    assert reply.tool_calls[0].arguments == json.loads(WRITE_ARGS)
    assert reply.tool_calls[0].raw_arguments == WRITE_ARGS
    assert reply.tool_calls[1].arguments == {}
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (120, 30)
    assert not reply.usage.estimated
    assert reply.finish_reason == "tool_calls"


def test_it_sends_tools_sampling_and_the_key_from_the_environment(chat_server):
    chat_server.plan_reply("ok", ("list_files", "{}"))
    backend_for(chat_server).complete(MESSAGES, TOOLS)
    request = chat_server.requests[0]
    assert request["model"] == "kernel-model"
    assert request["tools"] == TOOLS and request["tool_choice"] == "auto"
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert (request["temperature"], request["max_tokens"]) == (0.2, 512)
    assert chat_server.headers[0]["authorization"] == "Bearer sk-test-123"


def test_it_sends_only_standard_message_keys(chat_server):
    chat_server.plan_reply("ok", ("list_files", "{}"))
    history = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "hmm",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "list_files", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "list_files", "content": "model.py"},
    ]
    backend_for(chat_server).complete(history, TOOLS)
    sent = chat_server.requests[0]["messages"]
    assert "reasoning_content" not in sent[2] and "name" not in sent[3]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "model.py"}


def test_it_reads_a_reply_without_streaming(chat_server):
    chat_server.plan_reply("", ("verify", "{}"), reasoning="check first")
    reply = backend_for(chat_server, stream=False).complete(MESSAGES, TOOLS)
    assert "stream" not in chat_server.requests[0]
    assert [c.name for c in reply.tool_calls] == ["verify"]
    assert reply.reasoning == "check first"
    assert reply.usage.total_tokens == 150


def test_it_keeps_a_reasoning_models_thinking(chat_server):
    chat_server.plan_reply("", ("compile", "{}"), reasoning="The loop should be vectorised.")
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.reasoning == "The loop should be vectorised."
    assert reply.message()["reasoning_content"] == reply.reasoning


def test_a_reply_with_no_tool_call_has_no_calls(chat_server):
    chat_server.plan_reply("I believe the kernel is optimal now.")
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.tool_calls == []
    assert reply.content == "I believe the kernel is optimal now."
    assert "tool_calls" not in reply.message()


def test_invalid_json_arguments_are_kept_raw_with_the_reason(chat_server):
    cut = WRITE_ARGS[:40]  # a reply cut off mid-arguments
    chat_server.plan_reply("", ("write_file", cut), finish_reason="length")
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    call = reply.tool_calls[0]
    assert call.arguments is None and call.raw_arguments == cut
    assert "not valid JSON" in call.error
    assert reply.finish_reason == "length"


def test_arguments_that_are_not_an_object_are_refused(chat_server):
    chat_server.plan_reply("", ("read_file", '["model.py"]'))
    call = backend_for(chat_server).complete(MESSAGES, TOOLS).tool_calls[0]
    assert call.arguments is None and "JSON object" in call.error


def test_it_retries_after_a_timeout(chat_server):
    chat_server.plan_reply("slow", ("list_files", "{}"), delay_s=1.5)
    chat_server.plan_reply("fast", ("list_files", "{}"))
    reply = backend_for(chat_server, request_timeout_s=0.5).complete(MESSAGES, TOOLS)
    assert reply.content == "fast"
    assert len(chat_server.requests) == 2


def test_it_retries_429_and_5xx_with_backoff(chat_server):
    chat_server.plan_failure(429, "Rate limit reached", headers={"Retry-After": "0"})
    chat_server.plan_failure(500, "internal error")
    chat_server.plan_failure(503, "overloaded")
    chat_server.plan_reply("finally", ("list_files", "{}"))
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.content == "finally"
    assert len(chat_server.requests) == 4


def test_it_retries_an_error_in_the_middle_of_a_stream(chat_server):
    chat_server.plan_reply("partial", error={"message": "engine died", "type": "error"})
    chat_server.plan_reply("whole", ("compile", "{}"))
    assert backend_for(chat_server).complete(MESSAGES, TOOLS).content == "whole"


def test_it_gives_up_after_its_retries(chat_server):
    for _ in range(3):
        chat_server.plan_failure(502, "bad gateway")
    with pytest.raises(BackendError, match="gave up after 3 tries"):
        backend_for(chat_server, max_retries=2).complete(MESSAGES, TOOLS)
    assert len(chat_server.requests) == 3


def test_it_does_not_retry_a_client_error(chat_server):
    chat_server.plan_failure(401, "Incorrect API key provided")
    with pytest.raises(BackendError, match="AuthenticationError"):
        backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize(
    "message,code",
    [
        # vLLM's wording
        (
            "This model's maximum context length is 32768 tokens. However, you requested 40120 "
            "tokens (31928 in the messages, 8192 in the completion).",
            None,
        ),
        # OpenAI's code
        ("Your input exceeds the context window of this model.", "context_length_exceeded"),
    ],
)
def test_a_context_length_error_is_raised_at_once(chat_server, message, code):
    chat_server.plan_failure(400, message, code=code)
    with pytest.raises(ContextLengthExceeded):
        backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert len(chat_server.requests) == 1


def test_usage_is_estimated_when_the_server_sends_none(chat_server):
    chat_server.plan_reply("x" * 400, ("list_files", "{}"), usage=None)
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.usage.estimated and reply.usage.completion_tokens == 100


def test_a_missing_api_key_fails_before_any_request(chat_server, monkeypatch):
    monkeypatch.delenv("TEST_CHAT_KEY")
    with pytest.raises(ConfigError, match=r"\$TEST_CHAT_KEY"):
        backend_for(chat_server)
    assert chat_server.requests == []


# ---- what real servers do: broken streams, slow replies, refusals (issue 18) ----


def test_a_stream_line_that_is_not_json_is_retried(chat_server):
    # transformers serve sends one when its tool-call parser fails mid-stream
    chat_server.plan_reply("partial reply", malformed_line=True)
    chat_server.plan_reply("whole", ("compile", "{}"))
    assert backend_for(chat_server).complete(MESSAGES, TOOLS).content == "whole"
    assert len(chat_server.requests) == 2


def test_a_stream_dropped_mid_body_is_retried(chat_server):
    chat_server.plan_reply("partial reply", drop=True)
    chat_server.plan_reply("whole", ("compile", "{}"))
    assert backend_for(chat_server).complete(MESSAGES, TOOLS).content == "whole"
    assert len(chat_server.requests) == 2


def test_a_stalled_stream_is_retried(chat_server):
    chat_server.plan_reply("partial reply", stall_s=1.5)
    chat_server.plan_reply("whole", ("compile", "{}"))
    reply = backend_for(chat_server, request_timeout_s=0.5).complete(MESSAGES, TOOLS)
    assert reply.content == "whole"


def test_broken_streams_past_the_retries_name_the_endpoint(chat_server):
    for _ in range(2):
        chat_server.plan_reply("partial reply", malformed_line=True)
    with pytest.raises(BackendError) as raised:
        backend_for(chat_server, max_retries=1).complete(MESSAGES, TOOLS)
    assert "gave up after 2 tries" in str(raised.value)
    assert f"{chat_server.url} sent a stream line that is not JSON" in str(raised.value)


def test_a_refusal_names_the_endpoint_and_keeps_the_servers_message(chat_server):
    vllm_body = {
        "object": "error",
        "message": "The model `kernel-model` does not exist.",
        "type": "NotFoundError",
        "code": 404,
    }
    chat_server.plan_failure(404, "", body=vllm_body)
    with pytest.raises(BackendError) as raised:
        backend_for(chat_server).complete(MESSAGES, TOOLS)
    message = str(raised.value)
    assert message.startswith(f"{chat_server.url} answered 404 NotFoundError")
    assert "The model `kernel-model` does not exist." in message
    assert len(chat_server.requests) == 1


def test_no_request_outlives_the_runs_deadline(chat_server):
    chat_server.plan_reply("too late", ("compile", "{}"), delay_s=30)
    started = time.monotonic()
    with pytest.raises(DeadlineReached, match="time budget ran out"):
        backend_for(chat_server, request_timeout_s=600).complete(
            MESSAGES, TOOLS, deadline=started + 1.0
        )
    # bounded by the 1 s deadline, not by the reply 30 s away or the 600 s timeout (a margin
    # no busy host's scheduling crosses)
    assert time.monotonic() - started < 15


def test_a_retry_after_past_the_deadline_ends_at_once(chat_server):
    chat_server.plan_failure(429, "Rate limit reached", headers={"Retry-After": "60"})
    started = time.monotonic()
    with pytest.raises(DeadlineReached, match="429"):
        backend_for(chat_server, max_backoff_s=120).complete(
            MESSAGES, TOOLS, deadline=started + 20.0
        )
    # it did not sleep into a wait it cannot finish: not the 60 s asked, nor until the 20 s
    # deadline (half of it is a margin no busy host's scheduling crosses)
    assert time.monotonic() - started < 10


def test_retry_after_is_honoured(chat_server):
    chat_server.plan_failure(429, "Rate limit reached", headers={"Retry-After": "1"})
    chat_server.plan_reply("after the wait", ("compile", "{}"))
    started = time.monotonic()
    reply = backend_for(chat_server, max_backoff_s=5).complete(MESSAGES, TOOLS)
    assert reply.content == "after the wait"
    assert time.monotonic() - started >= 1.0


def test_the_streamed_pieces_reach_the_text_sink_in_order(chat_server):
    chat_server.plan_reply("Fuse relu and scale.", ("compile", "{}"), reasoning="think")
    pieces: list[tuple[str, str]] = []
    reply = backend_for(chat_server).complete(
        MESSAGES, TOOLS, on_text=lambda text, reasoning: pieces.append((text, reasoning))
    )
    assert "".join(text for text, _ in pieces) == reply.content == "Fuse relu and scale."
    assert "".join(reasoning for _, reasoning in pieces) == "think"


def test_a_tool_call_the_server_could_not_parse_is_named(chat_server):
    broken = '<tool_call>\n{"name": "compile", "arguments": {"x": }}\n</tool_call>'
    chat_server.plan_reply(broken)
    reply = backend_for(chat_server).complete(MESSAGES, TOOLS)
    assert reply.tool_calls == []
    assert "not valid JSON" in reply.format_error


def test_plain_text_is_no_unparsed_tool_call(chat_server):
    chat_server.plan_reply("I will write the kernel next.")
    assert backend_for(chat_server).complete(MESSAGES, TOOLS).format_error is None
