"""The `make run` stacks of a checkout, and how an operator's command finds the one it belongs to.

Each stack (webapp/serve.py) has a private folder under .cache/redis/ (KERNELARENA_STACKS_DIR
elsewhere), flock-held for as long as the stack lives: its embedded broker's socket, when it runs
one, and stack.json, what a command needs to join it (pid, port, URL, started, the broker's and
the database's URLs, the GPU types its workers serve, its log). A second stack in the same
checkout gets another folder, so no worker of one stack ever takes another's tasks. A folder
whose lock nobody holds belongs to a stack that is gone: it never counts as live, and the next
stack to start shuts its broker down and removes it.

A command started without REDIS_URL joins the one live stack (webapp/settings.py); with several
it names them and how to pick one (KERNELARENA_STACK=<pid>); with none it says how to start one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from webapp import embedded_redis

LOCK_NAME = "stack.lock"
DESCRIPTION_NAME = "stack.json"
PICK_VARIABLE = "KERNELARENA_STACK"


@dataclass(frozen=True)
class StackDescription:
    pid: int
    port: int
    url: str
    started: str  # ISO 8601, UTC, to the second
    broker_url: str  # the REDIS_URL its processes use
    database_url: str  # its DATABASE_URL; "" for the checkout's default SQLite
    gpu_types: tuple[str, ...]
    log: str  # where its processes write

    def summary(self) -> str:
        return f"pid {self.pid} at {self.url}, started {self.started}"


@dataclass(frozen=True)
class Choice:
    """The stack a command joins, or why it joins none (`refusal`, one line naming the fix)."""

    stack: StackDescription | None
    refusal: str | None


# The variable a stack's processes find this start of it by (its folder's name, unique per start).
STARTED_AS = "KERNELARENA_STACK_STARTED_AS"


def stacks_root(repo: Path) -> Path:
    """Where the stacks' folders live: KERNELARENA_STACKS_DIR, else .cache/redis/."""
    return socket_safe(Path(os.environ.get("KERNELARENA_STACKS_DIR") or repo / ".cache" / "redis"))


def socket_safe(root: Path) -> Path:
    """`root`, or a folder of its own under /tmp/ for a root so deep that a socket path under
    it would pass the 107 bytes a unix socket's path may have."""
    if len(str(root)) < 70:
        return root
    return Path("/tmp") / f"kernelarena-{hashlib.sha256(str(root).encode()).hexdigest()[:12]}"


class StackFolder:
    """One stack's folder, locked while the stack lives."""

    def __init__(self, root: Path) -> None:
        with _root_locked(root):  # no other stack sweeps or claims meanwhile
            self.removed_stale = sweep_stale(root)
            self.path = root / f"{os.getpid()}-{secrets.token_hex(3)}"
            self.path.mkdir(mode=0o700)  # a database URL may hold a password
            # Held until this process exits; not inherited by the children (close-on-exec).
            self._lock = open(self.path / LOCK_NAME, "w")  # noqa: SIM115
            fcntl.flock(self._lock, fcntl.LOCK_EX)

    @property
    def socket(self) -> Path:
        return self.path / "redis.sock"

    def describe(self, description: StackDescription) -> None:
        """Writes stack.json, readable by this user only; replaced whole, never seen half
        written."""
        draft = self.path / f"{DESCRIPTION_NAME}.draft"
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            json.dump(asdict(description), out, indent=1)
        draft.replace(self.path / DESCRIPTION_NAME)

    def release(self) -> None:
        """Removes the folder; call it once the broker has stopped."""
        shutil.rmtree(self.path, ignore_errors=True)
        self._lock.close()


def live_stacks(root: Path) -> list[StackDescription]:
    """The described stacks whose folder's lock is held, oldest first."""
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        description = folder / DESCRIPTION_NAME
        if description.is_file() and _is_locked(folder / LOCK_NAME):
            try:
                fields = json.loads(description.read_text())
            except (OSError, ValueError):
                continue  # removed as its stack stopped
            found.append(StackDescription(**{**fields, "gpu_types": tuple(fields["gpu_types"])}))
    return sorted(found, key=lambda stack: stack.started)


def choose(root: Path, picked_pid: str | None) -> Choice:
    """The stack a command without REDIS_URL joins: the one live, or the one KERNELARENA_STACK
    names."""
    stacks = live_stacks(root)
    if picked_pid:
        picked = [stack for stack in stacks if str(stack.pid) == picked_pid.strip()]
        if picked:
            return Choice(picked[0], None)
        running = "; ".join(stack.summary() for stack in stacks) or "none"
        return Choice(
            None, f"{PICK_VARIABLE}={picked_pid}: no such stack is running (running: {running})"
        )
    if len(stacks) == 1:
        return Choice(stacks[0], None)
    if not stacks:
        return Choice(
            None,
            "no KernelArena stack is running in this checkout: start one with `make run` in "
            "another terminal (or set REDIS_URL and DATABASE_URL to those of a running stack)",
        )
    listing = "; ".join(stack.summary() for stack in stacks)
    return Choice(
        None,
        f"{len(stacks)} KernelArena stacks are running in this checkout ({listing}): pick one "
        f"by its pid, e.g. `{PICK_VARIABLE}={stacks[0].pid} .venv/bin/python manage.py ...`",
    )


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
            # An orphaned worker of the stack that is gone may still be connected: with its
            # broker gone and the socket path never used again, it takes no other stack's task.
            embedded_redis.shut_down(folder / "redis.sock")
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _is_locked(lock_path: Path) -> bool:
    try:
        with open(lock_path) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False  # a stack that is gone; the probe's lock goes with the file's closing
    except FileNotFoundError:
        return False


@contextmanager
def _root_locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".sweep.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
