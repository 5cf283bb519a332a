"""A device that the runs sharing it have filled is the machine's failure, never the candidate's:
whichever allocation meets it first (the judge's buffers, a candidate process's context in
`claim_device`, the reference's), the verdict is the infrastructure's, and the same sources are
judged again once memory is back. Known-bad: before commit a852b5c the judge's own failed
cuMemAlloc escaped the step as a crash, and before 2f1ff1a a candidate process that could not
make its context was the candidate's failure."""

import dataclasses

import pytest
import torch

from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge import failure
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.session import Session
from tests.conftest import candidate_dir, problem_source

# It fills the whole device: alone on the GPU, like the other whole-GPU tests.
pytestmark = pytest.mark.whole_gpu
LEFT_FREE = 64 << 20  # less than one of relu_scale's 256 MiB tensors
# Verdicts, not times: a short timing budget, as in test_fusion_kernels.py (this test runs
# alone on the GPU, so its seconds are every other test's wait).
OUTPUTS_ONLY = dataclasses.replace(LOOSE, timing_budget_s=0.25)


def _fill_device(left: int) -> list[torch.Tensor]:
    """This process's ballast, until `left` bytes of the device are free."""
    ballast, chunk = [], 1 << 30
    while chunk >= 1 << 20:
        free, _ = torch.cuda.mem_get_info()
        if free - chunk < left:
            chunk //= 2
            continue
        try:
            ballast.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            chunk //= 2
    return ballast


def test_a_full_device_is_the_machines_failure_and_judged_again_once_freed():
    problem = problem_source("gpu/relu_scale")
    with Session(problem, device="cuda", protocol=OUTPUTS_ONLY, candidates=1) as session:
        workspace.copy_candidate(session.workspace, candidate_dir("cuda", "good_relu_scale"))
        assert session.compile()["ok"]
        ballast = _fill_device(LEFT_FREE)
        try:
            full = session.verify()
        finally:
            ballast.clear()
            torch.cuda.empty_cache()
        assert not full["ok"] and full["failed_by"] == failure.INFRASTRUCTURE, full
        assert full["violations"] == [], full
        again = session.verify()
        assert again["ok"], again
