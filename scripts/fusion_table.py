"""The fusion agent against torch.compile by op kind: docs/fusion.md's table and the fusion
issue's checks, from suite reports' per-problem CSVs and a KernelBench checkout's census.

    python scripts/fusion_table.py --kernelbench .kb \\
        --csv 1=docs/suites/kernelbench-level1-h200.csv \\
        --csv 2=docs/suites/kernelbench-level2-h200.csv [--agent fusion] [--write docs/fusion.md]

The numbers are the board's: each CSV is `manage.py report --csv` of one level on one GPU (a
problem's baselines, and each entrant's counted result: re-graded, clean). What this adds is the
kind of each problem, which the census gives (scripts/fusion_coverage.py: the problem captured
and planned on meta tensors, nothing run on a device): the kind of its weightiest kernel, in the
order of KIND_ORDER. A problem whose plan holds no GEMM and no convolution is memory-bound (its
floor is its bytes'), as the issue counts them. Rejected problems are left out (no baseline can
be measured for them); a valid problem the agent has no counted result for is unverified.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark_doc import markers, write_section  # noqa: E402
from fusion_coverage import census  # noqa: E402

# A problem's kind is the first of these its plan holds (a GEMM with a softmax after it is a gemm).
KIND_ORDER = (
    "convolution",
    "gemm",
    "scan",
    "pooling",
    "arg_reduction",
    "axis_reduction",
    "row_reduction",
    "pointwise",
)
COMPUTE_KINDS = frozenset({"convolution", "gemm"})
SECTION = "fusion-table"

# The fusion issue's "Done when", over the non-convolution problems of levels 1 and 2.
TARGETS = {"verified": 0.95, "geomean": 1.3, "memory_sol": 0.85, "pointwise_sol": 0.90}


def problem_kind(entry: dict) -> str:
    """The kind a census entry's plan is counted under; "unplanned" where the compiler refused."""
    if entry.get("stage") != "planned":
        return "unplanned"
    kinds = set(entry.get("kinds", []))
    return next((kind for kind in KIND_ORDER if kind in kinds), "copy")


@dataclass
class Problem:
    level: str
    name: str
    kind: str
    compile_sol: float | None  # torch.compile's fraction of the speed of light
    autotune_sol: float | None  # max-autotune's
    result: dict | None = None  # the agent's counted result: s_compile, sol

    @property
    def memory_bound(self) -> bool:
        return self.kind not in COMPUTE_KINDS and self.kind != "unplanned"


@dataclass
class Row:
    label: str
    problems: list[Problem] = field(default_factory=list)

    def figures(self) -> dict:
        verified = [p for p in self.problems if p.result]
        speedups = [p.result["s_compile"] for p in verified if p.result["s_compile"]]
        return {
            "problems": len(self.problems),
            "verified": len(verified),
            "faster": sum(s > 1.0 for s in speedups),
            "geomean": math.exp(statistics.fmean(map(math.log, speedups))) if speedups else None,
            "sol": _median(p.result["sol"] for p in verified),
            "compile_sol": _median(p.compile_sol for p in self.problems),
            "autotune_sol": _median(p.autotune_sol for p in self.problems),
            "pointwise_under": sum(
                p.kind == "pointwise" and (p.result["sol"] or 0.0) < TARGETS["pointwise_sol"]
                for p in verified
            ),
        }


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _fraction(numerator: str, denominator: str) -> float | None:
    """sol_ms / a baseline's ms, from the CSV's text cells."""
    return float(numerator) / float(denominator) if numerator and denominator else None


def read_level(level: str, path: Path, kinds: dict[str, str], agent: str) -> list[Problem]:
    """One level's valid problems from its report CSV, each with the agent's counted result."""
    problems: dict[str, Problem] = {}
    with path.open(newline="") as handle:
        for line in csv.DictReader(handle):
            if line["status"] != "valid":
                continue
            name = line["problem"]
            if name not in kinds:
                raise SystemExit(
                    f"{path}: problem {name} is not in the KernelBench checkout's level {level}: "
                    "pass the checkout the suite was imported from"
                )
            problem = problems.setdefault(
                name,
                Problem(
                    level,
                    name,
                    kinds[name],
                    _fraction(line["sol_ms"], line["compile_ms"]),
                    _fraction(line["sol_ms"], line["compile_max_autotune_ms"]),
                ),
            )
            if line["entrant"] == agent:
                problem.result = {
                    "s_compile": float(line["speedup_vs_compile"] or 0.0) or None,
                    "sol": float(line["sol_fraction"]) if line["sol_fraction"] else None,
                }
    return list(problems.values())


def rows(problems: list[Problem]) -> list[Row]:
    """One row per (level, kind) present, then each level's and both levels' non-convolution
    totals, and the memory-bound ones'."""
    out = []
    for level in sorted({p.level for p in problems}):
        of_level = [p for p in problems if p.level == level]
        for kind in (*KIND_ORDER, "copy", "unplanned"):
            chosen = [p for p in of_level if p.kind == kind]
            if chosen:
                out.append(Row(f"L{level} {kind.replace('_', ' ')}", chosen))
    non_conv = [p for p in problems if p.kind != "convolution"]
    out.append(Row("all non-convolution", non_conv))
    out.append(
        Row("memory-bound (no GEMM, no convolution)", [p for p in non_conv if p.memory_bound])
    )
    return out


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def table(problems: list[Problem]) -> list[str]:
    lines = [
        "| problems (kind) | valid | verified | faster than torch.compile | geomean vs "
        "torch.compile | median SOL: fusion | torch.compile | max-autotune |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows(problems):
        f = row.figures()
        geomean = "—" if f["geomean"] is None else f"{f['geomean']:.2f}x"
        lines.append(
            f"| {row.label} | {f['problems']} | {f['verified']} | {f['faster']} | {geomean} | "
            f"{_share(f['sol'])} | {_share(f['compile_sol'])} | {_share(f['autotune_sol'])} |"
        )
    return lines


def checks(problems: list[Problem]) -> list[str]:
    """The issue's "Done when", each with its figure and whether it holds."""
    non_conv = Row("", [p for p in problems if p.kind != "convolution"]).figures()
    memory = Row("", [p for p in problems if p.kind != "convolution" and p.memory_bound])
    conv = Row("", [p for p in problems if p.level == "2" and p.kind == "convolution"]).figures()
    verified = non_conv["verified"] / non_conv["problems"] if non_conv["problems"] else None
    memory_sol = memory.figures()["sol"]
    found = [
        ("non-convolution problems verified", verified, TARGETS["verified"], _share(verified)),
        (
            "geomean vs torch.compile (non-convolution, verified ones)",
            non_conv["geomean"],
            TARGETS["geomean"],
            "—" if non_conv["geomean"] is None else f"{non_conv['geomean']:.2f}x",
        ),
        ("median SOL, memory-bound", memory_sol, TARGETS["memory_sol"], _share(memory_sol)),
    ]
    lines = [
        f"- {what}: {shown} (target {target:g}): {_holds(value, target)}"
        for what, value, target, shown in found
    ]
    under = non_conv["pointwise_under"]
    lines.append(
        f"- verified pointwise problems under {TARGETS['pointwise_sol']:.0%} of the speed of "
        f"light: {under} (target 0): {'not yet' if under else 'holds'}"
    )
    half = conv["problems"] / 2
    lines.append(
        f"- level 2 convolution problems verified: {conv['verified']} of {conv['problems']} "
        f"(target half): {'holds' if conv['problems'] and conv['verified'] >= half else 'not yet'}"
    )
    return lines


def _holds(value: float | None, target: float) -> str:
    return "holds" if value is not None and value >= target else "not yet"


def section(problems: list[Problem], command: str, sources: list[str]) -> str:
    begin, end = markers(SECTION)
    lines = [
        begin,
        "",
        f"Made by `{command}` from {', '.join(sources)} (the report beside each names "
        "the GPU, torch and the agent's version); a kind is the plan's weightiest kernel, "
        "SOL the speed of light.",
        "",
        *table(problems),
        "",
        *checks(problems),
        "",
        end,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout")
    parser.add_argument(
        "--csv",
        action="append",
        required=True,
        metavar="LEVEL=PATH",
        help="a level's report CSV (manage.py report --csv), e.g. 1=docs/suites/x.csv",
    )
    parser.add_argument("--agent", default="fusion", help="the agent's label on the board")
    parser.add_argument("--write", type=Path, help="replace this file's fusion-table section")
    args = parser.parse_args()
    problems = []
    for item in args.csv:
        level, _, path = item.partition("=")
        if not (level.isdigit() and path):
            sys.exit(
                f"--csv {item}: give LEVEL=PATH, e.g. 1=docs/suites/kernelbench-level1-h200.csv"
            )
        folder = args.kernelbench / "KernelBench" / f"level{level}"
        if not folder.is_dir():
            sys.exit(f"{folder} is not a folder: pass the checkout that holds KernelBench/")
        kinds = {p.stem: problem_kind(census(p)) for p in sorted(folder.glob("*.py"))}
        problems += read_level(level, Path(path), kinds, args.agent)
    command = "python scripts/fusion_table.py " + " ".join(sys.argv[1:])
    text = section(problems, command, [item.partition("=")[2] for item in args.csv])
    print(text)
    if args.write:
        write_section(args.write, SECTION, text)


if __name__ == "__main__":
    main()
