"""docker-compose.yml keeps up with the queues (webapp/work_kinds.py): every kind of work on its
GPU type has a worker service, each service serves one kind, and no service names a queue that
nothing sends to (the old `gpu.<type>`)."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.yml"
KINDS = ("validate", "run", "grade")


def worker_queues(compose: dict) -> dict[str, list[str]]:
    """service -> the queues its `celery worker -Q` serves."""
    found = {}
    for name, service in compose["services"].items():
        command = service.get("command") or []
        if "worker" in command and "-Q" in command:
            found[name] = command[command.index("-Q") + 1].split(",")
    return found


def unserved(compose: dict) -> list[str]:
    gpu_type = compose["x-app-env"]["KERNELARENA_GPU_TYPES"].split(",")[0]
    served = {q for queues in worker_queues(compose).values() for q in queues}
    return [f"gpu.{gpu_type}.{kind}" for kind in KINDS if f"gpu.{gpu_type}.{kind}" not in served]


def test_every_kind_of_work_has_a_worker_of_its_own():
    compose = yaml.safe_load(COMPOSE.read_text())
    assert unserved(compose) == []
    for name, queues in worker_queues(compose).items():
        kinds = {q.rsplit(".", 1)[1] for q in queues}
        assert len(kinds) == 1 and kinds <= set(KINDS), (name, queues)


def test_a_missing_worker_is_seen():
    """The known-bad: the same file without its validation worker."""
    compose = yaml.safe_load(COMPOSE.read_text())
    del compose["services"]["validator"]
    assert unserved(compose) == ["gpu.h100.validate"]
