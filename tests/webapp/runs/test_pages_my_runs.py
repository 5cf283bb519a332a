"""My runs (/runs/): the signed-in person's own runs only, newest first, paginated, filtered by
status, agent, GPU type and problem, reachable from the header."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.webapp.conftest import make_problem, make_run
from webapp.runs import views
from webapp.runs.models import Run, RunStatus


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def listed(html: str) -> list[int]:
    """The run ids in the table, in order."""
    return [int(n) for n in re.findall(r'<a href="/runs/(\d+)/">#\d+</a>', html)]


def test_it_sends_anonymous_visitors_to_log_in(db):
    r = Client().get("/runs/")
    assert r.status_code == 302 and r.url.startswith("/accounts/login/?next=/runs/")


def test_it_shows_only_my_runs_newest_first(alice, bob, relu_scale):
    public = make_problem(alice, relu_scale, public=True)
    first, second = make_run(alice, public), make_run(alice, public)
    bobs_on_my_problem = make_run(bob, public)
    r = logged_in(alice).get("/runs/")
    assert r.status_code == 200
    assert listed(r.content.decode()) == [second.pk, first.pk]
    assert bobs_on_my_problem.pk not in listed(r.content.decode())
    assert listed(logged_in(bob).get("/runs/").content.decode()) == [bobs_on_my_problem.pk]


def test_each_row_shows_status_agent_gpu_problem_speedups_and_timing(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    started = timezone.now() - timedelta(minutes=12)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.SUCCEEDED,
        best_speedup_vs_compile=1.75,
        best_speedup_vs_eager=2.5,
        started=started,
        finished=started + timedelta(minutes=5),
    )
    html = logged_in(alice).get("/runs/").content.decode()
    row = html[html.index(f'href="/runs/{run.pk}/"') :].split("</tr>")[0]
    for text in ("succeeded", "scripted-demo", "cpu", "relu scale", "1.75×", "2.50×", "5 min"):
        assert text in row, text
    assert f'href="/problems/{run.problem_id}/"' in row


def test_it_filters_by_status_agent_gpu_type_and_problem(alice, relu_scale):
    one, two = make_problem(alice, relu_scale), make_problem(alice, relu_scale + "\n# 2\n")
    queued, failed, on_h100 = make_run(alice, one), make_run(alice, one), make_run(alice, two)
    Run.objects.filter(pk=failed.pk).update(status=RunStatus.FAILED)
    Run.objects.filter(pk=on_h100.pk).update(gpu_type="h100", agent="retired-agent")
    client = logged_in(alice)
    assert listed(client.get("/runs/?status=failed").content.decode()) == [failed.pk]
    assert listed(client.get("/runs/?gpu_type=h100").content.decode()) == [on_h100.pk]
    assert listed(client.get("/runs/?agent=retired-agent").content.decode()) == [on_h100.pk]
    assert listed(client.get(f"/runs/?problem={one.pk}").content.decode()) == [failed.pk, queued.pk]
    both = f"/runs/?problem={one.pk}&status=queued&agent=scripted-demo&gpu_type=cpu"
    assert listed(client.get(both).content.decode()) == [queued.pk]
    html = client.get("/runs/?status=cancelled").content.decode()
    assert listed(html) == [] and "No run of yours matches these filters." in html


def test_the_filter_form_offers_the_values_my_runs_have(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    Run.objects.filter(pk=run.pk).update(gpu_type="h100", agent="retired-agent")
    html = logged_in(alice).get("/runs/?status=queued").content.decode()
    form = html.split('id="run-filters"')[1].split("</form>")[0]
    assert '<option value="queued" selected>queued</option>' in form
    for value in ("retired-agent", "scripted-demo", "h100", "cpu", f"#{run.problem_id} relu scale"):
        assert value in form, value


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("status=exploded", "unknown status &#x27;exploded&#x27;: use one of queued, running"),
        ("agent=nope", "unknown agent &#x27;nope&#x27;: use one of"),
        ("gpu_type=tpu", "unknown GPU type &#x27;tpu&#x27;: use one of cpu"),
        ("problem=abc", "Enter a whole number."),
    ],
)
def test_a_filter_that_names_nothing_is_said_not_ignored(alice, relu_scale, query, says):
    """The known-bad filters: the page answers 422 with the reason, and lists no run."""
    make_run(alice, make_problem(alice, relu_scale))
    r = logged_in(alice).get(f"/runs/?{query}")
    assert r.status_code == 422
    html = r.content.decode()
    assert says in html and listed(html) == []


def test_it_pages_and_keeps_the_filters(alice, relu_scale, monkeypatch):
    monkeypatch.setattr(views, "MY_RUNS_PER_PAGE", 2)
    problem = make_problem(alice, relu_scale)
    runs = [make_run(alice, problem) for _ in range(5)]
    client = logged_in(alice)
    first = client.get("/runs/?status=queued").content.decode()
    assert listed(first) == [runs[4].pk, runs[3].pk]
    assert "page 1 of 3" in first and 'href="?status=queued&amp;page=2"' in first
    third = client.get("/runs/?status=queued&page=3").content.decode()
    assert listed(third) == [runs[0].pk]


def test_the_header_links_my_runs_and_my_problems_for_signed_in_people(alice):
    header = logged_in(alice).get("/").content.decode().split("</header>")[0]
    assert 'href="/runs/"' in header and 'href="/problems/?mine=1"' in header
    anonymous = Client().get("/").content.decode().split("</header>")[0]
    assert 'href="/runs/"' not in anonymous and "My problems" not in anonymous
