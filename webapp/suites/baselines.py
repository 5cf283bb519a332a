"""Asking the workers of a GPU type to measure a suite's baselines.

`request_baselines` marks one Baseline row per valid problem as requested and, once the
transaction commits, calls each hook in BASELINE_HOOKS with (baseline id, GPU type, repeats). The
suites app registers webapp.celery.send_baselines when Django starts; tests swap the list. The
worker side is gpu_workers.baseline_measurement.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from webapp.suites.models import Baseline, Suite

BASELINE_HOOKS: list[Callable[[int, str, int], None]] = []


def request_baselines(suite: Suite, gpu_type: str, protocol: str, repeats: int) -> list[Baseline]:
    rows = []
    with transaction.atomic():
        for problem in suite.valid_problems().order_by("suite_entries__position"):
            row, _ = Baseline.objects.get_or_create(
                problem=problem, gpu_type=gpu_type, protocol=protocol
            )
            Baseline.objects.filter(pk=row.pk).update(
                requested=timezone.now(), error="", repeats=repeats
            )
            rows.append(row)
        ids = [row.pk for row in rows]
        transaction.on_commit(lambda: _send(ids, gpu_type, repeats))
    return rows


def resend_baseline(baseline: Baseline) -> None:
    """The request again, as it was made (after its task was lost with the broker)."""
    ids, gpu_type, repeats = [baseline.pk], baseline.gpu_type, baseline.repeats
    transaction.on_commit(lambda: _send(ids, gpu_type, repeats))


def _send(ids: list[int], gpu_type: str, repeats: int) -> None:
    for baseline_id in ids:
        for hook in BASELINE_HOOKS:
            hook(baseline_id, gpu_type, repeats)
