"""Each model agent's preflight check (agent.preflight), run from a worker: the worker is where
runs reach the model servers from, so its answer is the one that counts. The result is stored as
the agent's AgentHealth, which staff see and which refuses runs of an agent that fails.

A worker checks every agent with an endpoint as it starts and then every
settings.AGENT_CHECK_EVERY_S seconds; staff can ask for a check at any time. Each check is two
tiny requests capped at a few tokens, so a paid API costs a fraction of a cent a check.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from agent.config import (
    MODEL_BACKENDS,
    ConfigError,
    MissingApiKey,
    agents_file,
    load_agent,
    load_agents,
)
from agent.preflight import CheckReport, check_agent
from webapp.runs.models import AgentHealth, HealthLevel
from webapp.storable import storable

log = logging.getLogger(__name__)
TIMEOUT_S = 20.0
MAX_TOKENS = 64


def check_agents(names: list[str] | None = None, worker: str = "") -> dict[str, str]:
    """Checks the named agents (default: every agent with an endpoint); their levels by name."""
    levels = {}
    for name, config in load_agents(agents_file()).items():
        if config.backend not in MODEL_BACKENDS or (names and name not in names):
            continue
        level, summary, report = _check(name)
        AgentHealth.objects.update_or_create(
            agent=name,
            defaults={  # the report quotes the model server's replies
                "level": level,
                "summary": storable(summary),
                "report": storable(report),
                "checked": timezone.now(),
                "worker": worker,
            },
        )
        levels[name] = level
    return levels


def _check(name: str) -> tuple[str, str, dict]:
    try:
        report = check_agent(load_agent(name), timeout_s=TIMEOUT_S, max_tokens=MAX_TOKENS)
    except MissingApiKey as error:  # people with their own key may still run it
        summary = f"not checked: no operator key (${error.variable} is not set on the workers)"
        return HealthLevel.UNUSABLE, summary, dict(AgentHealth.NO_OPERATOR_KEY)
    except ConfigError as error:
        return HealthLevel.UNUSABLE, f"not checked: {error}", {}
    except Exception as error:  # a check must never take the worker down
        log.warning("checking agent %s failed", name, exc_info=True)
        return HealthLevel.UNUSABLE, f"the check itself failed: {error}", {}
    return _level(report), _summary(report), report.to_dict()


def _level(report: CheckReport) -> str:
    if report.failed:
        return HealthLevel.FAIL
    return HealthLevel.WARN if report.count("warn") else HealthLevel.OK


def _summary(report: CheckReport) -> str:
    """The findings that decided the level: the failures, else the warnings, else all is well."""
    for level in ("fail", "warn"):
        decisive = [f"{f.check}: {f.message}" for f in report.findings if f.level == level]
        if decisive:
            return "; ".join(decisive)
    return f"{report.endpoint} serves {report.model!r} and answers in the agent's protocol"
