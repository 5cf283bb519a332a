"""`python -m agent optimize PROBLEM.py --agent fusion --device cpu`, as a user runs it (its
main, in this process): the built-in agent captures the graph, generates kernels, and ends with a
verified one for each supported pattern; an unsupported op ends the run with the op named and no
kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main

REPO = Path(__file__).resolve().parents[3]
PROBLEMS = REPO / "tests" / "fixtures" / "problems" / "fusion"

# In this process so a busy host's drift cannot hold the kernels' profiles (what they show is
# the agent's loop, not drift: tests/gpu_workers/harness/test_profile.py decides drift).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("drift_of_a_quiet_host")]


def optimize(problem: str, out: Path, max_turns: int) -> int:
    return main(
        ["optimize", str(PROBLEMS / f"{problem}.py"), "--agent", "fusion", "--device", "cpu",
         "--out", str(out), "--max-turns", str(max_turns)]
    )  # fmt: skip


# The agent's loop, end to end, on a row kernel with its pointwise prologue and on a GEMM with
# its epilogue (scaled_softmax runs below, tuned); every pattern's kernels are compiled and
# verified in test_fusion_cpu.py. 6 turns cover inspect, write, compile, verify and profile.
@pytest.mark.parametrize("problem", ["norm_residual", "linear_gelu"])
def test_it_produces_a_verified_kernel_for_each_supported_pattern(problem, tmp_path, capsys):
    assert optimize(problem, tmp_path, max_turns=6) == 0, capsys.readouterr()
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


def test_it_tunes_the_launch_configuration_and_keeps_the_fastest(tmp_path, capsys):
    assert optimize("scaled_softmax", tmp_path, max_turns=40) == 0, capsys.readouterr()
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["status"] == "finished"
    profiled = [c for c in verdict["candidates"] if c["profile"] and c["profile"]["ok"]]
    assert len(profiled) >= 3  # the default launch and at least two others
    fastest = max(c["speedup_vs_eager"] for c in profiled)
    assert verdict["best"]["speedup_vs_eager"] == fastest
    # the launches were tried through the tune tool, all of a kernel's in one call
    record = json.loads((tmp_path / "trajectory.jsonl").read_text().splitlines()[0])
    tuned = [m["content"] for m in record["messages"] if m.get("name") == "tune"]
    assert tuned and all(text.startswith("tune: ") for text in tuned), tuned


@pytest.mark.parametrize(
    ("problem", "named"),
    [("unsupported_conv", "conv2d"), ("unsupported_topk", "topk")],
)
def test_it_names_an_unsupported_op_and_writes_no_kernel(problem, named, tmp_path, capsys):
    assert optimize(problem, tmp_path, max_turns=6) == 1, capsys.readouterr()
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["best"] is None and verdict["candidates"] == []
    assert named in verdict["detail"] and "cannot handle" in verdict["detail"]
