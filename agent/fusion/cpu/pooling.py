"""C++ max and average pooling (1-d to 3-d): OpenMP over the output rows (each plane's outputs
along the last spatial dim), `rows_per_task` rows a task, each output's window summed or maxed
in place (windows.py).
"""

from __future__ import annotations

from agent.fusion.body import standalone_operands
from agent.fusion.cpu.prelude import c_params, row_tasks_launcher
from agent.fusion.ir import numel
from agent.fusion.plan import Kernel, Plan, pool_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import padded, window_lines


def pooling_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    pool = pool_geometry(plan.graph, node)
    x, y = standalone_operands(plan, kernel, names)
    params = [Param(x, "in"), Param(y, "out")]
    out0, out1, out2 = padded(pool.outputs, 1)
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {pool.planes * out0 * out1};  // (plane, o0, o1)
constexpr int64_t kCols = {out2};  // o2
}}  // namespace {ns}

"""
    line = [
        f"      const int64_t base = r / {out0 * out1} * {numel(pool.inputs)};",
        f"      const int64_t o0 = r / {out1} % {out0};",
        f"      const int64_t o1 = r % {out1};",
        "      for (int64_t o2 = 0; o2 < kCols; ++o2) {",
        *window_lines(pool, node, x, "        "),
        f"        {y}[r * kCols + o2] = value;",
        "      }",
    ]
    code += row_tasks_launcher(ns, c_params(params), "\n".join(line))
    rows = pool.planes * out0 * out1
    return KernelSource(
        name=ns,
        kind="pooling",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, rows // 64))},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=f"{node.op} {'x'.join(map(str, pool.window))} windows over {pool.planes} "
        "planes, OpenMP over output rows",
    )
