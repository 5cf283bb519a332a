"""python -m agent optimize PROBLEM.py --agent NAME [--device cuda|cpu] [--out DIR] ...
python -m agent agents [--agents-file PATH]
python -m agent check --agent NAME [--agents-file PATH] [--timeout S] [--max-tokens N] [--json]

optimize runs one agent on one problem and prints a line per step. It writes DIR/best/ (the
fastest verified candidate's model_new.py and kernels/), DIR/verdict.json and
DIR/trajectory.jsonl. Exit 0: a verified candidate exists; 1: none (the agent ran and found no
verified kernel); 2: unusable input; 3: none, because the model server failed (unreachable,
refusing, or broken past its retries: fix the server, not the agent).

check asks the agent's endpoint what a run needs (agent/preflight.py). Exit 0: ready (perhaps
with warnings; --strict makes them fail); 1: not ready; 2: unusable input.

This is the wiring point: the one module of the agent package that imports the harness.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TextIO

from agent.backend_choice import make_backend
from agent.config import MODEL_BACKENDS, ConfigError, agents_file, load_agent, load_agents
from agent.loop import Agent, RunResult
from agent.trajectory import trajectory_record, write_trajectory

EXIT_OK, EXIT_NO_RESULT, EXIT_UNUSABLE, EXIT_MODEL_FAILED = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent")
    sub = parser.add_subparsers(dest="command", required=True)
    optimize = sub.add_parser("optimize", help="run an agent on a KernelBench-format problem")
    optimize.add_argument("problem", type=Path)
    optimize.add_argument("--agent", required=True, help="an agent name from the agents file")
    optimize.add_argument("--device", choices=("cuda", "cpu"), default=None)
    optimize.add_argument("--protocol", default="loose", help="loose or fp32-strict")
    optimize.add_argument("--out", type=Path, default=None, help="default: out/<problem>-<agent>")
    optimize.add_argument("--max-turns", type=int, default=None, help="overrides the budget")
    listing = sub.add_parser("agents", help="list the configured agents")
    check = sub.add_parser("check", help="check an agent's endpoint before a run")
    check.add_argument("--agent", required=True, help="an agent name from the agents file")
    check.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    check.add_argument("--max-tokens", type=int, default=512, help="caps each test reply")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--strict", action="store_true", help="warnings fail the check too")
    for command in (optimize, listing, check):
        command.add_argument("--agents-file", type=Path, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "agents":
        return list_agents(args.agents_file)
    if args.command == "check":
        return check_endpoint(args)
    try:
        config, backend, session, problem = _prepare(args)
    except (OSError, ValueError) as error:  # ConfigError and the harness's ProblemError included
        print(f"error: {error}", file=sys.stderr)
        return EXIT_UNUSABLE
    try:
        result = Agent(config, backend, session, on_event=ProgressPrinter()).run()
    finally:
        session.close()
    out = args.out or Path("out") / f"{args.problem.stem}-{config.name}"
    write_outputs(out, result, trajectory_record(result, config, problem))
    print(f"wrote {out}/best, {out}/verdict.json, {out}/trajectory.jsonl")
    return exit_status(result)


def exit_status(result: RunResult) -> int:
    if result.best:
        return EXIT_OK
    return EXIT_MODEL_FAILED if result.status == "backend_error" else EXIT_NO_RESULT


def _prepare(args: argparse.Namespace):
    """Config, backend, a fresh harness Session and the problem's identity; ValueError if unusable.

    The backend comes first so that a missing key or script fails before a workspace exists.
    """
    from gpu_workers.harness import settings
    from gpu_workers.harness.judge import protocol
    from gpu_workers.harness.runner.problem import source_sha256
    from gpu_workers.harness.session import Session

    source = args.problem.read_text()
    config = load_agent(args.agent, args.agents_file)
    if args.max_turns:
        config = config.with_budget(max_turns=args.max_turns)
    backend = make_backend(config)
    device = settings.check_device(args.device or settings.default_device())
    session = Session(
        source, device=device, protocol=protocol.by_name(args.protocol), baselines_ahead=True
    )
    problem = {"path": str(args.problem), "sha256": source_sha256(source), "device": device}
    return config, backend, session, problem


def list_agents(path: Path | None) -> int:
    try:
        agents = load_agents(agents_file(path))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_UNUSABLE
    for name, config in agents.items():
        print(f"{name:20} {config.backend:9} {config.model or config.script}")
    return EXIT_OK


def check_endpoint(args: argparse.Namespace) -> int:
    from agent.preflight import check_agent, format_report

    try:
        config = load_agent(args.agent, args.agents_file)
        if config.backend not in MODEL_BACKENDS:
            raise ConfigError(f"agent {config.name!r} (backend {config.backend}) has no endpoint")
        report = check_agent(config, timeout_s=args.timeout, max_tokens=args.max_tokens)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_UNUSABLE
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))
    if report.failed or (args.strict and report.count("warn")):
        return EXIT_NO_RESULT
    return EXIT_OK


def write_outputs(out: Path, result: RunResult, record: dict) -> None:
    """DIR/best/ holds the result's sources; verdict.json is the record without the messages."""
    out.mkdir(parents=True, exist_ok=True)
    best_dir = out / "best"
    shutil.rmtree(best_dir, ignore_errors=True)
    if result.best is not None:
        for path, text in result.best.sources.items():
            (best_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (best_dir / path).write_text(text)
    verdict = {k: v for k, v in record.items() if k not in ("messages", "tools")}
    if verdict["best"]:
        verdict["best"] = {k: v for k, v in verdict["best"].items() if k != "sources"}
    (out / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
    write_trajectory(out / "trajectory.jsonl", record)


class ProgressPrinter:
    """One line per step: the turn, what the tools said, the best speedup so far, the spend."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream  # None: whatever sys.stdout is when a line is printed
        self.paths: dict[str, str] = {}  # tool-call id -> the path it names
        self.actions: list[str] = []

    def __call__(self, event: dict) -> None:
        kind, payload = event["kind"], event["payload"]
        if kind == "tool_call":
            self.paths[payload["id"]] = (payload.get("arguments") or {}).get("path", "")
        elif kind == "tool_result":
            self.actions.append(_action(payload, self.paths.get(payload["id"], "")))
        elif kind == "error":
            self.actions.append(f"{payload['kind']} error")
        elif kind == "status" and payload["state"] != "started":
            self._line(payload)

    def _line(self, status: dict) -> None:
        best = status.get("best")
        speed = "no verified candidate yet"
        if best and best.get("speedup_vs_eager") is not None:
            versus_compile = best.get("speedup_vs_compile")
            speed = f"best {best['speedup_vs_eager']:.2f}x eager"
            speed += f", {versus_compile:.2f}x compile" if versus_compile is not None else ""
        elif best:
            speed = "best: verified, not profiled"
        spend = (
            f"{status['tokens'] / 1000:.1f}k tok ${status['cost_usd']:.4f} {status['seconds']:.0f}s"
        )
        head = f"turn {status['turn']:>3}/{status['max_turns']}"
        if status.get("detail") and status["state"] == "running":  # a long tool call, meanwhile
            head += f" ({status['detail'][:100]})"
        if status["state"] != "running":
            last_line = (status["detail"] or "").strip().splitlines()[-1:]
            head = status["state"].upper() + (f" ({last_line[0][:80]})" if last_line else "")
        actions = ", ".join(self.actions) or "-"
        print(f"{head} | {actions} | {speed} | {spend}", file=self.stream or sys.stdout, flush=True)
        self.actions = []


def _action(result: dict, path: str) -> str:
    name, verdict = result["name"], result.get("verdict") or {}
    if name == "profile" and result["ok"]:
        return f"profile {verdict.get('speedup_vs_eager') or 0:.2f}x"
    if name == "tune" and verdict.get("variants"):
        rows = verdict["variants"]
        timed = [row for row in rows if row.get("timed")]
        fastest = f", fastest {timed[0].get('speedup_vs_eager') or 0:.2f}x" if timed else ""
        return f"tune {len(timed)}/{len(rows)} timed{fastest}"
    outcome = "ok" if result["ok"] else "FAILED"
    return f"{name} {path} {outcome}".replace("  ", " ")
