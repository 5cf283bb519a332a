"""python manage.py import_results FILE...: results files (export_results) onto this instance's
boards; importing one again changes nothing, and a bad file is refused with nothing written."""

from __future__ import annotations

from django.core.management.base import CommandError

from webapp.leaderboard.results_file import ResultsFileError, import_results, read_results_file
from webapp.stack_command import StackCommand


class Command(StackCommand):
    help = "Import results files made by export_results."
    sends_work = False  # reads the database only

    def add_arguments(self, parser) -> None:
        parser.add_argument("files", nargs="+", help="the JSON files")

    def handle(self, *args, **options) -> None:
        for path in options["files"]:
            try:
                summary = import_results(read_results_file(path))
            except ResultsFileError as exc:
                raise CommandError(f"{path}: not imported: {exc}") from None
            self.stdout.write(f"{path}: {summary.line()}")
