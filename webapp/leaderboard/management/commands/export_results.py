"""python manage.py export_results --suite S --gpu G [--protocol P] [--with-sources] --output F:
a suite's measured results on one GPU type as a file that import_results reads anywhere."""

from __future__ import annotations

from django.core.management.base import CommandError

from webapp.leaderboard.results_file import (
    ResultsFileError,
    baselines_counted,
    export_results,
    waiting_baselines,
    write_results_file,
)
from webapp.stack_command import StackCommand
from webapp.suites.models import Suite


class Command(StackCommand):
    help = "Export a suite's results on one GPU type (and protocol) to a JSON results file."
    sends_work = False  # reads the database only

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--gpu", required=True, help="the GPU type, e.g. h100")
        parser.add_argument("--protocol", help="default: the suite's")
        parser.add_argument(
            "--with-sources",
            action="store_true",
            help="include the problems' sources (never for KernelBench's, which are not ours)",
        )
        parser.add_argument("--origin", default="", help="where measured (default: host name)")
        parser.add_argument("--output", required=True, help="the file to write")

    def handle(self, *args, **options) -> None:
        suite = Suite.objects.filter(name=options["suite"]).first()
        if suite is None:
            raise CommandError(f"no suite named {options['suite']!r}: import_suite it first")
        try:
            data = export_results(
                suite,
                options["gpu"],
                options["protocol"],
                with_sources=options["with_sources"],
                origin=options["origin"],
            )
        except ResultsFileError as exc:
            raise CommandError(str(exc)) from None
        write_results_file(data, options["output"])
        runs = sum(len(e["runs"]) for e in data["evaluations"]) + len(data["submissions"])
        self.stdout.write(
            f"{options['output']}: suite {suite.name} on {data['gpu_type']} ({data['protocol']}): "
            f"{len(data['problems'])} problems, "
            f"{baselines_counted(len(data['baselines']), waiting_baselines(data['baselines']))}, "
            f"{len(data['evaluations'])} evaluations, {runs} runs"
        )
