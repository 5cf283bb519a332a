"""The isolated re-grade of a run's best candidate: what a leaderboard counts.

A fresh Session (a new workspace, and every check in a new sandboxed process that has never run
this candidate) verifies the candidate again under the run's protocol plus secret seeds nobody
has seen, then times it, holding the GPU lock as every verify and profile does. Anything but a
clean pass is held under review with the reasons: a violation, a wrong output on a secret seed,
a failure to build, or a time under the speed-of-light floor.
"""

from __future__ import annotations

import logging

from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from gpu_workers.harness.judge.protocol import by_name
from gpu_workers.harness.session import Session
from gpu_workers.harness.vocabulary import device_for
from webapp.leaderboard.models import MEASURED_FIELDS, Grade, GradeStatus
from webapp.work_kinds import GRADE

log = logging.getLogger(__name__)
SECRET_SEEDS = 3


def regrade(run_id: int, worker: str) -> str:
    """Returns what happened, for the worker's log. A re-delivered task grades again."""
    grade = Grade.objects.select_related("run__problem", "candidate").filter(run_id=run_id).first()
    if grade is None or grade.status != GradeStatus.PENDING:
        return f"run {run_id} has no pending grade"
    run = grade.run
    protocol = by_name(run.protocol).with_secret_seeds(SECRET_SEEDS)
    try:
        device = device_for(run.gpu_type)
        with Session(run.problem.source, device=device, protocol=protocol, candidates=1) as s:
            for path, text in grade.candidate.sources.items():
                s.write_file(path, text)
            verdict = s.evaluate()
    except SoftTimeLimitExceeded:  # held for review: a candidate that hangs is not ranked
        verdict = {"error": GRADE.limit_reached()}
    except Exception as exc:  # the grader failed, not (provably) the candidate: say so
        log.exception("re-grading run %s failed", run_id)
        verdict = {"error": f"the re-grade could not run: {exc}"}
    status, reasons = judge(verdict)
    profiled = verdict.get("profile") or {}
    verified = verdict.get("verify") or {}
    Grade.objects.filter(pk=grade.pk, status=GradeStatus.PENDING).update(
        status=status,
        reasons=reasons,
        verdict=verdict,
        max_rel_err=verified.get("max_rel_err"),
        secret_seeds=SECRET_SEEDS,
        worker=worker,
        graded=timezone.now(),
        **{key: profiled.get(key) for key in MEASURED_FIELDS},
    )
    return f"run {run_id} re-graded: {status}"


def judge(verdict: dict) -> tuple[str, list[str]]:
    """(status, reasons): ranked only when it compiled, verified on every seed and was timed
    with no violation."""
    if verdict.get("error"):
        return GradeStatus.UNDER_REVIEW, [verdict["error"]]
    compiled, verified, profiled = (verdict.get(k) or {} for k in ("compile", "verify", "profile"))
    if not compiled.get("ok"):
        return GradeStatus.UNDER_REVIEW, ["it no longer compiles: " + _tail(compiled.get("log"))]
    reasons = [_violation(v) for v in verified.get("violations") or []]
    if not verified.get("ok"):
        detail = reasons or [
            verified.get("error") or f"max abs error {verified.get('max_abs_err')}"
        ]
        summary = (
            f"failed the re-grade's checks (the public seeds plus {SECRET_SEEDS} secret ones, "
            "in a fresh process)"
        )
        return GradeStatus.UNDER_REVIEW, [summary, *detail]
    reasons += [_violation(v) for v in profiled.get("violations") or []]
    if not profiled.get("ok") and not reasons:
        reasons.append("it could not be timed: " + (profiled.get("error") or "no reason given"))
    return (GradeStatus.UNDER_REVIEW, reasons) if reasons else (GradeStatus.RANKED, [])


def _violation(violation: dict) -> str:
    return f"{violation.get('code', 'violation')}: {violation.get('detail', '')}"


def _tail(log_text: str | None, lines: int = 5) -> str:
    return "\n".join((log_text or "no log").strip().splitlines()[-lines:])
