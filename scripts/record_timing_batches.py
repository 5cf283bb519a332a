"""The judge's timed batches, for deciding the clock check's bounds on recorded numbers
(tests/fixtures/timing/; the recorder is gpu_workers/harness/judge/clock_record.py).

Record live cpu profiles on the host whose noise is wanted (e.g. beside two CPU burners), one
record per measurement attempt, into a fixture file:

    python scripts/record_timing_batches.py record out.json 3 \\
        honest=tests/fixtures/candidates/cpu/good_relu_scale \\
        forger_5ms=/path/to/a/5-ms/attack_forges_times

Read what tests/gpu recorded (scripts/gpu_tests.sh writes $OUT/clock-records.jsonl): each
measurement's clock check again, with how close it came to its bounds, closest first:

    python scripts/record_timing_batches.py margins clock-records.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from gpu_workers.harness.build import workspace
from gpu_workers.harness.judge import profile as profile_mod
from gpu_workers.harness.judge.clock_record import CLOCK_RECORD_ENV
from gpu_workers.harness.judge.judge import Batches
from gpu_workers.harness.judge.protocol import LOOSE
from gpu_workers.harness.session import Session

PROBLEM = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "problems" / "relu_scale.py"


def record(out: str, evaluations: str, *candidates: str) -> None:
    attempts = []
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp) / "records.jsonl"
        os.environ[CLOCK_RECORD_ENV] = str(lines)
        for _ in range(int(evaluations)):
            for name, path in (c.split("=", 1) for c in candidates):
                with Session(PROBLEM.read_text(), device="cpu", protocol=LOOSE) as session:
                    workspace.copy_candidate(session.workspace, Path(path))
                    profile = session.evaluate()["profile"]
                codes = [v["code"] for v in profile["violations"]]
                print(name, profile["ok"], codes, flush=True)
                attempts += [{**r, "candidate": name} for r in _read(lines)[len(attempts) :]]
    Path(out).write_text(json.dumps({"device": "cpu", "attempts": attempts}, indent=1) + "\n")


def margins(records_path: str) -> None:
    """One line per measurement: its bounds' margins (negative: over the bound), closest first."""
    rows = []
    for r in _read(Path(records_path)):
        if not r["candidate_batches"]["walls_ms"] or not r["eager_batches"]["walls_ms"]:
            continue  # nothing was timed (the candidate failed its first timed call)
        check = profile_mod.clock_check(
            _batches(r["candidate_batches"]), _batches(r["eager_batches"]), r["device"]
        )
        if check is None:
            continue
        rows.append(
            (
                min(check.bound_ms - check.gap_ms, check.floor_bound_ms - check.floor_gap_ms),
                f"{check.claimed_ms:8.3f} {check.gap_ms:7.3f}/{check.bound_ms:<7.3f} "
                f"{check.floor_gap_ms:7.3f}/{check.floor_bound_ms:<7.3f} {check.noise_ms:6.3f} "
                f"{check.rounds:5d}  {','.join(r['verdict_then']) or '-'}  {r['context']}",
            )
        )
    print("margin ms  claimed  gap/bound        floor/bound      noise rounds  verdict  where")
    for margin, line in sorted(rows):
        print(f"{margin:9.3f} {line}")


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _batches(side: dict) -> Batches:
    batches = Batches()
    per_batch = len(side["times_ms"]) // len(side["walls_ms"])
    for i, wall in enumerate(side["walls_ms"]):
        batches.add(side["times_ms"][i * per_batch : (i + 1) * per_batch], wall)
    return batches


if __name__ == "__main__":
    {"record": record, "margins": margins}[sys.argv[1]](*sys.argv[2:])
