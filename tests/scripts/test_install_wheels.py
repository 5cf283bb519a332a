"""scripts/install_wheels.py: what a lent GPU machine installs from the wheels carried to it."""

from __future__ import annotations

import importlib.metadata
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
wanted = runpy.run_path(str(ROOT / "scripts" / "install_wheels.py"))["wanted"]


def wheel(folder: Path, name: str, version: str) -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    path.touch()
    return path


def test_only_what_the_host_lacks_or_has_older_is_installed(tmp_path):
    have = importlib.metadata.version("pytest")
    missing = wheel(tmp_path, "no_such_distribution_here", "1.0")
    newer = wheel(tmp_path, "pytest", "999.0")
    same = wheel(tmp_path, "pytest", have)
    older = wheel(tmp_path, "pytest", "1.0")
    assert wanted([missing, newer, same, older]) == [missing, newer]


def test_a_wheel_named_with_dashes_normalised_is_matched_to_its_distribution(tmp_path):
    # pytest_xdist's wheel is the distribution pytest-xdist, which the test environment has
    have = importlib.metadata.version("pytest-xdist")
    assert wanted([wheel(tmp_path, "pytest_xdist", have)]) == []
    # known-bad: a name no distribution has is installed
    assert len(wanted([wheel(tmp_path, "pytest_xdist_not_this_one", have)])) == 1
