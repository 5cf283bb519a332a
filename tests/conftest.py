"""Shared test set-up: a persistent compile cache (objects are content-addressed, so reuse across
runs is safe and saves minutes), and the fixture problems and candidates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
os.environ.setdefault("KERNELARENA_CACHE", str(REPO / ".cache" / "kernelarena-test"))


def problem_source(name: str) -> str:
    return (FIXTURES / "problems" / f"{name}.py").read_text()


def candidate_dir(target: str, name: str) -> Path:
    return FIXTURES / "candidates" / target / name


@pytest.fixture
def drift_of_a_quiet_host(monkeypatch):
    """For tests that need an honest candidate's profile to pass in order to test something
    else (a run that succeeds, a grade that ranks), not drift: eager beside the candidate counts
    as running as it ran alone, so a busy CI host cannot hold the profile for review. Drift's
    own decision is tested on a busy host's batches (tests/gpu_workers/harness/test_profile.py),
    and every violation of the candidate's (its clock, its timed outputs, the floor) still
    fails. The judge decides drift in this process, so the runners' processes need nothing."""
    from gpu_workers.harness.judge import profile

    monkeypatch.setattr(profile.Measurement, "drift", lambda self: 1.0)


@pytest.fixture
def regrade_of_a_quiet_host(monkeypatch):
    """For tests that need a re-grade to rank in order to test something else: its time counts
    as agreeing with the run's own, as two measurements of a quiet host do, so a busy CI host
    (whose cores a test's other processes share) cannot hold it for a disagreement. The
    decision itself is tested on given figures (tests/gpu_workers/test_regrade.py); the re-grade
    still verifies on secret seeds and every violation still holds it."""
    from gpu_workers import regrade

    monkeypatch.setattr(regrade, "disagree", lambda own, measured, limit: False)
