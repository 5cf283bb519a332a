"""Django for tests/webapp only: the settings module is set when this directory is collected, so
the rest of the suite runs without Django. The database is the one DATABASE_URL names (its test_
copy), SQLite otherwise. Redis is the one REDIS_URL names (under xdist, a database of this
worker's own: tests/conftest.py), otherwise an embedded redis-server on a socket of this test
process's own (started by the `redis_server` fixture).

Named users: alice and bob own things; charlie is the outsider in every 404/403 test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import django
import pytest

REPO = Path(__file__).resolve().parents[2]
_ENVIRONMENT_BEFORE = dict(os.environ)
EMBEDDED_REDIS_SOCKET: Path | None = None
if not os.environ.get("REDIS_URL"):
    EMBEDDED_REDIS_SOCKET = REPO / ".cache" / f"redis-test-{os.getpid()}" / "redis.sock"
    os.environ["REDIS_URL"] = f"unix://{EMBEDDED_REDIS_SOCKET}"
# The `make run` stacks tests start (python -m webapp.serve) keep their folders in one of this
# process's own, not the checkout's .cache/redis/: another xdist worker's stacks, or a developer's
# own `make run`, are then none of this process's to see, count or sweep.
STACKS_DIR = REPO / ".cache" / f"stacks-test-{os.getpid()}"
os.environ["KERNELARENA_STACKS_DIR"] = str(STACKS_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django.setup()


_SET_HERE = {
    "REDIS_URL": EMBEDDED_REDIS_SOCKET is not None,
    "DJANGO_SETTINGS_MODULE": "DJANGO_SETTINGS_MODULE" not in _ENVIRONMENT_BEFORE,
}


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's controller loads this file too when the command names a folder below
    # tests/webapp; it runs no test, and its workers must not inherit what this file set for it:
    # a worker given DJANGO_SETTINGS_MODULE sets Django up before its own conftests load, with
    # the controller's REDIS_URL, a socket no process serves (the channel layer then hangs).
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        for name, set_here in _SET_HERE.items():
            if set_here:
                os.environ.pop(name, None)
    # pytest-django blocks the database for tests that did not ask for it, but only when Django
    # was set up before its own configure hook ran; this conftest loads later.
    from pytest_django.plugin import blocking_manager_key

    config.stash[blocking_manager_key].block()


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(STACKS_DIR, ignore_errors=True)  # the stacks in it have stopped


from django.contrib.auth.models import User  # noqa: E402
from django.test import Client  # noqa: E402

from tests.conftest import problem_source  # noqa: E402
from tests.webapp.live_stack import CPU_QUEUES, LiveStack  # noqa: E402
from webapp.accounts.tokens import issue_token  # noqa: E402
from webapp.problems.models import Problem, ProblemStatus, Visibility  # noqa: E402
from webapp.runs.models import Run  # noqa: E402


@pytest.fixture(scope="session")
def redis_server():
    """The channel layer and broker: REDIS_URL's server, or an embedded one for this session."""
    from webapp import embedded_redis

    process = None
    if EMBEDDED_REDIS_SOCKET is not None:
        process = embedded_redis.start(EMBEDDED_REDIS_SOCKET)
    yield os.environ["REDIS_URL"]
    embedded_redis.stop(process)


@pytest.fixture
def stack(redis_server, tmp_path):
    """The whole product as processes (live_stack.py): the web server and one worker."""
    import redis

    redis.Redis.from_url(redis_server).delete(*CPU_QUEUES)  # nothing left from an earlier session
    live = LiveStack(tmp_path).start()
    yield live
    live.stop()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless chromium as root, with no reach beyond this machine.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser(monkeypatch):
    """Debian's chromium driven by Playwright (its own browser download does not work here)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it as root)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM is used between calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def alice(db) -> User:
    return User.objects.create_user("alice", "alice@example.org", "password")


@pytest.fixture
def bob(db) -> User:
    return User.objects.create_user("bob", "bob@example.org", "password")


@pytest.fixture
def charlie(db) -> User:
    return User.objects.create_user("charlie", "charlie@example.org", "password")


def api_client(user: User) -> Client:
    """A test client that authenticates as `user` with a fresh API token."""
    _, plaintext = issue_token(user)
    return Client(headers={"Authorization": f"Bearer {plaintext}"})


@pytest.fixture
def agents_file(tmp_path, monkeypatch):
    """Makes an agents file of the given TOML the one every agent lookup reads."""

    def write(toml: str):
        path = tmp_path / "agents.toml"
        path.write_text(toml)
        monkeypatch.setenv("KERNELARENA_AGENTS_FILE", str(path))
        return path

    return write


@pytest.fixture
def relu_scale() -> str:
    return problem_source("relu_scale")


def make_problem(owner: User, source: str, *, public: bool = False, valid: bool = True):
    return Problem.objects.create(
        owner=owner,
        title="relu scale",
        source=source,
        visibility=Visibility.PUBLIC if public else Visibility.PRIVATE,
        status=ProblemStatus.VALID if valid else ProblemStatus.PENDING,
    )


def make_run(owner: User, problem: Problem) -> Run:
    return Run.objects.create(
        problem=problem, owner=owner, agent="scripted-demo", gpu_type="cpu", protocol="loose"
    )
