"""Runs a fixture candidate through a real Session (real compile, real sandboxed processes)."""

from __future__ import annotations

from gpu_workers.harness import workspace
from gpu_workers.harness.protocol import LOOSE, Protocol
from gpu_workers.harness.session import Session
from tests.conftest import candidate_dir, problem_source


def evaluate(
    problem: str,
    candidate: str,
    device: str = "cpu",
    protocol: Protocol = LOOSE,
    profile: bool = True,
) -> dict:
    with Session(problem_source(problem), device=device, protocol=protocol) as session:
        workspace.copy_candidate(session.workspace, candidate_dir(device, candidate))
        if profile:
            return session.evaluate()
        return {"compile": session.compile(), "verify": session.verify()}


def codes(section: dict | None) -> set[str]:
    return {v["code"] for v in (section or {}).get("violations", [])}


def profile_past_the_gate(device: str, problem: str, candidate: str):
    """Verifies and profiles with the static gate off, so the runtime defences are what a
    candidate meets (the gate would stop these before they run)."""
    from gpu_workers.harness import profile, verify

    with Session(problem_source(problem), device=device) as session:
        workspace.copy_candidate(session.workspace, candidate_dir(device, candidate))
        built = session._compile_result()
        assert built.ok, built.log
        verdict, measured = verify.run(
            session.workspace,
            built.extension_dir,
            device,
            session.protocol,
            session.workdir,
            check_sources=False,
        )
        assert measured is not None, verdict
        return profile.run(
            session.root / "model.py", device, session.protocol, session.workdir, measured
        )
