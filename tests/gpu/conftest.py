"""tests/gpu runs only where CUDA is present (the lent H100: `make gpu-test` or
`python3 -m pytest tests/gpu`)."""

from __future__ import annotations

import os
import time
import traceback
from contextlib import contextmanager

import pytest
import torch

from gpu_workers.harness.judge import gpu_lock, profile
from gpu_workers.harness.session import Session
from tests.gpu import prebuild

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]


BARRIER_WAIT_S = 900  # the whole-GPU tests and the prebuild take 1-2 minutes


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    """scripts/gpu_tests.sh starts these workers while the whole-GPU tests (which fill the
    device's memory) and the prebuild still run, so their interpreters and imports overlap them;
    collection waits until the script touches GPU_TESTS_BARRIER, since collecting captures
    graphs (tests/agent/fusion/fusion_cases.py), which meet a full device as a CUDA error."""
    barrier = os.environ.get("GPU_TESTS_BARRIER")
    deadline = time.monotonic() + BARRIER_WAIT_S
    while barrier and not os.path.exists(barrier):
        if time.monotonic() > deadline:
            raise pytest.UsageError(f"the whole-GPU tests did not end within {BARRIER_WAIT_S} s")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def prebuilt_cuda_candidates(tmp_path_factory):
    """Every cuda fixture candidate built once (tests/gpu/prebuild.py), for the modules that
    judge them; the fusion and whole-GPU tests do not wait for it. (Building in the background
    while tests ran took longer on the lent H100: the tests' own runners and compiles slowed
    down behind it, lock holders too; scripts/gpu_tests.sh builds them beside the whole-GPU
    tests instead, which need no candidate.)"""
    root = tmp_path_factory.mktemp("prebuild")
    seconds = prebuild.build_once("cuda-fixtures", prebuild.cuda_candidate_jobs(), root)
    _log(f"prebuild cuda fixtures {seconds:6.1f} s in {_worker()}")


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _log(line: str) -> None:
    if path := os.environ.get("GPU_TEST_LOG"):
        with open(path, "a") as log:
            log.write(line + "\n")


def pytest_sessionfinish(session):
    """How long this process held the GPU lock: the tests' GPU time, against their wall time
    (with six workers, the lock is what they queue on)."""
    _log(f"gpu lock held {gpu_lock.held_seconds():7.1f} s  by {_worker()}")


@pytest.fixture(autouse=True)
def logged_steps(request, monkeypatch):
    """Each judged step's phases (and each baselines measurement's seconds) in $GPU_TEST_LOG,
    under the test that ran it: where a test's share of the GPU lock went."""
    path = os.environ.get("GPU_TEST_LOG")
    if path:
        judge, baselines = Session._judge, profile.baselines

        def write(line: str) -> None:
            with open(path, "a") as log:
                log.write(f"  {request.node.nodeid}: {line}\n")

        def logged_judge(self, extension_dir):
            result = judge(self, extension_dir)
            write(f"step {result[0].get('phases_s')} fork server: {self.fork_server_why or 'up'}")
            measured = result[1]
            if measured is not None:  # the clock check's numbers, which a failure's repr cuts
                codes = [violation.code for violation in measured.violations]
                write(f"clock {measured.clock} violations {codes}")
            return result

        def logged_baselines(*args, **kwargs):
            started = time.monotonic()
            result = baselines(*args, **kwargs)
            write(f"baselines {time.monotonic() - started:.1f} s cached={result.get('cached')}")
            return result

        hold = gpu_lock.hold

        @contextmanager
        def logged_hold(device, what="", quiet=False):
            caller = "/".join(frame.name for frame in traceback.extract_stack(limit=6)[:-2])
            with hold(device, what, quiet) as waited:
                started = time.monotonic()
                try:
                    yield waited
                finally:
                    write(f"gpu lock {time.monotonic() - started:.1f} s in {caller}")

        monkeypatch.setattr(gpu_lock, "hold", logged_hold)
        monkeypatch.setattr(Session, "_judge", logged_judge)
        monkeypatch.setattr(profile, "baselines", logged_baselines)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """The seconds each test's call held the GPU lock, beside its duration in $GPU_TEST_LOG:
    the lock is what tests/gpu's workers queue on, so its sum bounds the run's wall time."""
    before = gpu_lock.held_seconds()
    yield
    item.user_properties.append(("gpu_lock_s", gpu_lock.held_seconds() - before))


def pytest_runtest_logreport(report):
    """Each test's phases and seconds, appended as they end to $GPU_TEST_LOG (scripts/
    gpu_tests.sh sets it), with a failure's report: a run cut off at the device's time limit
    still shows where its time went and why a test failed, which pytest prints only at the end.
    Under pytest-xdist the controller writes (it receives every worker's reports)."""
    path = os.environ.get("GPU_TEST_LOG")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if report.when == "call" or report.outcome != "passed":
        lock = dict(report.user_properties).get("gpu_lock_s", 0.0)
        with open(path, "a") as log:
            log.write(
                f"{report.outcome:7} {report.duration:7.1f} s  lock {lock:6.1f} s  "
                f"{report.when:8} {report.nodeid}\n"
            )
            if report.failed:
                log.write(report.longreprtext[-4000:] + "\n")
