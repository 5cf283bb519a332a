"""Whose failure is it: every failed verdict names the problem, the candidate or the
infrastructure, so a harness or machine failure is never shown as an agent's bug, and a problem's
own defect is never blamed on the kernel judged against it.

The candidate owns whatever its process does (it raises, dies, hangs, lies). The reference
runner runs the problem: its code raising is the problem's defect, while running out of memory,
timing out or being killed from outside is the machine's, and is worth one retry.
"""

from __future__ import annotations

import re

from gpu_workers.harness.judge.runner_process import HARNESS, RunnerDied, RunnerError

PROBLEM = "problem"
CANDIDATE = "candidate"
INFRASTRUCTURE = "infrastructure"

_OUT_OF_MEMORY = re.compile(
    r"out of memory|OutOfMemoryError|MemoryError|std::bad_alloc|CUBLAS_STATUS_ALLOC_FAILED"
    r"|can't allocate memory|Cannot allocate memory",
    re.IGNORECASE,
)
# How a reference process ends when the machine, not the problem's code, stopped it: the
# kernel's OOM killer sends SIGKILL, a call that never answers is timed out, and a sandbox that
# could not start says so as bwrap (before any of the problem's code ran).
_STOPPED_FROM_OUTSIDE = ("killed by SIGKILL", "timed out after", ": bwrap: ")


# A package the problem imports that this worker lacks (KernelBench level 3's Mamba2 problems
# import einops): the worker's environment, not the problem's code, and the reason says so.
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def of_runner_error(error: RunnerError) -> str:
    if error.role == "candidate":
        return CANDIDATE
    if error.role == HARNESS:
        return INFRASTRUCTURE
    text = str(error)
    if _OUT_OF_MEMORY.search(text) or _MISSING_MODULE.search(text):
        return INFRASTRUCTURE
    if isinstance(error, RunnerDied) and any(mark in text for mark in _STOPPED_FROM_OUTSIDE):
        return INFRASTRUCTURE
    return PROBLEM


def may_be_out_of_memory(reason: str) -> bool:
    """An allocator's refusal, or a SIGKILL (the kernel's OOM killer sends one)."""
    return bool(_OUT_OF_MEMORY.search(reason)) or "killed by SIGKILL" in reason


def of_profile_violations(codes: set[str]) -> str:
    """A disturbed machine (drift) is held for review without blaming the candidate."""
    return INFRASTRUCTURE if codes == {"timing_drift"} else CANDIDATE


def reason_of(error: RunnerError) -> str:
    """The words for a runner's failure, with what to do where the worker is at fault."""
    missing = _MISSING_MODULE.search(str(error)) if error.role == "reference" else None
    if missing:
        return (
            f"{error} (the problem imports {missing.group(1)}, which is not installed on this "
            "worker: install it where the GPU workers run, then validate again)"
        )
    return str(error)
