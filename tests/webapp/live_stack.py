"""The whole product as separate processes for end-to-end and browser tests: the ASGI server
(uvicorn) and Celery workers, on the test database and the test Redis, as `make run` starts
them. Nothing is stubbed; only the agent is scripted."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.db import connection

REPO = Path(__file__).resolve().parents[2]
DEMO_SCRIPT = REPO / "agent" / "configs" / "scripts" / "relu_scale_cpu.json"


def database_url() -> str:
    """The test database (pytest-django's copy) as a URL the child processes can open."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_agents_file(folder: Path) -> Path:
    """scripted-demo as shipped, and scripted-slow: the same session with pauses, long enough to
    kill its worker in the middle."""
    actions = json.loads(DEMO_SCRIPT.read_text())
    pause = [
        {"thought": f"look again ({i})", "tool": "list_files", "delay_s": 1.0} for i in range(8)
    ]
    slow = folder / "slow.json"
    slow.write_text(json.dumps(actions[:1] + pause + actions[1:]))
    path = folder / "agents.toml"
    path.write_text(
        f'[agents.scripted-demo]\nbackend = "scripted"\nscript = "{DEMO_SCRIPT}"\n'
        "[agents.scripted-demo.budget]\nmax_turns = 10\n"
        f'[agents.scripted-slow]\nbackend = "scripted"\nscript = "{slow}"\n'
        "[agents.scripted-slow.budget]\nmax_turns = 20\n"
    )
    return path


class LiveStack:
    def __init__(self, folder: Path, stale_after_s: int = 4):
        self.folder = folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "DATABASE_URL": database_url(),
            "KERNELARENA_AGENTS_FILE": str(write_agents_file(folder)),
            "KERNELARENA_RUN_STALE_AFTER_S": str(stale_after_s),
            "KERNELARENA_GPU_TYPES": "cpu",
            "PYTHONUNBUFFERED": "1",
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self.web_options: tuple[str, ...] = ()

    def start(self) -> LiveStack:
        self.spawn("web", self._web_command())
        self.start_worker("worker-1")
        self.wait_for(lambda: self._answers(), 60, "the web server to answer")
        return self

    def start_web(self, *options: str) -> LiveStack:
        """The web server alone, with no worker to claim runs; `options` go to uvicorn (e.g.
        "--ws", "none": a server that refuses websocket handshakes)."""
        self.web_options = options
        self.spawn("web", self._web_command())
        self.wait_for(lambda: self._answers(), 60, "the web server to answer")
        return self

    def stop_web(self) -> None:
        """Kills the web server, as a crash would: every websocket drops. start_web() starts it
        again on the same port."""
        process = self.processes["web"]
        self.kill("web")
        process.wait(timeout=20)

    def _web_command(self) -> list[str]:
        return [sys.executable, "-m", "uvicorn", "webapp.asgi:application",
                "--port", str(self.port), *self.web_options]  # fmt: skip

    def start_worker(self, name: str) -> None:
        command = [sys.executable, "-m", "celery", "-A", "webapp.celery", "worker", "-l", "info",
                   "-Q", "gpu.cpu", "--concurrency", "1", "--hostname", f"{name}@%h"]  # fmt: skip
        self.spawn(name, command)

    def spawn(self, name: str, command: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "a")  # noqa: SIM115 (closed with the process)
        self.processes[name] = subprocess.Popen(
            command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def kill(self, name: str) -> None:
        """SIGKILL to the process group: the worker and its pool die with no chance to clean up."""
        os.killpg(self.processes.pop(name).pid, signal.SIGKILL)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.folder.glob("*.log")):
            parts.append(f"==== {path.name}\n{path.read_text()[-4000:]}")
        return "\n".join(parts)

    # ---- HTTP ----
    def api(self, method: str, path: str, token: str, body: dict | None = None):
        """(status, decoded JSON or raw bytes) of one request to the live server."""
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw, kind = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, raw, kind = error.code, error.read(), error.headers
        is_json = kind.get("Content-Type", "").startswith("application/json")
        return status, json.loads(raw) if is_json else raw

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.base_url + "/api/openapi.json", timeout=2)
            return True
        except OSError:
            return False

    def wait_for(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{self.logs()}")
