"""python manage.py import_suite PATH --name NAME: a folder of KernelBench-format problems
becomes a public suite; each problem is validated by a worker; rejected ones are listed with
their reasons."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError

from webapp.problems.models import ProblemStatus
from webapp.stack_command import StackCommand
from webapp.suites import progress
from webapp.suites.importing import SuiteImportError, import_suite
from webapp.suites.management.waiting import wait_for


class Command(StackCommand):
    help = "Import a folder of KernelBench-format problems as a public suite and validate each."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="the folder, e.g. KernelBench/KernelBench/level1")
        parser.add_argument("--name", help="the suite's name (default: the folder's name)")
        parser.add_argument("--protocol", help="tolerance and arithmetic (default: loose)")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--no-wait", action="store_true", help="return once stored; workers validate later"
        )
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait")

    def handle(self, *args, **options) -> None:
        name = options["name"] or Path(options["path"]).resolve().name
        try:
            suite, imported = import_suite(
                options["path"], name, options["protocol"], options["description"]
            )
        except SuiteImportError as exc:
            raise CommandError(str(exc)) from None
        added = sum(item.added for item in imported)
        refused = [item for item in imported if item.problem is None]
        self.stdout.write(
            f"suite {suite.name} (level {suite.level or '-'}, protocol {suite.protocol}): "
            f"{len(imported)} files, {added} added, {len(refused)} not stored"
        )
        for item in refused:
            self.stdout.write(f"  rejected {item.name}: {item.error}")
        if options["no_wait"]:
            return
        entries = suite.entries.select_related("problem")

        wait_for(lambda: progress.validation(suite), options["timeout"], self.stdout, "validation")
        self._summary(entries)

    def _summary(self, entries) -> None:
        valid = entries.filter(problem__status=ProblemStatus.VALID).count()
        rejected = entries.filter(problem__status=ProblemStatus.REJECTED)
        self.stdout.write(f"{valid} valid, {rejected.count()} rejected by validation")
        for entry in rejected:
            self.stdout.write(f"  rejected {entry.name}: {'; '.join(entry.problem.reasons)}")
