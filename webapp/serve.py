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
KERNELARENA_GPU_TYPES is set; with several, each GPU gets a worker of each kind, pinned to it
(webapp/host_gpus.py says which GPUs: KERNELARENA_GPUS, else CUDA_VISIBLE_DEVICES, else all).

The stack describes itself in its private folder (webapp/local_stacks.py), so that the
operator's commands in this checkout join it without a variable. The terminal shows the URL,
the GPU types, where the log is and the supervisor's news of a process that died; the rest
(workers' banners, celery's warnings, tracebacks) goes to the log (webapp/stack_log.py).
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from webapp import child_process, embedded_redis, host_gpus, local_stacks, work_kinds
from webapp.stack_log import StackLog
from webapp.supervisor import STOP_TIMEOUT_S, Supervisor

REPO = Path(__file__).resolve().parent.parent


def detected_gpu_type() -> str:
    """ "h100" for a host whose served GPUs are "NVIDIA H100 80GB HBM3", "cpu" with none."""
    return host_gpus.type_of(host_gpus.served(host_gpus.listed(), os.environ))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webapp.serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--drain-s",
        type=float,
        default=None,
        help="seconds the workers get to finish the tasks they hold when the stack stops "
        f"(default {STOP_TIMEOUT_S:g}); a task still running then is sent again at the next start",
    )
    args = parser.parse_args(argv)
    if args.drain_s is not None and args.drain_s < 0:
        parser.error("--drain-s must be 0 or more seconds")
    if refusal := _port_taken(args.host, args.port):
        print(refusal, file=sys.stderr)
        return 2
    try:
        gpus = host_gpus.served(host_gpus.listed(), os.environ)
    except host_gpus.GpuChoiceError as exc:
        print(f"cannot serve: {exc}", file=sys.stderr)
        return 2
    # first: a SIGTERM from here on stops whatever has started
    supervisor = Supervisor(args.drain_s)
    folder = local_stacks.StackFolder(local_stacks.stacks_root(REPO))
    log = StackLog.open(REPO / ".cache" / "logs")
    for gone in folder.removed_stale:
        log.write(f"removed the folder and broker of a stack that is gone: {gone}")
    embedded = not os.environ.get("REDIS_URL")
    if embedded:  # before Django reads its settings; inherited by the web server and workers
        os.environ["REDIS_URL"] = f"unix://{folder.socket}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    # its workers send the waiting work once between them (gpu_workers/waiting_work.py)
    os.environ[local_stacks.STARTED_AS] = folder.path.name
    os.environ.setdefault("KERNELARENA_GPU_TYPES", host_gpus.type_of(gpus))
    try:
        status = _serve(supervisor, folder, embedded, log, gpus, args.host, args.port)
    finally:
        supervisor.stop()
        folder.release()
    if status:
        print(f"The stack stopped; what its processes said is in {log.path}", file=sys.stderr)
    return status


def _serve(
    supervisor: Supervisor,
    folder: local_stacks.StackFolder,
    embedded: bool,
    log: StackLog,
    gpus: list[host_gpus.Gpu],
    host: str,
    port: int,
) -> int:
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    if embedded:
        supervisor.add("broker", lambda: embedded_redis.start(folder.socket), False)
    call_command("migrate", interactive=False, verbosity=0)
    for line in import_committed_results():
        log.write(line)
    supervisor.add("web", lambda: _start_web(host, port, log), restarts=False)
    for label, starter in worker_plan(gpus, settings.GPU_TYPES, log):
        supervisor.add(label, starter, restarts=True)
    url = f"http://{host}:{port}/"
    folder.describe(_description(url, port, settings.GPU_TYPES, log))
    on = f"; workers on GPUs {', '.join(gpu.index for gpu in gpus)}" if len(gpus) > 1 else ""
    print(f"KernelArena at {url} (GPU types: {', '.join(settings.GPU_TYPES)}{on}). Ctrl-C stops.")
    print(f"Logs: {log.shown()}. Commands run in this checkout (manage.py import_suite ...) "
          "join this stack.", flush=True)  # fmt: skip
    return supervisor.run()


def _description(
    url: str, port: int, gpu_types: list[str], log: StackLog
) -> local_stacks.StackDescription:
    return local_stacks.StackDescription(
        pid=os.getpid(),
        port=port,
        url=url,
        started=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        broker_url=os.environ["REDIS_URL"],
        database_url=os.environ.get("DATABASE_URL", ""),
        gpu_types=tuple(gpu_types),
        log=str(log.path),
    )


def _port_taken(host: str, port: int) -> str | None:
    """Why the web server could not listen there, said before anything starts."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            return (
                f"cannot serve on {host}:{port} ({exc.strerror}): stop what listens there "
                f"(another `make run`?) or pick a port: .venv/bin/python -m webapp.serve "
                f"--port {port + 1}"
            )
    return None


def import_committed_results(folder: Path | None = None) -> list[str]:
    """What each file of `folder` (settings.RESULTS_DIR by default) gave, for the stack's log."""
    # Imported here: models can be imported only after django.setup() in main().
    from django.conf import settings

    from webapp.leaderboard.results_file import import_results_folder

    return [f"results {line}" for line in import_results_folder(folder or settings.RESULTS_DIR)]


def _start_web(host: str, port: int, log: StackLog) -> subprocess.Popen:
    return child_process.start([sys.executable, "-m", "uvicorn", "webapp.asgi:application",
                                "--host", host, "--port", str(port), "--log-level", "warning"],
                               cwd=REPO, **log.popen_options())  # fmt: skip


def worker_plan(
    gpus: list[host_gpus.Gpu], gpu_types: list[str], log: StackLog
) -> list[tuple[str, Callable[[], subprocess.Popen]]]:
    """(label, starter) of every worker: one per kind of work, and on a host of several GPUs one
    per kind per GPU, pinned to it (webapp/host_gpus.py)."""
    if len(gpus) <= 1:  # one GPU, or the cpu target: the sandbox's default pin is right
        return [(f"{kind.label} worker", _worker_starter(kind, gpu_types, log, None, None))
                for kind in work_kinds.KINDS]  # fmt: skip
    plan = []
    for gpu, cpus in zip(gpus, host_gpus.cpu_shares(len(gpus)), strict=True):
        for kind in work_kinds.KINDS:
            starter = _worker_starter(kind, gpu_types, log, gpu, cpus)
            plan.append((f"{kind.label} worker on GPU {gpu.index}", starter))
    return plan


def _worker_starter(
    kind: work_kinds.WorkKind,
    gpu_types: list[str],
    log: StackLog,
    gpu: host_gpus.Gpu | None,
    cpus: frozenset[int] | None,
) -> Callable[[], subprocess.Popen]:
    """Starts the worker of one kind of work (on one GPU and its share of the cores); each start
    has a name of its own, so a run's trace and the logs tell them apart."""
    queues = ",".join(kind.queue(gpu_type) for gpu_type in kind.gpu_types(gpu_types))
    starts = itertools.count(1)
    pinned = f"gpu{gpu.index}-" if gpu else ""
    # Both: the harness pins its sandboxed children with KERNELARENA_GPU, and CUDA_VISIBLE_DEVICES
    # keeps the worker's own CUDA work (the judge's side of a timing) on the same GPU; with only
    # the first, four judges on a lent host of four H200s all worked on GPU 0 and timed eager up
    # to 34 times slower than alone.
    pins = {"KERNELARENA_GPU": gpu.pin, "CUDA_VISIBLE_DEVICES": gpu.pin} if gpu else {}
    env = dict(os.environ, **pins) if gpu else None

    def start() -> subprocess.Popen:
        name = f"{kind.name}-{pinned}{os.getpid()}-{next(starts)}@%h"
        return child_process.start([sys.executable, "-m", "celery", "-A", "webapp.celery",
                                    "worker", "-Q", queues, "--concurrency", str(kind.concurrency),
                                    "--loglevel", "info", "--hostname", name],
                                   cpus=cpus, cwd=REPO, env=env, **log.popen_options())  # fmt: skip

    return start


if __name__ == "__main__":
    sys.exit(main())
