"""Speed: the candidate against eager PyTorch, torch.compile and the speed-of-light floor.

Baselines (eager, torch.compile default and max-autotune) are timed in a reference runner, where
no candidate code ever runs, and cached per (problem hash, device, torch, CUDA, protocol). The
candidate is timed by the judge one call per command on inputs drawn fresh every round; the
judge's own clock around each call decides whether the candidate's claimed times are believed,
every timed call is judged like a trial, and eager calls interleaved with the candidate's only
detect drift: speedups are always against the cached baselines.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from gpu_workers.harness import settings
from gpu_workers.harness.judge import (
    clock_record,
    environment,
    failure,
    gpu_lock,
    roofline,
    runner_process,
)
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge.judge import Batches, Judge
from gpu_workers.harness.judge.phases import Phases
from gpu_workers.harness.judge.protocol import Protocol
from gpu_workers.harness.judge.runner_process import RunnerDied, RunnerError, RunnerProcess
from gpu_workers.harness.judge.source_gate import Violation
from gpu_workers.harness.runner import problem as problem_mod


@dataclass
class ProfileResult:
    ok: bool
    eager_ms: float | None = None
    compile_ms: float | None = None
    compile_max_autotune_ms: float | None = None
    candidate_ms: float | None = None
    spread: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sol_ms: float | None = None
    sol_fraction: float | None = None
    flops: int | None = None
    bytes_moved: int | None = None
    samples: int | None = None
    # Eager beside the candidate over eager alone: near 1 on a quiet machine; far above 1 means
    # the candidate (or a neighbour) slowed the process down.
    eager_drift: float | None = None
    baselines_cached: bool = False
    # the judge's clock against the claimed times (ClockCheck's fields, ms per call)
    clock: dict | None = None
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None
    # whose failure (failure.py), when not ok; None when it was not profiled at all
    failed_by: str | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["violations"] = [v.to_dict() for v in self.violations]
        return data


# ---- parent side ------------------------------------------------------------------------------


# Bumped whenever how baselines are measured changes, so no cached number outlives its method.
# 2: TF32 admitted for the baselines where the protocol admits tensor cores.
# 3: timed in batches by the judge, in a reference runner.
# 4: one call per command, the caches flushed by the judge's process, launch latency included.
# 5: the problem's FLOPs and bytes (its speed-of-light floor) counted and cached with them.
BASELINE_METHOD = 5


def _baseline_path(sha: str, device: str, protocol: Protocol) -> Path:
    name = environment.device_name(device, settings.gpu_index())
    key = re.sub(
        r"[^A-Za-z0-9.]+", "-", f"{name}-torch{torch.__version__}-cuda{torch.version.cuda}"
    )
    file = f"{sha}-{protocol.name}-m{BASELINE_METHOD}.json"
    return settings.cache_dir() / "baselines" / key / file


def baselines(
    problem_path: Path, device: str, protocol: Protocol, workdir: Path, server=None
) -> dict:
    """Eager and torch.compile times for this problem on this device, and the problem's FLOPs
    and bytes moved, measured once, under the GPU lock; the reference runner that measures
    them starts up (or is forked from `server`, a ready ForkServer) before the lock is taken."""
    path = _baseline_path(problem_mod.source_sha256(problem_path.read_text()), device, protocol)
    if cached := _cached(path):
        return cached
    reference = ready_reference(problem_path, device, server)
    # quiet: no build beside it (gpu_lock's note on threat 11)
    with reference, gpu_lock.hold(device, f"baselines of problem {path.stem[:12]}", quiet=True):
        if cached := _cached(path):  # measured by another process while this one waited
            return cached
        result = measure_baselines(problem_path, device, protocol, workdir, reference)
        # stored before the lock is let go: a process waiting for it then finds them cached
        store_baselines(problem_path, device, protocol, result)
    return {**result, "cached": False}


def ready_reference(problem_path: Path, device: str, server=None):
    """A reference runner for `measure_baselines`, up (torch.compile's modules imported, the
    device's context made) before the caller takes the GPU lock: what it pays once is no
    measurement's and holds no other process's timing back."""
    reference = None
    try:
        reference = runner_process.begin_reference(
            problem_path, device, server=server, compiles=True
        )
        reference.settle()
    except RunnerError as exc:
        if reference is not None:
            reference.close()
        message = f"measuring baselines failed: {exc}"
        raise BaselinesFailed(message, failure.of_runner_error(exc)) from None
    return reference


def adopt_baselines(problem_source: str, device: str, protocol: Protocol, stored: dict) -> bool:
    """Takes baselines measured elsewhere (a site's stored ones: the times, the problem's counts
    and the environment they were measured in) as this machine's, where none are cached yet and
    they were measured by this method on the same GPU model with the same torch and CUDA: the
    cache's own key, so they are what this machine would have cached. True when adopted."""
    path = _baseline_path(problem_mod.source_sha256(problem_source), device, protocol)
    if path.is_file() or not _measured_alike(stored.get("environment") or {}, device):
        return False
    times = {"eager_ms", *(_mode_key(mode) for mode in protocol.compile_modes)}
    counts = {"flops", "bytes_moved"}
    if any(stored.get(key) is None for key in times | counts):
        return False
    adopted = {key: stored[key] for key in times | counts}
    adopted |= {"spread": {}, "environment": stored["environment"]}
    settings.publish_json(path, adopted, replace=False)
    return True


def _measured_alike(measured_in: dict, device: str) -> bool:
    """The environment a baseline was measured in matches this machine's cache key."""
    here = environment.device_name(device, settings.gpu_index())
    there = measured_in.get("gpu") if device == "cuda" else measured_in.get("host")
    return (
        measured_in.get("method") == BASELINE_METHOD
        and measured_in.get("device") == device
        and there == here
        and measured_in.get("torch") == torch.__version__
        and measured_in.get("cuda") == torch.version.cuda
    )


def _cached(path: Path) -> dict | None:
    return {**json.loads(path.read_text()), "cached": True} if path.is_file() else None


class BaselinesFailed(problem_mod.ProblemError):
    """The reference runner failed while timing the baselines; `failed_by` says whose fault."""

    def __init__(self, message: str, failed_by: str):
        super().__init__(message)
        self.failed_by = failed_by


def measure_baselines(
    problem_path: Path,
    device: str,
    protocol: Protocol,
    workdir: Path,
    started=None,
    counts: dict | None = None,
) -> dict:
    """Measures the baselines now, in a fresh reference runner (`started`, one that began for
    them, or a new one), whatever is cached. `counts`, the problem's FLOPs and bytes from an
    earlier measurement of the same source, spare this one counting them again under the
    lock (they depend on the source and its shapes alone)."""
    phases = Phases()
    try:
        if started is None:
            started = runner_process.begin_reference(problem_path, device, compiles=True)
        with phases("load"):
            reference = runner_process.load_reference(started, problem_path, device, protocol)
        with reference:
            judge = Judge(device, protocol)
            try:
                result = time_baselines(judge, reference, phases=phases)
                # counted here, once, not in a judged step: a first count costs seconds
                if counts is None:
                    with phases("counts"):
                        counts = reference.call("counts", slot=judge_mod.TIMING_SLOTS[0])
                result.update(counts)
            finally:
                judge.free()
    except RunnerError as exc:
        message = f"measuring baselines failed: {exc}"
        raise BaselinesFailed(message, failure.of_runner_error(exc)) from None
    except judge_mod.OUT_OF_MEMORY as exc:  # the judge's own memory: the machine's failure
        message = f"measuring baselines failed: the judge ran out of device memory: {exc}"
        raise BaselinesFailed(message, failure.INFRASTRUCTURE) from None
    result["phases_s"] = phases.seconds
    # the method travels with the times, so that another machine adopts only its own method's
    result["environment"] = {
        **environment.describe(device, settings.gpu_index()),
        "method": BASELINE_METHOD,
    }
    return result


def _mode_key(mode: str) -> str:
    return "compile_ms" if mode == "default" else f"compile_{mode.replace('-', '_')}_ms"


_FUNCTION_OF_MODE = {"default": "compile", "max-autotune": "compile_max_autotune"}


def time_baselines(judge: Judge, reference: RunnerProcess, modes=None, phases=None) -> dict:
    """Eager and torch.compile on the protocol's timing seeds, interleaved round by round;
    `phases` (a Phases) hears where the seconds went: each function's first calls, where
    torch.compile compiles, and the timed rounds."""
    protocol = judge.protocol
    phases = phases or Phases()
    modes = protocol.compile_modes if modes is None else modes
    with phases("inputs"):
        judge.make_set(reference, judge_mod.TIMING_SLOTS[0], protocol.timing_seeds[0])
        slots = judge.timing_slots()[: len(protocol.timing_seeds)]  # known once a set exists
        for slot, seed in zip(slots[1:], protocol.timing_seeds[1:], strict=False):
            judge.make_set(reference, slot, seed)
    names = {"eager_ms": "eager", **{_mode_key(m): _FUNCTION_OF_MODE[m] for m in modes}}
    batches = {key: Batches() for key in names}
    for fn in names.values():  # warm-up: torch.compile compiles here
        with phases(f"first calls {fn}"):
            for slot in slots:
                judge_mod.timed_call(judge, reference, fn, slot, "none", timeout_s=1800)
    with phases("timing"):
        result = _timed_rounds(judge, reference, names, batches, slots)
    return result


def _timed_rounds(judge: Judge, reference: RunnerProcess, names: dict, batches: dict, slots):
    protocol = judge.protocol
    deadline = time.monotonic() + protocol.timing_budget_s
    for round_index in range(_MAX_ROUNDS):
        keys = list(names)
        rotation = round_index % len(keys)
        for key in keys[rotation:] + keys[:rotation]:
            for slot in slots:
                call = judge_mod.timed_call(judge, reference, names[key], slot, "none", _CALL_S)
                batches[key].add([call[0]], call[1])
        if _settled(round_index, batches.values(), protocol, deadline):
            break
    result = {key: b.median_ms for key, b in batches.items()}
    result["spread"] = {key: b.spread for key, b in batches.items()}
    return result


_MAX_ROUNDS = 2000
_MIN_ROUNDS = 4
# Rounds the candidate is timed at least, so the clock check's cheapest calls are a quiet
# moment's: a GPU call costs about a millisecond, a cpu call's flush much more.
_CLOCK_ROUNDS = {"cpu": _MIN_ROUNDS, "cuda": 12}
_CALL_S = 600.0


def _settled(
    round_index: int, batches, protocol: Protocol, deadline: float, min_rounds: int = _MIN_ROUNDS
) -> bool:
    if round_index + 1 < min_rounds:
        return False
    precise = all(b.median_error < protocol.target_error for b in batches)
    return precise or time.monotonic() > deadline


def store_baselines(problem_path: Path, device: str, protocol: Protocol, result: dict) -> None:
    """What every later profile of this problem on this device and software is compared with."""
    path = _baseline_path(problem_mod.source_sha256(problem_path.read_text()), device, protocol)
    settings.publish_json(path, {k: v for k, v in result.items() if k != "cached"})


@dataclass
class Measurement:
    """What the judge measured of a verified candidate, for `result`."""

    candidate: dict
    eager: dict  # interleaved with the candidate
    eager_alone: dict  # the same batches just before the candidate's process existed
    violations: list[Violation]
    clock: dict | None = None  # ClockCheck's fields
    # each side's timed batches as recorded (clock_record), never part of a verdict
    batches: dict | None = field(default=None, repr=False)

    def drift(self) -> float:
        """Eager beside the candidate over eager alone, fastest against fastest: a busy host's
        stray stalls move medians, while something that slows every interleaved call (threat
        11) moves the minimum too. Only slower counts: speedups use the clean baselines."""
        if not self.eager or not self.eager_alone:
            return 1.0
        return self.eager["min_ms"] / self.eager_alone["min_ms"]

    def disturbed(self, protocol: Protocol) -> bool:
        """Worth measuring again in a fresh candidate process: eager drifted, or the judge's
        clock disagreed with the claimed times. On a busy 2-core host an honest 0.05 ms kernel
        met the clock check's bound in about 1 measurement of 4; a forger disagrees every time,
        and a result is only ever taken from a measurement whose clock agreed."""
        inconsistent = any(v.code == "timing_inconsistent" for v in self.violations)
        return inconsistent or self.drift() > protocol.drift_limit


def eager_alone(judge: Judge, reference: RunnerProcess) -> Batches:
    """Eager timed exactly as it will be beside the candidate, before any candidate process
    exists: what drift is judged against (threat 11), in the same process and minutes apart.
    A fresh runner's first calls are slow (allocator, clocks), so it warms up for a while."""
    batches = Batches()
    budget = judge.protocol.timing_budget_s / 4
    warm_until = time.monotonic() + budget / 2
    deadline = warm_until + budget
    # how many sets fit is known once one exists (6 GiB sets: one on an 80 GB GPU, not three)
    judge.make_set(reference, judge_mod.TIMING_SLOTS[0], judge_mod.fresh_seeds(1)[0])
    slots = judge.timing_slots()
    while True:
        _fresh_sets(judge, reference, slots)
        for slot in slots:
            ms, wall, _ = judge_mod.timed_call(judge, reference, "eager", slot, "sink", _CALL_S)
            if time.monotonic() >= warm_until:
                batches.add([ms], wall)
        if time.monotonic() < warm_until or not batches.walls_ms:
            continue
        if _settled(len(batches.walls_ms) // len(slots) - 1, (batches,), judge.protocol, deadline):
            break
    return batches


def _fresh_sets(judge: Judge, reference: RunnerProcess, slots: tuple[int, ...]) -> dict:
    seeds = judge_mod.fresh_seeds(len(slots))
    return {k: judge.make_set(reference, k, seed) for k, seed in zip(slots, seeds, strict=True)}


def time_candidate(
    judge: Judge,
    reference: RunnerProcess,
    candidate: RunnerProcess,
    alone: Batches,
    budget_s: float | None = None,
) -> Measurement:
    """Rounds of one call per timing set each for the candidate and for eager (which only
    calibrates the judge's clock and detects drift), every set drawn fresh each round so no
    result can be replayed; every timed call is judged like a trial (judge.judge_call), and a
    share of them, drawn in secret, again under the dispatch observer, untimed. The rounds go on
    for the protocol's timing budget, or `budget_s` (a tune call's screening)."""
    protocol = judge.protocol
    slots = judge.timing_slots()
    if len(slots) < len(judge_mod.TIMING_SLOTS):
        judge.release(judge_mod.TRIAL_SLOT)  # sets of GiBs: the verified trial's memory is needed
    cand, eager = Batches(), Batches()
    violations: list[Violation] = []
    deadline = time.monotonic() + (budget_s or protocol.timing_budget_s)
    for round_index in range(-1, _MAX_ROUNDS):  # round -1 warms up and is not recorded
        sets = _fresh_sets(judge, reference, slots)
        lent = {}
        try:
            for position, slot in enumerate(slots):
                # each set's inputs land just before its call, while the candidate is stopped
                lent[slot] = judge.lend_to_candidate(candidate, slot)
                calls = _timed_pair(judge, reference, candidate, slot, round_index + position)
                if round_index >= 0:
                    eager.add(*calls["eager"][:2])
                    cand.add(*calls["candidate"][:2])
                label = f"timed call (set {slot})"
                violations += _judged(judge, sets[slot], lent[slot], calls["candidate"][2], label)
            violations += _observed_call(judge, candidate, sets, lent, slots)
        except RunnerDied as died:
            if died.role == "reference":
                raise
            return _died(died)
        if violations or (
            _settled(round_index, (cand,), protocol, deadline, _CLOCK_ROUNDS[judge.device])
            and (_clock_decided(cand, eager, judge.device) or time.monotonic() > deadline)
        ):
            break
    clock = clock_check(cand, eager, judge.device)
    violations += clock.violations() if clock else []
    return Measurement(
        cand.summary(),
        eager.summary(),
        alone.summary(),
        violations[:10],
        asdict(clock) if clock else None,
        {
            "candidate_batches": clock_record.batches_record(cand),
            "eager_batches": clock_record.batches_record(eager),
        },
    )


def _timed_pair(judge, reference, candidate, slot: int, turn: int) -> dict:
    """Eager and the candidate on one set, in an order that alternates: {who: ([ms], wall ms,
    reply)}."""
    order = [("eager", reference, "sink"), ("candidate", candidate, "lent")]
    if turn % 2:
        order.reverse()
    calls = {}
    for fn, runner, into in order:
        # each runner's own bound: the candidate's is set from eager's time (Session)
        ms, wall, reply = judge_mod.timed_call(judge, runner, fn, slot, into, None)
        calls[fn] = ([ms], wall, reply)
    return calls


# One round in this many, drawn in secret, adds a call under the dispatch observer: its cost
# (tens of microseconds per op) stays out of the times.
_OBSERVED_ONE_IN = 4


def _observed_call(judge, candidate, sets, lent, slots) -> list[Violation]:
    if secrets.randbelow(_OBSERVED_ONE_IN):
        return []
    slot = slots[secrets.randbelow(len(slots))]
    label = f"observed timed call (set {slot})"
    reply = candidate.call("time", fn="candidate", slot=slot, into="lent", observe=True)
    return _judged(judge, sets[slot], lent[slot], reply, label)


def _judged(judge, expected, lent, reply, label) -> list[Violation]:
    """A timed call's violations; a wrong output is named as found while timed."""
    found, _, _ = judge_mod.judge_call(judge, expected, lent, reply, label)
    timed = {"mismatch": "timed_output_mismatch", "nan_output": "timed_output_mismatch"}
    return [Violation(timed.get(v.code, v.code), v.detail) for v in found]


def _died(died: RunnerDied) -> Measurement:
    violation = Violation("process_exit", f"while timed: {died}")
    return Measurement({}, {}, {}, [violation])


# What a call may cost a process beyond the same call in another, as a share of a quiet call's
# own overhead, with nothing hidden. Set when each runner flushed 64 MB inside its batch, whose
# speed was its process's memory's (an honest candidate's batches ran 31% over eager's for
# minutes on the 2-core VM); the flush is the judge's now, and the overhead a round trip and
# copies, so this allows a fraction of a millisecond. On a GPU both runners' calls are alike.
_PROCESS_OFFSET = {"cpu": 0.4, "cuda": 0.0}
# The share of a call's own overhead (round trip, copies) that noise may add to the candidate's
# median or floor gap. On the busy 2-core VM an honest candidate's call cost about a tenth more
# than eager's. A GPU host's round trip is steady (about 0.9 ms on an H200): a tenth of it hid a
# side stream's whole 0.13 ms kernel; at 2% it is caught, and the honest candidates' cheapest
# calls stayed under their bound (the closest, linear_relu, 0.060 ms of 0.074; a measurement
# whose clock disagrees is taken again in a fresh process before it stands).
_OVERHEAD_SHARE = {"cpu": 0.1, "cuda": 0.02}
# Deviations of the paired noise the floor gap may add. Each side's cheapest call is the least
# of a few dozen: on the 2-core VM its stalls are tens of ms and a quiet moment is reached, so
# the floor holds to its fixed part (the median's bound widens with that noise; a forger hides
# in it). On a GPU host with busy cores (tests/gpu's six workers compiling beside the timing, or
# runs sharing a machine) the cheapest call of a fresh process moved by about that noise: in
# the records of one tests/gpu call on an H200 (tests/fixtures/timing/) the fixed part held
# honest kernels in 35 of 78 attempts, every one of row_sum's three. Over three such calls, one
# and a half deviations held 6 of 78, 4 of 51 and 3 of 57 honest attempts (never all of one
# measurement's) and caught every attempt of every attack; two let a 0.13 ms side-stream
# kernel through in one attempt, whose median gap was under its bound by 0.001 ms.
_FLOOR_NOISE_DEVIATIONS = {"cpu": 0.0, "cuda": 1.5}


@dataclass
class ClockCheck:
    """The judge's clock against the candidate's claimed times, per call, in ms: what the
    verdict shows, so a user sees how close an honest candidate came to the bounds."""

    claimed_ms: float
    gap_ms: float  # median over paired calls of (wall - claimed), candidate minus eager
    floor_gap_ms: float  # the same between each side's cheapest call
    noise_ms: float
    rounds: int
    bound_ms: float
    floor_bound_ms: float
    fixed_ms: float  # the part of both bounds that no noise widens

    @property
    def agrees(self) -> bool:
        return self.gap_ms <= self.bound_ms and self.floor_gap_ms <= self.floor_bound_ms

    def violations(self) -> list[Violation]:
        if self.agrees:
            return []
        return [
            Violation(
                "timing_inconsistent",
                f"each call took {self.gap_ms:.3f} ms longer on the judge's clock (the cheapest "
                f"call {self.floor_gap_ms:.3f} ms; bounds {self.bound_ms:.3f} and "
                f"{self.floor_bound_ms:.3f} ms) than the candidate's claimed "
                f"{self.claimed_ms:.3f} ms explain (noise {self.noise_ms:.3f} ms over "
                f"{self.rounds} rounds): work ran outside the timed calls, or the times were "
                "forged",
            )
        ]


def clock_check(cand: Batches, eager: Batches, device: str) -> ClockCheck | None:
    """The judge's clock against the candidate's claimed times (threats 5 and 6), twice: the
    median gap over paired rounds, whose bound widens with the host's noise, and the gap
    between the cheapest calls, which noise cannot hide (it only adds time). On a busy CI
    host a forger hiding 5 ms per call (15x its claim) once stayed under the median's bound."""
    if not cand.walls_ms or not eager.walls_ms:
        return None
    gap, noise = judge_mod.unexplained_ms(cand, eager)
    claimed = sum(cand.times_ms) / len(cand.walls_ms)
    overhead = statistics.median(eager.overheads_ms)
    # a tenth of the claim plus 20 us (one hiding a third of its work or more is caught on a
    # quiet GPU), plus what a call may cost another process on this device (of its cost on a
    # quiet moment: the stalls of a busy host are the noise's)
    quiet_overhead = max(min(eager.overheads_ms), 0.0)
    slack = 0.1 * claimed + 0.02 + _PROCESS_OFFSET[device] * quiet_overhead
    overhead_slack = _OVERHEAD_SHARE[device] * max(overhead, 0.0)
    # 4 deviations of the host's noise, or of the median's own noise, which shrinks with the
    # number of rounds (standard error of a median from the MAD)
    rounds = min(len(cand.overheads_ms), len(eager.overheads_ms))
    standard_error = 1.25 * 1.4826 * noise / math.sqrt(max(rounds, 1))
    return ClockCheck(
        claimed_ms=claimed,
        gap_ms=gap,
        floor_gap_ms=judge_mod.unexplained_floor_ms(cand, eager),
        noise_ms=noise,
        rounds=rounds,
        bound_ms=slack + min(4 * noise, 4 * standard_error + overhead_slack),
        floor_bound_ms=slack + overhead_slack + _FLOOR_NOISE_DEVIATIONS[device] * noise,
        fixed_ms=slack + overhead_slack,
    )


def _clock_decided(cand: Batches, eager: Batches, device: str) -> bool:
    """Whether the rounds so far decide the clock check: its median bound's noise term is no
    larger than its fixed part. The candidate's claimed times may be precise after a dozen
    rounds because it chose them (a forger's are constant); the judge's clock is not, and a
    hidden side-stream kernel of 0.13 ms passed a dozen noisy rounds' median bound. So rounds
    go on, up to the budget, until the noise is measured well enough to tell."""
    check = clock_check(cand, eager, device)
    return check is None or check.bound_ms <= 2 * check.fixed_ms


def clock_violations(cand: Batches, eager: Batches, device: str) -> list[Violation]:
    check = clock_check(cand, eager, device)
    return check.violations() if check else []


def result(base: dict, measured: Measurement, device: str, protocol: Protocol) -> ProfileResult:
    """The candidate's verdict on speed: against the cached baselines, the floor and drift."""
    violations = list(measured.violations)
    if not measured.candidate:
        return ProfileResult(
            ok=False, violations=violations, error="not timed", failed_by=failure.CANDIDATE
        )
    candidate_ms = measured.candidate["median_ms"]
    drift = measured.drift()
    if drift > protocol.drift_limit:
        violations.append(
            Violation(
                "timing_drift",
                f"eager ran {drift:.2f}x its time alone while the candidate was timed "
                f"(limit {protocol.drift_limit}x): the machine was disturbed; held for review",
            )
        )
    sol_ms = roofline.floor_ms(base["flops"], base["bytes_moved"], roofline.peaks(device), protocol)
    if candidate_ms < sol_ms * protocol.sol_slack:  # the peaks may have been measured too low
        peaks = roofline.peaks(device, measure_again=True)
        sol_ms = roofline.floor_ms(base["flops"], base["bytes_moved"], peaks, protocol)
    if candidate_ms < sol_ms * protocol.sol_slack:
        violations.append(
            Violation(
                "impossible_speed",
                f"{candidate_ms:.4f} ms is under the "
                f"speed-of-light floor {sol_ms:.4f} ms of this device "
                "(held for review, never a record)",
            )
        )
    compile_ms = base.get("compile_ms")
    codes = {v.code for v in violations}
    return ProfileResult(
        ok=not violations,
        failed_by=failure.of_profile_violations(codes) if violations else None,
        eager_ms=base["eager_ms"],
        compile_ms=compile_ms,
        compile_max_autotune_ms=base.get("compile_max_autotune_ms"),
        candidate_ms=candidate_ms,
        spread=measured.candidate["spread"],
        speedup_vs_eager=base["eager_ms"] / candidate_ms,
        speedup_vs_compile=compile_ms / candidate_ms if compile_ms else None,
        sol_ms=sol_ms,
        sol_fraction=sol_ms / candidate_ms,
        flops=base["flops"],
        bytes_moved=base["bytes_moved"],
        samples=measured.candidate["samples"],
        eager_drift=drift,
        baselines_cached=base["cached"],
        clock=measured.clock,
        violations=violations,
    )
