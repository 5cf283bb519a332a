"""POST /api/runs/<id>/cancel: the owner only; 404 when the run cannot be seen."""

from __future__ import annotations

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.models import Run, RunStatus


def test_it_lets_the_owner_cancel(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    run.claim("host-a:1")
    r = api_client(alice).post(f"/api/runs/{run.pk}/cancel")
    assert r.status_code == 200
    assert r.json()["status"] == "cancelled" and r.json()["finished"] is not None


def test_it_forbids_others_who_can_see_the_run(alice, charlie, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale, public=True))
    r = api_client(charlie).post(f"/api/runs/{run.pk}/cancel")
    assert r.status_code == 403
    assert "only they can stop it" in r.json()["detail"]
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_it_hides_a_private_run_from_others(alice, bob, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    assert api_client(bob).post(f"/api/runs/{run.pk}/cancel").status_code == 404
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_it_refuses_to_cancel_a_finished_run(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    r = api_client(alice).post(f"/api/runs/{run.pk}/cancel")
    assert r.status_code == 409
    assert "already succeeded" in r.json()["detail"]
