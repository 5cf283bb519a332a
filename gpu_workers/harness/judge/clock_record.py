"""The judge's timed batches of each measurement, appended as JSON Lines to the file that
KERNELARENA_CLOCK_RECORD names (unset: nothing is written).

The clock check's bounds (profile.clock_check) are decided on recorded batches, never on a guess:
an honest candidate that a bound holds, or a forger that one lets through, is kept as a record and
its decision becomes a test on those numbers (tests/fixtures/timing/). tests/gpu records every
measurement of a run this way (scripts/gpu_tests.sh). One record per measurement attempt, in the
shape of the fixtures' attempts: which measurement, the verdict then, each side's batches.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from gpu_workers.harness.judge.judge import Batches

CLOCK_RECORD_ENV = "KERNELARENA_CLOCK_RECORD"


def batches_record(batches: Batches) -> dict:
    return {"times_ms": batches.times_ms, "walls_ms": batches.walls_ms}


def append(what: Callable[[], dict], device: str, measured) -> None:
    """Appends one measurement (profile.Measurement with its batches) where the environment
    asks for it; `what()` says which candidate and problem it was (asked only then: it reads
    and hashes the sources, which no judged step should pay for nothing)."""
    target = os.environ.get(CLOCK_RECORD_ENV)
    if not target or measured.batches is None:
        return
    record = {
        **what(),
        # pytest names the running test in its process's environment: the candidate's name
        "context": os.environ.get("PYTEST_CURRENT_TEST", ""),
        "device": device,
        "verdict_then": [v.code for v in measured.violations],
        "clock": measured.clock,
        **measured.batches,
    }
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:  # one line per record, whole, however many processes append
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(json.dumps(record) + "\n")
