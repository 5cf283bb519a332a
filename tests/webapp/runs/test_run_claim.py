"""Run.claim is a conditional update: exactly one worker gets a queued run."""

from __future__ import annotations

from tests.webapp.conftest import make_problem, make_run
from webapp.runs.lifecycle import cancel_run
from webapp.runs.models import Run, RunStatus


def test_it_lets_only_the_first_worker_claim(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    same_row_elsewhere = Run.objects.get(pk=run.pk)
    assert run.claim("host-a:1") is True
    assert same_row_elsewhere.claim("host-b:2") is False
    run.refresh_from_db()
    assert (run.status, run.worker) == (RunStatus.RUNNING, "host-a:1")
    assert run.started is not None


def test_it_does_not_claim_a_cancelled_run(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    cancel_run(run)
    assert Run.objects.get(pk=run.pk).claim("host-a:1") is False
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
