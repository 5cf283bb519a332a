"""Five wrong passwords for one username from one address lock that pair out for 15 minutes, and
the log-in page says when to try again."""

from __future__ import annotations

import re

from django.test import Client

from tests.webapp.accounts.lockout_clock import minutes_pass

WHEN = re.compile(r"try again after \d\d:\d\d UTC \(in 15 minutes\)")


def log_in(client: Client, username: str, password: str = "password"):
    return client.post("/accounts/login/", {"username": username, "password": password})


def fail(client: Client, username: str, times: int):
    for _ in range(times - 1):
        assert log_in(client, username, "wrong").status_code == 200
    return log_in(client, username, "wrong")


def is_logged_in(client: Client) -> bool:
    return "Log out" in client.get("/").content.decode()


def test_four_wrong_passwords_do_not_lock_out(alice):
    client = Client()
    assert "correct username and password" in fail(client, "alice", 4).content.decode()
    assert log_in(client, "alice").status_code == 302
    assert is_logged_in(client)


def test_five_wrong_passwords_lock_the_username_out_of_the_address(alice):
    client = Client()
    fifth = fail(client, "alice", 5)
    assert fifth.status_code == 429
    assert "Too many failed log-ins as alice from your address" in fifth.content.decode()

    r = log_in(client, "alice")  # the right password
    assert r.status_code == 429
    page = r.content.decode()
    assert WHEN.search(page)
    assert 'name="password"' in page  # still the log-in page, with the form
    assert not is_logged_in(client)


def test_the_lock_holds_only_that_username_on_that_address(alice, bob):
    fail(Client(REMOTE_ADDR="10.0.0.1"), "alice", 5)
    assert log_in(Client(REMOTE_ADDR="10.0.0.1"), "alice").status_code == 429
    assert log_in(Client(REMOTE_ADDR="10.0.0.1"), "bob").status_code == 302
    assert log_in(Client(REMOTE_ADDR="10.0.0.2"), "alice").status_code == 302


def test_the_username_logs_in_again_after_the_cool_off(alice):
    client = Client()
    fail(client, "alice", 5)
    minutes_pass(14)
    assert log_in(client, "alice").status_code == 429  # a try while locked starts it again
    minutes_pass(14)
    assert log_in(client, "alice").status_code == 429
    minutes_pass(15)
    assert log_in(client, "alice").status_code == 302
    assert is_logged_in(client)


def test_a_success_clears_the_failures(alice):
    client = Client()
    fail(client, "alice", 4)
    assert log_in(client, "alice").status_code == 302
    client.post("/accounts/logout/")
    assert fail(client, "alice", 4).status_code == 200
    assert log_in(client, "alice").status_code == 302
