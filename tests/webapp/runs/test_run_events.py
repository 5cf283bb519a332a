"""GET /api/runs/<id>/events?after=SEQ: the trace in order, resumable."""

from __future__ import annotations

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.trace import record_event


def test_it_numbers_events_from_one(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    seqs = [record_event(run, "thought", {"n": n}).seq for n in range(3)]
    assert seqs == [1, 2, 3]


def test_it_resumes_after_a_sequence_number(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    for kind in ("status", "thought", "tool_call", "tool_result", "candidate"):
        record_event(run, kind, {"kind": kind})
    client = api_client(alice)
    every = client.get(f"/api/runs/{run.pk}/events").json()
    assert [e["seq"] for e in every] == [1, 2, 3, 4, 5]
    rest = client.get(f"/api/runs/{run.pk}/events?after=2").json()
    assert [(e["seq"], e["kind"]) for e in rest] == [
        (3, "tool_call"),
        (4, "tool_result"),
        (5, "candidate"),
    ]
    assert client.get(f"/api/runs/{run.pk}/events?after=5").json() == []


def test_it_keeps_each_runs_sequence_apart(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    first, second = make_run(alice, problem), make_run(alice, problem)
    record_event(first, "status", {})
    assert record_event(second, "status", {}).seq == 1


def test_it_refuses_a_negative_after(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    r = api_client(alice).get(f"/api/runs/{run.pk}/events?after=-1")
    assert r.status_code == 422
    assert r.json()["detail"].startswith("after: ")
