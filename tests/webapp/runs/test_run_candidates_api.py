"""GET /api/runs/<id>/candidates, /candidates/<seq> and /bundle: a run's candidates, one with its
sources and verdict, and the best (or a chosen) verified one as a zip; 404 for those who cannot
see the run. RunOut says how many attempts the run took and which candidate is its best."""

from __future__ import annotations

import io
import zipfile

import pytest

from tests.conftest import candidate_dir
from tests.webapp.conftest import api_client, make_problem, make_run
from webapp.runs.models import Candidate

VERDICT = {
    "verify": {"ok": True, "trials": 5, "max_abs_err": 0.0, "violations": []},
    "profile": {"ok": True, "speedup_vs_eager": 2.5, "speedup_vs_compile": 1.25},
    "environment": {"device": "cpu", "gpu": None},
    "protocol": {"name": "loose", "atol": 0.01, "rtol": 0.01, "trials": 5},
}
WRONG_VERDICT = {"verify": {"ok": False, "error": "max abs err 1.0"}, "profile": None}


def fixture_sources(name: str) -> dict[str, str]:
    root = candidate_dir("cpu", name)
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def make_candidates(run) -> tuple[Candidate, Candidate, Candidate]:
    """1: wrong; 2: verified, the best; 3: verified, slower."""
    wrong = Candidate.objects.create(
        run=run, seq=1, sources=fixture_sources("wrong_result"), verdict=WRONG_VERDICT
    )
    best = Candidate.objects.create(
        run=run,
        seq=2,
        sources=fixture_sources("good_relu_scale"),
        verdict=VERDICT,
        verified=True,
        speedup_vs_compile=1.25,
    )
    slower = Candidate.objects.create(
        run=run,
        seq=3,
        sources={**best.sources, "kernels/relu_scale.cpp": "// slower\n"},
        verdict=VERDICT,
        verified=True,
        speedup_vs_compile=0.5,
    )
    run.best_candidate = best
    run.best_speedup_vs_compile = 1.25
    run.save()
    return wrong, best, slower


@pytest.fixture
def run(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    run.claim("host-a:1")
    return run


def test_it_lists_the_candidates_without_their_sources(alice, run):
    make_candidates(run)
    r = api_client(alice).get(f"/api/runs/{run.pk}/candidates")
    assert r.status_code == 200
    body = r.json()
    assert [(c["seq"], c["verified"], c["speedup_vs_compile"]) for c in body] == [
        (1, False, None),
        (2, True, 1.25),
        (3, True, 0.5),
    ]
    assert body[1]["files"] == sorted(fixture_sources("good_relu_scale"))
    assert all("sources" not in c and "verdict" not in c for c in body)


def test_it_shows_one_candidate_with_its_sources_and_verdict(alice, run):
    make_candidates(run)
    r = api_client(alice).get(f"/api/runs/{run.pk}/candidates/2")
    assert r.status_code == 200
    body = r.json()
    assert body["seq"] == 2 and body["verified"] is True
    assert body["sources"] == fixture_sources("good_relu_scale")
    assert {"model_new.py", "kernels/relu_scale.cpp"} <= set(body["files"])
    assert body["verdict"] == VERDICT

    missing = api_client(alice).get(f"/api/runs/{run.pk}/candidates/9")
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"no candidate 9 of a run {run.pk} that you can see"


def test_it_hides_the_candidates_of_a_private_run(charlie, run):
    make_candidates(run)
    client = api_client(charlie)
    for path in ("candidates", "candidates/2", "bundle", "bundle?candidate=2"):
        r = client.get(f"/api/runs/{run.pk}/{path}")
        assert r.status_code == 404, path
        assert "that you can see" in r.json()["detail"], path


def test_it_shows_the_candidates_of_a_public_run_to_anyone(alice, charlie, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale, public=True))
    make_candidates(run)
    client = api_client(charlie)
    assert client.get(f"/api/runs/{run.pk}/candidates/2").json()["verdict"] == VERDICT
    assert client.get(f"/api/runs/{run.pk}/bundle").status_code == 200


def zip_names(response) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.testzip() is None
        return archive.namelist()


def test_it_downloads_the_best_candidate_as_a_zip(alice, run):
    _, best, _ = make_candidates(run)
    r = api_client(alice).get(f"/api/runs/{run.pk}/bundle")
    assert r.status_code == 200
    assert r["Content-Type"] == "application/zip"
    name = f"kernelarena-run{run.pk}-candidate2"
    assert r["Content-Disposition"] == f'attachment; filename="{name}.zip"'
    names = zip_names(r)
    assert f"{name}/model_new.py" in names and f"{name}/kernels/relu_scale.cpp" in names
    with zipfile.ZipFile(io.BytesIO(r.content)) as archive:
        kernel = archive.read(f"{name}/kernels/relu_scale.cpp").decode()
    assert kernel == best.sources["kernels/relu_scale.cpp"]


def test_it_downloads_a_chosen_verified_candidate(alice, run):
    make_candidates(run)
    client = api_client(alice)
    r = client.get(f"/api/runs/{run.pk}/bundle?candidate=3")
    assert r.status_code == 200
    assert f'filename="kernelarena-run{run.pk}-candidate3.zip"' in r["Content-Disposition"]
    assert f"kernelarena-run{run.pk}-candidate3/kernels/relu_scale.cpp" in zip_names(r)

    for seq in (1, 9):  # unverified, and no such candidate
        r = client.get(f"/api/runs/{run.pk}/bundle?candidate={seq}")
        assert r.status_code == 404
        assert r.json()["detail"] == f"run {run.pk} has no verified candidate {seq} to download"


def test_it_has_no_bundle_without_a_verified_best_candidate(alice, run):
    Candidate.objects.create(run=run, seq=1, sources=fixture_sources("wrong_result"))
    r = api_client(alice).get(f"/api/runs/{run.pk}/bundle")
    assert r.status_code == 404
    assert r.json()["detail"] == f"run {run.pk} has no verified best candidate to download"


def test_it_gives_the_attempts_and_the_best_candidate_of_a_run(alice, run):
    client = api_client(alice)
    before = client.get(f"/api/runs/{run.pk}").json()
    assert (before["attempts"], before["best_candidate"]) == (1, None)

    make_candidates(run)

    after = client.get(f"/api/runs/{run.pk}").json()
    assert (after["attempts"], after["best_candidate"]) == (1, 2)
    (listed,) = client.get("/api/runs").json()
    assert (listed["attempts"], listed["best_candidate"]) == (1, 2)
