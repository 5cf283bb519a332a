"""What the attack tests share (test_attacks.py on cpu, tests/gpu/test_cuda_attacks.py on cuda):
a scan of every class of host location an escape would leave a file in, digests of folders, the
host's processes, and the fixtures' own search functions run on the host (the known-bads)."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import sqlite3
import tempfile
import threading
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.build import workspace
from gpu_workers.harness.session import Session
from tests.conftest import FIXTURES, candidate_dir

REPO = settings.REPO_ROOT
# Every attack writes this into what it plants (spelled in two parts so this file is no match).
MARK = b"KERNELARENA-" + b"ATTACK"
PLANTED_NAME = "ka-" + "attack"


def submit(session: Session, name: str) -> None:
    """Replaces the workspace's candidate by a fixture, as an agent's next attempt would."""
    for old in (session.workspace.root / "kernels").iterdir():
        old.unlink()
    workspace.copy_candidate(session.workspace, candidate_dir(session.device, name))
    session._verified = None  # judge anew even when the sources are the same


def verify(session: Session, name: str) -> dict:
    submit(session, name)
    compiled = session.compile()
    assert compiled["ok"], compiled["log"]
    return session.verify()


def evaluate(session: Session, name: str) -> dict:
    submit(session, name)
    verdict = session.evaluate()
    assert verdict["compile"]["ok"], verdict["compile"]["log"]
    return verdict


def _legitimate_copies() -> set[bytes]:
    """The fixtures' own sources: the harness copies them into workspaces, which is no escape."""
    return {p.read_bytes() for p in FIXTURES.rglob("*") if p.is_file()}


LEGITIMATE = _legitimate_copies()
# Every class of host location a sandboxed process could reach if it were not confined: the
# repository (harness source, database, media), the kernel cache, every run's folder (they live
# under the host's /tmp), the host's shared memory and temporary folders, and the home folder.
DEEP_ROOTS = (REPO, settings.cache_dir(), Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"))
SHALLOW_ROOTS = (Path.home(), Path("/"))  # top level only: the home holds whole toolchains
# Not where a run's files go, and large: version control, bytecode, packages, and the job folder
# of the machine's shell tool (its logs quote these tests).
PRUNED = {".git", "__pycache__", "node_modules", "site-packages", ".venv", "bash_jobs.0"}


def escaped(since: float) -> list[str]:
    """Host files written since `since` that an attack planted: its name or its marker."""
    found = []

    def look(path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if max(st.st_mtime, st.st_ctime) < since or not os.path.isfile(path):
            return
        if PLANTED_NAME in os.path.basename(path):
            found.append(path)
            return
        if st.st_size <= 1 << 20:
            try:
                data = Path(path).read_bytes()
            except OSError:
                return
            if MARK in data and data not in LEGITIMATE:
                found.append(path)

    for root in DEEP_ROOTS:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in PRUNED]
            for name in files:
                look(os.path.join(folder, name))
    for root in SHALLOW_ROOTS:
        for name in os.listdir(root):
            look(os.path.join(root, name))
    return sorted(set(found))


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root and its content's hash (a write anywhere in it shows)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def host_processes_with(marker: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def definitions(path: Path, names: set[str], **overrides) -> dict:
    """The named top-level functions and constants of a fixture, to run on the host: shows
    what the attack's search would find where nothing confines it."""
    tree = ast.parse(path.read_text())
    keep = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in names)
        or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
        )
    ]
    space = {"os": os, "re": re, "sqlite3": sqlite3, "Path": Path}
    exec(compile(ast.Module(keep, type_ignores=[]), str(path), "exec"), space)  # noqa: S102
    space.update(overrides)
    return space


class WalkOnly:
    """os, with the attack's walk of / narrowed to a few host folders (the whole host is
    slow to walk) and no /proc lookups of other processes."""

    def __init__(self, roots: list[str]):
        self._roots = roots
        self.path = os.path

    def listdir(self, path):
        return [] if path == "/proc" else os.listdir(path)

    def walk(self, root):
        if root != "/":
            return iter(())
        return (entry for r in self._roots for entry in os.walk(r))

    def __getattr__(self, name):
        return getattr(os, name)


# How far the host's free space may fall while an attack runs: the host's own work goes on beside
# it (another job's build, another test's 1 GiB known-bad), so the bound sits far above that and
# far under what an escape writes there (the filler 3 GiB in each place, the flood 4 GiB).
HOST_DROP_LIMIT = 2 << 30


class HostDiskWatch:
    """Samples the free space of the host's temporary folder (where a worker's files go) while
    in use; `largest_drop` is how far it fell below where it started."""

    def __init__(self, period_s: float = 0.05):
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.largest_drop = 0

    @staticmethod
    def _free() -> int:
        stats = os.statvfs(tempfile.gettempdir())
        return stats.f_bavail * stats.f_frsize

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.largest_drop = max(self.largest_drop, self._start - self._free())
            self._stop.wait(self._period_s)

    def __enter__(self) -> HostDiskWatch:
        self._start = self._free()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.largest_drop = max(self.largest_drop, self._start - self._free())
