"""Runs a fixture candidate through a real Session (real compile, real sandboxed processes)."""

from __future__ import annotations

from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge.protocol import LOOSE, Protocol
from gpu_workers.harness.session import Session
from tests.conftest import candidate_dir, problem_source


def evaluate(
    problem: str,
    candidate: str,
    device: str = "cpu",
    protocol: Protocol = LOOSE,
    profile: bool = True,
) -> dict:
    with Session(
        problem_source(problem), device=device, protocol=protocol, candidates=1
    ) as session:
        workspace.copy_candidate(session.workspace, candidate_dir(device, candidate))
        if profile:
            return session.evaluate()
        return {"compile": session.compile(), "verify": session.verify()}


def codes(section: dict | None) -> set[str]:
    return {v["code"] for v in (section or {}).get("violations", [])}


def profile_past_the_gate(device: str, problem: str, candidate: str) -> dict:
    """Verifies and profiles with the static gate off, so the runtime defences are what a
    candidate meets (the gate would stop these before they run)."""
    with Session(problem_source(problem), device=device, candidates=1) as session:
        workspace.copy_candidate(session.workspace, candidate_dir(device, candidate))
        built = session._compile_result()
        assert built.ok, built.log
        judged = session._judge(built.extension_dir)  # what _verify does after the gate
        assert judged[1] is not None, judged[0]
        session._verified = (session._digest(), judged)
        return session.profile()
