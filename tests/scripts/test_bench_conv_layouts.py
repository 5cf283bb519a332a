"""scripts/bench_conv_layouts.py's part that runs anywhere: a problem's first convolution as a
problem of its own (the timing itself needs a GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench_conv_layouts import first_convolution  # noqa: E402

from gpu_workers.harness.runner import problem as problem_mod  # noqa: E402

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.up = nn.ConvTranspose2d(c_in, c_out, 3, stride=2, padding=1, output_padding=1)
        self.conv = nn.Conv2d(c_out, c_out, 1)

    def forward(self, x):
        return torch.relu(self.conv(self.up(x))) * 2.0


def get_inputs():
    return [torch.rand(2, 4, 5, 6)]


def get_init_inputs():
    return [4, 8]
"""

NO_CONVOLUTION = (
    PROBLEM.replace("self.up(x)", "x")
    .replace("nn.ConvTranspose2d(c_in, c_out, 3, stride=2, padding=1, output_padding=1)", "None")
    .replace("nn.Conv2d(c_out, c_out, 1)", "None")
    .replace("self.conv(x)", "x")
)


def test_the_first_convolution_becomes_a_problem_of_its_own(tmp_path):
    path = tmp_path / "7_ConvTranspose2d_Conv2d_ReLU.py"
    path.write_text(PROBLEM)
    conv = first_convolution(path)
    assert conv.problem == "7_ConvTranspose2d_Conv2d_ReLU" and conv.input_shape == (2, 4, 5, 6)
    alone = tmp_path / "alone.py"
    alone.write_text(conv.source())
    module = problem_mod.load_module(alone, "conv_alone_test")
    model = problem_mod.build_model(module, "cpu", 0)
    original = problem_mod.build_model(problem_mod.load_module(path, "conv_whole_test"), "cpu", 0)
    model.conv.load_state_dict(original.up.state_dict())  # the same module, the same weights
    x = torch.rand(2, 4, 5, 6)
    assert torch.equal(model(x), original.up(x))
    # known-bad: a problem without a convolution gives none
    path.write_text(NO_CONVOLUTION)
    assert first_convolution(path) is None


def test_the_table_marks_a_way_a_convolution_does_not_have_apart_from_a_failure():
    from bench_conv_layouts import ConvAlone, table

    short = ConvAlone(
        "87_Conv2d_Subtract_Subtract_Mish", "nn.Conv2d(8, 64, (3, 3))", (128, 8, 256, 256)
    )
    long = ConvAlone("1_Conv2D_ReLU_BiasAdd", "nn.Conv2d(64, 128, (3, 3))", (128, 64, 128, 128))
    times = {"eager_ms": 4.0, "compile_ms": 2.0, "sol_ms": 0.5}
    rows = [
        (short, {**times, "nchw": 4.0, "nhwc": 3.0, "tiled": 1.0}),
        (long, {**times, "nchw": None, "nhwc": 2.5}),  # NCHW failed; no tiled kernel
    ]
    text = table(rows, "NVIDIA H100 80GB HBM3", "2.11.0", "cmd")
    first, second = (
        line for line in text.splitlines() if line.startswith("| 87") or line.startswith("| 1_")
    )
    assert first.endswith("| 4.000 (2.00x) | 3.000 (1.50x) | 1.000 (0.50x) | 0.500 |")
    assert second.endswith("| failed | 2.500 (1.25x) | - | 0.500 |")
