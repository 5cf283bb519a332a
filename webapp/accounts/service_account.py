"""The service's own account: it owns imported suites' problems and the runs of suite
evaluations, which an operator starts from the command line rather than a person from a page."""

from __future__ import annotations

from django.contrib.auth import get_user_model

USERNAME = "kernelarena"


def service_account():
    user, created = get_user_model().objects.get_or_create(username=USERNAME)
    if created:  # nobody logs in as the service
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
