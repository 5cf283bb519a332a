"""A Session judges each candidate in a fresh candidate process that got ready before its step
(issue 24): forked from the session's fork server (started when sources are first compiled)
after compiles, after a profile and (on a GPU host) while a step is judged, taken by one
candidate, then stopped. A prepared process that dies before any candidate code ran is the
harness's failure."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from gpu_workers.harness import session as session_mod
from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge import gpu_lock, runner_process
from gpu_workers.harness.judge import verify as verify_mod
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.session import Session
from tests.conftest import candidate_dir, problem_source
from tests.gpu_workers.harness.evaluation import codes

KERNEL = "kernels/relu_scale.cpp"


def _session(candidates: int | None = None) -> Session:
    session = Session(problem_source("relu_scale"), device="cpu", candidates=candidates)
    workspace.copy_candidate(session.workspace, candidate_dir("cpu", "good_relu_scale"))
    return session


def _edit(session: Session, mark: str) -> None:
    """Another candidate: the same kernel with a comment, so a fresh extension and verdict."""
    session.write_file(KERNEL, session.read_file(KERNEL) + f"\n// {mark}\n")


def _stopped(process: runner_process.RunnerProcess) -> bool:
    return process.proc.poll() is not None


def _compiled(session: Session) -> None:
    """Sources compiled and, once the fork server is up, the next processes forked."""
    assert session.compile()["ok"]
    assert session._server(wait=True) is not None, session.fork_server_why
    session._get_ready()


def test_each_candidate_runs_in_a_fresh_process_prepared_before_its_step():
    with _session() as session:
        _compiled(session)
        [first_process] = session._prepared  # getting ready while the sources compiled
        assert first_process.forked
        first = session.verify()
        assert first["ok"], first
        assert session._prepared == [] and _stopped(first_process)  # used once, then gone
        assert session.profile()["ok"]
        [second_process] = session._prepared  # the next candidate's, after the profile
        assert second_process.proc.pid != first_process.proc.pid
        _edit(session, "second candidate")
        assert session.compile()["ok"] and session._prepared == [second_process]
        second = session.verify()
        assert second["ok"], second
        assert _stopped(second_process)
        # eager alone was timed on the session's first step and stands for the next one
        assert "eager alone" in first["phases_s"] and "eager alone" not in second["phases_s"]


def test_a_gpu_hosts_pool_keeps_processes_starting_while_steps_are_judged(monkeypatch):
    """The cuda policy (several prepared, the pool topped up during steps), with two, on the
    cpu; a session told it judges one candidate prepares one."""
    monkeypatch.setitem(session_mod._PREPARED_PROCESSES, "cpu", 2)
    monkeypatch.setitem(session_mod._PREPARE_DURING_STEPS, "cpu", True)
    with _session() as session:
        _compiled(session)
        oldest, _ = session._prepared
        verdict = session.verify()
        assert verdict["ok"], verdict
        assert _stopped(oldest), "the oldest prepared process was not the one taken"
        # topped up while the step was judged (a measurement a busy host disturbed is taken
        # again in the next process, so which ones remain depends on the host)
        pool = list(session._prepared)
        assert len(pool) == 2 and oldest not in pool
        assert not any(map(_stopped, pool)), [p.output_tail() for p in pool]
        _edit(session, "second candidate")
        assert session.verify()["ok"] and _stopped(pool[0])
    with _session(candidates=1) as session:  # a submission, a re-grade
        _compiled(session)
        assert len(session._prepared) == 1
        assert session.verify()["ok"] and session._prepared == []


def test_a_prepared_process_that_died_is_replaced_and_never_blamed_on_the_candidate(
    monkeypatch,
):
    with _session() as session:
        _compiled(session)
        prepared = session._prepared[0]
        prepared.settle()  # it said it is ready (a forked process does in milliseconds)...
        sandbox.stop(prepared.proc)  # ...then died before its step
        replaced = session.verify()
        assert replaced["ok"], replaced
        # known-bad: every process the harness starts dies before it is ready
        real = runner_process.prepare_candidate

        def dying(*args, **kwargs):
            runner = real(*args, **kwargs)
            sandbox.stop(runner.proc)
            return runner

        monkeypatch.setattr(runner_process, "prepare_candidate", dying)
        _edit(session, "judged while the harness fails")
        failed = session.verify()
        assert not failed["ok"] and failed["failed_by"] == "infrastructure", failed
        assert "could not get ready" in failed["error"] and "process_exit" not in codes(failed)
        assert "forked candidate process failed" in session.fork_server_why  # then started


def test_a_steps_reference_starts_up_outside_the_gpu_lock():
    """A step waits for its reference runner's process to be up (an interpreter importing
    torch: seconds on a GPU host) before it takes the GPU lock, so another session's timing
    never waits on it. Known-bad, the step that waited under the lock: the reference would
    not have answered while the lock is held here."""
    with _session() as session:
        assert session.compile()["ok"]  # the reference starts while sources compile
        verdicts = []
        with gpu_lock.hold("cpu"):  # another session measuring
            step = threading.Thread(target=lambda: verdicts.append(session.verify()))
            step.start()
            deadline = time.monotonic() + 300

            def up() -> bool:
                return session._reference is not None and session._reference._asked is None

            while not up() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert up(), "the reference was waited for under the lock"
            assert not session._reference_loaded  # loading the problem waits for the lock
        step.join(timeout=600)
        assert verdicts and verdicts[0]["ok"], verdicts
        assert "reference ready" in verdicts[0]["phases_s"]


def test_trials_share_the_gpu_and_only_timing_holds_it_alone(monkeypatch):
    """The cuda policy (_SHARED_TRIALS), on the cpu: a step's trials run in a candidate process
    of their own while another run shares the GPU (its untimed work), and the step asks to hold
    it alone only to time, in a second process. Known-bad, trials under the lock held alone:
    the step asks for it first and waits there for the other run (["asks alone"])."""
    monkeypatch.setitem(session_mod._SHARED_TRIALS, "cpu", True)
    events, asked_alone = [], threading.Event()
    real_hold, real_trials = gpu_lock.hold, verify_mod.trials

    @contextmanager
    def observed_hold(device):
        events.append("asks alone")
        asked_alone.set()
        with real_hold(device) as waited:
            yield waited

    def observed_trials(*args, **kwargs):
        events.append("trials")
        return real_trials(*args, **kwargs)

    monkeypatch.setattr(gpu_lock, "hold", observed_hold)
    monkeypatch.setattr(verify_mod, "trials", observed_trials)
    with _session() as session:
        _compiled(session)
        verdicts = []
        with gpu_lock.share("cpu"):  # another run's untimed work
            step = threading.Thread(target=lambda: verdicts.append(session.verify()))
            step.start()
            assert asked_alone.wait(timeout=300)
            assert events == ["trials", "asks alone"] and not verdicts
        step.join(timeout=600)
    [verdict] = verdicts
    assert verdict["ok"], verdict
    phases = verdict["phases_s"]
    assert {"shared trials", "timing"} <= set(phases) and "trials" not in phases, phases


def test_a_candidate_that_fails_its_shared_trials_is_judged_again_alone(monkeypatch):
    """A neighbour may take memory a candidate needs: a verdict reached beside others never
    stands. Known-bad, the shared verdict kept: no "trials" phase."""
    monkeypatch.setitem(session_mod._SHARED_TRIALS, "cpu", True)
    with _session() as session:
        workspace.copy_candidate(session.workspace, candidate_dir("cpu", "wrong_result"))
        assert session.compile()["ok"]
        verdict = session.verify()
    assert not verdict["ok"] and "mismatch" in codes(verdict), verdict
    assert {"shared trials", "trials"} <= set(verdict["phases_s"]), verdict["phases_s"]
