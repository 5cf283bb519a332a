"""The --suite and --gpu options the suite commands share, checked with messages that say what
to use instead."""

from __future__ import annotations

from django.conf import settings
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


def check_gpu_type(value: str) -> str:
    """A GPU type the workers serve: the joined stack's GPU types (KERNELARENA_GPU_TYPES)."""
    served = list(settings.GPU_TYPES)
    if value not in served:
        raise CommandError(
            f"unknown GPU type {value!r}: use one of {', '.join(served)}, the GPU types whose "
            "queues have workers (`make run` serves its host's; KERNELARENA_GPU_TYPES names them "
            "for a stack of your own)"
        )
    return value


def check_choice(kind: str, value: str, known: list[str]) -> str:
    if value not in known:
        raise CommandError(f"unknown {kind} {value!r}: use one of {', '.join(known)}")
    return value
