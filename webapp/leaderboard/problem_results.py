"""Per problem of a suite: its baselines and each entrant's counted result, for the report, the
charts and the suite page. One query for the problems and baselines, one per entrant. Also which
GPU types have boards."""

from __future__ import annotations

from django.conf import settings

from webapp.leaderboard import metrics
from webapp.runs.models import Run
from webapp.suites.models import Baseline, Evaluation, Suite

RESULT_FIELDS = ("ms", "s_eager", "s_compile", "sol")


def problem_results(suite: Suite, gpu_type: str, protocol: str) -> dict:
    """{"entrants": [Entrant…], "problems": [{name, problem, status, baseline, results}]}, where
    `results` maps an entrant's label to its counted result (ms, s_eager, s_compile, sol) on the
    problem, if it has one. Problems keep the suite's order; rejected ones are included with
    their status so a report shows them."""
    entrants = metrics.entrants(suite, gpu_type, protocol)
    baselines = {
        row["problem"]: row
        for row in Baseline.objects.filter(
            problem__suite_entries__suite=suite, gpu_type=gpu_type, protocol=protocol
        ).values("problem", "eager_ms", "compile_ms", "compile_max_autotune_ms", "sol_ms", "error")
    }
    by_entrant = {
        entrant.label: {
            row["problem"]: row
            for row in metrics.results(suite, gpu_type, protocol, entrant).values(
                "problem", *RESULT_FIELDS
            )
        }
        for entrant in entrants
    }
    problems = [
        {
            "name": entry["name"],
            "problem": entry["problem"],
            "status": entry["problem__status"],
            "baseline": baselines.get(entry["problem"]),
            "results": {
                label: found[entry["problem"]]
                for label, found in by_entrant.items()
                if entry["problem"] in found
            },
        }
        for entry in suite.entries.order_by("position").values("name", "problem", "problem__status")
    ]
    return {"entrants": entrants, "problems": problems}


def board_gpu_types(suite: Suite | None = None) -> list[str]:
    """The GPU types with a worker queue, then any other that has baselines, evaluations or runs
    (of `suite`, or of any suite): a board outlives the queue it was measured on."""
    if suite is None:
        baselines = Baseline.objects.filter(problem__suites__isnull=False)
        evaluations = Evaluation.objects.all()
        runs = Run.objects.filter(problem__suites__isnull=False)
    else:
        baselines = Baseline.objects.filter(problem__suites=suite)
        evaluations = Evaluation.objects.filter(suite=suite)
        runs = Run.objects.filter(problem__suites=suite)
    seen: set[str] = set()
    for rows in (baselines, evaluations, runs):
        seen.update(rows.order_by().values_list("gpu_type", flat=True).distinct())
    configured = list(settings.GPU_TYPES)
    return configured + sorted(seen - set(configured))
