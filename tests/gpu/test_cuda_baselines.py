"""The baselines' reference runner on a GPU: torch.compile's first use is paid before the lock."""

from contextlib import contextmanager

import pytest

from gpu_workers.harness.judge import gpu_lock
from gpu_workers.harness.judge import profile as profile_mod
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.judge.runner_process import RunnerProcess
from tests.conftest import problem_source


class _LockReached(Exception):
    """Stops the baselines where the lock would be taken: the order up to there is the test."""


def test_the_baselines_reference_is_warm_before_the_gpu_lock(tmp_path, monkeypatch):
    """A process's first torch.compile (Dynamo, Inductor and Triton imported, the compile workers
    started, a first kernel: 8-13 s on an H200 host) is paid by the baselines' reference before
    the GPU lock; under it, every run sharing the GPU waited it out."""
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path / "cache"))  # nothing cached
    problem = tmp_path / "problem" / "model.py"
    problem.parent.mkdir()
    problem.write_text(problem_source("gpu/relu_scale"))
    events, real_ask, real_settle = [], RunnerProcess.ask, RunnerProcess.settle

    def logged_ask(self, command, **fields):
        events.append((command, fields.get("warm_compile")))
        return real_ask(self, command, **fields)

    def logged_settle(self):
        asked = self._asked
        real_settle(self)
        if asked is not None:
            events.append(f"{asked[0]} answered")

    @contextmanager
    def stopping_hold(device):
        events.append("lock")
        raise _LockReached
        yield

    monkeypatch.setattr(RunnerProcess, "ask", logged_ask)
    monkeypatch.setattr(RunnerProcess, "settle", logged_settle)
    monkeypatch.setattr(gpu_lock, "hold", stopping_hold)
    with pytest.raises(_LockReached):
        profile_mod.baselines(problem, "cuda", LOOSE, tmp_path)
    # known-bad (no warm-up; the first compile then ran under the lock):
    # [("prepare", False), "prepare answered", "lock"]
    assert events == [("prepare", True), "prepare answered", "lock"]
