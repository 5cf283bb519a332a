"""gpu_workers.problem_validation.validate: the harness runs an uploaded problem in the sandbox on
the cpu target and the row gets the verdict; a second delivery of the task changes nothing."""

from __future__ import annotations

from datetime import timedelta

from django.utils.dateparse import parse_datetime

from gpu_workers import problem_validation
from tests.conftest import problem_source
from tests.webapp.conftest import api_client, make_problem
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.validation import rejection_cause


def test_it_makes_a_good_problem_valid_with_its_measurements(alice, relu_scale):
    problem = make_problem(alice, relu_scale, valid=False)

    assert problem_validation.validate(problem.pk) == f"problem {problem.pk} valid"

    problem.refresh_from_db()
    assert (problem.status, problem.reasons, problem.validated_on) == ("valid", [], "cpu")
    assert problem.eager_ms > 0 and problem.compile_ms > 0
    assert problem.flops == 2 * 256 * 1024  # relu, then a scalar multiply: 2 per element
    assert problem.bytes_moved == 2 * 256 * 1024 * 4  # read x once, write y once, fp32
    assert problem.sol_ms > 0
    # The API says when its state last changed: at the verdict, after the worker's claim.
    # Known-bad: `updated` stayed at the upload's time (auto_now acts only on save()).
    shown = api_client(alice).get(f"/api/problems/{problem.pk}").json()
    assert problem.updated > problem.validation_started > problem.created
    assert parse_datetime(shown["updated"]) > parse_datetime(shown["created"])
    assert abs(parse_datetime(shown["updated"]) - problem.updated) < timedelta(milliseconds=1)


def test_it_rejects_a_problem_whose_output_is_constant(alice):
    problem = make_problem(alice, problem_source("degenerate_constant"), valid=False)

    assert problem_validation.validate(problem.pk) == f"problem {problem.pk} rejected"

    problem.refresh_from_db()
    assert problem.status == ProblemStatus.REJECTED and problem.validated_on == "cpu"
    assert any("constant" in reason for reason in problem.reasons), problem.reasons
    assert not any("worker" in reason for reason in problem.reasons)  # the problem's own defect
    assert problem.eager_ms is None and problem.sol_ms is None


def test_the_machines_failure_is_tried_twice_and_named(alice):
    """Known-bad beside the test above: a reference out of memory is rejected as well, but its
    reasons say the worker failed, not the problem."""
    problem = make_problem(alice, problem_source("out_of_memory"), valid=False)

    assert problem_validation.validate(problem.pk) == f"problem {problem.pk} rejected"

    problem.refresh_from_db()
    assert problem.reasons[0].startswith("the worker could not validate it, twice"), problem.reasons
    assert "allocate memory" in problem.reasons[0]


def test_a_problem_too_large_for_the_gpu_is_rejected_at_once_and_says_so(alice):
    """Not the machine's failure (no retry would help): its own cause, "memory"."""
    problem = make_problem(alice, problem_source("too_large_for_the_device"), valid=False)

    assert problem_validation.validate(problem.pk) == f"problem {problem.pk} rejected"

    problem.refresh_from_db()
    assert problem.reasons[0].startswith("does not fit this GPU's memory"), problem.reasons
    assert rejection_cause(problem.reasons) == "memory"


def test_it_leaves_a_validated_problem_alone(alice, relu_scale):
    valid = make_problem(alice, relu_scale)  # as the first delivery of the task left it
    Problem.objects.filter(pk=valid.pk).update(
        eager_ms=9.0, compile_ms=1.0, flops=0, bytes_moved=2097152, sol_ms=0.1, validated_on="cpu"
    )
    rejected = make_problem(alice, problem_source("degenerate_constant"), valid=False)
    Problem.objects.filter(pk=rejected.pk).update(
        status=ProblemStatus.REJECTED, reasons=["output is (nearly) constant"]
    )
    before = list(Problem.objects.order_by("pk").values())

    for problem in (valid, rejected):
        outcome = problem_validation.validate(problem.pk)
        assert outcome == f"problem {problem.pk} is gone or already validated"

    assert list(Problem.objects.order_by("pk").values()) == before
    assert problem_validation.validate(rejected.pk + 1000).endswith("is gone or already validated")
