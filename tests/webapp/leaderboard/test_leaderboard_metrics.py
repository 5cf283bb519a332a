"""A suite's board (webapp.leaderboard.metrics) against values worked out by hand.

One realistic suite is built with the ORM, no mocks: 5 valid problems (P1…P5), 1 rejected one
in the suite (R) and a valid problem outside it (X); results on the GPU type "h100" under the
suite's protocol "loose". Every share is over the 5 valid problems.

Entrants:
- agent "fusion": its latest evaluation (an older one, and newer ones on another GPU type,
  protocol or suite, are ignored) has 3 ranked results, 1 failed run and 1 result under review;
- agent "naive": its latest evaluation has 2 ranked results (an even count, for the median);
- person "alice": two ranked submissions on P1 (the faster one counts) and one on P2;
- person "bob": one submission under review and one failed;
- the compiler, torch.compile (max-autotune), from the stored baselines.
A paper's ReportedResult is returned apart and never ranked.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.webapp.conftest import make_problem
from webapp.leaderboard import metrics
from webapp.leaderboard.formatting import cells
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.leaderboard.problem_results import problem_results
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs.models import Candidate, Run, RunKind, RunStatus
from webapp.suites.models import Baseline, Evaluation, ReportedResult, Suite, SuiteProblem

GPU = "h100"
PROTOCOL = "loose"
RANKED, HELD = GradeStatus.RANKED, GradeStatus.UNDER_REVIEW
SUCCEEDED, FAILED = RunStatus.SUCCEEDED, RunStatus.FAILED


def problem(owner, source: str, n: int, title: str, *, valid: bool = True) -> Problem:
    """A problem of its own sha256: the init constant differs (11.5, 12.5, …)."""
    varied = source.replace("return [1.5]", f"return [{n + 10}.5]")
    assert varied != source
    created = make_problem(owner, varied, public=True, valid=valid)
    created.title = title
    if not valid:
        created.status = ProblemStatus.REJECTED
    created.save()
    return created


def run(
    owner,
    problem: Problem,
    *,
    kind: str = RunKind.AGENT,
    evaluation: Evaluation | None = None,
    status: str = SUCCEEDED,
    gpu_type: str = GPU,
    protocol: str = PROTOCOL,
    tokens: tuple[int, int] = (0, 0),
    dollars: float = 0.0,
    gpu_seconds: float = 0.0,
) -> Run:
    return Run.objects.create(
        problem=problem,
        owner=owner,
        agent=evaluation.agent if evaluation else "",
        kind=kind,
        evaluation=evaluation,
        status=status,
        gpu_type=gpu_type,
        protocol=protocol,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        cost_dollars=dollars,
        gpu_seconds=gpu_seconds,
    )


def grade(
    run: Run,
    *,
    status: str = RANKED,
    ms: float = 1.0,
    s_compile: float | None = 1.0,
    s_eager: float | None = 1.0,
    sol: float | None = 0.5,
) -> Grade:
    candidate = Candidate.objects.create(run=run, seq=1, verified=True)
    return Grade.objects.create(
        run=run,
        candidate=candidate,
        status=status,
        reasons=["time under the speed-of-light floor"] if status == HELD else [],
        candidate_ms=ms,
        speedup_vs_compile=s_compile,
        speedup_vs_eager=s_eager,
        sol_fraction=sol,
    )


def ranked_run(owner, problem, **kwargs) -> Run:
    """A succeeded run with a ranked grade; grade() takes ms, s_compile, s_eager, sol."""
    grading = {k: kwargs.pop(k) for k in ("ms", "s_compile", "s_eager", "sol") if k in kwargs}
    made = run(owner, problem, **kwargs)
    grade(made, **grading)
    return made


def evaluation(suite: Suite, owner, agent: str, **kwargs) -> Evaluation:
    fields = {"gpu_type": GPU, "protocol": PROTOCOL, **kwargs}
    return Evaluation.objects.create(suite=suite, owner=owner, agent=agent, **fields)


@pytest.fixture
def world(alice, bob, relu_scale) -> dict:
    suite = Suite.objects.create(name="level-1", protocol=PROTOCOL)
    p1, p2, p3, p4, p5 = (problem(alice, relu_scale, n, f"P{n}") for n in range(1, 6))
    rejected = problem(alice, relu_scale, 6, "R", valid=False)
    outside = problem(alice, relu_scale, 7, "X")  # valid, but in no suite of this test
    for position, member in enumerate((p1, p2, p3, p4, p5, rejected), start=1):
        SuiteProblem.objects.create(
            suite=suite, problem=member, name=member.title, position=position
        )
    other_suite = Suite.objects.create(name="level-2", protocol=PROTOCOL)
    SuiteProblem.objects.create(suite=other_suite, problem=outside, name="X", position=1)

    # Agent "fusion": the latest evaluation counts. It is created first (a lower id) and the
    # older one is back-dated, so "latest" has to mean the creation time.
    fusion = evaluation(suite, alice, "fusion")
    older = evaluation(suite, alice, "fusion")
    Evaluation.objects.filter(pk=older.pk).update(created=timezone.now() - timedelta(days=7))
    for member in (p1, p2, p3, p4, p5):  # much better, and ignored
        ranked_run(alice, member, evaluation=older, tokens=(9_000, 0), ms=0.01, s_compile=9.0)
    for gpu_type, protocol in (("a100", PROTOCOL), (GPU, "fp32-strict")):
        newer = evaluation(suite, alice, "fusion", gpu_type=gpu_type, protocol=protocol)
        ranked_run(alice, p4, evaluation=newer, gpu_type=gpu_type, protocol=protocol, ms=0.01)
    elsewhere = evaluation(other_suite, alice, "fusion")
    ranked_run(alice, outside, evaluation=elsewhere, s_compile=9.0)

    # Each speedup is a stored baseline (below) over the time: P1's compile 2.0 / 1.0 ms. The
    # re-grade's own (s_compile, s_eager) count only where no baseline is stored.
    f1 = ranked_run(
        alice, p1, evaluation=fusion, tokens=(1000, 200), dollars=0.30, gpu_seconds=30,
        ms=1.0, s_compile=2.0, s_eager=4.0, sol=0.9,
    )  # fmt: skip
    f2 = ranked_run(
        alice, p2, evaluation=fusion, tokens=(800, 200), dollars=0.20, gpu_seconds=24,
        ms=2.0, s_compile=1.05, s_eager=1.0, sol=0.4,
    )  # fmt: skip
    f3 = ranked_run(
        alice, p3, evaluation=fusion, tokens=(1500, 300), dollars=0.45, gpu_seconds=45,
        ms=4.0, s_compile=0.5, s_eager=0.75, sol=0.2,
    )  # fmt: skip
    f4 = run(
        alice, p4, evaluation=fusion, status=FAILED, tokens=(3000, 600), dollars=0.90
    )  # no verified candidate: no grade
    f5 = run(alice, p5, evaluation=fusion, tokens=(300, 100), dollars=0.15, gpu_seconds=21)
    fusion_held = grade(f5, status=HELD, ms=0.001, s_compile=50.0, s_eager=90.0, sol=3.0)
    # Runs that must not count: not ended, or on a problem that is not a valid one of the suite.
    for status in (RunStatus.CANCELLED, RunStatus.QUEUED, RunStatus.RUNNING):
        run(alice, p4, evaluation=fusion, status=status, tokens=(50_000, 0), dollars=9.0)
    ranked_run(alice, rejected, evaluation=fusion, tokens=(50_000, 0), s_compile=9.0)
    ranked_run(alice, outside, evaluation=fusion, tokens=(50_000, 0), s_compile=9.0)
    grade(run(alice, outside, evaluation=fusion), status=HELD)
    grade(run(alice, rejected, evaluation=fusion), status=HELD)

    # Agent "naive": two ranked results, three failed runs.
    naive = evaluation(suite, bob, "naive")
    ranked_run(bob, p1, evaluation=naive, ms=5 / 3, s_compile=1.2, s_eager=2.4, sol=0.6)
    ranked_run(bob, p2, evaluation=naive, ms=7 / 3, s_compile=0.9, s_eager=6 / 7, sol=0.3)
    for member in (p3, p4, p5):
        run(bob, member, evaluation=naive, status=FAILED, tokens=(500, 100), dollars=0.05)

    # Person "alice": the faster of her two ranked submissions on P1 counts (0.8 ms), although
    # the other one's re-grade measured a higher speedup (its torch.compile time was slower).
    sub = {"kind": RunKind.SUBMISSION}
    a1 = ranked_run(alice, p1, **sub, gpu_seconds=6, ms=0.8, s_compile=2.5, s_eager=5.0, sol=0.7)
    ranked_run(alice, p1, **sub, gpu_seconds=9, ms=1.0, s_compile=2.6, s_eager=4.0, sol=0.56)
    ranked_run(
        alice, p2, **sub, gpu_seconds=12, ms=42 / 19, s_compile=0.95, s_eager=19 / 21, sol=0.3
    )
    # Alice's that must not count: other GPU type, other protocol, not ended, outside the
    # suite, and an agent run that is no submission and in no evaluation.
    ranked_run(alice, p1, **sub, gpu_type="a100", ms=0.01, s_compile=99.0)
    ranked_run(alice, p1, **sub, protocol="fp32-strict", ms=0.01, s_compile=99.0)
    for status in (RunStatus.QUEUED, RunStatus.CANCELLED):
        run(alice, p3, **sub, status=status, gpu_seconds=600)
    ranked_run(alice, outside, **sub, gpu_seconds=600, ms=0.01, s_compile=99.0)
    ranked_run(alice, p3, gpu_seconds=600, ms=0.01, s_compile=99.0)

    # Person "bob": held under review on P4, failed on P3.
    bob_held = grade(run(bob, p4, **sub, gpu_seconds=3), status=HELD, ms=0.0001)
    run(bob, p3, **sub, status=FAILED, gpu_seconds=5)

    # The compiler: baselines with a max-autotune time on P1, P2, P3, P5.
    def baseline(member, eager, compile_, autotune, sol, gpu_type=GPU, protocol=PROTOCOL):
        Baseline.objects.create(
            problem=member, gpu_type=gpu_type, protocol=protocol, eager_ms=eager,
            compile_ms=compile_, compile_max_autotune_ms=autotune, sol_ms=sol,
        )  # fmt: skip

    baseline(p1, 4.0, 2.0, 1.0, 0.5)  # s_eager 4.0, s_compile 2.0, sol 0.5
    baseline(p2, 2.0, 2.1, 2.0, 0.75)  # 1.0, 1.05 (exactly, in binary too), 0.375
    baseline(p3, 3.0, 2.0, 4.0, 1.0)  # 0.75, 0.5, 0.25
    baseline(p4, 1.0, 1.0, None, 0.1)  # no max-autotune time: not a compiler result
    baseline(p5, 1.0, 0.75, 0.5, None)  # 2.0, 1.5, no SOL
    baseline(rejected, 9.0, 9.0, 0.1, 0.05)
    baseline(outside, 9.0, 9.0, 0.1, 0.05)
    baseline(p1, 9.0, 9.0, 0.1, 0.05, gpu_type="a100")
    baseline(p1, 9.0, 9.0, 0.1, 0.05, protocol="fp32-strict")

    reported = ReportedResult.objects.create(
        suite=suite,
        entrant="CUDA Agent (paper)",
        citation="A paper, 2026",
        correct_rate=0.99,
        fast_1_0_vs_compile=0.9,
        geomean_speedup_vs_compile=3.0,
    )
    return {
        "suite": suite,
        "problems": (p1, p2, p3, p4, p5),
        "fusion": fusion,
        "naive": naive,
        "fusion_runs": (f1, f2, f3, f4, f5),
        "alice_fastest": a1,
        "held": (bob_held, fusion_held),
        "reported": reported,
    }


def rows_by_entrant(board: dict) -> dict[str, dict]:
    return {data["entrant"]: data for data in board["rows"]}


def test_the_board_counts_the_suites_valid_problems_on_its_gpu_type_and_protocol(world):
    board = metrics.board(world["suite"], GPU)
    assert (board["suite"], board["gpu_type"], board["protocol"]) == ("level-1", GPU, PROTOCOL)
    assert board["problems"] == 5  # P1…P5; R is rejected, X is in another suite
    assert all(data["problems"] == 5 for data in board["rows"])


def test_it_ranks_by_fast_1_0_vs_compile_then_geomean(world):
    board = metrics.board(world["suite"], GPU)
    ranked = [(data["rank"], data["entrant"], data["kind"]) for data in board["rows"]]
    assert ranked == [
        (1, metrics.COMPILER, "compiler"),  # fast₁.₀ 3/5
        (2, "fusion", "agent"),  # 2/5
        (3, "alice", "person"),  # 1/5, geomean sqrt(2.375) ≈ 1.54
        (4, "naive", "agent"),  # 1/5, geomean sqrt(1.08) ≈ 1.04
        (5, "bob", "person"),  # 0
    ]
    rows = rows_by_entrant(board)
    assert rows["fusion"]["evaluation"] == world["fusion"].pk  # the latest, not the older one
    assert rows["naive"]["evaluation"] == world["naive"].pk
    assert rows["alice"]["evaluation"] is None
    keys = {key for key, _, _ in metrics.DEFINITIONS}
    assert all(keys <= set(data) for data in board["rows"])


def test_the_latest_evaluation_of_an_agent(world):
    fusion = rows_by_entrant(metrics.board(world["suite"], GPU))["fusion"]
    assert fusion["correct"] == 3  # P1, P2, P3 ranked; P4 failed; P5 under review
    assert fusion["correct_rate"] == pytest.approx(0.6)  # 3 / 5
    assert fusion["fast_1_0_vs_compile"] == pytest.approx(0.4)  # 2.0, 1.05 → 2 / 5
    assert fusion["fast_1_05_vs_compile"] == pytest.approx(0.4)  # 2.0, 1.05 (≥ is inclusive)
    assert fusion["fast_1_0_vs_eager"] == pytest.approx(0.4)  # 4.0, 1.0 (inclusive) → 2 / 5
    assert fusion["fast_1_05_vs_eager"] == pytest.approx(0.2)  # 4.0 → 1 / 5
    # (2.0 × 1.05 × 0.5)^(1/3) = 1.05^(1/3)
    assert fusion["geomean_speedup_vs_compile"] == pytest.approx(1.05 ** (1 / 3))
    # (4.0 × 1.0 × 0.75)^(1/3) = 3^(1/3)
    assert fusion["geomean_speedup_vs_eager"] == pytest.approx(3 ** (1 / 3))
    assert fusion["geomean_coverage"] == pytest.approx(0.6)  # 3 / 5
    assert fusion["median_sol_fraction"] == pytest.approx(0.4)  # [0.2, 0.4, 0.9]: the middle
    assert fusion["attempted"] == 5  # P1…P5 ended (P4 failed)
    assert fusion["runs"] == 5  # cancelled, queued, running, R's and X's do not count
    # (1200 + 1000 + 1800 + 3600 + 400) / 5 = 8000 / 5
    assert fusion["tokens_per_run"] == pytest.approx(1600)
    # (0.30 + 0.20 + 0.45 + 0.90 + 0.15) / 5 = 2.00 / 5
    assert fusion["dollars_per_run"] == pytest.approx(0.40)
    # (30 + 24 + 45 + 0 + 21) s / 5 = 24 s = 0.4 min
    assert fusion["gpu_minutes_per_run"] == pytest.approx(0.4)
    assert fusion["under_review"] == 1  # P5's; not X's (outside) nor R's (rejected)


def test_an_agent_with_an_even_number_of_ranked_results(world):
    naive = rows_by_entrant(metrics.board(world["suite"], GPU))["naive"]
    assert naive["correct"] == 2
    assert naive["correct_rate"] == pytest.approx(0.4)  # 2 / 5
    assert naive["fast_1_0_vs_compile"] == pytest.approx(0.2)  # 1.2 → 1 / 5
    assert naive["fast_1_05_vs_compile"] == pytest.approx(0.2)  # 1.2
    assert naive["fast_1_0_vs_eager"] == pytest.approx(0.2)  # 2.4 (6/7 is not)
    assert naive["fast_1_05_vs_eager"] == pytest.approx(0.2)
    assert naive["geomean_speedup_vs_compile"] == pytest.approx(1.08**0.5)  # √(1.2 × 0.9)
    assert naive["geomean_speedup_vs_eager"] == pytest.approx((2.4 * 6 / 7) ** 0.5)
    assert naive["geomean_coverage"] == pytest.approx(0.4)
    assert naive["median_sol_fraction"] == pytest.approx(0.45)  # (0.3 + 0.6) / 2
    assert (naive["attempted"], naive["runs"]) == (5, 5)
    assert naive["tokens_per_run"] == pytest.approx(360)  # 3 × 600 / 5
    assert naive["dollars_per_run"] == pytest.approx(0.03)  # 3 × 0.05 / 5
    assert naive["gpu_minutes_per_run"] == pytest.approx(0.0)
    assert naive["under_review"] == 0


def test_a_persons_best_submission_per_problem(world):
    alice = rows_by_entrant(metrics.board(world["suite"], GPU))["alice"]
    assert alice["correct"] == 2  # P1 (two submissions, one result), P2
    assert alice["correct_rate"] == pytest.approx(0.4)  # 2 / 5
    # P1 counts with its fastest submission (0.8 ms: 2.5×), not the 2.6× one of 1.0 ms.
    assert alice["fast_1_0_vs_compile"] == pytest.approx(0.2)  # 2.5 → 1 / 5
    assert alice["fast_1_05_vs_compile"] == pytest.approx(0.2)
    assert alice["fast_1_0_vs_eager"] == pytest.approx(0.2)  # 5.0 (19/21 is not)
    assert alice["fast_1_05_vs_eager"] == pytest.approx(0.2)
    assert alice["geomean_speedup_vs_compile"] == pytest.approx(2.375**0.5)  # √(2.5 × 0.95)
    assert alice["geomean_speedup_vs_eager"] == pytest.approx((5.0 * 19 / 21) ** 0.5)
    assert alice["geomean_coverage"] == pytest.approx(0.4)
    assert alice["median_sol_fraction"] == pytest.approx(0.5)  # (0.3 + 0.7) / 2
    assert alice["attempted"] == 2  # P1, P2
    assert alice["runs"] == 3  # P1 twice, P2
    assert alice["tokens_per_run"] == pytest.approx(0)  # people spend no model tokens
    assert alice["dollars_per_run"] == pytest.approx(0)
    assert alice["gpu_minutes_per_run"] == pytest.approx(0.15)  # (6 + 9 + 12) s / 3 = 9 s
    assert alice["under_review"] == 0


def test_a_person_with_nothing_ranked(world):
    bob = rows_by_entrant(metrics.board(world["suite"], GPU))["bob"]
    assert (bob["correct"], bob["correct_rate"], bob["geomean_coverage"]) == (0, 0.0, 0.0)
    assert bob["geomean_speedup_vs_compile"] is None
    assert bob["geomean_speedup_vs_eager"] is None
    assert bob["median_sol_fraction"] is None
    for key in ("1_0_vs_compile", "1_05_vs_compile", "1_0_vs_eager", "1_05_vs_eager"):
        assert bob[f"fast_{key}"] == 0.0
    assert (bob["attempted"], bob["runs"], bob["under_review"]) == (2, 2, 1)
    assert bob["gpu_minutes_per_run"] == pytest.approx(4 / 60)  # (3 + 5) s / 2 = 4 s


def test_the_compiler_row_from_the_baselines(world):
    compiler = rows_by_entrant(metrics.board(world["suite"], GPU))[metrics.COMPILER]
    assert compiler["evaluation"] is None
    assert compiler["correct"] == 4  # P1, P2, P3, P5 have a max-autotune time
    assert compiler["attempted"] == 4
    assert compiler["correct_rate"] == pytest.approx(0.8)  # 4 / 5
    # compile / max-autotune: 2.0/1.0 = 2.0, 2.1/2.0 = 1.05, 2.0/4.0 = 0.5, 0.75/0.5 = 1.5
    assert compiler["fast_1_0_vs_compile"] == pytest.approx(0.6)  # 2.0, 1.05, 1.5
    assert compiler["fast_1_05_vs_compile"] == pytest.approx(0.6)  # 1.05 is inclusive
    # eager / max-autotune: 4.0/1.0 = 4.0, 2.0/2.0 = 1.0, 3.0/4.0 = 0.75, 1.0/0.5 = 2.0
    assert compiler["fast_1_0_vs_eager"] == pytest.approx(0.6)  # 4.0, 1.0, 2.0
    assert compiler["fast_1_05_vs_eager"] == pytest.approx(0.4)  # 4.0, 2.0
    # (2.0 × 1.05 × 0.5 × 1.5)^(1/4) = 1.575^(1/4)
    assert compiler["geomean_speedup_vs_compile"] == pytest.approx(1.575**0.25)
    # (4.0 × 1.0 × 0.75 × 2.0)^(1/4) = 6^(1/4)
    assert compiler["geomean_speedup_vs_eager"] == pytest.approx(6**0.25)
    assert compiler["geomean_coverage"] == pytest.approx(0.8)
    # sol / max-autotune: 0.5/1.0, 0.75/2.0, 1.0/4.0 (P5 has none) → [0.25, 0.375, 0.5]
    assert compiler["median_sol_fraction"] == pytest.approx(0.375)
    assert (compiler["runs"], compiler["under_review"]) == (0, 0)
    assert compiler["tokens_per_run"] is None
    assert compiler["dollars_per_run"] is None
    assert compiler["gpu_minutes_per_run"] is None


def test_reported_results_are_apart_and_never_ranked(world):
    board = metrics.board(world["suite"], GPU)
    (reported,) = board["reported"]
    assert reported["id"] == world["reported"].pk
    assert reported["entrant"] == "CUDA Agent (paper)"
    assert reported["correct_rate"] == pytest.approx(0.99)
    assert "CUDA Agent (paper)" not in rows_by_entrant(board)
    assert len(board["rows"]) == 5


def test_results_under_review_are_listed_apart(world):
    board = metrics.board(world["suite"], GPU)
    bob_held, fusion_held = world["held"]
    listed = [
        (r["run"], r["kind"], r["agent"], r["owner"], r["problem"]) for r in board["under_review"]
    ]
    # X's and R's are not the suite's valid problems. (Grouped by problem, in Problem's own
    # ordering, newest first: the order is not a metric, so it is not pinned here.)
    assert sorted(listed) == sorted(
        [
            (bob_held.run_id, "submission", "", "bob", "P4"),
            (fusion_held.run_id, "agent", "fusion", "alice", "P5"),
        ]
    )
    assert all(
        r["reasons"] == ["time under the speed-of-light floor"] for r in board["under_review"]
    )


def test_another_gpu_type_or_protocol_has_its_own_board(world):
    a100 = metrics.board(world["suite"], "a100")
    # fusion's a100 evaluation (P4, ranked), alice's a100 submission (P1), the a100 baseline (P1)
    # each fast₁.₀ 1/5; geomeans 9.0 / 0.01 = 900 (alice, over the a100 baseline), 9.0 / 0.1 =
    # 90 (compiler), 1.0 (fusion: P4 has no a100 baseline, so the re-grade's own)
    assert [(data["entrant"], data["correct"]) for data in a100["rows"]] == [
        ("alice", 1),
        (metrics.COMPILER, 1),
        ("fusion", 1),
    ]
    strict = metrics.board(world["suite"], GPU, "fp32-strict")
    assert strict["protocol"] == "fp32-strict"
    assert {data["entrant"] for data in strict["rows"]} == {metrics.COMPILER, "alice", "fusion"}
    assert metrics.board(world["suite"], "b200")["rows"] == []


def test_the_board_is_computed_in_the_database(world, alice, django_assert_max_num_queries):
    suite = world["suite"]
    with CaptureQueriesContext(connection) as before:
        board = metrics.board(suite, GPU)
    entrants = len(board["rows"])
    # 6 for the board (problems, evaluations, people, compiler?, reported, under review) and
    # at most 5 per entrant (totals, median: count + middle, spend, under review): 29 here, as
    # no query is made per run or per problem.
    with django_assert_max_num_queries(6 + 5 * entrants):
        metrics.board(suite, GPU)

    # 20 more runs on the same problems by the same entrants: as many queries as before.
    p1, p2, p3, p4, p5 = world["problems"]
    for member in (p1, p2, p3, p4, p5) * 2:
        ranked_run(alice, member, evaluation=world["fusion"], tokens=(10, 0), s_compile=1.1)
        ranked_run(alice, member, kind=RunKind.SUBMISSION, ms=0.5, s_compile=1.1)
    with CaptureQueriesContext(connection) as after:
        grown = metrics.board(suite, GPU)
    assert len(grown["rows"]) == entrants
    assert len(after.captured_queries) == len(before.captured_queries)
    assert rows_by_entrant(grown)["fusion"]["runs"] == 15  # 5 + 10: the board did see them


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([None], None),  # a missing value is no value
        ([3.0], 3.0),
        ([4.0, 1.0], 2.5),  # (1 + 4) / 2
        ([5.0, None, 1.0, 2.0], 2.0),  # [1, 2, 5]: the middle
        ([8.0, 1.0, 2.0, 4.0], 3.0),  # [1, 2, 4, 8]: (2 + 4) / 2
    ],
)
def test_median_of_a_column(alice, relu_scale, values, expected):
    for n, value in enumerate(values, start=1):
        made = problem(alice, relu_scale, n, f"M{n}")
        Baseline.objects.create(problem=made, gpu_type=GPU, protocol=PROTOCOL, eager_ms=value)
    got = metrics.median(Baseline.objects.filter(gpu_type=GPU), "eager_ms")
    assert got == (None if expected is None else pytest.approx(expected))


def test_a_model_agents_spend_per_run_and_speedup_per_dollar(world, alice, relu_scale):
    """Wall time from claim to end and what a dollar buys; an agent that costs nothing has no
    speedup per dollar, where dividing by zero would read as infinitely good."""
    fusion = rows_by_entrant(metrics.board(world["suite"], GPU))["fusion"]
    assert fusion["speedup_per_dollar"] == pytest.approx(1.05 ** (1 / 3) / 0.40)
    assert fusion["wall_minutes_per_run"] is None  # no run of the world has a start and an end

    suite = Suite.objects.create(name="timed", protocol=PROTOCOL)
    free = evaluation(suite, alice, "self-hosted")
    end = timezone.now()
    for n, minutes in ((1, 1.0), (2, 3.0)):
        solved = problem(alice, relu_scale, n + 20, f"T{n}")
        SuiteProblem.objects.create(suite=suite, problem=solved, name=f"T{n}", position=n)
        made = ranked_run(alice, solved, evaluation=free, s_compile=1.5)
        started = end - timedelta(minutes=minutes)
        Run.objects.filter(pk=made.pk).update(started=started, finished=end)
    (row,) = metrics.board(suite, GPU)["rows"][:1]
    assert row["entrant"] == "self-hosted"
    assert row["wall_minutes_per_run"] == pytest.approx(2.0)  # (1 + 3) / 2
    assert row["dollars_per_run"] == pytest.approx(0.0) and row["speedup_per_dollar"] is None


def test_a_trained_agents_row_says_what_it_was_trained_from(world, alice):
    training = {
        "method": "sft (rejection fine-tuning)",
        "base": "Qwen/Qwen2.5-Coder-7B-Instruct",
        "data": ["runs/"],
        "trajectories": 412,
        "rollouts": None,
        "steps": 1236,
    }
    identity = {"name": "rft-1", "backend": "openai", "training": training}
    evaluation(world["suite"], alice, "rft-1", agent_identity=identity)
    rows = rows_by_entrant(metrics.board(world["suite"], GPU))
    line = "sft (rejection fine-tuning) of Qwen/Qwen2.5-Coder-7B-Instruct on 412 trajectories"
    assert rows["rft-1"]["trained"] == line + ", 1236 steps"
    assert dict(cells(rows["rft-1"], ["entrant"])) == {
        "entrant": f"rft-1 (trained: {line}, 1236 steps)"
    }
    # known-bad beside it: an agent, a person and the compiler that are no checkpoint say nothing
    assert {rows[name]["trained"] for name in ("fusion", "alice", metrics.COMPILER)} == {None}
    assert dict(cells(rows["fusion"], ["entrant"])) == {"entrant": "fusion"}


def test_speedups_divide_the_stored_baselines_not_the_regrades_own(alice, relu_scale):
    """The board, the report's cells and the charts divide the baselines the report's columns
    show by the re-graded time: on level 1's 1_Square (H200) the re-grade measured torch.compile
    at 0.4284 ms beside four builds, and its own 1.26x stood beside columns that say 0.3377 ms
    for compile and 0.3408 ms for the kernel (0.99x). Where no time is stored (compile failed),
    the re-grade's own ratio is all there is. Known-bad before: 1.26x, fast₁.₀ vs compile 1/2."""
    suite = Suite.objects.create(name="square", protocol=PROTOCOL)
    square, failed = (problem(alice, relu_scale, n, f"S{n}") for n in (31, 32))
    for position, member in enumerate((square, failed), start=1):
        SuiteProblem.objects.create(
            suite=suite, problem=member, name=member.title, position=position
        )
    Baseline.objects.create(
        problem=square, gpu_type=GPU, protocol=PROTOCOL, eager_ms=0.6816, compile_ms=0.3377
    )
    Baseline.objects.create(
        problem=failed, gpu_type=GPU, protocol=PROTOCOL, eager_ms=2.0, compile_ms=None
    )
    fusion = evaluation(suite, alice, "fusion")
    ranked_run(alice, square, evaluation=fusion, ms=0.3408, s_compile=1.26, s_eager=2.2)
    ranked_run(alice, failed, evaluation=fusion, ms=1.0, s_compile=0.8, s_eager=9.0)

    row = rows_by_entrant(metrics.board(suite, GPU))["fusion"]
    assert row["fast_1_0_vs_compile"] == 0.0  # 0.99 and 0.8
    assert row["geomean_speedup_vs_compile"] == pytest.approx((0.3377 / 0.3408 * 0.8) ** 0.5)
    assert row["geomean_speedup_vs_eager"] == pytest.approx((0.6816 / 0.3408 * 2.0) ** 0.5)
    per_problem = problem_results(suite, GPU, PROTOCOL)["problems"]
    shown = {entry["name"]: entry["results"]["fusion"]["s_compile"] for entry in per_problem}
    assert shown == {"S31": pytest.approx(0.3377 / 0.3408), "S32": pytest.approx(0.8)}
