"""scripts/fusion_coverage.py: which problems of a KernelBench-shaped folder the fusion compiler
plans, on meta tensors (a problem far larger than this machine's memory is censused too)."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
coverage = runpy.run_path(str(ROOT / "scripts" / "fusion_coverage.py"))

HEADER = "import torch\nimport torch.nn as nn\n\n"
INPUTS = "\ndef get_init_inputs():\n    return []\n"

PLANNED = (
    HEADER
    + """class Model(nn.Module):
    def forward(self, a, b):
        return torch.softmax(torch.matmul(a.T, b), dim=-1)

def get_inputs():  # 4 TiB each on a real device
    return [torch.rand(1 << 20, 1 << 20), torch.rand(1 << 20, 256)]
"""
    + INPUTS
)

CONVOLUTION = (
    HEADER
    + """class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding_mode="circular")

    def forward(self, x):
        return torch.relu(self.conv(x))

def get_inputs():
    return [torch.rand(2, 3, 16, 16)]
"""
    + INPUTS
)

BROKEN = HEADER + "raise RuntimeError('no such model')\n"


def test_a_folder_is_censused_by_stage_and_refusal(tmp_path):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, source in (("1_planned", PLANNED), ("2_conv", CONVOLUTION), ("3_broken", BROKEN)):
        (level / f"{name}.py").write_text(source)
    planned, conv, broken = (coverage["census"](level / f) for f in sorted(level.iterdir()))
    assert planned["stage"] == "planned" and planned["kernels"] == 2, planned
    # the tune's variants: the bare cuBLAS call (reading a.T as it lies, no transpose kernel)
    # none, the softmax's 9 in its first call and 3 in its second
    assert (planned["tune_first"], planned["tune_all"]) == (9, 12), planned
    assert conv["stage"] == "capture" and conv["convolution"], conv
    assert broken["stage"] == "load" and "no such model" in broken["reasons"][0]
    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fusion_coverage.py"), "--kernelbench",
         str(tmp_path), "--levels", "1"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "| 1 | 3 | 1 | 1 | 0 | 1 | 1 | 9, 12 |" in printed, printed
    refusal = "| conv2d: padding_mode='circular' is not supported; only zeros | L1 2 | 1 |"
    assert refusal in printed, printed


def test_a_missing_level_folder_says_what_to_pass(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fusion_coverage.py"), "--kernelbench",
         str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode != 0 and "the checkout that holds KernelBench/" in result.stderr


def test_a_tensor_the_forward_makes_from_a_number_holds_its_value(tmp_path):
    """Known-bad: traced under the meta default, `torch.tensor(0.5)` was a meta tensor fx folded
    into a constant of unknown value, and the census refused what the harness plans."""
    source = (
        HEADER
        + """class Model(nn.Module):
    def forward(self, x):
        return torch.min(x, torch.tensor(0.5)) * 2.0

def get_inputs():  # 4 TiB on a real device
    return [torch.rand(1 << 20, 1 << 20)]
"""
        + INPUTS
    )
    (tmp_path / "31_min_constant.py").write_text(source)
    entry = coverage["census"](tmp_path / "31_min_constant.py")
    assert entry["stage"] == "planned", entry
