"""Sign-up, log in and out, and API tokens in the browser."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.models import ApiToken
from webapp.accounts.tokens import issue_token


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_signs_up_and_logs_the_new_user_in(db):
    client = Client()
    r = client.post(
        "/accounts/signup/",
        {"username": "dana", "password1": "kernel-arena-42", "password2": "kernel-arena-42"},
    )
    assert r.status_code == 302 and r.url == "/"
    assert User.objects.filter(username="dana").exists()
    assert "dana" in client.get("/").content.decode()


def test_it_shows_why_a_signup_is_refused(db):
    r = Client().post(
        "/accounts/signup/", {"username": "dana", "password1": "abc", "password2": "abd"}
    )
    assert r.status_code == 200
    assert "didn’t match" in r.content.decode() or "didn't match" in r.content.decode()
    assert not User.objects.filter(username="dana").exists()


def test_it_logs_in_and_out(alice):
    client = Client()
    r = client.post("/accounts/login/", {"username": "alice", "password": "password"})
    assert r.status_code == 302 and r.url == "/"
    page = client.get("/").content.decode()
    assert "alice" in page and "Log out" in page
    r = client.post("/accounts/logout/")
    assert r.status_code == 302
    assert "Log in" in client.get("/").content.decode()


def test_it_refuses_a_wrong_password(alice):
    r = Client().post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert r.status_code == 200
    assert "correct username and password" in r.content.decode()


def test_it_sends_anonymous_visitors_of_tokens_to_log_in(db):
    r = Client().get("/accounts/tokens/")
    assert r.status_code == 302 and r.url.startswith("/accounts/login/?next=/accounts/tokens/")


def test_it_shows_a_new_token_once_and_the_token_works(alice):
    client = logged_in(alice)
    r = client.post("/accounts/tokens/", {"name": "laptop"})
    assert r.status_code == 200
    assert "no-store" in r["Cache-Control"]
    page = r.content.decode()
    plaintext = re.search(r'value="(ka_[A-Za-z0-9_-]+)"', page).group(1)
    assert "will not be shown again" in page
    token = ApiToken.objects.get(user=alice)
    assert (token.name, token.prefix) == ("laptop", plaintext[:10])

    again = client.get("/accounts/tokens/").content.decode()
    assert plaintext not in again and token.prefix in again and "laptop" in again

    api = Client(headers={"Authorization": f"Bearer {plaintext}"})
    assert api.get("/api/problems").status_code == 200


def test_it_lists_only_your_own_tokens(alice, bob):
    issue_token(alice, "alice-ci")
    issue_token(bob, "bob-laptop")
    page = logged_in(alice).get("/accounts/tokens/").content.decode()
    assert "alice-ci" in page and "bob-laptop" not in page


def test_it_revokes_a_token(alice):
    token, plaintext = issue_token(alice, "old")
    client = logged_in(alice)
    r = client.post(f"/accounts/tokens/{token.pk}/revoke")
    assert r.status_code == 302 and r.url == "/accounts/tokens/"
    assert not ApiToken.objects.exists()
    api = Client(headers={"Authorization": f"Bearer {plaintext}"})
    assert api.get("/api/problems").status_code == 401


def test_it_does_not_revoke_someone_elses_token(alice, charlie):
    token, _ = issue_token(alice)
    r = logged_in(charlie).post(f"/accounts/tokens/{token.pk}/revoke")
    assert r.status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_it_revokes_only_with_a_post(alice):
    token, _ = issue_token(alice)
    assert logged_in(alice).get(f"/accounts/tokens/{token.pk}/revoke").status_code == 405
    assert ApiToken.objects.filter(pk=token.pk).exists()
