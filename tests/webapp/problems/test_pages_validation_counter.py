"""static/js/problem_status.js in a real browser against the real web server: while a worker
validates a problem, the page's "validating for ..." counts on. Known-bad: it said the seconds
of the page's load ("validating for 0 s") until the page reloaded on the verdict."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from tests.webapp.conftest import make_problem
from tests.webapp.live_stack import LiveStack
from webapp.problems.models import Problem, ProblemStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stack(redis_server, tmp_path):
    live = LiveStack(tmp_path)
    yield live
    live.stop()


def test_validating_for_counts_on_while_a_worker_validates(stack, browser, alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)
    started = timezone.now() - timedelta(seconds=5)
    Problem.objects.filter(pk=problem.pk).update(
        status=ProblemStatus.VALIDATING, validation_started=started
    )
    stack.start_web()
    client = Client()
    client.force_login(alice)
    context = browser.new_context()
    cookie = {"name": settings.SESSION_COOKIE_NAME}
    cookie["value"] = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{**cookie, "url": stack.base_url + "/"}])
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{stack.base_url}/problems/{problem.pk}/")

    counter = "() => document.querySelector('[data-field=validating-for]').textContent"
    first = page.evaluate(counter)
    assert first.endswith(" s"), first
    page.wait_for_function(f"() => ({counter})() !== {first!r}")  # a tick later
    seconds = int(page.evaluate(counter).split()[0])
    assert seconds > int(first.split()[0])  # counting up from where the server said
