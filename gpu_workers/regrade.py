"""The isolated re-grade of a run's best candidate: what a leaderboard counts.

A fresh Session (a new workspace, and every check in a new sandboxed process that has never run
this candidate) verifies the candidate again under the run's protocol plus secret seeds nobody
has seen, then times it, holding the GPU lock as every verify and profile does. Anything but a
clean pass is held under review with the reasons: a violation, a wrong output on a secret seed,
a failure to build, or a time under the speed-of-light floor.

Its time is then compared with the run's own time of the same candidate: further apart than the
protocol's repeatability, it is measured again in another fresh Session, and if the two still
disagree, both figures are kept (`Grade.agreement`) and the result is held for review rather
than ranked on a number the run could not reproduce.
"""

from __future__ import annotations

import logging

from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from gpu_workers import stored_baselines
from gpu_workers.harness.judge.protocol import by_name
from gpu_workers.harness.session import Session
from gpu_workers.harness.vocabulary import device_for
from webapp.leaderboard.models import MEASURED_FIELDS, Grade, GradeStatus
from webapp.work_kinds import GRADE

log = logging.getLogger(__name__)
SECRET_SEEDS = 3
# What a measurement's agreement record keeps of it (Grade.agreement).
_FIGURES = ("candidate_ms", "speedup_vs_eager", "speedup_vs_compile")


def regrade(run_id: int, worker: str) -> str:
    """Returns what happened, for the worker's log. A re-delivered task grades again."""
    grade = Grade.objects.select_related("run__problem", "candidate").filter(run_id=run_id).first()
    if grade is None or grade.status != GradeStatus.PENDING:
        return f"run {run_id} has no pending grade"
    protocol = by_name(grade.run.protocol)
    verdict = _measure(grade)
    status, reasons = judge(verdict)
    own = figures(_dict(_dict(grade.candidate.verdict).get("profile")))
    measured = [figures(_dict(verdict.get("profile")))]
    if status == GradeStatus.RANKED and disagree(own, measured[-1], protocol.repeatability):
        verdict = _measure(grade)  # once more: a neighbour's burst passes, a real gap stays
        status, reasons = judge(verdict)
        measured.append(figures(_dict(verdict.get("profile"))))
    agreement = _agreement(own, measured, protocol.repeatability)
    if status == GradeStatus.RANKED and agreement.get("agrees") is False:
        status, reasons = GradeStatus.UNDER_REVIEW, [disagreement_reason(agreement)]
    _store(grade, verdict, status, reasons, agreement, worker)
    return f"run {run_id} re-graded: {status}"


def _measure(grade: Grade) -> dict:
    """The candidate verified and timed in a fresh Session with secret seeds: its verdict, or
    one that says why it could not be."""
    run = grade.run
    protocol = by_name(run.protocol).with_secret_seeds(SECRET_SEEDS)
    try:
        device = device_for(run.gpu_type)
        stored_baselines.lend(run.problem, run.gpu_type, protocol)
        with Session(run.problem.source, device=device, protocol=protocol, candidates=1) as s:
            for path, text in grade.candidate.sources.items():
                s.write_file(path, text)
            return s.evaluate()
    except SoftTimeLimitExceeded:  # held for review: a candidate that hangs is not ranked
        return {"error": GRADE.limit_reached()}
    except Exception as exc:  # the grader failed, not (provably) the candidate: say so
        log.exception("re-grading run %s failed", run.pk)
        return {"error": f"the re-grade could not run: {exc}"}


def _store(
    grade: Grade, verdict: dict, status: str, reasons: list, agreement: dict, worker: str
) -> None:
    profiled, verified = _dict(verdict.get("profile")), _dict(verdict.get("verify"))
    Grade.objects.filter(pk=grade.pk, status=GradeStatus.PENDING).update(
        status=status,
        reasons=reasons,
        verdict=verdict,
        agreement=agreement,
        max_rel_err=verified.get("max_rel_err"),
        secret_seeds=SECRET_SEEDS,
        worker=worker,
        graded=timezone.now(),
        **{key: profiled.get(key) for key in MEASURED_FIELDS},
    )


def figures(profile: dict) -> dict | None:
    """A measurement's numbers as the pages show them; None where it was not timed."""
    if not isinstance(profile.get("candidate_ms"), (int, float)) or profile["candidate_ms"] <= 0:
        return None
    return {key: profile.get(key) for key in _FIGURES}


def disagree(own: dict | None, measured: dict | None, limit: float) -> bool:
    """Whether two timings of one kernel are further apart than `limit` (slower over faster).
    Nothing to compare (a run that never timed it, a re-grade that could not) is no
    disagreement."""
    if own is None or measured is None:
        return False
    slower, faster = sorted((own["candidate_ms"], measured["candidate_ms"]), reverse=True)
    return slower / faster > limit


def _agreement(own: dict | None, measured: list, limit: float) -> dict:
    if own is None or measured[-1] is None:
        return {}
    agrees = not disagree(own, measured[-1], limit)
    return {"limit": limit, "run": own, "regrade": measured, "agrees": agrees}


def disagreement_reason(agreement: dict) -> str:
    own, measured = agreement["run"], agreement["regrade"]
    times = " and ".join(_figure_text(m) for m in measured)
    return (
        f"the re-grade measured {times}, the run {_figure_text(own)}: more than the protocol's "
        f"repeatability ({agreement['limit']}x) apart, measured {len(measured)} times; held "
        "for review (another measurement on the same cores, or a kernel whose speed depends "
        "on its process, can do this)"
    )


def _figure_text(figure: dict) -> str:
    speedup = figure.get("speedup_vs_eager")
    vs_eager = f" ({speedup:.2f}x vs eager)" if isinstance(speedup, (int, float)) else ""
    return f"{figure['candidate_ms']:.4g} ms{vs_eager}"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


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
