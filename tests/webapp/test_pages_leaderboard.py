"""The leaderboard page and the front page."""

from __future__ import annotations

import re

from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from tests.webapp.test_leaderboard import finished_run, problem
from webapp.leaderboard.standings import DEFINITIONS


def test_it_shows_a_board_per_protocol(alice, relu_scale):
    p1 = problem(alice, relu_scale, 1)
    finished_run(alice, p1, 2.0)
    finished_run(alice, problem(alice, relu_scale, 2), 0.5)
    finished_run(alice, p1, 1.5, agent="strict", protocol="fp32-strict")
    page = Client().get("/leaderboard/").content.decode()
    assert "protocol <code>loose</code>" in page and "protocol <code>fp32-strict</code>" in page
    loose = page.split("protocol <code>loose</code>")[1].split("protocol <code>fp32")[0]
    assert '<td class="c-geomean_speedup_vs_compile">1.00×</td>' in loose
    assert '<td class="c-correct_rate">100%</td>' in loose
    assert '<td class="c-fast_1_0_vs_compile">50%</td>' in loose


def test_it_links_every_column_to_its_definition(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 2.0)
    page = Client().get("/leaderboard/").content.decode()
    for key, _, _ in DEFINITIONS:
        assert f'href="#def-{key}"' in page
        assert f'id="def-{key}"' in page


def test_it_selects_the_gpu_type(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 3.0, gpu_type="h100", agent="on-h100")
    assert "on-h100" not in Client().get("/leaderboard/").content.decode()
    page = Client().get("/leaderboard/", {"gpu_type": "h100"}).content.decode()
    assert "on-h100" in page and 'href="?gpu_type=cpu"' in page
    assert Client().get("/leaderboard/", {"gpu_type": "tpu"}).status_code == 404


def test_it_escapes_agent_names(alice, relu_scale):
    finished_run(alice, problem(alice, relu_scale, 1), 2.0, agent="<script>alert(1)</script>")
    page = Client().get("/leaderboard/").content.decode()
    assert "<script>alert(1)</script>" not in page


def test_it_shows_recent_public_runs_and_the_top_of_the_board_on_the_front_page(
    alice, bob, relu_scale
):
    public = make_problem(alice, relu_scale, public=True)
    public.title = "public op"
    public.save()
    private = make_problem(bob, relu_scale)
    private.title = "bob's secret op"
    private.save()
    make_run(alice, public)
    make_run(bob, private)
    for n in range(7):
        finished_run(alice, problem(alice, relu_scale, n), 1.0 + n, agent=f"agent-{n}")
    r = Client().get("/")
    page = r.content.decode()
    assert r.status_code == 200
    assert "public op" in page and "secret op" not in page
    top = re.findall(r'<td class="c-agent">(agent-\d)</td>', page)
    assert top == ["agent-6", "agent-5", "agent-4", "agent-3", "agent-2"]
    assert 'href="/leaderboard/#def-geomean_speedup_vs_compile"' in page
    assert 'href="/api/docs"' in page and 'href="/problems/new/"' in page


def test_it_shows_your_own_runs_on_the_front_page(bob, relu_scale):
    private = make_problem(bob, relu_scale)
    private.title = "bob op"
    private.save()
    make_run(bob, private)
    client = Client()
    client.force_login(bob)
    page = client.get("/").content.decode()
    assert "Your recent runs" in page and "bob op" in page
