"""Level 2's convolutions alone: the fusion agent's ways of running one (cuDNN in each layout,
the tiled direct kernel) against eager PyTorch and torch.compile on the same convolution, so a
convolution problem's loss splits into the call and what follows it. Writes its section of
docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/bench_conv_layouts.py --kernelbench .kb/KernelBench/level2 \\
        [--problems 87_Conv2d_Subtract_Subtract_Mish ...] [--limit N]

Each problem's first convolution module (nn.Conv1d-3d, nn.ConvTranspose1d-3d; KernelBench's
level 2 problems begin with it) becomes a problem of its own: the same module and input shape,
nothing after it. The fusion compiler's candidate for it is judged through the harness (verify,
then profile against its own eager and torch.compile baselines) once with each way forced
(`layout` 1 NCHW, 2 NHWC, 3 the tiled direct kernel where the reduction is short:
agent/fusion/cuda/cudnn_conv.py, conv_tiled.py). Run on a GPU; the table names it.

The section is written again after each problem: on a lent machine give `--out
$OUT/benchmarks.md` (a copy of docs/benchmarks.md, or none), so a call cut at its time limit
still brings back the problems that finished (session 54's was cut after two of five, and the
copy it made at the end never ran).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from dataclasses import dataclass
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmark_doc import markers, write_section  # noqa: E402 (scripts/ is on sys.path)

SECTION = "conv-layouts"
LAYOUTS = ("nchw", "nhwc", "tiled")


@dataclass(frozen=True)
class ConvAlone:
    """One problem's first convolution as a problem of its own."""

    problem: str
    module: str  # the nn class's constructor call
    input_shape: tuple[int, ...]

    def source(self) -> str:
        return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """{self.problem}'s convolution alone."""

    def __init__(self):
        super().__init__()
        self.conv = {self.module}

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand{self.input_shape!r}]


def get_init_inputs():
    return []
'''


def first_convolution(path: Path) -> ConvAlone | None:
    """The problem's first convolution module and the shape of its input (the problem's first
    input), or None where it has none; built on meta tensors (no memory, any machine)."""
    import torch
    from torch import nn

    from gpu_workers.harness.runner import problem as problem_mod

    module = problem_mod.load_module(path, f"conv_alone_{path.stem}")
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = problem_mod.build_model(module, "meta", 0)
        inputs = problem_mod.make_inputs(module, 0, "meta")
    kinds = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
             nn.ConvTranspose3d)  # fmt: skip
    conv = next((m for m in model.modules() if isinstance(m, kinds)), None)
    if conv is None or not inputs or not isinstance(inputs[0], torch.Tensor):
        return None
    args = [f"{conv.in_channels}, {conv.out_channels}, {tuple(conv.kernel_size)!r}"]
    args += [f"stride={tuple(conv.stride)!r}", f"dilation={tuple(conv.dilation)!r}"]
    args += [f"groups={conv.groups}", f"bias={conv.bias is not None}"]
    padding = conv.padding if isinstance(conv.padding, str) else tuple(conv.padding)
    args.append(f"padding={padding!r}")
    if conv.transposed:
        args.append(f"output_padding={tuple(conv.output_padding)!r}")
    call = f"nn.{type(conv).__name__}({', '.join(args)})"
    return ConvAlone(path.stem, call, tuple(inputs[0].shape))


def measure(conv: ConvAlone, root: Path) -> dict:
    """eager, torch.compile, the speed of light, and the candidate in each layout (ms)."""
    from agent.fusion import compile_graph
    from agent.fusion.cuda.cudnn_conv import LAYOUTS as LAYOUT_VALUES
    from gpu_workers.harness.capture import graph as capture
    from gpu_workers.harness.judge.protocol import LOOSE
    from gpu_workers.harness.session import Session

    source = conv.source()
    program = compile_graph(capture.capture(source, "cuda", LOOSE), "cuda")
    if program.unsupported:
        return {"error": "; ".join(program.unsupported)}
    row: dict = {}
    tiled = any("tiled" in k.description for k in program.kernels)
    for layout in LAYOUTS if tiled else LAYOUTS[:2]:
        forced = {
            name: {"layout": LAYOUT_VALUES[layout]}
            for name, values in program.launch.items()
            if "layout" in values
        }
        where = root / f"{conv.problem}-{layout}"
        with Session(source, "cuda", LOOSE, root=where, candidates=1) as session:
            for path, text in program.files.items():
                session.write_file(path, text)
            session.write_file("model_new.py", program.model_new(forced))
            verdict = session.evaluate()
        profile = verdict.get("profile") or {}
        if not verdict["verify"].get("ok") or not profile.get("ok"):
            row[layout] = None
            continue
        row[layout] = profile["candidate_ms"]
        row.update({k: profile[k] for k in ("eager_ms", "compile_ms", "sol_ms")})
    return row


def _timed(row: dict, layout: str) -> str:
    if layout not in row:
        return "-"  # not a way this convolution has
    ms = row[layout]
    if ms is None:
        return "failed"
    return f"{ms:.3f} ({ms / row['compile_ms']:.2f}x)"


def table(rows: list[tuple[ConvAlone, dict]], gpu: str, torch_version: str, command: str) -> str:
    begin, end = markers(SECTION)
    lines = [
        begin,
        "## Level 2's convolutions alone: cuDNN in each layout, and the tiled kernel (fusion v8)",
        "",
        f"Command: `{command}` on {gpu} (torch {torch_version}), {date.today().isoformat()}. "
        "Each problem's first convolution as a problem of its own, judged through the harness; "
        "ms, and the candidate's time over torch.compile's in brackets.",
        "",
        "| problem | convolution | input | eager | torch.compile | NCHW | NHWC | tiled "
        "| speed of light |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for conv, row in rows:
        if "error" in row:
            lines.append(f"| {conv.problem} | `{conv.module}` | | {row['error']} | | | | | |")
            continue
        shape = "x".join(map(str, conv.input_shape))
        lines.append(
            f"| {conv.problem} | `{conv.module}` | {shape} | {row.get('eager_ms', 0):.3f} | "
            f"{row.get('compile_ms', 0):.3f} | {_timed(row, 'nchw')} | {_timed(row, 'nhwc')} | "
            f"{_timed(row, 'tiled')} | "
            f"{row.get('sol_ms', 0):.3f} |"
        )
    lines.append(end)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a level's folder")
    parser.add_argument("--problems", nargs="*", help="file stems (default: every one)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many problems")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    paths = sorted(args.kernelbench.glob("*.py"))
    if args.problems:
        paths = [p for p in paths if p.stem in set(args.problems)]
    convs = [c for c in map(first_convolution, paths) if c is not None]
    if args.limit:
        convs = convs[: args.limit]
    root = Path(tempfile.mkdtemp(prefix="bench-conv-"))
    rows = []
    for conv in convs:
        rows.append((conv, measure(conv, root)))
        print(conv.problem, rows[-1][1], flush=True)
        command = "PYTHONPATH=. python3 scripts/bench_conv_layouts.py " + " ".join(sys.argv[1:])
        gpu = torch.cuda.get_device_name(0)
        write_section(args.out, SECTION, table(rows, gpu, torch.__version__, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
