"""Which trajectories rejection fine-tuning learns from, and which of their turns.

RFT keeps a run only where its best candidate reached the top milestone (agent/reward.py):
verified, and at least the protocol's margin faster than eager PyTorch and torch.compile. A turn
whose tool calls the tools would refuse (an unknown tool, missing or mistyped arguments,
arguments that are not a JSON object) can be dropped with the tool results that answered it, so
the model does not learn the format errors it made on the way.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from agent.reward import FASTER_THAN_COMPILE
from agent.tools import ToolCallError, check_arguments


@dataclass
class Selection:
    kept: list[dict] = field(default_factory=list)
    turned_away: Counter = field(default_factory=Counter)  # reason -> count
    dropped_turns: int = 0

    def describe(self) -> str:
        reasons = ", ".join(f"{count} {why}" for why, count in sorted(self.turned_away.items()))
        return f"{len(self.kept)} kept" + (f"; turned away: {reasons}" if reasons else "")


def select(records: list[dict], min_reward: int = FASTER_THAN_COMPILE, drop_invalid_calls=False):
    """The records RFT learns from, each with its invalid turns dropped when asked."""
    selection = Selection()
    for record in records:
        why = _turned_away(record, min_reward)
        if why:
            selection.turned_away[why] += 1
            continue
        if drop_invalid_calls:
            messages, dropped = without_invalid_calls(record["messages"])
            record = {**record, "messages": messages}
            selection.dropped_turns += dropped
        selection.kept.append(record)
    return selection


def _turned_away(record: dict, min_reward: int) -> str | None:
    best = record.get("best")
    if not best:
        return "with no candidate"
    if not best.get("verified"):
        return "whose best candidate did not verify"
    if record.get("reward", -1) < min_reward:
        return f"under reward {min_reward}"
    return None


def without_invalid_calls(messages: list[dict]) -> tuple[list[dict], int]:
    """The conversation without assistant turns holding a call the tools refuse, nor the tool
    results that answered those calls: (messages, turns dropped)."""
    kept, refused_ids, dropped = [], set(), 0
    for message in messages:
        calls = message.get("tool_calls") or []
        if message["role"] == "assistant" and any(not _valid(call) for call in calls):
            refused_ids |= {call.get("id") for call in calls}
            dropped += 1
        elif message["role"] == "tool" and message.get("tool_call_id") in refused_ids:
            continue
        else:
            kept.append(message)
    return kept, dropped


def _valid(call: dict) -> bool:
    function = call.get("function") or {}
    try:
        arguments = function.get("arguments") or "{}"
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        if not isinstance(arguments, dict):
            return False
        check_arguments(function.get("name", ""), arguments)
    except (ToolCallError, json.JSONDecodeError):
        return False
    return True
