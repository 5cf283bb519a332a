"""Which problems of a KernelBench checkout the fusion compiler covers: each problem is captured
and lowered (the `graph` step's lower_problem, on meta tensors: shapes only, no memory, no GPU),
then planned and generated for the cuda target; what either refuses is grouped by op.

    python scripts/fusion_coverage.py --kernelbench .kb --levels 1 2 [--json out.json]

Prints a markdown summary (per level: planned, refused at capture, refused by the planner,
failed to load) and the refusals by op with the problems that meet each. Runs on any machine:
nothing is executed on a device. This is a census of the compiler's coverage, not of speed or
correctness (those are the GPU's: scripts/bench_fusion.py)."""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from agent.fusion.backend import launch_groups  # noqa: E402
from agent.fusion.compiler import compile_graph  # noqa: E402
from gpu_workers.harness.capture.graph import lower  # noqa: E402
from gpu_workers.harness.runner import problem as problem_mod  # noqa: E402

CONVOLUTION = re.compile(r"\bnn\.Conv|\bF\.conv|\bconv_transpose|\bConvTranspose")


def census(path: Path) -> dict:
    """One problem: `planned` (kernels), or the stage that refused and its reasons."""
    entry = {"problem": path.stem, "convolution": bool(CONVOLUTION.search(path.read_text()))}
    try:
        module = problem_mod.load_module(path, f"coverage_{path.stem}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.device("meta"):
                model = problem_mod.build_model(module, "meta", 0)
                inputs = problem_mod.make_inputs(module, 0, "meta")
            # traced outside the meta default: a tensor the forward makes from a Python number
            # (`torch.tensor(0.5)`) holds its value, as on the device the harness captures on
            graph = lower(model, inputs, "cuda")
    except Exception as exc:  # noqa: BLE001 - a problem may fail to load on meta tensors
        return {**entry, "stage": "load", "reasons": [f"{type(exc).__name__}: {exc}"[:300]]}
    if graph["unsupported"]:
        return {**entry, "stage": "capture", "reasons": graph["unsupported"]}
    program = compile_graph(graph, "cuda")
    if program.unsupported:
        return {**entry, "stage": "plan", "reasons": program.unsupported}
    kinds = sorted({kernel.kind for kernel in program.kernels})
    kernels = {"kernels": len(program.kernels), "kinds": kinds}
    return {**entry, "stage": "planned", **kernels, **tune_size(program)}


def tune_size(program) -> dict:
    """The variants the fusion agent's tune step may judge (each holds the GPU lock for a judged
    step): `tune_first`, every kernel's first call, which it always makes (unless its first
    profile ends the run); `tune_all`, every call, its later ones only where the first paid."""
    calls = [
        [len(group) for group in launch_groups(k.tunables, program.launch[k.name])]
        for k in program.kernels
    ]
    return {"tune_first": sum(c[0] for c in calls if c), "tune_all": sum(map(sum, calls))}


REFUSAL = re.compile(r"^(?P<op>[^:(]+?)(?: \((?P<call>[^)]*)\))?: (?P<why>.*)$", re.S)


def op_of(reason: str) -> str:
    """The op a refusal names ("<op> (<call>): <why>" -> "<op>: <why>", sizes dropped)."""
    found = REFUSAL.match(reason)
    op, why = (found["op"], found["why"]) if found else ("", reason)
    why = re.sub(r"\[[\d, ]*\]|\b\d+(\.\d+)?\b", "N", why)  # shapes, sizes vary by problem
    return f"{op}: {why}"[:160]


def markdown(levels: dict[str, list[dict]]) -> str:
    lines = [
        "| level | problems | planned | refused at capture | refused by the planner | "
        "failed to load | of the refused, convolutions | tune variants (first calls, all) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_op = collections.defaultdict(list)
    for level, entries in levels.items():
        stages = collections.Counter(e["stage"] for e in entries)
        convs = sum(e["convolution"] for e in entries if e["stage"] != "planned")
        first = sum(e.get("tune_first", 0) for e in entries)
        every = sum(e.get("tune_all", 0) for e in entries)
        lines.append(
            f"| {level} | {len(entries)} | {stages['planned']} | {stages['capture']} | "
            f"{stages['plan']} | {stages['load']} | {convs} | {first}, {every} |"
        )
        for e in entries:
            for op in sorted({op_of(r) for r in e.get("reasons", [])}):
                by_op[op].append(f"L{level} {e['problem'].split('_')[0]}")
    lines += ["", "| refusal | problems | count |", "| --- | --- | --- |"]
    for op, problems in sorted(by_op.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(problems[:8]) + (", ..." if len(problems) > 8 else "")
        lines.append(f"| {op.replace('|', '/')} | {shown} | {len(problems)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout")
    parser.add_argument("--levels", nargs="+", default=["1", "2"])
    parser.add_argument("--json", type=Path, help="also write every problem's entry here")
    args = parser.parse_args()
    levels = {}
    for level in args.levels:
        folder = args.kernelbench / "KernelBench" / f"level{level}"
        if not folder.is_dir():
            sys.exit(f"{folder} is not a folder: pass the checkout that holds KernelBench/")
        levels[level] = [census(path) for path in sorted(folder.glob("*.py"), key=_number)]
    print(markdown(levels))
    if args.json:
        args.json.write_text(json.dumps(levels, indent=1) + "\n")


def _number(path: Path) -> int:
    return int(path.stem.split("_")[0])


if __name__ == "__main__":
    main()
