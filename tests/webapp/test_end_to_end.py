"""The product end to end, as separate processes: upload through the REST API, validation and an
agent run on a real Celery worker, the live trace over a real websocket, the bundle built and
verified on its own; a run that survives its worker being killed; and a run that a hanging
validation does not hold up."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta

import pytest
from websockets.sync.client import connect

from tests.conftest import problem_source
from tests.webapp.conftest import make_problem
from tests.webapp.live_stack import CPU_QUEUES, LiveStack
from webapp.accounts.tokens import issue_token
from webapp.runs.models import TraceEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def watch(stack: LiveStack, run_id: int, token: str, after: int = 0, stop_after: int = 0):
    """Events from the websocket until the run's `ended` event (or `stop_after` events)."""
    url = f"ws://127.0.0.1:{stack.port}/ws/runs/{run_id}/?after={after}"
    headers = {"Authorization": f"Bearer {token}"}
    events = []
    with connect(url, additional_headers=headers, origin=stack.base_url) as socket:
        while True:
            event = json.loads(socket.recv(timeout=240))["event"]
            events.append(event)
            ended = event["kind"] == "status" and event["payload"]["state"] == "ended"
            if ended or len(events) == stop_after:
                return events


def test_an_uploaded_op_becomes_a_verified_kernel_that_builds_on_its_own(
    stack, alice, relu_scale, tmp_path
):
    _, token = issue_token(alice)
    status, problem = stack.api("POST", "/api/problems", token, {"source": relu_scale})
    assert status == 201, problem
    problem = stack.wait_for(
        lambda: _settled(stack.api("GET", f"/api/problems/{problem['id']}", token)[1]),
        300,
        "validation",
    )
    assert problem["status"] == "valid", problem["reasons"]
    assert problem["eager_ms"] > 0 and problem["sol_ms"] > 0

    body = {"problem_id": problem["id"], "agent": "scripted-demo", "gpu_type": "cpu"}
    status, run = stack.api("POST", "/api/runs", token, body)
    assert status == 201, run
    first = watch(stack, run["id"], token, stop_after=3)  # a viewer that leaves early...
    rest = watch(stack, run["id"], token, after=first[-1]["seq"])  # ...and comes back
    events = first + rest
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["payload"]["run_status"] == "succeeded", stack.logs()
    assert stack.api("GET", f"/api/runs/{run['id']}/events?limit=1000", token)[1] == events
    kinds = {e["kind"] for e in events}
    assert {"thought", "tool_call", "tool_result", "candidate"} <= kinds

    status, run = stack.api("GET", f"/api/runs/{run['id']}", token)
    assert (run["status"], run["best_candidate"] is not None) == ("succeeded", True)
    status, bundle = stack.api("GET", f"/api/runs/{run['id']}/bundle", token)
    assert status == 200
    zipfile.ZipFile(io.BytesIO(bundle)).extractall(tmp_path / "bundle")
    (folder,) = (tmp_path / "bundle").iterdir()
    built = subprocess.run(
        [sys.executable, "build.py", "--verify", "--device", "cpu"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr


def _settled(problem: dict) -> dict | None:
    return problem if problem["status"] in ("valid", "rejected") else None


def test_a_run_survives_its_worker_being_killed(stack, alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    _, token = issue_token(alice)
    body = {"problem_id": problem.pk, "agent": "scripted-slow", "gpu_type": "cpu"}
    status, run = stack.api("POST", "/api/runs", token, body)
    assert status == 201, run
    watch(stack, run["id"], token, stop_after=6)  # claimed, started, thoughts: it is mid-run
    stack.kill("worker-1")
    stack.start_worker("worker-2")

    events = watch(stack, run["id"], token)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    states = [e["payload"]["state"] for e in events if e["kind"] == "status"]
    assert "requeued" in states, stack.logs()
    assert states[-1] == "ended" and events[-1]["payload"]["run_status"] == "succeeded"
    status, run = stack.api("GET", f"/api/runs/{run['id']}", token)
    assert (run["status"], run["attempts"]) == ("succeeded", 2)


def test_a_run_whose_worker_is_stopped_goes_on_without_spending_an_attempt(
    stack, alice, relu_scale
):
    """A stopped worker (the stack's SIGTERM: a lent machine's call ending) notes it on the run
    it holds, and the run is sent again with that attempt not counted; the killed worker above
    is the known-bad beside it (no note: attempt 2)."""
    problem = make_problem(alice, relu_scale)
    _, token = issue_token(alice)
    body = {"problem_id": problem.pk, "agent": "scripted-slow", "gpu_type": "cpu"}
    status, run = stack.api("POST", "/api/runs", token, body)
    assert status == 201, run
    watch(stack, run["id"], token, stop_after=6)  # mid-run, its pauses still ahead
    stack.terminate("worker-1")
    # the supervisor's deadline ends the warm shutdown; here, once the worker noted its run
    noted = TraceEvent.objects.filter(run_id=run["id"], payload__state="stopping")
    stack.wait_for(lambda: noted.exists() or None, 60, "the stopping worker's note")
    stack.kill("worker-1")
    stack.start_worker("worker-2")

    events = watch(stack, run["id"], token)
    states = [e["payload"]["state"] for e in events if e["kind"] == "status"]
    assert "stopping" in states and "requeued" in states, stack.logs()
    requeued = next(e for e in events if e["payload"].get("state") == "requeued")
    assert "not counted" in requeued["payload"]["detail"]
    assert states[-1] == "ended" and events[-1]["payload"]["run_status"] == "succeeded"
    status, run = stack.api("GET", f"/api/runs/{run['id']}", token)
    assert (run["status"], run["attempts"]) == ("succeeded", 1)


def test_a_run_queued_while_the_broker_lost_its_tasks_still_runs(redis_server, tmp_path, alice,
                                                                 relu_scale):  # fmt: skip
    """The GPU host went away with its broker: the run is queued in the database but its task
    is gone. The next worker to start sends it again."""
    import redis

    stack = LiveStack(tmp_path).start_web()  # no worker yet: the task waits in the broker
    try:
        problem = make_problem(alice, relu_scale)
        _, token = issue_token(alice)
        body = {"problem_id": problem.pk, "agent": "scripted-demo", "gpu_type": "cpu"}
        status, run = stack.api("POST", "/api/runs", token, body)
        assert status == 201, run
        broker = redis.Redis.from_url(redis_server)
        stack.wait_for(lambda: broker.llen("gpu.cpu.run") or None, 30, "the task in the broker")
        broker.delete("gpu.cpu.run")  # lost with the host
        stack.start_worker("worker-1")

        events = watch(stack, run["id"], token)
        assert events[-1]["payload"]["run_status"] == "succeeded", stack.logs()
    finally:
        stack.stop()


def test_a_hanging_validation_never_delays_a_run(redis_server, alice, relu_scale, tmp_path):
    """Validation and runs have workers of their own (webapp/work_kinds.py): while a problem
    that hangs holds the validation worker, a run on another problem starts and ends; then the
    validation stops at its time limit and the problem is rejected saying so."""
    import redis

    redis.Redis.from_url(redis_server).delete(*CPU_QUEUES)
    stack = LiveStack(tmp_path)
    stack.env["KERNELARENA_VALIDATION_TIME_LIMIT_S"] = "30"
    stack.start_web()
    stack.start_worker("validator", ("validate",))
    stack.start_worker("runner", ("run", "grade"))
    try:
        _, token = issue_token(alice)
        body = {"source": problem_source("hangs_in_forward")}
        status, hanging = stack.api("POST", "/api/problems", token, body)
        assert status == 201, hanging

        def validating() -> bool:
            return stack.api("GET", f"/api/problems/{hanging['id']}", token)[1]["status"] == (
                "validating"
            )

        stack.wait_for(validating, 120, "the hanging problem's validation to start")
        run = stack.start_run(token, make_problem(alice, relu_scale).pk, "scripted-demo")
        events = watch(stack, run["id"], token)
        assert events[-1]["payload"]["run_status"] == "succeeded", stack.logs()
        run = stack.api("GET", f"/api/runs/{run['id']}", token)[1]
        problem = stack.wait_for(
            lambda: _settled(stack.api("GET", f"/api/problems/{hanging['id']}", token)[1]),
            120,
            "the validation to stop at its limit",
        )
    finally:
        stack.stop()
    assert problem["status"] == "rejected"
    assert problem["reasons"] == ["the validation did not finish within its time limit of 30 s"]
    # The run was taken while the validation hung: it did not wait for the validation's limit.
    started = datetime.fromisoformat(run["started"])
    stopped = datetime.fromisoformat(problem["validation_started"]) + timedelta(seconds=30)
    assert started < stopped, (run, problem)
