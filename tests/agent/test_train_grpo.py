"""GRPO (agent/train/grpo.py): rollouts are whole agent episodes through the real loop and the
real cpu harness, rewarded by the harness; two real GRPO steps of a tiny random-weight model
(served_model.py) over them."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest

pytest.importorskip("trl")
pytest.importorskip("gpu_workers.harness.session")

from agent.backends import Reply, ToolCall, Usage  # noqa: E402
from agent.backends.scripted import ScriptedBackend  # noqa: E402
from agent.reward import FAILURE  # noqa: E402
from agent.train import episodes, grpo  # noqa: E402
from agent.train.policy_backend import PolicyBackend  # noqa: E402
from agent.trajectory import read_trajectories  # noqa: E402
from tests.agent import served_model as serving  # noqa: E402
from tests.agent.conftest import FIXTURES, fixture_files  # noqa: E402

RELU_SCALE = {"name": "relu_scale", "source": (FIXTURES / "problems" / "relu_scale.py").read_text()}


def _scripted_episode(files: dict[str, str]) -> episodes.Episode:
    actions = [{"tool": "write_file", "args": {"path": p, "content": t}} for p, t in files.items()]
    actions += [{"tool": "verify"}, {"tool": "finish", "args": {"summary": "done"}}]
    return episodes.run_episode(RELU_SCALE, ScriptedBackend(actions), "cpu", max_turns=10)


def test_the_harness_rewards_a_known_good_episode_above_a_known_bad_one(good_relu_scale):
    good = _scripted_episode(good_relu_scale)
    # known-bad: the output never written (NaN or stale memory), which verify fails
    bad = _scripted_episode(
        fixture_files(FIXTURES / "candidates" / "cpu" / "bad_uninitialised_output")
    )
    assert not good.harness_failed and not bad.harness_failed
    assert good.reward >= 1 and bad.reward == FAILURE
    assert episodes.reward_of(good) > episodes.reward_of(bad)


def test_an_episode_the_machine_failed_is_withheld_not_rewarded():
    record = {"status": "finished", "candidates": [{"verify": {"failed_by": "infrastructure"}}]}
    failed = episodes.Episode(record, FAILURE, episodes.harness_failed(record))
    assert failed.harness_failed and episodes.reward_of(failed) is None
    # known-bad beside it: the kernel's own failure is the model's, rewarded -1
    record = {"status": "finished", "candidates": [{"verify": {"failed_by": "candidate"}}]}
    own = episodes.Episode(record, FAILURE, episodes.harness_failed(record))
    assert episodes.reward_of(own) == FAILURE


def test_two_grpo_steps_over_episodes_the_harness_rewarded(tmp_path):
    model = serving.build_tiny_model(tmp_path / "tiny")
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(RELU_SCALE) + "\n")
    plan = grpo.GrpoPlan(
        base=str(model),
        problems=str(problems),
        output=str(tmp_path / "policy"),
        device="cpu",
        served_by="transformers",
        max_turns=1,
        max_new_tokens=24,
        num_generations=2,
        steps=2,
        learning_rate=1e-4,
    )
    summary = grpo.train(plan)
    assert summary["steps"] == 2 and summary["rollouts"] == 4
    # a random model writes no tool call: each episode ended with no candidate, reward -1
    assert summary["rewards"] == [FAILURE] * 4 and summary["harness_failures"] == 0
    assert summary["judged"] == 0  # no candidate reached the harness
    assert sum(summary["ended"].values()) == 4 and "crashed" not in summary["ended"]
    # every rollout kept as a trajectory, in order, to read what the policy did
    kept = read_trajectories(tmp_path / "policy" / grpo.ROLLOUTS)
    assert len(kept) == 4 and Counter(r["status"] for r in kept) == summary["ended"]
    assert all(r["problem"]["name"] == "relu_scale" and r["messages"] for r in kept)
    assert (tmp_path / "policy" / "config.json").is_file()


class MeetingModel:
    """A policy that answers (finish) only once `parties` episodes wait on it at the same time:
    episodes run one after another never meet, and the barrier breaks after `patience_s`."""

    def __init__(self, parties: int, patience_s: float):
        self.barrier = threading.Barrier(parties, timeout=patience_s)

    def complete(self, messages, tools, deadline=None, on_text=None) -> Reply:
        self.barrier.wait()
        finish = ToolCall("meet_0", "finish", '{"summary": "met"}', {"summary": "met"}, None)
        return Reply(content="", tool_calls=[finish], usage=Usage(1, 1))


@pytest.mark.parametrize(
    ("concurrency", "patience_s", "finished"),
    [(2, 600, True), (1, 5, False)],  # known-bad: one at a time, nobody meets
    ids=["a-batch-at-once", "one-at-a-time"],
)
def test_a_batchs_rollouts_run_at_once(concurrency, patience_s, finished):
    batch = episodes.run_episodes(
        [RELU_SCALE, {**RELU_SCALE, "name": "again"}],
        MeetingModel(2, patience_s),
        "cpu",
        max_turns=2,
        concurrency=concurrency,
    )
    assert [e.record["problem"]["name"] for e in batch] == ["relu_scale", "again"]  # in order
    statuses = {e.record["status"] for e in batch}
    assert statuses == ({"finished"} if finished else {"crashed"}), statuses


class WritingModel:
    """A policy model that writes the given texts, one a reply (a scripted model: the parsing and
    rendering around it are what is tested)."""

    device = "cpu"

    def __init__(self, tokenizer, texts: list[str]):
        self.tokenizer, self.texts = tokenizer, list(texts)

    def generate(self, input_ids, **_):
        import torch

        text = self.texts.pop(0) + "<|im_end|>"
        written = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        return torch.cat([input_ids, written], dim=1)


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(serving.build_tiny_model(tmp_path_factory.mktemp("t")))


def test_a_call_that_is_not_json_is_text_and_the_episode_trains_on_it(tiny_tokenizer):
    broken = '<tool_call>{"name": "verify", "arguments": {</tool_call>'
    finish = '<tool_call>{"name": "finish", "arguments": {"summary": "done"}}</tool_call>'
    model = WritingModel(tiny_tokenizer, [broken, finish])
    backend = PolicyBackend(model, tiny_tokenizer, "transformers", max_new_tokens=64)
    episode = episodes.run_episode(RELU_SCALE, backend, "cpu", max_turns=3)
    assistant = [m for m in episode.record["messages"] if m["role"] == "assistant"]
    # as a Hermes parser hands it back: no call, the model's text whole as content
    assert assistant[0]["content"] == broken and not assistant[0].get("tool_calls")
    assert assistant[1]["tool_calls"][0]["function"]["name"] == "finish"
    assert not episode.harness_failed
    seq = grpo.sequences(episode, tiny_tokenizer, "transformers")
    learned = [t for t, m in zip(seq["completion_ids"], seq["env_mask"], strict=True) if m]
    assert broken in tiny_tokenizer.decode(learned)  # what the model wrote is what it learns


def test_a_rank_is_pinned_to_its_gpu_by_the_hosts_numbering():
    """LOCAL_RANK counts the devices a rank sees; the harness pins by the host's numbering, and
    refuses a judge on another GPU than its runners (tests/gpu_workers/harness/test_judge_pin.py).
    """
    assert grpo.rank_gpu({"LOCAL_RANK": "1"}) == "1"
    assert grpo.rank_gpu({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "2,3"}) == "3"
