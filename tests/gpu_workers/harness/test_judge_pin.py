"""A judge must work on the GPU its runners are pinned to (settings.check_judge_on_its_gpu): the
buffers it shares with them live on its own device, and a runner on another GPU reads them
across the link, which a lent host of four H200s timed up to 30 times slower."""

from __future__ import annotations

import pytest

from gpu_workers.harness import settings


@pytest.mark.parametrize(
    "env",
    [
        {},  # one GPU, nothing said: both are device 0
        {"KERNELARENA_GPU": "2", "CUDA_VISIBLE_DEVICES": "2"},  # how `make run` pins a worker
        {"CUDA_VISIBLE_DEVICES": "2,3"},  # a worker given two GPUs: both sides use the first
        {"KERNELARENA_GPU": "0"},
    ],
)
def test_a_judge_on_its_runners_gpu_passes(monkeypatch, env):
    for name in ("KERNELARENA_GPU", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings.check_judge_on_its_gpu()


def test_a_judge_on_another_gpu_than_its_runners_is_refused_with_the_fix(monkeypatch):
    """Known-bad: the worker pinned its runners with KERNELARENA_GPU alone."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("KERNELARENA_GPU", "2")
    with pytest.raises(RuntimeError, match="set CUDA_VISIBLE_DEVICES=2 too"):
        settings.check_judge_on_its_gpu()
