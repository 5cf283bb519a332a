"""Benchmarks the built-in fusion agent on the ops in benchmarks/fusion/ and writes the table
into docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/bench_fusion.py [--device cuda] [--json ROWS.json] [OP ...]
    PYTHONPATH=. python3 scripts/bench_fusion.py --render A.json B.json   # one table from parts

Each op goes through the whole agent run (inspect_graph, generated kernels, compile, verify,
profile, launch tuning) exactly as a user's run would. Per op: whether the result verified, eager
and torch.compile (default mode) milliseconds, the fusion kernel's milliseconds, speedup against
torch.compile, and the fraction of the speed-of-light floor (for a memory-bound op, the fraction
of the measured peak bandwidth).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmark_doc import markers, write_section  # noqa: E402 (scripts/ is on sys.path)

OPS = REPO / "benchmarks" / "fusion"
BEGIN, END = markers("fusion")


def run_op(path: Path, device: str, max_turns: int | None) -> dict:
    from agent.backend_choice import make_backend
    from agent.config import load_agent
    from agent.loop import Agent
    from gpu_workers.harness.session import Session

    config = load_agent("fusion")
    if max_turns:
        config = config.with_budget(max_turns=max_turns)
    started = time.monotonic()
    with Session(path.read_text(), device=device, baselines_ahead=True) as session:
        result = Agent(config, make_backend(config), session).run()
    row = {"op": path.stem, "status": result.status, "turns": result.turns}
    row["seconds"] = round(time.monotonic() - started, 1)
    best = result.best
    row["correct"] = best is not None
    row["detail"] = "" if best else result.detail
    profile = (best.profile or {}) if best else {}
    for key in ("eager_ms", "compile_ms", "candidate_ms", "speedup_vs_compile", "sol_fraction"):
        row[key] = profile.get(key)
    return row


def render(rows: list[dict], env: dict, command: str) -> str:
    ratios = [r["speedup_vs_compile"] for r in rows if r["speedup_vs_compile"]]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    lines = [
        BEGIN,
        "## The fusion agent against torch.compile",
        "",
        f"Command: `{command}` on {env.get('gpu') or env.get('host')} (driver "
        f"{env.get('driver', 'n/a')}, torch {env.get('torch')}, CUDA {env.get('cuda')}). "
        "Each op is a full `fusion` agent run; times are the harness's profile of its best "
        "verified candidate (median of interleaved, L2-flushed calls). Speed of light is the "
        "measured-peak floor: "
        "for memory-bound ops its fraction is the fraction of measured peak bandwidth.",
        "",
        "| op | correct | eager ms | compile ms | fusion ms | vs compile | of speed of light |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['op']} | {'yes' if r['correct'] else 'no: ' + r['detail'][:60]} "
            f"| {_num(r['eager_ms'])} | {_num(r['compile_ms'])} | {_num(r['candidate_ms'])} "
            f"| {_num(r['speedup_vs_compile'], 'x')} | {_pct(r['sol_fraction'])} |"
        )
    lines += ["", f"Geometric-mean speedup against torch.compile: **{geomean:.2f}x** "
              f"over {len(ratios)} ops.", "", END]  # fmt: skip
    return "\n".join(lines)


def _num(value, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:.4g}{suffix}"


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ops", nargs="*", help="op names in benchmarks/fusion (default: all)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--max-turns", type=int, default=None, help="caps each run's tuning")
    parser.add_argument(
        "--render", type=Path, nargs="+", help="write the table from earlier --json files"
    )
    args = parser.parse_args()
    if args.render:
        parts = [json.loads(path.read_text()) for path in args.render]
        rows = [row for part in parts for row in part["rows"]]
        commands = "`; `".join(part["command"] for part in parts)
        section = render(rows, parts[0]["env"], commands)
    else:
        section = measure(args)
    print(section)
    write_section(args.out, "fusion", section)


def measure(args: argparse.Namespace) -> str:
    from gpu_workers.harness import settings
    from gpu_workers.harness.judge import environment

    paths = [OPS / f"{name}.py" for name in args.ops] or sorted(OPS.glob("*.py"))
    env = environment.describe(args.device, settings.gpu_index())
    command = "PYTHONPATH=. python3 scripts/bench_fusion.py" + "".join(f" {o}" for o in args.ops)
    if args.max_turns:
        command += f" --max-turns {args.max_turns}"
    rows = []
    for path in paths:
        rows.append(run_op(path, args.device, args.max_turns))
        print(json.dumps(rows[-1]), flush=True)
        if args.json:  # after every op, so a cut-off run keeps what it measured
            part = {"env": env, "command": command, "rows": rows}
            args.json.write_text(json.dumps(part, indent=2))
    return render(rows, env, command)


if __name__ == "__main__":
    main()
