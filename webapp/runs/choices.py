"""What a run may be started with: agent configurations, GPU types with a worker queue, and
protocols. Agent names come from the agents file (agent.config reads it; it imports no torch)."""

from __future__ import annotations

from django.conf import settings

from agent.config import agents_file, load_agents


def agent_names() -> list[str]:
    return sorted(load_agents(agents_file()))


def gpu_types() -> list[str]:
    return list(settings.GPU_TYPES)


def protocols() -> list[str]:
    return list(settings.PROTOCOLS)
