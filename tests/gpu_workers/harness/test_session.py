"""A Session judges each candidate in a fresh candidate process that got ready before its step
(issue 24): forked from the session's fork server (started when sources are first compiled)
after compiles, after a profile and (on a GPU host) while a step is judged, taken by one
candidate, then stopped. A prepared process that dies before any candidate code ran is the
harness's failure."""

from __future__ import annotations

import dataclasses
import threading
import time

from gpu_workers.harness import session as session_mod
from gpu_workers.harness import settings
from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge import gpu_lock, runner_process
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.judge.shared_buffers import DeviceMemoryExhausted
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.session import Session
from tests.conftest import candidate_dir, problem_source, record_timing_budgets
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
        # timed, clean or not: a busy host may hold a profile for review (drift, the clock),
        # which is not what this test of processes judges (a busy CI run failed it so)
        profiled = session.profile()
        assert profiled.get("candidate_ms"), profiled
        [second_process] = session._prepared  # the next candidate's, after the profile
        assert second_process.proc.pid != first_process.proc.pid
        _edit(session, "second candidate")
        assert session.compile()["ok"] and session._prepared == [second_process]
        second = session.verify()
        assert second["ok"], second
        assert _stopped(second_process)
        # eager alone was timed on the session's first step and stands for the next one, unless
        # a busy host disturbed the next one's measurement: its retry times eager alone afresh
        assert "eager alone" in first["phases_s"]
        retried = second["measurement_attempts"] > 1
        assert ("eager alone" in second["phases_s"]) == retried, second


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
        # topped up while the step was judged; a measurement a busy host disturbed is taken
        # again in the next prepared process, which each retry takes without a top-up
        retries = verdict["measurement_attempts"] - 1
        pool = list(session._prepared)
        assert len(pool) == max(0, 2 - retries) and oldest not in pool, verdict
        assert not any(map(_stopped, pool)), [p.output_tail() for p in pool]
        _edit(session, "second candidate")
        assert session.verify()["ok"]
        assert not pool or _stopped(pool[0]), "the oldest prepared process was not the one taken"
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


def test_the_baselines_are_measured_while_the_first_sources_compile(tmp_path, monkeypatch):
    """On a GPU the lock is idle while a run compiles (a build takes no device), so an agent's
    session measures the problem's baselines then, in the background, and the first profile
    finds them cached. Known-bad beside it: a session not asked to (a test's, a verify's) leaves
    nothing cached when its compile returns."""
    protocol = dataclasses.replace(
        LOOSE, name=f"ahead-{tmp_path.name}", compile_modes=(), timing_budget_s=0.1
    )
    cache = settings.cache_dir() / "baselines"
    monkeypatch.setitem(session_mod._BASELINES_AHEAD, "cpu", True)  # as on a GPU

    def cached() -> list:
        return list(cache.rglob(f"*-{protocol.name}-m*.json"))

    source = problem_source("relu_scale")
    with Session(source, device="cpu", protocol=protocol, baselines_ahead=False) as session:
        workspace.copy_candidate(session.workspace, candidate_dir("cpu", "good_relu_scale"))
        assert session.compile()["ok"] and cached() == []
    with Session(source, device="cpu", protocol=protocol, baselines_ahead=True) as session:
        workspace.copy_candidate(session.workspace, candidate_dir("cpu", "good_relu_scale"))
        assert session.compile()["ok"]
        session._wait_for_baselines_ahead()
        assert len(cached()) == 1  # before any profile asked
        profile = session.profile()
        assert profile["baselines_cached"] is True, profile
    for path in cached():
        path.unlink()


class _FullDevice:
    """The judge's allocations, the chosen ones failing as a full device fails them (runs
    sharing a GPU hold its memory too: a judge's cuMemAlloc ran out on an H200 in session 31).
    Every buffer made is kept, to see it freed."""

    def __init__(self, monkeypatch, failing):
        self.real, self.failing, self.calls, self.made = judge_mod.allocate, failing, 0, []
        monkeypatch.setattr(judge_mod, "allocate", self)

    def __call__(self, nbytes, device):
        self.calls += 1
        if self.failing(self.calls):
            raise DeviceMemoryExhausted("cuMemAlloc failed: out of memory (2)")
        self.made.append(self.real(nbytes, device))
        return self.made[-1]

    def all_freed(self) -> bool:
        return all(buffer.fd is None for buffer in self.made)


def test_a_judge_out_of_device_memory_judges_the_step_again(monkeypatch):
    """A set's second buffer (its output) finds the device full once: the step is judged again,
    and the buffer made before it is freed at once."""
    with _session(candidates=1) as session:
        assert session.compile()["ok"]
        device = _FullDevice(monkeypatch, lambda call: call == 2)
        verdict = session.verify()
        # known-bad (the judge's memory failure escapes the step): verify raises
        assert verdict["ok"], verdict
        # known-bad (what _lend made before the failure is kept): the first buffer's fd is open
        assert device.made and device.all_freed()


def test_a_judge_that_stays_out_of_device_memory_is_the_machines_failure(monkeypatch):
    with _session(candidates=1) as session:
        assert session.compile()["ok"]
        device = _FullDevice(monkeypatch, lambda call: True)
        failed = session.verify()
        assert not failed["ok"] and failed["failed_by"] == "infrastructure", failed
        assert "ran out of device memory" in failed["error"] and failed["violations"] == []
        assert device.calls == session_mod.JUDGE_MEMORY_ATTEMPTS
        # the same sources are judged again when asked (known-bad, a cached verdict: no call)
        session.verify()
        assert device.calls == 2 * session_mod.JUDGE_MEMORY_ATTEMPTS


def test_prebuilt_variants_compile_from_the_cache_when_judged():
    """A tune call's variants built side by side in copies of the workspace: each variant's own
    compile then finds its extension (the cache is keyed by the sources, not their folder). A
    variant that does not compile is not built, and its own compile reports the error as always
    (known-bad beside the good ones); the workspace itself is unchanged."""
    with _session() as session:
        kernel = session.read_file(KERNEL)
        variants = [{KERNEL: kernel + f"\n// prebuilt {n}\n"} for n in range(3)]
        variants.append({KERNEL: kernel + "\nthis is not C++;\n"})
        assert session.prebuild(variants) == 3
        assert session.read_file(KERNEL) == kernel
        compiled = []
        for files in variants:
            session.write_file(KERNEL, files[KERNEL])
            compiled.append(session.compile())
        assert [c["cached"] for c in compiled[:3]] == [True] * 3
        assert not compiled[3]["ok"] and "error" in compiled[3]["log"]
        assert not [p for p in session.workspace.root.parent.iterdir() if "variants" in p.name]


def test_a_screened_verdict_stands_only_while_screening(monkeypatch):
    """A tune call's screening: the step times the candidate for SCREENING_BUDGET_S (the budget
    time_candidate is given) and its verdict and profile say so; once screening ends, the same
    sources are judged again in full (known-bad: the screened verdict answering then)."""
    budgets = record_timing_budgets(monkeypatch)
    with _session() as session:
        assert session.compile()["ok"]
        with session.screening():
            screened = session.verify()
            assert session.profile().get("screened") and session.verify() is screened
        full = session.verify()
        assert screened["ok"] and screened["screened"], screened
        assert full["ok"] and "screened" not in full and not session.profile().get("screened")
        # one budget a timing attempt: a measurement a busy host disturbed is taken again
        screening = [session_mod.SCREENING_BUDGET_S] * screened["measurement_attempts"]
        assert budgets == screening + [None] * full["measurement_attempts"], (screened, full)
