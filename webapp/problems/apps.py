from django.apps import AppConfig


class ProblemsConfig(AppConfig):
    name = "webapp.problems"
    label = "problems"

    def ready(self) -> None:
        # Stored problems go to the validation queue (after commit: see validation.py).
        from webapp.celery import send_validation
        from webapp.problems.validation import VALIDATION_HOOKS

        if send_validation not in VALIDATION_HOOKS:
            VALIDATION_HOOKS.append(send_validation)
