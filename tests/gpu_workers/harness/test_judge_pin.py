"""A judge must work on the GPU its runners are pinned to (settings.check_judge_on_its_gpu): the
buffers it shares with them live on its own device, and a runner on another GPU reads them
across the link, which a lent host of four H200s timed up to 34 times slower."""

from __future__ import annotations

import pytest

from gpu_workers.harness import settings


def _env(monkeypatch, **env: str) -> None:
    for name in ("KERNELARENA_GPU", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("env", "current_device"),
    [
        ({}, 0),  # one GPU, nothing said
        ({"KERNELARENA_GPU": "GPU-253b", "CUDA_VISIBLE_DEVICES": "GPU-253b"}, 0),  # `make run`'s
        ({"KERNELARENA_GPU": "2", "CUDA_VISIBLE_DEVICES": "2"}, 0),  # pinned by index
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, 0),  # given two GPUs: both sides use the first
        ({"KERNELARENA_GPU": "1"}, 1),  # a GRPO rank under accelerate: sees all, works on its own
        ({"KERNELARENA_GPU": "3", "CUDA_VISIBLE_DEVICES": "2,3"}, 1),
    ],
)
def test_a_judge_on_its_runners_gpu_passes(monkeypatch, env, current_device):
    _env(monkeypatch, **env)
    settings.check_judge_on_its_gpu(current_device)


@pytest.mark.parametrize(
    ("env", "current_device", "says"),
    [
        ({"KERNELARENA_GPU": "2"}, 0, "judges on GPU 0 but pins its runners to GPU 2"),
        ({"KERNELARENA_GPU": "1", "CUDA_VISIBLE_DEVICES": "2,3"}, 1, "judges on GPU 3"),
    ],
)
def test_a_judge_on_another_gpu_than_its_runners_is_refused_with_the_fix(
    monkeypatch, env, current_device, says
):
    """Known-bad: a worker pinned its runners with KERNELARENA_GPU alone (the first lent host of
    four H200s), and a rank numbered by LOCAL_RANK where CUDA_VISIBLE_DEVICES narrowed the GPUs."""
    _env(monkeypatch, **env)
    with pytest.raises(RuntimeError, match="set CUDA_VISIBLE_DEVICES=") as refused:
        settings.check_judge_on_its_gpu(current_device)
    assert says in str(refused.value)
