"""What the machine's compiler seed saves (gpu_workers/harness/judge/compiler_seed.py): each
fixture problem's baselines (eager, torch.compile and max-autotune, in a fresh reference runner)
and its validation (whose check compiles it too), measured in a fresh harness cache without a
seed and in another with one; writes its section of docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/bench_compiler_seed.py --device cpu --out docs/benchmarks.md

"Without" is a cache whose seed is marked failed, the state a machine is in when its seed could
not be built: every runner compiles from nothing, as every runner did before the seed. Each
problem is measured once per mode, the modes alternating, so a busy host slows both alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmark_doc import markers, write_section  # noqa: E402 (scripts/ is on sys.path)

PROBLEMS = {"cpu": ["relu_scale", "row_sum", "matmul_rowsum"], "cuda": ["relu_scale", "row_sum"]}
MODES = ("without a seed", "with the seed")


def _problem_source(name: str, device: str) -> str:
    folder = REPO / "tests" / "fixtures" / "problems"
    return ((folder / "gpu" if device == "cuda" else folder) / f"{name}.py").read_text()


def _fresh_cache(mode: str, device: str) -> float:
    """Points the harness at a new cache; with the seed, builds it and returns its seconds."""
    from gpu_workers.harness.judge import compiler_seed

    os.environ["KERNELARENA_CACHE"] = tempfile.mkdtemp(prefix="bench-seed-cache-")
    path = compiler_seed.seed_path(device)
    if mode == MODES[0]:
        path.parent.mkdir(parents=True)
        path.with_name(f"{path.name}.failed").write_text("benchmark: measured without a seed")
        return 0.0
    started = time.monotonic()
    assert compiler_seed.ensure(device) is not None, "the seed was not built"
    return time.monotonic() - started


def _seconds(source: str, device: str) -> tuple[float, float]:
    """(baselines, validation) seconds of one problem in the current cache."""
    from gpu_workers.harness.judge import profile, validation
    from gpu_workers.harness.judge.protocol import LOOSE

    root = Path(tempfile.mkdtemp(prefix="bench-seed-"))
    (root / "problem").mkdir()
    (root / "io").mkdir()
    problem = root / "problem" / "model.py"
    problem.write_text(source)
    started = time.monotonic()
    profile.measure_baselines(problem, device, LOOSE, root / "io")
    baselines = time.monotonic() - started
    started = time.monotonic()
    report = validation.validate(source, device, LOOSE)
    assert report.ok, report.reasons
    return baselines, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=sorted(PROBLEMS))
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    import torch

    from gpu_workers.harness.judge import environment

    rows, builds = [], []
    for name in PROBLEMS[args.device]:
        source = _problem_source(name, args.device)
        times = {}
        for mode in MODES:
            built = _fresh_cache(mode, args.device)
            if built:
                builds.append(built)
            times[mode] = _seconds(source, args.device)
            print(name, mode, [round(t, 1) for t in times[mode]], flush=True)
        rows.append((name, times))
    machine = environment.device_name(args.device)
    begin, end = markers("compiler-seed")
    lines = [
        begin,
        f"## The compiler seed: baselines and validation with and without it ({date.today()})",
        "",
        f"`PYTHONPATH=. python3 scripts/bench_compiler_seed.py --device {args.device}` on "
        f"{machine} ({os.cpu_count()} cores, {platform.machine()}), torch {torch.__version__}. "
        "Seconds of one problem's baselines (a fresh reference runner: eager, torch.compile, "
        "max-autotune) and of its validation, each in a fresh harness cache: without a seed "
        "(marked failed, so every runner compiles from nothing) and with one (its build timed "
        "apart, once per machine).",
        "",
        "| problem | baselines without | baselines with | validation without | validation with |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, times in rows:
        (b0, v0), (b1, v1) = times[MODES[0]], times[MODES[1]]
        lines.append(f"| {name} | {b0:.1f} | {b1:.1f} | {v0:.1f} | {v1:.1f} |")
    lines += ["", f"The seed's build: median {statistics.median(builds):.1f} s.", end]
    write_section(args.out, "compiler-seed", "\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
