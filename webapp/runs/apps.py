from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"

    def ready(self) -> None:
        # Queued runs go to their GPU type's queue (after commit: see lifecycle.py).
        from webapp.celery import send_run
        from webapp.runs.lifecycle import RUN_HOOKS

        if send_run not in RUN_HOOKS:
            RUN_HOOKS.append(send_run)
