"""The --suite and --gpu options the suite commands share, checked with messages that say what
to use instead."""

from __future__ import annotations

from django.core.management.base import CommandError

from webapp.suites.models import Suite


def get_suite(name: str) -> Suite:
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        known = ", ".join(Suite.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(
            f"no suite {name!r} (known: {known}); import one with "
            "`python manage.py import_suite PATH --name NAME`"
        )
    return suite


def check_choice(kind: str, value: str, known: list[str]) -> str:
    if value not in known:
        raise CommandError(f"unknown {kind} {value!r}: use one of {', '.join(known)}")
    return value
