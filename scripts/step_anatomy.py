"""Where one judged step's seconds go, command by command: a diagnostic for the fast GPU path
(issue 24), not a benchmark (it writes no doc).

    PYTHONPATH=. python3 scripts/step_anatomy.py [--device cuda] [--kernelbench .kb] [--steps 3]
        [--fusion 23_Softmax ...]

Runs verify + profile of the hand-written relu kernel (tests/fixtures/candidates/<device>/
good_relu_scale) on the fixture problem relu_scale and, with --kernelbench, on KernelBench level 1
19_ReLU (6 GiB tensors), `--steps` times each with a fresh candidate process (a comment changes
the sources), `--pause` seconds after each compile (an agent reading its result). `--fusion`
adds problems (KernelBench level 1 names, or paths to .py files) judged with the fusion
compiler's kernels for them: outputs that are not bit-exact (a softmax) take the judge's full
output check, which a relu's never does. Every runner
command, judge check and sandbox stop is timed on the wall clock and summed per step, so process
starts, data movement and per-call bookkeeping show apart.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent.fusion import compile_graph  # noqa: E402
from gpu_workers.harness import session as session_mod  # noqa: E402
from gpu_workers.harness.judge import judge as judge_mod  # noqa: E402
from gpu_workers.harness.judge import profile as profile_mod  # noqa: E402
from gpu_workers.harness.judge import runner_process  # noqa: E402
from gpu_workers.harness.judge import verify as verify_mod  # noqa: E402
from gpu_workers.harness.sandbox import freezer  # noqa: E402

SPENT: collections.Counter = collections.Counter()
COUNT: collections.Counter = collections.Counter()
FIRST: dict[str, float] = {}

# ModelNew for KernelBench's 19_ReLU (no init arguments) over the fixture's relu_scale kernel.
RELU_MODEL_NEW = """import torch.nn as nn

import kernel_ext


class ModelNew(nn.Module):
    def forward(self, x):
        return kernel_ext.relu_scale_forward(x, 1.0)
"""


def _timed(name_of, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        name = name_of(*args, **kwargs)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.perf_counter() - started
            SPENT[name] += spent
            COUNT[name] += 1
            if COUNT[name] == 1:
                FIRST[name] = spent

    return wrapper


def _instrument() -> None:
    def call_name(runner, command, *a, **k):
        return f"{runner.role}.{command}"

    runner_process.RunnerProcess.call = _timed(call_name, runner_process.RunnerProcess.call)
    # a prepared candidate process's start, while its sources compile: how long it took to be ready
    runner_process.RunnerProcess.ask = _timed(call_name, runner_process.RunnerProcess.ask)
    for owner, attr in (
        (judge_mod.Judge, "make_set"),
        (judge_mod.Judge, "lend_to_candidate"),
        (judge_mod.Judge, "flush_caches"),
        (judge_mod, "check_outputs"),
        (judge_mod, "inputs_changed"),
        (judge_mod, "sandbox_violations"),
        (freezer.Freezer, "freeze"),
        (freezer.Freezer, "thaw"),
        (runner_process.RunnerProcess, "settle"),
        (runner_process, "load_candidate"),
        (runner_process, "start_reference"),
        (profile_mod, "eager_alone"),
        (profile_mod, "time_candidate"),
        (verify_mod, "trials"),
    ):
        original = getattr(owner, attr)
        setattr(owner, attr, _timed(lambda *a, _n=attr, **k: _n, original))
    # the modules that imported these names before the patch
    profile_mod.judge_mod = judge_mod
    session_mod.runner_process = runner_process


def _candidate(device: str, kernelbench: bool) -> dict[str, str]:
    folder = REPO / "tests" / "fixtures" / "candidates" / device / "good_relu_scale"
    files = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*.*")}
    if kernelbench:
        files["model_new.py"] = RELU_MODEL_NEW
    return files


def _fusion_files(source: str, device: str) -> dict[str, str]:
    """The fusion compiler's candidate for a problem, from the graph a Session captures."""
    with session_mod.Session(source, device=device) as session:
        graph = session.graph()
    program = compile_graph(graph, device)
    if program.unsupported:
        raise SystemExit(f"the fusion compiler cannot compile it: {program.unsupported}")
    return program.files


def _problem_path(name: str, kernelbench: Path | None) -> Path:
    if name.endswith(".py"):
        return Path(name)
    if kernelbench is None:
        raise SystemExit(f"--fusion {name}: give --kernelbench, or a path to a .py file")
    return kernelbench / "KernelBench" / "level1" / f"{name}.py"


def run(label: str, source: str, files: dict[str, str], device: str, steps: int, pause: float):
    with session_mod.Session(source, device=device) as session:
        for step in range(steps):
            for path, text in files.items():
                edited = step and not path.endswith(".py")  # a fresh extension each step
                session.write_file(path, text + (f"\n// step {step}\n" if edited else ""))
            compiled = session.compile()
            time.sleep(pause)  # an agent reading the compile result
            SPENT.clear()
            COUNT.clear()
            FIRST.clear()
            started = time.perf_counter()
            verified = session.verify()
            profiled = session.profile()
            total = time.perf_counter() - started
            print(
                f"\n## {label}, step {step}: {total:.2f} s (compile {compiled['seconds']:.2f} s, "
                f"verify ok={verified['ok']}, profile ok={profiled['ok']}, "
                f"candidate {profiled.get('candidate_ms')} ms)"
            )
            print(f"phases: {profiled.get('phases_s') or verified.get('phases_s')}")
            found = (verified.get("violations") or []) + (profiled.get("violations") or [])
            print(f"violations: {found}, clock: {profiled.get('clock')}")
            for name, seconds in SPENT.most_common():
                first = FIRST[name]
                print(f"  {name:24} {seconds:8.3f} s {COUNT[name]:5} calls, first {first:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--kernelbench", type=Path)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds between compile and verify (an agent)"
    )
    parser.add_argument("--fusion", nargs="*", default=[], help="problems judged fused")
    args = parser.parse_args()
    _instrument()
    shared = (args.device, args.steps, args.pause)
    fixture = (REPO / "tests" / "fixtures" / "problems" / "relu_scale.py").read_text()
    run("relu_scale (fixture)", fixture, _candidate(args.device, False), *shared)
    if args.kernelbench:
        problem = args.kernelbench / "KernelBench" / "level1" / "19_ReLU.py"
        files = _candidate(args.device, True)
        run("19_ReLU (KernelBench)", problem.read_text(), files, *shared)
    for name in args.fusion:
        source = _problem_path(name, args.kernelbench).read_text()
        run(f"{name} (fusion)", source, _fusion_files(source, args.device), *shared)


if __name__ == "__main__":
    main()
