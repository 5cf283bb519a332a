"""Issue 13's attacks on a real GPU (tests/fixtures/candidates/cuda/attack_*): each rejected with
a violation code, or contained. The cpu twin, with the reasoning behind each check and the
known-bads, is tests/gpu_workers/harness/test_attacks.py; the host scan and helpers are shared
(tests/gpu_workers/harness/attacks.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from gpu_workers.harness import settings
from gpu_workers.harness.judge import judge as judge_mod
from gpu_workers.harness.judge import validation
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.session import Session
from tests.conftest import FIXTURES, candidate_dir, problem_source
from tests.gpu_workers.harness.attacks import (
    HOST_DROP_LIMIT,
    REPO,
    HostDiskWatch,
    escaped,
    evaluate,
    host_processes_with,
    submit,
    tree_digest,
    verify,
)
from tests.gpu_workers.harness.evaluation import codes

PROBLEM = "gpu/relu_scale"  # y = relu(x) * 1.5 over 8192x8192 floats

# the cuda fixture candidates, built at once before the first test (conftest.py)
pytestmark = pytest.mark.usefixtures("prebuilt_cuda_candidates")


@pytest.fixture(scope="module", autouse=True)
def confined():
    assert sandbox.confinement()["confined"], "the attack tests need bubblewrap"


@pytest.fixture(scope="module")
def session():
    with Session(problem_source(PROBLEM), device="cuda", protocol=LOOSE) as shared:
        yield shared


# ---- forged results and times --------------------------------------------------------------


def test_a_forged_result_file_and_exit_0_is_a_process_exit(session):
    since = time.time() - 1
    verdict = evaluate(session, "attack_forges_result")
    assert not verdict["verify"]["ok"] and "process_exit" in codes(verdict["verify"])
    assert verdict["profile"] is None
    assert escaped(since) == []


def test_forged_event_times_are_timing_inconsistent(session):
    """Its extension wraps the runner's bound event timer so every time is a twentieth of the
    real one, and spins ~2 ms per call."""
    verdict = evaluate(session, "attack_forges_times")
    assert verdict["verify"]["ok"], verdict["verify"]
    assert "timing_inconsistent" in codes(verdict["profile"]), verdict["profile"]


def test_skipping_every_flush_in_its_process_does_not_pay_for_hidden_work(session):
    """Issue 29, class 1: the L2 flush runs in the judge's process; the candidate's no-op
    flushes save it nothing and its forged event times stay inconsistent."""
    verdict = evaluate(session, "attack_skips_flush")
    assert verdict["verify"]["ok"], verdict["verify"]
    assert "timing_inconsistent" in codes(verdict["profile"]), verdict["profile"]


def test_torch_work_while_unobserved_is_caught_on_the_timed_calls(session):
    """Issue 29, class 3: kernel under the observer, torch in place on the input otherwise."""
    verdict = evaluate(session, "attack_torch_when_unobserved")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert not profile["ok"], profile
    assert codes(profile) & {"input_mutated", "output_aliases_input"}, profile


def test_work_left_on_a_hidden_side_stream_is_timing_inconsistent(session):
    """A stream from the driver API through dlsym (no scan sees it): the trials wait for the
    device, so the outputs are right; the judge's clock sees the work the events miss."""
    verdict = evaluate(session, "attack_side_stream_early")
    assert verdict["verify"]["ok"], verdict["verify"]
    profile = verdict["profile"]
    assert not profile["ok"] and "timing_inconsistent" in codes(profile), profile


def test_a_kernel_launched_later_from_a_hidden_thread_is_rejected(session):
    result = verify(session, "attack_thread_early")
    assert not result["ok"], result
    assert codes(result) & {"async_work", "nan_output", "mismatch"}, result


# ---- references and seeds ---------------------------------------------------------------------


@pytest.fixture
def decoys(session):
    import torch

    planted = []
    for folder in (session._base / "io", settings.cache_dir(), Path("/tmp")):
        tag = uuid.uuid4().hex
        reference = folder / f"reference-{tag}.pt"
        torch.save(torch.zeros(8192, 8192), reference)
        request = folder / f"verify-request-{tag}.json"
        request.write_text(json.dumps({"public_seeds": [11, 22], "secret_seeds": [987654]}))
        planted += [reference, request]
    yield planted
    for path in planted:
        path.unlink(missing_ok=True)


def test_references_and_seeds_are_nowhere_to_be_found(session, decoys):
    result = verify(session, "attack_reads_references")
    assert not result["ok"] and result["error"] is None, result
    assert codes(result) & {"mismatch", "nan_output"}, result


def test_the_same_candidate_passes_when_seeds_are_predictable(session, monkeypatch):
    """Known-bad: with the published seeds, its precomputed answers are right."""
    published = list(LOOSE.seeds()) + list(LOOSE.timing_seeds)
    monkeypatch.setattr(judge_mod, "fresh_seeds", lambda count: published[:count])
    assert verify(session, "attack_reads_references")["ok"]


# ---- writes outside ----------------------------------------------------------------------------


def test_writes_into_the_harness_the_cache_and_other_runs_never_reach_the_host(session):
    with Session(problem_source(PROBLEM), device="cuda") as neighbour:
        harness_before = tree_digest(REPO / "gpu_workers")
        neighbour_before = tree_digest(neighbour._base)
        submit(session, "attack_writes_outside")
        extension = Path(session._compile_result().extension_dir) / "kernel_ext.so"
        extension_before = extension.read_bytes()
        since = time.time() - 1
        assert session.verify()["ok"]
        assert escaped(since) == []
        assert tree_digest(REPO / "gpu_workers") == harness_before
        assert tree_digest(neighbour._base) == neighbour_before
        assert extension.read_bytes() == extension_before


def test_an_include_of_a_file_of_its_run_fails_to_compile(session):
    submit(session, "attack_includes_outside")
    assert (session.workspace.root / "kernels" / "../../reference/model.py").resolve().is_file()
    compiled = session.compile()
    assert not compiled["ok"] and "No such file or directory" in compiled["log"]
    assert "get_init_inputs" not in compiled["log"]


# ---- caches and views --------------------------------------------------------------------------


def test_a_cache_by_pointer_fails_the_timed_calls(session):
    verdict = evaluate(session, "attack_caches_by_pointer")
    assert verdict["verify"]["ok"], verdict["verify"]
    assert "timed_output_mismatch" in codes(verdict["profile"]), verdict["profile"]


def test_a_cache_by_fingerprint_never_hits(session):
    profile = evaluate(session, "attack_caches_by_fingerprint")["profile"]
    assert "impossible_speed" not in codes(profile), profile


def test_the_fingerprint_cache_would_hit_on_replayed_inputs(session, monkeypatch):
    monkeypatch.setattr(judge_mod, "fresh_seeds", lambda count: list(range(1, count + 1)))
    profile = evaluate(session, "attack_caches_by_fingerprint")["profile"]
    assert "impossible_speed" in codes(profile), profile


def test_an_output_over_the_input_memory_is_output_aliases_input(session):
    result = verify(session, "attack_returns_input_view")
    assert not result["ok"] and "output_aliases_input" in codes(result), result


# ---- processes -----------------------------------------------------------------------------------


def test_killing_the_parent_and_every_process_is_a_process_exit(session):
    canary = subprocess.Popen(["sleep", "120"])
    try:
        result = verify(session, "attack_kills_parent")
        assert not result["ok"] and "process_exit" in codes(result), result
        assert canary.poll() is None
        assert verify(session, "good_relu_scale")["ok"]
    finally:
        canary.kill()
        canary.wait()


def test_a_process_that_outlives_the_step_dies_with_it(session):
    marker = b"KERNELARENA-" + b"ATTACK outlives_step"
    seen_alive, done = [], threading.Event()

    def watch():
        while not done.is_set():
            seen_alive.extend([True] if host_processes_with(marker) else [])
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
    time.sleep(3)
    assert host_processes_with(marker) == []
    assert escaped(since) == []


def test_filling_tmp_and_the_disk_leaves_the_host_untouched(session):
    since = time.time() - 1
    result = verify(session, "attack_fills_disk")
    assert result["ok"] or "model_new.py" in (result["error"] or ""), result  # a verdict
    assert escaped(since) == []


def test_printing_without_end_fills_nothing_of_the_host(session):
    with HostDiskWatch() as disk:
        result = verify(session, "attack_floods_output")
    assert result["ok"], result
    # the cpu twin's bound, with its known-bad: beside tests/gpu's other workers (their builds
    # and torch.compile caches) the host's free space once fell 807 MB in this test's 10 s
    assert disk.largest_drop < HOST_DROP_LIMIT, disk.largest_drop


def test_the_environment_of_the_worker_never_reaches_the_verdict(session, monkeypatch):
    secret = uuid.uuid4().hex
    for name in ("DATABASE_URL", "SECRET_KEY", "KERNELARENA_TEST_MARKER"):
        monkeypatch.setenv(name, f"ka-secret-{secret}")
    verdict = evaluate(session, "attack_reads_environ")
    assert not verdict["verify"]["ok"]
    assert secret not in json.dumps(verdict)
    assert "PYTHONPATH" in verdict["verify"]["error"], verdict["verify"]


def test_busy_processes_never_raise_the_speedup(session):
    """On a GPU the busy host processes may not slow a device-bound eager at all; then the
    verdict is ordinary and its speedup no higher than the honest kernel's."""
    honest = evaluate(session, "good_relu_scale")["profile"]
    busy = evaluate(session, "attack_busy_threads")["profile"]
    assert busy["eager_ms"] == honest["eager_ms"]
    held = codes(busy) & {"timing_drift", "timing_inconsistent"}
    assert held or busy["speedup_vs_eager"] <= honest["speedup_vs_eager"] * 1.1, (honest, busy)


# ---- replies the judge cannot read (issue 29, class 4) -------------------------------------------


@pytest.mark.parametrize("name", ["attack_malformed_reply", "attack_deep_reply"])
def test_a_reply_of_any_shape_is_a_process_exit(session, name):
    """{"outputs": 7}, or a 400 KB frame of nested brackets, in place of a trial's reply."""
    result = verify(session, name)
    assert not result["ok"] and "process_exit" in codes(result), result
    assert result["failed_by"] == "candidate"
    assert "broke the protocol" in result["error"], result


# ---- problems ------------------------------------------------------------------------------------


def test_problem_uploads_that_attack_at_import_are_contained():
    secret = f"private-source-{uuid.uuid4().hex}"
    canary = Path("/tmp") / f"canary-{secret}.sqlite3"
    import sqlite3

    with sqlite3.connect(canary) as db:
        db.execute("create table problems_problem (source text)")
        db.execute("insert into problems_problem values (?)", (secret,))
    db.close()
    since = time.time() - 1
    try:
        for name in ("attack_shell_at_import", "attack_reads_database"):
            report = validation.validate(problem_source(name), "cuda", LOOSE)
            assert report.ok, (name, report.reasons)
            assert secret not in json.dumps(report.to_dict())
        assert escaped(since) == []
    finally:
        canary.unlink(missing_ok=True)


def test_a_problem_whose_runner_replies_nonsense_is_blamed_on_the_problem():
    report = validation.validate(problem_source("attack_malformed_reply"), "cuda", LOOSE)
    assert not report.ok and report.failed_by == "problem", report
    assert "broke the protocol" in report.reasons[0], report.reasons


# ---- the command line, and the worker afterwards -------------------------------------------------


@pytest.mark.parametrize("name", ["attack_forges_result", "attack_kills_parent"])
def test_the_cli_exits_1_with_the_verdict(name):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_workers.harness",
            "evaluate",
            str(FIXTURES / "problems" / f"{PROBLEM}.py"),
            str(candidate_dir("cuda", name)),
            "--device",
            "cuda",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)
    assert "process_exit" in codes(verdict["verify"])


def test_the_worker_still_serves_after_the_attacks(session):
    verdict = evaluate(session, "good_relu_scale")
    assert verdict["verify"]["ok"] and verdict["profile"]["candidate_ms"] > 0


# ---- a compile cache that could serve the wrong binary ---------------------------------------

PUBLISHED_IMPL = """static __device__ __forceinline__ float relu_scale_one(float v, float scale) {
  return fmaxf(v, 0.0f) * scale;
}
"""


def test_a_fork_that_edits_only_an_included_cu_file_fails_verify(session):
    """attack_stale_include: relu_scale.cu is byte-identical to the published solution's and
    #includes relu_scale_impl.cu; the fork changed only that file, to write zeros. It must be
    judged on its own binary, so it fails where the published one passed."""
    submit(session, "attack_stale_include")
    fork_impl = session.read_file("kernels/relu_scale_impl.cu")
    source = session.workspace.root / "kernels" / "relu_scale.cu"
    source.write_text(source.read_text() + f"\n// {uuid.uuid4()}\n")  # compiled afresh below
    session.write_file("kernels/relu_scale_impl.cu", PUBLISHED_IMPL)
    published = session._compile_result()
    assert published.ok, published.log
    assert session.verify()["ok"]  # known-good: the published solution
    session.write_file("kernels/relu_scale_impl.cu", fork_impl)
    fork = session._compile_result()
    assert fork.ok and not fork.cached and fork.extension_dir != published.extension_dir
    result = session.verify()
    assert not result["ok"] and "mismatch" in codes(result), result
