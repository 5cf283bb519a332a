"""A suite's board on one GPU type and protocol (DESIGN.md, Leaderboard metrics), computed in
the database.

Entrants are measured on the same problems, the same way:
- an agent configuration: its latest evaluation of the suite (one run per problem, fixed budget);
- a person: their submissions to the suite's problems (their best re-graded one per problem);
- a compiler: torch.compile (max-autotune), from the stored baselines.
Only re-graded, clean results count (leaderboard.Grade, `ranked`); those held under review are
listed apart. Every entrant's speedups divide the suite's stored baselines (suites.Baseline, the
columns the report and the pages show) by its re-graded time, so all are over one measurement of
eager and torch.compile; a problem without stored baselines falls back on the re-grade's own.
Every share is over the suite's valid problems, so a problem an entrant did not solve counts
against it. DEFINITIONS says what each column means; pages, API and report link to
it. Rows from papers (suites.ReportedResult) are returned apart and never ranked.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Avg,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce, Exp, Ln, NullIf

from agent.config import describe_training
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.models import Run, RunKind, RunStatus
from webapp.suites.models import Baseline, Evaluation, Suite

COMPILER = "torch.compile (max-autotune)"
THRESHOLDS = (("1_0", 1.0), ("1_05", 1.05))
# Runs that ended: an attempt, whether or not it produced a verified candidate.
ENDED = (RunStatus.SUCCEEDED, RunStatus.FAILED)

# (key, heading, definition), in the order the board shows them.
DEFINITIONS: list[tuple[str, str, str]] = [
    (
        "rank",
        "#",
        "Position among measured entrants: by fast₁.₀ vs compile, then geometric-mean "
        "speedup vs compile, then correct rate. Reported rows are never ranked.",
    ),
    (
        "entrant",
        "Entrant",
        "An agent configuration (its latest evaluation of this suite: one run "
        "per problem under a fixed budget), a person (their best re-graded submission per "
        "problem), or a compiler (torch.compile max-autotune, from the stored baselines).",
    ),
    ("kind", "Kind", "agent, person or compiler."),
    (
        "attempted",
        "Attempted",
        "Suite problems the entrant has an ended run on (for the "
        "compiler: problems with stored baselines).",
    ),
    (
        "correct_rate",
        "Correct",
        "Problems with a ranked result ÷ the suite's valid problems. A "
        "result is ranked once an isolated re-grade (a fresh sandboxed process, secret seeds, the "
        "GPU lock) verified and timed it with no violation and no time under the speed-of-light "
        "floor.",
    ),
    (
        "fast_1_0_vs_compile",
        "fast₁.₀ vs compile",
        "Share of the suite's problems with a ranked "
        "result at least as fast as torch.compile (default mode): speedup ≥ 1.0.",
    ),
    ("fast_1_05_vs_compile", "fast₁.₀₅ vs compile", "As fast₁.₀ vs compile, with speedup ≥ 1.05."),
    (
        "fast_1_0_vs_eager",
        "fast₁.₀ vs eager",
        "Share of the suite's problems with a ranked result at least as fast as eager PyTorch.",
    ),
    ("fast_1_05_vs_eager", "fast₁.₀₅ vs eager", "As fast₁.₀ vs eager, with speedup ≥ 1.05."),
    (
        "geomean_speedup_vs_compile",
        "Geomean vs compile",
        "Geometric mean, over the problems with "
        "a ranked result, of the speedup over torch.compile (default mode): exp(mean(ln speedup)). "
        "Every speedup is the problem's stored baseline time (the one the report shows) ÷ the "
        "re-graded time, the same baselines for every entrant; a problem without a stored time "
        "uses the re-grade's own.",
    ),
    (
        "geomean_coverage",
        "Coverage",
        "Problems the geometric mean is over ÷ the suite's valid "
        "problems: a high geomean over few problems says little.",
    ),
    (
        "geomean_speedup_vs_eager",
        "Geomean vs eager",
        "Geometric mean of the speedup over eager PyTorch, over the problems with a ranked "
        "result (a problem whose torch.compile baseline failed still has an eager one).",
    ),
    (
        "median_sol_fraction",
        "Median SOL",
        "Median over the ranked results of speed-of-light "
        "floor ÷ time: 100% would be the GPU's measured peak bandwidth or FLOP rate.",
    ),
    ("tokens_per_run", "Tokens / run", "Mean prompt + completion tokens per ended run."),
    (
        "dollars_per_run",
        "$ / run",
        "Mean model cost in US dollars per ended run, from the prices "
        "in the agent's configuration (0 for self-hosted models and for people).",
    ),
    (
        "speedup_per_dollar",
        "× / $",
        "Geomean vs compile ÷ $ / run: what a dollar of model spend buys. Empty where a run "
        "costs nothing (self-hosted models, the built-in compiler, people).",
    ),
    (
        "wall_minutes_per_run",
        "Wall-min / run",
        "Mean minutes per ended run from the worker's claim to its end: the model's thinking "
        "and the tools together.",
    ),
    (
        "gpu_minutes_per_run",
        "GPU-min / run",
        "Mean minutes per ended run that the run held the "
        "GPU lock (verifying and profiling; a model's thinking time is not counted).",
    ),
    (
        "under_review",
        "Under review",
        "Results held by the re-grade (a violation, a wrong output "
        "on a secret seed, or an impossible time): shown, never counted.",
    ),
]


@dataclass
class Entrant:
    label: str
    kind: str  # agent | person | compiler
    runs: QuerySet[Run] | None  # None for the compiler
    evaluation: Evaluation | None = None


def entrants(suite: Suite, gpu_type: str, protocol: str) -> list[Entrant]:
    problems = suite.valid_problems()
    found = []
    latest = Evaluation.objects.filter(suite=suite, gpu_type=gpu_type, protocol=protocol).order_by(
        "agent", "-created", "-id"
    )
    seen: set[str] = set()
    for evaluation in latest:
        if evaluation.agent not in seen:
            seen.add(evaluation.agent)
            found.append(Entrant(evaluation.agent, "agent", evaluation.runs.all(), evaluation))
    submissions = Run.objects.filter(
        kind=RunKind.SUBMISSION, gpu_type=gpu_type, protocol=protocol, problem__in=problems
    )
    # A person enters once a submission of theirs has ended; queued or cancelled ones alone
    # would make an all-zero row.
    people = submissions.filter(status__in=ENDED).order_by("owner__username")
    for owner_id, username in people.values_list("owner", "owner__username").distinct():
        found.append(Entrant(username, "person", submissions.filter(owner=owner_id)))
    if _compiler_results(suite, gpu_type, protocol).exists():
        found.append(Entrant(COMPILER, "compiler", None))
    return found


def results(suite: Suite, gpu_type: str, protocol: str, entrant: Entrant) -> QuerySet:
    """One row per problem the entrant has a ranked result on, with `problem`, `ms`, `s_eager`,
    `s_compile` and `sol` (speedups and fraction of speed of light)."""
    if entrant.runs is None:
        return _compiler_results(suite, gpu_type, protocol)
    ranked = Grade.objects.filter(
        run__in=entrant.runs.filter(problem__in=suite.valid_problems()),
        status=GradeStatus.RANKED,
        candidate_ms__isnull=False,
    )
    # The entrant's fastest ranked result per problem (a person may submit several times).
    fastest = ranked.filter(run__problem=OuterRef("run__problem")).order_by("candidate_ms", "pk")
    stored = Baseline.objects.filter(
        problem=OuterRef("run__problem"), gpu_type=gpu_type, protocol=protocol
    )
    return ranked.filter(pk=Subquery(fastest.values("pk")[:1])).annotate(
        problem=F("run__problem"),
        ms=F("candidate_ms"),
        s_eager=_over_stored(stored, "eager_ms", "speedup_vs_eager"),
        s_compile=_over_stored(stored, "compile_ms", "speedup_vs_compile"),
        sol=F("sol_fraction"),
    )


def _over_stored(stored: QuerySet, baseline: str, own: str) -> Coalesce:
    """The stored baseline's time over the result's, or the re-grade's own ratio where no time
    is stored (a failed or unmeasured baseline: NULL or 0 divides into NULL)."""
    time = NullIf(Subquery(stored.values(baseline)[:1]), 0.0)
    ratio = ExpressionWrapper(time / NullIf(F("candidate_ms"), 0.0), output_field=FloatField())
    return Coalesce(ratio, F(own), output_field=FloatField())


def _ratio(numerator: str, denominator: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(numerator) / F(denominator), output_field=FloatField())


def _compiler_results(suite: Suite, gpu_type: str, protocol: str) -> QuerySet:
    return Baseline.objects.filter(
        problem__in=suite.valid_problems(),
        gpu_type=gpu_type,
        protocol=protocol,
        compile_max_autotune_ms__gt=0,
    ).annotate(
        ms=F("compile_max_autotune_ms"),
        s_eager=_ratio("eager_ms", "compile_max_autotune_ms"),
        s_compile=_ratio("compile_ms", "compile_max_autotune_ms"),
        sol=_ratio("sol_ms", "compile_max_autotune_ms"),
    )


def row(suite: Suite, gpu_type: str, protocol: str, entrant: Entrant, problems: int) -> dict:
    """The entrant's metrics (the keys of DEFINITIONS but rank)."""
    per_problem = results(suite, gpu_type, protocol, entrant)
    counts = {"correct": Count("pk"), "geomean_n": Count("pk", filter=Q(s_compile__gt=0))}
    for name, p in THRESHOLDS:
        counts[f"fast_{name}_vs_compile"] = Count("pk", filter=Q(s_compile__gte=p))
        counts[f"fast_{name}_vs_eager"] = Count("pk", filter=Q(s_eager__gte=p))
    totals = per_problem.aggregate(
        **counts,
        # A speedup is a ratio of positive times; the filters keep ln() defined regardless.
        geomean_speedup_vs_compile=Exp(Avg(Ln("s_compile"), filter=Q(s_compile__gt=0))),
        geomean_speedup_vs_eager=Exp(Avg(Ln("s_eager"), filter=Q(s_eager__gt=0))),
    )
    share = (lambda count: count / problems) if problems else (lambda count: 0.0)
    data = {
        "entrant": entrant.label,
        "kind": entrant.kind,
        "evaluation": entrant.evaluation.pk if entrant.evaluation else None,
        "trained": _trained(entrant),
        "problems": problems,
        "correct": totals["correct"],
        "correct_rate": share(totals["correct"]),
        "geomean_speedup_vs_compile": totals["geomean_speedup_vs_compile"],
        "geomean_speedup_vs_eager": totals["geomean_speedup_vs_eager"],
        "geomean_coverage": share(totals["geomean_n"]),
        "median_sol_fraction": median(per_problem, "sol"),
        **{key: share(totals[key]) for key in counts if key.startswith("fast_")},
        **_spend(suite, entrant),
    }
    dollars, geomean = data["dollars_per_run"], data["geomean_speedup_vs_compile"]
    data["speedup_per_dollar"] = geomean / dollars if dollars and geomean else None
    if entrant.runs is None:
        data["attempted"] = per_problem.count()
    return data


def _trained(entrant: Entrant) -> str | None:
    """An agent that is a trained checkpoint: its provenance when the counted evaluation ran."""
    if entrant.evaluation is None:
        return None
    return describe_training(entrant.evaluation.agent_identity.get("training") or {}) or None


def median(rows: QuerySet, field: str) -> float | None:
    """The median of a column, sorted by the database: at most two values come back."""
    present = rows.filter(**{f"{field}__isnull": False})
    values = present.order_by(field).values_list(field, flat=True)
    count = values.count()
    if not count:
        return None
    middle = values[(count - 1) // 2 : count // 2 + 1]
    return sum(middle) / len(middle)


def _spend(suite: Suite, entrant: Entrant) -> dict:
    if entrant.runs is None:  # the compiler: no model, and its baselines are not runs
        return {
            "runs": 0,
            "tokens_per_run": None,
            "dollars_per_run": None,
            "wall_minutes_per_run": None,
            "gpu_minutes_per_run": None,
            "under_review": 0,
        }
    in_suite = entrant.runs.filter(problem__in=suite.valid_problems())
    ended = in_suite.filter(status__in=ENDED)
    spend = ended.aggregate(
        runs=Count("pk"),
        attempted=Count("problem", distinct=True),
        tokens_per_run=Avg(F("prompt_tokens") + F("completion_tokens")),
        dollars_per_run=Avg("cost_dollars"),
        gpu_seconds_per_run=Avg("gpu_seconds"),
        wall_per_run=Avg(
            ExpressionWrapper(F("finished") - F("started"), output_field=DurationField()),
            output_field=DurationField(),
        ),
    )
    seconds = spend.pop("gpu_seconds_per_run")
    spend["gpu_minutes_per_run"] = seconds / 60 if seconds is not None else None
    wall = spend.pop("wall_per_run")
    spend["wall_minutes_per_run"] = wall.total_seconds() / 60 if wall is not None else None
    spend["under_review"] = Grade.objects.filter(
        run__in=in_suite, status=GradeStatus.UNDER_REVIEW
    ).count()
    return spend


def board(suite: Suite, gpu_type: str, protocol: str | None = None) -> dict:
    """The ranked rows, the reported rows and the results under review."""
    protocol = protocol or suite.protocol
    problems = suite.valid_problems().count()
    found = entrants(suite, gpu_type, protocol)
    rows = [row(suite, gpu_type, protocol, entrant, problems) for entrant in found]
    rows.sort(key=_rank_key)
    for index, data in enumerate(rows, start=1):
        data["rank"] = index
    return {
        "suite": suite.name,
        "gpu_type": gpu_type,
        "protocol": protocol,
        "problems": problems,
        "rows": rows,
        "reported": list(suite.reported_results.values()),
        "under_review": under_review(suite, gpu_type, protocol),
    }


def _rank_key(data: dict) -> tuple:
    geomean = data["geomean_speedup_vs_compile"] or 0.0
    return (-data["fast_1_0_vs_compile"], -geomean, -data["correct_rate"], data["entrant"])


def under_review(suite: Suite, gpu_type: str, protocol: str) -> list[dict]:
    grades = Grade.objects.filter(
        status=GradeStatus.UNDER_REVIEW,
        run__problem__in=suite.valid_problems(),
        run__gpu_type=gpu_type,
        run__protocol=protocol,
    ).order_by("run__problem", "run")
    return [
        {
            "run": g["run"],
            "agent": g["run__agent"],
            "kind": g["run__kind"],
            "owner": g["run__owner__username"],
            "problem": g["run__problem__title"],
            "reasons": g["reasons"],
        }
        for g in grades.values(
            "run",
            "run__agent",
            "run__kind",
            "run__owner__username",
            "run__problem__title",
            "reasons",
        )
    ]
