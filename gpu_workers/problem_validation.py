"""Validating an uploaded problem on a worker: the harness runs it in the sandbox and the
problem row gets the verdict (valid, with timings and its speed-of-light floor, or rejected, with
reasons)."""

from __future__ import annotations

import logging

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from gpu_workers.harness.judge import failure, roofline
from gpu_workers.harness.judge import validation as harness_validation
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.vocabulary import device_for
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.validation import HARNESS_FAILED, MACHINE_FAILED, UNFINISHED
from webapp.work_kinds import VALIDATE

log = logging.getLogger(__name__)


def validate(problem_id: int) -> str:
    """Returns what happened, for the worker's log. Safe to run twice for one problem."""
    # A re-delivered task finds the problem `validating` and does the work again.
    mine = Problem.objects.filter(pk=problem_id, status__in=UNFINISHED)
    if not mine.update(status=ProblemStatus.VALIDATING, validation_started=timezone.now()):
        return f"problem {problem_id} is gone or already validated"
    source = Problem.objects.values_list("source", flat=True).get(pk=problem_id)
    gpu_type = settings.VALIDATION_GPU_TYPE
    device = device_for(gpu_type)
    try:
        report = _validate_retrying(source, device)
    except SoftTimeLimitExceeded:  # the problem hangs or is too slow to validate in time
        mine.update(status=ProblemStatus.REJECTED, reasons=[VALIDATE.limit_reached()])
        return f"problem {problem_id}: stopped at the time limit"
    except Exception as exc:  # a harness failure is not the problem's fault, but must not hang
        log.exception("validating problem %s failed", problem_id)
        mine.update(status=ProblemStatus.REJECTED, reasons=[f"{HARNESS_FAILED}: {exc}"])
        return f"problem {problem_id}: validator error"
    fields = {"validated_on": gpu_type, "reasons": report.reasons}
    if report.ok:
        fields.update(
            status=ProblemStatus.VALID,
            eager_ms=report.eager_ms,
            compile_ms=report.compile_ms,
            flops=report.flops,
            bytes_moved=report.bytes_moved,
            sol_ms=_speed_of_light(report, device),
        )
    else:
        fields["status"] = ProblemStatus.REJECTED
    mine.update(**fields)
    return f"problem {problem_id} {fields['status']}"


def _validate_retrying(source: str, device: str):
    """The machine's failures (out of memory, a reference killed or timed out) get one more
    try; if it fails the same way again, the reasons say it was the machine, not the problem."""
    report = harness_validation.validate(source, device, LOOSE)
    if report.ok or report.failed_by != failure.INFRASTRUCTURE:
        return report
    report = harness_validation.validate(source, device, LOOSE)
    if not report.ok and report.failed_by == failure.INFRASTRUCTURE:
        report.reasons = [f"{MACHINE_FAILED}: {reason}" for reason in report.reasons]
    return report


def _speed_of_light(report, device: str) -> float | None:
    try:
        return roofline.floor_ms(report.flops, report.bytes_moved, roofline.peaks(device), LOOSE)
    except RuntimeError:  # the peaks could not be measured: the problem is still valid
        log.warning("no speed-of-light floor on %s", device, exc_info=True)
        return None
