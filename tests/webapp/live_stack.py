"""The whole product as separate processes for end-to-end and browser tests: the ASGI server
(uvicorn) and Celery workers, on the test database and the test Redis, as `make run` starts
them; or `make run` itself (start_serve), with the broker of its own. Nothing is stubbed; only
the agent is scripted. The /proc walk below finds what a stack started and whether it lives."""

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
from dataclasses import dataclass
from pathlib import Path

from django.db import connection
from kombu.transport.redis import PRIORITY_STEPS, Channel

REPO = Path(__file__).resolve().parents[2]
DEMO_SCRIPT = REPO / "agent" / "configs" / "scripts" / "relu_scale_cpu.json"
ALL_KINDS = ("validate", "run", "grade")
# The Redis lists behind the cpu queues: one per broker priority (kombu keeps each priority's
# messages apart; baselines go at the lowest, webapp/celery.py).
CPU_QUEUES = tuple(
    f"gpu.cpu.{kind}{Channel.sep}{priority}" if priority else f"gpu.cpu.{kind}"
    for kind in ALL_KINDS
    for priority in PRIORITY_STEPS
)


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
        self.wait_for(self.answers, 60, "the web server to answer")
        return self

    def start_serve(self) -> LiveStack:
        """`python -m webapp.serve`, as `make run` starts it: it starts and supervises its own
        embedded Redis, web server and worker (REDIS_URL unset, so the broker is its own)."""
        self.env.pop("REDIS_URL", None)
        self.spawn("serve", [sys.executable, "-m", "webapp.serve", "--port", str(self.port)])
        self.wait_for(self.answers, 120, "the stack to answer")
        return self

    def serve_children(self, command_part: str = "") -> list[Process]:
        """The running children of the serve process whose command line has `command_part`."""
        pid = self.processes["serve"].pid
        return [p for p in running_processes() if p.parent == pid and command_part in p.command]

    def start_web(self, *options: str) -> LiveStack:
        """The web server alone, with no worker to claim runs; `options` go to uvicorn (e.g.
        "--ws", "none": a server that refuses websocket handshakes)."""
        self.web_options = options
        self.spawn("web", self._web_command())
        self.wait_for(self.answers, 60, "the web server to answer")
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

    def start_worker(self, name: str, kinds: tuple[str, ...] = ALL_KINDS) -> None:
        """A worker on the cpu queues of these kinds of work (webapp/work_kinds.py): all of
        them by default, as one process; `make run` starts one per kind."""
        queues = ",".join(f"gpu.cpu.{kind}" for kind in kinds)
        command = [sys.executable, "-m", "celery", "-A", "webapp.celery", "worker", "-l", "info",
                   "-Q", queues, "--concurrency", "1", "--hostname", f"{name}@%h"]  # fmt: skip
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

    def terminate(self, name: str) -> None:
        """SIGTERM to the worker's leader alone, as the stack's supervisor stops it: Celery's warm
        shutdown, which waits for the task in hand (the supervisor, then `kill`, ends it)."""
        self.processes[name].terminate()

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

    def start_run(self, token: str, problem_id: int, agent: str) -> dict:
        """The run, as the API's 201 returned it, of `agent` on the cpu target."""
        body = {"problem_id": problem_id, "agent": agent, "gpu_type": "cpu"}
        status, run = self.api("POST", "/api/runs", token, body)
        assert status == 201, run
        return run

    def answers(self) -> bool:
        try:
            urllib.request.urlopen(self.base_url + "/api/openapi.json", timeout=2)
            return True
        except OSError:
            return False

    def wait_for(self, predicate, timeout_s: float, what: str):
        return wait_until(predicate, timeout_s, what, self.logs)


# What a command finds in a second terminal beside `make run`: none of the stack's variables.
STACK_VARIABLES = ("REDIS_URL", "DATABASE_URL", "KERNELARENA_GPU_TYPES", "KERNELARENA_AGENTS_FILE",
                   "KERNELARENA_STACK")  # fmt: skip


def start_operator_command(stacks_dir: Path, *args: str, **env: str) -> subprocess.Popen:
    """`python manage.py ARGS` as an operator types it in this checkout, finding the stacks
    under `stacks_dir` (KERNELARENA_STACKS_DIR) and none of a stack's variables but `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in STACK_VARIABLES}
    environ.update(KERNELARENA_STACKS_DIR=str(stacks_dir), **env)
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=REPO, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def finished(command: subprocess.Popen) -> subprocess.CompletedProcess:
    """The command's end; a deadline far past any test's, only so that a hang ends the test."""
    stdout, stderr = command.communicate(timeout=1800)
    return subprocess.CompletedProcess(command.args, command.returncode, stdout, stderr)


def run_operator_command(stacks_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return finished(start_operator_command(stacks_dir, *args, **env))


def wait_until(predicate, timeout_s: float, what: str, details=lambda: ""):
    """predicate()'s first true value, polled every 0.5 s; after `timeout_s`, an AssertionError
    naming `what` and the `details()` (a stack's logs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{details()}")


# ---- processes, from /proc ----
@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    started: int  # clock ticks after boot: a pid the kernel reused has another start time
    command: str


def running_processes() -> list[Process]:
    """Every process of this machine but zombies (exited, waiting to be reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (process := read_process(int(entry.name))):
            found.append(process)
    return found


def descendants(pid: int) -> list[Process]:
    """The running processes under `pid`, children, their children and so on."""
    everything = running_processes()
    found, parents = [], {pid}
    while layer := [p for p in everything if p.parent in parents and p not in found]:
        found += layer
        parents = {p.pid for p in layer}
    return found


def still_running(processes: list[Process]) -> list[Process]:
    """Those of `processes` that run yet: the same pid, started at the same time (its parent
    may have changed: an orphan's parent is init)."""
    return [p for p in processes if (now := read_process(p.pid)) and now.started == p.started]


def read_process(pid: int) -> Process | None:
    """The process `pid` as /proc shows it now; None once it has exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The name (field 2) may hold spaces and parentheses: the fields after its last ")" count.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return Process(pid, int(fields[1]), int(fields[19]), command.strip())
