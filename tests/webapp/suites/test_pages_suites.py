"""The suite pages (list and one suite on one GPU type), the board charts and the admin of the
suite and grade models.

`arena` builds one suite with the ORM, no mocks, on the configured GPU type "cpu" under the
suite's protocol "loose": three valid problems P1–P3 and a rejected one, R.
- baselines: P1 and P3 measured (so the compiler is an entrant), P2's measurement failed;
- agent "fusion": ranked on P1 (2×) and P3 (1.5×), P2 held under review;
- agent SCRIPT (a name that must be escaped): ranked on P1 (3×), P2's grade pending, P3 failed;
- agent "naive": ranked on P1 (0.5×), P2 running, P3 queued, and a cancelled retry of P3;
- a paper's reported row.
Ranked by fast₁.₀ vs compile, then geomean vs compile: fusion (2/3, 1.73), the compiler (2/3,
1.12), SCRIPT (1/3, 3.0), naive (0, 0.5).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.webapp.conftest import make_problem
from webapp.leaderboard import charts, metrics
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.leaderboard.suite_page import evaluation_progress
from webapp.problems.models import ProblemStatus
from webapp.runs.models import Candidate, Run, RunStatus
from webapp.suites.models import Baseline, Evaluation, ReportedResult, Suite, SuiteProblem

SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
PAPER = "CUDA Agent (paper)"
HELD_REASON = "time under the speed-of-light floor"


def suite_problem(suite, owner, source: str, n: int, name: str, *, rejected: bool = False):
    problem = make_problem(owner, f"{source}\n# variant {n}\n", public=True)
    problem.title = name
    if rejected:
        problem.status = ProblemStatus.REJECTED
        problem.reasons = ["its output does not depend on its inputs"]
    problem.save()
    SuiteProblem.objects.create(suite=suite, problem=problem, name=name, position=n)
    return problem


def baseline(problem, gpu_type="cpu", **times) -> Baseline:
    return Baseline.objects.create(
        problem=problem,
        gpu_type=gpu_type,
        protocol="loose",
        measured=timezone.now() if times else None,
        **times,
    )


def evaluated_run(evaluation, problem, status=RunStatus.SUCCEEDED, dollars=0.0) -> Run:
    return Run.objects.create(
        problem=problem,
        owner=evaluation.owner,
        agent=evaluation.agent,
        evaluation=evaluation,
        gpu_type=evaluation.gpu_type,
        protocol=evaluation.protocol,
        status=status,
        cost_dollars=dollars,
    )


def graded(run, status=GradeStatus.RANKED, s_compile=1.0, sol=0.5) -> Grade:
    candidate = Candidate.objects.create(run=run, seq=1, verified=True)
    return Grade.objects.create(
        run=run,
        candidate=candidate,
        status=status,
        reasons=[HELD_REASON] if status == GradeStatus.UNDER_REVIEW else [],
        candidate_ms=1.0 / s_compile,
        speedup_vs_compile=s_compile,
        speedup_vs_eager=s_compile * 2,
        sol_fraction=sol,
        secret_seeds=3,
    )


def build_arena(owner: User, source: str) -> dict:
    suite = Suite.objects.create(name="level-1", level=1, protocol="loose")
    p1, p2, p3 = (suite_problem(suite, owner, source, n, f"P{n}") for n in (1, 2, 3))
    rejected = suite_problem(suite, owner, source, 4, "R", rejected=True)
    baseline(p1, eager_ms=2.0, compile_ms=1.0, compile_max_autotune_ms=0.8, sol_ms=0.1)
    Baseline.objects.create(problem=p2, gpu_type="cpu", protocol="loose", error="out of memory")
    baseline(p3, eager_ms=3.0, compile_ms=1.0, compile_max_autotune_ms=1.0, sol_ms=0.2)

    def evaluation(agent: str) -> Evaluation:
        return Evaluation.objects.create(
            suite=suite, owner=owner, agent=agent, gpu_type="cpu", protocol="loose", max_turns=8
        )

    fusion, script, naive = evaluation("fusion"), evaluation(SCRIPT), evaluation("naive")
    graded(evaluated_run(fusion, p1, dollars=0.5), s_compile=2.0, sol=0.5)
    held = evaluated_run(fusion, p2, dollars=0.5)
    graded(held, GradeStatus.UNDER_REVIEW, s_compile=50.0)
    graded(evaluated_run(fusion, p3, dollars=0.5), s_compile=1.5, sol=0.25)
    graded(evaluated_run(script, p1), s_compile=3.0, sol=0.3)
    graded(evaluated_run(script, p2), GradeStatus.PENDING)
    evaluated_run(script, p3, RunStatus.FAILED)
    graded(evaluated_run(naive, p1), s_compile=0.5, sol=0.1)
    evaluated_run(naive, p2, RunStatus.RUNNING)
    evaluated_run(naive, p3, RunStatus.QUEUED)
    evaluated_run(naive, p3, RunStatus.CANCELLED)
    ReportedResult.objects.create(
        suite=suite,
        entrant=PAPER,
        gpu="H100",
        citation="Doe et al., 2026",
        url="https://example.org/paper",
        correct_rate=0.98,
        fast_1_0_vs_compile=0.9,
        geomean_speedup_vs_compile=2.1,
    )
    return {
        "suite": suite,
        "problems": (p1, p2, p3, rejected),
        "evaluations": (fusion, script, naive),
        "held": held,
    }


@pytest.fixture
def arena(alice, relu_scale) -> dict:
    return build_arena(alice, relu_scale)


def page(path: str, **params) -> str:
    response = Client().get(path, params)
    assert response.status_code == 200, response.content.decode()[:2000]
    return response.content.decode()


def section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start : html.index("</section>", start)]


def figure(html: str, figure_id: str) -> str:
    start = html.index(f'id="{figure_id}"')
    return html[start : html.index("</figure>", start)]


# ---- the list ----------------------------------------------------------------------------------


def test_the_list_shows_each_suite_with_its_counts(arena):
    Suite.objects.create(name="empty-suite", protocol="fp32-strict")
    html = page("/suites/")
    row = re.search(r'<a href="/suites/level-1/">level-1</a>.*?</tr>', html, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert [c.strip() for c in cells[:4]] == ["1", "<code>loose</code>", "3 / 4", "3"]
    assert 'href="/suites/empty-suite/"' in html and "0 / 0" in html


def test_the_list_says_when_there_are_no_suites(db):
    assert "No suites yet" in page("/suites/")


# ---- one suite: problems and evaluations ------------------------------------------------------


def test_it_shows_the_problems_with_their_baselines_on_the_gpu_type(arena):
    p1, p2, p3, rejected = arena["problems"]
    problems = section(page("/suites/level-1/"), "problems")
    assert f'<a href="/problems/{p1.pk}/">P1</a>' in problems
    assert f'<a href="/problems/{rejected.pk}/">R</a>' in problems
    assert "its output does not depend on its inputs" in problems  # why R was rejected
    p1_row = problems[problems.index(">P1</a>") : problems.index(">P2</a>")]
    assert re.findall(r'class="num">([\d.]+)</td>', p1_row) == [
        "2.0000",
        "1.0000",
        "0.8000",
        "0.1000",
    ]
    assert "not measured: out of memory" in problems  # P2's failed measurement
    r_row = problems[problems.index(">R</a>") :]
    assert "not measured" in r_row


def test_it_shows_each_evaluations_progress(arena):
    html = section(page("/suites/level-1/"), "evaluations")
    fusion, script, naive = arena["evaluations"]

    def counts(evaluation) -> dict:
        row = re.search(rf'data-evaluation="{evaluation.pk}".*?</tr>', html, re.S).group(0)
        return dict(re.findall(r'class="num c-([\w-]+)">(\d+)</td>', row))

    assert counts(fusion) == {
        **dict.fromkeys(("queued", "running", "failed", "cancelled", "grades-pending"), "0"),
        "succeeded": "3",
        "grades-ranked": "2",
        "grades-under-review": "1",
    }
    assert counts(script) == {
        **dict.fromkeys(("queued", "running", "cancelled", "grades-under-review"), "0"),
        "succeeded": "2",
        "failed": "1",
        "grades-pending": "1",
        "grades-ranked": "1",
    }
    assert counts(naive) == {
        **dict.fromkeys(("failed", "grades-pending", "grades-under-review"), "0"),
        "queued": "1",
        "running": "1",
        "succeeded": "1",
        "cancelled": "1",
        "grades-ranked": "1",
    }


def test_it_shows_how_far_the_long_work_has_come(arena):
    html = section(page("/suites/level-1/"), "progress")
    naive = arena["evaluations"][2]  # the latest evaluation on cpu
    assert "validation: 4 of 4 done, 1 rejected" in html
    assert "baselines on cpu: 3 of 3 done, 1 failed" in html  # P2's measurement failed
    assert f"evaluation {naive.pk} (naive): 2 of 4 done" in html  # one running, one queued


def test_the_time_left_comes_from_the_pace_so_far(arena):
    """Two of four runs finished 10 minutes after the evaluation started: 10 more to go."""
    naive = arena["evaluations"][2]
    finished = naive.created + timedelta(minutes=10)
    naive.runs.filter(status=RunStatus.SUCCEEDED).update(finished=finished)
    html = section(page("/suites/level-1/"), "progress")
    assert f"evaluation {naive.pk} (naive): 2 of 4 done, about 10 min left" in html


def test_a_valid_problem_without_a_run_is_counted_as_not_queued(arena):
    """An evaluation brought by a results file holds its ended runs alone: it is not done
    until every valid problem has a run. Known-bad: without them counted, "2 of 3 done"."""
    naive = arena["evaluations"][2]
    naive.runs.filter(status=RunStatus.RUNNING).delete()  # P2's: P2 has no run in it now
    html = section(page("/suites/level-1/"), "progress")
    line = f"evaluation {naive.pk} (naive): 2 of 4 done, 1 not queued (evaluate_suite --resume"
    assert line + " queues them)" in html


def test_work_no_worker_here_serves_says_so_and_promises_no_time(arena, settings):
    """A board imported from a results file of another GPU type: its unfinished work waits for
    a worker this site does not have. Known-bad: the test above's pace, "about 10 min left"."""
    naive = arena["evaluations"][2]
    naive.runs.filter(status=RunStatus.SUCCEEDED).update(finished=naive.created + timedelta(10))
    settings.GPU_TYPES = ["h200"]
    html = section(page("/suites/level-1/?gpu_type=cpu"), "progress")
    waiting = f"evaluation {naive.pk} (naive): 2 of 4 done, the rest waiting for a worker on cpu"
    assert waiting + " (none serves it here)" in html
    assert "left" not in html
    assert "baselines on cpu: 3 of 3 done, 1 failed" in html  # done: nothing waits


def test_it_counts_every_evaluations_progress_in_one_query(arena):
    with CaptureQueriesContext(connection) as queries:
        progress = {
            e.agent: (e.succeeded, e.grades_ranked) for e in evaluation_progress(arena["suite"])
        }
    assert len(queries) == 1
    assert progress == {"fusion": (3, 2), SCRIPT: (2, 1), "naive": (1, 1)}


# ---- one suite: the board ----------------------------------------------------------------------


def test_it_ranks_the_board_and_links_every_column_to_its_definition(arena):
    html = page("/suites/level-1/")
    board = section(html, "board")
    entrants = re.findall(r'<td class="c-entrant">(.*?)</td>', board)
    assert entrants == ["fusion", metrics.COMPILER, ESCAPED, "naive"]
    assert re.findall(r'<td class="c-rank">(\d+)</td>', board) == ["1", "2", "3", "4"]
    fusion_row = board[board.index(">fusion<") :]
    assert '<td class="c-correct_rate">67%</td>' in fusion_row  # P2 is held, not counted
    assert '<td class="c-geomean_speedup_vs_compile">1.73×</td>' in fusion_row
    assert '<td class="c-dollars_per_run">$0.50</td>' in fusion_row
    definitions = section(html, "definitions")
    for key, _, _ in metrics.DEFINITIONS:
        assert f'href="#def-{key}"' in board
        assert f'id="def-{key}"' in definitions


def test_reported_rows_are_shown_apart_and_never_ranked(arena):
    html = page("/suites/level-1/")
    assert PAPER not in section(html, "board")
    reported = section(html, "reported")
    assert "Reported by papers" in reported and "not measured here" in reported
    assert PAPER in reported and '<a href="https://example.org/paper"' in reported
    assert '<td class="c-correct_rate">98%</td>' in reported
    assert '<td class="c-geomean_speedup_vs_compile">2.10×</td>' in reported
    assert '<td class="c-fast_1_0_vs_eager">—</td>' in reported  # the paper does not say


def test_results_under_review_are_listed_with_their_reasons(arena):
    html = page("/suites/level-1/")
    held = arena["held"]
    under_review = section(html, "under-review")
    assert f'<a href="/runs/{held.pk}/">#{held.pk}</a>' in under_review
    assert HELD_REASON in under_review and "P2" in under_review
    # Its 50× speedup is nowhere on the board or the charts.
    assert "50.00×" not in html and ": 50×" not in html


def test_it_escapes_names_everywhere(arena):
    html = page("/suites/level-1/")
    assert SCRIPT not in html
    assert ESCAPED in section(html, "board") and ESCAPED in section(html, "charts")


def test_it_draws_a_mark_per_entrant_and_problem(arena):
    html = page("/suites/level-1/")
    assert section(html, "charts").count("<svg") == 3
    speedup = figure(html, "chart-speedup")
    assert speedup.count('class="mark"') == 6  # fusion ×2, compiler ×2, SCRIPT, naive
    for tip in ("fusion · P1: 2×", "fusion · P3: 1.5×", f"{ESCAPED} · P1: 3×", "naive · P1: 0.5×"):
        assert f"<title>{tip} vs torch.compile</title>" in speedup
    assert 'class="parity"' in speedup  # the line at 1.0
    assert "P2" not in re.sub(r"<text class=\"tick\".*?</text>", "", speedup)  # no mark on P2
    sol = figure(html, "chart-sol")
    assert sol.count('class="mark"') == 6
    assert "<title>fusion · P3: 25.0% of speed of light</title>" in sol
    cost = figure(html, "chart-cost")
    assert "$ per run" in cost  # fusion costs money, so the x axis is dollars
    assert cost.count('class="mark"') == 3  # the compiler has no cost per run


def test_the_charts_say_so_when_nothing_is_ranked(alice, relu_scale):
    suite = Suite.objects.create(name="fresh")
    suite_problem(suite, alice, relu_scale, 1, "P1")
    html = page("/suites/fresh/")
    assert section(html, "charts").count("No ranked results yet.") == 3
    assert "<svg" not in html


# ---- one suite: GPU types and unknown names ---------------------------------------------------


def test_it_selects_the_gpu_type(arena):
    p1 = arena["problems"][0]
    baseline(p1, "h100", eager_ms=0.2, compile_ms=0.1, compile_max_autotune_ms=0.1)
    cpu = page("/suites/level-1/")
    assert 'href="?gpu_type=cpu" class="current"' in cpu and 'href="?gpu_type=h100"' in cpu
    h100 = page("/suites/level-1/", gpu_type="h100")
    board = section(h100, "board")
    assert re.findall(r'<td class="c-entrant">(.*?)</td>', board) == [metrics.COMPILER]
    assert "0.1000" in section(h100, "problems") and "fusion" not in board
    assert "Nothing is under review on this GPU type" in h100


def test_an_unknown_suite_is_404_and_names_the_suites(arena):
    response = Client().get("/suites/level-9/")
    assert response.status_code == 404
    assert "There is no suite “level-9”. Suites: level-1." in response.content.decode()


def test_an_unknown_gpu_type_is_404_and_names_the_known_ones(arena):
    response = Client().get("/suites/level-1/", {"gpu_type": "<b>tpu</b>"})
    assert response.status_code == 404
    text = response.content.decode()
    assert "no board for the GPU type “&lt;b&gt;tpu&lt;/b&gt;”: choose one of cpu." in text


# ---- the charts on their own ------------------------------------------------------------------


def test_charts_skip_values_that_are_not_measurements():
    marks = [
        charts.Mark("a", "P1", 2.0),
        charts.Mark("a", "P2", None),
        charts.Mark("a", "P3", math.nan),
        charts.Mark("b", "P1", math.inf),
        charts.Mark("b", "P2", 0.0),  # no place on a log scale
        charts.Mark("b", "P3", -1.0),
        charts.Mark("b", "P9", 1.0),  # not one of the problems
    ]
    svg = charts.speedup_by_problem(["P1", "P2", "P3"], marks)
    assert svg.count('class="mark"') == 1 and "nan" not in svg.lower() and "inf" not in svg
    sol = charts.sol_by_problem(["P1", "P2", "P3"], marks)
    assert sol.count('class="mark"') == 3  # 2.0, 0.0 and -1.0 are numbers: drawn at the edges
    points = [
        charts.CostPoint("a", math.nan, 2.0),
        charts.CostPoint("b", 1.0, None),
        charts.CostPoint("c", 0.5, 1.5),
    ]
    assert charts.speedup_against_cost(points, "$ per run").count('class="mark"') == 1


def test_charts_with_nothing_to_draw_say_so():
    nothing = [charts.Mark("a", "P1", math.nan), charts.Mark("a", "P1", None)]
    assert charts.speedup_by_problem(["P1"], nothing) == charts.EMPTY
    assert charts.sol_by_problem([], []) == charts.EMPTY
    assert charts.speedup_against_cost([charts.CostPoint("a", None, 2.0)], "x") == charts.EMPTY


def test_charts_escape_every_text_and_have_titles_axes_and_a_legend():
    svg = charts.speedup_by_problem(
        ["<i>P1</i>"], [charts.Mark(SCRIPT, "<i>P1</i>", 1.5), charts.Mark("b&c", "<i>P1</i>", 0.5)]
    )
    assert SCRIPT not in svg and "<i>" not in svg and "b&c" not in svg
    assert ESCAPED in svg and "&lt;i&gt;P1&lt;/i&gt;" in svg and "b&amp;c" in svg
    assert "Speedup vs torch.compile per problem" in svg  # the title
    assert "speedup vs torch.compile (log scale)" in svg and ">problem</text>" in svg  # axes
    assert svg.count('class="legend-item"') == 2
    assert '<text class="tick"' in svg and "1×</text>" in svg
    cost = charts.speedup_against_cost([charts.CostPoint(SCRIPT, 2.0, 1.2)], "GPU-minutes per run")
    assert SCRIPT not in cost and ESCAPED in cost and "GPU-minutes per run" in cost


def test_many_problems_widen_the_chart_instead_of_crowding_it():
    problems = [f"{n}_Op" for n in range(100)]
    svg = charts.speedup_by_problem(problems, [charts.Mark("a", p, 1.1) for p in problems])
    width = int(re.search(r'width="(\d+)"', svg).group(1))
    assert width >= 100 * charts.BAND_WIDTH and svg.count('class="mark"') == 100


# ---- admin -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "suites/suite",
        "suites/baseline",
        "suites/evaluation",
        "suites/reportedresult",
        "leaderboard/grade",
    ],
)
def test_the_admin_lists_and_opens_every_suite_model(arena, model):
    admin = User.objects.create_superuser("admin", "admin@example.org", "password")
    client = Client()
    client.force_login(admin)
    assert client.get(f"/admin/{model}/").status_code == 200
    pk = apps.get_model(*model.split("/")).objects.order_by("pk").first().pk
    assert client.get(f"/admin/{model}/{pk}/change/").status_code == 200


def test_the_admin_filters_grades_by_status(arena):
    admin = User.objects.create_superuser("admin", "admin@example.org", "password")
    client = Client()
    client.force_login(admin)
    response = client.get("/admin/leaderboard/grade/", {"status__exact": "under_review"})
    assert response.status_code == 200
    listed = response.content.decode()
    ranked = Grade.objects.filter(status=GradeStatus.RANKED).select_related("run")
    assert str(arena["held"]) in listed
    assert not any(str(grade.run) in listed for grade in ranked)
    assert client.get("/admin/leaderboard/grade/add/").status_code == 403
