"""The leaderboard's numbers, computed in the database.

A board is one GPU type and one protocol (results under a loose tolerance and under strict fp32
are never ranked together). Its rows are agent configurations, over the runs on public problems
that ended: succeeded (a verified candidate exists) or failed (none does). Cancelled and active
runs are left out. Per problem an agent counts once, with its best run: "attempted" is a problem
it has an ended run on, "verified" one where some such run's best candidate passed verification
and was timed. DEFINITIONS says what each column means; the pages and the API link to it.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Avg, Count, F, Max, Q, QuerySet
from django.db.models.functions import Exp, Ln

from webapp.problems.models import Visibility
from webapp.runs.models import Run, RunStatus

# The worker marks a run succeeded when it has a verified candidate and failed when it has none:
# both are attempts. A cancelled run was stopped by its owner and says nothing about the agent.
COUNTED = (RunStatus.SUCCEEDED, RunStatus.FAILED)
# A run with a verified result: its best candidate passed verification and was timed.
VERIFIED_RESULT = Q(best_candidate__verified=True, best_speedup_vs_compile__isnull=False)

# (key, heading, definition), in the order the table shows them. The key is the row's dict key
# and the anchor of the definition on the leaderboard page.
DEFINITIONS: list[tuple[str, str, str]] = [
    (
        "rank",
        "#",
        "Position on this board: by geometric-mean speedup vs torch.compile, then by correct "
        "rate. Agents with no verified result come last.",
    ),
    (
        "agent",
        "Agent",
        "An agent configuration: a named entry of agent/configs/agents.toml (backend, model, "
        "prompt version, budget).",
    ),
    (
        "runs",
        "Runs",
        "Runs of this agent on public problems, on this GPU type and protocol, that ended: "
        "succeeded (with a verified candidate) or failed (without one). Cancelled and unfinished "
        "runs are not counted.",
    ),
    (
        "attempted",
        "Attempted",
        "Distinct public problems this agent has at least one counted run on.",
    ),
    (
        "verified",
        "Verified",
        "Attempted problems where at least one of the agent's runs ended with a best candidate "
        "that passed verification and was timed.",
    ),
    ("correct_rate", "Correct", "Verified ÷ attempted."),
    (
        "geomean_speedup_vs_compile",
        "Geomean vs compile",
        "Geometric mean, over the verified problems, of the agent's best speedup over "
        "torch.compile (default mode) on that problem: exp(mean(ln speedup)). Each problem counts "
        "once, with the agent's best run on it; unverified problems are left out (Correct says "
        "how many that is).",
    ),
    (
        "fast_1_0_vs_compile",
        "fast₁.₀ vs compile",
        "Share of attempted problems where the agent's best verified candidate is at least as "
        "fast as torch.compile (speedup ≥ 1.0). An unverified problem counts as not fast.",
    ),
    ("tokens_per_run", "Tokens / run", "Mean prompt + completion tokens per counted run."),
    (
        "dollars_per_run",
        "$ / run",
        "Mean cost in US dollars per counted run, from the prices in the agent's configuration "
        "(0 for self-hosted models with no price set).",
    ),
]


def board_gpu_types() -> list[str]:
    """The GPU types with a worker queue, then any others that have runs from earlier."""
    configured = list(settings.GPU_TYPES)
    seen = Run.objects.order_by().values_list("gpu_type", flat=True).distinct()
    return configured + sorted(set(seen) - set(configured))


def counted_runs(gpu_type: str, protocol: str | None = None) -> QuerySet[Run]:
    runs = Run.objects.filter(
        gpu_type=gpu_type, status__in=COUNTED, problem__visibility=Visibility.PUBLIC
    )
    return runs if protocol is None else runs.filter(protocol=protocol)


def standings(gpu_type: str, protocol: str | None = None) -> list[dict]:
    """The board of `gpu_type` (and `protocol`, or every protocol): one dict per (protocol,
    agent) with the keys of DEFINITIONS plus "protocol", ranked within each protocol."""
    runs = counted_runs(gpu_type, protocol)
    configs = (
        runs.values("protocol", "agent")
        .annotate(
            runs=Count("id"),
            tokens_per_run=Avg(F("prompt_tokens") + F("completion_tokens")),
            dollars_per_run=Avg("cost_dollars"),
        )
        .order_by("protocol", "agent")
    )
    rows = [
        {
            **config,
            **_problem_metrics(runs.filter(protocol=config["protocol"], agent=config["agent"])),
        }
        for config in configs
    ]
    rows.sort(key=_rank_key)
    for index, row in enumerate(rows):
        same_board = index > 0 and rows[index - 1]["protocol"] == row["protocol"]
        row["rank"] = rows[index - 1]["rank"] + 1 if same_board else 1
    return rows


def _problem_metrics(runs: QuerySet[Run]) -> dict:
    """Per problem the agent's best verified speedup (NULL when none), then over problems."""
    per_problem = (
        runs.values("problem")
        .annotate(best=Max("best_speedup_vs_compile", filter=VERIFIED_RESULT))
        .order_by()
    )
    totals = per_problem.aggregate(
        attempted=Count("problem"),
        verified=Count("best"),
        fast=Count("problem", filter=Q(best__gte=1.0)),
        # A speedup is a ratio of positive times; the filter keeps ln() defined regardless.
        geomean=Exp(Avg(Ln("best"), filter=Q(best__gt=0))),
    )
    attempted = totals["attempted"]
    return {
        "attempted": attempted,
        "verified": totals["verified"],
        "correct_rate": totals["verified"] / attempted if attempted else 0.0,
        "geomean_speedup_vs_compile": totals["geomean"],
        "fast_1_0_vs_compile": totals["fast"] / attempted if attempted else 0.0,
    }


def _rank_key(row: dict) -> tuple:
    geomean = row["geomean_speedup_vs_compile"]
    return (row["protocol"], geomean is None, -(geomean or 0.0), -row["correct_rate"], row["agent"])
