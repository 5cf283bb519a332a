"""The one-command run (`make run`): the whole product on this machine, no external server.

    python -m webapp.serve [--host 127.0.0.1] [--port 8000]

Starts an embedded Redis of this stack's own (unless REDIS_URL names one; webapp/embedded_redis.py),
migrates the database (SQLite in .cache/ unless DATABASE_URL names one), imports the committed
results in benchmarks/results/ (so the boards measured on a GPU host show here without one;
importing again changes nothing), then the ASGI server and a Celery worker per kind of work
(webapp/work_kinds.py: validation, runs, re-grades), each on its queues for every GPU type with
its own concurrency (KERNELARENA_<KIND>_CONCURRENCY), so a validation that hangs never holds
a run. webapp/supervisor.py restarts a worker when it dies; the death of the web server or the
broker stops the stack (exit status 1), and so do Ctrl-C and SIGTERM (status 0). No process it
started outlives it, even when it is killed hard (webapp/child_process.py). With no GPU the
workers serve the cpu target. With one, the GPU type is named after it (e.g. "h100"), unless
KERNELARENA_GPU_TYPES is set.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from webapp import child_process, embedded_redis, work_kinds
from webapp.supervisor import Supervisor

REPO = Path(__file__).resolve().parent.parent


def detected_gpu_type() -> str:
    """ "h100" for an "NVIDIA H100 80GB HBM3", "cpu" with no NVIDIA GPU."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return "cpu"
    done = subprocess.run(
        [exe, "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
        capture_output=True,
        text=True,
    )
    name = done.stdout.strip().lower().removeprefix("nvidia ").replace("geforce ", "")
    if done.returncode != 0 or not name:
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", name.split()[0]).strip("-") or "cuda"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webapp.serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    supervisor = Supervisor()  # first: a SIGTERM from here on stops whatever has started
    broker_folder = None
    if not os.environ.get("REDIS_URL"):
        broker_folder = embedded_redis.PrivateFolder(embedded_redis.stacks_root(REPO))
        for folder in broker_folder.removed_stale:
            print(f"removed the embedded Redis of a stack that is gone: {folder}", flush=True)
        # Before Django reads its settings, and inherited by the web server and the worker.
        os.environ["REDIS_URL"] = f"unix://{broker_folder.socket}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("KERNELARENA_GPU_TYPES", detected_gpu_type())
    try:
        return _serve(supervisor, broker_folder, args.host, args.port)
    finally:
        supervisor.stop()
        if broker_folder is not None:
            broker_folder.release()


def _serve(
    supervisor: Supervisor, broker_folder: embedded_redis.PrivateFolder | None, host: str, port: int
) -> int:
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    if broker_folder is not None:
        supervisor.add("broker", lambda: embedded_redis.start(broker_folder.socket), False)
        print(f"embedded Redis: REDIS_URL={os.environ['REDIS_URL']} joins this stack", flush=True)
    call_command("migrate", interactive=False, verbosity=0)
    import_committed_results()
    supervisor.add("web", lambda: _start_web(host, port), restarts=False)
    for kind in work_kinds.KINDS:
        starter = _worker_starter(kind, settings.GPU_TYPES)
        supervisor.add(f"{kind.label} worker", starter, restarts=True)
    url = f"http://{host}:{port}/"
    print(f"KernelArena at {url} (GPU types: {', '.join(settings.GPU_TYPES)}). Ctrl-C stops.")
    return supervisor.run()


def import_committed_results(folder: Path = REPO / "benchmarks" / "results") -> None:
    # Imported here: models can be imported only after django.setup() in main().
    from webapp.leaderboard.results_file import import_results_folder

    for line in import_results_folder(folder):
        print(f"results {line}", flush=True)


def _start_web(host: str, port: int) -> subprocess.Popen:
    return child_process.start([sys.executable, "-m", "uvicorn", "webapp.asgi:application",
                                "--host", host, "--port", str(port), "--log-level", "warning"],
                               cwd=REPO)  # fmt: skip


def _worker_starter(
    kind: work_kinds.WorkKind, gpu_types: list[str]
) -> Callable[[], subprocess.Popen]:
    """Starts the worker of one kind of work; each start has a name of its own, so a run's trace
    and the logs tell them apart."""
    queues = ",".join(kind.queue(gpu_type) for gpu_type in kind.gpu_types(gpu_types))
    starts = itertools.count(1)

    def start() -> subprocess.Popen:
        name = f"{kind.name}-{os.getpid()}-{next(starts)}@%h"
        return child_process.start([sys.executable, "-m", "celery", "-A", "webapp.celery",
                                    "worker", "-Q", queues, "--concurrency", str(kind.concurrency),
                                    "--loglevel", "info", "--hostname", name],
                                   cwd=REPO)  # fmt: skip

    return start


if __name__ == "__main__":
    sys.exit(main())
