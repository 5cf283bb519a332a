"""Which GPUs a stack puts workers on (webapp/host_gpus.py), and that a host of several gets a
worker of each kind per GPU, each pinned to its own (webapp/serve.py's worker_plan). The listings
are nvidia-smi's `--query-gpu=index,name --format=csv,noheader` output as lent hosts print it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from webapp import child_process, host_gpus, work_kinds
from webapp.serve import worker_plan
from webapp.stack_log import StackLog

FOUR_H200 = "".join(
    f"{i}, GPU-{uuid}, NVIDIA H200\n"
    for i, uuid in enumerate(("e827eb87-d40c", "27f96b6b-77ff", "253b2423-36d2", "5397dcb0-ea6e"))
)
MIXED = (
    "0, GPU-0a, NVIDIA H100 80GB HBM3\n1, GPU-1b, NVIDIA H200\n2, GPU-2c, NVIDIA H100 80GB HBM3\n"
)


def indices(gpus: list[host_gpus.Gpu]) -> list[str]:
    return [gpu.index for gpu in gpus]


def test_every_gpu_of_the_first_type_is_served_by_default():
    assert indices(host_gpus.served(host_gpus.parse_listing(FOUR_H200), {})) == ["0", "1", "2", "3"]
    mixed = host_gpus.served(host_gpus.parse_listing(MIXED), {})
    assert indices(mixed) == ["0", "2"] and {gpu.gpu_type for gpu in mixed} == {"h100"}


def test_a_host_without_gpus_serves_the_cpu_target():
    assert host_gpus.served(host_gpus.parse_listing(""), {"CUDA_VISIBLE_DEVICES": "0"}) == []
    garbled = "No devices were found\n"
    assert host_gpus.parse_listing(garbled) == []


def test_named_gpus_are_served_kernelarena_gpus_first():
    listing = host_gpus.parse_listing(FOUR_H200)
    assert indices(host_gpus.served(listing, {"CUDA_VISIBLE_DEVICES": "1,3"})) == ["1", "3"]
    by_uuid = {"CUDA_VISIBLE_DEVICES": "GPU-5397dcb0,GPU-27f96b6b-77ff"}  # whole or a prefix
    assert indices(host_gpus.served(listing, by_uuid)) == ["3", "1"]
    env = {"KERNELARENA_GPUS": "2", "CUDA_VISIBLE_DEVICES": "1,3"}
    assert indices(host_gpus.served(listing, env)) == ["2"]


@pytest.mark.parametrize(
    ("listing", "env", "says"),
    [
        (
            FOUR_H200,
            {"KERNELARENA_GPUS": "0,5"},
            "names GPU '5', which is not one GPU this host lists",
        ),
        (FOUR_H200, {"CUDA_VISIBLE_DEVICES": "GPU-3b1e"}, "nvidia-smi lists 0, 1, 2, 3"),
        (FOUR_H200, {"CUDA_VISIBLE_DEVICES": "GPU-"}, "is not one GPU"),  # a prefix of all four
        (MIXED, {"KERNELARENA_GPUS": "0,1"}, "mixes GPU types (h100, h200)"),
    ],
)
def test_a_choice_the_stack_cannot_serve_is_refused_with_the_fix(listing, env, says):
    with pytest.raises(host_gpus.GpuChoiceError) as refused:
        host_gpus.served(host_gpus.parse_listing(listing), env)
    assert says in str(refused.value)


def test_a_gpu_type_is_named_after_the_gpu():
    assert host_gpus.gpu_type("NVIDIA H100 80GB HBM3") == "h100"
    assert host_gpus.gpu_type("NVIDIA H200") == "h200"


def test_one_gpu_gets_a_worker_per_kind_and_several_get_one_per_kind_per_gpu(tmp_path: Path):
    log = StackLog.open(tmp_path)
    four = host_gpus.parse_listing(FOUR_H200)
    one = worker_plan(four[:1], ["h200"], log)
    assert [label for label, _ in one] == [f"{kind.label} worker" for kind in work_kinds.KINDS]
    labels = [label for label, _ in worker_plan(four, ["h200"], log)]
    assert len(labels) == len(set(labels)) == 4 * len(work_kinds.KINDS)
    assert "re-grade worker on GPU 3" in labels


def test_a_worker_on_a_gpu_is_pinned_to_it(tmp_path: Path):
    """A real worker process, started as the stack starts it: its environment names its GPU (the
    harness reads KERNELARENA_GPU for the sandbox's pin and the lock's name), its name too, and it
    runs on its GPU's share of the cores (on this 2-core host, one core: the share of GPU 2 of
    four wraps round to core 0)."""
    log = StackLog.open(tmp_path)
    plan = dict(worker_plan(host_gpus.parse_listing(FOUR_H200), ["h200"], log))
    worker = plan["re-grade worker on GPU 2"]()
    try:
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
        command = Path(f"/proc/{worker.pid}/cmdline").read_bytes().split(b"\0")
        cores = frozenset(os.sched_getaffinity(worker.pid))
    finally:
        child_process.stop(worker, timeout_s=10)
    # by UUID: CUDA numbers devices fastest first, nvidia-smi in PCI order
    assert b"KERNELARENA_GPU=GPU-253b2423-36d2" in environ
    assert b"CUDA_VISIBLE_DEVICES=GPU-253b2423-36d2" in environ
    assert any(part.startswith(b"grade-gpu2-") for part in command), command
    assert b"gpu.h200.grade" in command
    assert cores == host_gpus.cpu_shares(4)[2]  # GPU 2's share of this host's cores


def test_each_gpu_gets_cores_of_its_own():
    sixty_four = frozenset(range(64))
    shares = host_gpus.cpu_shares(4, sixty_four)
    assert shares == [frozenset(range(16 * i, 16 * i + 16)) for i in range(4)]
    uneven = host_gpus.cpu_shares(3, frozenset(range(8)))
    assert sorted(len(share) for share in uneven) == [2, 3, 3]
    assert frozenset().union(*uneven) == frozenset(range(8))  # every core dealt, none twice
    assert sum(len(share) for share in uneven) == 8
    assert host_gpus.cpu_shares(4, frozenset({0, 1})) == [frozenset({0}), frozenset({1})] * 2
    assert host_gpus.cpu_shares(1, sixty_four) == [sixty_four]
