"""scripts/fusion_table.py: the fusion agent against torch.compile by op kind, from a level's
report CSV and a KernelBench-shaped folder's census (kinds from plans made on meta tensors)."""

from __future__ import annotations

import csv
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
table = runpy.run_path(str(ROOT / "scripts" / "fusion_table.py"))

HEADER = "import torch\nimport torch.nn as nn\n\n"
INPUTS = "\ndef get_init_inputs():\n    return []\n"


def problem(forward: str, inputs: str) -> str:
    return (
        HEADER
        + f"class Model(nn.Module):\n    def forward(self, a):\n        return {forward}\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n"
        + INPUTS
    )


PROBLEMS = {
    "1_Relu": problem("torch.relu(a) * 2.0", "torch.rand(1 << 24)"),
    "2_Softmax": problem("torch.softmax(a, dim=-1)", "torch.rand(4096, 4096)"),
    "3_GemmSoftmax": problem("torch.softmax(a @ a, dim=-1)", "torch.rand(1024, 1024)"),
    "4_Cumsum": problem("torch.cumsum(a, dim=1)", "torch.rand(128, 4096)"),
    "5_Rejected": problem("a.sum() * 0.0", "torch.rand(64)"),
}
COLUMNS = (
    "problem status eager_ms compile_ms compile_max_autotune_ms sol_ms entrant kind ms "
    "speedup_vs_eager speedup_vs_compile sol_fraction"
).split()


def write_level(tmp_path: Path) -> Path:
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, source in PROBLEMS.items():
        (level / f"{name}.py").write_text(source)
    report = tmp_path / "level1.csv"
    base = {"status": "valid", "eager_ms": "2.0", "compile_ms": "1.0",
            "compile_max_autotune_ms": "2.0", "sol_ms": "0.5"}  # fmt: skip
    fusion = {"entrant": "fusion", "kind": "agent"}
    lines = [
        # relu: 2x torch.compile at 100% of the speed of light; max-autotune beside it
        {**base, "problem": "1_Relu", **fusion, "ms": "0.5", "speedup_vs_compile": "2.0",
         "sol_fraction": "1.0"},
        {**base, "problem": "1_Relu", "entrant": "torch.compile (max-autotune)",
         "kind": "compiler", "ms": "2.0", "speedup_vs_compile": "0.5", "sol_fraction": "0.25"},
        # softmax: half torch.compile's speed
        {**base, "problem": "2_Softmax", **fusion, "ms": "2.0", "speedup_vs_compile": "0.5",
         "sol_fraction": "0.25"},
        {**base, "problem": "3_GemmSoftmax", **fusion, "ms": "1.0", "speedup_vs_compile": "1.0",
         "sol_fraction": "0.5"},
        {**base, "problem": "4_Cumsum"},  # no counted result: unverified
        {**base, "problem": "5_Rejected", "status": "rejected", "compile_ms": ""},
    ]  # fmt: skip
    with report.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(lines)
    return report


def test_each_problem_counts_under_its_plans_weightiest_kernel(tmp_path):
    report = write_level(tmp_path)
    folder = tmp_path / "KernelBench" / "level1"
    kinds = {p.stem: table["problem_kind"](table["census"](p)) for p in folder.glob("*.py")}
    assert kinds["1_Relu"] == "pointwise" and kinds["2_Softmax"] == "row_reduction"
    assert kinds["3_GemmSoftmax"] == "gemm" and kinds["4_Cumsum"] == "scan", kinds
    problems = table["read_level"]("1", report, kinds, "fusion")
    assert sorted(p.name for p in problems) == ["1_Relu", "2_Softmax", "3_GemmSoftmax", "4_Cumsum"]
    lines = table["table"](problems)
    assert "| L1 pointwise | 1 | 1 | 1 | 2.00x | 100% | 50% | 25% |" in lines, lines
    assert "| L1 scan | 1 | 0 | 0 | — | — | 50% | 25% |" in lines, lines
    # 2.0, 0.5 and 1.0: geomean 1.0, over the three verified of four non-convolution problems
    assert "| all non-convolution | 4 | 3 | 1 | 1.00x | 50% | 50% | 25% |" in lines, lines
    # the GEMM is not memory-bound: relu (100%) and softmax (25%) have a median of 62.5%
    assert "| memory-bound (no GEMM, no convolution) | 3 | 2 | 1 | 1.00x | 62% | 50% | 25% |" in (
        lines
    ), lines
    found = table["checks"](problems)
    assert "- non-convolution problems verified: 75% (target 0.95): not yet" in found, found
    assert found[3].startswith("- verified pointwise problems under 90% of the speed of light: 0")


def test_the_section_is_written_into_the_doc_and_a_foreign_problem_is_refused(tmp_path):
    report = write_level(tmp_path)
    doc = tmp_path / "fusion.md"
    doc.write_text("# Fusion\n\nkept above\n")
    command = [sys.executable, str(ROOT / "scripts" / "fusion_table.py"), "--kernelbench",
               str(tmp_path), "--csv", f"1={report}", "--write", str(doc)]  # fmt: skip
    subprocess.run(command, capture_output=True, text=True, check=True)
    text = doc.read_text()
    assert text.startswith("# Fusion\n\nkept above\n") and "<!-- begin fusion-table -->" in text
    assert "| L1 row reduction | 1 | 1 | 0 | 0.50x | 25% | 50% | 25% |" in text, text
    # known-bad: a report of another checkout's problem says which checkout to pass
    with report.open("a", newline="") as handle:
        csv.writer(handle).writerow(["9_Elsewhere", "valid"] + [""] * 10)
    refused = subprocess.run(command, capture_output=True, text=True)
    assert refused.returncode != 0 and "9_Elsewhere is not in the KernelBench" in refused.stderr
    assert text == doc.read_text()  # nothing written
