"""Profiles on the cpu target: the same structure as cuda, with a host timer."""

from tests.gpu_workers.harness.evaluation import codes, evaluate, profile_past_the_gate


def test_a_correct_kernel_gets_speedups_and_a_speed_of_light_fraction():
    verdict = evaluate("relu_scale", "good_relu_scale")
    profile = verdict["profile"]
    assert profile["ok"], profile
    assert profile["candidate_ms"] > 0 and profile["eager_ms"] > 0 and profile["compile_ms"] > 0
    assert profile["speedup_vs_compile"] == profile["compile_ms"] / profile["candidate_ms"]
    assert 0 < profile["sol_fraction"] <= 1 / 0.8
    assert profile["bytes_moved"] == 2 * 256 * 1024 * 4
    assert verdict["environment"]["torch"] and verdict["environment"]["device"] == "cpu"


def test_a_time_under_the_speed_of_light_floor_is_held_as_impossible():
    """Threat 9: A @ B.sum(1) gives the right numbers with far fewer FLOPs than the op."""
    verdict = evaluate("matmul_rowsum", "bad_impossible_speed")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert not profile["ok"] and "impossible_speed" in codes(profile)
    assert profile["candidate_ms"] < profile["sol_ms"]


def test_patched_timers_do_not_reach_the_measurement():
    """Threat 6, past the static gate: the candidate's import patches every clock it can."""
    result = profile_past_the_gate("cpu", "relu_scale", "bad_patches_timers")
    assert result["candidate_ms"] > 0.001 and result["speedup_vs_eager"] < 100, result
