"""People's own model API keys: saved encrypted per agent that takes one, shown only by their last
four characters, replaced, removed, and private to their owner (page and API)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.conftest import api_client
from webapp.runs import model_keys
from webapp.runs.models import ModelKey, Run
from webapp.runs.secrets import decrypt

KEY = "sk-proj-0123456789abcdefWXYZ"


@pytest.fixture(autouse=True)
def agents(agents_file):
    agents_file(
        '[agents.frontier]\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
        'api_key_env = "FRONTIER_KEY"\n\n'
        '[agents.local]\nbackend = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
    )


def put_key(user, agent: str, key: str):
    return api_client(user).put(
        f"/api/model-keys/{agent}", {"key": key}, content_type="application/json"
    )


def test_a_key_is_saved_encrypted_and_shown_by_its_last_four(alice):
    answer = put_key(alice, "frontier", KEY)
    assert answer.status_code == 200
    assert answer.json()["agent"] == "frontier" and answer.json()["last4"] == "WXYZ"
    stored = ModelKey.objects.get(owner=alice, agent="frontier")
    assert KEY not in stored.encrypted and decrypt(stored.encrypted) == KEY
    listed = api_client(alice).get("/api/model-keys")
    assert [k["last4"] for k in listed.json()] == ["WXYZ"] and KEY not in listed.content.decode()


def test_saving_again_replaces_and_deleting_removes(alice):
    put_key(alice, "frontier", KEY)
    put_key(alice, "frontier", "sk-second-key-000000000001")
    (stored,) = ModelKey.objects.filter(owner=alice)
    assert decrypt(stored.encrypted) == "sk-second-key-000000000001"
    client = api_client(alice)
    assert client.delete("/api/model-keys/frontier").status_code == 204
    assert client.delete("/api/model-keys/frontier").status_code == 404
    assert not ModelKey.objects.exists()


@pytest.mark.parametrize(
    "agent,key,reason",
    [
        ("local", KEY, "takes no API key: keys are for frontier"),
        ("nobody", KEY, "takes no API key"),
        ("frontier", "sk with spaces", "without spaces"),
        ("frontier", "sk-\x00nul", "printable"),
    ],
)
def test_a_key_that_cannot_be_one_is_a_422_that_says_why(alice, agent, key, reason):
    answer = put_key(alice, agent, key)
    assert answer.status_code == 422 and reason in answer.json()["detail"]
    assert not ModelKey.objects.exists()


def test_a_short_key_shows_no_characters(alice):
    assert put_key(alice, "frontier", "sk-short").json()["last4"] == ""


def test_keys_are_private_to_their_owner(alice, bob):
    put_key(alice, "frontier", KEY)
    assert api_client(bob).get("/api/model-keys").json() == []
    assert api_client(bob).delete("/api/model-keys/frontier").status_code == 404
    page = Client()
    page.force_login(bob)
    assert "WXYZ" not in page.get("/keys/").content.decode()
    assert ModelKey.objects.filter(owner=alice).exists()


def test_the_page_saves_replaces_and_removes(alice):
    page = Client()
    page.force_login(alice)
    shown = page.get("/keys/")
    assert shown.status_code == 200 and "frontier" in shown.content.decode()
    saved = page.post("/keys/", {"action": "save", "agent": "frontier", "key": KEY}, follow=True)
    text = saved.content.decode()
    assert "Saved your key for frontier" in text and "…WXYZ" in text and KEY not in text
    refused = page.post("/keys/", {"action": "save", "agent": "frontier", "key": "a b"})
    assert refused.status_code == 422 and "without spaces" in refused.content.decode()
    page.post("/keys/", {"action": "remove", "agent": "frontier"})
    assert not ModelKey.objects.exists()


def test_the_page_needs_a_login():
    assert Client().get("/keys/").status_code == 302


def test_a_run_gets_its_owners_key_and_no_one_elses(alice, bob):
    put_key(alice, "frontier", KEY)
    mine = Run(owner=alice, agent="frontier")
    theirs = Run(owner=bob, agent="frontier")
    other_agent = Run(owner=alice, agent="local")
    assert model_keys.key_for_run(mine) == KEY
    assert model_keys.key_for_run(theirs) is None
    assert model_keys.key_for_run(other_agent) is None


def test_a_key_saved_under_another_secrets_key_asks_to_be_saved_again(alice, settings):
    put_key(alice, "frontier", KEY)
    settings.SECRETS_KEY = "x" * 43 + "="  # another Fernet key
    run = Run(owner=alice, agent="frontier")
    with pytest.raises(model_keys.UnusableModelKey, match="save it again"):
        model_keys.key_for_run(run)
