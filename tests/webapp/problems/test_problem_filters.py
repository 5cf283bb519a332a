"""GET /api/problems and the problem list narrowed by `mine` and `status`: a state that names
nothing is a 422 listing the states, never the whole list."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.conftest import api_client, make_problem
from webapp.problems.models import Problem, ProblemStatus


@pytest.fixture
def problems(alice, bob, relu_scale):
    mine_valid = make_problem(alice, relu_scale)
    mine_pending = make_problem(alice, relu_scale + "\n# 2\n", valid=False)
    bobs_public = make_problem(bob, relu_scale, public=True)
    Problem.objects.filter(pk=bobs_public.pk).update(status=ProblemStatus.REJECTED)
    return mine_valid, mine_pending, bobs_public


def ids(client, query: str) -> list[int]:
    r = client.get(f"/api/problems?{query}")
    assert r.status_code == 200, r.json()
    return [p["id"] for p in r.json()]


def test_it_filters_by_mine_and_status(alice, problems):
    mine_valid, mine_pending, bobs_public = problems
    client = api_client(alice)
    assert ids(client, "") == [bobs_public.pk, mine_pending.pk, mine_valid.pk]
    assert ids(client, "mine=true") == [mine_pending.pk, mine_valid.pk]
    assert ids(client, "status=rejected") == [bobs_public.pk]
    assert ids(client, "mine=true&status=pending") == [mine_pending.pk]
    assert ids(client, "mine=true&status=rejected") == []


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("status=broken", "status: Input should be 'pending', 'validating', 'valid' or 'rejected'"),
        ("mine=maybe", "mine: Input should be a valid boolean"),
        ("owner=bob", "unknown query parameter 'owner': use one of limit, mine, offset, status"),
    ],
)
def test_a_value_that_names_nothing_is_refused(alice, problems, query, says):
    """The known-bad filters: before, `mine` and `status` were ignored and everything listed."""
    r = api_client(alice).get(f"/api/problems?{query}")
    assert r.status_code == 422 and r.json()["detail"].startswith(says)


def test_the_page_filters_by_status_within_yours(alice, problems):
    mine_valid, mine_pending, bobs_public = problems
    client = Client()
    client.force_login(alice)
    html = client.get("/problems/?mine=1&status=pending").content.decode()
    assert f'href="/problems/{mine_pending.pk}/"' in html
    assert f'href="/problems/{mine_valid.pk}/"' not in html
    assert f'href="/problems/{bobs_public.pk}/"' not in html
    r = client.get("/problems/?status=broken")
    assert r.status_code == 422
    html = r.content.decode()
    assert "unknown status &#x27;broken&#x27;: use one of pending, validating, valid" in html
    assert f'href="/problems/{mine_valid.pk}/"' not in html
