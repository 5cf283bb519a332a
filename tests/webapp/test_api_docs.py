"""/api/docs works with no network: Swagger UI comes from our own static files (django-ninja's,
served by WhiteNoise), checked in Debian's chromium with every request off this machine
blocked."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
THIS_MACHINE = {"127.0.0.1", "localhost"}  # the live server's address


@pytest.fixture
def offline_page(browser):
    """A page whose requests reach only this machine; `page.blocked` lists the others."""
    page = browser.new_page()
    page.blocked = []

    def only_this_machine(route):
        if urlparse(route.request.url).hostname in THIS_MACHINE:
            route.continue_()
        else:
            page.blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_machine)
    page.set_default_timeout(30_000)
    return page


def test_the_api_docs_render_their_operations_offline(live_server, offline_page):
    offline_page.goto(live_server.url + "/api/docs")
    operations = offline_page.locator(".opblock-summary-path")
    operations.first.wait_for()
    paths = {text.replace("\u200b", "") for text in operations.all_inner_texts()}
    assert {"/api/runs", "/api/problems", "/api/leaderboard"} <= paths
    assert offline_page.blocked == []


def test_the_offline_page_blocks_a_page_that_needs_a_cdn(live_server, offline_page):
    """The known-bad case: a Swagger page loaded from a CDN, as /api/docs was, gets nothing."""
    offline_page.goto(live_server.url + "/api/openapi.json")
    cdn = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"
    offline_page.set_content(f'<div id="swagger-ui"></div><script src="{cdn}"></script>')
    assert offline_page.blocked == [cdn]
    assert offline_page.locator(".opblock-summary-path").count() == 0
