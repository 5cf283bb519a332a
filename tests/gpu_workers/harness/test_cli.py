"""python -m gpu_workers.harness: exit 0 valid/correct, 1 rejected, 2 unusable input."""

import json
import subprocess
import sys

from tests.conftest import FIXTURES, candidate_dir

PROBLEMS = FIXTURES / "problems"


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_workers.harness", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_correct_candidate_exits_0_with_the_verdict_as_json():
    done = harness(
        "evaluate",
        str(PROBLEMS / "relu_scale.py"),
        str(candidate_dir("cpu", "good_relu_scale")),
        "--device",
        "cpu",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert set(verdict) >= {"compile", "verify", "profile", "environment", "protocol", "sandbox"}
    assert verdict["verify"]["ok"] and verdict["profile"]["candidate_ms"] > 0


def test_a_wrong_candidate_exits_1_and_says_why():
    done = harness(
        "evaluate",
        str(PROBLEMS / "relu_scale.py"),
        str(candidate_dir("cpu", "wrong_result")),
        "--device",
        "cpu",
    )
    assert done.returncode == 1
    assert "verify failed" in done.stdout and "mismatch" in done.stdout


def test_a_degenerate_problem_exits_1_with_its_reason():
    done = harness("validate", str(PROBLEMS / "degenerate_constant.py"), "--device", "cpu")
    assert done.returncode == 1 and "constant" in done.stdout


def test_unusable_input_exits_2_with_one_line_on_stderr(tmp_path):
    missing = harness("validate", str(tmp_path / "nope.py"), "--device", "cpu")
    no_model_new = harness("evaluate", str(PROBLEMS / "relu_scale.py"), str(tmp_path))
    bad_protocol = harness("validate", str(PROBLEMS / "relu_scale.py"), "--protocol", "fast")
    for done, words in (
        (missing, "does not exist"),
        (no_model_new, "no model_new.py"),
        (bad_protocol, "unknown protocol"),
    ):
        assert done.returncode == 2 and words in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_a_candidate_with_a_stray_file_is_unusable(tmp_path):
    (tmp_path / "model_new.py").write_text("class ModelNew: ...\n")
    (tmp_path / "setup.py").write_text("")
    done = harness("evaluate", str(PROBLEMS / "relu_scale.py"), str(tmp_path), "--device", "cpu")
    assert done.returncode == 2 and "cannot be written" in done.stderr
