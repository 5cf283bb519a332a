"""Any OpenAI-compatible chat-completions endpoint with native tool calls (vLLM, frontier APIs).

Streaming by default (a long kernel takes minutes to generate; a stream keeps the connection
alive, the read timeout applies per chunk, and the text reaches the live trace as it comes).
Retries with exponential backoff on timeouts, dropped or malformed streams, 429 (honouring
Retry-After) and 5xx; a context-length error is raised at once, never retried. Every request,
and every wait between retries, fits in the time the run has left. Errors name the endpoint and
keep the server's own message.
"""

from __future__ import annotations

import itertools
import json
import random
import time
import uuid

import openai

from agent.backends import (
    BackendError,
    ContextLengthExceeded,
    DeadlineReached,
    Reply,
    ReplyBrokeOff,
    TextSink,
    ToolCall,
    Usage,
    estimate_usage,
    parse_arguments,
    time_left,
)
from agent.backends.tool_markup import unparsed_tool_call
from agent.config import AgentConfig

# Worth another try: the server was slow, overloaded, or failed mid-stream.
_RETRYABLE = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
# What a stream can raise past the SDK: a `data:` line that is not JSON (transformers serve sends
# one when its tool-call parser fails mid-stream). The SDK (3.x) raises a dropped or stalled
# connection as APIConnectionError / APITimeoutError.
_STREAM_FAULTS = (json.JSONDecodeError,)
_CONTEXT_LENGTH_HINTS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "maximum model length",
    "prompt is too long",
)
# Keys of a message that every chat-completions server accepts; the history keeps a few more.
_SENT_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


class OpenAIBackend:
    def __init__(self, config: AgentConfig, api_key: str | None = None):
        self.config = config
        self._last_timeout = config.request_timeout_s
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=api_key or config.api_key(),
            timeout=config.request_timeout_s,
            max_retries=0,  # retries are ours, so that every one is counted and logged the same
        )

    def complete(
        self,
        messages: list[dict],
        tools: list[dict],
        deadline: float | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        request = self.request(messages, tools)
        for attempt in itertools.count():
            timeout = self._timeout(deadline)
            try:
                if self.config.stream:
                    reply = self._stream(request, timeout, deadline, on_text)
                else:
                    reply = self._create(request, timeout)
            except (openai.APIError, *_STREAM_FAULTS) as error:
                self._raise_unless_retryable(error, attempt)
                self._wait(self.retry_delay(attempt, error), deadline, error)
                continue
            if reply.usage.total_tokens == 0:
                reply.usage = estimate_usage(request["messages"], reply.content)
            if not reply.tool_calls:
                reply.format_error = unparsed_tool_call(reply.content)
            return reply

    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        sent = [{k: v for k, v in m.items() if k in _SENT_KEYS} for m in messages]
        request: dict = {"model": self.config.model, "messages": sent}
        if tools:
            request |= {"tools": tools, "tool_choice": "auto"}
        if self.config.sampling:
            # Sent as-is so that any server's own knobs work (top_k, chat_template_kwargs, ...).
            request["extra_body"] = dict(self.config.sampling)
        return request

    def _timeout(self, deadline: float | None) -> float:
        left = time_left(deadline, self.config.base_url)
        limit = self.config.request_timeout_s
        self._last_timeout = limit if left is None else min(left, limit)
        return self._last_timeout

    def _raise_unless_retryable(self, error: Exception, attempt: int) -> None:
        what, retryable = self.describe(error)
        said = f"{what} {getattr(error, 'body', '') or ''}".lower()  # OpenAI puts it in `code`
        if any(hint in said for hint in _CONTEXT_LENGTH_HINTS):
            raise ContextLengthExceeded(what) from error
        failed = ReplyBrokeOff if _mid_reply(error) else BackendError
        if not retryable:
            raise failed(what) from error
        if attempt >= self.config.max_retries:
            tries = self.config.max_retries + 1
            raise failed(f"gave up after {tries} tries: {what}") from error

    def describe(self, error: Exception) -> tuple[str, bool]:
        """What went wrong, in words that name the endpoint and keep the server's own message,
        and whether another try may help."""
        endpoint = self.config.base_url
        if isinstance(error, json.JSONDecodeError):
            line = error.doc[:200]
            return f"{endpoint} sent a stream line that is not JSON: {line!r}", True
        if isinstance(error, openai.APITimeoutError):
            waited = f"no data for {self._last_timeout:.0f} s"
            return f"{endpoint} did not answer in time ({waited})", True
        if isinstance(error, openai.APIStatusError):
            retryable = isinstance(error, _RETRYABLE)
            status = f"{error.status_code} {type(error).__name__}"
            return f"{endpoint} answered {status}: {server_message(error)}", retryable
        if isinstance(error, openai.APIConnectionError):
            cause = error.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause else error.message
            return f"{endpoint}: the connection failed or broke off ({detail})", True
        # An error event inside a stream has no status: the server failed mid-reply.
        message = getattr(error, "message", str(error))
        return f"{endpoint} failed in the middle of a reply: {message}", True

    def retry_delay(self, attempt: int, error: Exception) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins when it says more."""
        delay = self.config.backoff_s * 2**attempt * random.uniform(1.0, 1.25)
        response = getattr(error, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.config.max_backoff_s)

    def _wait(self, delay: float, deadline: float | None, error: Exception) -> None:
        """Sleeps before the next try, unless the run's time would run out first."""
        left = time_left(deadline, self.config.base_url)
        if left is not None and delay >= left:
            what, _ = self.describe(error)
            raise DeadlineReached(f"the time budget ran out while retrying: {what}")
        time.sleep(delay)

    def _create(self, request: dict, timeout: float) -> Reply:
        response = self.client.chat.completions.create(**request, timeout=timeout)
        choice = response.choices[0]
        message = choice.message
        calls = [
            _tool_call(call.id, call.function.name, call.function.arguments)
            for call in message.tool_calls or []
        ]
        usage = response.usage
        return Reply(
            content=message.content or "",
            tool_calls=calls,
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            reasoning=_reasoning(message),
            finish_reason=choice.finish_reason,
        )

    def _stream(
        self, request: dict, timeout: float, deadline: float | None, on_text: TextSink | None
    ) -> Reply:
        stream = self.client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}, timeout=timeout
        )
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[
            int, dict
        ] = {}  # tool-call deltas by index: id and name once, arguments in parts
        usage, finish_reason = Usage(), None
        with stream:
            for chunk in stream:
                if chunk.usage:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    delta = choice.delta
                    content.append(delta.content or "")
                    reasoning.append(_reasoning(delta))
                    for part in delta.tool_calls or []:
                        _merge_tool_call_delta(calls.setdefault(part.index, {}), part)
                    finish_reason = choice.finish_reason or finish_reason
                    if on_text is not None:
                        on_text(delta.content or "", reasoning[-1])
                # A server that trickles chunks keeps each read within the timeout; the
                # budget bounds the whole reply.
                time_left(deadline, self.config.base_url)
        return Reply(
            content="".join(content),
            tool_calls=[
                _tool_call(c.get("id"), c.get("name", ""), "".join(c.get("arguments", [])))
                for _, c in sorted(calls.items())
            ],
            usage=usage,
            reasoning="".join(reasoning),
            finish_reason=finish_reason,
        )


def _mid_reply(error: Exception) -> bool:
    """Whether the server failed after it took the request: a stream line that is not JSON, or
    an error event in the stream (an APIError with no status and no broken connection)."""
    if isinstance(error, json.JSONDecodeError):
        return True
    return isinstance(error, openai.APIError) and not isinstance(
        error, (openai.APIStatusError, openai.APIConnectionError)
    )


def server_message(error: openai.APIStatusError) -> str:
    """The server's own explanation: OpenAI's and vLLM's `message`, FastAPI's `detail`, or the
    body's text."""
    body = error.body
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if value:
                return str(value)
    try:
        text = error.response.text.strip()
    except Exception:  # a streamed error response whose body was never read
        text = ""
    return text[:500] or error.message


def _merge_tool_call_delta(call: dict, part) -> None:
    if part.id:
        call["id"] = part.id
    function = part.function
    if function is not None:
        if function.name and not call.get("name"):
            call["name"] = function.name
        call.setdefault("arguments", []).append(function.arguments or "")


def _tool_call(call_id: str | None, name: str, raw: str | None) -> ToolCall:
    arguments, error = parse_arguments(raw or "")
    return ToolCall(call_id or f"call_{uuid.uuid4().hex[:12]}", name, raw or "", arguments, error)


def _reasoning(message) -> str:
    """vLLM's reasoning parsers put thinking in `reasoning_content` (newer: `reasoning`)."""
    return getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None) or ""
