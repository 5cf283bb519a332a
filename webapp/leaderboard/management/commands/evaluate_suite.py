"""python manage.py evaluate_suite --suite NAME --agent CONFIG --gpu TYPE: one run per valid
problem under the suite's protocol and a fixed budget; progress shows on the suite's page."""

from __future__ import annotations

from django.core.management.base import CommandError

from webapp.errors import RequestRefused
from webapp.leaderboard.evaluation import (
    agent_change,
    progress,
    resume_evaluation,
    retire,
    start_evaluation,
    unfinished,
)
from webapp.stack_command import StackCommand
from webapp.suites.management.suite_option import check_gpu_type, get_suite
from webapp.suites.management.waiting import wait_for
from webapp.suites.models import Evaluation


class Command(StackCommand):
    help = "Run one agent configuration once on every valid problem of a suite."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suite", required=True)
        parser.add_argument("--agent", required=True, help="a name from the agents file")
        parser.add_argument("--gpu", required=True, help="a GPU type with a worker queue")
        parser.add_argument(
            "--max-turns", type=int, help="the budget: model replies per run (default: config's)"
        )
        parser.add_argument(
            "--wait", action="store_true", help="block until every run ended and was re-graded"
        )
        parser.add_argument(
            "--follow",
            action="store_true",
            help="start nothing: wait for this agent's latest evaluation of the suite",
        )
        parser.add_argument(
            "--resume",
            action="store_true",
            help="go on with this agent's latest evaluation of the suite: a run for each valid "
            "problem it has none of (after a lost machine, or one imported from a results file); "
            "start one if there is none",
        )
        parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds to wait")

    def handle(self, *args, **options) -> None:
        suite = get_suite(options["suite"])
        check_gpu_type(options["gpu"])
        earlier = Evaluation.objects.filter(
            suite=suite, agent=options["agent"], gpu_type=options["gpu"]
        ).first()  # the latest
        if options["follow"]:
            if earlier is None:
                raise CommandError(f"no evaluation of {options['agent']} on {suite.name} to follow")
            self._wait(earlier, options["timeout"])
            return
        if earlier is not None and (changed := self._agent_change(earlier)):
            # nothing of it can go on: its waiting runs are cancelled, and a new one starts
            cancelled = retire(earlier, changed)
            self.stdout.write(
                f"{changed}: its {cancelled} queued runs cancelled, its ended runs stay on the "
                "board; a new evaluation starts"
            )
        elif options["resume"] and earlier is not None:
            self._resume(earlier, options)
            return
        elif earlier is not None and unfinished(earlier):
            raise CommandError(
                f"evaluation {earlier.pk} of {earlier.agent} on {suite.name} still has "
                f"{unfinished(earlier)} runs or re-grades left: add --follow to wait for it "
                "rather than start another"
            )
        try:  # BadRunOption is a ValueError
            evaluation = start_evaluation(
                suite, options["agent"], options["gpu"], options["max_turns"]
            )
        except (RequestRefused, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"evaluation {evaluation.pk}: {evaluation.agent} on {evaluation.runs.count()} "
            f"problems of {suite.name} ({evaluation.gpu_type}, {evaluation.protocol}); "
            f"follow it on /suites/{suite.name}/"
        )
        if options["wait"]:
            self._wait(evaluation, options["timeout"])

    def _agent_change(self, evaluation: Evaluation) -> str:
        try:
            return agent_change(evaluation)
        except ValueError as exc:  # the agents file no longer has it, or cannot be read
            raise CommandError(str(exc)) from None

    def _resume(self, evaluation: Evaluation, options: dict) -> None:
        if options["max_turns"] not in (None, evaluation.max_turns):
            raise CommandError(
                f"evaluation {evaluation.pk} runs with --max-turns {evaluation.max_turns}: "
                "resume it with that budget (or leave --max-turns out), or start a new one"
            )
        try:
            queued, regrades = resume_evaluation(evaluation)
        except (RequestRefused, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"evaluation {evaluation.pk}: {queued} runs queued for the problems it had none of, "
            f"{regrades} ended runs sent to their re-grade; {evaluation.runs.count()} runs in all"
        )
        if options["wait"]:
            self._wait(evaluation, options["timeout"])

    def _wait(self, evaluation: Evaluation, timeout_s: float) -> None:
        what = f"evaluation {evaluation.pk} (runs, re-grades)"
        wait_for(lambda: progress(evaluation), timeout_s, self.stdout, what)
        for run in evaluation.runs.select_related("problem", "grade").order_by("pk"):
            grade = getattr(run, "grade", None)
            state = grade.status if grade else "no verified candidate"
            self.stdout.write(f"  {run.problem.title}: run {run.pk} {run.status}, {state}")
