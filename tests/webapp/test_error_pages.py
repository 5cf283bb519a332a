"""As `make run` serves (DEBUG off): the site's own error pages and its CSS through WhiteNoise, and
under /api/ JSON errors only, never an HTML page."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_it_runs_these_tests_with_debug_off(settings):
    assert settings.DEBUG is False


def test_an_unknown_page_gets_the_sites_not_found_page():
    r = Client().get("/no-such-page/")
    assert r.status_code == 404
    page = r.content.decode()
    assert "There is nothing at this address." in page
    assert 'href="/static/css/site.css"' in page
    assert "URLconf" not in page  # Django's technical page, which DEBUG shows


def test_an_unknown_api_route_gets_json():
    for path in ("/api/no-such-route", "/api/problems/1/no-such-thing"):
        r = Client().get(path)
        assert r.status_code == 404
        assert r["Content-Type"] == "application/json"
        assert r.json() == {"detail": f"no API route at {path}: the routes are at /api/docs"}


def test_a_request_for_an_unknown_host_gets_json_under_the_api():
    r = Client(HTTP_HOST="evil.example").get("/api/problems")
    assert r.status_code == 400
    assert "the request could not be read" in r.json()["detail"]
    page = Client(HTTP_HOST="evil.example").get("/problems/")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")


@pytest.mark.urls("tests.webapp.failing_urls")
def test_a_bug_in_an_api_route_answers_json():
    r = Client(raise_request_exception=False).get("/api/failing/bug")
    assert r.status_code == 500
    assert r["Content-Type"] == "application/json"
    assert "the server failed on this request" in r.json()["detail"]
    assert "a bug in an API route" not in r.content.decode()  # no internals for the client


@pytest.mark.urls("tests.webapp.failing_urls")
def test_a_refusal_in_an_api_route_answers_json():
    r = Client(raise_request_exception=False).get("/api/failing/forbidden")
    assert r.status_code == 403
    assert r.json() == {"detail": "only the owner may read this"}


@pytest.mark.urls("tests.webapp.failing_urls")
def test_a_bug_in_a_page_gets_the_sites_error_page():
    r = Client(raise_request_exception=False).get("/failing-page/")
    assert r.status_code == 500
    page = r.content.decode()
    assert "Something broke on our side" in page
    assert "a bug in a page" not in page and "Traceback" not in page


def test_it_serves_the_css():
    r = Client().get("/static/css/site.css")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/css")
    assert Client().get("/static/css/no-such-file.css").status_code == 404


def test_pages_carry_the_security_headers():
    r = Client().get("/")
    assert r["X-Frame-Options"] == "DENY"
    assert r["X-Content-Type-Options"] == "nosniff"
    assert r["Referrer-Policy"] == "same-origin"
    assert r["Cross-Origin-Opener-Policy"] == "same-origin"


def test_the_session_cookie_is_out_of_scripts_reach(alice):
    client = Client()
    client.post("/accounts/login/", {"username": "alice", "password": "password"})
    cookie = client.cookies["sessionid"]
    assert cookie["httponly"] is True
    assert not cookie["secure"]  # plain http (`make run`): KERNELARENA_HTTPS is off
