"""End to end on the cpu target: every pattern's generated candidate compiles and verifies against
its KernelBench problem in the real harness Session; the first case of each kernel kind also
profiles (a profile times what verify already ran, plus baselines that cost a torch.compile per
problem: once per kind shows the kind's launch and timing path work)."""

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


def _first_of_each_kind(cases) -> set[str]:
    seen: set[str] = set()
    chosen = set()
    for case in cases:
        if not seen.issuperset(case.kinds):
            chosen.add(case.name)
            seen.update(case.kinds)
    return chosen


PROFILED = _first_of_each_kind(ALL)


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_candidate_compiles_and_verifies(case, tmp_path):
    _, session = _open(case, tmp_path)
    with session:
        compiled = session.compile()
        assert compiled["ok"], compiled["log"]
        verdict = session.verify()
        assert verdict["ok"], verdict
        if case.name in PROFILED:
            profile = session.profile()
            # drift (eager slowed beside it, after re-measuring) is the host's verdict, held
            # for review and blamed on no kernel: the kind's timing path still worked
            assert profile["ok"] or profile["failed_by"] == "infrastructure", profile["violations"]
            assert profile["candidate_ms"] > 0


def test_every_kernel_kind_is_profiled_once():
    kinds = {kind for case in ALL if case.name in PROFILED for kind in case.kinds}
    assert kinds == {kind for case in ALL for kind in case.kinds}
    assert len(PROFILED) < len(ALL)  # known-bad for the time it saves: not every case


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
