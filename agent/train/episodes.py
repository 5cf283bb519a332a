"""One rollout: a whole agent episode of the policy on one problem, through the same loop, tools
and sandboxed harness as any run, and what it earned (the milestone reward of its best
candidate, agent/reward.py). An episode that met a failure of the harness or the machine (a
verdict blamed on the infrastructure, a crash) says so: it is the machine's, not the model's."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from agent.config import AgentConfig, Budget
from agent.loop import Agent
from agent.trajectory import trajectory_record

_MACHINE = "infrastructure"
HARNESS_ATTEMPTS = 2


@dataclass
class Episode:
    record: dict  # the trajectory (agent/trajectory.py)
    reward: int
    harness_failed: bool

    def to_json(self) -> dict:
        """What a worker sends back for a rollout it ran (gpu_workers/rollout.py)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Episode:
        return cls(**data)


def run_episode(problem: dict, backend, device: str, max_turns: int) -> Episode:
    """problem: {"name", "source"} (a suite export's record, docs/synthesis.md)."""
    from gpu_workers.harness.session import Session

    config = AgentConfig(
        name="policy", backend="policy", model="policy", budget=Budget(max_turns=max_turns)
    )
    with Session(problem["source"], device=device, baselines_ahead=True) as session:
        result = Agent(config, backend, session).run()
    record = trajectory_record(result, config, {"name": problem.get("name", "")})
    return Episode(record, record["reward"], harness_failed(record))


def run_episodes(
    problems: list[dict], backend, device: str, max_turns: int, concurrency: int
) -> list[Episode]:
    """One episode per problem (a batch's rollouts), `concurrency` at a time, in order. They
    overlap the model's sampling with the harness's work; the harness's own queue (its GPU
    lock) bounds what runs on the GPU at once, so more rollouts than GPUs is fine. An episode
    the machine failed is run again once; failed again, it says so (the trainer drops it)."""
    episode = functools.partial(
        run_episode_retried, backend=backend, device=device, max_turns=max_turns
    )
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(episode, problems))


def run_episode_retried(problem: dict, backend, device: str, max_turns: int) -> Episode:
    """run_episode, once more where the machine failed it."""
    for _ in range(HARNESS_ATTEMPTS):
        done = run_episode(problem, backend, device, max_turns)
        if not done.harness_failed:
            break
    return done


def harness_failed(record: dict) -> bool:
    if record["status"] == "crashed":
        return True
    verdicts = [c.get(step) or {} for c in record["candidates"] for step in ("verify", "profile")]
    return any(v.get("failed_by") == _MACHINE for v in verdicts)


def reward_of(episode: Episode) -> float | None:
    """What GRPO is told: None (the rollout dropped) where the machine failed."""
    return None if episode.harness_failed else float(episode.reward)
