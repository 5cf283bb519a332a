"""What privilege separation costs: seconds per verify+profile step, with baselines cached, for
the same kernels under the harness before the judge (one sandboxed process per step, references
through files) and under the judge (a reference runner and a fresh candidate runner under
bubblewrap, tensors in lent buffers).

    PYTHONPATH=. python3 scripts/bench_isolation.py measure --tree DIR --label NAME --json OUT
    PYTHONPATH=. python3 scripts/bench_isolation.py render BEFORE.json AFTER.json --when YYYY-MM-DD

`measure` imports the harness of the checkout DIR (the older one from `git archive`), so both
are timed on the same machine in one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
# Two memory-bound kernels: a GEMM's max-autotune baseline alone takes minutes to measure.
KERNELS = [("relu_scale", "good_relu_scale"), ("row_sum", "good_row_sum")]
REPEATS = 3


def measure(tree: Path, label: str, device: str) -> dict:
    sys.path.insert(0, str(tree))
    os.environ.setdefault("KERNELARENA_CACHE", str(Path("/tmp") / f"ka-bench-{label}"))
    from gpu_workers.harness import settings
    from gpu_workers.harness.build import workspace
    from gpu_workers.harness.judge import environment
    from gpu_workers.harness.session import Session

    folder = "gpu/" if device == "cuda" else ""
    rows = []
    for problem, candidate in KERNELS:
        source = (FIXTURES / "problems" / f"{folder}{problem}.py").read_text()
        with Session(source, device=device) as session:
            workspace.copy_candidate(
                session.workspace, FIXTURES / "candidates" / device / candidate
            )
            assert session.compile()["ok"]
            started = time.monotonic()
            session.verify(), session.profile()  # baselines measured and cached here
            print(problem, f"first step {time.monotonic() - started:.1f} s", flush=True)
            steps, speedups = [], []
            for _ in range(REPEATS):
                session._verified = None  # a new candidate process, as after an edit
                started = time.monotonic()
                session.verify()
                profile = session.profile()
                steps.append(time.monotonic() - started)
                print(
                    problem,
                    f"step {steps[-1]:.2f} s",
                    profile.get("speedup_vs_compile"),
                    flush=True,
                )
                speedups.append(profile.get("speedup_vs_compile"))
            rows.append(
                {
                    "problem": problem,
                    "median_s": statistics.median(steps),
                    "steps_s": steps,
                    "speedups": speedups,
                    "ok": profile["ok"],
                    "ms": {k: profile.get(k) for k in ("candidate_ms", "eager_ms", "compile_ms")},
                }
            )
            print(problem, rows[-1]["ms"], flush=True)
    return {
        "label": label,
        "device": environment.device_name(device, settings.gpu_index()),
        "rows": rows,
    }


def render(before: dict, after: dict, when: str) -> str:
    from benchmark_doc import markers

    begin, end = markers("isolation")
    lines = [
        begin,
        "## The cost of isolation (verify + profile, baselines cached; issue 13)",
        "",
        "`PYTHONPATH=. python3 scripts/bench_isolation.py measure --tree DIR --label NAME "
        f"--json benchmarks/isolation/NAME.json` on {after['device']}, {when}: the harness "
        f"before the judge (`{before['label']}`, aff2a6c from `git archive aff2a6c gpu_workers "
        f"skills`) and with it (`{after['label']}`, bubblewrap on), one sitting, one machine. "
        f"Seconds per step, median of {REPEATS}, each step with a fresh candidate process; "
        "the speedups over torch.compile of those steps; then the last step's times, which "
        "show where a speedup moved. Rebuilt by `... render benchmarks/isolation/before.json "
        "benchmarks/isolation/judge.json`.",
        "",
        "| problem | before (s) | after (s) | added (s) | speedups before | speedups after |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    pairs = list(zip(before["rows"], after["rows"], strict=True))
    for old, new in pairs:
        fmt = ", ".join(f"{s:.2f}" for s in new["speedups"] if s)
        fmt_old = ", ".join(f"{s:.2f}" for s in old["speedups"] if s)
        lines.append(
            f"| {new['problem']} | {old['median_s']:.2f} | {new['median_s']:.2f} | "
            f"{new['median_s'] - old['median_s']:+.2f} | {fmt_old} | {fmt} |"
        )
    lines += [
        "",
        "| problem | candidate ms (before, after) | eager ms (before, after) | "
        "torch.compile ms (before, after) |",
        "| --- | --- | --- | --- |",
    ]
    for old, new in pairs:
        cells = [
            f"{old['ms'][key]:.4f}, {new['ms'][key]:.4f}"
            for key in ("candidate_ms", "eager_ms", "compile_ms")
        ]
        lines.append(f"| {new['problem']} | " + " | ".join(cells) + " |")
    lines.append(end)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--tree", type=Path, default=REPO)
    m.add_argument("--label", required=True)
    m.add_argument("--json", type=Path, required=True)
    m.add_argument("--device", default="cuda")
    r = sub.add_parser("render")
    r.add_argument("before", type=Path)
    r.add_argument("after", type=Path)
    r.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    r.add_argument("--when", required=True, help="the day of the measurement, as YYYY-MM-DD")
    args = parser.parse_args()
    if args.command == "measure":
        args.json.write_text(json.dumps(measure(args.tree.resolve(), args.label, args.device)))
        return
    sys.path.insert(0, str(REPO / "scripts"))
    from benchmark_doc import write_section

    before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
    section = render(before, after, args.when)
    write_section(args.out, "isolation", section)


if __name__ == "__main__":
    main()
