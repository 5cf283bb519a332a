"""A runner forked from a fork server is confined as a freshly started one is: it sees its own
stage and the workspace, read-only, and no other candidate's stage nor the reference's folder;
it gets a private /tmp, its own pid namespace and no capabilities. A candidate whose import
reports what it can reach (in the error its load raises) is the probe; the known-bad beside it
is a runner forked with the whole stages folder in its view, which the probe catches."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
import torch

from gpu_workers.harness.judge import failure, runner_process
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.judge.runner_process import HARNESS, RunnerDied, RunnerFailed
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.sandbox.census import descendants
from tests.conftest import problem_source

PROBE = """
import json, os
STAGES, REFERENCE = {stages!r}, {reference!r}
seen = {{"stages": sorted(os.listdir(STAGES)), "reference": sorted(os.listdir(REFERENCE))}}
for name in seen["stages"]:
    try:
        seen["read " + name] = sorted(os.listdir(os.path.join(STAGES, name)))
    except OSError as exc:
        seen["read " + name] = exc.errno
try:
    open(os.path.join({own!r}, "written"), "w")
    seen["write own stage"] = "written"
except OSError as exc:
    seen["write own stage"] = exc.errno
seen["tmp"] = sorted(os.listdir("/tmp"))
open("/tmp/left-by-" + os.path.basename({own!r}), "w").close()
seen["caps"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff")]
seen["processes"] = sorted(name for name in os.listdir("/proc") if name.isdigit())
raise RuntimeError("SEEN" + json.dumps(seen) + "END")
"""


@pytest.fixture
def folders(tmp_path):
    """A session's layout: the workspace, two stages (the other one holding a built file) and
    the reference's folder."""
    workspace, stages, reference = tmp_path / "ws", tmp_path / "candidates", tmp_path / "ref"
    for folder in (workspace, stages / "1", stages / "2", reference):
        folder.mkdir(parents=True)
    (stages / "2" / "other.so").write_bytes(b"\0")
    (reference / "model.py").write_text(problem_source("relu_scale"))
    (workspace / "model.py").write_text(problem_source("relu_scale"))
    return workspace, stages, reference


@pytest.fixture
def server(folders):
    workspace, stages, reference = folders
    view = sandbox.View(readable=(workspace, stages, reference))
    started = runner_process.start_fork_server("cpu", view, workspace, 120)
    try:
        started.ready(300)
        yield started
    finally:
        started.close()


def _seen(server, folders, stage: Path, view: sandbox.View | None = None) -> dict:
    workspace, stages, reference = folders
    (workspace / "model_new.py").write_text(
        PROBE.format(stages=str(stages), reference=str(reference), own=str(stage))
    )
    view = view or sandbox.View(readable=(workspace, stage))
    runner = runner_process.RunnerProcess(
        "candidate", "cpu", view, workspace, 120, frozen=True, server=server
    )
    with runner:
        runner.stage = stage
        with pytest.raises(RunnerFailed) as raised:
            runner_process.load_candidate(runner, str(stage), workspace, "cpu", LOOSE)
    found = re.search(r"SEEN(.*)END", str(raised.value))
    assert found, raised.value
    return json.loads(found.group(1))


def test_a_forked_runner_sees_its_own_stage_alone_and_nothing_of_the_reference(server, folders):
    workspace, stages, _ = folders
    first = _seen(server, folders, stages / "1")
    assert first["stages"] == ["1"] and first["reference"] == []
    assert isinstance(first["write own stage"], int)  # read-only (EROFS)
    assert first["caps"] == ["0000000000000000"]
    assert first["processes"] == ["1", "2"]  # its pid namespace's init and itself
    second = _seen(server, folders, stages / "2")
    assert second["stages"] == ["2"] and second["read 2"] == ["other.so"]
    assert "left-by-1" not in second["tmp"]  # the first runner's /tmp was its own


def test_known_bad_a_runner_forked_with_the_whole_stages_folder_sees_the_others(server, folders):
    workspace, stages, _ = folders
    exposed = _seen(server, folders, stages / "1", sandbox.View(readable=(workspace, stages)))
    assert exposed["stages"] == ["1", "2"] and exposed["read 2"] == ["other.so"]


def test_a_view_outside_the_servers_is_refused(server, folders, tmp_path):
    workspace, _, _ = folders
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(ValueError, match="part of its server's view"):
        runner_process.RunnerProcess(
            "candidate", "cpu", sandbox.View(readable=(elsewhere,)), workspace, 60, server=server
        )


def test_a_forked_runner_that_dies_is_reported_with_its_signal_and_stopped(server, folders):
    workspace, stages, _ = folders
    runner = runner_process.prepare_candidate(workspace, stages / "1", "cpu", 60, server=server)
    with runner:
        runner.settle()
        assert runner.forked and runner.call("prepare") == {}
        # C1, the pid namespace's init, then the runner
        _, _, runner_pid = descendants(runner.proc.pid)
        os.kill(runner_pid, signal.SIGKILL)
        with pytest.raises(RunnerDied, match="killed by SIGKILL"):
            runner.call("prepare")
    assert runner.proc.poll() is not None


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host whose torch has no GPU")
def test_a_device_the_candidates_process_cannot_use_is_the_machines_failure(server, folders):
    """A candidate process uses the device first before any candidate code runs in it: a full
    device (the runs sharing it filled it) fails there, and that is the machine's failure,
    never the candidate's. Here the process asks a GPU-less host for cuda. Known-bad: while the
    device was first used inside `load`, the same failure was blamed on the candidate."""
    workspace, stages, _ = folders
    (workspace / "model_new.py").write_text("raise RuntimeError('candidate code ran')\n")
    runner = runner_process.prepare_candidate(workspace, stages / "1", "cpu", 60, server=server)
    with runner, pytest.raises(RunnerFailed) as raised:
        runner_process.load_candidate(runner, str(stages / "1"), workspace, "cuda", LOOSE)
    assert raised.value.role == HARNESS and "candidate code ran" not in str(raised.value)
    assert failure.of_runner_error(raised.value) == failure.INFRASTRUCTURE
    assert "could not use the cuda device" in str(raised.value)
