"""The leaderboard's numbers (webapp.leaderboard.standings) against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from tests.webapp.conftest import make_problem, make_run
from webapp.leaderboard.standings import DEFINITIONS, board_gpu_types, standings
from webapp.runs.models import Candidate, RunStatus


def problem(owner, source: str, n: int, public: bool = True):
    return make_problem(owner, f"{source}\n# variant {n}\n", public=public)


def finished_run(
    owner,
    problem,
    speedup: float | None,
    *,
    agent: str = "scripted-demo",
    status: str = RunStatus.SUCCEEDED,
    verified: bool = True,
    gpu_type: str = "cpu",
    protocol: str = "loose",
    tokens: tuple[int, int] = (0, 0),
    dollars: float = 0.0,
):
    run = make_run(owner, problem)
    run.agent, run.status, run.gpu_type, run.protocol = agent, status, gpu_type, protocol
    run.prompt_tokens, run.completion_tokens, run.cost_dollars = *tokens, dollars
    if speedup is not None:
        best = Candidate.objects.create(
            run=run, seq=1, verified=verified, speedup_vs_compile=speedup
        )
        run.best_candidate, run.best_speedup_vs_compile = best, speedup
        run.best_speedup_vs_eager = speedup * 2
    run.save()
    return run


def row_of(rows: list[dict], agent: str, protocol: str = "loose") -> dict:
    return next(r for r in rows if r["agent"] == agent and r["protocol"] == protocol)


def test_it_takes_the_geometric_mean_of_the_best_run_per_problem(alice, relu_scale):
    p1, p2 = problem(alice, relu_scale, 1), problem(alice, relu_scale, 2)
    finished_run(alice, p1, 2.0)
    finished_run(alice, p1, 1.5)  # the agent's best on p1 stays 2.0
    finished_run(alice, p2, 0.5)
    (row,) = standings("cpu")
    assert row["agent"] == "scripted-demo" and row["protocol"] == "loose"
    assert (row["runs"], row["attempted"], row["verified"]) == (3, 2, 2)
    assert row["correct_rate"] == 1.0
    assert row["geomean_speedup_vs_compile"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert row["fast_1_0_vs_compile"] == 0.5  # p1 only
    assert row["rank"] == 1


def test_it_counts_a_failed_problem_as_attempted_only(alice, relu_scale):
    p1, p2, p3 = (problem(alice, relu_scale, n) for n in (1, 2, 3))
    finished_run(alice, p1, 3.0)
    finished_run(alice, p2, None, status=RunStatus.FAILED)  # no verified candidate
    finished_run(alice, p3, 9.0, verified=False)  # a best candidate that failed verification
    (row,) = standings("cpu")
    assert (row["runs"], row["attempted"], row["verified"]) == (3, 3, 1)
    assert row["correct_rate"] == pytest.approx(1 / 3)
    assert row["geomean_speedup_vs_compile"] == pytest.approx(3.0)
    assert row["fast_1_0_vs_compile"] == pytest.approx(1 / 3)


def test_it_counts_only_ended_runs_on_public_problems_of_that_gpu_type(alice, bob, relu_scale):
    public, private = problem(alice, relu_scale, 1), problem(bob, relu_scale, 2, public=False)
    finished_run(alice, public, 4.0)
    for status in (RunStatus.CANCELLED, RunStatus.RUNNING, RunStatus.QUEUED):
        finished_run(alice, public, 8.0, status=status)
    finished_run(bob, private, 8.0)
    finished_run(alice, public, 8.0, gpu_type="h100")
    (row,) = standings("cpu")
    assert (row["runs"], row["attempted"]) == (1, 1)
    assert row["geomean_speedup_vs_compile"] == pytest.approx(4.0)
    assert standings("h100")[0]["geomean_speedup_vs_compile"] == pytest.approx(8.0)
    assert standings("a100") == []


def test_it_averages_tokens_and_dollars_per_run(alice, relu_scale):
    p1 = problem(alice, relu_scale, 1)
    finished_run(alice, p1, 1.0, tokens=(100, 50), dollars=0.10)
    finished_run(alice, p1, None, status=RunStatus.FAILED, tokens=(300, 150), dollars=0.30)
    (row,) = standings("cpu")
    assert row["tokens_per_run"] == pytest.approx(300)
    assert row["dollars_per_run"] == pytest.approx(0.20)


def test_it_ranks_by_geomean_then_correct_rate_within_each_protocol(alice, relu_scale):
    p1, p2 = problem(alice, relu_scale, 1), problem(alice, relu_scale, 2)
    finished_run(alice, p1, 1.2, agent="slow")
    finished_run(alice, p1, 2.0, agent="fast")
    finished_run(alice, p2, 2.0, agent="fast")
    finished_run(alice, p1, 1.2, agent="unlucky")
    finished_run(alice, p2, None, agent="unlucky", status=RunStatus.FAILED)
    finished_run(alice, p1, None, agent="nothing", status=RunStatus.FAILED)
    finished_run(alice, p1, 0.9, agent="strict", protocol="fp32-strict")
    rows = standings("cpu")
    loose = [(r["rank"], r["agent"]) for r in rows if r["protocol"] == "loose"]
    assert loose == [(1, "fast"), (2, "slow"), (3, "unlucky"), (4, "nothing")]
    assert row_of(rows, "nothing")["geomean_speedup_vs_compile"] is None
    assert row_of(rows, "strict", "fp32-strict")["rank"] == 1
    assert [r["agent"] for r in standings("cpu", protocol="fp32-strict")] == ["strict"]


def test_it_gives_a_geomean_of_many_problems(alice, relu_scale):
    speedups = [1.1, 0.7, 3.2, 1.9]
    for n, speedup in enumerate(speedups):
        finished_run(alice, problem(alice, relu_scale, n), speedup)
    (row,) = standings("cpu")
    expected = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    assert row["geomean_speedup_vs_compile"] == pytest.approx(expected)


def test_it_defines_every_column(db):
    keys = [key for key, _, _ in DEFINITIONS]
    assert len(keys) == len(set(keys))
    assert {"rank", "agent", "correct_rate", "geomean_speedup_vs_compile"} <= set(keys)


def test_it_lists_configured_gpu_types_first(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 1.0, gpu_type="a100")
    assert board_gpu_types() == ["cpu", "a100"]
