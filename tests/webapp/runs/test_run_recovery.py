"""webapp.runs.recovery.reap_stale_runs: a running run whose worker went silent goes back to the
queue for another attempt, or ends failed on its last one; live, queued and ended runs are left
alone, a run is recovered once however often the reaper runs, and a cancelled run whose worker
died still gets its `ended` event."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webapp.conftest import make_problem, make_run
from webapp import dispatch
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunStatus
from webapp.runs.recovery import note_workers_stopping, reap_stale_runs
from webapp.runs.trace import record_event

pytestmark = pytest.mark.usefixtures("redis_server")  # events are sent to viewers on commit


@pytest.fixture
def run_hook(monkeypatch):
    queued: list[tuple[int, str]] = []
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *args: queued.append(args))
    return queued


def running(owner, problem, *, silent_s: float, attempts: int = 1) -> Run:
    """A run claimed by host-a:1 whose last heartbeat was silent_s seconds ago."""
    run = make_run(owner, problem)
    assert run.claim("host-a:1")
    heartbeat = timezone.now() - timedelta(seconds=silent_s)
    Run.objects.filter(pk=run.pk).update(attempts=attempts, heartbeat=heartbeat)
    return Run.objects.get(pk=run.pk)


def states(run: Run) -> list[str]:
    return [e.payload.get("state") for e in run.events.order_by("seq")]


def test_it_requeues_a_run_whose_worker_went_silent(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    assert settings.RUN_MAX_ATTEMPTS == 2
    run = running(alice, make_problem(alice, relu_scale), silent_s=settings.RUN_STALE_AFTER_S + 5)

    with django_capture_on_commit_callbacks(execute=True):
        assert reap_stale_runs() == [run.pk]
        assert run_hook == []  # sent only once the transaction commits

    assert run_hook == [(run.pk, "cpu")]
    run.refresh_from_db()
    assert (run.status, run.worker, run.heartbeat, run.attempts) == ("queued", "", None, 1)
    assert run.error == "" and run.finished is None
    (event,) = run.events.all()
    assert (event.kind, event.payload["state"]) == ("status", "requeued")
    assert "host-a:1" in event.payload["detail"]
    assert "attempt 2 of 2 queued" in event.payload["detail"]
    # The next worker takes it as the second attempt.
    assert run.claim("host-b:2") and run.attempts == 2


def test_it_fails_a_run_on_its_last_attempt(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    run = running(alice, problem, silent_s=settings.RUN_STALE_AFTER_S + 5, attempts=2)

    with django_capture_on_commit_callbacks(execute=True):
        assert reap_stale_runs() == [run.pk]

    assert run_hook == []
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.finished is not None
    assert "its worker host-a:1 stopped answering" in run.error
    assert "on all 2 attempts" in run.error
    (event,) = run.events.all()
    assert event.payload == {"state": "ended", "run_status": "failed", "detail": run.error}


@pytest.mark.parametrize("noted", ["this attempt", "an earlier attempt", "never"])
def test_a_run_whose_worker_was_stopped_keeps_its_attempts(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks, noted
):
    """A worker stopped on purpose notes `stopping` on its runs: on its last attempt such a run
    is sent again, that attempt not counted. Known-bad beside it: a note from an earlier attempt
    (before this attempt's `claimed`), or none, and the run fails as any silent one."""
    problem = make_problem(alice, relu_scale)
    run = running(alice, problem, silent_s=0, attempts=1)
    other = running(alice, problem, silent_s=0)
    Run.objects.filter(pk=other.pk).update(worker="host-b:9")
    if noted == "an earlier attempt":
        note_workers_stopping(["host-a:1"])
    record_event(run, "status", {"state": "claimed", "worker": "host-a:1", "attempt": 2})
    if noted == "this attempt":
        assert note_workers_stopping(["host-a:1", "host-c:3"]) == [run.pk]
    stale = timezone.now() - timedelta(seconds=settings.RUN_STALE_AFTER_S + 5)
    Run.objects.filter(pk=run.pk).update(attempts=2, heartbeat=stale)

    with django_capture_on_commit_callbacks(execute=True):
        assert reap_stale_runs() == [run.pk]

    run.refresh_from_db()
    assert not other.events.filter(payload__state="stopping").exists()
    if noted == "this attempt":
        assert (run.status, run.attempts) == (RunStatus.QUEUED, 1)
        assert "not counted" in run.events.order_by("seq").last().payload["detail"]
        assert run_hook == [(run.pk, "cpu")]
    else:
        assert run.status == RunStatus.FAILED and "on all 2 attempts" in run.error
        assert run_hook == []


def test_it_leaves_live_queued_and_ended_runs_alone(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    live = running(alice, problem, silent_s=settings.RUN_STALE_AFTER_S - 30)
    queued = make_run(alice, problem)
    ended = running(alice, problem, silent_s=settings.RUN_STALE_AFTER_S * 10)
    Run.objects.filter(pk=ended.pk).update(status=RunStatus.SUCCEEDED)
    before = list(Run.objects.order_by("pk").values())

    with django_capture_on_commit_callbacks(execute=True):
        assert reap_stale_runs() == []

    assert list(Run.objects.order_by("pk").values()) == before
    assert not live.events.exists() and not queued.events.exists() and not ended.events.exists()
    assert run_hook == []


def test_it_recovers_a_run_once_when_called_twice(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    problem = make_problem(alice, relu_scale)
    silent_s = settings.RUN_STALE_AFTER_S + 5
    requeued = running(alice, problem, silent_s=silent_s)
    failed = running(alice, problem, silent_s=silent_s, attempts=2)

    with django_capture_on_commit_callbacks(execute=True):
        first = reap_stale_runs()
        second = reap_stale_runs()

    assert sorted(first) == sorted([requeued.pk, failed.pk]) and second == []
    assert states(requeued) == ["requeued"]
    assert states(failed) == ["ended"]
    assert run_hook == [(requeued.pk, "cpu")]


def test_it_ends_the_trace_of_a_cancelled_run_whose_worker_died(
    alice, relu_scale, run_hook, settings, django_capture_on_commit_callbacks
):
    # agent_run's promise: whatever happens after the claim, the last event is `ended`, and a
    # worker that dies first is covered here. The owner cancelled; the worker died before its
    # next step, so nobody else will write `ended`.
    run = running(alice, make_problem(alice, relu_scale), silent_s=0)
    lifecycle.cancel_run(run)
    stale = timezone.now() - timedelta(seconds=settings.RUN_STALE_AFTER_S + 5)
    Run.objects.filter(pk=run.pk).update(heartbeat=stale)

    with django_capture_on_commit_callbacks(execute=True):
        reap_stale_runs()

    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert states(run)[-2:] == ["cancel_requested", "ended"]
    assert run_hook == []
