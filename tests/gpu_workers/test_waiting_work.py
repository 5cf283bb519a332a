"""gpu_workers.waiting_work: what the database says is waiting goes to the workers again when a
worker starts (its task may have gone with the broker), each item once per start and only after
the transaction commits, and only the kinds of work its queues carry; finished work, other GPU
types and failed baselines stay as they are."""

from __future__ import annotations

import pytest
from django.utils import timezone

from gpu_workers.waiting_work import CLAIM_KEPT_S, claim_resending, resend_waiting_work
from tests.conftest import problem_source
from tests.webapp.conftest import make_problem, make_run
from webapp import dispatch
from webapp.leaderboard.models import Grade
from webapp.problems.models import ProblemStatus
from webapp.runs.models import Candidate, RunStatus
from webapp.suites.models import Baseline
from webapp.work_kinds import served

EVERY_KIND_ON_CPU = served(["gpu.cpu.validate", "gpu.cpu.run", "gpu.cpu.grade"])


@pytest.fixture
def sent(monkeypatch) -> dict[str, list]:
    """What each kind of task would have carried to the broker."""
    sent = {"runs": [], "problems": [], "baselines": [], "grades": []}
    kinds = {"run_agent": "runs", "validate_problem": "problems"}
    kinds |= {"measure_baselines": "baselines", "regrade_run": "grades"}
    for work, kind in kinds.items():
        monkeypatch.setitem(dispatch.SENDERS, work, lambda *a, kind=kind: sent[kind].append(a))
    return sent


def test_every_kind_of_waiting_work_is_sent_again_once(
    alice, relu_scale, sent, django_capture_on_commit_callbacks
):
    valid = make_problem(alice, relu_scale)
    pending = make_problem(alice, problem_source("row_sum"), valid=False)
    queued = make_run(alice, valid)
    graded = make_run(alice, valid)
    best = Candidate.objects.create(run=graded, seq=1, sources={}, verified=True)
    graded.status, graded.best_candidate = RunStatus.SUCCEEDED, best
    graded.save()
    Grade.objects.create(run=graded, candidate=best)
    baseline = Baseline.objects.create(
        problem=valid, gpu_type="cpu", protocol="loose", requested=timezone.now(), repeats=2
    )

    with django_capture_on_commit_callbacks(execute=True):
        counts = resend_waiting_work(EVERY_KIND_ON_CPU)
        assert sent == {"runs": [], "problems": [], "baselines": [], "grades": []}

    assert counts == {"runs": 1, "problems": 1, "baselines": 1, "grades": 1}
    assert sent["runs"] == [(queued.pk, "cpu")]
    assert sent["problems"] == [(pending.pk,)]
    assert sent["baselines"] == [(baseline.pk, "cpu", 2)]  # as it was requested
    assert sent["grades"] == [(graded.pk, "cpu")]


def test_finished_failed_and_foreign_work_is_left_alone(
    alice, relu_scale, sent, django_capture_on_commit_callbacks
):
    """Known-bad beside the test above: the same rows, each one state further on."""
    valid = make_problem(alice, relu_scale)
    rejected = make_problem(alice, problem_source("row_sum"), valid=False)
    rejected.status = ProblemStatus.REJECTED
    rejected.save()
    done = make_run(alice, valid)
    done.status = RunStatus.SUCCEEDED
    done.save()
    now = timezone.now()
    Baseline.objects.create(problem=valid, gpu_type="cpu", protocol="loose", requested=now,
                            measured=now)  # fmt: skip
    Baseline.objects.create(problem=valid, gpu_type="cpu", protocol="strict", requested=now,
                            error="out of memory")  # fmt: skip
    elsewhere = make_run(alice, valid)
    elsewhere.gpu_type = "h100"
    elsewhere.save()

    with django_capture_on_commit_callbacks(execute=True):
        counts = resend_waiting_work(EVERY_KIND_ON_CPU)

    assert counts == {"runs": 0, "problems": 0, "baselines": 0, "grades": 0}
    assert sent == {"runs": [], "problems": [], "baselines": [], "grades": []}


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        (["gpu.cpu.run"], {"runs": 1, "problems": 0, "baselines": 0, "grades": 0}),
        (["gpu.cpu.validate"], {"runs": 0, "problems": 1, "baselines": 0, "grades": 0}),
        (["gpu.cpu.grade"], {"runs": 0, "problems": 0, "baselines": 1, "grades": 0}),
        (["gpu.h100.run", "gpu.h100.validate"], {"runs": 0, "problems": 0, "baselines": 0,
                                                 "grades": 0}),
    ],
)  # fmt: skip
def test_a_worker_sends_again_only_the_kinds_of_work_its_queues_carry(
    alice, relu_scale, sent, django_capture_on_commit_callbacks, queues, expected
):
    """A run worker's start must not send validations again: each would be validated twice."""
    valid = make_problem(alice, relu_scale)
    make_problem(alice, problem_source("row_sum"), valid=False)
    make_run(alice, valid)
    Baseline.objects.create(
        problem=valid, gpu_type="cpu", protocol="loose", requested=timezone.now()
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert resend_waiting_work(served(queues)) == expected


def test_queue_names_say_kind_and_gpu_type():
    assert served(["gpu.cpu.run", "gpu.rtx-4090.run", "gpu.h100.validate", "web", "gpu.x"]) == {
        "validate": ["h100"],
        "run": ["cpu", "rtx-4090"],
        "grade": [],
    }


def test_the_first_worker_of_a_stack_claims_the_sending_and_the_rest_leave_it(redis_server):
    """A host of four GPUs starts four grade workers at once: one sends the waiting baselines
    again, not four. A real Redis, as the broker is. The next start of a stack (another folder
    name) sends again, and so does a worker of no stack (gpu_workers/tasks.py)."""
    import redis

    broker = redis.Redis.from_url(redis_server)
    grade_h200 = served(["gpu.h200.grade"])
    every_kind = served(["gpu.h200.validate", "gpu.h200.run", "gpu.h200.grade"])
    keys = []
    try:
        keys.append(claim_resending(grade_h200, broker, "4001-a1b2c3"))
        assert keys[0] is not None and 0 < broker.ttl(keys[0]) <= CLAIM_KEPT_S
        assert [claim_resending(grade_h200, broker, "4001-a1b2c3") for _ in range(3)] == [None] * 3
        keys.append(claim_resending(every_kind, broker, "4001-a1b2c3"))  # other queues: its own
        keys.append(claim_resending(grade_h200, broker, "4077-d4e5f6"))  # the next start
        assert None not in keys and len(set(keys)) == 3
    finally:
        broker.delete(*[key for key in keys if key])
