"""python manage.py benchmark_baselines --suite NAME --gpu TYPE: eager, torch.compile (default)
and torch.compile (max-autotune) of every valid problem, measured by a worker of that GPU type
through the harness and stored with the environment."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError

from webapp.stack_command import StackCommand
from webapp.suites import progress
from webapp.suites.baselines import BaselinesRefused, request_baselines
from webapp.suites.management.suite_option import check_choice, check_gpu_type, get_suite
from webapp.suites.management.waiting import wait_for
from webapp.suites.models import Baseline


class Command(StackCommand):
    help = "Measure a suite's baselines on one GPU type (eager, compile, compile max-autotune)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--gpu", required=True, help="a GPU type with a worker queue")
        parser.add_argument(
            "--protocol", help="default: the suite's; baselines are kept per protocol"
        )
        parser.add_argument(
            "--repeats",
            type=int,
            default=3,
            help="measurements per problem, each in a fresh process; the fastest of each "
            "baseline is kept (torch.compile's time moves between processes)",
        )
        parser.add_argument(
            "--missing",
            action="store_true",
            help="only problems with no baseline on this GPU type yet, or whose last "
            "measurement failed (what is waiting stays queued)",
        )
        parser.add_argument("--no-wait", action="store_true")
        parser.add_argument(
            "--follow", action="store_true", help="request nothing: wait for earlier requests"
        )
        parser.add_argument("--timeout", type=float, default=7200, help="seconds to wait")

    def handle(self, *args, **options) -> None:
        suite = get_suite(options["suite"])
        gpu_type = check_gpu_type(options["gpu"])
        protocol = check_choice(
            "protocol", options["protocol"] or suite.protocol, list(settings.PROTOCOLS)
        )
        if options["follow"]:
            rows = list(
                Baseline.objects.filter(
                    problem__suite_entries__suite=suite, gpu_type=gpu_type, protocol=protocol
                )
            )
        else:
            try:
                rows = request_baselines(
                    suite, gpu_type, protocol, max(1, options["repeats"]), options["missing"]
                )
            except BaselinesRefused as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"{len(rows)} problems of {suite.name} queued on {gpu_type}")
        if options["no_wait"] or not rows:
            return
        ids = [row.pk for row in rows]

        def counts():
            return progress.baselines(suite, gpu_type, protocol)

        wait_for(counts, options["timeout"], self.stdout, "baselines")
        for row in Baseline.objects.filter(pk__in=ids).select_related("problem"):
            self.stdout.write(_line(row))


def _line(row: Baseline) -> str:
    if row.error and row.eager_ms is None:
        return f"  {row.problem.title}: {row.error}"
    times = (row.eager_ms, row.compile_ms, row.compile_max_autotune_ms, row.sol_ms)
    eager, compiled, autotune, floor = (f"{t:.4f}" if t is not None else "-" for t in times)
    line = (
        f"  {row.problem.title}: eager {eager} ms, compile {compiled} ms, "
        f"max-autotune {autotune} ms, SOL {floor} ms"
    )
    return f"{line}; {row.error}" if row.error else line
