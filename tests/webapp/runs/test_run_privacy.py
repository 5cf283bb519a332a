"""A run is as visible as its problem: others get 404 by get, list and events, and no filter
of the list (nor any combination of them) brings it back; My runs shows only one's own."""

from __future__ import annotations

import itertools

from django.test import Client

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.models import Run, RunStatus
from webapp.runs.trace import record_event


def test_it_hides_a_run_on_a_private_problem(alice, bob, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    record_event(run, "thought", {"text": "secret plan"})
    client = api_client(bob)
    assert client.get("/api/runs").json() == []
    assert client.get(f"/api/runs?problem={run.problem_id}").json() == []
    assert client.get(f"/api/runs/{run.pk}").status_code == 404
    r = client.get(f"/api/runs/{run.pk}/events")
    assert (r.status_code, r.json()) == (404, {"detail": f"no run {run.pk} that you can see"})


def test_it_shows_runs_on_a_public_problem(alice, charlie, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale, public=True))
    client = api_client(charlie)
    assert [r["id"] for r in client.get("/api/runs").json()] == [run.pk]
    assert client.get(f"/api/runs/{run.pk}").json()["owner"] == "alice"


def test_no_filter_combination_shows_a_run_on_someone_elses_private_problem(alice, bob, relu_scale):
    secret = make_run(alice, make_problem(alice, relu_scale))
    Run.objects.filter(pk=secret.pk).update(status=RunStatus.FAILED, agent="secret-agent")
    bobs = make_run(bob, make_problem(bob, relu_scale, public=True))
    client = api_client(bob)
    values = {
        "status": [None, "failed", "queued"],
        "agent": [None, "scripted-demo"],
        "gpu_type": [None, "cpu"],
        "problem": [None, secret.problem_id, bobs.problem_id],
        "mine": [None, "true", "false"],
    }
    for combination in itertools.product(*values.values()):
        query = "&".join(
            f"{k}={v}" for k, v in zip(values, combination, strict=True) if v is not None
        )
        r = client.get(f"/api/runs?{query}")
        assert r.status_code == 200, (query, r.json())
        assert secret.pk not in [run["id"] for run in r.json()], query
    # Its agent is no value Bob may filter by: the list of agents comes from runs he can see.
    r = client.get("/api/runs?agent=secret-agent")
    assert r.status_code == 422 and "secret-agent" not in r.json()["detail"].split(": ", 1)[1]


def test_my_runs_never_shows_another_persons_run(alice, bob, relu_scale):
    """Not even Bob's run on Alice's own public problem, nor one filtered for by its problem."""
    problem = make_problem(alice, relu_scale, public=True)
    bobs = make_run(bob, problem)
    client = Client()
    client.force_login(alice)
    for query in ("", f"?problem={problem.pk}", "?status=queued", "?agent=scripted-demo"):
        html = client.get(f"/runs/{query}").content.decode()
        assert f"/runs/{bobs.pk}/" not in html, query
    form = client.get("/runs/").content.decode().split('id="run-filters"')[1].split("</form>")[0]
    assert "relu scale" not in form  # not even the problem of Bob's run is offered
