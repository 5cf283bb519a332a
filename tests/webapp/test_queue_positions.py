"""Pending and running work shows its time limit and its place in its queue: a problem's page
(validation), a run's page (its GPU type's run queue) and its re-grade, and the API. Positions
come from the database: the items of the same kind and GPU type sent earlier and still waiting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.leaderboard.models import Grade
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs.models import Candidate, Run, RunStatus


def page(user, path: str) -> str:
    client = Client()
    client.force_login(user)
    r = client.get(path)
    assert r.status_code == 200
    return r.content.decode()


def variants(owner, source: str, n: int) -> list[Problem]:
    return [make_problem(owner, source + f"\n# {i}\n", valid=False) for i in range(n)]


def test_a_pending_problem_shows_its_limit_and_place_in_the_validation_queue(
    alice, bob, relu_scale, settings
):
    settings.VALIDATION_TIME_LIMIT_S = 1800
    first = make_problem(bob, relu_scale, valid=False)  # anyone's pending problem is ahead
    second, third = variants(alice, relu_scale, 2)
    assert "Limit <strong" in page(alice, f"/problems/{second.pk}/")
    html = page(alice, f"/problems/{third.pk}/")
    queue = html.split('id="validation-queue"')[1].split("</p>")[0]
    assert (
        "30 min</strong>" in queue
        and "position <strong>3</strong> in the validation queue" in queue
    )
    assert api_client(alice).get(f"/api/problems/{third.pk}").json()["queue_position"] == 3

    Problem.objects.filter(pk=first.pk).update(status=ProblemStatus.VALIDATING)
    assert api_client(alice).get(f"/api/problems/{third.pk}").json()["queue_position"] == 2


def test_a_validating_problem_shows_how_long_of_its_limit_it_has_run(alice, relu_scale, settings):
    settings.VALIDATION_TIME_LIMIT_S = 3600
    problem = make_problem(alice, relu_scale, valid=False)
    started = timezone.now() - timedelta(minutes=4)
    Problem.objects.filter(pk=problem.pk).update(
        status=ProblemStatus.VALIDATING, validation_started=started
    )
    queue = page(alice, f"/problems/{problem.pk}/").split('id="validation-queue"')[1]
    shown = queue.split("</p>")[0]
    # the minutes as rendered, in the element the page's script counts on from (data-seconds)
    assert '60 min</strong>; validating for <span data-field="validating-for"' in shown
    assert ">4 min</span>." in shown
    body = api_client(alice).get(f"/api/problems/{problem.pk}").json()
    assert (body["queue_position"], body["validation_time_limit_s"]) == (None, 3600)


def test_a_settled_problem_shows_no_queue(alice, relu_scale):
    """Known-bad beside the tests above: a valid problem is in no queue."""
    problem = make_problem(alice, relu_scale)
    assert 'id="validation-queue"' not in page(alice, f"/problems/{problem.pk}/")
    assert api_client(alice).get(f"/api/problems/{problem.pk}").json()["queue_position"] is None


def test_a_queued_run_shows_its_place_in_its_gpu_types_run_queue(alice, bob, relu_scale, settings):
    settings.RUN_TIME_LIMIT_S = 7200
    problem = make_problem(alice, relu_scale, public=True)
    ahead = make_run(bob, problem)
    elsewhere = make_run(alice, problem)
    Run.objects.filter(pk=elsewhere.pk).update(gpu_type="h100")  # another queue: not ahead
    mine = make_run(alice, problem)
    html = page(alice, f"/runs/{mine.pk}/")
    assert "position 2 in the cpu run queue" in html
    assert '<dd data-field="time-limit">2 h once it starts</dd>' in html
    body = api_client(alice).get(f"/api/runs/{mine.pk}").json()
    assert (body["queue_position"], body["time_limit_s"]) == (2, 7200)

    Run.objects.filter(pk=ahead.pk).update(status=RunStatus.RUNNING)
    assert api_client(alice).get(f"/api/runs/{mine.pk}").json()["queue_position"] == 1


def test_a_running_run_shows_its_limit_and_no_queue(alice, relu_scale, settings):
    settings.RUN_TIME_LIMIT_S = 5400
    run = make_run(alice, make_problem(alice, relu_scale))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started=timezone.now())
    html = page(alice, f"/runs/{run.pk}/")
    assert '<dd data-field="time-limit">1 h 30 min</dd>' in html
    assert "run queue" not in html
    assert api_client(alice).get(f"/api/runs/{run.pk}").json()["queue_position"] is None


@pytest.mark.parametrize("ended", [RunStatus.SUCCEEDED, RunStatus.CANCELLED])
def test_an_ended_run_shows_neither(alice, relu_scale, ended):
    run = make_run(alice, make_problem(alice, relu_scale))
    Run.objects.filter(pk=run.pk).update(status=ended)
    html = page(alice, f"/runs/{run.pk}/")
    assert 'data-field="time-limit"' not in html and "run queue" not in html


def test_a_pending_regrade_shows_its_limit_and_place(alice, relu_scale, settings):
    settings.REGRADE_TIME_LIMIT_S = 1200
    problem = make_problem(alice, relu_scale)
    grades = []
    for _ in range(2):
        run = make_run(alice, problem)
        best = Candidate.objects.create(run=run, seq=1, sources={}, verified=True)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, best_candidate=best)
        grades.append(Grade.objects.create(run=run, candidate=best))
    queue = page(alice, f"/runs/{grades[1].run_id}/").split('id="regrade-queue"')[1]
    assert "20 min</strong>; position <strong>2</strong> in the cpu re-grade queue" in queue
