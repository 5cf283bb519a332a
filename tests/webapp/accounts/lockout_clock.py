"""Time passing for django-axes: its recorded failures are moved back, as if minutes went by."""

from __future__ import annotations

from datetime import timedelta

from axes.models import AccessAttempt
from django.db.models import F


def minutes_pass(minutes: float) -> None:
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))
