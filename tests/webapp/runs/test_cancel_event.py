"""Cancelling through the API writes the trace's last word: `ended` for a queued run (nobody else
will), `cancel_requested` for a running one (its worker stops at its next step and ends it)."""

from __future__ import annotations

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.trace import record_event


def test_it_ends_the_trace_of_a_cancelled_queued_run(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    client = api_client(alice)

    assert client.post(f"/api/runs/{run.pk}/cancel").status_code == 200

    (event,) = client.get(f"/api/runs/{run.pk}/events").json()
    assert (event["seq"], event["kind"]) == (1, "status")
    assert event["payload"] == {
        "state": "ended",
        "run_status": "cancelled",
        "detail": "cancelled by its owner before it started",
    }


def test_it_asks_a_running_run_to_stop(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    run.claim("host-a:1")
    record_event(run, "status", {"state": "claimed", "worker": "host-a:1", "attempt": 1})
    record_event(run, "thought", {"turn": 1, "text": "look around"})
    client = api_client(alice)

    assert client.post(f"/api/runs/{run.pk}/cancel").status_code == 200

    events = client.get(f"/api/runs/{run.pk}/events").json()
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert (events[-1]["kind"], events[-1]["payload"]) == ("status", {"state": "cancel_requested"})
    assert not any(e["payload"].get("state") == "ended" for e in events)
