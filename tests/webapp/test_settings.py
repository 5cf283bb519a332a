"""Settings: production defaults (DEBUG off, a generated key kept per checkout, what
`manage.py check --deploy` asks), and loud failures on bad values, naming the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVIRONMENT = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "KERNELARENA_HTTPS")


def run_python(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT}
    environ.update(env)
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=environ, capture_output=True, text=True, timeout=120
    )


def load_settings(**env: str) -> subprocess.CompletedProcess:
    return run_python(["-c", "import webapp.settings"], **env)


def setting(name: str, **env: str) -> str:
    done = run_python(["-c", f"import webapp.settings as s; print(s.{name})"], **env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def deploy_warnings(**env: str) -> set[str]:
    done = run_python(["manage.py", "check", "--deploy"], **env)
    return set(re.findall(r"\((\w+\.W\d+)\)", done.stdout + done.stderr))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe': use 1 or 0"),
        ({"KERNELARENA_HTTPS": "sure"}, "KERNELARENA_HTTPS='sure': use 1 or 0"),
        ({"ALLOWED_HOSTS": "a,,b"}, "ALLOWED_HOSTS='a,,b'"),
        ({"DATABASE_URL": "nosuchdb://x"}, "DATABASE_URL is not a database URL"),
        (
            {"KERNELARENA_VALIDATION_TIME_LIMIT_S": "half an hour"},
            "KERNELARENA_VALIDATION_TIME_LIMIT_S='half an hour': give a whole number, 1 or more",
        ),
        ({"KERNELARENA_ACTIVE_RUNS_PER_USER": "0"}, "KERNELARENA_ACTIVE_RUNS_PER_USER='0'"),
    ],
)
def test_it_refuses_bad_values(env, message):
    done = load_settings(**env)
    assert done.returncode != 0
    assert message in done.stderr


def test_it_starts_with_production_values():
    done = load_settings(DEBUG="0", SECRET_KEY="s" * 50, ALLOWED_HOSTS="example.org")
    assert done.returncode == 0, done.stderr


def test_it_runs_with_debug_off_unless_asked():
    assert setting("DEBUG") == "False"
    assert setting("DEBUG", DEBUG="1") == "True"


def test_it_serves_only_this_machine_unless_told():
    assert setting("ALLOWED_HOSTS") == "['127.0.0.1', 'localhost']"
    assert setting("ALLOWED_HOSTS", ALLOWED_HOSTS="example.org") == "['example.org']"


def test_it_keeps_a_generated_secret_key_per_checkout():
    first, again = setting("SECRET_KEY"), setting("SECRET_KEY")
    kept = REPO / ".cache" / "secret_key"
    assert first == again == kept.read_text().strip()
    assert len(first) >= 50
    assert kept.stat().st_mode & 0o077 == 0  # readable by its owner only
    assert setting("SECRET_KEY", SECRET_KEY="given-" + "k" * 50) == "given-" + "k" * 50


DEPLOYED = {"DEBUG": "0", "ALLOWED_HOSTS": "kernelarena.example.org", "KERNELARENA_HTTPS": "1"}
# Left on purpose; settings.py says why.
LEFT_ON_PURPOSE = {"security.W005", "security.W021"}


def test_check_deploy_finds_nothing_left_to_address_behind_https():
    assert deploy_warnings(**DEPLOYED) <= LEFT_ON_PURPOSE


@pytest.mark.parametrize(
    ("change", "warning"),
    [
        ({"KERNELARENA_HTTPS": "0"}, "security.W012"),  # session cookie sent over http
        ({"KERNELARENA_HTTPS": "0"}, "security.W004"),  # no HSTS
        ({"DEBUG": "1"}, "security.W018"),
        ({"SECRET_KEY": "s" * 50}, "security.W009"),  # a weak key
    ],
)
def test_check_deploy_reports_what_is_wrong(change, warning):
    assert warning in deploy_warnings(**{**DEPLOYED, **change})


def test_the_broker_waits_longer_than_the_longest_task_may_run():
    """An unacknowledged task is handed out again after the visibility timeout: it must not be
    while its first worker may still be at it, whichever kind's limit is the longest."""
    env = {"KERNELARENA_VALIDATION_TIME_LIMIT_S": "9000", "KERNELARENA_RUN_TIME_LIMIT_S": "60"}
    assert setting("CELERY_BROKER_TRANSPORT_OPTIONS", **env) == "{'visibility_timeout': 9600}"


def test_a_unix_socket_brokers_database_number_reaches_celery():
    """redis-py reads the database of unix://PATH?db=N; kombu reads a socket broker's from
    virtual_host and overrides a `db` with 0 (known-bad: Celery on database 0 while the channel
    layer used N; two xdist workers given databases of their own shared one broker)."""
    assert setting("CELERY_BROKER_URL", REDIS_URL="unix:///run/r.sock?db=2") == (
        "redis+socket:///run/r.sock?virtual_host=2"
    )
    assert (
        setting("CELERY_BROKER_URL", REDIS_URL="unix:///run/r.sock") == "redis+socket:///run/r.sock"
    )
