"""Tensors the size of KernelBench's (several GiB) travel through lent buffers intact."""

from pathlib import Path

import pytest
import torch

from gpu_workers.harness.judge import shared_buffers, validation
from gpu_workers.harness.judge.protocol import LOOSE

# Sets of several GiB beside other tests' runners (each holds a CUDA context and its own sets)
# ran an 80 GiB H100 out of memory: these run after the others, alone on the GPU.
pytestmark = pytest.mark.whole_gpu
PROBLEMS = Path(__file__).resolve().parents[1] / "fixtures" / "problems" / "gpu"


def test_buffers_over_2_and_4_gib_hold_every_byte():
    # 2 GiB + 1 reached cuMemAlloc as a negative int ("out of memory"), 4 GiB + 1 as 1 byte
    for nbytes in (2**31 + 1, 2**32 + 1):
        buffer = shared_buffers.allocate(nbytes, "cuda")
        try:
            assert buffer.bytes.numel() == nbytes
            buffer.bytes[-1] = 7
            torch.cuda.synchronize()
            assert int(buffer.bytes[-1]) == 7
        finally:
            buffer.free()


def test_a_kernelbench_sized_activation_validates():
    report = validation.validate((PROBLEMS / "large_activation.py").read_text(), "cuda", LOOSE)
    assert report.ok, report.reasons
    assert report.bytes_moved >= 2 * 4096 * 393216 * 4
