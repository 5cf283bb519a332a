"""python -m agent: one line per step, DIR/best, DIR/verdict.json, DIR/trajectory.jsonl."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "tests" / "fixtures" / "problems" / "relu_scale.py"


def agents_file(tmp_path: Path, actions: list[dict]) -> Path:
    (tmp_path / "script.json").write_text(json.dumps(actions))
    path = tmp_path / "agents.toml"
    path.write_text('[agents.replay]\nbackend = "scripted"\nscript = "script.json"\n')
    return path


def optimize(tmp_path: Path, actions: list[dict]) -> int:
    pytest.importorskip("gpu_workers.harness.session")
    return main(
        [
            "optimize",
            str(PROBLEM),
            "--agent",
            "replay",
            "--device",
            "cpu",
            "--agents-file",
            str(agents_file(tmp_path, actions)),
            "--out",
            str(tmp_path / "out"),
        ]
    )


def test_a_run_without_a_result_exits_1_and_writes_its_files(tmp_path, capsys):
    code = optimize(tmp_path, [{"tool": "list_files"}, {"tool": "finish"}])
    assert code == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("turn   1/30 | list_files ok | no verified candidate yet |")
    assert lines[1].startswith("FINISHED")
    out = tmp_path / "out"
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "finished" and verdict["best"] is None and verdict["reward"] == -1
    assert "messages" not in verdict
    assert len((out / "trajectory.jsonl").read_text().splitlines()) == 1
    assert not (out / "best").exists()


@pytest.mark.usefixtures("drift_of_a_quiet_host")  # finish profiles it: passes on a busy host
def test_a_verified_kernel_exits_0_with_it_in_best(tmp_path, capsys, good_relu_scale):
    writes = [
        {"tool": "write_file", "args": {"path": p, "content": t}}
        for p, t in good_relu_scale.items()
    ]
    code = optimize(tmp_path, [{"calls": writes}, {"tool": "verify"}, {"tool": "finish"}])
    assert code == 0
    best = tmp_path / "out" / "best"
    assert {p: (best / p).read_text() for p in good_relu_scale} == good_relu_scale
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert verdict["best"]["verified"] and verdict["reward"] >= 1
    assert "best " in capsys.readouterr().out.splitlines()[-2]  # the FINISHED line's speedup


def test_an_unknown_agent_is_unusable_input(tmp_path, capsys):
    code = main(
        [
            "optimize",
            str(PROBLEM),
            "--agent",
            "nobody",
            "--agents-file",
            str(agents_file(tmp_path, [])),
        ]
    )
    assert code == 2 and "no agent 'nobody'" in capsys.readouterr().err


def test_it_runs_as_a_module_and_lists_agents():
    listing = subprocess.run(
        [sys.executable, "-m", "agent", "agents"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    names = [line.split()[0] for line in listing.stdout.splitlines()]
    assert {"vllm-kernel", "vllm-text", "openai-frontier", "scripted-demo"} <= set(names)


def test_a_model_server_that_is_not_there_exits_3_naming_it(tmp_path, capsys):
    pytest.importorskip("gpu_workers.harness.session")
    with socket.socket() as probe:  # a port on which nothing listens
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[agents.gone]\nbackend = "openai"\nmodel = "m"\nbase_url = "{endpoint}"\n'
        "max_retries = 1\nbackoff_s = 0.01\n"
    )
    argv = ["optimize", str(PROBLEM), "--agent", "gone", "--device", "cpu"]
    code = main([*argv, "--agents-file", str(path), "--out", str(tmp_path / "out")])
    assert code == 3  # the model server failed; 1 would say the agent found nothing
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert verdict["status"] == "backend_error" and endpoint in verdict["detail"]
    assert "BACKEND_ERROR" in capsys.readouterr().out


@pytest.mark.usefixtures("drift_of_a_quiet_host")
def test_a_tune_step_says_how_many_variants_were_timed(tmp_path, capsys, good_relu_scale):
    writes = [
        {"tool": "write_file", "args": {"path": p, "content": t}}
        for p, t in good_relu_scale.items()
    ]
    model_new = good_relu_scale["model_new.py"]
    blocked = model_new.replace("x, self.scale)", "x, self.scale, 1024)")
    wrong = model_new.replace("x, self.scale)", "x, 2 * self.scale)")
    variants = [
        {"name": "block=1024", "files": {"model_new.py": blocked}},
        {"name": "wrong", "files": {"model_new.py": wrong}},
    ]
    optimize(tmp_path, [{"calls": writes}, {"tool": "tune", "args": {"variants": variants}}])
    lines = capsys.readouterr().out.splitlines()
    # while the call ran, a line for each variant judged, then the turn's line
    judged = [line.split(";")[0] for line in lines[1:3]]
    assert judged == [f"turn   2/30 (tune: {n} of 2 variants judged" for n in (1, 2)], lines
    line = lines[3]
    # the wrong one is never timed; the other is, unless a busy host held its clock
    assert re.search(r"^turn   2/30 \| tune [01]/2 timed(, fastest \d+\.\d\dx)? \|", line), line
