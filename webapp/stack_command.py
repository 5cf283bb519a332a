"""The base of the operator's commands (import_suite, synthesize, benchmark_baselines,
evaluate_suite, report, export_*): clients of a running stack, which say in one line what to fix
when there is none to reach, never with a traceback.

Run from the command line, a command first checks what it needs, in the order an operator would
fix it: a stack to join (settings.STACK_REFUSAL, for those that send work), the database
(reachable and migrated), then the broker (for those that send work). call_command() in tests
skips the checks: their senders run the work in-process.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor


class StackCommand(BaseCommand):
    sends_work = True  # to the workers, through the broker

    def execute(self, *args, **options):
        if getattr(self, "_called_from_command_line", False):
            check_stack_reachable(self.sends_work)
        return super().execute(*args, **options)


def check_stack_reachable(sends_work: bool) -> None:
    """Raises a CommandError naming the fix for the first thing missing."""
    if sends_work and settings.STACK_REFUSAL:
        raise CommandError(settings.STACK_REFUSAL)
    check_database()
    if sends_work:
        check_broker()


def check_database() -> None:
    where = _database_shown()
    try:
        executor = MigrationExecutor(connection)
        missing = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(
            f"cannot reach the database {where} ({_first_line(exc)}): start it, or set "
            "DATABASE_URL to one that runs"
        ) from None
    if missing:
        raise CommandError(
            f"the database {where} lacks {len(missing)} migrations: run `.venv/bin/python "
            "manage.py migrate` (`make run` migrates as it starts)"
        )


def check_broker() -> None:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=10).ping()
    except (redis.RedisError, OSError) as exc:
        raise CommandError(
            f"cannot reach the broker at {_without_password(settings.REDIS_URL)} "
            f"({_first_line(exc)}): start the stack (`make run`), or set REDIS_URL to a Redis "
            "that runs"
        ) from None


def _database_shown() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return str(db["NAME"])
    return f"{db.get('NAME')} on {db.get('HOST') or 'localhost'}:{db.get('PORT') or 'default port'}"


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
