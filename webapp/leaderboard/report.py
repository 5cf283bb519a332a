"""A suite's results on one GPU type as a Markdown report (what became of its problems, per
problem, then the board, the results under review, the reported rows and the definitions) and as
CSV. The numbers are the board's own (metrics.board, problem_results): the report recomputes
nothing."""

from __future__ import annotations

import csv
import io
from collections import Counter

from webapp.leaderboard import metrics
from webapp.leaderboard.formatting import cells, format_metric
from webapp.leaderboard.problem_results import problem_results
from webapp.problems.models import ProblemStatus
from webapp.problems.validation import UNFINISHED, rejection_cause
from webapp.suites.models import Baseline, Suite

BOARD_COLUMNS = [key for key, _, _ in metrics.DEFINITIONS]
_HEADINGS = {key: heading for key, heading, _ in metrics.DEFINITIONS}


def _ms(value) -> str:
    return "—" if value is None else f"{value:.4f}"


def _table(headings: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headings) + " |", "|" + " --- |" * len(headings)]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows]


def environment_line(suite: Suite, gpu_type: str, protocol: str) -> str:
    measured = (
        Baseline.objects.filter(problem__suite_entries__suite=suite, gpu_type=gpu_type)
        .filter(protocol=protocol, measured__isnull=False)
        .order_by("-measured")
        .values_list("environment", flat=True)
        .first()
    )
    if not measured:
        return "Environment: no baselines measured yet."
    keys = ("gpu", "driver", "cuda", "torch")
    parts = [f"{key} {measured[key]}" for key in keys if measured.get(key)]
    return "Environment (from the baselines): " + ", ".join(parts) + "."


def markdown(suite: Suite, gpu_type: str, protocol: str | None = None, command: str = "") -> str:
    protocol = protocol or suite.protocol
    board = metrics.board(suite, gpu_type, protocol)
    per_problem = problem_results(suite, gpu_type, protocol)
    labels = [entrant.label for entrant in per_problem["entrants"]]
    lines = [f"# Suite {suite.name} on {gpu_type} ({protocol})", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    lines += [
        environment_line(suite, gpu_type, protocol),
        "",
        *problems_section(suite, gpu_type, protocol),
        "",
        "## Per problem",
        "",
        f"{board['problems']} valid problems. Cells: time in ms (speedup vs torch.compile: "
        "this row's compile ms ÷ the time). Only re-graded, clean results count.",
        "",
    ]
    headings = ["problem", "eager ms", "compile ms", "max-autotune ms", "SOL ms", *labels]
    lines += _table(headings, [_problem_row(p, labels) for p in per_problem["problems"]])
    lines += ["", "## Board", ""]
    columns = BOARD_COLUMNS
    lines += _table(
        [_HEADINGS[key] for key in columns],
        [[text for _, text in cells(row, columns)] for row in board["rows"]],
    )
    for entrant in per_problem["entrants"]:
        if entrant.kind == "agent":
            lines += work_list(entrant, per_problem)
    lines += _under_review(board) + _reported(board) + ["", "## Definitions", ""]
    lines += [f"- **{heading}**: {text}" for _, heading, text in metrics.DEFINITIONS]
    return "\n".join(lines) + "\n"


_CAUSES = {
    "defect": "rejected for a defect of its own",
    "limit": "stopped at the validation time limit (a hang, or too slow to validate)",
    "machine": "lost to the harness or the machine (not a defect of the problem)",
    "memory": "too large for this GPU's memory",
}


def problems_section(suite: Suite, gpu_type: str, protocol: str) -> list[str]:
    """What became of the suite's problems: imported, valid, rejected by cause (each with its
    reasons), not validated yet, and how many valid ones have their baselines on `gpu_type`."""
    entries = list(
        suite.entries.order_by("position").values("name", "problem__status", "problem__reasons")
    )
    rejected = [e for e in entries if e["problem__status"] == ProblemStatus.REJECTED]
    causes = Counter(rejection_cause(e["problem__reasons"]) for e in rejected)
    valid = suite.valid_problems()
    valid_count = valid.count()
    baselined = Baseline.objects.filter(
        problem__in=valid, gpu_type=gpu_type, protocol=protocol, measured__isnull=False, error=""
    ).count()
    counts = [
        f"{len(entries)} imported",
        f"{valid_count} valid",
        *(f"{causes[cause]} {text}" for cause, text in _CAUSES.items()),
        f"{sum(e['problem__status'] in UNFINISHED for e in entries)} not validated yet",
        f"baselines on {gpu_type}: {baselined} of {valid_count}",
    ]
    lines = ["## Problems", "", "; ".join(counts) + "."]
    if rejected:
        rows = [
            [e["name"], rejection_cause(e["problem__reasons"]), "; ".join(e["problem__reasons"])]
            for e in rejected
        ]
        lines += [""] + _table(["rejected", "cause", "reasons"], rows)
    return lines


WORK_LIST = 10


def work_list(entrant, per_problem: dict) -> list[str]:
    """What the board teaches about one agent: its WORK_LIST weakest valid problems, those
    without a counted result first (with why, from its latest run there), then the slowest
    against torch.compile (with how far each is from the speed of light, and torch.compile's)."""
    latest = {}
    for run in entrant.runs.order_by("created", "pk"):
        latest[run.problem_id] = run
    weakest = []
    for problem in per_problem["problems"]:
        if problem["status"] == "valid":
            result = problem["results"].get(entrant.label)
            place = (1, result["s_compile"] or 0.0) if result else (0, 0.0)
            weakest.append((place, problem, result))
    weakest.sort(key=lambda item: item[0])
    rows = [
        [problem["name"], *_standing(result, problem, latest.get(problem["problem"]))]
        for _, problem, result in weakest[:WORK_LIST]
    ]
    if not rows:
        return []
    heading = f"## What the board teaches: {entrant.label}'s {len(rows)} weakest problems"
    return ["", heading, ""] + _table(["problem", "vs torch.compile", "why"], rows)


def _standing(result: dict | None, problem: dict, run) -> list[str]:
    if result is None:
        if run is None:
            return ["—", "not run"]
        why = (run.error or f"run {run.status}, no counted result").splitlines()[0][:200]
        return ["—", why]
    base = problem["baseline"] or {}
    compiled = (
        base.get("sol_ms") / base["compile_ms"]
        if base.get("compile_ms") and base.get("sol_ms")
        else None
    )
    ours = f"{result['sol']:.0%}" if result.get("sol") is not None else "—"
    theirs = f"{compiled:.0%}" if compiled is not None else "—"
    speedup = f"{result['s_compile']:.2f}×" if result["s_compile"] is not None else "—"
    return [speedup, f"at {ours} of the speed of light (torch.compile at {theirs})"]


def _problem_row(problem: dict, labels: list[str]) -> list[str]:
    base = problem["baseline"] or {}
    cells = [problem["name"]]
    if problem["status"] != "valid":
        return cells + [problem["status"]] + ["—"] * (3 + len(labels))
    cells += [_ms(base.get(k)) for k in ("eager_ms", "compile_ms", "compile_max_autotune_ms")]
    cells.append(_ms(base.get("sol_ms")))
    for label in labels:
        result = problem["results"].get(label)
        if result is None:
            cells.append("—")
        else:
            speedup = result["s_compile"]
            suffix = f" ({speedup:.2f}×)" if speedup is not None else ""
            cells.append(f"{result['ms']:.4f}{suffix}")
    return cells


def _under_review(board: dict) -> list[str]:
    if not board["under_review"]:
        return []
    lines = ["", "## Under review (never ranked)", ""]
    for item in board["under_review"]:
        who = item["owner"] if item["kind"] == "submission" else item["agent"]
        lines.append(
            f"- run {item['run']} ({who}) on {item['problem']}: {'; '.join(item['reasons'])}"
        )
    return lines


def _reported(board: dict) -> list[str]:
    if not board["reported"]:
        return []
    lines = ["", "## Reported in papers (not measured here, never ranked)", ""]
    keys = ("correct_rate", "fast_1_0_vs_compile", "geomean_speedup_vs_compile")
    rows = [
        [
            r["entrant"],
            r["gpu"],
            r["protocol"],
            *(format_metric(k, r[k]) for k in keys),
            r["citation"],
        ]
        for r in board["reported"]
    ]
    headings = ["entrant", "GPU", "protocol", *(_HEADINGS[k] for k in keys), "source"]
    return lines + _table(headings, rows)


def problems_csv(suite: Suite, gpu_type: str, protocol: str | None = None) -> str:
    """One line per (problem, entrant with a counted result), with the problem's baselines."""
    protocol = protocol or suite.protocol
    per_problem = problem_results(suite, gpu_type, protocol)
    kinds = {entrant.label: entrant.kind for entrant in per_problem["entrants"]}
    out = io.StringIO()
    writer = csv.writer(out)
    base_keys = ("eager_ms", "compile_ms", "compile_max_autotune_ms", "sol_ms")
    writer.writerow(
        [
            "problem",
            "status",
            *base_keys,
            "entrant",
            "kind",
            "ms",
            "speedup_vs_eager",
            "speedup_vs_compile",
            "sol_fraction",
        ]
    )
    for problem in per_problem["problems"]:
        base = problem["baseline"] or {}
        head = [problem["name"], problem["status"], *(base.get(k) for k in base_keys)]
        if not problem["results"]:
            writer.writerow(head + [""] * 6)
        for label, result in problem["results"].items():
            writer.writerow(
                head
                + [label, kinds[label], *(result[k] for k in ("ms", "s_eager", "s_compile", "sol"))]
            )
    return out.getvalue()


def board_csv(suite: Suite, gpu_type: str, protocol: str | None = None) -> str:
    board = metrics.board(suite, gpu_type, protocol or suite.protocol)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=BOARD_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(board["rows"])
    return out.getvalue()
