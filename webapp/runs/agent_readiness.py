"""Whether an agent can run for a person now, and every agent's health for the staff page.

Two things stop an agent's runs before they start, each with what fixes it:
- its latest check failed (AgentHealth, which the workers write: gpu_workers/agent_checks.py):
  its server unreachable, its model not served, its protocol refused; every run would end at
  once. A refused key is the exception for a person who saved their own key for the agent;
- it takes an API key, the person saved none (Model keys page) and the operator has none: the
  latest check says the workers lack it, or, before any check, this process's environment (the
  stack's services share one) lacks it.
The run form and the agents page mark such agents with the reason; start_run refuses them (409).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import MODEL_BACKENDS, AgentConfig, agents_file, describe_training, load_agents
from webapp.errors import Conflict
from webapp.runs.model_keys import missing_key_message, model_keys_url
from webapp.runs.models import AgentHealth, HealthLevel, ModelKey


class AgentNotReady(Conflict):
    """The agent cannot run for this person now (HTTP 409); the message says why and the fix."""


@dataclass(frozen=True)
class Unavailable:
    """Why an agent cannot run for a person now."""

    short: str  # for a list: "needs your API key", "its check failed"
    reason: str  # the whole refusal, naming the fix
    fix_url: str = ""  # the page where the person can fix it themselves, if any


def refuse_if_unavailable(agent: str, owner) -> None:
    unavailable = unavailable_agents(owner).get(agent)
    if unavailable is not None:
        raise AgentNotReady(unavailable.reason)


def unavailable_agents(owner) -> dict[str, Unavailable]:
    """Each configured agent that cannot run for `owner` now, by name."""
    healths = {h.agent: h for h in AgentHealth.objects.all()}
    own_keys = set()
    if owner.is_authenticated:
        own_keys = set(ModelKey.objects.filter(owner=owner).values_list("agent", flat=True))
    unavailable = {}
    for name, config in load_agents(agents_file()).items():
        health, has_own_key = healths.get(name), name in own_keys
        why = _failed_check(name, health, has_own_key) or _missing_key(config, health, has_own_key)
        if why is not None:
            unavailable[name] = why
    return unavailable


def _failed_check(agent: str, health: AgentHealth | None, has_own_key: bool) -> Unavailable | None:
    if health is None or health.level != HealthLevel.FAIL:
        return None
    key_refused = bool(health.report.get("key_refused"))
    if key_refused and has_own_key:
        return None
    checked = health.checked.strftime("%Y-%m-%d %H:%M UTC")
    fix = "An operator must fix its model server; staff can check it again on the Agents page."
    if key_refused:
        fix = (
            f"Save your own key on the Model keys page ({model_keys_url()}), or ask the operator "
            "to replace theirs."
        )
    reason = f"agent {agent!r} is not ready: its check at {checked} found {health.summary}. {fix}"
    return Unavailable("its check failed", reason, model_keys_url() if key_refused else "")


def _missing_key(
    config: AgentConfig, health: AgentHealth | None, has_own_key: bool
) -> Unavailable | None:
    if not config.api_key_env or has_own_key:
        return None
    operator_has_key = (
        config.operator_key_set() if health is None else not health.operator_key_missing
    )
    if operator_has_key:
        return None
    reason = missing_key_message(config.name, config.api_key_env)
    return Unavailable("needs your API key", reason, model_keys_url())


@dataclass
class AgentRow:
    name: str
    backend: str
    model: str
    endpoint: str
    health: AgentHealth | None  # None: a model agent not checked yet, or no model at all
    unavailable: Unavailable | None  # why the person viewing cannot run it now; None: they can
    trained: str  # a trained checkpoint's provenance in one line (agent/config.py); "" for none


def agent_rows(viewer) -> list[AgentRow]:
    """Every configured agent with its latest check and whether `viewer` can run it, model
    agents first."""
    healths = {h.agent: h for h in AgentHealth.objects.all()}
    unavailable = unavailable_agents(viewer)
    rows = [
        AgentRow(
            name,
            config.backend,
            config.model,
            config.base_url,
            healths.get(name),
            unavailable.get(name),
            describe_training(config.training),
        )
        for name, config in sorted(load_agents(agents_file()).items())
    ]
    return sorted(rows, key=lambda row: row.backend not in MODEL_BACKENDS)
