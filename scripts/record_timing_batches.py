"""Records the judge's timed batches (claimed times and the judge's walls) of live cpu profiles,
one record per measurement attempt, for the clock check's tests on recorded batches
(tests/fixtures/timing/). Run it on the host whose noise is wanted, e.g. beside two CPU burners:

    python scripts/record_timing_batches.py out.json 3 \\
        honest=tests/fixtures/candidates/cpu/good_relu_scale \\
        forger_5ms=/path/to/a/5-ms/attack_forges_times
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge import profile as profile_mod
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.session import Session

PROBLEM = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "problems" / "relu_scale.py"


def main(out: str, evaluations: str, *candidates: str) -> None:
    records, judged = [], {"name": None}
    decide = profile_mod.clock_violations

    def recording(candidate, eager, device):
        found = decide(candidate, eager, device)
        records.append(
            {
                "candidate": judged["name"],
                "verdict_then": [v.code for v in found],
                "candidate_batches": {
                    "times_ms": candidate.times_ms,
                    "walls_ms": candidate.walls_ms,
                },
                "eager_batches": {"times_ms": eager.times_ms, "walls_ms": eager.walls_ms},
            }
        )
        return found

    profile_mod.clock_violations = recording
    named = dict(c.split("=", 1) for c in candidates)
    for _ in range(int(evaluations)):
        for name, path in named.items():
            judged["name"] = name
            with Session(PROBLEM.read_text(), device="cpu", protocol=LOOSE) as session:
                workspace.copy_candidate(session.workspace, Path(path))
                profile = session.evaluate()["profile"]
                print(name, profile["ok"], [v["code"] for v in profile["violations"]], flush=True)
    Path(out).write_text(json.dumps({"device": "cpu", "attempts": records}, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
