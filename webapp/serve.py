"""The one-command run (`make run`): the whole product on this machine, no external server.

    python -m webapp.serve [--host 127.0.0.1] [--port 8000]

Starts the embedded Redis (unless REDIS_URL names one), migrates the database (SQLite in .cache/
unless DATABASE_URL names one), imports the committed results in benchmarks/results/ (so the
boards measured on a GPU host show here without one; importing again changes nothing), then the
ASGI server and one Celery worker for every GPU type, and stops them all on Ctrl-C. With no GPU
the worker serves the cpu target. With one, the GPU type is named after it (e.g. "h100"), unless
KERNELARENA_GPU_TYPES is set.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("KERNELARENA_GPU_TYPES", detected_gpu_type())

    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    from webapp import embedded_redis

    redis_server = None
    if settings.REDIS_IS_EMBEDDED:
        redis_server = embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
        print(f"embedded Redis on {settings.EMBEDDED_REDIS_SOCKET}", flush=True)
    call_command("migrate", interactive=False, verbosity=0)
    import_committed_results()
    queues = ",".join(f"gpu.{gpu_type}" for gpu_type in settings.GPU_TYPES)
    children = [
        _start("web", [sys.executable, "-m", "uvicorn", "webapp.asgi:application",
                       "--host", args.host, "--port", str(args.port), "--log-level", "warning"]),
        _start("worker", [sys.executable, "-m", "celery", "-A", "webapp.celery", "worker",
                          "-Q", queues, "--concurrency", "1", "--loglevel", "info",
                          "--hostname", f"worker-{os.getpid()}@%h"]),
    ]  # fmt: skip
    url = f"http://{args.host}:{args.port}/"
    print(f"KernelArena at {url} (GPU types: {', '.join(settings.GPU_TYPES)}). Ctrl-C stops.")
    try:
        return _wait(children)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not orphan children
        for _, process in children:
            _stop(process)
        embedded_redis.stop(redis_server)


def import_committed_results(folder: Path = REPO / "benchmarks" / "results") -> None:
    # Imported here: models can be imported only after django.setup() in main().
    from webapp.leaderboard.results_file import import_results_folder

    for line in import_results_folder(folder):
        print(f"results {line}", flush=True)


def _start(name: str, command: list[str]) -> tuple[str, subprocess.Popen]:
    # Its own process group, so that Ctrl-C reaches the children only through _stop.
    return name, subprocess.Popen(command, cwd=REPO, start_new_session=True)


def _wait(children: list[tuple[str, subprocess.Popen]]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            for name, process in children:
                if process.poll() is not None:
                    print(f"{name} exited with {process.returncode}; stopping", file=sys.stderr)
                    return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
