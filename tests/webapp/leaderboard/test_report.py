"""webapp.leaderboard.report: a suite's report says what became of every problem, and counts the
ones the harness or the machine lost apart from the ones rejected for defects of their own."""

from __future__ import annotations

from django.utils import timezone

from gpu_workers.harness.vocabulary import DOES_NOT_FIT
from tests.webapp.conftest import make_problem
from webapp.leaderboard import report
from webapp.leaderboard.models import Grade, GradeStatus
from webapp.problems.models import ProblemStatus
from webapp.problems.validation import HARNESS_FAILED, MACHINE_FAILED
from webapp.runs.models import Candidate, Run, RunStatus
from webapp.suites.models import Baseline, Evaluation, Suite, SuiteProblem
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


def test_what_the_board_teaches_lists_an_agents_weakest_problems_with_why(
    alice, relu_scale, monkeypatch
):
    """The agent's problems without a counted result first, saying why, then the slowest against
    torch.compile with both fractions of the speed of light; its strong ones are left out."""
    suite = Suite.objects.create(name="kb2", level=2)
    evaluation = Evaluation.objects.create(
        suite=suite, owner=alice, agent="fusion", gpu_type="cpu", protocol="loose"
    )
    speedups = {"1_Fast": 1.5, "2_Unsupported": None, "3_Slow": 0.5, "4_Slower": 0.25}
    for position, (name, speedup) in enumerate(speedups.items()):
        problem = make_problem(alice, f"{relu_scale}\n# {name}\n", public=True, valid=True)
        SuiteProblem.objects.create(suite=suite, problem=problem, name=name, position=position)
        Baseline.objects.create(
            problem=problem, gpu_type="cpu", protocol="loose", eager_ms=2.0, compile_ms=1.0,
            sol_ms=0.8, measured=timezone.now(),
        )  # fmt: skip
        run = Run.objects.create(
            problem=problem, owner=alice, agent="fusion", gpu_type="cpu", evaluation=evaluation
        )
        if speedup is None:
            run.status = RunStatus.FAILED
            run.error = (
                "no verified candidate (finished): The fusion compiler cannot handle topk\nx"
            )
            run.save()
            continue
        run.status = RunStatus.SUCCEEDED
        run.save()
        candidate = Candidate.objects.create(run=run, seq=1, sources={}, verified=True)
        Grade.objects.create(
            run=run, candidate=candidate, status=GradeStatus.RANKED, candidate_ms=1.0 / speedup,
            speedup_vs_compile=speedup, speedup_vs_eager=2 * speedup, sol_fraction=0.8 * speedup,
        )  # fmt: skip

    text = report.markdown(suite, "cpu")
    section = text.split("## What the board teaches: fusion's 4 weakest problems\n\n")[1]
    rows = [line.split(" | ") for line in section.splitlines()[2:6]]
    assert [row[0].lstrip("| ") for row in rows] == [
        "2_Unsupported",
        "4_Slower",
        "3_Slow",
        "1_Fast",
    ]
    assert rows[0][2].startswith("no verified candidate (finished): The fusion compiler cannot")
    assert rows[1][1:] == ["0.25×", "at 20% of the speed of light (torch.compile at 80%) |"]

    monkeypatch.setattr(report, "WORK_LIST", 2)  # a shorter list: the strong ones fall off
    text = report.markdown(suite, "cpu")
    assert "fusion's 2 weakest problems" in text and "| 3_Slow |" not in text.split("weakest")[1]
