"""An operator's mistake in a command is one line on stderr that names the fix, and a non-zero
exit, never a traceback: no stack to join, several, an unreachable broker or database, a database
never migrated, a folder or suite that does not exist, a GPU type no worker serves. Each command
is a real `manage.py` process; a "stack" here is a real stack folder (webapp/local_stacks.py),
its lock held by this test process, describing this test session's real Redis and database."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.webapp.live_stack import database_url
from tests.webapp.live_stack import run_operator_command as manage
from webapp import local_stacks
from webapp.suites.models import Suite

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stacks_dir(tmp_path) -> Path:
    return tmp_path / "stacks"


def assert_refused(done: subprocess.CompletedProcess, *phrases: str) -> str:
    """The command failed with exactly one line on stderr holding every phrase."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0, done.stdout
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def described_stack(
    stacks_dir: Path, pid: int, broker_url: str, gpu_types=("cpu",)
) -> local_stacks.StackFolder:
    """A live stack as commands see it: a locked folder with its stack.json."""
    folder = local_stacks.StackFolder(local_stacks.socket_safe(stacks_dir))
    folder.describe(
        local_stacks.StackDescription(
            pid=pid,
            port=8000 + pid % 1000,
            url=f"http://127.0.0.1:{8000 + pid % 1000}/",
            started=f"2026-01-01T00:00:{pid % 60:02d}Z",
            broker_url=broker_url,
            database_url=database_url(),
            gpu_types=tuple(gpu_types),
            log="/dev/null",
        )
    )
    return folder


def test_with_no_stack_running_a_command_says_how_to_start_one(stacks_dir, tmp_path):
    gone = described_stack(stacks_dir, 4001, "unix:///nowhere.sock")
    gone._lock.close()  # its stack is gone: the folder stays, its lock is free
    done = manage(stacks_dir, "import_suite", str(tmp_path), "--name", "mini")
    assert_refused(done, "no KernelArena stack is running", "`make run`")


def test_with_two_stacks_running_it_lists_them_and_how_to_pick_one(stacks_dir, redis_server):
    first = described_stack(stacks_dir, 4101, redis_server)
    second = described_stack(stacks_dir, 4102, redis_server)
    try:
        done = manage(stacks_dir, "benchmark_baselines", "--suite", "nope", "--gpu", "cpu")
        line = assert_refused(done, "2 KernelArena stacks are running", "KERNELARENA_STACK=4101")
        assert "pid 4101 at http://127.0.0.1:8101/" in line and "pid 4102" in line
        assert "started 2026-01-01T00:00:21Z" in line

        picked = manage(
            stacks_dir, "benchmark_baselines", "--suite", "nope", "--gpu", "cpu",
            KERNELARENA_STACK="4102",
        )  # fmt: skip
        assert_refused(picked, "no suite 'nope'")  # past the stack: it joined the one picked
    finally:
        first.release()
        second.release()


def test_in_the_stack_it_joined_a_missing_folder_suite_or_gpu_type_is_named(
    stacks_dir, redis_server, tmp_path
):
    Suite.objects.create(name="mini")  # in the test database the stack describes
    stack = described_stack(stacks_dir, 4201, redis_server, gpu_types=("cpu",))
    try:
        nowhere = tmp_path / "nowhere"
        done = manage(stacks_dir, "import_suite", str(nowhere), "--name", "x")
        assert_refused(done, f"{nowhere} is not a folder")
        done = manage(stacks_dir, "synthesize", "--count", "1", "--seed", "1", "--into", "x",
                      "--reference", str(nowhere))  # fmt: skip
        assert_refused(done, f"{nowhere} is not a folder")
        done = manage(stacks_dir, "evaluate_suite", "--suite", "nope", "--agent", "fusion",
                      "--gpu", "cpu")  # fmt: skip
        assert_refused(done, "no suite 'nope' (known: mini)", "import_suite")
        done = manage(stacks_dir, "evaluate_suite", "--suite", "mini", "--agent", "fusion",
                      "--gpu", "h100")  # fmt: skip
        assert_refused(done, "unknown GPU type 'h100': use one of cpu")
        done = manage(stacks_dir, "benchmark_baselines", "--suite", "mini", "--gpu", "h100")
        assert_refused(done, "unknown GPU type 'h100': use one of cpu")
    finally:
        stack.release()


def test_an_unreachable_broker_or_database_is_named(stacks_dir, redis_server, tmp_path):
    broker = f"unix://{tmp_path}/no-redis.sock"
    done = manage(stacks_dir, "import_suite", str(tmp_path), REDIS_URL=broker,
                  DATABASE_URL=database_url())  # fmt: skip
    assert_refused(done, f"cannot reach the broker at {broker}", "REDIS_URL")

    nobody = "postgres://nobody:secret@127.0.0.1:1/nothing"
    done = manage(stacks_dir, "import_suite", str(tmp_path), REDIS_URL=redis_server,
                  DATABASE_URL=nobody)  # fmt: skip
    line = assert_refused(done, "cannot reach the database nothing on 127.0.0.1:1", "DATABASE_URL")
    assert "secret" not in line

    empty = tmp_path / "empty.sqlite3"
    done = manage(stacks_dir, "report", "--suite", "mini", "--gpu", "cpu",
                  DATABASE_URL=f"sqlite:///{empty}")  # fmt: skip
    assert_refused(done, f"the database {empty} lacks", "manage.py migrate")


def test_commands_that_send_no_work_need_no_stack(stacks_dir, tmp_path):
    Suite.objects.create(name="mini")
    done = manage(stacks_dir, "report", "--suite", "mini", "--gpu", "cpu",
                  DATABASE_URL=database_url())  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "# Suite mini on cpu" in done.stdout
    done = manage(stacks_dir, "export_dataset", "--suite", "mini", "--output",
                  str(tmp_path / "out"), DATABASE_URL=database_url())  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_redis_url_and_database_url_win_over_the_stack(stacks_dir, redis_server, tmp_path):
    stack = described_stack(stacks_dir, 4301, f"unix://{tmp_path}/gone.sock")  # its broker died
    try:
        nowhere = tmp_path / "nowhere"
        # A process given REDIS_URL joins no stack (the stack's database neither): past the
        # database and the broker, both the environment's, to the folder
        done = manage(
            stacks_dir, "import_suite", str(nowhere), REDIS_URL=redis_server,
            DATABASE_URL=database_url(),
        )  # fmt: skip
        assert_refused(done, f"{nowhere} is not a folder")
        empty = tmp_path / "empty.sqlite3"
        done = manage(stacks_dir, "import_suite", str(nowhere), DATABASE_URL=f"sqlite:///{empty}")
        assert_refused(done, f"the database {empty} lacks")  # not the stack's database
        done = manage(stacks_dir, "import_suite", str(nowhere))
        assert_refused(done, f"cannot reach the broker at unix://{tmp_path}/gone.sock")
    finally:
        stack.release()
