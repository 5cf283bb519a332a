"""The candidate runs only when the judge asks (issue 29, class 2): between commands its whole
sandbox is stopped, so what it started (busy processes and threads here, a thread waiting for
inputs to land in the attack it stands for) gets no CPU while the judge writes inputs, times
eager or flushes the caches."""

from __future__ import annotations

import contextlib
import os
import time

import pytest

from gpu_workers.harness.judge import runner_process
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.sandbox.census import descendants
from gpu_workers.harness.sandbox.freezer import Census
from gpu_workers.harness.session import Session
from tests.conftest import problem_source
from tests.gpu_workers.harness.attacks import submit

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def busy_runner_on(device: str, problem: str):
    """A candidate runner whose extension started busy processes when it was imported."""
    with Session(problem_source(problem), device=device) as session:
        submit(session, "attack_busy_threads")
        built = session._compile_result()
        assert built.ok, built.log
        runner = runner_process.start_candidate(
            session.root, built.extension_dir, device, LOOSE, 300
        )
        try:
            yield runner
        finally:
            runner.close()


@pytest.fixture(scope="module")
def busy_runner():
    with busy_runner_on("cpu", "relu_scale") as runner:
        yield runner


def _cpu_seconds(root: int) -> float:
    total = 0
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime and stime of all its threads
    return total * _TICK_S


def _cpu_over(root: int, seconds: float) -> float:
    before = _cpu_seconds(root)
    time.sleep(seconds)
    return _cpu_seconds(root) - before


def test_a_stopped_candidate_gets_no_cpu_between_commands(busy_runner):
    root = sandbox.root_pid(busy_runner.proc)
    assert len(descendants(root)) > 2  # the runner and the processes its import started
    assert _cpu_over(root, 0.5) <= 2 * _TICK_S
    # known-bad: the same sandbox let go spins at once
    busy_runner._freezer.thaw()
    try:
        assert _cpu_over(root, 0.5) > 0.05
    finally:
        busy_runner._freeze()
    assert _cpu_over(root, 0.5) <= 2 * _TICK_S


def test_the_census_of_a_stopped_sandbox_counts_what_it_gained():
    warm = Census(processes=2, threads=9)
    assert Census(processes=2, threads=9).grew_from(warm) is None
    assert Census(processes=2, threads=8).grew_from(warm) is None  # a pool that shrank
    assert Census(processes=3, threads=11).grew_from(warm) == "1 process(es) and 2 thread(s)"
