"""The leaderboard index (every suite's board on every GPU type, its top rows) and the front
page's compact boards. The suite and its results come from test_pages_suites.build_arena."""

from __future__ import annotations

import re

from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from tests.webapp.suites.test_pages_suites import ESCAPED, PAPER, SCRIPT, baseline, build_arena
from webapp.leaderboard import metrics
from webapp.suites.models import Suite


def html_of(path: str) -> str:
    response = Client().get(path)
    assert response.status_code == 200
    return response.content.decode()


def board_of(html: str, suite: str, gpu_type: str) -> str:
    link = f'href="/suites/{suite}/?gpu_type={gpu_type}">{suite}</a>'
    start = html.index(link)
    return html[start : html.index("</table>", start)]


def test_it_shows_the_top_three_rows_of_each_suite_per_gpu_type(alice, relu_scale):
    arena = build_arena(alice, relu_scale)
    Suite.objects.create(name="level-2")
    baseline(
        arena["problems"][0], "h100", eager_ms=0.2, compile_ms=0.1, compile_max_autotune_ms=0.1
    )
    html = html_of("/leaderboard/")
    assert "<h3>cpu</h3>" in html and "<h3>h100</h3>" in html
    level_1 = board_of(html, "level-1", "cpu")
    entrants = re.findall(r'<td class="c-entrant">(.*?)</td>', level_1)
    assert entrants == ["fusion", metrics.COMPILER, ESCAPED]  # naive is fourth
    assert "full board (+1) →" in level_1
    assert '<td class="c-fast_1_0_vs_compile">67%</td>' in level_1
    assert '<td class="c-geomean_speedup_vs_compile">1.73×</td>' in level_1
    on_h100 = board_of(html, "level-1", "h100")
    assert re.findall(r'<td class="c-entrant">(.*?)</td>', on_h100) == [metrics.COMPILER]
    assert "No ranked results yet." in board_of(html, "level-2", "cpu")
    assert PAPER not in html and SCRIPT not in html


def test_it_links_every_column_to_its_definition_on_the_same_page(alice, relu_scale):
    build_arena(alice, relu_scale)
    html = html_of("/leaderboard/")
    for key in ("rank", "entrant", "fast_1_0_vs_compile", "geomean_speedup_vs_compile"):
        assert f'<a href="#def-{key}"' in html
    assert 'id="definitions"' in html  # the footer's "How results are measured" lands here
    for key, _, _ in metrics.DEFINITIONS:
        assert f'id="def-{key}"' in html


def test_it_says_so_when_there_are_no_suites(db):
    assert "No suites yet" in html_of("/leaderboard/")


def test_the_front_page_shows_recent_public_runs_and_the_compact_boards(alice, bob, relu_scale):
    build_arena(alice, relu_scale)
    Suite.objects.create(name="level-2")  # no results: left off the front page
    private = make_problem(bob, relu_scale + "\n# bob's\n")
    private.title = "bob's secret op"
    private.save()
    make_run(bob, private)
    html = html_of("/")
    assert "secret op" not in html and ">P1</a>" in html  # public runs of the suite
    level_1 = board_of(html, "level-1", "cpu")
    assert re.findall(r'<td class="c-entrant">(.*?)</td>', level_1)[0] == "fusion"
    assert 'href="/leaderboard/#def-geomean_speedup_vs_compile"' in level_1
    assert "/suites/level-2/" not in html
    assert 'href="/api/docs"' in html and 'href="/problems/new/"' in html
    assert 'href="/suites/"' in html


def test_the_front_page_says_so_when_nothing_is_ranked(db):
    assert "No ranked results yet." in html_of("/")


def test_it_shows_your_own_runs_on_the_front_page(bob, relu_scale):
    private = make_problem(bob, relu_scale)
    private.title = "bob op"
    private.save()
    make_run(bob, private)
    client = Client()
    client.force_login(bob)
    page = client.get("/").content.decode()
    assert "Your recent runs" in page and "bob op" in page
