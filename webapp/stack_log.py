"""The log of one `make run` stack: what its web server, workers and serve itself say (workers'
banners, celery's warnings, tracebacks), so that the terminal keeps to the URL, the GPU types,
where this file is, and the supervisor's news of a process that died.

One file per stack, .cache/logs/stack-<started>-<pid>.log, kept after the stack stops for
whoever looks into why it did (the newest KEPT of them); restarted workers append to it.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

KEPT = 20


@dataclass
class StackLog:
    path: Path
    file: IO[str]

    @classmethod
    def open(cls, folder: Path) -> StackLog:
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        path = folder / f"stack-{stamp}-{os.getpid()}.log"
        for old in sorted(folder.glob("stack-*.log"))[: -KEPT + 1]:
            old.unlink(missing_ok=True)
        return cls(path, open(path, "a", buffering=1))  # noqa: SIM115 (open while the stack is)

    def write(self, line: str) -> None:
        self.file.write(f"[serve {datetime.now(UTC):%H:%M:%S}] {line}\n")

    def popen_options(self) -> dict:
        """A child's stdout and stderr, both into this file."""
        return {"stdout": self.file, "stderr": subprocess.STDOUT}

    def shown(self) -> str:
        """The path as a person in the checkout would type it."""
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)
