"""What a model, a candidate or a model server wrote is stored whole but for what PostgreSQL
refuses (webapp/storable.py): a model server's reply quoted in an agent's health report, with a
NUL and a lone surrogate in it, is saved and read back with U+FFFD in their place. The
known-bad beside it, where the database is PostgreSQL (CI's): the same report saved as it came
is refused."""

from __future__ import annotations

import math

import pytest
from django.db import DataError, connection, transaction
from django.utils import timezone

from webapp.runs.models import AgentHealth
from webapp.storable import storable

pytestmark = pytest.mark.django_db
REPLY = {"check": "tool_call", "reply": "ok\x00 \ud800", "times": [1.0, math.nan, math.inf]}


def health(report: dict) -> AgentHealth:
    return AgentHealth.objects.create(
        agent="served", level="ok", summary="fine", report=report, checked=timezone.now()
    )


def test_a_report_with_what_postgresql_refuses_is_stored_with_replacements():
    saved = health(storable(REPLY))
    saved.refresh_from_db()
    assert saved.report == {
        "check": "tool_call",
        "reply": "ok\ufffd \ufffd",
        "times": [1.0, None, None],
    }


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite stores NUL and NaN")
def test_known_bad_the_report_as_it_came_is_refused_by_postgresql():
    with pytest.raises(DataError), transaction.atomic():
        health({"reply": "ok\x00"})
