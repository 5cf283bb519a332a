"""python manage.py report --suite NAME --gpu TYPE [--output report.md] [--csv results.csv]:
the suite's results on one GPU type as Markdown (per problem, then the board) and CSV."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from webapp.leaderboard import report
from webapp.runs.models import Run
from webapp.stack_command import StackCommand
from webapp.suites.management.suite_option import check_choice, get_suite
from webapp.suites.models import Baseline


class Command(StackCommand):
    help = "Print a suite's results on one GPU type as Markdown; optionally write CSV."
    sends_work = False  # reads the database only

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--gpu", required=True, help="the GPU type, e.g. h100 or cpu")
        parser.add_argument("--protocol", help="default: the suite's")
        parser.add_argument("--output", type=Path, help="write the Markdown here, not stdout")
        parser.add_argument(
            "--csv",
            type=Path,
            help="write per-problem results here, and the board beside it (<name>-board.csv)",
        )

    def handle(self, *args, **options) -> None:
        suite = get_suite(options["suite"])
        known = sorted(
            set(settings.GPU_TYPES)
            | set(Baseline.objects.values_list("gpu_type", flat=True))
            | set(Run.objects.values_list("gpu_type", flat=True))
        )
        gpu_type = check_choice("GPU type", options["gpu"], known)
        protocol = check_choice(
            "protocol", options["protocol"] or suite.protocol, list(settings.PROTOCOLS)
        )
        command = f"python manage.py report --suite {suite.name} --gpu {gpu_type}"
        if options["protocol"]:
            command += f" --protocol {protocol}"
        text = report.markdown(suite, gpu_type, protocol, command=command)
        if options["output"]:
            _write(options["output"], text)
            self.stdout.write(f"wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
        if options["csv"]:
            path = options["csv"]
            board_path = path.with_name(f"{path.stem}-board{path.suffix or '.csv'}")
            _write(path, report.problems_csv(suite, gpu_type, protocol))
            _write(board_path, report.board_csv(suite, gpu_type, protocol))
            self.stdout.write(f"wrote {path} and {board_path}")


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc}") from None
