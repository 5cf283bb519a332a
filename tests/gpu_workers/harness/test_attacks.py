"""Issue 13's attacks, each as a known-bad candidate or problem (tests/fixtures/candidates/cpu/
attack_*, tests/fixtures/problems/attack_*.py) run through the real harness on the cpu target:
real compiles, real sandboxed runners. Each is rejected with a violation code, or, for escapes,
contained: nothing it writes appears on the host and nothing secret reaches the verdict.

Every containment check is paired with a known-bad that shows the check would see the escape:
the host locations the attack aims at exist and are writable from outside the sandbox, the
host scan finds a marker planted there (test_the_host_scan_sees_a_marker_in_every_location),
and where a defence is one setting (fresh seeds) the same candidate passes without it.

One Session serves the whole module, as one worker serves many candidates: after every attack
the next candidate is still judged (test_the_worker_still_serves_after_the_attacks runs last).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge import source_gate, validation
from gpu_workers.harness.judge.channel import MAX_MESSAGE_BYTES
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.session import Session
from tests.conftest import FIXTURES, candidate_dir, problem_source
from tests.gpu_workers.harness.attacks import (
    HOST_DROP_LIMIT,
    MARK,
    PLANTED_NAME,
    REPO,
    HostDiskWatch,
    WalkOnly,
    definitions,
    escaped,
    evaluate,
    host_processes_with,
    submit,
    tree_digest,
    verify,
)
from tests.gpu_workers.harness.evaluation import codes


@pytest.fixture(scope="module", autouse=True)
def confined():
    """Unconfined, these attacks would act on the host (one kills every process it can see)."""
    assert sandbox.confinement()["confined"], "the attack tests need bubblewrap"


@pytest.fixture(scope="module")
def session():
    """relu_scale (y = relu(x) * 1.5 over 256x1024 floats), judged as a worker judges it."""
    with Session(problem_source("relu_scale"), device="cpu", protocol=LOOSE) as shared:
        yield shared


@pytest.mark.parametrize(
    "fixture",
    sorted(p for p in (FIXTURES / "candidates").glob("*/attack_*")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_attack_gets_past_the_static_gate(fixture):
    """What stops them below is the judge and the sandbox, not a scan of their sources: each
    reaches the runtime checks (os.fork, os.kill, os.system, dlsym, native patches)."""
    sources = {"model_new.py": (fixture / "model_new.py").read_text()}
    sources |= {f"kernels/{p.name}": p.read_text() for p in (fixture / "kernels").iterdir()}
    assert source_gate.check_sources(sources) == []
    first = sources["model_new.py"].splitlines()[0]
    assert first.startswith("# Cheats"), first  # each says what it cheats


def test_the_host_scan_sees_a_marker_in_every_location(session):
    """The known-bad for every containment check below: a file planted in each class of host
    location, by a process nothing confines (this one), is found."""
    since = time.time() - 1
    places = [
        session._base / "io",  # this run's folder
        REPO / "gpu_workers" / "harness",  # the harness source
        REPO,  # the repository: database and media live here
        settings.cache_dir() / "extensions",  # the kernel cache
        Path("/tmp"),
        Path("/dev/shm"),
        Path.home(),
    ]
    planted = []
    try:
        for i, place in enumerate(places):
            place.mkdir(parents=True, exist_ok=True)  # the kernel cache: none built yet when first
            name = place / f"{PLANTED_NAME}-selftest-{uuid.uuid4().hex}"
            name.write_bytes(b"x")  # found by its name
            planted.append(name)
            hidden = place / f"selftest-{uuid.uuid4().hex}-{i}.txt"
            hidden.write_bytes(b"payload " + MARK)  # found by its content
            planted.append(hidden)
        assert sorted(map(str, planted)) == [p for p in escaped(since) if "selftest" in p]
    finally:
        for path in planted:
            path.unlink(missing_ok=True)


# ---- forged results, forged times -------------------------------------------------------------


def test_a_forged_result_file_and_exit_0_is_a_process_exit(session):
    since = time.time() - 1
    verdict = evaluate(session, "attack_forges_result")
    result = verdict["verify"]
    assert not result["ok"] and "process_exit" in codes(result), result
    assert "exited with status 0" in result["error"]
    assert verdict["profile"] is None  # never profiled, whatever it printed
    # the result files it wrote to every folder it could name stayed in its private /tmp
    assert escaped(since) == []
    # known-bad: where it aimed, the host would have taken them
    assert os.access(session._base / "io", os.W_OK) and os.access(settings.cache_dir(), os.W_OK)


def test_forged_times_from_native_code_are_timing_inconsistent(session):
    """Its extension replaces the runner's bound clock (past any static gate) with one that
    stops during 50 ms of hidden work per call; the judge's own clock sees the batches. The
    hidden work is several times a batch's whole cost, so a busy host's stalls cannot hide it:
    the clock check's decision at 5 ms a call, beside a busy host's noise, is
    test_profile.py's (given batches), and tests/gpu times the cuda forger live."""
    verdict = evaluate(session, "attack_forges_times")
    assert verdict["verify"]["ok"], verdict["verify"]  # the right answer, slowly
    profile = verdict["profile"]
    assert not profile["ok"] and "timing_inconsistent" in codes(profile), profile
    detail = next(v["detail"] for v in profile["violations"] if v["code"] == "timing_inconsistent")
    assert "longer on the judge's clock" in detail


def test_skipping_every_flush_in_its_process_does_not_pay_for_hidden_work(session):
    """Issue 29, class 1: the flushes live in the judge's process, so making every flush in its
    own a no-op saves the forger nothing, and the 5 ms it hides per call stay on the judge's
    clock (a flush inside the runner once paid for them)."""
    verdict = evaluate(session, "attack_skips_flush")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert not profile["ok"] and "timing_inconsistent" in codes(profile), profile


def test_torch_work_while_unobserved_is_caught_on_the_timed_calls(session):
    """Issue 29, class 3: its kernel runs while the dispatch observer watches (every trial),
    torch in place on the input when it does not; every timed call is judged like a trial, its
    inputs compared from outside."""
    verdict = evaluate(session, "attack_torch_when_unobserved")
    assert verdict["verify"]["ok"], verdict["verify"]  # known-bad: the trials alone pass it
    profile = verdict["profile"]
    assert not profile["ok"], profile
    assert codes(profile) & {"input_mutated", "output_aliases_input"}, profile


# ---- references and seeds ----------------------------------------------------------------------


@pytest.fixture
def decoys(session):
    """Reference outputs and requests with seeds where a harness that used files would keep
    them: this run's folder, the kernel cache and the host's /tmp."""
    import torch

    planted = []
    for folder in (session._base / "io", settings.cache_dir(), Path("/tmp")):
        tag = uuid.uuid4().hex
        reference = folder / f"reference-{tag}.pt"
        torch.save(torch.zeros(256, 1024), reference)
        request = folder / f"verify-request-{tag}.json"
        request.write_text(json.dumps({"public_seeds": [11, 22], "secret_seeds": [987654]}))
        planted += [reference, request]
    yield planted
    for path in planted:
        path.unlink(missing_ok=True)


def test_references_and_seeds_are_nowhere_to_be_found(session, decoys):
    result = verify(session, "attack_reads_references")
    # it found no file to replay (it would have said so in the error) and no seed it could
    # predict: its guess is wrong
    assert not result["ok"] and result["error"] is None, result
    assert codes(result) & {"mismatch", "nan_output"}, result
    # known-bad: the same search, run where nothing confines it, finds every decoy
    search = definitions(
        candidate_dir("cpu", "attack_reads_references") / "model_new.py",
        {"WANTED", "ROOTS", "SKIP", "find_secrets", "seeds_in"},
    )
    found = search["find_secrets"](roots=[str(p.parent) for p in decoys])
    assert {str(p) for p in decoys} <= set(found)
    assert 987654 in search["seeds_in"](found)


def test_the_same_candidate_passes_when_seeds_are_predictable(session, monkeypatch):
    """Known-bad for the test above: with the protocol's published seeds instead of fresh ones,
    its precomputed answers are right. Fresh seeds are what stops it."""
    published = list(LOOSE.seeds()) + list(LOOSE.timing_seeds)
    monkeypatch.setattr(judge_mod, "fresh_seeds", lambda count: published[:count])
    result = verify(session, "attack_reads_references")
    assert result["ok"], result


# ---- writes outside -----------------------------------------------------------------------------


def test_writes_into_the_harness_the_cache_and_other_runs_never_reach_the_host(session):
    with Session(problem_source("relu_scale"), device="cpu") as neighbour:
        harness_before = tree_digest(REPO / "gpu_workers")
        neighbour_before = tree_digest(neighbour._base)
        reference_before = tree_digest(session._base / "reference")
        submit(session, "attack_writes_outside")
        built = session._compile_result()
        extension = Path(built.extension_dir) / "kernel_ext.so"
        extension_before = extension.read_bytes()
        since = time.time() - 1
        result = session.verify()
        assert result["ok"], result  # contained, and otherwise an ordinary correct kernel
        assert escaped(since) == []
        assert tree_digest(REPO / "gpu_workers") == harness_before
        assert tree_digest(neighbour._base) == neighbour_before
        assert tree_digest(session._base / "reference") == reference_before
        assert extension.read_bytes() == extension_before
        # known-bad: every one of those places takes writes from the host
        for place in (
            REPO / "gpu_workers" / "harness",
            settings.cache_dir(),
            extension.parent,
            neighbour._base / "workspace",
            session._base / "reference",
            Path("/tmp"),
        ):
            assert os.access(place, os.W_OK), place


def test_an_include_of_a_file_of_its_run_fails_to_compile(session):
    """Compile-time reads (`#include "../../reference/model.py"`, the problem copy beside the
    workspace) fail like the harness and cache includes of test_compile.py."""
    submit(session, "attack_includes_outside")
    target = session.workspace.root / "kernels" / "../../reference/model.py"
    assert target.resolve().is_file()  # known-bad: the file is there, on the host
    compiled = session.compile()
    assert not compiled["ok"]
    assert "No such file or directory" in compiled["log"]
    assert "get_init_inputs" not in compiled["log"]  # nothing of the file in the log


# ---- early returns, other threads and processes ------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        # a thread created through dlsym: no source scan sees it, the thread count does
        ("attack_thread_early", {"async_work"}),
        # a forked process fills a shared output later: no thread to count, the output is read
        # right after the call
        ("attack_fork_early", {"mismatch", "nan_output"}),
    ],
)
def test_work_finished_after_the_call_returns_is_rejected(session, name, expected):
    result = verify(session, name)
    assert not result["ok"] and codes(result) & expected, result


# ---- caches --------------------------------------------------------------------------------------


def test_a_cache_by_pointer_fails_the_timed_calls(session):
    """Honest through the trials, then keyed on data_ptr: the judge's buffers are reused
    between rounds, their contents are not."""
    verdict = evaluate(session, "attack_caches_by_pointer")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert not profile["ok"] and "timed_output_mismatch" in codes(profile), profile


def test_a_cache_by_fingerprint_never_hits(session):
    """Fresh inputs every round: a content cache only ever misses, so it is an honest kernel
    with an honest time (a hit would be under the speed-of-light floor)."""
    verdict = evaluate(session, "attack_caches_by_fingerprint")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert "impossible_speed" not in codes(profile), profile
    assert profile["candidate_ms"] >= profile["sol_ms"] * LOOSE.sol_slack


def test_the_fingerprint_cache_would_hit_on_replayed_inputs(session, monkeypatch):
    """Known-bad for the test above: with the same timing inputs every round, its hits cost a
    dictionary lookup instead of the kernel. On the cpu target the speed-of-light floor is a
    guess about the host, so the hits show as a time far under its honest one (the cuda twin
    asserts impossible_speed against the H100's floor)."""
    honest = evaluate(session, "attack_caches_by_fingerprint")["profile"]
    monkeypatch.setattr(judge_mod, "fresh_seeds", lambda count: list(range(1, count + 1)))
    replayed = evaluate(session, "attack_caches_by_fingerprint")["profile"]
    assert replayed["candidate_ms"] < honest["candidate_ms"] / 3, (honest, replayed)


def test_an_output_over_the_input_memory_is_output_aliases_input(session):
    result = verify(session, "attack_returns_input_view")
    assert not result["ok"] and "output_aliases_input" in codes(result), result


# ---- processes -----------------------------------------------------------------------------------


def test_killing_the_parent_and_every_process_is_a_process_exit(session):
    canary = subprocess.Popen(["sleep", "120"])  # a host process it would kill if it could
    try:
        result = verify(session, "attack_kills_parent")
        assert not result["ok"] and "process_exit" in codes(result), result
        assert "SIGKILL" in result["error"]
        assert canary.poll() is None
        # the judge's next evaluation, in this same process, works
        assert verify(session, "good_relu_scale")["ok"]
    finally:
        canary.kill()
        canary.wait()


def test_a_process_that_outlives_the_step_dies_with_it(session):
    marker = b"KERNELARENA-" + b"ATTACK outlives_step"
    seen_alive = []
    done = threading.Event()

    def watch():  # known-bad: the detached grandchild does run, during the step
        while not done.is_set():
            if host_processes_with(marker):
                seen_alive.append(True)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    since = time.time() - 1
    try:
        result = verify(session, "attack_outlives_step")
    finally:
        done.set()
        watcher.join()
    assert result["ok"], result
    assert seen_alive, "the attack never started its detached process"
    time.sleep(3)  # it writes 2 s after it starts
    assert host_processes_with(marker) == []
    assert escaped(since) == []
    assert os.access(session.workspace.root, os.W_OK)  # known-bad: a target the host allows


def test_filling_tmp_and_the_disk_leaves_the_host_untouched(session):
    since = time.time() - 1
    with HostDiskWatch() as disk:
        result = verify(session, "attack_fills_disk")
    # A verdict (the attack ran: it fills on import, and ModelNew was loaded or its forward
    # failed), and the damage is its own: a private /tmp of bounded size, full.
    assert result["ok"] or "model_new.py" in (result["error"] or ""), result
    assert escaped(since) == []
    assert disk.largest_drop < HOST_DROP_LIMIT, disk.largest_drop


def test_printing_without_end_fills_nothing_of_the_host(session, tmp_path):
    """Its 4 GiB of stdout and stderr reach the worker through pipes of which it keeps a tail."""
    with HostDiskWatch() as disk:
        result = verify(session, "attack_floods_output")
    assert result["ok"], result  # the flood ran on import, then the kernel was judged
    assert disk.largest_drop < HOST_DROP_LIMIT, disk.largest_drop
    # known-bad: the same bytes in a file of the host's temporary folder are seen (the watch
    # ends while the file is still there, so its last look sees them whatever the scheduler)
    with tempfile.TemporaryFile() as log, HostDiskWatch() as disk:
        for _ in range(HOST_DROP_LIMIT // (16 << 20) + 16):
            log.write(b"x" * (16 << 20))
        log.flush()
        os.fsync(log.fileno())
    assert disk.largest_drop >= HOST_DROP_LIMIT, disk.largest_drop


def test_the_environment_of_the_worker_never_reaches_the_verdict(session, monkeypatch):
    secret = uuid.uuid4().hex
    for name in ("DATABASE_URL", "SECRET_KEY", "KERNELARENA_TEST_MARKER"):
        monkeypatch.setenv(name, f"ka-secret-{secret}")
    # known-bad: a child that nothing scrubs or confines reads it from its /proc
    child = subprocess.run(["cat", "/proc/self/environ"], capture_output=True, check=True)
    assert secret.encode() in child.stdout
    verdict = evaluate(session, "attack_reads_environ")
    assert not verdict["verify"]["ok"]
    text = json.dumps(verdict)
    assert secret not in text
    # the channel it used works: what it could read (its scrubbed environment) is in the error
    assert "PYTHONPATH" in verdict["verify"]["error"], verdict["verify"]


# ---- the baseline --------------------------------------------------------------------------------


def test_busy_processes_never_raise_the_speedup(session):
    """Busy processes started on import slow the interleaved eager calls and the candidate's
    own batches. Speedups use the cached baselines, which no candidate code ran beside, so the
    slowdown can only lower its own score. Whether the interleaved calls also show drift depends
    on the host's cores: that is review, not the score, and not asserted here."""
    honest = evaluate(session, "good_relu_scale")["profile"]
    busy = evaluate(session, "attack_busy_threads")["profile"]
    assert busy["eager_ms"] == honest["eager_ms"]  # the same cached baseline, untouched
    # the numerator is fixed, so busy processes can only raise the denominator, its own time
    assert busy["speedup_vs_eager"] == pytest.approx(busy["eager_ms"] / busy["candidate_ms"])


# ---- problems are uploads too --------------------------------------------------------------------


def test_a_problem_that_runs_a_shell_command_at_import_is_contained():
    since = time.time() - 1
    report = validation.validate(problem_source("attack_shell_at_import"), "cpu", LOOSE)
    assert report.ok, report.reasons  # an ordinary problem, whatever its import tried
    assert escaped(since) == []
    for place in (REPO / "gpu_workers" / "harness", REPO, Path("/tmp"), Path.home()):
        assert os.access(place, os.W_OK), place  # known-bad: the host would take the files


def test_a_problem_that_opens_the_site_database_reads_nothing():
    secret = f"private-source-{uuid.uuid4().hex}"
    databases = [REPO / f"{PLANTED_NAME}-canary.sqlite3", Path("/tmp") / f"canary-{secret}.sqlite3"]
    for path in databases:
        with sqlite3.connect(path) as db:
            db.execute("create table problems_problem (source text)")
            db.execute("insert into problems_problem values (?)", (secret,))
        db.close()
    try:
        report = validation.validate(problem_source("attack_reads_database"), "cpu", LOOSE)
        assert report.ok, report.reasons  # it found nothing to steal, so it did not raise
        assert secret not in json.dumps(report.to_dict())
        # known-bad: its search and read, where nothing confines them, steal the canary
        attack = definitions(
            FIXTURES / "problems" / "attack_reads_database.py",
            {"SKIP", "databases", "read"},
        )
        attack["os"] = WalkOnly(["/tmp", str(REPO)])
        found = attack["databases"]()
        assert {str(p) for p in databases} <= set(found)
        assert any(secret in row for row in attack["read"](str(databases[1])))
    finally:
        for path in databases:
            path.unlink(missing_ok=True)


# ---- replies the judge cannot read (issue 29, class 4) -------------------------------------------


@pytest.mark.parametrize("name", ["attack_malformed_reply", "attack_deep_reply"])
def test_a_reply_of_any_shape_is_a_process_exit(session, name):
    """Its import replaces what its runner answers to a trial: {"outputs": 7}, or a frame of
    nested brackets. Either is a verdict against the candidate, never an exception out of the
    judge (which once raised TypeError and RecursionError on them)."""
    result = verify(session, name)
    assert not result["ok"] and "process_exit" in codes(result), result
    assert result["failed_by"] == "candidate"
    assert "broke the protocol" in result["error"], result
    assert verify(session, "good_relu_scale")["ok"]  # the judge serves the next one


def test_the_deep_frame_fits_the_size_limit_and_overflows_a_recursive_decoder():
    """Known-bad for the test above: the size bound alone lets the deep frame through."""
    attack = definitions(
        candidate_dir("cpu", "attack_deep_reply") / "model_new.py", {"DEPTH", "FRAME"}
    )
    assert len(attack["FRAME"]) < MAX_MESSAGE_BYTES
    with pytest.raises(RecursionError):
        json.loads(attack["FRAME"])


def test_a_problem_whose_runner_replies_nonsense_is_blamed_on_the_problem():
    """The reference runner runs the problem's code, which can rewrite its replies as well."""
    source = problem_source("attack_malformed_reply")
    report = validation.validate(source, "cpu", LOOSE)
    assert not report.ok and report.failed_by == "problem", report
    assert "broke the protocol" in report.reasons[0], report.reasons
    with Session(source, device="cpu", protocol=LOOSE) as judged:
        result = verify(judged, "good_relu_scale")
    assert not result["ok"] and result["failed_by"] == "problem", result
    assert result["error"].startswith("the reference failed: "), result
    assert "broke the protocol" in result["error"], result


# ---- the command line ----------------------------------------------------------------------------


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_workers.harness", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize("name", ["attack_forges_result", "attack_kills_parent"])
def test_the_cli_exits_1_with_the_verdict(name):
    done = harness(
        "evaluate",
        str(FIXTURES / "problems" / "relu_scale.py"),
        str(candidate_dir("cpu", name)),
        "--device",
        "cpu",
        "--json",
    )
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)
    assert not verdict["verify"]["ok"] and "process_exit" in codes(verdict["verify"])


def test_the_cli_validates_a_contained_problem_upload():
    since = time.time() - 1
    done = harness("validate", str(FIXTURES / "problems" / "attack_shell_at_import.py"))
    assert done.returncode == 0 and "valid on" in done.stdout, done.stdout + done.stderr
    assert escaped(since) == []


def test_the_worker_still_serves_after_the_attacks(session):
    verdict = evaluate(session, "good_relu_scale")
    assert verdict["verify"]["ok"], verdict["verify"]
    assert verdict["profile"]["candidate_ms"] > 0
