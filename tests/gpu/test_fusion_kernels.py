"""The cuda target on a real GPU (skipped without one): every pattern's candidate compiles and
verifies in the harness, so do argmax, the KernelBench scans, pooling and cross-entropy at larger
sizes (rows past a block, many lines), a GEMM and cuDNN's convolutions verify under the strict
fp32 protocol with tf32 = 0 and in each of their two layouts, and one candidate profiles."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent" / "fusion"))
from fusion_cases import (  # noqa: E402
    ALL,
    arg_reductions,
    conv_epilogues,
    convolutions,
    cross_entropy,
    kernelbench_scans,
    linear_bias_relu,
    pooling,
    scaled_softmax,
)

from agent.fusion import compile_graph

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from gpu_workers.harness.judge.protocol import FP32_STRICT, LOOSE  # noqa: E402
from gpu_workers.harness.session import Session  # noqa: E402
from tests.conftest import record_timing_budgets  # noqa: E402
from tests.gpu import prebuild  # noqa: E402

STRICT_GEMM = linear_bias_relu(rows=256, k=512, n=384)
STRICT_CONVOLUTIONS = convolutions()
LARGER = [
    arg_reductions(a=8, c=1024, w=2047),
    kernelbench_scans(a=4, c=1024, w=33, long=32768),
    pooling(length=65536),
    cross_entropy(rows=4096, classes=4096),
]
PROFILED = scaled_softmax(rows=4096, cols=4096)
# The verify tests judge outputs, not times: a short timing budget keeps their steps' share of
# the GPU lock small (the timing rules are tested on the attacks and the profiled softmax).
OUTPUTS_ONLY = dataclasses.replace(LOOSE, timing_budget_s=0.25)


@pytest.fixture(scope="module", autouse=True)
def prebuilt(tmp_path_factory):
    """Every candidate below built at once, by one worker (tests/gpu/prebuild.py), so the
    sessions find their extensions built instead of compiling one after another."""
    jobs = [(c, {}) for c in ALL + LARGER]
    jobs += [(STRICT_GEMM, {"allow_tf32": False}), (PROFILED, {})]
    jobs += [(STRICT_CONVOLUTIONS, {"allow_tf32": False})]
    builds = [
        prebuild.Job(str(index), case.problem, compile_graph(case.ir, "cuda", **options).files)
        for index, (case, options) in enumerate(jobs)
    ]
    prebuild.build_once("fusion", builds, tmp_path_factory.mktemp("prebuild"))


def _session(case, tmp_path, protocol=OUTPUTS_ONLY, **options):
    program = compile_graph(case.ir, "cuda", **options)
    assert program.unsupported == []
    root = tmp_path / "s"
    session = Session(case.problem, device="cuda", protocol=protocol, root=root, candidates=1)
    for path, text in program.files.items():
        session.write_file(path, text)
    return session


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name) for c in ALL]
    + [pytest.param(c, id=f"{c.name}-larger") for c in LARGER],
)
def test_cuda_candidate_verifies(case, tmp_path):
    with _session(case, tmp_path) as session:
        compiled = session.compile()
        assert compiled["ok"], compiled["log"]
        verdict = session.verify()
        assert verdict["ok"], verdict


def test_gemm_under_the_strict_protocol(tmp_path):
    strict = dataclasses.replace(FP32_STRICT, timing_budget_s=OUTPUTS_ONLY.timing_budget_s)
    with _session(STRICT_GEMM, tmp_path, strict, allow_tf32=False) as session:
        verdict = session.verify()
        assert verdict["ok"], verdict


def test_convolutions_run_through_cudnn_under_the_strict_protocol(tmp_path):
    """The host's build links the cuDNN torch's wheels bring, so every convolution of the case
    (1-d to 3-d, forward and transposed, grouped) is cuDNN's, here with FMA math alone (tf32 = 0;
    the loose protocol's TF32 runs in test_cuda_candidate_verifies)."""
    from gpu_workers.harness.build import compile as build

    assert build.find_cudnn(build._cudnn_candidates("/usr/local/cuda")) is not None
    strict = dataclasses.replace(FP32_STRICT, timing_budget_s=OUTPUTS_ONLY.timing_budget_s)
    with _session(STRICT_CONVOLUTIONS, tmp_path, strict, allow_tf32=False) as session:
        verdict = session.verify()
        assert verdict["ok"], verdict


@pytest.mark.parametrize("case", [convolutions(), conv_epilogues()], ids=lambda c: c.name)
@pytest.mark.parametrize("layout", ["nchw", "nhwc", "tiled"])
def test_convolutions_verify_in_each_cudnn_layout(case, layout, tmp_path):
    """Each of the ways the first call times against the others (cudnn_conv.py), forced through
    the `layout` launch parameter, verifies every convolution of the cases: NHWC's transposes
    (x, w, then y back with the bias, through the epilogue where there is one) as much as NCHW's
    plain call and its epilogue kernel, and the tiled direct kernel (conv_tiled.py: every one
    of these has a short reduction; padding, strides, dilation, groups, transposed gathers,
    channels past one tile). The extension is the prebuilt one: only model_new.py's LAUNCH
    differs."""
    from agent.fusion.cuda.cudnn_conv import LAYOUTS

    program = compile_graph(case.ir, "cuda")
    forced = {k: {"layout": LAYOUTS[layout]} for k, v in program.launch.items() if "layout" in v}
    assert len(forced) == {"convolutions": 6, "conv_epilogues": 2}[case.name]
    with _session(case, tmp_path) as session:
        session.write_file("model_new.py", program.model_new(forced))
        verdict = session.verify()
        assert verdict["ok"], verdict


def test_softmax_profiles(tmp_path):
    with _session(PROFILED, tmp_path, LOOSE) as session:
        verdict = session.evaluate()
        assert verdict["verify"]["ok"], verdict["verify"]
        assert verdict["profile"]["ok"], verdict["profile"]
        print({k: verdict["profile"][k] for k in ("candidate_ms", "eager_ms", "compile_ms")})


def test_a_tune_call_screens_its_variants_and_keeps_one_measured_in_full(tmp_path, monkeypatch):
    """The tune step on a GPU: five launch variants of the profiled softmax (one extension: only
    model_new.py's LAUNCH differs) timed on the session's screening (SCREENING_BUDGET_S), then
    the fastest measured in full under the protocol's budget before it is kept."""
    from agent.tune import Variant, tune
    from gpu_workers.harness import session as session_mod

    budgets = record_timing_budgets(monkeypatch)
    program = compile_graph(PROFILED.ir, "cuda")
    [kernel] = program.launch
    with _session(PROFILED, tmp_path, LOOSE) as session:
        assert session.compile()["ok"]
        variants = [
            Variant(f"threads={t}", {"model_new.py": program.model_new({kernel: {"threads": t}})})
            for t in (64, 128, 256, 512, 1024)
        ]
        ranked = tune(session, variants)
    for variant in ranked:
        phases = (variant.verify or {}).get("phases_s") or {}
        print(variant.name, variant.screened, (variant.profile or {}).get("candidate_ms"), phases)
    assert all(v.verify.get("ok") for v in ranked), [v.why() for v in ranked]
    screened = [b for b in budgets if b == session_mod.SCREENING_BUDGET_S]
    assert len(screened) >= len(variants) and None in budgets[len(screened) :], budgets
    assert ranked[0].timed and not ranked[0].screened, ranked[0].profile
