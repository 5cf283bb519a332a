"""Profiles on the cpu target: the same structure as cuda, with a host timer.

The live profiles here assert nothing a busy host can move (a time only grows there, and a
profile held for the host's drift is the infrastructure's verdict). The timing decisions (the
judge's clock against the claimed times, drift) are tested on given batches with a busy 2-core
host's stalls; their live forms are tests/gpu's, where the timer is the device's."""

import dataclasses
import json
import threading
import time
from contextlib import contextmanager

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.judge import compiler_seed, failure, gpu_lock, roofline, runner_process
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge import profile as profile_mod
from gpu_workers.harness.judge.clock_record import CLOCK_RECORD_ENV
from gpu_workers.harness.judge.judge import Batches
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.judge.runner_process import RunnerFailed
from gpu_workers.harness.judge.shared_buffers import DeviceMemoryExhausted
from gpu_workers.harness.judge.source_gate import Violation
from gpu_workers.harness.session import MEASUREMENT_ATTEMPTS
from tests.conftest import FIXTURES, problem_source
from tests.gpu_workers.harness.evaluation import codes, evaluate, profile_past_the_gate


def test_a_correct_kernel_gets_speedups_and_a_speed_of_light_fraction(tmp_path, monkeypatch):
    monkeypatch.setenv(CLOCK_RECORD_ENV, str(tmp_path / "records" / "clock.jsonl"))
    verdict = evaluate("relu_scale", "good_relu_scale")
    profile = verdict["profile"]
    # held for drift (eager slowed beside it in every attempt) is the host's verdict, blamed on
    # no kernel; any violation of the candidate's still fails this
    assert profile["ok"] or profile["failed_by"] == failure.INFRASTRUCTURE, profile["violations"]
    assert profile["candidate_ms"] > 0 and profile["eager_ms"] > 0 and profile["compile_ms"] > 0
    assert profile["speedup_vs_compile"] == profile["compile_ms"] / profile["candidate_ms"]
    assert 0 < profile["sol_fraction"] <= 1 / 0.8
    assert profile["bytes_moved"] == 2 * 256 * 1024 * 4
    assert verdict["environment"]["torch"] and verdict["environment"]["device"] == "cpu"
    _each_measurement_recorded_decides_the_same_again(tmp_path / "records" / "clock.jsonl")


def _each_measurement_recorded_decides_the_same_again(path):
    """Each measurement's batches were recorded (clock_record) faithfully enough that the clock
    check decided again on the record gives the judge's own figures: what a bound is later
    decided on (tests/fixtures/timing/)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records, "no measurement recorded"
    for record in records:
        assert record["device"] == "cpu" and len(record["sources"]) == 12
        assert "test_a_correct_kernel_gets_speedups" in record["context"]
        again = profile_mod.clock_check(
            _replayed(record["candidate_batches"]), _replayed(record["eager_batches"]), "cpu"
        )
        assert dataclasses.asdict(again) == pytest.approx(record["clock"])


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


def test_baselines_asked_for_by_two_at_once_are_measured_once(tmp_path, monkeypatch):
    """Runs sharing a machine ask for one problem's baselines together: the one that waited for
    the GPU lock finds them stored by the other. tests/gpu's workers measured relu_scale's
    twice: the first stored them after letting the lock go, and the second, a process waiting
    on the lock, woke in between."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELARENA_CACHE", str(cache))
    problem = tmp_path / "problem" / "model.py"
    problem.parent.mkdir()
    problem.write_text(problem_source("relu_scale"))
    protocol = dataclasses.replace(LOOSE, compile_modes=(), timing_budget_s=0.1)
    arrived, stored_when_let_go, real_hold = threading.Semaphore(0), [], gpu_lock.hold

    @contextmanager
    def observed_hold(device, what="", quiet=False):
        arrived.release()
        with real_hold(device, what, quiet) as waited:
            yield waited
            # what a process waiting on the lock would find the moment it is let go
            stored_when_let_go.append(bool(list((cache / "baselines").rglob("*.json"))))

    monkeypatch.setattr(gpu_lock, "hold", observed_hold)
    results = []

    def ask(index: int) -> None:
        workdir = tmp_path / f"io{index}"
        workdir.mkdir()
        results.append(profile_mod.baselines(problem, "cpu", protocol, workdir))

    askers = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    # the machine's compiler seed, a build (which waits for a timing), made before: as a worker
    # warms up, not behind the hold this process takes below
    compiler_seed.ensure("cpu")
    with real_hold("cpu"):  # both reach the lock before either measures
        for asker in askers:
            asker.start()
        for _ in askers:
            assert arrived.acquire(timeout=300)
    for asker in askers:
        asker.join(timeout=300)
    assert sorted(r["cached"] for r in results) == [False, True], results
    assert results[0]["eager_ms"] == results[1]["eager_ms"]
    # known-bad (stored after the lock is let go): the measuring one's entry here is False
    assert stored_when_let_go == [True, True]


def test_baselines_the_judge_has_no_device_memory_for_are_the_machines_failure(
    tmp_path, monkeypatch
):
    """Runs sharing a GPU hold its memory too: a judge that cannot allocate a set's buffers
    reports the machine's failure, never the problem's (known-bad: the allocation's error
    escapes `measure_baselines` as a crash of the caller)."""
    problem = tmp_path / "problem" / "model.py"
    problem.parent.mkdir()
    problem.write_text(problem_source("relu_scale"))

    def full(nbytes, device):
        raise DeviceMemoryExhausted("cuMemAlloc failed: out of memory (2)")

    monkeypatch.setattr(judge_mod, "allocate", full)
    protocol = dataclasses.replace(LOOSE, compile_modes=())
    with pytest.raises(profile_mod.BaselinesFailed) as failed:
        profile_mod.measure_baselines(problem, "cpu", protocol, tmp_path)
    assert failed.value.failed_by == failure.INFRASTRUCTURE
    assert "ran out of device memory" in str(failed.value)


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
    assert "cheapest call 15.000 ms" in found[0].detail
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


def _gpu_calls(claimed_ms: float, hidden_ms: float, jitter: list[float]) -> Batches:
    """One call per command, as on a GPU host: a 1.5 ms round trip with a few microseconds of
    jitter."""
    batches = Batches()
    for noise in jitter:
        batches.add([claimed_ms], claimed_ms + 1.5 + hidden_ms + noise)
    return batches


_GPU_JITTER = [0.004, 0.011, 0.002, 0.030, 0.007, 0.001, 0.015, 0.006, 0.009, 0.003, 0.021, 0.005]


def test_a_kernel_on_a_side_stream_shows_against_a_gpu_round_trip():
    """A 0.13 ms kernel on a stream the events do not see, its call claiming 0.01 ms: the round
    trip is ten times the kernel, and its steadiness is what exposes it."""
    eager = _gpu_calls(0.26, 0.0, _GPU_JITTER)
    hider = _gpu_calls(0.01, 0.13, list(reversed(_GPU_JITTER)))
    check = profile_mod.clock_check(hider, eager, "cuda")
    assert not check.agrees and [v.code for v in check.violations()] == ["timing_inconsistent"]
    # known-good beside it: the honest kernel, same round trip
    assert profile_mod.clock_check(
        _gpu_calls(0.13, 0.0, _GPU_JITTER[::2] * 2), eager, "cuda"
    ).agrees


# ---- recorded: the judge's batches of live cpu profiles on the busy 2-core host ----
_RECORDED = json.loads((FIXTURES / "timing" / "relu_scale_cpu_busy_host.json").read_text())


def _replayed(side: dict, hidden_ms_per_call: float = 0.0) -> Batches:
    """A recorded side's batches, with more hidden work per call added to its walls only (what
    the judge's clock sees and the claims do not)."""
    times, walls = side["times_ms"], side["walls_ms"]
    per_batch = len(times) // len(walls)
    batches = Batches()
    for i, wall in enumerate(walls):
        batches.add(
            times[i * per_batch : (i + 1) * per_batch], wall + hidden_ms_per_call * per_batch
        )
    return batches


def _recorded(candidate: str, hidden_ms_per_call: float = 0.0) -> list[tuple[Batches, Batches]]:
    """(candidate, eager) per measurement attempt, with more hidden work per call added to the
    candidate's walls only."""
    return [
        (
            _replayed(attempt["candidate_batches"], hidden_ms_per_call),
            _replayed(attempt["eager_batches"]),
        )
        for attempt in _RECORDED["attempts"]
        if attempt["candidate"] == candidate
    ]


def test_an_honest_kernels_recorded_batches_on_a_busy_host_agree_with_the_judges_clock():
    honest = _recorded("honest")
    assert len(honest) == 4
    for candidate, eager in honest:
        assert profile_mod.clock_violations(candidate, eager, "cpu") == []


def test_the_live_forger_is_caught_in_every_recorded_attempt():
    """attack_forges_times hides 50 ms a call (test_attacks.py): the recorded 5 ms forger's
    batches with 45 ms more a call on the judge's clock are caught in every attempt."""
    forger = _recorded("forger_5ms", hidden_ms_per_call=45.0)
    assert len(forger) == 5
    for candidate, eager in forger:
        found = profile_mod.clock_violations(candidate, eager, "cpu")
        assert [v.code for v in found] == ["timing_inconsistent"]


@pytest.mark.xfail(
    strict=True,
    reason="a known gap of the cpu clock check: a forger hiding 5 ms a call (15 ms a batch) was "
    "believed in 2 of 5 recorded attempts on the busy host (floor gaps 5.3 and 8.4 ms under a "
    "bound of about 10 ms: the cpu target allows 40% of a quiet batch's cost, and an honest "
    "candidate's batches ran up to 8.7 ms under eager's). Strict: passing means the gap closed",
)
def test_a_forger_hiding_5_ms_a_call_is_caught_in_every_recorded_attempt():
    caught = [
        bool(profile_mod.clock_violations(candidate, eager, "cpu"))
        for candidate, eager in _recorded("forger_5ms")
    ]
    assert all(caught), caught


# ---- recorded: tests/gpu's measurements on an H200 whose cores six workers kept busy ----
_GPU_RECORDED = json.loads((FIXTURES / "timing" / "h200_tests_gpu_six_workers.json").read_text())[
    "attempts"
]


def _gpu_attempts(kind: str) -> dict[str, list[profile_mod.ClockCheck]]:
    """Each recorded test's measurement attempts of one kind, decided again, in order."""
    tests: dict[str, list[profile_mod.ClockCheck]] = {}
    for attempt in _GPU_RECORDED:
        if attempt["kind"] == kind:
            check = profile_mod.clock_check(
                _replayed(attempt["candidate_batches"]),
                _replayed(attempt["eager_batches"]),
                "cuda",
            )
            tests.setdefault(attempt["test"], []).append(check)
    return tests


def test_every_recorded_attempt_of_a_kernel_hiding_work_is_caught_on_a_busy_gpu_host():
    """Forged event times, flushes skipped, kernels left on side streams (0.13 ms up to 2 ms a
    call): caught in every attempt, so never in the attempt a result is taken from."""
    hiders = _gpu_attempts("hides_work")
    assert len(hiders) == 4 and sum(map(len, hiders.values())) == 14
    for test, checks in hiders.items():
        assert not any(check.agrees for check in checks), test
    # known-bad: a floor of two deviations believed the side-stream kernel's fifth attempt
    side_stream = hiders[
        "tests/gpu/test_cuda_harness.py::test_work_on_another_stream_shows_as_a_wall_time_gap"
    ]
    fifth = side_stream[4]
    assert fifth.gap_ms <= fifth.bound_ms
    assert fifth.floor_gap_ms <= fifth.fixed_ms + 2 * fifth.noise_ms


def test_every_recorded_honest_measurement_agrees_within_its_attempts_on_a_busy_gpu_host():
    """Honest kernels, each measured in up to MEASUREMENT_ATTEMPTS fresh processes as the
    session does: one attempt whose clock agrees is what a result is taken from."""
    honest = _gpu_attempts("honest_timing")
    assert len(honest) == 17
    for test, checks in honest.items():
        assert any(c.agrees for c in checks[:MEASUREMENT_ATTEMPTS]), (test, checks)
    # known-bad: the cheapest calls held to the bounds' fixed part (the rule before these
    # records) fail every attempt of row_sum, the honest kernel tests/gpu failed on
    row_sum = honest[
        "tests/gpu/test_cuda_harness.py::test_correct_kernels_verify_and_profile"
        "[row_sum-good_row_sum]"
    ]
    assert len(row_sum) == 3
    assert all(c.floor_gap_ms > c.fixed_ms for c in row_sum), row_sum


# ---- drift: eager beside the candidate against eager alone, on a busy host ----
# Three eager calls of 0.6 ms per batch, on a host whose stalls land on some calls.


def _eager(stalls: list[float], slowdown: float = 1.0) -> Batches:
    batches = Batches()
    for i in range(0, len(stalls), 3):
        times = [0.6 * slowdown + stall for stall in stalls[i : i + 3]]
        batches.add(times, sum(times) + 9.0)
    return batches


_QUIET = [0.0, 0.01, 0.0, 0.02, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.02, 0.0]
# a busy host: most calls stalled by another process, a few quiet ones between
_BUSY = [1.2, 0.0, 2.5, 0.9, 1.8, 0.0, 3.1, 1.1, 0.7, 2.2, 0.0, 1.4]


def _measurement(beside: Batches, alone: Batches, violations=()) -> profile_mod.Measurement:
    candidate = _eager(_BUSY)  # the candidate's own claims: whatever they are, believed here
    return profile_mod.Measurement(
        candidate.summary(), beside.summary(), alone.summary(), list(violations)
    )


@pytest.fixture
def cpu_peaks(monkeypatch):
    """A floor far under any time here (the host's real peaks are measured in a sandbox)."""
    monkeypatch.setattr(
        roofline, "peaks", lambda device, measure_again=False: roofline.Peaks(device, 1e3, 1e3, 1e3)
    )


_BASE = {"eager_ms": 0.6, "compile_ms": 0.5, "flops": 1, "bytes_moved": 1, "cached": True}


def test_a_busy_hosts_stalls_beside_the_candidate_are_no_drift(cpu_peaks):
    measured = _measurement(_eager(_BUSY), _eager(_QUIET))
    assert measured.drift() == pytest.approx(1.0)
    assert not measured.disturbed(LOOSE)
    assert profile_mod.result(_BASE, measured, "cpu", LOOSE).ok
    # known-bad: the medians the stalls moved would have held it for drift
    beside, alone = _eager(_BUSY), _eager(_QUIET)
    assert beside.median_ms / alone.median_ms > LOOSE.drift_limit


def test_eager_slowed_in_every_call_beside_the_candidate_is_drift_held_on_the_host(cpu_peaks):
    """Threat 11: something that slows every interleaved call moves the fastest one too."""
    measured = _measurement(_eager(_BUSY, slowdown=2.0), _eager(_QUIET))
    assert measured.drift() == pytest.approx(2.0, rel=0.05)
    assert measured.disturbed(LOOSE)  # measured again in a fresh candidate process
    held = profile_mod.result(_BASE, measured, "cpu", LOOSE)
    assert not held.ok and [v.code for v in held.violations] == ["timing_drift"]
    assert held.failed_by == failure.INFRASTRUCTURE  # held for review, no kernel blamed
    assert held.candidate_ms > 0 and held.eager_drift == pytest.approx(measured.drift())


def test_drift_beside_a_forged_clock_is_still_the_candidates_failure(cpu_peaks):
    forged = Violation("timing_inconsistent", "each batch took longer on the judge's clock")
    measured = _measurement(_eager(_BUSY, slowdown=2.0), _eager(_QUIET), [forged])
    assert measured.disturbed(LOOSE)
    verdict = profile_mod.result(_BASE, measured, "cpu", LOOSE)
    assert {v.code for v in verdict.violations} == {"timing_inconsistent", "timing_drift"}
    assert verdict.failed_by == failure.CANDIDATE


def _rounds(overheads: list[float], claimed: float = 0.005) -> Batches:
    """One call per round claiming `claimed` ms, each seen by the judge's clock with its
    overhead (round trip, copies) on top."""
    batches = Batches()
    for overhead in overheads:
        batches.add([claimed], claimed + overhead)
    return batches


def test_timing_goes_on_until_the_rounds_decide_the_clock_check():
    """A forger's claimed times are as steady as it likes, so they cannot be what ends timing:
    the judge's clock must have been measured well enough to tell a hidden kernel."""
    quiet = [1.0 + 0.001 * (i % 5) for i in range(36)]
    assert profile_mod._clock_decided(_rounds(quiet), _rounds(quiet), "cuda")
    # known-bad: three dozen rounds of a busy host's noise, whose median bound would pass a
    # hidden 0.13 ms kernel (the side-stream attack was believed so on an H100)
    noisy = [1.0 + 0.3 * ((i * 37) % 11) / 10 for i in range(36)]
    check = profile_mod.clock_check(_rounds(noisy), _rounds(quiet), "cuda")
    assert check.bound_ms > 0.13
    assert not profile_mod._clock_decided(_rounds(noisy), _rounds(quiet), "cuda")


def test_peaks_measured_too_low_are_measured_again_before_a_kernel_is_held(tmp_path, monkeypatch):
    """A host busy while its peaks were measured keeps them too low (9 GB/s cached where a quiet
    measurement gave 19), and every honest kernel after looked faster than the device: the
    peaks are measured again, the higher kept, before a time is held as impossible."""
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path))
    path = roofline.peaks_file("cpu")
    low = {"device": "cpu", "bandwidth_gbs": 0.01, "fp32_tflops": 1e-6, "tensor_tflops": 1e-6}
    settings.publish_json(path, low)
    honest = _measurement(_eager(_QUIET), _eager(_QUIET))
    base = {**_BASE, "bytes_moved": 10**6}
    # known-bad: against the peaks as stored, the honest time is under the floor
    stored_floor = roofline.floor_ms(0, 10**6, roofline.Peaks(**low), LOOSE) * LOOSE.sol_slack
    assert honest.candidate["median_ms"] < stored_floor
    result = profile_mod.result(base, honest, "cpu", LOOSE)
    assert result.ok, result.violations
    assert json.loads(path.read_text())["bandwidth_gbs"] > 1.0  # the higher one kept
    # a time that no measurement of this device explains is still held
    beyond = profile_mod.result({**_BASE, "bytes_moved": 10**13}, honest, "cpu", LOOSE)
    assert "impossible_speed" in [v.code for v in beyond.violations]


def test_peaks_measured_alone_lately_stand_on_a_gpu(tmp_path, monkeypatch):
    """On a GPU, peaks measured alone (under the lock) within the hour are not measured again
    for each kernel that seems faster than the device: tests/gpu measured them seven times in
    one run, 10 s under the lock each (known-bad: an hour later they are measured again)."""
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path))
    monkeypatch.setitem(roofline.ALONE_STANDS_S, "cpu", roofline.ALONE_STANDS_S["cuda"])
    path = roofline.peaks_file("cpu")
    low = {"device": "cpu", "bandwidth_gbs": 0.01, "fp32_tflops": 1e-6, "tensor_tflops": 1e-6}
    lately = {**low, "alone_at": time.time() - 60}
    settings.publish_json(path, lately)
    assert roofline.peaks("cpu", measure_again=True) == roofline.Peaks(**low)
    assert json.loads(path.read_text()) == lately
    settings.publish_json(path, {**low, "alone_at": time.time() - 3601})
    assert roofline.peaks("cpu", measure_again=True).bandwidth_gbs > 1.0
    assert json.loads(path.read_text())["alone_at"] > time.time() - 60


def test_a_first_measurement_never_replaces_peaks_published_meanwhile(tmp_path, monkeypatch):
    """Peaks measured alone by another process while this one measured its first ones (without
    the lock) stand: the first measurement publishes only where none exists (known-bad: it
    replaced them, and tests/gpu measured alone twice, 17 s of the GPU lock)."""
    monkeypatch.setenv("KERNELARENA_CACHE", str(tmp_path))
    path = roofline.peaks_file("cpu")
    alone = {"device": "cpu", "bandwidth_gbs": 9.0, "fp32_tflops": 1.0, "tensor_tflops": 1.0}
    alone_at = {**alone, "alone_at": time.time()}
    busy = {"device": "cpu", "bandwidth_gbs": 1.0, "fp32_tflops": 0.1, "tensor_tflops": 0.1}

    def measured_while_another_published(device):
        settings.publish_json(path, alone_at)  # the other process, done first
        return busy

    monkeypatch.setattr(roofline, "_measure", measured_while_another_published)
    assert roofline.peaks("cpu") == roofline.Peaks(**alone)
    assert json.loads(path.read_text()) == alone_at


# A problem that can tell whether torch.compile's modules were imported before it was loaded.
_COMPILER_WITNESS = """
import sys
import torch
if "torch._inductor.compile_fx" not in sys.modules:
    raise RuntimeError("loaded before torch.compile's modules were imported")
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(64)]
def get_init_inputs():
    return []
"""


def test_the_baselines_runner_imports_the_compiler_before_the_lock(tmp_path):
    """torch.compile's imports (seconds of a first compile) are paid while the baselines' runner
    gets ready, outside the GPU lock, not at its first compile under it (known-bad: a reference
    runner made without `compiles` loads the problem with the compiler unimported)."""
    problem = tmp_path / "model.py"
    problem.write_text(_COMPILER_WITNESS)
    with profile_mod.ready_reference(problem, "cpu") as reference:
        runner_process.load_reference(reference, problem, "cpu", LOOSE)
    plain = runner_process.begin_reference(problem, "cpu")
    with pytest.raises(RunnerFailed, match="torch.compile's modules"):
        runner_process.load_reference(plain, problem, "cpu", LOOSE)
