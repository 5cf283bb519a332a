"""End to end on the cpu target: every pattern's generated candidate compiles, verifies against
its KernelBench problem and profiles in the real harness Session."""

from __future__ import annotations

import pytest
from fusion_cases import ALL, residual_layer_norm

from agent.fusion import compile_graph

pytestmark = pytest.mark.slow
session_module = pytest.importorskip("gpu_workers.harness.session")


def _open(case, tmp_path):
    program = compile_graph(case.ir, "cpu")
    assert program.unsupported == []
    session = session_module.Session(case.problem, device="cpu", root=tmp_path / "session")
    for path, text in program.files.items():
        session.write_file(path, text)
    return program, session


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_candidate_compiles_verifies_and_profiles(case, tmp_path):
    _, session = _open(case, tmp_path)
    with session:
        compiled = session.compile()
        assert compiled["ok"], compiled["log"]
        verdict = session.verify()
        assert verdict["ok"], verdict
        profile = session.profile()
        assert profile["ok"], profile
        assert profile["candidate_ms"] > 0


def test_tuning_rewrites_only_model_new(tmp_path):
    """Other launch values: only model_new.py changes, the extension is reused, still correct."""
    program, session = _open(residual_layer_norm(rows=96, cols=512), tmp_path)
    with session:
        assert session.compile()["ok"]
        assert session.verify()["ok"]
        (name,) = program.launch
        session.write_file("model_new.py", program.model_new({name: {"rows_per_task": 7}}))
        compiled = session.compile()
        assert compiled["ok"] and compiled["cached"]
        verdict = session.verify()
        assert verdict["ok"], verdict
