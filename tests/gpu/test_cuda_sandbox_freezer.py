"""The candidate runs only when the judge asks (issue 29, class 2), on a GPU: a cuda candidate
whose import started busy processes gets no CPU while its sandbox is stopped between commands,
with its CUDA context (and the driver's threads) stopped alongside."""

from __future__ import annotations

import pytest

from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.sandbox.census import descendants
from tests.gpu_workers.harness.test_sandbox_freezer import _TICK_S, _cpu_over, busy_runner_on

# the cuda fixture candidates, built at once before the first test (conftest.py)
pytestmark = pytest.mark.usefixtures("prebuilt_cuda_candidates")


@pytest.fixture(scope="module")
def busy_runner():
    with busy_runner_on("cuda", "gpu/relu_scale") as runner:
        yield runner


def test_a_stopped_cuda_candidate_gets_no_cpu_between_commands(busy_runner):
    root = sandbox.root_pid(busy_runner.proc)
    assert len(descendants(root)) > 2
    assert _cpu_over(root, 0.5) <= 2 * _TICK_S
    busy_runner._freezer.thaw()  # known-bad: let go, it spins
    try:
        assert _cpu_over(root, 0.5) > 0.05
    finally:
        busy_runner._freeze()
    assert busy_runner.census is not None and busy_runner.census.threads > 1
