"""A worker lends the site's stored baselines to the harness: a run's profile compares with the
Baseline row the board divides by, and measures none of its own, where the row was measured by
the same method on the same machine model and software; anything else is measured as before.
The real harness on the cpu target, the real database; a scripted model runs the demo."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from gpu_workers import agent_run, regrade, stored_baselines
from gpu_workers.harness import settings as harness_settings
from gpu_workers.harness.judge import environment, profile
from gpu_workers.harness.judge.protocol import by_name
from tests.gpu_workers.test_agent_run import fixture_files
from tests.webapp.conftest import make_problem
from webapp import dispatch
from webapp.leaderboard import grading
from webapp.leaderboard.models import Grade
from webapp.runs.models import Run, RunStatus
from webapp.suites.models import Baseline

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]
LOOSE = by_name("loose")
STORED = {"eager_ms": 2.5, "compile_ms": 1.25, "compile_max_autotune_ms": 1.0}


def this_machine() -> dict:
    here = environment.describe("cpu", harness_settings.gpu_index())
    return {**here, "method": profile.BASELINE_METHOD}


def unstamped() -> dict:
    """This machine, as a row measured before the method was stored with the times says it."""
    return {k: v for k, v in this_machine().items() if k != "method"}


def stored_row(owner, source: str, **fields) -> Baseline:
    """A valid problem of its own (a fresh cache key) with a measured Baseline row on cpu."""
    problem = make_problem(owner, f"{source}\n# {uuid.uuid4().hex}\n")
    problem.flops, problem.bytes_moved = 1, 4  # a floor no kernel runs under
    problem.save()
    values = {**STORED, "environment": this_machine(), "measured": timezone.now(), **fields}
    return Baseline.objects.create(problem=problem, gpu_type="cpu", protocol="loose", **values)


def harness_baselines(problem, tmp_path) -> dict:
    path = tmp_path / "model.py"
    path.write_text(problem.source)
    return profile.baselines(path, "cpu", LOOSE, tmp_path)


@pytest.mark.usefixtures("drift_of_a_quiet_host")
def test_a_runs_profile_compares_with_the_stored_baselines(alice, relu_scale):
    row = stored_row(alice, relu_scale)
    run = Run.objects.create(
        problem=row.problem, owner=alice, agent="scripted-demo", gpu_type="cpu", protocol="loose"
    )
    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} succeeded"
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    measured = run.best_candidate.verdict["profile"]
    assert measured["baselines_cached"] is True
    assert (measured["eager_ms"], measured["compile_ms"]) == (2.5, 1.25)
    assert measured["speedup_vs_eager"] == pytest.approx(2.5 / measured["candidate_ms"])


@pytest.mark.usefixtures("drift_of_a_quiet_host")
def test_a_regrade_compares_with_the_stored_baselines(alice, relu_scale, monkeypatch):
    """The re-grade's fresh session times the run's best candidate against the row too, so the
    run, its re-grade and the board divide by the same times."""
    monkeypatch.setitem(dispatch.SENDERS, "regrade_run", lambda *args: None)
    row = stored_row(alice, relu_scale)
    run = Run.objects.create(
        problem=row.problem,
        owner=alice,
        agent="scripted-demo",
        gpu_type="cpu",
        protocol="loose",
        status=RunStatus.SUCCEEDED,
    )
    best = run.candidates.create(seq=1, sources=fixture_files("good_relu_scale"), verified=True)
    Run.objects.filter(pk=run.pk).update(best_candidate=best)
    grading.enqueue_regrade(Run.objects.get(pk=run.pk))
    regrade.regrade(run.pk, "test-worker")
    grade = Grade.objects.get(run=run)
    assert (grade.eager_ms, grade.compile_ms) == (2.5, 1.25), grade.reasons
    assert grade.verdict["profile"]["baselines_cached"] is True


def test_baselines_of_another_machine_or_method_are_not_lent(alice, relu_scale, tmp_path):
    """Known-bads: each row below differs from this machine in one thing, and the harness
    measures its own (a time of its own, not the row's 2.5 ms)."""
    unlike = [
        {"environment": {**this_machine(), "torch": "0.0.1"}},
        {"environment": {**this_machine(), "host": "another cpu"}},
        {"environment": {**this_machine(), "method": profile.BASELINE_METHOD - 1}},
        {"environment": unstamped(), "measured": timezone.now() - dt.timedelta(days=365)},
        {"error": "eager measured 9 ms at best, validation 1 ms: the machine was busy"},
        {"compile_max_autotune_ms": None},
    ]
    for fields in unlike:
        row = stored_row(alice, relu_scale, **fields)
        assert stored_baselines.lend(row.problem, "cpu", LOOSE) is False, fields
    measured = harness_baselines(row.problem, tmp_path)
    assert measured["cached"] is False and measured["eager_ms"] != 2.5


def test_a_row_from_before_the_method_was_stored_is_lent_when_measured_after_it(alice, relu_scale):
    row = stored_row(alice, relu_scale, environment=unstamped())
    assert stored_baselines.lend(row.problem, "cpu", LOOSE) is True


def test_the_machines_own_baselines_are_never_replaced(alice, relu_scale, tmp_path):
    row = stored_row(alice, relu_scale)
    own = harness_baselines(row.problem, tmp_path)
    assert own["cached"] is False
    assert stored_baselines.lend(row.problem, "cpu", LOOSE) is False
    assert harness_baselines(row.problem, tmp_path)["eager_ms"] == own["eager_ms"] != 2.5
