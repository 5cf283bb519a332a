"""Settings fail loudly on bad values, naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_settings(**env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", "import webapp.settings"],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe': use 1 or 0"),
        ({"DEBUG": "0", "ALLOWED_HOSTS": "example.org"}, "SECRET_KEY is required"),
        ({"DEBUG": "0", "SECRET_KEY": "s", "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS is required"),
        ({"ALLOWED_HOSTS": "a,,b"}, "ALLOWED_HOSTS='a,,b'"),
        ({"DATABASE_URL": "nosuchdb://x"}, "DATABASE_URL is not a database URL"),
    ],
)
def test_it_refuses_bad_values(env, message):
    done = load_settings(**env)
    assert done.returncode != 0
    assert message in done.stderr


def test_it_starts_with_production_values():
    done = load_settings(DEBUG="0", SECRET_KEY="s" * 50, ALLOWED_HOSTS="example.org")
    assert done.returncode == 0, done.stderr
