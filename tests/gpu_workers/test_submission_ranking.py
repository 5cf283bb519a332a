"""A person's own kernel from submission to suite board, with the real worker code in-process on
the cpu target (real compiler, sandbox and database; no mocks): lifecycle.start_submission
queues it, agent_run.run puts it through the tools, regrade.regrade grades it again with secret
seeds, and metrics.board ranks the person as a row of their own beside the agent."""

from __future__ import annotations

import json

import pytest

from gpu_workers import agent_run, problem_validation, regrade
from tests.agent.conftest import chat_server as chat_server  # noqa: F401 (the fixture)
from tests.conftest import candidate_dir
from tests.webapp.conftest import make_problem
from webapp import dispatch
from webapp.leaderboard import metrics
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunKind, RunStatus
from webapp.suites.models import Evaluation, Suite, SuiteProblem

# Runs that must succeed and grades that must rank: a busy host's drift is not what they test.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("redis_server", "drift_of_a_quiet_host", "regrade_of_a_quiet_host"),
]

GOOD_LINE = "y[i] = (v > 0.0f ? v : 0.0f) * scale;"


@pytest.fixture
def queues(monkeypatch) -> dict[str, list[tuple[int, str]]]:
    """What would have been sent to the workers: runs and re-grades, as (run id, GPU type)."""
    sent: dict[str, list[tuple[int, str]]] = {"runs": [], "regrades": []}
    monkeypatch.setitem(dispatch.SENDERS, "run_agent", lambda *a: sent["runs"].append(a))
    monkeypatch.setitem(dispatch.SENDERS, "regrade_run", lambda *a: sent["regrades"].append(a))
    return sent


# The validation's measurements, kept from the first test that validated the problem: each test
# starts from an empty database, and validating again would measure the same problem again.
VALIDATED: dict[str, object] = {}
MEASURED = ("status", "eager_ms", "compile_ms", "flops", "bytes_moved", "sol_ms", "validated_on")


@pytest.fixture
def suite(alice, relu_scale) -> Suite:
    """A suite of one problem, relu_scale, validated in the sandbox as a worker does."""
    problem = make_problem(alice, relu_scale, public=True, valid=False)
    if VALIDATED:
        Problem.objects.filter(pk=problem.pk).update(**VALIDATED)
    else:
        assert problem_validation.validate(problem.pk) == f"problem {problem.pk} valid"
        VALIDATED.update(Problem.objects.filter(pk=problem.pk).values(*MEASURED).get())
    suite = Suite.objects.create(name="relu-suite", protocol="loose")
    SuiteProblem.objects.create(suite=suite, problem=problem, name="relu_scale", position=1)
    assert suite.valid_problems().get() == problem
    return suite


def files(name: str) -> dict[str, str]:
    root = candidate_dir("cpu", name)
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def wrong_scale() -> dict[str, str]:
    """The good candidate, edited to multiply by scale + 0.5: it builds, runs and is wrong."""
    sources = files("good_relu_scale")
    kernel = sources["kernels/relu_scale.cpp"]
    assert GOOD_LINE in kernel
    sources["kernels/relu_scale.cpp"] = kernel.replace(
        GOOD_LINE, "y[i] = (v > 0.0f ? v : 0.0f) * (scale + 0.5f);"
    )
    return sources


def submit(owner, suite: Suite, sources: dict[str, str], queues) -> Run:
    problem = suite.problems.get()
    run = lifecycle.start_submission(owner, problem, sources, "cpu", "loose")
    assert queues["runs"][-1] == (run.pk, "cpu")  # sent to the cpu queue once committed
    assert (run.kind, run.agent, run.submitted_sources) == (
        RunKind.SUBMISSION,
        "submission",
        sources,
    )
    return run


def evaluate_agent(owner, suite: Suite, agent: str) -> Run:
    """One evaluation of the agent on the suite's one problem, run and re-graded."""
    evaluation = Evaluation.objects.create(
        suite=suite, owner=owner, agent=agent, gpu_type="cpu", protocol="loose"
    )
    run = Run.objects.create(
        problem=suite.problems.get(),
        owner=owner,
        agent=agent,
        gpu_type="cpu",
        protocol="loose",
        evaluation=evaluation,
    )
    assert agent_run.run(run.pk, "test") == f"run {run.pk} succeeded"
    assert regrade.regrade(run.pk, "test") == f"run {run.pk} re-graded: ranked"
    return run


def test_a_good_submission_ranks_as_its_persons_own_row(alice, bob, suite, queues):
    run = submit(alice, suite, files("good_relu_scale"), queues)

    assert agent_run.run(run.pk, "test") == f"run {run.pk} succeeded"

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.error == ""
    assert (run.prompt_tokens, run.completion_tokens, run.cost_dollars) == (0, 0, 0.0)
    (candidate,) = run.candidates.all()
    assert candidate.verified and candidate.sources == files("good_relu_scale")
    assert run.best_candidate == candidate
    states = [
        p.get("state") for p in run.events.filter(kind="status").values_list("payload", flat=True)
    ]
    assert states[-1] == "ended"
    written = run.events.filter(kind="tool_call", payload__name="write_file").count()
    assert written == len(candidate.sources)
    grade = Grade.objects.get(run=run)
    assert (grade.status, grade.candidate) == (GradeStatus.PENDING, candidate)
    assert queues["regrades"] == [(run.pk, "cpu")]

    assert regrade.regrade(run.pk, "test") == f"run {run.pk} re-graded: ranked"

    grade.refresh_from_db()
    assert grade.status == GradeStatus.RANKED and grade.reasons == []
    assert grade.secret_seeds == regrade.SECRET_SEEDS and grade.candidate_ms > 0
    assert grade.speedup_vs_eager > 0 and grade.speedup_vs_compile > 0

    agent = evaluate_agent(bob, suite, "scripted-demo")

    board = metrics.board(suite, "cpu", "loose")
    rows = {(r["kind"], r["entrant"]): r for r in board["rows"]}
    assert set(rows) == {("person", "alice"), ("agent", "scripted-demo")}
    person = rows["person", "alice"]
    assert (person["problems"], person["correct"], person["correct_rate"]) == (1, 1, 1.0)
    assert person["evaluation"] is None and person["runs"] == 1 and person["attempted"] == 1
    assert person["geomean_speedup_vs_compile"] == pytest.approx(grade.speedup_vs_compile)
    assert person["geomean_speedup_vs_eager"] == pytest.approx(grade.speedup_vs_eager)
    assert person["geomean_coverage"] == 1.0
    assert person["median_sol_fraction"] == pytest.approx(grade.sol_fraction)
    assert person["fast_1_0_vs_eager"] == float(grade.speedup_vs_eager >= 1.0)
    assert person["fast_1_0_vs_compile"] == float(grade.speedup_vs_compile >= 1.0)
    assert person["tokens_per_run"] == 0 and person["dollars_per_run"] == 0
    assert person["under_review"] == 0

    # The agent's row is its own evaluation's run, measured apart from alice's submission.
    agent_grade = Grade.objects.get(run=agent)
    machine = rows["agent", "scripted-demo"]
    assert machine["evaluation"] == agent.evaluation_id and machine["correct_rate"] == 1.0
    assert machine["geomean_speedup_vs_eager"] == pytest.approx(agent_grade.speedup_vs_eager)
    assert machine["tokens_per_run"] > 0
    assert sorted(r["rank"] for r in board["rows"]) == [1, 2]
    assert board["under_review"] == []


def test_a_wrong_submission_fails_and_is_never_counted_correct(alice, bob, suite, queues):
    run = submit(bob, suite, wrong_scale(), queues)

    assert agent_run.run(run.pk, "test") == f"run {run.pk} failed"

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("no verified candidate")
    assert run.best_candidate is None and run.best_speedup_vs_eager is None
    (candidate,) = run.candidates.all()
    assert not candidate.verified and not candidate.verdict["verify"]["ok"]
    assert "scale + 0.5f" in candidate.sources["kernels/relu_scale.cpp"]
    assert not Grade.objects.filter(run=run).exists() and queues["regrades"] == []
    assert regrade.regrade(run.pk, "test") == f"run {run.pk} has no pending grade"

    # Alone it is bob's attempt with nothing correct; beside alice's good one it changes nothing.
    good = submit(alice, suite, files("good_relu_scale"), queues)
    assert agent_run.run(good.pk, "test") == f"run {good.pk} succeeded"
    assert regrade.regrade(good.pk, "test") == f"run {good.pk} re-graded: ranked"

    board = metrics.board(suite, "cpu", "loose")
    rows = {(r["kind"], r["entrant"]): r for r in board["rows"]}
    assert set(rows) == {("person", "alice"), ("person", "bob")}
    wrong = rows["person", "bob"]
    assert (wrong["correct"], wrong["correct_rate"], wrong["fast_1_0_vs_eager"]) == (0, 0.0, 0.0)
    assert wrong["geomean_speedup_vs_compile"] is None and wrong["median_sol_fraction"] is None
    assert (wrong["runs"], wrong["attempted"], wrong["under_review"]) == (1, 1, 0)
    assert rows["person", "alice"]["correct_rate"] == 1.0
    assert rows["person", "alice"]["rank"] < wrong["rank"]
    assert board["under_review"] == []
    assert suite.problems.get().status == ProblemStatus.VALID


def test_a_priced_model_agent_ranks_with_its_spend_and_speedup_per_dollar(
    alice, suite, queues, chat_server, tmp_path, monkeypatch
):
    """A suite evaluation of a model agent (the real openai backend, a local chat server that
    reports 150 tokens a reply, the agent's prices): tokens, dollars, wall time and GPU time are
    recorded, and the agent ranks like any entrant, with its speedup per dollar."""
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.priced]\nbackend = "openai"\nmodel = "kernel-model"\n'
        f'base_url = "{chat_server.url}"\n'
        "[agents.priced.prices]\ninput_per_mtok = 1000.0\noutput_per_mtok = 2000.0\n"
    )
    monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(agents))
    sources = files("good_relu_scale")
    for path, text in sources.items():
        chat_server.plan_reply("", ("write_file", json.dumps({"path": path, "content": text})))
    chat_server.plan_reply("", ("verify", "{}"))
    chat_server.plan_reply("", ("finish", '{"summary": "fused"}'))
    replies = len(sources) + 2

    run = evaluate_agent(alice, suite, "priced")

    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (120 * replies, 30 * replies)
    # $1000 per million prompt tokens, $2000 per million completion tokens
    dollars = (120 * 1000 + 30 * 2000) * replies / 1e6
    assert run.cost_dollars == pytest.approx(dollars)
    (row,) = metrics.board(suite, "cpu", "loose")["rows"]
    grade = Grade.objects.get(run=run)
    assert (row["entrant"], row["kind"], row["rank"], row["correct_rate"]) == (
        "priced",
        "agent",
        1,
        1.0,
    )
    assert row["tokens_per_run"] == 150 * replies
    assert row["dollars_per_run"] == pytest.approx(dollars)
    assert row["speedup_per_dollar"] == pytest.approx(grade.speedup_vs_compile / dollars)
    assert row["wall_minutes_per_run"] > 0 and row["gpu_minutes_per_run"] > 0
