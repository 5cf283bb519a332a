"""A suite as a data set: JSON Lines, one record per problem, loadable with
`datasets.load_dataset("json", data_files=...)` (docs/synthesis.md has the format). Beside the
agent's trajectory export (agent/trajectory.py): problems here, what agents did with them there.
"""

from __future__ import annotations

import json
from pathlib import Path

from webapp.suites.models import Suite

FILE = "problems.jsonl"
FORMAT = "kernelarena-problems/1"


def records(suite: Suite) -> list[dict]:
    rows = []
    for entry in suite.entries.select_related("problem"):
        problem = entry.problem
        rows.append(
            {
                "format": FORMAT,
                "suite": suite.name,
                "name": entry.name,
                "position": entry.position,
                "source": problem.source,
                "sha256": problem.sha256,
                "validation": {
                    "status": problem.status,
                    "reasons": list(problem.reasons),
                    "validated_on": problem.validated_on,
                    "eager_ms": problem.eager_ms,
                    "compile_ms": problem.compile_ms,
                    "flops": problem.flops,
                    "bytes_moved": problem.bytes_moved,
                    "sol_ms": problem.sol_ms,
                },
                "provenance": entry.provenance,  # {} for an imported file
            }
        )
    return rows


def write(suite: Suite, folder: Path | str) -> Path:
    """Writes FOLDER/problems.jsonl (replacing it) and returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w") as out:
        for row in records(suite):
            out.write(json.dumps(row, sort_keys=True) + "\n")
    partial.replace(path)
    return path
