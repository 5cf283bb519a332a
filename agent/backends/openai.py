"""Any OpenAI-compatible chat-completions endpoint with native tool calls (vLLM, frontier APIs).

Streaming by default (a long kernel takes minutes to generate; a stream keeps the connection
alive and the read timeout applies per chunk). Retries with exponential backoff on timeouts,
dropped connections, 429 and 5xx; a context-length error is raised at once, never retried.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid

import openai

from agent.backends import (
    BackendError,
    ContextLengthExceeded,
    Reply,
    ToolCall,
    Usage,
    estimate_usage,
    parse_arguments,
)
from agent.config import AgentConfig

# Worth another try: the server was slow, overloaded, or failed mid-stream.
_RETRYABLE = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
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
    def __init__(self, config: AgentConfig):
        self.config = config
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key(),
            timeout=config.request_timeout_s,
            max_retries=0,  # retries are ours, so that every one is counted and logged the same
        )

    def complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        request = self.request(messages, tools)
        for attempt in itertools.count():
            try:
                reply = self._stream(request) if self.config.stream else self._create(request)
            except openai.APIError as error:
                self._raise_unless_retryable(error, attempt)
                time.sleep(self.retry_delay(attempt, error))
                continue
            if reply.usage.total_tokens == 0:
                reply.usage = estimate_usage(request["messages"], reply.content)
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

    def _raise_unless_retryable(self, error: openai.APIError, attempt: int) -> None:
        text = f"{error.message} {getattr(error, 'body', '') or ''}".lower()
        if any(hint in text for hint in _CONTEXT_LENGTH_HINTS):
            raise ContextLengthExceeded(error.message) from error
        # An error event inside a stream has no status: the server failed mid-reply.
        mid_stream = not isinstance(error, openai.APIStatusError)
        if not (isinstance(error, _RETRYABLE) or mid_stream):
            raise BackendError(f"{type(error).__name__}: {error.message}") from error
        if attempt >= self.config.max_retries:
            tries = self.config.max_retries + 1
            raise BackendError(f"gave up after {tries} tries: {error.message}") from error

    def retry_delay(self, attempt: int, error: openai.APIError) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins when it says more."""
        delay = self.config.backoff_s * 2**attempt * random.uniform(1.0, 1.25)
        response = getattr(error, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after and retry_after.replace(".", "", 1).isdigit():
            delay = max(delay, float(retry_after))
        return min(delay, self.config.max_backoff_s)

    def _create(self, request: dict) -> Reply:
        response = self.client.chat.completions.create(**request)
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

    def _stream(self, request: dict) -> Reply:
        stream = self.client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[
            int, dict
        ] = {}  # tool-call deltas by index: id and name once, arguments in parts
        usage, finish_reason = Usage(), None
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
