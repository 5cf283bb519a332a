"""Trajectories: one JSON line per run, readable by SFT and RL tooling."""

from __future__ import annotations

import json

from agent.config import AgentConfig
from agent.trajectory import FORMAT, read_trajectories, trajectory_record, write_trajectory


def test_a_run_becomes_one_json_line_and_runs_append(run_script, tmp_path):
    run = run_script(
        [
            {"thought": "look", "tool": "list_files"},
            {"text": "no tool"},
            {"tool": "finish", "args": {"summary": "nothing to do"}},
        ]
    )
    config = AgentConfig(name="scripted-test", backend="scripted", script="-")
    record = trajectory_record(run.result, config, {"name": "relu_scale"})
    path = tmp_path / "runs.jsonl"
    write_trajectory(path, record)
    write_trajectory(path, record, append=True)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == record
    loaded = read_trajectories(path)[0]
    assert loaded["format"] == FORMAT and loaded["protocol"] == "tools"
    assert loaded["status"] == "finished" and loaded["reward"] == -1 and loaded["best"] is None
    assert [m["role"] for m in loaded["messages"]][:4] == ["system", "user", "assistant", "tool"]
    assert loaded["messages"][2]["tool_calls"][0]["function"]["name"] == "list_files"
    assert {t["function"]["name"] for t in loaded["tools"]} >= {"write_file", "profile"}
    assert loaded["usage"]["prompt_tokens"] > 0 and loaded["usage"]["estimated"] is True
    assert loaded["agent"]["name"] == "scripted-test" and loaded["problem"] == {
        "name": "relu_scale"
    }
