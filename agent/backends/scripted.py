"""The scripted backend: replays a recorded list of actions. No model; for tests and demos.

A script is a JSON list; each entry is one assistant reply:

    {"thought": "why", "tool": "write_file", "args": {"path": "...", "content": "..."}}
    {"calls": [{"tool": "compile"}, {"tool": "verify"}]}       several calls in one reply
    {"tool": "compile", "raw_arguments": "{not json"}          arguments exactly as a model wrote
    {"text": "a reply with no tool call, or text actions"}
    optional in any entry: "usage": {"prompt_tokens": 10, "completion_tokens": 5}, "delay_s": 0.5

Without "usage" the tokens are estimated from characters, so budgets behave as with a model.
When the script runs out, the backend raises BackendError: the run ends, keeping its best.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from agent.backends import (
    BackendError,
    Reply,
    TextSink,
    ToolCall,
    Usage,
    estimate_usage,
    parse_arguments,
    time_left,
)


class ScriptedBackend:
    def __init__(self, actions: list[dict]):
        self.actions = list(actions)
        self.position = 0

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedBackend:
        return cls(json.loads(Path(path).read_text()))

    def complete(
        self,
        messages: list[dict],
        tools: list[dict],
        deadline: float | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        if self.position >= len(self.actions):
            raise BackendError(f"scripted backend: all {len(self.actions)} actions replayed")
        action = self.actions[self.position]
        self.position += 1
        self._think(action.get("delay_s", 0), deadline)  # stands in for a model's latency
        specs = action.get("calls") or ([action] if "tool" in action else [])
        calls = [self._call(spec, f"scripted_{self.position}_{i}") for i, spec in enumerate(specs)]
        content = action.get("text", action.get("thought", ""))
        if "usage" in action:
            usage = Usage(**action["usage"])
        else:
            usage = estimate_usage(messages, content + "".join(c.raw_arguments for c in calls))
        return Reply(content=content, tool_calls=calls, usage=usage)

    @staticmethod
    def _think(delay_s: float, deadline: float | None) -> None:
        """Waits as a slow server would, and runs out of time as a request bounded by the
        deadline does."""
        left = time_left(deadline, "the scripted model")
        if left is not None and delay_s >= left:
            time.sleep(left)
            time_left(deadline, "the scripted model")  # raises DeadlineReached
        time.sleep(delay_s)

    def _call(self, spec: dict, call_id: str) -> ToolCall:
        raw = spec.get("raw_arguments")
        if raw is None:
            raw = json.dumps(spec.get("args", {}))
        arguments, error = parse_arguments(raw)
        return ToolCall(call_id, spec["tool"], raw, arguments, error)


def actions_from_messages(messages: list[dict]) -> list[dict]:
    """A script that replays a recorded run's assistant turns (for demos and regression tests)."""
    actions = []
    for message in messages:
        if message["role"] != "assistant":
            continue
        calls = [
            {"tool": c["function"]["name"], "raw_arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls", [])
        ]
        action: dict = {"text": message.get("content") or ""}
        if calls:
            action["calls"] = calls
        actions.append(action)
    return actions
