"""Installs wheels carried to a lent GPU machine, which has no package registry, into a folder
that goes first on PYTHONPATH:

    python3 scripts/install_wheels.py TARGET FOLDER [FOLDER ...]

A wheel is installed only where the host lacks its distribution or has an older one: the host's
torch keeps the packages it was built with (numpy, sympy, jinja2...), and a carried folder may
hold more than a host needs (pytest, which the host has) without shadowing it. The wheels are
installed without their dependencies (pip cannot resolve without a registry), so a folder holds
a whole closure, as `pip download` makes one (docs/benchmarks.md names the commands).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # a host without packaging still has pip's copy
    from pip._vendor.packaging.version import InvalidVersion, Version


def wanted(wheels: list[Path]) -> list[Path]:
    """The wheels whose distribution the host lacks, or has at an older version."""
    chosen = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            chosen.append(wheel)
            continue
        try:
            if Version(have) < Version(version):
                chosen.append(wheel)
        except InvalidVersion:
            pass  # a local build the host made: keep it
    return chosen


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    target, folders = argv[0], [Path(f) for f in argv[1:]]
    wheels = [w for folder in folders for w in sorted(folder.glob("*.whl"))]
    chosen = wanted(wheels)
    print(f"{len(chosen)} of {len(wheels)} wheels to install: {[w.name for w in chosen]}")
    if not chosen:
        return 0
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    command += ["--no-compile", "--no-cache-dir", "--upgrade", "--target", target]
    return subprocess.run(command + [str(w) for w in chosen]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
