"""GET /api/runs/<id> carries the run's re-grade (`grade`): its status, times, speedups, fraction
of speed of light, whether it counts, and the reasons when it is held; null when there is none.
The schema is documented in /api/openapi.json. Another person's private run stays a 404."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.runs.models import Candidate, RunStatus

pytestmark = pytest.mark.django_db
HELD = "the re-grade measured 0.37x vs eager; the run measured 1.43x"


def graded_run(owner, source, status: str, **measured):
    run = make_run(owner, make_problem(owner, source))
    best = Candidate.objects.create(run=run, seq=2, verified=True)
    run.status, run.best_candidate = RunStatus.SUCCEEDED, best
    run.save()
    Grade.objects.create(run=run, candidate=best, status=status, **measured)
    return run


def grade_of(user, run) -> dict | None:
    answer = api_client(user).get(f"/api/runs/{run.pk}")
    assert answer.status_code == 200, answer.content
    return answer.json()["grade"]


def test_a_ranked_regrade_counts_with_its_own_numbers(alice, relu_scale):
    measured = {
        "candidate_ms": 0.5,
        "eager_ms": 1.0,
        "compile_ms": 0.75,
        "compile_max_autotune_ms": 0.7,
        "speedup_vs_eager": 2.0,
        "speedup_vs_compile": 1.5,
        "sol_ms": 0.1,
        "sol_fraction": 0.2,
        "max_rel_err": 1e-6,
        "secret_seeds": 3,
        "graded": timezone.now(),
    }
    run = graded_run(alice, relu_scale, GradeStatus.RANKED, **measured)
    grade = grade_of(alice, run)
    assert grade["status"] == "ranked" and grade["counts"] is True
    assert grade["candidate"] == 2 and grade["reasons"] == []
    assert {key: grade[key] for key in measured if key != "graded"} == {
        key: value for key, value in measured.items() if key != "graded"
    }
    assert grade["graded"] is not None and grade["queue_position"] is None


def test_a_held_regrade_does_not_count_and_says_why(alice, relu_scale):
    apart = {
        "limit": 1.5,
        "run": {"candidate_ms": 0.1, "speedup_vs_eager": 1.43, "speedup_vs_compile": 1.1},
        "regrade": [{"candidate_ms": 0.39, "speedup_vs_eager": 0.37, "speedup_vs_compile": 0.3}],
        "agrees": False,
    }
    run = graded_run(alice, relu_scale, GradeStatus.UNDER_REVIEW, reasons=[HELD], agreement=apart)
    grade = grade_of(alice, run)
    assert (grade["status"], grade["counts"], grade["reasons"]) == ("under_review", False, [HELD])
    assert grade["agreement"] == apart  # both figures, for a client as for the page


def test_a_run_that_found_nothing_faster_than_eager_says_so(alice, relu_scale):
    run = graded_run(alice, relu_scale, GradeStatus.RANKED, speedup_vs_eager=0.5)
    answer = api_client(alice).get(f"/api/runs/{run.pk}").json()
    assert (answer["status"], answer["outcome"]) == ("succeeded", "finished: nothing faster")
    another = relu_scale + "\n# another problem\n"
    faster = graded_run(alice, another, GradeStatus.RANKED, speedup_vs_eager=2.0)
    assert api_client(alice).get(f"/api/runs/{faster.pk}").json()["outcome"] == "succeeded"


def test_a_pending_regrade_has_its_place_in_the_queue(alice, relu_scale):
    grade = grade_of(alice, graded_run(alice, relu_scale, GradeStatus.PENDING))
    assert (grade["status"], grade["counts"], grade["queue_position"]) == ("pending", False, 1)
    assert grade["speedup_vs_eager"] is None


def test_a_run_without_a_regrade_says_null(alice, relu_scale):
    assert grade_of(alice, make_run(alice, make_problem(alice, relu_scale))) is None


def test_another_persons_private_run_and_its_regrade_stay_hidden(alice, charlie, relu_scale):
    run = graded_run(alice, relu_scale, GradeStatus.RANKED, speedup_vs_eager=2.0)
    answer = api_client(charlie).get(f"/api/runs/{run.pk}")
    assert answer.status_code == 404 and "2.0" not in answer.content.decode()


def test_the_regrade_is_documented_in_the_api_schema(client):
    schema = client.get("/api/openapi.json").json()
    detail = schema["components"]["schemas"]["RunDetailOut"]["properties"]["grade"]
    assert "re-grade" in detail["description"]
    grade = schema["components"]["schemas"]["GradeOut"]["properties"]
    assert {"status", "counts", "reasons", "speedup_vs_eager", "sol_fraction"} <= set(grade)
    assert grade["counts"]["description"]
