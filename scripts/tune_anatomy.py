"""Where a suite evaluation's fusion runs spent their tune steps, from a stack's database (the
SQLite file in gpu_suite_run.sh's state.tgz): per ended run, its first profile's speedup over
eager, then each tune call's variants, best speedup over eager and seconds, as docs/benchmarks.md
shows them; then the GPU lock each judged step held and waited for.

    python3 scripts/tune_anatomy.py webapp.sqlite3
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
from datetime import datetime

RUNS = """select r.id, p.title from runs_run r join problems_problem p on p.id = r.problem_id
where r.status = 'succeeded' order by r.id"""
EVENTS = "select kind, at, payload from runs_traceevent where run_id = ? order by seq"
WAITING = {"lock wait", "candidate ready", "reference ready"}


def run_row(db: sqlite3.Connection, run_id: int, title: str) -> str:
    first, calls, called_at, count = None, [], None, 0
    for kind, at, payload in db.execute(EVENTS, (run_id,)):
        event = json.loads(payload)
        if kind == "tool_call":
            called_at = datetime.fromisoformat(at)
        elif kind == "tool_result" and event["name"] == "profile" and first is None:
            first = (event.get("verdict") or {}).get("speedup_vs_eager")
        elif kind == "tool_result" and event["name"] == "tune":
            variants = (event.get("verdict") or {}).get("variants") or []
            best = max((v.get("speedup_vs_eager") or 0.0 for v in variants), default=0.0)
            seconds = (datetime.fromisoformat(at) - called_at).total_seconds()
            calls.append(f"({len(variants)}, {best:.3f}, {seconds:.0f})")
            count += len(variants)
    shown = f"{first:.3f}" if isinstance(first, float) else "-"
    return f"| {title.split('/')[-1]} | {shown} | {', '.join(calls) or 'none'} | {count} |"


def lock_figures(db: sqlite3.Connection) -> str:
    held, waited = [], []
    query = """select e.payload from runs_traceevent e join runs_run r on r.id = e.run_id
    where e.kind = 'candidate' and r.status = 'succeeded'"""
    for (payload,) in db.execute(query):
        phases = (json.loads(payload).get("verify") or {}).get("phases_s") or {}
        if phases:
            waited.append(phases.get("lock wait", 0.0))
            held.append(sum(v for k, v in phases.items() if k not in WAITING))
    if not held:
        return "no judged steps"
    p90 = sorted(held)[int(0.9 * len(held))]
    return (
        f"{len(held)} judged steps: the GPU lock held a median {statistics.median(held):.1f} s "
        f"(p90 {p90:.1f} s), waited for a median {statistics.median(waited):.1f} s"
    )


def main() -> int:
    db = sqlite3.connect(sys.argv[1])
    print(
        "| problem | first profile vs eager | tune calls (variants, best vs eager, s) | variants |"
    )
    print("| --- | --- | --- | --- |")
    for run_id, title in db.execute(RUNS).fetchall():
        print(run_row(db, run_id, title))
    print()
    print(lock_figures(db))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
