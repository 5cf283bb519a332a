import pytest
import torch

from gpu_workers.harness.judge import sensitivity, validation
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.problem_source import MAX_SOURCE_BYTES
from gpu_workers.harness.runner import problem
from tests.conftest import problem_source


def test_a_valid_problem_records_times_flops_and_bytes():
    report = validation.validate(problem_source("matmul_rowsum"), "cpu", LOOSE)
    assert report.ok, report.reasons
    assert report.eager_ms > 0 and report.compile_ms > 0
    assert report.flops == 2 * 512 * 512 * 512 + 512 * 512  # the product, then the row sums
    # A and B (512x512 fp32 each) read once, the (512,) output written once
    assert report.bytes_moved == (2 * 512 * 512 + 512) * 4
    assert report.outputs == ["(512,) float32"]


@pytest.mark.parametrize(
    "name, reason",
    [
        ("degenerate_constant", "constant"),
        ("degenerate_input_independent", "does not depend on the inputs"),
        ("nondeterministic", "not deterministic"),
        ("syntax_error", "syntax error on line"),
        ("missing_get_inputs", "missing get_inputs"),
        ("raises_in_forward", "raised"),
    ],
)
def test_unusable_problems_are_rejected_with_a_reason(name, reason):
    report = validation.validate(problem_source(name), "cpu", LOOSE)
    assert not report.ok
    assert len(report.reasons) == 1 and reason in report.reasons[0]
    assert report.failed_by == "problem"


def test_a_reference_out_of_memory_is_the_machines_failure():
    """Known-bad for the test above: the same kind of exception from forward, but the
    allocator's, is not the problem's defect."""
    report = validation.validate(problem_source("out_of_memory"), "cpu", LOOSE)
    assert not report.ok and "allocate memory" in report.reasons[0], report.reasons
    assert report.failed_by == "infrastructure"


def test_a_problem_too_large_for_the_device_says_so_with_its_figures():
    """Beside the test above (an out-of-memory inside forward, whose inputs and outputs fit:
    still the machine's), one whose inputs alone exceed the device is rejected as too large."""
    report = validation.validate(problem_source("too_large_for_the_device"), "cpu", LOOSE)
    assert not report.ok and report.failed_by == "problem", report.reasons
    assert report.reasons[0].startswith("does not fit this GPU's memory: judging it holds about")
    assert "inputs 1048576.0 GiB and outputs 1048576.0 GiB" in report.reasons[0]
    assert "allocate memory" in report.reasons[1]  # what the reference met, kept


def test_a_package_the_worker_lacks_is_the_machines_failure_and_named():
    report = validation.validate(problem_source("imports_a_missing_package"), "cpu", LOOSE)
    assert not report.ok and report.failed_by == "infrastructure"
    assert "imports kernelarena_absent_package, which is not installed" in report.reasons[0]


def test_a_mean_loss_that_follows_its_inputs_is_valid():
    """Two seeds give the same loss within the tolerance; its scaled inputs do not."""
    report = validation.validate(problem_source("mean_cross_entropy"), "cpu", LOOSE)
    assert report.ok, report.reasons
    assert report.sensitive_to == "scaled" and report.outputs == ["() float32"]


def test_an_output_no_probe_moves_is_input_independent(monkeypatch):
    """Known-bad for the test above: without probes the same mean loss is what a constant
    kernel would match, and is rejected."""
    monkeypatch.setattr(sensitivity, "PROBES", {})
    report = validation.validate(problem_source("mean_cross_entropy"), "cpu", LOOSE)
    assert not report.ok and "does not depend on the inputs" in report.reasons[0]


def test_the_identity_ignores_line_endings_and_trailing_blanks():
    assert problem.source_sha256("a = 1  \r\nb = 2\n\n") == problem.source_sha256("a = 1\nb = 2")


def test_an_oversized_source_is_refused_before_anything_runs():
    report = validation.validate("#" * (MAX_SOURCE_BYTES + 1), "cpu", LOOSE)
    assert not report.ok and "the limit is 256 KiB" in report.reasons[0]


@pytest.mark.parametrize(
    "forward, per_element",
    [
        (lambda x: torch.relu(x) * 1.5, 2),  # two pointwise ops
        (lambda x: x.sum(dim=1), 1),  # a reduction: each input element once
        (lambda x: x.view(-1).clone().reshape(x.shape), 0),  # views and copies: no arithmetic
    ],
)
def test_flops_count_each_element_of_pointwise_and_reduction_work(forward, per_element):
    class Model(torch.nn.Module):
        def forward(self, x):
            return forward(x)

    x = torch.randn(64, 32)
    assert problem.count_flops(Model(), [x]) == per_element * x.numel()
