"""Whose failure: the rule on the messages real runners produce (the end-to-end cases, with real
processes, are in test_verify.py and test_problem.py)."""

import pytest

from gpu_workers.harness.judge import failure
from gpu_workers.harness.judge.runner_process import RunnerDied, RunnerFailed


@pytest.mark.parametrize(
    "error, whose",
    [
        (RunnerFailed("candidate", "raised RuntimeError: CUDA out of memory"), "candidate"),
        (RunnerDied("candidate", "the candidate process timed out after 600 s"), "candidate"),
        (RunnerFailed("reference", "raised RuntimeError: mat1 and mat2 shapes"), "problem"),
        (RunnerDied("reference", "the reference process exited with status 3"), "problem"),
        (RunnerDied("reference", "the reference process was killed by SIGSEGV"), "problem"),
        (RunnerFailed("reference", "raised OutOfMemoryError: out of memory"), "infrastructure"),
        (
            RunnerFailed("reference", "raised ModuleNotFoundError: No module named 'einops'"),
            "infrastructure",
        ),
        (
            RunnerFailed("candidate", "raised ModuleNotFoundError: No module named 'triton'"),
            "candidate",
        ),
        (RunnerDied("reference", "the reference process was killed by SIGKILL"), "infrastructure"),
        (
            RunnerDied("reference", "the reference process exited with status 1: bwrap: execvp "),
            "infrastructure",
        ),
        (
            RunnerDied("reference", "the reference process timed out after 600 s (a hang?)"),
            "infrastructure",
        ),
    ],
)
def test_each_runner_error_has_an_owner(error, whose):
    assert failure.of_runner_error(error) == whose


def test_only_a_disturbed_machine_alone_is_the_infrastructures():
    assert failure.of_profile_violations({"timing_drift"}) == "infrastructure"
    assert failure.of_profile_violations({"timing_drift", "impossible_speed"}) == "candidate"
