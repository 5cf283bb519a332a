"""Trajectories as JSON Lines: one line per run, so appending runs builds a data set.

Each line is an object whose `messages` and `tools` are in OpenAI chat format, the columns SFT
trainers read as they are (e.g. TRL's SFTTrainer, `datasets.load_dataset("json", ...)`), and whose
`reward`, `candidates` and `usage` are what RL tooling needs:

    format      "kernelarena.trajectory/1"
    agent       the config's identity (name, version, backend, model, prompt_version, budget, ...)
    protocol    "tools" (native tool calls) or "text" (actions parsed from text; render with
                agent.backends.text_actions.to_text_messages to get the exact prompt the model saw)
    status, detail, limit, started_at, seconds, turns
    messages    system, user, assistant (content, tool_calls, reasoning_content), tool (results)
    tools       the tool schemas offered
    candidates  every verified or profiled candidate: turn, verdicts, milestone reward (no sources)
    best        the result: index, verdicts, reward and its sources (model_new.py, kernels/*)
    reward      the milestone reward of the best candidate, -1 when there is none
    usage       prompt_tokens, completion_tokens, cost_usd, estimated
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from agent.config import AgentConfig
from agent.loop import RunResult
from agent.reward import FAILURE
from agent.tools import TOOLS

FORMAT = "kernelarena.trajectory/1"


def trajectory_record(result: RunResult, config: AgentConfig, problem: dict | None = None) -> dict:
    """One run as a JSON-ready dict; problem is whatever identifies it (name, sha256, ...)."""
    best = result.best
    return {
        "format": FORMAT,
        "agent": config.identity(),
        "protocol": "text" if config.backend == "text" else "tools",
        "problem": problem or {},
        "status": result.status,
        "detail": result.detail,
        "limit": result.limit,
        "started_at": result.started_at,
        "seconds": round(result.seconds, 3),
        "turns": result.turns,
        "messages": result.messages,
        "tools": TOOLS,
        "candidates": [c.summary() for c in result.candidates],
        "best": {**best.summary(), "sources": best.sources} if best else None,
        "reward": best.reward if best else FAILURE,
        "usage": dataclasses.asdict(result.usage),
    }


def write_trajectory(path: Path | str, record: dict, append: bool = False) -> None:
    with open(path, "a" if append else "w") as file:
        file.write(json.dumps(record) + "\n")


def read_trajectories(path: Path | str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
