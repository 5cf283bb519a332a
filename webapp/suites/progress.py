"""How far a suite's long work has come: validation of its problems, its baselines on one GPU
type, an evaluation's runs. Done of total, how many of the done failed, and the time left at the
pace so far; shown on the suite's page and printed by the suite commands."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Max, Min, Q

from webapp.durations import duration
from webapp.problems.models import Problem, ProblemStatus
from webapp.suites.models import Baseline, Suite


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    failed: int = 0  # of the done ones
    elapsed_s: float | None = None  # from the start of the work to its latest finished item
    # of the left ones, those no worker here can take: problems a results file brought without
    # their source (KernelBench's are not ours to ship), until import_suite attaches it
    sourceless: int = 0
    # of the left ones, those not queued: an evaluation's valid problems with no run in it yet
    # (validated after it started, or an evaluation brought by a results file with its ended
    # runs alone), until `evaluate_suite --resume` queues them
    unqueued: int = 0
    failed_word: str = "failed"  # what a done one that did not succeed is: validation rejects

    @property
    def left(self) -> int:
        return self.total - self.done

    @property
    def workable_left(self) -> int:
        return self.left - self.sourceless - self.unqueued

    def seconds_left(self) -> float | None:
        if not self.workable_left or not self.done or self.elapsed_s is None:
            return None
        return self.elapsed_s / self.done * self.workable_left

    def line(self, what: str, unserved: str = "") -> str:
        """ "baselines: 12 of 100 done, 1 failed, about 44 min left". unserved: the GPU type
        the work waits for where no worker of this site serves it (a board imported from a
        results file): the rest waits for one, and a pace would promise what nobody is doing."""
        text = f"{what}: {self.done} of {self.total} done"
        if self.failed:
            text += f", {self.failed} {self.failed_word}"
        if self.sourceless:
            text += f", {self.sourceless} waiting for their source (import_suite attaches it)"
        if self.unqueued:
            text += f", {self.unqueued} not queued (evaluate_suite --resume queues them)"
        if unserved and self.workable_left:
            return text + f", the rest waiting for a worker on {unserved} (none serves it here)"
        seconds = self.seconds_left()
        if seconds is not None:
            text += f", about {duration(seconds)} left"
        return text


def validation(suite: Suite) -> Progress:
    return problems_validation(Problem.objects.filter(suite_entries__suite=suite), suite.created)


def problems_validation(problems, since: datetime) -> Progress:
    """Validation of a set of problems (a queryset), paced from `since`."""
    done = problems.filter(status__in=(ProblemStatus.VALID, ProblemStatus.REJECTED))
    last = done.aggregate(last=Max("updated"))["last"]
    return Progress(
        done=done.count(),
        total=problems.count(),
        failed=done.filter(status=ProblemStatus.REJECTED).count(),
        elapsed_s=(last - since).total_seconds() if last else None,
        sourceless=problems.exclude(pk__in=done).filter(source="").count(),
        failed_word="rejected",
    )


def baselines(suite: Suite, gpu_type: str, protocol: str) -> Progress:
    """The suite's valid problems' baselines on this GPU type and protocol; the pace is that of
    the latest request (from its first request to its latest measurement)."""
    rows = Baseline.objects.filter(
        problem__in=suite.valid_problems(), gpu_type=gpu_type, protocol=protocol
    )
    answered = Q(measured__isnull=False) & (
        Q(requested__isnull=True) | Q(measured__gte=F("requested"))
    )
    done = rows.filter(answered | ~Q(error=""))
    span = done.aggregate(first=Min("requested"), last=Max("measured"))
    elapsed = (
        (span["last"] - span["first"]).total_seconds() if span["first"] and span["last"] else None
    )
    return Progress(
        done=done.count(),
        total=suite.valid_problems().count(),
        failed=done.exclude(error="").count(),
        elapsed_s=elapsed,
    )
