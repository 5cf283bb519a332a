"""Five bad API tokens from one address lock that address out of token authentication for 15
minutes (429 with a JSON detail); other addresses keep working."""

from __future__ import annotations

import re

from django.test import Client

from tests.webapp.accounts.lockout_clock import minutes_pass
from webapp.accounts.tokens import issue_token

DETAIL = re.compile(
    r"too many bad API tokens from your address: try again after \d\d:\d\d UTC \(in 15 minutes\)"
)


def get_problems(token: str, address: str = "127.0.0.1"):
    client = Client(REMOTE_ADDR=address, headers={"Authorization": f"Bearer {token}"})
    return client.get("/api/problems")


def send_bad_tokens(times: int, address: str = "127.0.0.1"):
    for _ in range(times - 1):
        assert get_problems("ka_not-a-token", address).status_code == 401
    return get_problems("ka_not-a-token", address)


def test_four_bad_tokens_do_not_lock_out(alice):
    _, token = issue_token(alice)
    assert send_bad_tokens(4).status_code == 401
    assert get_problems(token).status_code == 200


def test_five_bad_tokens_lock_the_address_out(alice):
    _, token = issue_token(alice)
    fifth = send_bad_tokens(5)
    assert fifth.status_code == 429
    assert fifth["Content-Type"] == "application/json"
    assert DETAIL.fullmatch(fifth.json()["detail"])

    locked = get_problems(token)  # a good token, from the locked address
    assert locked.status_code == 429
    assert DETAIL.fullmatch(locked.json()["detail"])
    assert get_problems(token, address="10.0.0.2").status_code == 200


def test_bad_tokens_do_not_lock_the_log_in_page(alice):
    send_bad_tokens(5)
    r = Client().post("/accounts/login/", {"username": "alice", "password": "password"})
    assert r.status_code == 302


def test_the_address_gets_in_again_after_the_cool_off(alice):
    _, token = issue_token(alice)
    send_bad_tokens(5)
    minutes_pass(14)
    assert get_problems(token).status_code == 429  # a try while locked starts it again
    minutes_pass(14)
    assert get_problems(token).status_code == 429
    minutes_pass(15)
    assert get_problems(token).status_code == 200
