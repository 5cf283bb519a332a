"""Shared test set-up: a persistent compile cache (objects are content-addressed, so reuse across
runs is safe and saves minutes), and the fixture problems and candidates."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
os.environ.setdefault("KERNELARENA_CACHE", str(REPO / ".cache" / "kernelarena-test"))


def problem_source(name: str) -> str:
    return (FIXTURES / "problems" / f"{name}.py").read_text()


def candidate_dir(target: str, name: str) -> Path:
    return FIXTURES / "candidates" / target / name
