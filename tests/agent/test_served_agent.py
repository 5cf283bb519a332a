"""End to end with a real server: `python -m agent optimize` against `transformers serve` and a
tiny random-weight model (served_model.py), in both action modes. The model writes garbage, so no
run finds a kernel; what is tested is that every layer between the model and the trajectory is
real and holds: the run ends with a clear status and keeps the raw replies and the usage the
server reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("gpu_workers.harness.session")

from agent.trajectory import read_trajectories  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "tests" / "fixtures" / "problems" / "relu_scale.py"
MAX_TOKENS = 16  # per reply: the model never stops early (served_model.py suppresses its end)


@pytest.mark.parametrize(
    ("backend", "stream", "protocol"),
    [("openai", True, "tools"), ("text", False, "text")],
    ids=["native-tool-calls-streamed", "text-actions-not-streamed"],
)
def test_optimize_against_the_served_model(served_model, tmp_path, backend, stream, protocol):
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f"""[agents.tiny]
backend = "{backend}"
model = "{served_model.model}"
base_url = "{served_model.base_url}"
stream = {json.dumps(stream)}
request_timeout_s = 60
max_retries = 0
[agents.tiny.sampling]
max_tokens = {MAX_TOKENS}
[agents.tiny.budget]
max_turns = 2
"""
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "agent", "optimize", str(PROBLEM), "--agent", "tiny"]
        + ["--device", "cpu", "--agents-file", str(agents), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # ran, found no kernel
    lines = done.stdout.splitlines()
    assert lines[0].startswith("turn   1/2 | format error | no verified candidate yet |")
    assert lines[2].startswith("LIMITS_EXCEEDED (used all 2 turns) |")

    (run,) = read_trajectories(out / "trajectory.jsonl")
    assert (run["status"], run["limit"], run["turns"]) == ("limits_exceeded", "turns", 2)
    assert run["protocol"] == protocol and run["agent"]["model"] == served_model.model
    replies = [m for m in run["messages"] if m["role"] == "assistant"]
    assert len(replies) == 2 and all(reply["content"].strip() for reply in replies)
    feedback = [m["content"] for m in run["messages"][3::2]]  # each reply's format error
    assert len(feedback) == 2 and all("cut off at the token limit" in f for f in feedback)
    # The server's own counts, not the 4-characters-a-token estimate.
    usage = run["usage"]
    assert usage["completion_tokens"] == 2 * MAX_TOKENS and not usage["estimated"]
    assert usage["prompt_tokens"] > 1000  # the system prompt, the problem and SKILL.md, twice
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "limits_exceeded" and verdict["best"] is None
