"""python manage.py synthesize --count N --seed S --into SUITE [--reference DIR] [--device cpu]:
composed problems, validated by the workers, into a suite until it holds N of seed S; the
candidates turned away are listed with their reasons (webapp.suites.synthesis, docs/synthesis.md).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings as django_settings
from django.core.management.base import CommandError
from django.utils import timezone

from gpu_workers.harness.vocabulary import device_for
from webapp.problems.models import Problem
from webapp.stack_command import StackCommand
from webapp.suites import progress, synthesis
from webapp.suites.management.waiting import wait_for


class Command(StackCommand):
    help = "Synthesize validated problems into a suite (run again to add only what is missing)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--count", type=int, required=True, help="problems of this seed wanted")
        parser.add_argument("--seed", type=int, required=True)
        parser.add_argument("--into", required=True, help="the suite (made if missing)")
        parser.add_argument("--reference", type=Path, help="a folder of KernelBench-format files")
        parser.add_argument(
            "--device",
            choices=sorted(synthesis.BUDGETS),
            help="the target shapes are chosen for (default: the validating worker's)",
        )
        parser.add_argument("--max-ops", type=int, default=5, help="longest chain, 1 to 5")
        parser.add_argument(
            "--eager-ms", type=float, nargs=2, metavar=("MIN", "MAX"), help="eager time admitted"
        )
        parser.add_argument("--max-candidates", type=int, help="default: 4 per problem + 20")
        parser.add_argument("--torch-only", action="store_true", help="no transformers blocks")
        parser.add_argument(
            "--composer",
            choices=sorted(synthesis.COMPOSERS),
            help=f"how a new suite's problems are sized (default {synthesis.COMPOSER}; a suite "
            "goes on with the composer its problems were made with)",
        )
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait")

    def handle(self, *args, **options) -> None:
        settings = synthesis.Settings(
            seed=options["seed"],
            count=options["count"],
            device=options["device"] or device_for(django_settings.VALIDATION_GPU_TYPE),
            max_ops=options["max_ops"],
            eager_window_ms=tuple(options["eager_ms"]) if options["eager_ms"] else None,
            max_candidates=options["max_candidates"],
            reference=options["reference"],
            with_transformers=False if options["torch_only"] else None,
            composer=options["composer"],
        )
        try:
            run = synthesis.start(options["into"], settings)
        except synthesis.SynthesisError as exc:
            raise CommandError(str(exc)) from None
        low, high = settings.window
        self.stdout.write(
            f"suite {run.suite.name}: {run.have()} of {settings.count} from seed {settings.seed}; "
            f"{len(run.index.sources)} problems to keep apart from; shapes for {settings.device}, "
            f"eager {low}..{high} ms; {len(run.operators)} seed operators; {run.composer}"
        )
        position = 0
        while run.wanted() > 0 and position < settings.candidates:
            positions = synthesis.batch(run, position)
            self._round(run, positions, options["timeout"])
            position = positions.stop
        self._summary(run)

    def _round(self, run, positions, timeout: float) -> None:
        started = timezone.now()
        outcomes = [synthesis.offer(run, position) for position in positions]
        stored = [o.problem.pk for o in outcomes if o.problem is not None and o.entry is None]
        if stored:
            problems = Problem.objects.filter(pk__in=stored)
            wait_for(
                lambda: progress.problems_validation(problems, started),
                timeout,
                self.stdout,
                "validation",
            )
        for outcome in outcomes:
            synthesis.admit(run, outcome)
        self.stdout.write(f"candidates {positions.start}..{positions.stop - 1}: {run.have()} kept")

    def _summary(self, run) -> None:
        added = [o for o in run.outcomes if o.new]
        turned_away = [o for o in run.outcomes if o.reason]
        self.stdout.write(
            f"{run.have()} of {run.settings.count} in {run.suite.name} from seed "
            f"{run.settings.seed}: {len(added)} added, {len(turned_away)} candidates turned away"
        )
        for outcome in added:
            self.stdout.write(f"  added {outcome.candidate.name}")
        for outcome in turned_away:
            self.stdout.write(f"  rejected {outcome.candidate.name}: {outcome.reason}")
        if run.wanted() > 0:
            self.stdout.write(
                f"{run.wanted()} still missing after {run.settings.candidates} candidates: "
                "run again with a higher --max-candidates or another --seed"
            )
