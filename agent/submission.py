"""A person's own kernel, put through the same tools as an agent's: the run's trace shows each
file written, then compile, verify and profile, and the candidate is recorded and re-graded the
same way. No model: a scripted reply list built from the submitted files."""

from __future__ import annotations

from agent.backends.scripted import ScriptedBackend
from agent.config import AgentConfig, Budget
from gpu_workers.harness.vocabulary import SUBMISSION_AGENT

NAME = SUBMISSION_AGENT
_NO_TOKENS = {"prompt_tokens": 0, "completion_tokens": 0}


def submission_config() -> AgentConfig:
    return AgentConfig(name=NAME, backend="scripted", budget=Budget(max_turns=6))


def submission_backend(sources: dict[str, str]) -> ScriptedBackend:
    writes = [
        {"tool": "write_file", "args": {"path": path, "content": text}}
        for path, text in sorted(sources.items())
    ]
    steps = [
        ("Write the submitted files.", {"calls": writes}),
        ("Build them.", {"tool": "compile"}),
        ("Check them against the reference.", {"tool": "verify"}),
        ("Time them.", {"tool": "profile"}),
        ("Done.", {"tool": "finish", "args": {"summary": "submission checked"}}),
    ]
    return ScriptedBackend(
        [{"thought": thought, **action, "usage": _NO_TOKENS} for thought, action in steps]
    )
