"""C++ direct convolution (1-d to 3-d, forward or transposed, grouped): OpenMP over the output
rows (each (n, channel, o0, o1) along the last spatial dim), `rows_per_task` rows a task, each
output's sum in place (convolutions.py).
"""

from __future__ import annotations

from agent.fusion.body import conv_operands
from agent.fusion.convolutions import conv_lines, describe
from agent.fusion.cpu.prelude import c_params, row_tasks_launcher
from agent.fusion.plan import Kernel, Plan, conv_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import padded


def convolution_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    conv = conv_geometry(plan.graph, node)
    x, w, b, y = conv_operands(plan, kernel, names)
    params = [Param(x, "in"), Param(w, "in"), *([Param(b, "in")] if b else []), Param(y, "out")]
    out0, out1, out2 = padded(conv.outputs, 1)
    channels = conv.out_channels
    rows = conv.batch * channels * out0 * out1
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {rows};  // (n, co, o0, o1)
constexpr int64_t kCols = {out2};  // o2
}}  // namespace {ns}

"""
    line = [
        f"      const int64_t n = r / {channels * out0 * out1};",
        f"      const int64_t co = r / {out0 * out1} % {channels};",
        f"      const int64_t o0 = r / {out1} % {out0};",
        f"      const int64_t o1 = r % {out1};",
        "      for (int64_t o2 = 0; o2 < kCols; ++o2) {",
        *conv_lines(conv, x, w, b, "        "),
        f"        {y}[r * kCols + o2] = value;",
        "      }",
    ]
    code += row_tasks_launcher(ns, c_params(params), "\n".join(line))
    return KernelSource(
        name=ns,
        kind="convolution",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, rows // 64))},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=f"{describe(conv)}, direct, OpenMP over output rows",
    )
