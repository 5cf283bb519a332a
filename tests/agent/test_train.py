"""Rejection fine-tuning (agent/train): which runs and turns it learns from, the text and loss
mask the model is trained on, and a real SFT run on a tiny random-weight model built here
(served_model.py) that lowers the loss on trajectories the real loop wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("trl")

from agent.backends.scripted import ScriptedBackend  # noqa: E402
from agent.config import TRAINING_RECORD, AgentConfig, load_agents  # noqa: E402
from agent.loop import Agent  # noqa: E402
from agent.reward import FASTER_THAN_COMPILE, FASTER_THAN_EAGER  # noqa: E402
from agent.train import chat_format, sft  # noqa: E402
from agent.train.selection import Selection, select, without_invalid_calls  # noqa: E402
from agent.trajectory import trajectory_record, write_trajectory  # noqa: E402
from tests.agent import served_model as serving  # noqa: E402
from tests.agent.conftest import FIXTURES, REPO, fixture_files  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return serving.build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen2")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A trajectory of the real loop over the real cpu harness: files written, a verify, an
    invalid call, finish (made once: the tests only read it)."""
    from gpu_workers.harness.session import Session

    good = fixture_files(FIXTURES / "candidates" / "cpu" / "good_relu_scale")
    actions = [{"thought": "see the workspace", "tool": "list_files"}]
    actions += [
        {"tool": "write_file", "args": {"path": path, "content": text}}
        for path, text in good.items()
    ]
    actions += [
        {"thought": "a call the tools refuse", "tool": "write_file", "args": {"path": "x.cu"}},
        {"tool": "verify"},
        {"tool": "finish", "args": {"summary": "verified"}},
    ]
    config = AgentConfig(name="scripted-test", backend="scripted", script="-")
    problem = (FIXTURES / "problems" / "relu_scale.py").read_text()
    root = tmp_path_factory.mktemp("recorded") / "session"
    with Session(problem, device="cpu", root=root) as session:
        result = Agent(config, ScriptedBackend(actions), session).run()
    return trajectory_record(result, config, {"name": "relu_scale"})


def _with_best(record: dict, reward: int, verified: bool = True) -> dict:
    best = {"index": 0, "verified": verified, "reward": reward, "sources": {}}
    return {**record, "best": best, "reward": reward}


def test_only_runs_whose_best_beat_torch_compile_are_kept(recorded):
    records = [
        _with_best(recorded, FASTER_THAN_COMPILE),
        _with_best(recorded, FASTER_THAN_EAGER),  # known-bad: faster than eager only
        _with_best(recorded, FASTER_THAN_COMPILE, verified=False),
        {**recorded, "best": None, "reward": -1},
    ]
    selection = select(records)
    assert selection.kept == [records[0]]
    assert selection.turned_away == {
        "under reward 3": 1,
        "whose best candidate did not verify": 1,
        "with no candidate": 1,
    }


def test_turns_with_calls_the_tools_refuse_are_dropped_with_their_results(recorded):
    messages, dropped = without_invalid_calls(recorded["messages"])
    assert dropped == 1
    refused = [m for m in recorded["messages"] if m.get("content") == "a call the tools refuse"]
    assert len(refused) == 1 and refused[0] not in messages
    call_id = refused[0]["tool_calls"][0]["id"]
    assert not [m for m in messages if m.get("tool_call_id") == call_id]
    # every other turn is kept, in order
    assert len(messages) == len(recorded["messages"]) - 2
    # known-bad: without dropping, the refused call stays in what is learned
    kept = select([_with_best(recorded, 3)], drop_invalid_calls=False).kept[0]
    assert refused[0] in kept["messages"]


def test_the_loss_falls_on_the_assistants_tokens_as_the_server_renders_them(recorded, tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages, tools = chat_format.served_messages(recorded, "transformers")
    example = chat_format.tokenized(tokenizer, messages, tools)
    ids, mask = example["input_ids"], example["assistant_masks"]
    assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)
    learned = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    shown = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    # the model writes its tool calls, arguments as the JSON object the template renders
    assert '<tool_call>\n{"name": "write_file", "arguments": {"path": "model_new.py"' in learned
    # it is shown, never taught, the system prompt, the tools and the tool results
    tool_result = next(m["content"] for m in recorded["messages"] if m["role"] == "tool")
    assert tool_result not in learned and tool_result in shown
    assert "# Tools" in shown and "# Tools" not in learned
    # transformers serve drops a tool-calling turn's text; vLLM keeps it
    assert "see the workspace" not in learned
    vllm = chat_format.tokenized(tokenizer, *chat_format.served_messages(recorded, "vllm"))
    kept = [t for t, m in zip(vllm["input_ids"], vllm["assistant_masks"], strict=True) if m]
    assert "see the workspace" in tokenizer.decode(kept)


def test_sft_lowers_the_loss_and_writes_a_checkpoint_with_its_provenance(
    recorded, tiny_model, tmp_path
):
    from transformers import AutoModelForCausalLM

    plan = sft.SftPlan(
        base=str(tiny_model),
        data=["recorded"],
        output=str(tmp_path / "checkpoint"),
        served_by="transformers",
        epochs=30,
        learning_rate=3e-3,
    )
    selection = Selection(kept=[recorded])
    summary = sft.train(plan, selection)
    assert summary["steps"] == 30
    # from about ln(vocabulary) to well under it: the run learned the conversation
    assert summary["last_loss"] < 0.75 * summary["first_loss"], summary
    checkpoint = tmp_path / "checkpoint"
    AutoModelForCausalLM.from_pretrained(checkpoint)  # a checkpoint any server loads
    card = (checkpoint / "README.md").read_text()
    assert f"base_model: {tiny_model}" in card and "1 trajectories" in card
    provenance = json.loads((checkpoint / TRAINING_RECORD).read_text())
    assert provenance["steps"] == 30 and provenance["data"]["kept"] == 1
    # served as an agent, the checkpoint's provenance is part of the agent's identity
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.rft]\nbackend = "openai"\nmodel = "rft"\n'
        'base_url = "http://127.0.0.1:8000/v1"\ncheckpoint = "checkpoint"\n'
    )
    config = load_agents(agents)["rft"]
    assert config.training == {
        "method": "sft (rejection fine-tuning)",
        "base": str(tiny_model),
        "data": ["recorded"],
        "trajectories": 1,
        "rollouts": None,
        "steps": 30,
    }
    assert config.identity()["training"]["steps"] == 30


def test_call_arguments_that_are_no_json_object_render_as_the_text_they_are():
    call = {"id": "c", "type": "function", "function": {"name": "verify", "arguments": '{"a": '}}
    good = {"id": "d", "type": "function", "function": {"name": "verify", "arguments": '{"a": 1}'}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call, good]}
    record = {
        "protocol": "tools",
        "tools": [],
        "messages": [{"role": "user", "content": "go"}, turn],
    }
    messages, _ = chat_format.served_messages(record, "vllm")
    rendered = [c["function"]["arguments"] for c in messages[1]["tool_calls"]]
    assert rendered == ['{"a": ', {"a": 1}]  # JSON objects become the mapping templates iterate


def test_the_command_says_in_one_line_what_it_cannot_use(tmp_path, recorded, tiny_model):
    data = tmp_path / "runs.jsonl"
    write_trajectory(data, _with_best(recorded, FASTER_THAN_EAGER))
    done = subprocess.run(
        [sys.executable, "-m", "agent.train", "sft", "--base", str(tiny_model)]
        + ["--data", str(data), "--output", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "agent.train sft: nothing to train on: 0 kept; turned away: 1 under reward 3"
    ]
    missing = subprocess.run(
        [sys.executable, "-m", "agent.train", "sft", "--base", str(tiny_model)]
        + ["--data", str(tmp_path / "none.jsonl"), "--output", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 2
    assert "none.jsonl: no such trajectory file or folder" in missing.stderr
    broken = tmp_path / "problems.jsonl"
    broken.write_text('{"name": "relu_scale", "source": \n')
    grpo = subprocess.run(
        [sys.executable, "-m", "agent.train", "grpo", "--base", str(tiny_model)]
        + ["--problems", str(broken), "--output", str(tmp_path / "out"), "--device", "cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert grpo.returncode == 2, grpo.stdout + grpo.stderr
    assert grpo.stderr.startswith("agent.train grpo: Expecting value")
