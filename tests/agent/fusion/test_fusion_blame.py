"""The fusion agent blames itself only for its own failures: a verify that failed because the
problem's code or the machine failed ends the run saying so, never "a fusion compiler bug". The
policy is driven turn by turn with the tool results a real session gives (the graph captured by
the harness on the cpu target), the verify result being the one under test."""

from __future__ import annotations

import pytest

from agent.fusion.backend import FusionBackend
from agent.tools import format_graph, summarise_compile, summarise_verify
from gpu_workers.harness.capture import graph
from gpu_workers.harness.judge.protocol import LOOSE
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def captured() -> str:
    source = (FIXTURES / "problems" / "fusion" / "pointwise_chain.py").read_text()
    return format_graph(graph.capture(source, "cpu", LOOSE))


def finish_after_verify(captured: str, verify_verdict: dict) -> str:
    """The summary the policy finishes with when verify answers `verify_verdict`."""
    backend, messages = FusionBackend(), []

    def answer(*results: str) -> list[str]:
        """Gives the previous reply's tool results; returns the names of the next reply's calls."""
        messages.extend({"role": "tool", "content": text} for text in results)
        reply = backend.complete(messages, [])
        messages.append({"role": "assistant", "content": reply.content})
        answer.last = reply
        return [call.name for call in reply.tool_calls]

    assert answer() == ["inspect_graph"]
    writes = answer(captured)
    assert set(writes) == {"write_file"}
    assert answer(*["wrote"] * len(writes)) == ["compile"]
    assert answer(summarise_compile({"ok": True, "log": ""})) == ["verify"]
    assert answer(summarise_verify(verify_verdict)) == ["finish"]
    return answer.last.content


FAILED = {"ok": False, "trials": 0, "max_abs_err": None, "max_rel_err": None, "violations": []}


@pytest.mark.parametrize(
    "failed_by, said",
    [
        ("infrastructure", "the machine failed"),
        ("problem", "the problem's own code failed"),
        ("candidate", "a fusion compiler bug"),  # known-bad: its own failure is its bug
    ],
)
def test_a_verify_failure_is_blamed_on_whoever_failed(captured, failed_by, said):
    verdict = {**FAILED, "error": "the reference failed: out of memory", "failed_by": failed_by}
    summary = finish_after_verify(captured, verdict)
    assert said in summary, summary
    assert ("compiler bug" in summary) == (failed_by == "candidate")
