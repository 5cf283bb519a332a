"""`make run` (python -m webapp.serve) as people run it, as a real process: a worker killed with
SIGKILL is replaced while the site keeps answering, and its run ends exactly once; a stopped
stack, gently or hard, leaves no process behind; two stacks in one checkout never share a
broker, and a broker whose stack is gone is removed by the next stack."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.webapp.conftest import make_problem
from tests.webapp.live_stack import (
    REPO,
    LiveStack,
    descendants,
    still_running,
    wait_until,
)
from webapp import child_process, embedded_redis, local_stacks
from webapp import supervisor as supervisor_module
from webapp.accounts.tokens import issue_token
from webapp.supervisor import Backoff

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
CELERY_WORKER = "celery -A webapp.celery worker"
RUN_WORKER = "-Q gpu.cpu.run "


def test_a_killed_worker_is_restarted_and_its_run_ends_exactly_once(alice, relu_scale, tmp_path):
    stack = LiveStack(tmp_path).start_serve()
    try:
        problem = make_problem(alice, relu_scale)
        _, token = issue_token(alice)
        run = stack.start_run(token, problem.pk, "scripted-slow")
        stack.wait_for(lambda: len(_events(stack, run["id"], token)) >= 4, 120, "the run to work")
        (worker,) = stack.serve_children(RUN_WORKER)
        others = stack.serve_children(CELERY_WORKER)
        os.kill(worker.pid, signal.SIGKILL)  # the main process only, as the tester did

        def replaced() -> bool:
            assert stack.answers(), "the web server stopped answering when its worker died"
            return any(w != worker for w in stack.serve_children(RUN_WORKER))

        stack.wait_for(replaced, 60, "a new worker")
        ended = stack.wait_for(lambda: _ended(stack, run["id"], token), 180, "the run's end")
        events = _events(stack, run["id"], token)
        survivors = [w for w in others if w != worker]
        lived_on = still_running(survivors)
    finally:
        stack.stop()

    assert ended["status"] in ("succeeded", "failed"), ended
    assert ended["status"] == "succeeded" or ended["error"], "a failed run says why"
    states = [e["payload"]["state"] for e in events if e["kind"] == "status"]
    assert "requeued" in states, stack.logs()  # killed mid-run, re-queued by the reaper
    assert states.count("ended") == 1, states
    restarted = f"run worker (pid {worker.pid}) killed by SIGKILL; restarting it in 1 s"
    assert restarted in (tmp_path / "serve.log").read_text()
    # The validation and re-grade workers lived on: each kind of work has a worker of its own.
    assert len(survivors) == 2 and lived_on == survivors, stack.logs()


def _events(stack: LiveStack, run_id: int, token: str) -> list[dict]:
    status, events = stack.api("GET", f"/api/runs/{run_id}/events?limit=1000", token)
    assert status == 200, events
    return events


def _ended(stack: LiveStack, run_id: int, token: str) -> dict | None:
    status, run = stack.api("GET", f"/api/runs/{run_id}", token)
    assert status == 200, run
    return run if run["status"] in ("succeeded", "failed", "cancelled") else None


def test_stopped_stacks_leave_nothing_behind_and_never_share_a_broker(tmp_path):
    root = local_stacks.stacks_root(REPO)
    stale_folder = root / f"gone-{os.getpid()}"  # a stack that is gone left its broker running
    stale_folder.mkdir(parents=True)
    (stale_folder / local_stacks.LOCK_NAME).touch()
    stale_broker = embedded_redis.start(stale_folder / "redis.sock")
    for name in ("first", "second", "third"):
        (tmp_path / name).mkdir()
    first, second, third = stacks = [LiveStack(tmp_path / n) for n in ("first", "second", "third")]
    try:
        for stack in stacks:
            stack.start_serve()
        stale_broker.wait(timeout=10)  # shut down by the first stack to start
        assert not stale_folder.exists()

        sockets = [_broker_socket(stack) for stack in stacks]
        assert len(set(sockets)) == 3, "stacks in one checkout share a broker"
        assert all(embedded_redis.is_up(socket) for socket in sockets)
        started = [descendants(stack.processes["serve"].pid) for stack in stacks]
        for kind in ("validate", "run", "grade"):  # a worker per kind of work, in every stack
            assert all(f"-Q gpu.cpu.{kind} " in " ".join(p.command for p in ps) for ps in started)

        first.processes["serve"].send_signal(signal.SIGTERM)
        assert first.processes["serve"].wait(timeout=60) == 0, first.logs()
        assert still_running(started[0]) == [], first.logs()
        assert not sockets[0].parent.exists()
        assert second.answers() and embedded_redis.is_up(sockets[1])

        second.processes["serve"].kill()  # hard: nothing of it may clean up
        second.processes["serve"].wait(timeout=10)
        second.wait_for(lambda: not still_running(started[1]), 15, "its children to die")
        assert local_stacks.sweep_stale(root) == [sockets[1].parent]  # what the next start does

        (web,) = third.serve_children("uvicorn")
        os.kill(web.pid, signal.SIGKILL)  # the web server is the stack: it stops, all of it
        assert third.processes["serve"].wait(timeout=60) == 1, third.logs()
        assert still_running(started[2]) == [], third.logs()
        stopped = f"web (pid {web.pid}) killed by SIGKILL; stopping the stack"
        assert stopped in (third.folder / "serve.log").read_text()
    finally:
        for stack in stacks:
            stack.stop()
        child_process.kill(stale_broker)
        shutil.rmtree(stale_folder, ignore_errors=True)


def test_a_worker_that_keeps_dying_waits_longer_each_time_up_to_30_s():
    backoff = Backoff()
    assert [backoff.delay_after(uptime_s=2) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay_after(uptime_s=60) == 1  # it had stayed up: a fresh start
    assert backoff.delay_after(uptime_s=59) == 2


def test_a_process_left_behind_is_seen():
    """The known-bad input of the checks above: a process whose parent died, left to init."""
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        (orphan,) = wait_until(lambda: descendants(parent.pid), 10, "sleep")
        parent.kill()
        parent.wait()
        assert still_running([orphan]) == [orphan]
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
    wait_until(lambda: not still_running([orphan]), 10, "the orphan to die")


# A worker finishing a task: it takes SIGTERM, notes which of its siblings are still alive, and
# goes on until SIGKILL. Bash runs the trap between two short sleeps.
STUBBORN = """
seen() {
  for f in "$DIR"/*.pid; do kill -0 "$(cat "$f")" 2>/dev/null && echo alive || echo dead; done
}
trap 'seen >"$DIR/$NAME.seen"' TERM
echo $$ >"$DIR/$NAME.pid.tmp" && mv "$DIR/$NAME.pid.tmp" "$DIR/$NAME.pid"
while :; do sleep 0.1; done
"""


def test_the_workers_are_stopped_together_not_one_after_another(tmp_path, monkeypatch):
    """Twelve workers of a four-GPU host, each finishing a task, must not take twelve stop
    timeouts: every worker is asked to stop while all the others still run. (Known-bad: stopped
    one after another, the second finds the first already killed.)"""
    monkeypatch.setattr(supervisor_module, "STOP_TIMEOUT_S", 5.0)
    names = [f"worker{i}" for i in range(4)]
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    supervisor = supervisor_module.Supervisor()  # takes SIGINT and SIGTERM over
    for signum, handler in handlers.items():
        signal.signal(signum, handler)  # this test process's own, back
    for name in names:
        env = dict(os.environ, DIR=str(tmp_path), NAME=name)
        supervisor.add(name, lambda env=env: child_process.start(["bash", "-c", STUBBORN], env=env),
                       restarts=True)  # fmt: skip
    wait_until(lambda: len(list(tmp_path.glob("*.pid"))) == len(names) or None, 30, "workers")
    supervisor.stop()
    for name in names:
        seen = (tmp_path / f"{name}.seen").read_text().split()
        assert seen == ["alive"] * len(names), (name, seen)


# A worker finishing its task: on SIGTERM it works 2 s more, then writes that it finished.
FINISHING = """
trap 'sleep 2; echo finished >"$DIR/finished"; exit 0' TERM
echo $$ >"$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"
while :; do sleep 0.1; done
"""


@pytest.mark.parametrize("drain_s, finishes", [(30.0, True), (0.5, False)])
def test_the_workers_get_the_drain_to_finish_their_tasks(tmp_path, drain_s, finishes):
    """`python -m webapp.serve --drain-s` (gpu_suite_run.sh's, so that a call's last runs end
    rather than start again at the next call): a task that needs 2 s after the stop finishes
    within a 30 s drain, and is killed by a 0.5 s one (known-bad)."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    supervisor = supervisor_module.Supervisor(stop_timeout_s=drain_s)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    env = dict(os.environ, DIR=str(tmp_path))
    supervisor.add("worker", lambda: child_process.start(["bash", "-c", FINISHING], env=env),
                   restarts=True)  # fmt: skip
    wait_until(lambda: (tmp_path / "pid").is_file() or None, 30, "the worker")
    supervisor.stop()
    assert (tmp_path / "finished").is_file() is finishes


def _broker_socket(stack: LiveStack) -> Path:
    (broker,) = stack.serve_children("redis-server")  # its command line: "... unixsocket:PATH"
    return Path(broker.command.split("unixsocket:")[1])
