"""LLM backends: what the loop asks of a model, and the replies it gets back.

A backend turns the message history (OpenAI chat format, the canonical form this package keeps)
into one assistant Reply. Three exist: `openai` (any OpenAI-compatible endpoint with native tool
calls: vLLM, frontier APIs), `text` (the same endpoint, actions parsed from plain text, for models
without tool calling) and `scripted` (replays recorded actions; no model, for tests and demos).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class BackendError(Exception):
    """The model could not answer, and retrying did not help (or cannot)."""


class ContextLengthExceeded(BackendError):
    """The conversation no longer fits the model's context window."""


class ReplyBrokeOff(BackendError):
    """The server took the request and failed while writing the reply (an error event or a line
    that is not JSON mid-stream): the request is one it accepts, and what broke is this reply,
    often the model's own output (`transformers serve` fails so on a tool call its parser
    cannot read)."""


class DeadlineReached(BackendError):
    """The run's time budget ran out while waiting for the model: the loop ends the run as
    limits_exceeded (seconds), not as a broken server."""


# Receives each piece of a reply while a server streams it: (text, reasoning), either may be "".
# The loop batches the pieces into thought events for the live trace.
TextSink = Callable[[str, str], None]


def time_left(deadline: float | None, endpoint: str = "the model") -> float | None:
    """Seconds until the deadline (a time.monotonic() value), None for no deadline; raises
    DeadlineReached when none is left, so that no request starts that cannot finish in time."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0.05:
        raise DeadlineReached(f"the time budget ran out waiting for {endpoint}")
    return left


@dataclass
class ToolCall:
    id: str
    name: str
    raw_arguments: str  # exactly what the model produced
    arguments: dict | None = None  # None when raw_arguments is not a JSON object
    error: str | None = None  # why arguments is None


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False  # the server reported none, so we counted about 4 characters a token

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Reply:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    reasoning: str = ""  # a reasoning model's separate thinking, where the server returns it
    finish_reason: str | None = None
    format_error: str | None = None  # set when actions could not be parsed from text
    thought: str | None = None  # content without action markup; None means content itself

    def message(self) -> dict:
        """The assistant message in canonical (OpenAI chat) form, for the history."""
        message: dict = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.raw_arguments},
                }
                for call in self.tool_calls
            ]
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        return message


class Backend(Protocol):
    def complete(
        self,
        messages: list[dict],
        tools: list[dict],
        deadline: float | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        """One assistant reply. deadline (a time.monotonic() value) bounds the whole call,
        retries included; on_text, where given, sees the reply's pieces while it streams."""
        ...


def parse_arguments(raw: str) -> tuple[dict | None, str | None]:
    """A tool call's JSON arguments as a dict, or None and the reason it is not one."""
    if not raw.strip():
        return {}, None  # servers send "" for a call without arguments
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return None, f"arguments are not valid JSON ({error})"
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None


def estimate_usage(messages: list[dict], reply_text: str) -> Usage:
    """About 4 characters a token: a budget still counts when a server reports no usage."""
    prompt_chars = sum(len(json.dumps(message)) for message in messages)
    return Usage(prompt_chars // 4, len(reply_text) // 4, estimated=True)
