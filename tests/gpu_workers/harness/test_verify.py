"""Each threat in DESIGN.md (Verification) has a known-bad candidate here that must be caught,
on the cpu target, with real compiles and real sandboxed processes."""

import time

import pytest

from gpu_workers.harness import session as session_mod
from gpu_workers.harness.judge import sensitivity
from gpu_workers.harness.judge.protocol import FP32_STRICT, LOOSE, Protocol
from tests.gpu_workers.harness.evaluation import codes, evaluate


def test_a_correct_kernel_verifies_with_its_errors_reported():
    verdict = evaluate("relu_scale", "good_relu_scale", profile=False)
    assert verdict["compile"]["ok"], verdict["compile"]["log"]
    result = verdict["verify"]
    assert result["ok"], result
    assert result["trials"] == LOOSE.trials and result["violations"] == []
    assert result["max_abs_err"] < 1e-5 and result["max_rel_err"] < 1e-6


def test_a_python_number_drawn_for_each_seed_reaches_the_candidate_anew():
    """The candidate's lent inputs are reused from trial to trial; a number among them is bound
    by value, so it must be lent again when a seed draws another (it was not: a correct kernel
    was judged on the first seed's scale and failed every later trial)."""
    verdict = evaluate("relu_scale_by_input", "good_relu_scale_by_input", profile=False)
    assert verdict["verify"]["ok"], verdict["verify"]
    # known-bad: the same kernel with one number baked in, whatever it is passed
    baked = evaluate("relu_scale_by_input", "bad_relu_scale_fixed_number", profile=False)
    assert not baked["verify"]["ok"] and "mismatch" in codes(baked["verify"]), baked["verify"]


def test_a_judged_step_says_where_its_time_went():
    started = time.monotonic()
    verdict = evaluate("relu_scale", "good_relu_scale")
    spent = time.monotonic() - started
    judged = [
        "candidate ready",
        "reference ready",
        "lock wait",
        "reference start",
        "eager alone",
        "candidate load",
    ]
    phases = verdict["verify"]["phases_s"]
    assert list(phases)[: len(judged)] == judged, phases
    assert {"trials", "timing", "candidate stop", "release"} <= set(phases), phases
    # the profile shows the same step's phases and its baselines' (cached after a problem's
    # first profile, so near zero when another test measured them first)
    profile = verdict["profile"]["phases_s"]
    assert {k: profile[k] for k in phases} == phases and "baselines" in profile, profile
    assert all(s >= 0 for s in profile.values()) and sum(profile.values()) <= spent, profile
    # known-bad beside it: a candidate that fails its trials is never timed
    failed = evaluate("relu_scale", "wrong_result", profile=False)["verify"]
    assert not failed["ok"] and "timing" not in failed["phases_s"], failed


def test_a_correct_row_reduction_verifies():
    verdict = evaluate("row_sum", "good_row_sum", profile=False)
    assert verdict["verify"]["ok"], verdict["verify"]


def test_a_mean_loss_verifies_with_a_trial_on_the_probe():
    verdict = evaluate("mean_cross_entropy", "good_mean_cross_entropy", profile=False)
    assert verdict["verify"]["ok"], verdict["verify"]
    assert verdict["verify"]["trials"] == LOOSE.trials + 1


def test_a_constant_loss_fails_the_probe_trial():
    result = evaluate("mean_cross_entropy", "bad_constant_loss", profile=False)["verify"]
    assert not result["ok"] and "mismatch" in codes(result), result
    assert f"trial {LOOSE.trials}" in result["violations"][0]["detail"]  # the probe's trial


def test_a_constant_loss_passes_every_seeded_trial(monkeypatch):
    """Known-bad for the test above: without probes the constant is right on every seed."""
    monkeypatch.setattr(sensitivity, "PROBES", {})
    result = evaluate("mean_cross_entropy", "bad_constant_loss", profile=False)["verify"]
    assert result["ok"] and result["trials"] == LOOSE.trials, result


# (candidate, problem, protocol, the violation code that must be reported)
KNOWN_BAD = [
    # 1. torch doing the work: from Python, from C++ (only the runtime check sees a tensor
    #    method), and a namespace call the static gate sees.
    ("bad_torch_in_forward", "relu_scale", LOOSE, "torch_compute"),
    ("bad_torch_in_cpp", "relu_scale", LOOSE, "torch_compute"),
    ("bad_torch_in_cpp_static", "relu_scale", LOOSE, "torch_compute"),
    # 2. an output never written: the candidate runs alone, so there is no reference to read
    ("bad_uninitialised_output", "relu_scale", LOOSE, "mismatch"),
    # 3. inputs modified in place
    ("bad_mutates_input", "relu_scale", LOOSE, "input_mutated"),
    # 4. results cached across calls: fresh inputs every trial
    ("bad_caches_output", "relu_scale", LOOSE, "mismatch"),
    # 5. work left running on another thread
    ("bad_background_thread", "relu_scale", LOOSE, "async_work"),
    ("bad_cpp_thread", "relu_scale", LOOSE, "async_work"),
    # 6. patched timers and a forged verdict on stdout
    ("bad_patches_timers", "relu_scale", LOOSE, "forbidden_source"),
    # 7. precision downgrade under a strict protocol
    ("bad_low_precision", "relu_scale", FP32_STRICT, "mismatch"),
    # plainly wrong
    ("wrong_result", "relu_scale", LOOSE, "mismatch"),
]


@pytest.mark.parametrize(
    "candidate, problem, protocol, code", KNOWN_BAD, ids=[row[0] for row in KNOWN_BAD]
)
def test_known_bad_candidates_are_rejected(candidate, problem, protocol, code):
    verdict = evaluate(problem, candidate, protocol=protocol, profile=False)
    assert verdict["compile"]["ok"], verdict["compile"]["log"]
    assert not verdict["verify"]["ok"] and verdict["verify"]["failed_by"] == "candidate"
    assert code in codes(verdict["verify"]), verdict["verify"]


def test_low_precision_passes_the_loose_protocol_and_reports_its_error():
    """Tolerance belongs to the protocol: the same bf16 kernel is fine at 1e-2."""
    result = evaluate("relu_scale", "bad_low_precision", profile=False)["verify"]
    assert result["ok"], result
    assert 1e-4 < result["max_rel_err"] < 1e-2


def test_a_runtime_check_names_the_torch_ops_it_saw():
    result = evaluate("relu_scale", "bad_torch_in_cpp", profile=False)["verify"]
    detail = " ".join(v["detail"] for v in result["violations"])
    assert "aten::" in detail


def test_a_segfault_is_a_verdict():
    result = evaluate("relu_scale", "crash_segfault", profile=False)["verify"]
    assert not result["ok"] and "SIGSEGV" in result["error"]
    assert result["failed_by"] == "candidate"


def test_a_candidates_output_is_quoted_as_text_the_database_can_store():
    """Known-bad: the tail quoted as it was printed, NUL characters and all, which PostgreSQL's
    jsonb refuses (the re-grade that stores this verdict raised)."""
    result = evaluate("relu_scale", "attack_nul_in_output", profile=False)["verify"]
    assert not result["ok"] and result["failed_by"] == "candidate"
    assert "exited with status 3: KERNELARENA-ATTACK nul\ufffdin\ufffdoutput" in result["error"]
    assert "\x00" not in result["error"]


def test_a_hang_is_killed_and_is_a_verdict():
    quick = Protocol(step_timeout_s=20)
    result = evaluate("relu_scale", "crash_hang", protocol=quick, profile=False)["verify"]
    assert not result["ok"] and "timed out" in result["error"]
    assert result["failed_by"] == "candidate"  # its own hang, though a timeout


def test_a_hang_is_killed_at_the_call_bound_not_the_step_timeout(monkeypatch):
    """Known-bad, before the bound: a hung candidate was killed at the step's timeout (600 s),
    holding the GPU lock, with every run sharing the GPU behind it, all that while."""
    monkeypatch.setattr(session_mod, "CALL_FLOOR_S", 3.0)  # relu_scale's eager is microseconds
    result = evaluate("relu_scale", "crash_hang", profile=False)["verify"]
    assert not result["ok"] and result["failed_by"] == "candidate"
    assert "timed out after 3 s (a call may take 1000x eager's" in result["error"], result["error"]


@pytest.mark.parametrize(
    "problem, failed_by", [("raises_in_forward", "problem"), ("out_of_memory", "infrastructure")]
)
def test_a_reference_that_fails_is_never_the_candidates_failure(problem, failed_by):
    result = evaluate(problem, "good_relu_scale", profile=False)["verify"]
    assert not result["ok"] and result["error"].startswith("the reference failed"), result
    assert result["failed_by"] == failed_by and result["violations"] == []


def test_a_compile_error_is_reported_with_file_and_line():
    verdict = evaluate("relu_scale", "compile_error", profile=False)
    assert not verdict["compile"]["ok"]
    assert "kernels/" in verdict["compile"]["log"] and "error" in verdict["compile"]["log"]
    assert not verdict["verify"]["ok"] and verdict["verify"]["error"].startswith("compile failed")
