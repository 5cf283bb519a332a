"""Builds tests/gpu's candidates ahead of the tests that judge them, once per cache.

    python3 -m tests.gpu.prebuild    # the cuda fixtures; scripts/gpu_tests.sh runs it beside
                                     # the whole-GPU tests, which need no candidate

The compile cache is content-addressed, so a test's own compile then finds its extension built.
Under pytest-xdist every worker asks for the same set: the first builds it (ninja per candidate,
several at once) under a file lock and leaves a marker named by the set's digest; the others wait
for the lock and find the marker instead of checking every candidate again (each such check took
8 s, one worker after another, on a lent H200). A stale marker only costs time: every test still
compiles through the cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.build import compile, workspace
from tests.conftest import FIXTURES

BUILD_THREADS = 8  # 16 on a 16-core host was slower (call 9 of session 29: 110 s against 50-95)


@dataclass(frozen=True)
class Job:
    """One candidate to build: its problem and the files an agent would write."""

    name: str
    problem: str
    files: dict[str, str]


def build_once(label: str, jobs: list[Job], root: Path) -> float:
    """Builds every job unless this cache already holds the set; the seconds spent here."""
    started = time.monotonic()
    digest = hashlib.sha256(
        json.dumps([[j.name, j.problem, j.files] for j in jobs], sort_keys=True).encode()
    ).hexdigest()[:16]
    lock_dir = settings.cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    marker = lock_dir / f"prebuild-{label}-{digest}.done"
    with open(lock_dir / f"prebuild-{label}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            with ThreadPoolExecutor(max_workers=BUILD_THREADS) as pool:
                list(pool.map(lambda job: _build(job, root), jobs))
            marker.touch()
    return time.monotonic() - started


def _build(job: Job, root: Path) -> compile.CompileResult:
    ws = workspace.create(root / job.name, job.problem, "cuda")
    for path, text in job.files.items():
        ws.write_file(path, text)
    return compile.build(ws, "cuda")


def cuda_candidate_jobs() -> list[Job]:
    """Every candidate under tests/fixtures/candidates/cuda (its problem does not change the
    build, so each is built against a stub)."""
    jobs = []
    for folder in sorted((FIXTURES / "candidates" / "cuda").iterdir()):
        files = {
            p.relative_to(folder).as_posix(): p.read_text()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }
        jobs.append(Job(folder.name, "class Model: ...", files))
    return jobs


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="prebuild-") as root:
        seconds = build_once("cuda-fixtures", cuda_candidate_jobs(), Path(root))
    print(f"prebuild: cuda fixtures in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
