"""webapp.leaderboard.report: a suite's report says what became of every problem, and counts the
ones the harness or the machine lost apart from the ones rejected for defects of their own."""

from __future__ import annotations

from django.utils import timezone

from gpu_workers.harness.vocabulary import DOES_NOT_FIT
from tests.webapp.conftest import make_problem
from webapp.leaderboard import report
from webapp.problems.models import ProblemStatus
from webapp.problems.validation import HARNESS_FAILED, MACHINE_FAILED
from webapp.suites.models import Baseline, Suite, SuiteProblem
from webapp.work_kinds import VALIDATE

# name -> (status, reasons), as the validation worker leaves them
PROBLEMS = {
    "1_Valid": (ProblemStatus.VALID, []),
    "2_Baselined": (ProblemStatus.VALID, []),
    "3_Constant": (ProblemStatus.REJECTED, ["output is (nearly) constant: a constant would pass"]),
    "4_OutOfMemory": (ProblemStatus.REJECTED, [f"{MACHINE_FAILED}: CUDA out of memory | x"]),
    "5_ValidatorBug": (ProblemStatus.REJECTED, [f"{HARNESS_FAILED}: KeyError 'seed'"]),
    "6_Hangs": (ProblemStatus.REJECTED, [VALIDATE.limit_reached()]),
    "7_TooLarge": (ProblemStatus.REJECTED, [f"{DOES_NOT_FIT}: judging it holds about 300 GiB"]),
    "8_Waiting": (ProblemStatus.PENDING, []),
}


def make_suite(owner, source: str) -> Suite:
    suite = Suite.objects.create(name="kb", level=1)
    for position, (name, (status, reasons)) in enumerate(PROBLEMS.items()):
        problem = make_problem(owner, f"{source}\n# {name}\n", public=True)
        problem.status, problem.reasons = status, reasons
        problem.save()
        SuiteProblem.objects.create(suite=suite, problem=problem, name=name, position=position)
    Baseline.objects.create(
        problem=suite.entries.get(name="2_Baselined").problem,
        gpu_type="cpu",
        protocol="loose",
        eager_ms=2.0,
        compile_ms=1.0,
        measured=timezone.now(),
    )
    return suite


def test_the_report_counts_what_became_of_every_problem_by_cause(alice, relu_scale):
    suite = make_suite(alice, relu_scale)

    lines = report.problems_section(suite, "cpu", "loose")

    assert lines[2] == (
        "8 imported; 2 valid; 1 rejected for a defect of its own; "
        "1 stopped at the validation time limit (a hang, or too slow to validate); "
        "2 lost to the harness or the machine (not a defect of the problem); "
        "1 too large for this GPU's memory; 1 not validated yet; baselines on cpu: 1 of 2."
    )
    causes = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1] for line in lines[6:]}
    assert causes == {
        "3_Constant": "defect",
        "4_OutOfMemory": "machine",
        "5_ValidatorBug": "machine",
        "6_Hangs": "limit",
        "7_TooLarge": "memory",
    }
    assert "CUDA out of memory \\| x" in lines[7]  # a reason's bar does not break the table
    assert "## Problems" in report.markdown(suite, "cpu")
