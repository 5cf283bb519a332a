"""One rollout: a whole agent episode of the policy on one problem, through the same loop, tools
and sandboxed harness as any run, and what it earned (the milestone reward of its best
candidate, agent/reward.py). An episode that met a failure of the harness or the machine (a
verdict blamed on the infrastructure, a crash) says so: it is the machine's, not the model's."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import AgentConfig, Budget
from agent.loop import Agent
from agent.trajectory import trajectory_record

_MACHINE = "infrastructure"


@dataclass
class Episode:
    record: dict  # the trajectory (agent/trajectory.py)
    reward: int
    harness_failed: bool


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


def harness_failed(record: dict) -> bool:
    if record["status"] == "crashed":
        return True
    verdicts = [c.get(step) or {} for c in record["candidates"] for step in ("verify", "profile")]
    return any(v.get("failed_by") == _MACHINE for v in verdicts)


def reward_of(episode: Episode) -> float | None:
    """What GRPO is told: None (the rollout dropped) where the machine failed."""
    return None if episode.harness_failed else float(episode.reward)
