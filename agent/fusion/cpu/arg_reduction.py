"""C++ argmax / argmin along any dim (int64 out): OpenMP over the lines of the element space
(`rows_per_task` a task), each line walked in order, its elements `inner` apart. A strict
comparison keeps the first of equal values, and NaN beats every number (the first NaN's index is
the answer), as in torch.
"""

from __future__ import annotations

from agent.fusion.body import standalone_operands
from agent.fusion.cpu.prelude import c_params, row_tasks_launcher
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

BEATS = {"argmax": "v > best", "argmin": "v < best"}  # v replaces the best so far


def arg_reduction_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    op = plan.graph.node_by_name[kernel.nodes[0]].op
    x, y = standalone_operands(plan, kernel, names)
    params = [Param(x, "in"), Param(y, "out", "int64")]
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {kernel.rows};
constexpr int64_t kCols = {kernel.cols};  // the reduced axis
constexpr int64_t kInner = {kernel.inner};
}}  // namespace {ns}

"""
    line = f"""      const int64_t base = r / kInner * (kCols * kInner) + r % kInner;
      float best = {x}[base];
      int64_t at = 0;
      for (int64_t c = 1; c < kCols && best == best; ++c) {{  // a NaN best is final
        const float v = {x}[base + c * kInner];
        if ({BEATS[op]} || v != v) {{
          best = v;
          at = c;
        }}
      }}
      {y}[r] = at;"""
    code += row_tasks_launcher(ns, c_params(params), line)
    return KernelSource(
        name=ns,
        kind="arg_reduction",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, kernel.rows // 64))},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=f"{op} of {kernel.rows} lines of {kernel.cols} ({kernel.inner} apart)",
    )
