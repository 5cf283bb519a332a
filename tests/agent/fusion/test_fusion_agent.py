"""`python -m agent optimize PROBLEM.py --agent fusion --device cpu`, as a user runs it: the
built-in agent captures the graph, generates kernels, and ends with a verified one for each
supported pattern; an unsupported op ends the run with the op named and no kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PROBLEMS = REPO / "tests" / "fixtures" / "problems" / "fusion"

pytestmark = pytest.mark.slow


def optimize(problem: str, out: Path, max_turns: int) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "agent", "optimize", str(PROBLEMS / f"{problem}.py"),
               "--agent", "fusion", "--device", "cpu", "--out", str(out),
               "--max-turns", str(max_turns)]  # fmt: skip
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)


# The agent's loop, end to end, on a row kernel with its pointwise prologue and on a GEMM with
# its epilogue (scaled_softmax runs below, tuned); every pattern's kernels are compiled and
# verified in test_fusion_cpu.py. 6 turns cover inspect, write, compile, verify and profile.
@pytest.mark.parametrize("problem", ["norm_residual", "linear_gelu"])
def test_it_produces_a_verified_kernel_for_each_supported_pattern(problem, tmp_path):
    done = optimize(problem, tmp_path, max_turns=6)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    best = verdict["best"]
    assert best["verified"] and best["profile"]["ok"], verdict
    files = sorted(
        p.relative_to(tmp_path / "best").as_posix()
        for p in (tmp_path / "best").rglob("*")
        if p.is_file()
    )
    assert files == ["kernels/fused.cpp", "kernels/fused_binding.cpp", "model_new.py"]
    assert verdict["usage"]["prompt_tokens"] == 0  # no model, no tokens


def test_it_tunes_the_launch_configuration_and_keeps_the_fastest(tmp_path):
    done = optimize("scaled_softmax", tmp_path, max_turns=40)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["status"] == "finished"
    profiled = [c for c in verdict["candidates"] if c["profile"] and c["profile"]["ok"]]
    assert len(profiled) >= 3  # the default launch and at least two others
    fastest = max(c["speedup_vs_eager"] for c in profiled)
    assert verdict["best"]["speedup_vs_eager"] == fastest


@pytest.mark.parametrize(
    ("problem", "named"),
    [("unsupported_conv", "conv2d"), ("unsupported_topk", "topk")],
)
def test_it_names_an_unsupported_op_and_writes_no_kernel(problem, named, tmp_path):
    done = optimize(problem, tmp_path, max_turns=6)
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["best"] is None and verdict["candidates"] == []
    assert named in verdict["detail"] and "cannot handle" in verdict["detail"]
