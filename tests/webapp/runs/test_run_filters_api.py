"""GET /api/runs narrowed by status, agent, GPU type, problem and mine: each value is checked,
and one that names nothing is a 422 listing the values that exist, never a list of everything."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.models import Run, RunStatus


@pytest.fixture
def runs(alice, bob, relu_scale):
    """Alice's runs in several states, agents and GPU types, and one of Bob's on her public
    problem."""
    public = make_problem(alice, relu_scale, public=True)
    other = make_problem(alice, relu_scale + "\n# other\n")
    made = {
        "queued": make_run(alice, public),
        "failed": make_run(alice, public),
        "h100": make_run(alice, other),
        "old_agent": make_run(alice, other),
        "bobs": make_run(bob, public),
    }
    Run.objects.filter(pk=made["failed"].pk).update(status=RunStatus.FAILED)
    Run.objects.filter(pk=made["h100"].pk).update(gpu_type="h100", status=RunStatus.SUCCEEDED)
    # An agent since removed from the agents file: its runs can still be found.
    Run.objects.filter(pk=made["old_agent"].pk).update(agent="retired-agent")
    made["problems"] = (public, other)
    return made


def ids(client, query: str) -> list[int]:
    r = client.get(f"/api/runs?{query}")
    assert r.status_code == 200, r.json()
    return [run["id"] for run in r.json()]


def test_it_filters_by_status(alice, runs):
    client = api_client(alice)
    assert ids(client, "status=failed") == [runs["failed"].pk]
    assert ids(client, "status=succeeded") == [runs["h100"].pk]
    assert ids(client, "status=cancelled") == []


def test_it_filters_by_agent_including_one_no_longer_configured(alice, runs):
    client = api_client(alice)
    assert ids(client, "agent=retired-agent") == [runs["old_agent"].pk]
    expected = [runs[k].pk for k in ("bobs", "h100", "failed", "queued")]
    assert ids(client, "agent=scripted-demo") == expected


def test_it_filters_by_gpu_type_and_problem(alice, runs):
    client = api_client(alice)
    public, other = runs["problems"]
    assert ids(client, "gpu_type=h100") == [runs["h100"].pk]
    assert ids(client, f"problem={other.pk}") == [runs["old_agent"].pk, runs["h100"].pk]
    assert ids(client, f"problem={other.pk}&gpu_type=cpu") == [runs["old_agent"].pk]


def test_mine_leaves_out_other_peoples_runs_on_public_problems(alice, bob, runs):
    client = api_client(bob)
    public, _ = runs["problems"]
    everyone = ids(client, f"problem={public.pk}")
    assert runs["queued"].pk in everyone and runs["bobs"].pk in everyone
    assert ids(client, "mine=true") == [runs["bobs"].pk]
    assert ids(client, "mine=false&status=queued") == [runs["bobs"].pk, runs["queued"].pk]


def test_filters_combine(alice, runs):
    client = api_client(alice)
    assert ids(client, "mine=true&status=queued&agent=scripted-demo&gpu_type=cpu") == [
        runs["queued"].pk
    ]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("status=failed&agent=nope", "unknown agent 'nope': use one of "),
        ("gpu_type=tpu", "unknown GPU type 'tpu': use one of cpu, h100"),
        ("status=exploded", "status: Input should be 'queued', 'running', 'succeeded', 'failed'"),
        ("mine=perhaps", "mine: Input should be a valid boolean"),
        (
            "state=failed",
            "unknown query parameter 'state': use one of agent, gpu_type, limit, mine, offset, "
            "problem, status",
        ),
    ],
)
def test_a_value_that_names_nothing_is_refused_with_the_values_that_exist(alice, runs, query, says):
    """The known-bad filters: before, `?status=failed&agent=nope` answered every run."""
    r = api_client(alice).get(f"/api/runs?{query}")
    assert r.status_code == 422
    assert says in r.json()["detail"]


def test_the_refusal_lists_every_agent_that_can_be_asked_for(alice, runs):
    detail = api_client(alice).get("/api/runs?agent=nope").json()["detail"]
    for agent in ("retired-agent", "scripted-demo", "submission"):
        assert agent in detail
