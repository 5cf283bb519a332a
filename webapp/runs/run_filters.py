"""The filters of a list of runs, checked once for the My runs page and GET /api/runs: a value
that names nothing (an unknown status, agent or GPU type) is refused with the values that exist
(BadRunOption, 422), never ignored.

The values a filter accepts are the configured ones (agents file, GPU types) plus those the
visible runs carry (an agent since removed from the agents file, an imported run's GPU type), so
every run that can be listed can be filtered for.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_workers.harness.vocabulary import SUBMISSION_AGENT
from webapp.runs import choices
from webapp.runs.lifecycle import check_option
from webapp.runs.models import RunQuerySet, RunStatus


@dataclass(frozen=True)
class RunFilters:
    status: str | None = None
    agent: str | None = None
    gpu_type: str | None = None
    problem: int | None = None  # a problem's id
    mine: bool = False  # only the user's own runs


def filtered_runs(runs: RunQuerySet, user, filters: RunFilters) -> RunQuerySet:
    """`runs` (already limited to what `user` may see) narrowed by `filters`; raises
    BadRunOption naming the filter and the values it accepts."""
    if filters.status is not None:
        check_option("status", filters.status, list(RunStatus.values))
    if filters.agent is not None and filters.agent not in choices.agent_names():
        check_option("agent", filters.agent, agents_of(runs))
    if filters.gpu_type is not None and filters.gpu_type not in choices.gpu_types():
        check_option("GPU type", filters.gpu_type, gpu_types_of(runs))
    if filters.mine:
        runs = runs.filter(owner=user)
    narrowing = {
        "status": filters.status,
        "agent": filters.agent,
        "gpu_type": filters.gpu_type,
        "problem_id": filters.problem,
    }
    return runs.filter(**{field: value for field, value in narrowing.items() if value is not None})


def agents_of(runs: RunQuerySet) -> list[str]:
    """The configured agents, a person's submission, and any other agent of these runs."""
    return sorted({*choices.agent_names(), SUBMISSION_AGENT, *_distinct(runs, "agent")})


def gpu_types_of(runs: RunQuerySet) -> list[str]:
    """The GPU types with a worker queue, then any other of these runs (imported results)."""
    served = choices.gpu_types()
    return served + sorted(set(_distinct(runs, "gpu_type")) - set(served))


def _distinct(runs: RunQuerySet, field: str) -> list[str]:
    return list(runs.order_by().values_list(field, flat=True).distinct())
