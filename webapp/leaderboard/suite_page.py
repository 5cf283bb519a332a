"""One suite's page on one GPU type: its problems with their baselines, its evaluations'
progress, the board with definitions and charts, papers' reported rows and the results under
review. With the leaderboard because the board is the page; the suite list is
webapp.suites.views."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe

from webapp.leaderboard import charts, evaluation, metrics
from webapp.leaderboard.formatting import cells
from webapp.leaderboard.models import GradeStatus
from webapp.leaderboard.problem_results import board_gpu_types, problem_results
from webapp.problems.models import ProblemStatus
from webapp.runs.models import RunStatus
from webapp.suites import progress
from webapp.suites.models import Baseline, Evaluation, Suite, SuiteProblem

BOARD_COLUMNS = [key for key, _, _ in metrics.DEFINITIONS]


# The metrics a paper's row may have (suites.ReportedResult), in the board's column order.
REPORTED_COLUMNS = [
    "correct_rate",
    "fast_1_0_vs_compile",
    "fast_1_0_vs_eager",
    "geomean_speedup_vs_compile",
    "geomean_speedup_vs_eager",
]


def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    suite = _suite(name)
    gpu_types = board_gpu_types(suite)
    gpu_type = request.GET.get("gpu_type") or gpu_types[0]
    if gpu_type not in gpu_types:
        raise Http404(
            f"Suite {suite.name} has no board for the GPU type “{gpu_type}”: "
            f"choose one of {', '.join(gpu_types)}."
        )
    board = metrics.board(suite, gpu_type)
    protocol = board["protocol"]
    context = {
        "suite": suite,
        "gpu_types": gpu_types,
        "gpu_type": gpu_type,
        "protocol": protocol,
        "problems": _problem_rows(suite, gpu_type, protocol),
        "evaluations": evaluation_progress(suite),
        "progress": _progress_lines(suite, gpu_type, protocol),
        "board": board,
        "rows": [cells(row, BOARD_COLUMNS) for row in board["rows"]],
        "reported_headings": [d for d in metrics.DEFINITIONS if d[0] in REPORTED_COLUMNS],
        "reported": [_reported_row(reported) for reported in board["reported"]],
        "definitions": metrics.DEFINITIONS,
        "charts": _charts(suite, gpu_type, protocol, board["rows"]),
    }
    return render(request, "suites/detail.html", context)


def _suite(name: str) -> Suite:
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        known = ", ".join(Suite.objects.values_list("name", flat=True)) or "none yet"
        raise Http404(f"There is no suite “{name}”. Suites: {known}.")
    return suite


def _reported_row(reported: dict) -> dict:
    return {**reported, "cells": cells(reported, REPORTED_COLUMNS)}


def _problem_rows(suite: Suite, gpu_type: str, protocol: str) -> list[SuiteProblem]:
    """The suite's entries in order, each problem with `chosen_baselines`: the one baseline on
    this GPU type and protocol, or none. Two queries."""
    chosen = Baseline.objects.filter(gpu_type=gpu_type, protocol=protocol)
    entries = suite.entries.select_related("problem").prefetch_related(
        Prefetch("problem__baselines", queryset=chosen, to_attr="chosen_baselines")
    )
    return list(entries.defer("problem__source").order_by("position"))


def _progress_lines(suite: Suite, gpu_type: str, protocol: str) -> list[str]:
    """Where the suite's long work stands on this GPU type: what is still under way, with its
    pace; work that is complete says so in one line each."""
    unserved = "" if gpu_type in settings.GPU_TYPES else gpu_type
    lines = [
        progress.validation(suite).line("validation"),
        progress.baselines(suite, gpu_type, protocol).line(f"baselines on {gpu_type}", unserved),
    ]
    latest = suite.evaluations.filter(gpu_type=gpu_type, protocol=protocol).first()
    if latest is not None:
        runs = evaluation.progress(latest)
        lines.append(runs.line(f"evaluation {latest.pk} ({latest.agent})", unserved))
    return lines


def evaluation_progress(suite: Suite):
    """The suite's evaluations, each annotated with its runs per status and grades per status:
    one query for all of them (a run has at most one grade, so the join does not double count)."""
    run_counts = {
        status.value: Count("runs", filter=Q(runs__status=status)) for status in RunStatus
    }
    grade_counts = {
        f"grades_{status.value}": Count("runs__grade", filter=Q(runs__grade__status=status))
        for status in GradeStatus
    }
    evaluations = Evaluation.objects.filter(suite=suite).select_related("owner")
    return evaluations.annotate(**run_counts, **grade_counts)


def _charts(suite: Suite, gpu_type: str, protocol: str, rows: list[dict]) -> dict[str, str]:
    """The three charts from the board's own results, entrants in rank order."""
    per_problem = problem_results(suite, gpu_type, protocol)
    rank = {row["entrant"]: row["rank"] for row in rows}
    labels = sorted((e.label for e in per_problem["entrants"]), key=lambda e: rank.get(e, 0))
    valid = [p for p in per_problem["problems"] if p["status"] == ProblemStatus.VALID]
    names = [p["name"] for p in valid]

    def marks(field: str) -> list[charts.Mark]:
        return [
            charts.Mark(label, p["name"], p["results"][label][field])
            for label in labels
            for p in valid
            if label in p["results"]
        ]

    # Dollars when some entrant costs money; otherwise GPU time is the cost that tells them apart.
    if any(row["dollars_per_run"] for row in rows):
        cost_key, cost_label = "dollars_per_run", "$ per run"
    else:
        cost_key, cost_label = "gpu_minutes_per_run", "GPU-minutes per run"
    points = [
        charts.CostPoint(row["entrant"], row[cost_key], row["geomean_speedup_vs_compile"])
        for row in rows
    ]
    drawn = {
        "speedup": charts.speedup_by_problem(names, marks("s_compile"), labels),
        "cost": charts.speedup_against_cost(points, cost_label, labels),
        "sol": charts.sol_by_problem(names, marks("sol"), labels),
    }
    # charts.py escapes every piece of text it draws.
    return {key: mark_safe(svg) for key, svg in drawn.items()}
