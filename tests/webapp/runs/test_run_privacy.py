"""A run is as visible as its problem: others get 404 by get, list and events."""

from __future__ import annotations

from tests.webapp.conftest import api_client, make_problem, make_run
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
