"""The fusion agent says how its best kernel compares with torch.compile, a loss as plainly as a
win. The policy is driven turn by turn with the tool results a real session gives (the graph
captured by the harness on the cpu target); the profiles are the ones under test."""

from __future__ import annotations

import itertools

import pytest

from agent.fusion.backend import FusionBackend
from agent.tools import (
    format_graph,
    summarise_compile,
    summarise_profile,
    summarise_tune,
    summarise_verify,
)
from agent.tune import Variant
from gpu_workers.harness.capture import graph
from gpu_workers.harness.judge.protocol import LOOSE
from tests.conftest import FIXTURES

VERIFIED = {"ok": True, "trials": 5, "max_abs_err": 0.0, "max_rel_err": 0.0, "violations": []}


@pytest.fixture(scope="module")
def captured() -> str:
    source = (FIXTURES / "problems" / "fusion" / "pointwise_chain.py").read_text()
    return format_graph(graph.capture(source, "cpu", LOOSE))


def profile(candidate_ms: float, compile_ms: float = 1.0, eager_ms: float = 2.0) -> dict:
    return {
        "ok": True,
        "candidate_ms": candidate_ms,
        "eager_ms": eager_ms,
        "compile_ms": compile_ms,
        "speedup_vs_eager": eager_ms / candidate_ms,
        "speedup_vs_compile": compile_ms / candidate_ms,
    }


def tuned(variants: list[dict], times) -> str:
    """The tune tool's reply (agent/tune.py's own summary), each variant timed at the next time."""
    judged = [
        Variant(v["name"], v["files"], verify=VERIFIED, profile=profile(next(times)))
        for v in variants
    ]
    return summarise_tune(sorted(judged, key=Variant.place, reverse=True))


def final_summary(captured: str, times_ms: list[float]) -> str:
    """Profiles the default launch at times_ms[0], each tuning trial (a tune call's variants, in
    order) at the next time (the last one repeated); returns the summary the policy finishes
    with."""
    backend, messages, times = FusionBackend(), [], iter(times_ms)
    results: list[str] = []
    last_time = times_ms[0]
    then_the_last = itertools.chain(times, itertools.repeat(times_ms[-1]))

    for _turn in range(200):
        messages.extend({"role": "tool", "content": text} for text in results)
        reply = backend.complete(messages, [])
        messages.append({"role": "assistant", "content": reply.content})
        results = []
        for call in reply.tool_calls:
            if call.name == "finish":
                return call.arguments["summary"]
            if call.name == "inspect_graph":
                results.append(captured)
            elif call.name == "compile":
                results.append(summarise_compile({"ok": True, "log": ""}))
            elif call.name == "verify":
                results.append(summarise_verify(VERIFIED))
            elif call.name == "profile":
                last_time = next(times, last_time)
                results.append(summarise_profile(profile(last_time)))
            elif call.name == "tune":
                results.append(tuned(call.arguments["variants"], then_the_last))
            else:
                results.append("wrote")
    raise AssertionError("the policy never finished")


def test_a_kernel_slower_than_torch_compile_is_reported_as_a_loss(captured):
    summary = final_summary(captured, [1.25, 2.0])  # 0.80x, then a slower trial
    assert summary.startswith("No faster kernel found: best 0.80x of torch.compile."), summary


def test_a_faster_kernel_reports_its_best_speedup_over_torch_compile(captured):
    summary = final_summary(captured, [1.25, 0.5, 2.0])  # 0.80x, then 2.00x, then slower
    assert summary.startswith("Faster than torch.compile: 2.00x."), summary
