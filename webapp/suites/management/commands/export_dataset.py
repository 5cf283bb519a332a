"""python manage.py export_dataset --suite SUITE --output DIR: DIR/problems.jsonl, one record per
problem (name, source, sha256, validation, provenance); docs/synthesis.md has the format and the
two lines that load it with `datasets`."""

from __future__ import annotations

from django.core.management.base import CommandError

from webapp.stack_command import StackCommand
from webapp.suites import dataset_export
from webapp.suites.models import Suite


class Command(StackCommand):
    help = "Export a suite's problems as JSON Lines, loadable with datasets.load_dataset."
    sends_work = False  # reads the database only

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--output", required=True, help="the folder to write problems.jsonl in")

    def handle(self, *args, **options) -> None:
        suite = Suite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['suite']!r}")
        path = dataset_export.write(suite, options["output"])
        self.stdout.write(f"wrote {suite.entries.count()} problems of {suite.name} to {path}")
