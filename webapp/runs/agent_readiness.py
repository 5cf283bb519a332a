"""Whether an agent may start runs, from its latest check (AgentHealth, which the workers write:
gpu_workers/agent_checks.py), and every agent's health for the staff page.

An agent whose check failed (its server unreachable, its model not served, its protocol refused)
would end every run at once, so its runs are refused with the check's findings. A refused key is
the exception for a person who saved their own key for the agent: theirs may work.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import MODEL_BACKENDS, agents_file, load_agents
from webapp.errors import Conflict
from webapp.runs.models import AgentHealth, HealthLevel, ModelKey


class AgentNotReady(Conflict):
    """The agent's last check failed (HTTP 409); the message has its findings."""


def refuse_if_failing(agent: str, owner) -> None:
    health = AgentHealth.objects.filter(agent=agent, level=HealthLevel.FAIL).first()
    if health is None:
        return
    if health.report.get("key_refused") and ModelKey.objects.filter(owner=owner, agent=agent):
        return
    checked = health.checked.strftime("%Y-%m-%d %H:%M UTC")
    raise AgentNotReady(
        f"agent {agent!r} is not ready: its check at {checked} found {health.summary}. "
        "An operator must fix its model server; staff can check it again on the Agents page."
    )


@dataclass
class AgentRow:
    name: str
    backend: str
    model: str
    endpoint: str
    health: AgentHealth | None  # None: a model agent not checked yet, or no model at all


def agent_rows() -> list[AgentRow]:
    """Every configured agent with its latest check, model agents first."""
    healths = {h.agent: h for h in AgentHealth.objects.all()}
    rows = [
        AgentRow(name, config.backend, config.model, config.base_url, healths.get(name))
        for name, config in sorted(load_agents(agents_file()).items())
    ]
    return sorted(rows, key=lambda row: row.backend not in MODEL_BACKENDS)
