"""Bad requests get a 4xx that says what to fix, never a server error: numbers out of range on
every list and id, bodies over the size limit (API and the upload page), empty filters and
sources as the schema declares them."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.problems.models import Problem

HUGE = "499293704514161789108224"  # past 64 bits: reached the database as an offset before


@pytest.fixture
def alices_run(alice, relu_scale):
    return make_run(alice, make_problem(alice, relu_scale))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"/api/runs?offset={HUGE}", "offset: Input should be less than or equal to 1000000000"),
        (f"/api/problems?offset={HUGE}", "offset: Input should be less than or equal to"),
        ("/api/problems?offset=1e20", "offset: Input should be a valid integer"),
        ("/api/problems?limit=201", "limit: Input should be less than or equal to 200"),
        ("/api/runs?problem=1e20", "problem: Input should be a valid integer"),
        (f"/api/runs?problem={HUGE}", "problem: Input should be less than or equal to"),
        ("/api/runs?problem=0", "problem: Input should be greater than or equal to 1"),
        (f"/api/runs/{HUGE}", "run_id: Input should be less than or equal to"),
        (f"/api/problems/{HUGE}", "problem_id: Input should be less than or equal to"),
        (f"/api/runs/1/candidates/{HUGE}", "seq: Input should be less than or equal to"),
        (f"/api/runs/1/events?after={HUGE}", "after: Input should be less than or equal to"),
        (f"/api/runs/1/bundle?candidate={HUGE}", "candidate: Input should be less than or"),
    ],
)
def test_it_refuses_numbers_out_of_range_with_the_range(alices_run, alice, url, message):
    r = api_client(alice).get(url)
    assert r.status_code == 422, r.content
    assert r.json()["detail"].startswith(message)


def test_it_still_answers_numbers_in_range(alices_run, alice):
    client = api_client(alice)
    assert [run["id"] for run in client.get("/api/runs?offset=0").json()] == [alices_run.pk]
    assert client.get("/api/runs?offset=1000000000").json() == []
    assert client.get(f"/api/runs?problem={alices_run.problem_id}").json()[0]["id"] == alices_run.pk
    assert client.get("/api/runs/9223372036854775807").status_code == 404


def post_json(client: Client, url: str, body: dict):
    return client.post(url, body, content_type="application/json")


@pytest.mark.parametrize("url", ["/api/problems", "/api/runs", "/api/problems/1/submissions"])
def test_it_refuses_a_body_over_the_limit_as_json(alice, url):
    r = post_json(api_client(alice), url, {"source": "#" * (2 * 1024 * 1024)})
    assert r.status_code == 413
    assert r.json() == {
        "detail": "the request body is 2048 KiB; the limit is 1024 KiB "
        "(a problem's source may be at most 256 KiB)"
    }


def test_it_takes_a_body_just_under_the_limit_to_the_source_check(alice):
    r = post_json(api_client(alice), "/api/problems", {"source": "#" * (1024 * 1024 - 100)})
    assert r.status_code == 422
    assert "the limit is 256 KiB" in r.json()["detail"]


def test_it_declares_an_empty_source_refused(alice):
    r = post_json(api_client(alice), "/api/problems", {"source": ""})
    assert r.status_code == 422
    assert r.json()["detail"] == "source: String should have at least 1 character"
    schema = Client().get("/api/openapi.json").json()["components"]["schemas"]["ProblemIn"]
    assert schema["properties"]["source"]["minLength"] == 1


@pytest.mark.django_db
def test_it_takes_an_empty_gpu_type_filter_as_none():
    client = Client()
    every = client.get("/api/leaderboard").json()
    assert client.get("/api/leaderboard?gpu_type=").json() == every
    unknown = client.get("/api/leaderboard?gpu_type=tpu")
    assert unknown.status_code == 422
    assert unknown.json()["detail"] == "unknown GPU type 'tpu': use one of cpu"


def upload_page(user) -> tuple[Client, str]:
    """A browser's session on the upload page, and the form's CSRF token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get("/problems/new/").content.decode()
    return client, re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]


def test_the_upload_page_says_a_pasted_source_over_the_limit_is_too_large(alice):
    client, token = upload_page(alice)
    form = {"csrfmiddlewaretoken": token, "visibility": "private", "source": "#" * 2_000_000}
    r = client.post("/problems/new/", form)
    assert r.status_code == 413
    page = r.content.decode()
    assert "Nothing was sent: the request body is 1953 KiB; the limit is 1024 KiB" in page
    assert 'name="source"' in page  # the form, to try again
    assert not Problem.objects.exists()


def test_the_upload_page_puts_a_source_under_the_body_limit_on_the_form(alice):
    client, token = upload_page(alice)
    form = {"csrfmiddlewaretoken": token, "visibility": "private", "source": "#" * 300_000}
    r = client.post("/problems/new/", form)
    assert r.status_code == 422
    assert "The source is 293 KiB; the limit is 256 KiB." in r.content.decode()


def test_the_body_limit_keeps_the_csrf_check(alice):
    """A page POST over the limit is shown, not acted on, so it needs no token; one under the
    limit without a token is still refused."""
    client, _ = upload_page(alice)
    r = client.post("/problems/new/", {"visibility": "private", "source": "#" * 1000})
    assert r.status_code == 403
    assert not Problem.objects.exists()


@pytest.mark.parametrize(
    ("method", "url", "body", "answers"),
    [
        ("post", "/api/problems", {"title": "a\x00b"}, {201, 422}),
        ("get", "/api/suites/a%00b", None, {404, 422}),
        ("get", "/api/suites/a%00b/board", None, {404, 422}),
    ],
)
def test_a_nul_character_is_no_server_error(alice, relu_scale, method, url, body, answers):
    """PostgreSQL (CI's database) cannot hold or compare a NUL: that was a 500, and is a 422
    naming it; SQLite holds it."""
    client = api_client(alice)
    if method == "post":
        r = client.post(url, {**body, "source": relu_scale}, content_type="application/json")
    else:
        r = client.get(url)
    assert r.status_code in answers, r.content
    if r.status_code == 422:
        assert "NUL" in r.json()["detail"]
