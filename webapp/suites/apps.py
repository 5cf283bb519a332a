from django.apps import AppConfig


class SuitesConfig(AppConfig):
    name = "webapp.suites"
    label = "suites"

    def ready(self) -> None:
        # Baseline measurements go to their GPU type's queue (after commit: see baselines.py).
        from webapp.celery import send_baselines
        from webapp.suites.baselines import BASELINE_HOOKS

        if send_baselines not in BASELINE_HOOKS:
            BASELINE_HOOKS.append(send_baselines)
