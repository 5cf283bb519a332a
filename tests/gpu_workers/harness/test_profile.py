"""Profiles on the cpu target: the same structure as cuda, with a host timer."""

from gpu_workers.harness import judge as judge_mod
from gpu_workers.harness import profile as profile_mod
from gpu_workers.harness.judge import Batches
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


# ---- the judge's clock against the claimed times, on a busy host ----
# Three calls of 0.6 ms claimed per batch, 9 ms of a batch's own cost, and stalls of a busy
# host (ms) that land on different rounds for each side, as they do on a shared 2-core machine.
_EAGER_STALLS = [0, 30, 2, 25, 40, 1, 35, 20]
_OTHER_STALLS = [28, 0, 33, 3, 22, 38, 1, 26]


def _batches(hidden_ms: float, stalls: list[float]) -> Batches:
    batches = Batches()
    for stall in stalls:
        batches.add([0.6, 0.6, 0.6], 1.8 + 9.0 + hidden_ms + stall)
    return batches


def test_a_forger_hiding_work_in_every_call_is_seen_through_a_busy_hosts_noise():
    eager, forger = _batches(0.0, _EAGER_STALLS), _batches(15.0, _OTHER_STALLS)
    found = profile_mod.clock_violations(forger, eager, "cpu")
    assert [v.code for v in found] == ["timing_inconsistent"]
    assert "cheapest batch 15.000 ms" in found[0].detail
    # known-bad: the paired median alone stays within 4 deviations of this noise
    gap, noise = judge_mod.unexplained_ms(forger, eager)
    assert gap < 4 * noise


def test_an_honest_candidate_on_the_same_busy_host_agrees_with_the_judges_clock():
    eager, honest = _batches(0.0, _EAGER_STALLS), _batches(0.0, _OTHER_STALLS)
    assert profile_mod.clock_violations(honest, eager, "cpu") == []
    # and one whose batches cost a little more than eager's (its outputs are lent) still agrees
    assert profile_mod.clock_violations(_batches(0.5, _OTHER_STALLS), eager, "cpu") == []


def test_a_cpu_process_whose_flushes_run_slower_is_not_taken_for_a_forger():
    """On the cpu target a batch is mostly cache flushes at the process's own memory speed: an
    honest candidate's batches ran 31% over eager's for minutes on the 2-core VM."""
    eager, slower = _batches(0.0, _EAGER_STALLS), _batches(0.31 * 9.0, _EAGER_STALLS)
    assert profile_mod.clock_violations(slower, eager, "cpu") == []
    # known-bad: on a GPU, where both batches are the device's, the same offset is a violation
    assert profile_mod.clock_violations(slower, eager, "cuda")
