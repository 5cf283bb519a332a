"""The API authenticates with `Authorization: Bearer <token>` or the browser session."""

from __future__ import annotations

from django.test import Client

from webapp.accounts.models import ApiToken
from webapp.accounts.tokens import issue_token


def test_it_refuses_a_request_without_a_token(db):
    r = Client().get("/api/problems")
    assert r.status_code == 401
    assert "Authorization: Bearer" in r.json()["detail"]


def test_it_refuses_an_unknown_token(alice):
    r = Client(headers={"Authorization": "Bearer ka_not-a-token"}).get("/api/problems")
    assert r.status_code == 401


def test_it_refuses_a_token_of_an_inactive_user(alice):
    _, plaintext = issue_token(alice)
    alice.is_active = False
    alice.save()
    r = Client(headers={"Authorization": f"Bearer {plaintext}"}).get("/api/problems")
    assert r.status_code == 401


def test_it_accepts_a_token_and_records_its_use(alice):
    token, plaintext = issue_token(alice, name="laptop")
    assert token.last_used is None
    r = Client(headers={"Authorization": f"Bearer {plaintext}"}).get("/api/problems")
    assert r.status_code == 200
    token.refresh_from_db()
    assert token.last_used is not None


def test_it_stores_only_a_hash(alice):
    _, plaintext = issue_token(alice)
    stored = ApiToken.objects.get()
    assert plaintext.startswith("ka_") and len(plaintext) > 40
    assert plaintext not in (stored.key_hash, stored.prefix)
    assert stored.prefix == plaintext[:10]


def test_it_accepts_the_browser_session(alice):
    client = Client()
    client.force_login(alice)
    assert client.get("/api/problems").status_code == 200


def test_it_serves_the_openapi_docs(db):
    assert Client().get("/api/docs").status_code == 200
    assert "/api/runs/{run_id}/events" in Client().get("/api/openapi.json").json()["paths"]
