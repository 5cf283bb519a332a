"""A private problem is visible only to its owner; others get 404, never 403."""

from __future__ import annotations

import itertools

from tests.webapp.conftest import api_client, make_problem


def test_it_hides_a_private_problem_from_others(alice, bob, relu_scale):
    problem = make_problem(alice, relu_scale)
    client = api_client(bob)
    assert client.get("/api/problems").json() == []
    r = client.get(f"/api/problems/{problem.pk}")
    assert r.status_code == 404
    assert r.json() == {"detail": f"no problem {problem.pk} that you can see"}


def test_it_shows_a_private_problem_to_its_owner(alice, relu_scale):
    problem = make_problem(alice, relu_scale)
    client = api_client(alice)
    assert [p["id"] for p in client.get("/api/problems").json()] == [problem.pk]
    assert client.get(f"/api/problems/{problem.pk}").json()["source"] == relu_scale


def test_it_lists_own_and_public_problems(alice, bob, charlie, relu_scale):
    public = make_problem(alice, relu_scale, public=True)
    make_problem(alice, relu_scale + "\n# private\n")
    own = make_problem(charlie, relu_scale)
    listed = [p["id"] for p in api_client(charlie).get("/api/problems").json()]
    assert sorted(listed) == sorted([public.pk, own.pk])
    assert api_client(charlie).get(f"/api/problems/{public.pk}").status_code == 200


def test_it_says_the_same_for_a_missing_problem(charlie):
    r = api_client(charlie).get("/api/problems/999999")
    assert (r.status_code, r.json()) == (404, {"detail": "no problem 999999 that you can see"})


def test_no_filter_combination_shows_someone_elses_private_problem(alice, bob, relu_scale):
    secret = make_problem(alice, relu_scale)
    public = make_problem(alice, relu_scale + "\n# public\n", public=True)
    client = api_client(bob)
    for status, mine in itertools.product([None, "valid", "pending"], [None, "true", "false"]):
        query = "&".join(f"{k}={v}" for k, v in (("status", status), ("mine", mine)) if v)
        listed = [p["id"] for p in client.get(f"/api/problems?{query}").json()]
        assert secret.pk not in listed, query
        assert (public.pk in listed) == (mine != "true" and status in (None, "valid")), query
