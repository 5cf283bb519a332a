"""Each kind of work stops at its own time limit (settings, webapp/work_kinds.py): the tasks
carry them as Celery's soft and hard limits, a validation stopped at its soft limit rejects the
problem saying so, and a validation whose worker was killed at the hard limit is ended by the
validation worker's reaper."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from gpu_workers import problem_validation, tasks
from gpu_workers.harness.sandbox import launch as sandbox
from tests.conftest import problem_source
from tests.webapp.conftest import make_problem
from tests.webapp.live_stack import read_process, still_running
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.validation import fail_overdue_validations


def test_each_task_carries_its_kinds_limits_from_settings():
    limits = {
        tasks.validate_problem: settings.VALIDATION_TIME_LIMIT_S,
        tasks.run_agent: settings.RUN_TIME_LIMIT_S,
        tasks.regrade_run: settings.REGRADE_TIME_LIMIT_S,
        tasks.measure_baselines: settings.BASELINE_TIME_LIMIT_S,
    }
    for task, limit in limits.items():
        assert (task.soft_time_limit, task.time_limit) == (limit, limit + tasks.GRACE_S), task.name


@pytest.fixture
def soft_limit_in():
    """Celery's soft limit as the pool delivers it: a signal whose handler raises
    SoftTimeLimitExceeded in the task, wherever it is waiting."""

    def arm(seconds: float) -> None:
        signal.signal(signal.SIGALRM, _raise_soft_limit)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    previous = signal.getsignal(signal.SIGALRM)
    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def _raise_soft_limit(*_):
    raise SoftTimeLimitExceeded()


@pytest.fixture
def sandboxes_started(monkeypatch) -> list:
    """What each sandbox started from here on runs as, read from /proc as it starts: bwrap
    and the sandbox's init (killing the init ends its whole pid namespace). Found by what
    this process started, not by name: other work on the host runs runners too."""
    started = []
    real_start = sandbox.start

    def recording(*args, **kwargs):
        proc = real_start(*args, **kwargs)
        found = map(read_process, (proc.pid, sandbox.root_pid(proc)))
        started.extend(p for p in found if p)
        return proc

    monkeypatch.setattr(sandbox, "start", recording)
    return started


def test_a_hanging_validation_stops_at_its_limit_and_says_so(
    alice, soft_limit_in, settings, db, sandboxes_started
):
    settings.VALIDATION_TIME_LIMIT_S = 1800
    problem = make_problem(alice, problem_source("hangs_in_forward"), valid=False)
    soft_limit_in(8)

    assert problem_validation.validate(problem.pk).endswith("stopped at the time limit")

    problem.refresh_from_db()
    assert problem.status == ProblemStatus.REJECTED
    assert problem.reasons == ["the validation did not finish within its time limit of 30 min"]
    assert problem.validation_started is not None
    assert sandboxes_started, "the validation started no sandbox: nothing was checked"
    left = still_running(sandboxes_started)
    assert left == [], "the sandboxed reference runner outlived its stopped validation"


def test_a_validation_killed_past_its_limit_is_ended_by_the_reaper(alice, relu_scale, settings):
    settings.VALIDATION_TIME_LIMIT_S = 600
    overdue, recent = (make_problem(alice, relu_scale + f"\n# {i}\n", valid=False) for i in "12")
    now = timezone.now()
    Problem.objects.filter(pk=overdue.pk).update(
        status=ProblemStatus.VALIDATING, validation_started=now - timedelta(seconds=661)
    )
    # Known-bad beside it: one still within its limit and grace is left to its worker.
    Problem.objects.filter(pk=recent.pk).update(
        status=ProblemStatus.VALIDATING, validation_started=now - timedelta(seconds=659)
    )

    assert fail_overdue_validations(grace_s=60) == 1

    overdue.refresh_from_db()
    recent.refresh_from_db()
    assert (overdue.status, overdue.reasons) == (
        ProblemStatus.REJECTED,
        ["the validation did not finish within its time limit of 10 min"],
    )
    assert recent.status == ProblemStatus.VALIDATING
