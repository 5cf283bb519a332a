"""Asking the workers of a GPU type to measure a suite's baselines.

`request_baselines` marks one Baseline row per valid problem as requested and, once the
transaction commits, sends each row to the GPU type's queue (webapp.dispatch). The worker side is
gpu_workers.baseline_measurement.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from webapp.dispatch import send_after_commit
from webapp.suites.models import Baseline, Suite


class BaselinesRefused(Exception):
    """Nothing was requested; the message says what to do first."""


def request_baselines(
    suite: Suite, gpu_type: str, protocol: str, repeats: int, missing_only: bool = False
) -> list[Baseline]:
    """Requests every valid problem's baselines afresh, or with `missing_only` those of problems
    with none yet or whose last measurement failed (a request still waiting is left to its task:
    a worker that starts sends it again, gpu_workers/waiting_work.py), so a suite's baselines
    go on across machines without measuring again what was measured."""
    if missing := suite.sources_missing():  # a worker would measure an empty file
        raise BaselinesRefused(missing)
    rows = []
    with transaction.atomic():
        for problem in suite.valid_problems().order_by("suite_entries__position"):
            row, _ = Baseline.objects.get_or_create(
                problem=problem, gpu_type=gpu_type, protocol=protocol
            )
            if missing_only and row.requested is not None and not row.error:
                continue  # measured, or waiting for its worker
            Baseline.objects.filter(pk=row.pk).update(
                requested=timezone.now(), error="", repeats=repeats
            )
            rows.append(row)
            send_after_commit("measure_baselines", row.pk, gpu_type, repeats)
    return rows


def resend_baseline(baseline: Baseline) -> None:
    """The request again, as it was made (after its task was lost with the broker)."""
    send_after_commit("measure_baselines", baseline.pk, baseline.gpu_type, baseline.repeats)
