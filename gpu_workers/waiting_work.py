"""Work the database says is waiting, sent to the workers again when a worker starts.

A task lives in the broker: when the broker restarts empty (the embedded Redis of `make run`, a
GPU host that went away with its stack), queued runs, problems waiting for validation, requested
baselines and pending re-grades would wait for good. So every worker, as it starts, sends each
of them again for the queues it serves (a run worker the queued runs of its GPU types, a
validation worker the problems waiting for validation, a grade worker the baselines and
re-grades). A second copy of a task that still exists does
nothing: a run is claimed by a conditional update, and validation, baselines and the re-grade
skip or redo work whose result is the same. Running runs are the reaper's (webapp.runs.recovery).

Once per start of a stack, not per worker: a host of several GPUs starts a worker of each kind
per GPU (webapp/host_gpus.py), and four grade workers each sending a level's requested baselines
again would send each of them four times over. So the workers of one start of a `make run` stack
(they share its KERNELARENA_STACK_STARTED_AS) claim the sending with a key in the broker
(`claim_resending`), and the first to claim it sends. A worker started on its own (docker-compose,
a test) has no stack and sends as it always did.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Q

from webapp.leaderboard.grading import enqueue_regrade
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.validation import enqueue_validation
from webapp.runs.lifecycle import enqueue_run
from webapp.runs.models import Run, RunStatus
from webapp.suites.baselines import resend_baseline
from webapp.suites.models import Baseline
from webapp.work_kinds import GRADE, RUN, VALIDATE

RESENT_KEY = "kernelarena:waiting-work-sent:"
CLAIM_KEPT_S = 24 * 3600  # longer than any stack start, so no key is left in the broker for good


def claim_resending(served: dict[str, list[str]], broker, stack: str) -> str | None:
    """The broker key that makes this worker the one of its stack's start (`stack`) to send the
    waiting work of what it serves (kind -> GPU types), or None when another worker of the same
    start claimed it first. `broker` is a redis client of the broker's own database."""
    kinds = ";".join(f"{kind}={','.join(sorted(types))}"
                     for kind, types in sorted(served.items()) if types)  # fmt: skip
    key = f"{RESENT_KEY}{stack}:{kinds}"
    return key if broker.set(key, "1", nx=True, ex=CLAIM_KEPT_S) else None


def resend_waiting_work(served: dict[str, list[str]]) -> dict[str, int]:
    """Sends every waiting item of the kinds and GPU types a worker serves again (kind name ->
    GPU types, webapp.work_kinds.served); returns how many of each kind."""
    runs_of, grades_of = served.get(RUN.name, []), served.get(GRADE.name, [])
    with transaction.atomic():  # each enqueue sends once this commits
        runs = Run.objects.filter(status=RunStatus.QUEUED, gpu_type__in=runs_of)
        for run in runs:
            enqueue_run(run)
        problems = _waiting_problems(served.get(VALIDATE.name, []))
        for problem in problems:
            enqueue_validation(problem)
        unanswered = Q(measured__isnull=True) | Q(measured__lt=F("requested"))
        baselines = Baseline.objects.filter(
            unanswered, gpu_type__in=grades_of, requested__isnull=False, error=""
        )
        for baseline in baselines:
            resend_baseline(baseline)
        grades = Grade.objects.filter(status=GradeStatus.PENDING, run__gpu_type__in=grades_of)
        for grade in grades.select_related("run"):
            enqueue_regrade(grade.run)
    return {
        "runs": len(runs),
        "problems": len(problems),
        "baselines": len(baselines),
        "grades": len(grades),
    }


def _waiting_problems(gpu_types: list[str]):
    """Validation runs on one GPU type (work_kinds.VALIDATE): only its workers send it."""
    if not VALIDATE.gpu_types(gpu_types):
        return Problem.objects.none()
    waiting = Q(status=ProblemStatus.PENDING) | Q(status=ProblemStatus.VALIDATING)
    return Problem.objects.filter(waiting).exclude(source="")
