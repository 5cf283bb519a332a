"""A rollout of a policy trained elsewhere (`agent.train grpo --rollouts-on GPU_TYPE`), run on this
worker: one whole episode through the agent loop and this machine's sandboxed harness, each reply
asked of the trainer's endpoint (agent/train/policy_server.py) as a run asks a model server. What
goes back is what the trainer's own threads would make (agent/train/episodes.py): the
trajectory, its milestone reward and whether the machine failed it, after one more try here."""

from __future__ import annotations

from agent.backend_choice import make_backend
from agent.config import AgentConfig, Budget
from agent.train import episodes
from agent.train.policy_server import MODEL
from gpu_workers.harness.vocabulary import device_for

# A reply of the policy can take minutes where the trainer samples many episodes at once.
REQUEST_TIMEOUT_S = 1800.0


def rollout(problem: dict, policy_url: str, max_turns: int, gpu_type: str) -> dict:
    """problem: {"name", "source"}, a suite export's record; the Episode as JSON."""
    config = AgentConfig(
        name="policy",
        backend="openai",
        model=MODEL,
        base_url=policy_url,
        stream=False,
        request_timeout_s=REQUEST_TIMEOUT_S,
        budget=Budget(max_turns=max_turns),
    )
    backend = make_backend(config)
    episode = episodes.run_episode_retried(problem, backend, device_for(gpu_type), max_turns)
    return episode.to_json()
