"""The fusion agent tunes through the tune tool and reads back what it answers: the policy is
driven turn by turn with the tool results a real session gives (the graph the harness captures
on the cpu target; the tune reply written by agent/tune.py's own summary), and it keeps the launch
the tune call found fastest, or its first one when no variant beat it."""

from __future__ import annotations

import pytest

from agent.fusion.backend import AT_SPEED_OF_LIGHT, LAUNCH_MATTERS, NOT_WORTH_TUNING, FusionBackend
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

VERIFIED = {"ok": True, "trials": 3, "max_abs_err": 0.0, "max_rel_err": 0.0}


def timed(speedup: float, light: float = 0.5) -> dict:
    return {
        "ok": True,
        "candidate_ms": 1.0 / speedup,
        "eager_ms": 1.0,
        "compile_ms": 1.0,
        "speedup_vs_eager": speedup,
        "speedup_vs_compile": speedup,
        "sol_ms": light / speedup,
        "sol_fraction": light,
    }


@pytest.fixture(scope="module")
def captured() -> str:
    source = (FIXTURES / "problems" / "fusion" / "pointwise_chain.py").read_text()
    return format_graph(graph.capture(source, "cpu", LOOSE))


class Driver:
    def __init__(self) -> None:
        self.backend, self.messages, self.reply = FusionBackend(), [], None

    def answer(self, *results: str):
        """Gives the previous reply's tool results; returns the next reply's calls."""
        self.messages.extend({"role": "tool", "content": text} for text in results)
        self.reply = self.backend.complete(self.messages, [])
        self.messages.append({"role": "assistant", "content": self.reply.content})
        return self.reply.tool_calls

    def to_first_profile(self, graph_text: str) -> list:
        """From the start to the profile call: the graph, the writes, a clean compile and
        verify. Returns the writes."""
        self.answer()
        writes = self.answer(graph_text)
        self.answer(*["wrote"] * len(writes))
        self.answer(summarise_compile({"ok": True, "log": ""}))
        self.answer(summarise_verify(VERIFIED))
        return writes


@pytest.mark.parametrize("fastest_speedup, kept", [(1.5, "tuned"), (0.5, "first")])
def test_it_keeps_the_launch_the_tune_call_found_fastest(captured, fastest_speedup, kept):
    drive = Driver()
    writes = drive.to_first_profile(captured)
    first = next(c.arguments["content"] for c in writes if c.arguments["path"] == "model_new.py")
    (tune,) = drive.answer(summarise_profile(timed(1.0)))
    assert tune.name == "tune"
    variants = tune.arguments["variants"]
    assert len(variants) >= 2 and len({v["name"] for v in variants}) == len(variants)
    assert all(
        set(v["files"]) == {"model_new.py"} and v["files"]["model_new.py"] != first
        for v in variants
    )

    # the tune tool's reply: the last variant fastest, the others slower
    ranked = [Variant(variants[-1]["name"], {}, verify=VERIFIED, profile=timed(fastest_speedup))]
    ranked += [Variant(v["name"], {}, verify=VERIFIED, profile=timed(0.4)) for v in variants[:-1]]
    calls = drive.answer(summarise_tune(ranked))
    while calls[0].name == "tune":  # the kernel's other parameters: none beat it
        calls = drive.answer(
            "tune: FAILED: none of 1 variants verified; the workspace is unchanged"
        )
    (write,) = calls
    expected = variants[-1]["files"]["model_new.py"] if kept == "tuned" else first
    assert write.arguments == {"path": "model_new.py", "content": expected}
    (finish,) = drive.answer("wrote")
    assert finish.name == "finish"
    assert (variants[-1]["name"].split(" ", 1)[1] in finish.arguments["summary"]) == (
        kept == "tuned"
    )


@pytest.mark.parametrize("first_speedup, tuned", [(0.1, False), (NOT_WORTH_TUNING, True)])
def test_a_kernel_far_behind_eager_is_not_tuned(captured, first_speedup, tuned):
    """Under a quarter of eager's speed the algorithm loses, not the launch: the run finishes on
    its verified kernel rather than spend the GPU lock on variants. Known-bad beside it: at the
    bound itself it tunes."""
    drive = Driver()
    drive.to_first_profile(captured)
    (call,) = drive.answer(summarise_profile(timed(first_speedup)))
    assert (call.name == "tune") == tuned
    if not tuned:
        assert call.name == "finish" and "Not tuned" in call.arguments["summary"]


BARE_MATMUL = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

def get_inputs():
    return [torch.rand(32, 16), torch.rand(16, 24)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "after, untuned",
    [
        ("", "no launch parameter"),
        (" * 2.0", "a pointwise launch is too small a share"),
        (".softmax(dim=1)", None),
    ],
)
def test_launches_beside_a_library_call_are_tuned_only_where_they_matter(after, untuned):
    """A CUDA matmul alone is one cuBLAS call: its launch parameters change nothing; its
    pointwise epilogue's launch moves the program by noise (worth_tuning): the run finishes on
    its first profile rather than time such variants. Known-bad beside them: a softmax after
    the matmul has its row kernel tuned, and only that one."""
    source = BARE_MATMUL.replace("torch.matmul(a, b)", f"torch.matmul(a, b){after}")
    captured = graph.capture(source, "cpu", LOOSE)
    captured["device"] = "cuda"  # the plan the GPU target makes; nothing here runs on it
    drive = Driver()
    writes = drive.to_first_profile(format_graph(captured))
    assert any("cublasSgemm" in c.arguments["content"] for c in writes)
    (call,) = drive.answer(summarise_profile(timed(1.0)))
    if untuned:
        assert call.name == "finish" and untuned in call.arguments["summary"]
    else:
        assert call.name == "tune"
        kernels = {v["name"].split(" ", 1)[0] for v in call.arguments["variants"]}
        assert kernels == {"k1_softmax"}  # the row kernel; k0, the GEMM, is left as it is


def failed_verify(error: str | None = None) -> str:
    """The verify tool's reply to kernels that miss the tolerance (or, with `error`, to a
    judgement the harness could not finish)."""
    verdict = {"ok": False, "max_abs_err": 3.1, "max_rel_err": 0.4}
    if error:
        verdict |= {"error": error, "failed_by": "infrastructure"}
    return summarise_verify(verdict)


@pytest.mark.parametrize("second_verify", ["passes", "fails"])
def test_kernels_that_fail_with_tf32_are_verified_again_without_it(second_verify):
    """A sum over many TF32 products can miss the loose tolerance where the exact result is near
    zero: the run rewrites model_new.py with every cuBLAS call's tf32 off and verifies again;
    it goes on from that launch when it passes and ends as the compiler's bug when it fails."""
    source = BARE_MATMUL.replace("torch.matmul(a, b)", "torch.matmul(a, b).sum(dim=1)")
    captured = graph.capture(source, "cpu", LOOSE)
    captured["device"] = "cuda"
    drive = Driver()
    drive.answer()
    writes = drive.answer(format_graph(captured))
    first = next(c.arguments["content"] for c in writes if c.arguments["path"] == "model_new.py")
    assert "'tf32': 1" in first
    drive.answer(*["wrote"] * len(writes))
    drive.answer(summarise_compile({"ok": True, "log": ""}))
    write, verify = drive.answer(failed_verify())
    assert write.name == "write_file" and verify.name == "verify"
    exact = write.arguments["content"]
    assert "'tf32': 0" in exact and "'tf32': 1" not in exact
    if second_verify == "fails":
        (finish,) = drive.answer("wrote", failed_verify())
        assert finish.name == "finish" and "did not verify" in finish.arguments["summary"]
        return
    (profile,) = drive.answer("wrote", summarise_verify(VERIFIED))
    assert profile.name == "profile"
    (call,) = drive.answer(summarise_profile(timed(1.0)))
    variants = call.arguments["variants"] if call.name == "tune" else []
    assert all("'tf32': 0" in v["files"]["model_new.py"] for v in variants)


@pytest.mark.parametrize("matmul", [False, True])
def test_no_second_verify_without_tf32_or_for_the_harness_failing(captured, matmul):
    """Known-bad beside the retry: kernels with no TF32 call (a pointwise chain), or a verify the
    harness could not finish, end the run at once with the first verify's cause."""
    drive = Driver()
    graph_text = captured
    if matmul:
        source = BARE_MATMUL.replace("torch.matmul(a, b)", "torch.matmul(a, b).sum(dim=1)")
        matmul_graph = graph.capture(source, "cpu", LOOSE)
        matmul_graph["device"] = "cuda"
        graph_text = format_graph(matmul_graph)
    drive.answer()
    writes = drive.answer(graph_text)
    drive.answer(*["wrote"] * len(writes))
    drive.answer(summarise_compile({"ok": True, "log": ""}))
    reply = failed_verify(error="CUDA out of memory" if matmul else None)
    (finish,) = drive.answer(reply)
    assert finish.name == "finish"
    expected = "could not judge" if matmul else "did not verify"
    assert expected in finish.arguments["summary"]


@pytest.mark.parametrize("light, tuned", [(AT_SPEED_OF_LIGHT, False), (0.85, True)])
def test_a_kernel_at_the_speed_of_light_is_not_tuned(captured, light, tuned):
    """At 90% of the speed-of-light floor a launch has little to win: the run finishes on its
    first profile. Known-bad beside it: at 85% it tunes."""
    drive = Driver()
    drive.to_first_profile(captured)
    (call,) = drive.answer(summarise_profile(timed(1.0, light)))
    assert (call.name == "tune") == tuned
    if not tuned:
        assert "Not tuned: at 90% of the speed of light" in call.arguments["summary"]


ROW_SUM = (
    BARE_MATMUL.replace("def forward(self, a, b):", "def forward(self, a):")
    .replace("torch.matmul(a, b)", "torch.sum(a, dim=1)")
    .replace("[torch.rand(32, 16), torch.rand(16, 24)]", "[torch.rand(32, 64)]")
)


@pytest.mark.parametrize(
    "gain, more", [(LAUNCH_MATTERS - 0.01, False), (LAUNCH_MATTERS + 0.01, True)]
)
def test_a_kernels_other_parameters_are_tuned_only_when_its_first_ones_mattered(gain, more):
    """A CUDA row reduction's launch is tuned in two calls (threads with warp_per_row, then
    cache with unroll): the second only when the first beat the first profile by LAUNCH_MATTERS;
    below it, the run keeps what it has. Known-bad beside it: just above, it goes on."""
    captured = graph.capture(ROW_SUM, "cpu", LOOSE)
    captured["device"] = "cuda"
    drive = Driver()
    drive.to_first_profile(format_graph(captured))
    (tune,) = drive.answer(summarise_profile(timed(1.0)))
    assert tune.name == "tune" and "warp_per_row" in tune.arguments["variants"][0]["name"]
    variants = tune.arguments["variants"]
    ranked = [Variant(variants[0]["name"], {}, verify=VERIFIED, profile=timed(gain))]
    ranked += [Variant(v["name"], {}, verify=VERIFIED, profile=timed(0.9)) for v in variants[1:]]
    (call,) = drive.answer(summarise_tune(ranked))
    assert (call.name == "tune") == more
    if more:
        assert "unroll" in call.arguments["variants"][0]["name"]


SCAN_THEN_SUM = ROW_SUM.replace("torch.sum(a, dim=1)", "torch.sum(torch.cumsum(a, dim=1), dim=1)")


@pytest.mark.parametrize(
    "gain, next_kernel", [(LAUNCH_MATTERS - 0.01, False), (LAUNCH_MATTERS + 0.01, True)]
)
def test_later_kernels_are_tuned_only_when_an_earlier_ones_launches_mattered(gain, next_kernel):
    """Two CUDA kernels, a scan (one tune call: threads) then a row sum: the sum is tuned only
    when the scan's call beat the first profile by LAUNCH_MATTERS; below it the run keeps what
    it has and writes it back. Known-bad beside it: just above, the sum's call comes."""
    captured = graph.capture(SCAN_THEN_SUM, "cpu", LOOSE)
    captured["device"] = "cuda"
    drive = Driver()
    drive.to_first_profile(format_graph(captured))
    (tune,) = drive.answer(summarise_profile(timed(1.0)))
    variants = tune.arguments["variants"]
    assert tune.name == "tune" and variants[0]["name"].startswith("k0_")
    ranked = [Variant(variants[0]["name"], {}, verify=VERIFIED, profile=timed(gain))]
    ranked += [Variant(v["name"], {}, verify=VERIFIED, profile=timed(0.9)) for v in variants[1:]]
    (call,) = drive.answer(summarise_tune(ranked))
    assert (call.name == "tune") == next_kernel
    if next_kernel:
        assert call.arguments["variants"][0]["name"].startswith("k1_")
    else:
        assert call.name == "write_file" and call.arguments["path"] == "model_new.py"
