"""Every model has an admin page that loads."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from webapp.accounts.tokens import issue_token
from webapp.runs.trace import record_event


@pytest.mark.parametrize(
    "model",
    ["accounts/apitoken", "problems/problem", "runs/run", "runs/traceevent", "runs/candidate"],
)
def test_it_lists_and_opens_every_model(db, relu_scale, model):
    admin = User.objects.create_superuser("admin", "admin@example.org", "password")
    run = make_run(admin, make_problem(admin, relu_scale))
    record_event(run, "status", {"status": "queued"})
    run.candidates.create(seq=1, sources={"model_new.py": "x = 1\n"})
    issue_token(admin)
    client = Client()
    client.force_login(admin)
    assert client.get(f"/admin/{model}/").status_code == 200
    pk = apps.get_model(*model.split("/")).objects.get().pk
    assert client.get(f"/admin/{model}/{pk}/change/").status_code == 200
