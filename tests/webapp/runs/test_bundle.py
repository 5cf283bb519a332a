"""The downloadable bundle: its layout and report, path safety, and build.py run for real on the
cpu target (a good candidate verifies, a wrong one mismatches, a broken one fails to build)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpu_workers.harness.vocabulary import sources_digest
from tests.conftest import candidate_dir
from tests.webapp.conftest import make_problem, make_run
from webapp.runs.bundle import (
    NotTheJudgedSources,
    build_bundle,
    bundle_filename,
    bundle_response,
    safe_source_path,
)
from webapp.runs.models import Candidate, EventKind, TraceEvent

REPO = Path(__file__).resolve().parents[3]

VERDICT = {
    "compile": {"ok": True, "seconds": 1.2, "cached": False, "log": ""},
    "verify": {"ok": True, "trials": 5, "max_abs_err": 0.0, "violations": []},
    "profile": {"ok": True, "speedup_vs_eager": 2.5, "speedup_vs_compile": 1.25},
    "environment": {"device": "cpu", "gpu": None, "torch": "2.13.0"},
    "protocol": {"name": "loose", "atol": 0.01, "rtol": 0.01, "trials": 5},
}


def fixture_sources(name: str) -> dict[str, str]:
    root = candidate_dir("cpu", name)
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def run(alice, relu_scale):
    return make_run(alice, make_problem(alice, relu_scale))


def make_candidate(run, name: str, seq: int = 1, **fields) -> Candidate:
    return Candidate.objects.create(run=run, seq=seq, sources=fixture_sources(name), **fields)


def extract(data: bytes, into: Path) -> Path:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(into)
    (folder,) = into.iterdir()
    return folder


def run_build(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)  # the bundle stands alone
    return subprocess.run(
        [sys.executable, "build.py", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_it_names_and_lays_out_the_bundle(run):
    candidate = make_candidate(run, "good_relu_scale", seq=3, verified=True, verdict=VERDICT)
    name = bundle_filename(candidate)
    assert name == f"kernelarena-run{run.pk}-candidate3.zip"
    data = build_bundle(candidate)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        read = {n: archive.read(n).decode() for n in names}
    top = name.removesuffix(".zip")
    assert names[0] == f"{top}/build.py"
    assert sorted(names) == sorted(
        f"{top}/{n}"
        for n in (
            "README.md",
            "report.json",
            "model.py",
            "model_new.py",
            "binding.cpp",
            "binding_registry.h",
            "build.py",
            "kernels/relu_scale.cpp",
            "kernels/relu_scale_binding.cpp",
        )
    )
    assert read[f"{top}/model.py"] == run.problem.source
    assert read[f"{top}/binding.cpp"] == (REPO / "skills/cpu/binding.cpp").read_text()
    assert read[f"{top}/build.py"] == (REPO / "webapp/runs/bundle_build.py").read_text()
    readme = read[f"{top}/README.md"]
    assert 10 <= len(readme.splitlines()) <= 20
    assert "python build.py --verify" in readme and "2.50x" in readme and "1.25x" in readme
    assert build_bundle(candidate) == data  # deterministic


def test_it_writes_the_report(run):
    run.prompt_tokens, run.cost_dollars = 1200, 0.5
    run.save()
    identity = {"name": "scripted-demo", "model": "none"}
    TraceEvent.objects.create(run=run, seq=1, kind=EventKind.THOUGHT, payload={"turn": 1})
    TraceEvent.objects.create(run=run, seq=2, kind=EventKind.STATUS, payload={"agent": identity})
    TraceEvent.objects.create(run=run, seq=3, kind=EventKind.STATUS, payload={"agent": "later"})
    TraceEvent.objects.create(run=run, seq=4, kind=EventKind.STATUS, payload={"turn": 7})
    first = make_candidate(run, "wrong_result", seq=1, verdict={"verify": {"ok": False}})
    best = make_candidate(
        run, "good_relu_scale", seq=2, verified=True, verdict=VERDICT, speedup_vs_compile=1.25
    )
    data = build_bundle(best)
    top = bundle_filename(best).removesuffix(".zip")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        report = json.loads(archive.read(f"{top}/report.json"))
    assert report["format"] == "kernelarena.bundle/1"
    assert report["run"]["id"] == run.pk and report["run"]["prompt_tokens"] == 1200
    assert report["run"]["started"] is None and report["run"]["status"] == "queued"
    assert report["problem"] == {
        "id": run.problem.pk,
        "title": run.problem.title,
        "sha256": run.problem.sha256,
    }
    assert report["candidate"] == {"seq": 2, "verified": True, "speedup_vs_compile": 1.25}
    assert report["target"] == "cpu"
    assert report["verdict"] == VERDICT
    assert report["protocol"] == VERDICT["protocol"]
    assert report["environment"] == VERDICT["environment"]
    assert report["agent"] == identity
    assert report["trajectory"] == {
        "turns": 7,
        "status": "queued",
        "candidates": [
            {"seq": 1, "verified": False, "speedup_vs_eager": None, "speedup_vs_compile": None},
            {"seq": 2, "verified": True, "speedup_vs_eager": 2.5, "speedup_vs_compile": 1.25},
        ],
    }
    # Without a recorded protocol, the run's protocol and its tolerance stand in.
    with zipfile.ZipFile(io.BytesIO(build_bundle(first))) as archive:
        top = bundle_filename(first).removesuffix(".zip")
        report = json.loads(archive.read(f"{top}/report.json"))
    assert report["protocol"] == {"name": "loose", "atol": 1e-2, "rtol": 1e-2}
    assert report["environment"] == {} and report["trajectory"]["turns"] == 7


def test_it_uses_the_cuda_templates_on_a_gpu_run(run):
    run.gpu_type = "h100"
    run.save()
    candidate = make_candidate(run, "good_relu_scale")
    top = bundle_filename(candidate).removesuffix(".zip")
    with zipfile.ZipFile(io.BytesIO(build_bundle(candidate))) as archive:
        report = json.loads(archive.read(f"{top}/report.json"))
        registry = archive.read(f"{top}/binding_registry.h").decode()
    assert report["target"] == "cuda" and report["agent"] is None
    assert registry == (REPO / "skills/cuda/binding_registry.h").read_text()


def test_it_keeps_stored_paths_inside_the_bundle_folder(run, tmp_path):
    sources = fixture_sources("good_relu_scale")
    hostile = {
        "../evil.py": "x",
        "/etc/x": "x",
        "kernels/../../evil.cpp": "x",
        "kernels/../binding.cpp": "x",
        "..\\evil.py": "x",
        "C:/evil.py": "x",
        "kernels\\..\\..\\evil.cpp": "x",
        "": "x",
        "build.py": "import os",  # only model_new.py and kernels/ come from the candidate
        "report.json": "{}",
        "kernels/ok.cpp": "// kept",
    }
    candidate = Candidate.objects.create(run=run, seq=1, sources={**sources, **hostile})
    data = build_bundle(candidate)
    top = bundle_filename(candidate).removesuffix(".zip")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        assert archive.read(f"{top}/build.py").decode().startswith('"""Builds this')
        assert json.loads(archive.read(f"{top}/report.json"))["format"]
    for name in names:
        assert name.startswith(f"{top}/"), name
        assert ".." not in name and "\\" not in name and ":" not in name, name
    assert f"{top}/kernels/ok.cpp" in names
    assert len(names) == len(set(names))
    folder = extract(data, tmp_path / "out")
    assert folder.name == top and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not list(tmp_path.rglob("evil*"))
    for path in ("../evil.py", "/etc/x", "kernels/../x.cpp", "kernels/", "kernels", "a/b.py"):
        assert safe_source_path(path) is None, path
    assert safe_source_path("kernels/relu.cu") == "kernels/relu.cu"


@pytest.mark.slow
def test_it_builds_and_verifies_a_good_candidate(run, tmp_path):
    candidate = make_candidate(run, "good_relu_scale", verified=True, verdict=VERDICT)
    folder = extract(build_bundle(candidate), tmp_path)
    done = run_build(folder, "--verify", "--device", "cpu")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert output.count(": ok, max abs err") == 5 and "verified" in output
    assert (folder / "build").is_dir()
    again = run_build(folder)  # plain build: reuses build/ and imports model_new
    assert again.returncode == 0, again.stdout + again.stderr
    assert "imported model_new.ModelNew" in again.stdout


@pytest.mark.slow
def test_it_reports_a_mismatch_of_a_wrong_candidate(run, tmp_path):
    candidate = make_candidate(run, "wrong_result")
    folder = extract(build_bundle(candidate), tmp_path)
    done = run_build(folder, "--verify", "--device", "cpu")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "MISMATCH" in output and "max abs err 1" in output and "FAILED" in output


@pytest.mark.slow
def test_it_fails_with_status_2_when_the_build_fails(run, tmp_path):
    candidate = make_candidate(run, "compile_error")
    folder = extract(build_bundle(candidate), tmp_path)
    done = run_build(folder, "--verify", "--device", "cpu")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "building kernel_ext failed" in done.stderr and "scal" in done.stderr


def judged(name: str) -> dict:
    """VERDICT as agent/tools.py records it: stamped with the digest of the judged sources."""
    digest = sources_digest(fixture_sources(name))
    return {
        **VERDICT,
        "verify": {**VERDICT["verify"], "sources_digest": digest},
        "profile": {**VERDICT["profile"], "sources_digest": digest},
    }


def test_it_builds_only_from_the_sources_that_were_judged(run):
    good = make_candidate(
        run, "good_relu_scale", seq=1, verified=True, verdict=judged("good_relu_scale")
    )
    assert build_bundle(good)  # the judged sources themselves
    # known-bad: the verdict of good_relu_scale over the sources of wrong_result
    swapped = make_candidate(
        run, "wrong_result", seq=2, verified=True, verdict=judged("good_relu_scale")
    )
    with pytest.raises(NotTheJudgedSources, match="not the ones its verify verdict judged"):
        build_bundle(swapped)
    response = bundle_response(swapped)
    assert response.status_code == 409 and b"no bundle is built" in response.content
