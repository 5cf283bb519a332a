"""gpu_workers.agent_run.run: a claimed run ends succeeded, failed (with why) or cancelled, and its
trace ends with `ended`. The real harness on the cpu target and the real database, written from
more than one thread (the heartbeat, a cancel); a scripted model stands in for the LLM."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from gpu_workers import agent_run
from tests.conftest import candidate_dir
from tests.webapp.conftest import make_problem
from webapp.runs.lifecycle import cancel_run
from webapp.runs.models import Run, RunStatus

REPO = Path(__file__).resolve().parents[2]
SHIPPED_SCRIPT = REPO / "agent" / "configs" / "scripts" / "relu_scale_cpu.json"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]


@pytest.fixture
def agents(tmp_path, monkeypatch):
    """Writes an agents file of scripted agents (name -> action list, or a script's path) and
    makes it the one agent_run loads."""

    def write(scripts: dict[str, list[dict] | Path]) -> Path:
        lines = []
        for name, script in scripts.items():
            if isinstance(script, list):
                path = tmp_path / f"{name}.json"
                path.write_text(json.dumps(script))
            else:
                path = script
            lines += [
                f"[agents.{name}]",
                'backend = "scripted"',
                f"script = {json.dumps(str(path.resolve()))}",
                f"[agents.{name}.budget]",
                "max_turns = 30",
                "",
            ]
        agents_file = tmp_path / "agents.toml"
        agents_file.write_text("\n".join(lines))
        monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(agents_file))
        return agents_file

    return write


def queued_run(owner, source: str, agent: str) -> Run:
    problem = make_problem(owner, source)
    return Run.objects.create(
        problem=problem, owner=owner, agent=agent, gpu_type="cpu", protocol="loose"
    )


def trace(run: Run) -> list[tuple[int, str, dict]]:
    return list(run.events.order_by("seq").values_list("seq", "kind", "payload"))


def write_files_action(files: dict[str, str]) -> dict:
    calls = [{"tool": "write_file", "args": {"path": p, "content": t}} for p, t in files.items()]
    return {"thought": "Write the kernel.", "calls": calls}


def fixture_files(name: str) -> dict[str, str]:
    root = candidate_dir("cpu", name)
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # succeeded, whatever a busy host's drift
def test_it_ends_a_scripted_run_succeeded_with_its_trace_and_candidate(
    alice, relu_scale, agents, settings
):
    agents({"scripted-demo": SHIPPED_SCRIPT})
    settings.RUN_HEARTBEAT_S = 0.2  # the heartbeat thread writes while the agent does
    run = queued_run(alice, relu_scale, "scripted-demo")

    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} succeeded"

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert (run.error, run.worker, run.attempts) == ("", "host-a:1", 1)
    # An ended run has no heartbeat: no worker answers for it any more.
    assert run.heartbeat is None and run.finished is not None
    assert run.prompt_tokens > 0 and run.completion_tokens > 0

    events = trace(run)
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert events[0][1:] == ("status", {"state": "claimed", "worker": "host-a:1", "attempt": 1})
    assert events[1][2]["state"] == "started"
    assert events[-2][2]["state"] == "finished"
    kind, last = events[-1][1:]
    assert kind == "status" and last["state"] == "ended" and last["run_status"] == "succeeded"
    assert {"thought", "tool_call", "tool_result", "candidate"} <= {k for _, k, _ in events}

    (candidate,) = run.candidates.all()
    assert candidate.seq == 1 and candidate.verified
    assert run.best_candidate == candidate
    assert sorted(candidate.sources) == [
        "kernels/relu_scale.cpp",
        "kernels/relu_scale_binding.cpp",
        "model_new.py",
    ]
    assert 'extern "C" void relu_scale_kernel' in candidate.sources["kernels/relu_scale.cpp"]
    verdict = candidate.verdict
    assert {"verify", "profile", "environment", "protocol"} <= set(verdict)
    assert verdict["verify"]["ok"] and verdict["profile"]["ok"]
    assert verdict["environment"]["device"] == "cpu" and verdict["protocol"]["name"] == "loose"
    assert run.best_speedup_vs_eager == verdict["profile"]["speedup_vs_eager"] > 0
    assert run.best_speedup_vs_compile == candidate.speedup_vs_compile
    # The candidate events carry the stored candidate's number, for viewers to fetch it.
    assert {p["seq"] for _, k, p in events if k == "candidate"} == {1}


def test_it_fails_a_run_whose_only_kernel_is_wrong(alice, relu_scale, agents):
    # tests/fixtures/candidates/cpu/wrong_result: every output element is 1.0 too high.
    script = [
        write_files_action(fixture_files("wrong_result")),
        {"thought": "Build it.", "tool": "compile"},
        {"thought": "Check it.", "tool": "verify"},
        {"thought": "Done.", "tool": "finish", "args": {"summary": "off by one"}},
    ]
    agents({"wrong-kernel": script})
    run = queued_run(alice, relu_scale, "wrong-kernel")

    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} failed"

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.finished is not None
    assert run.error == "no verified candidate (finished): off by one"
    assert run.best_candidate is None and run.best_speedup_vs_eager is None
    (candidate,) = run.candidates.all()
    assert not candidate.verified and not candidate.verdict["verify"]["ok"]
    assert candidate.sources["kernels/relu_scale.cpp"].startswith("// Wrong")
    _, kind, last = trace(run)[-1]
    assert (kind, last["state"], last["run_status"]) == ("status", "ended", "failed")
    assert last["detail"] == run.error


@pytest.mark.parametrize(
    ("agent", "agents_file_text", "reason"),
    [
        ("no-such-agent", None, "no agent 'no-such-agent' in "),
        ("lost-script", None, "lost-script.json"),
        ("scripted-demo", "not = [toml", "agents.toml"),
    ],
    ids=["unknown agent", "missing script", "broken agents file"],
)
def test_it_fails_a_run_whose_agent_cannot_load(
    alice, relu_scale, agents, tmp_path, agent, agents_file_text, reason
):
    agents_file = agents({"scripted-demo": SHIPPED_SCRIPT, "lost-script": [{"tool": "finish"}]})
    (tmp_path / "lost-script.json").unlink()
    if agents_file_text is not None:
        agents_file.write_text(agents_file_text)
    run = queued_run(alice, relu_scale, agent)

    outcome = agent_run.run(run.pk, "host-a:1")

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.finished is not None
    assert run.error.startswith(outcome)
    first_line = run.error.splitlines()[0]
    assert first_line.startswith("the worker could not run the agent: ")
    assert reason in first_line
    assert run.best_candidate is None and not run.candidates.exists()
    states = [p.get("state") for _, _, p in trace(run)]
    assert states == ["claimed", "ended"]
    assert trace(run)[-1][2]["run_status"] == "failed"


def test_it_does_nothing_when_called_again_on_an_ended_run(alice, relu_scale, agents):
    agents({"scripted-demo": SHIPPED_SCRIPT})
    run = queued_run(alice, relu_scale, "no-such-agent")  # ends at once, failed
    agent_run.run(run.pk, "host-a:1")
    before = Run.objects.filter(pk=run.pk).values().get()
    events = trace(run)

    outcome = agent_run.run(run.pk, "host-b:2")

    assert outcome.startswith(f"run {run.pk} was not queued")
    assert Run.objects.filter(pk=run.pk).values().get() == before
    assert trace(run) == events


def test_it_leaves_a_run_claimed_by_another_worker_alone(alice, relu_scale, agents):
    agents({"scripted-demo": SHIPPED_SCRIPT})
    run = queued_run(alice, relu_scale, "scripted-demo")
    assert run.claim("host-a:1")
    before = Run.objects.filter(pk=run.pk).values().get()

    assert "was not queued" in agent_run.run(run.pk, "host-b:2")

    assert Run.objects.filter(pk=run.pk).values().get() == before
    assert not run.events.exists()
    assert agent_run.run(run.pk + 1000, "host-b:2") == f"run {run.pk + 1000} no longer exists"


def wait_until(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        time.sleep(0.05)


def test_it_stops_a_cancelled_run_at_its_next_step(alice, relu_scale, agents):
    # 30 s of steps: stopping at the next step is told from running on by a margin no busy
    # host's scheduling crosses
    slow = [{"thought": f"look {i}", "tool": "list_files", "delay_s": 0.5} for i in range(60)]
    agents({"slow": slow})
    run = queued_run(alice, relu_scale, "slow")
    outcomes: list[str] = []

    def work() -> None:
        try:
            outcomes.append(agent_run.run(run.pk, "host-a:1"))
        finally:
            connection.close()  # this thread's own connection

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    wait_until(lambda: run.events.filter(kind__in=["thought", "tool_call"]).exists(), 60)
    cancel_run(run)
    cancelled_at = time.monotonic()
    worker.join(timeout=20)

    assert not worker.is_alive()
    assert time.monotonic() - cancelled_at < 15
    assert outcomes == [f"run {run.pk} cancelled"]
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.finished is not None
    events = trace(run)
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    states = [p.get("state") for _, kind, p in events if kind == "status"]
    assert "cancel_requested" in states
    assert states[-2:] == ["cancelled", "ended"]
    assert events[-1][2]["run_status"] == "cancelled"
    thoughts = [p["text"] for _, kind, p in events if kind == "thought"]
    assert 1 <= len(thoughts) < 10


def test_a_kernel_that_verifies_then_fails_its_profile_is_no_result(alice, relu_scale, agents):
    """attack_forges_times verifies (the right answer) and is then caught forging its times:
    the run's best, set when it verified, is withdrawn and the run ends failed."""
    script = [
        write_files_action(fixture_files("attack_forges_times")),
        {"thought": "Build it.", "tool": "compile"},
        {"thought": "Check it.", "tool": "verify"},
        {"thought": "Time it.", "tool": "profile"},
        {"thought": "Done.", "tool": "finish", "args": {"summary": "fast, it says"}},
    ]
    agents({"forger": script})
    run = queued_run(alice, relu_scale, "forger")

    assert agent_run.run(run.pk, "host-a:1") == f"run {run.pk} failed"

    run.refresh_from_db()
    assert run.best_candidate is None and run.best_speedup_vs_eager is None
    (candidate,) = run.candidates.all()
    assert candidate.verdict["verify"]["ok"] and not candidate.verified
    assert "timing_inconsistent" in {v["code"] for v in candidate.verdict["profile"]["violations"]}
    # known-bad: it was the run's best once it verified (the status event of that turn says so)
    bests = [p.get("best") for _, k, p in trace(run) if k == "status" and p["state"] == "running"]
    assert any(bests) and bests[-1] is None


@pytest.mark.parametrize("changed", [True, False])
def test_an_evaluation_run_does_not_start_once_its_agent_changed(
    alice, relu_scale, agents, changed
):
    """A suite evaluation is one agent configuration: a run of it still queued when the agents
    file changes that agent is cancelled, saying so, rather than mixing two agents under one
    entrant. Known-bad beside it: the same configuration, and the run goes on."""
    from agent.config import load_agent
    from webapp.suites.models import Evaluation, Suite

    agents({"scripted-demo": SHIPPED_SCRIPT})
    identity = load_agent("scripted-demo").identity()
    if changed:
        identity = {**identity, "fingerprint": "0" * 16}
    suite = Suite.objects.create(name="one")
    evaluation = Evaluation.objects.create(
        suite=suite, owner=alice, agent="scripted-demo", gpu_type="cpu", protocol="loose",
        agent_identity=identity,
    )  # fmt: skip
    run = queued_run(alice, relu_scale, "scripted-demo")
    Run.objects.filter(pk=run.pk).update(evaluation=evaluation)

    outcome = agent_run.run(run.pk, "host-a:1")

    run.refresh_from_db()
    states = [p.get("state") for _, _, p in trace(run)]
    if changed:
        assert run.status == RunStatus.CANCELLED and states == ["claimed", "ended"]
        assert f"changed since evaluation {evaluation.pk} started" in run.error
        assert outcome.startswith(f"run {run.pk} cancelled")
    else:
        assert run.status != RunStatus.CANCELLED and "started" in states
