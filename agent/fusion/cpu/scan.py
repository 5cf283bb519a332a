"""C++ scan kernels (cumsum, cumprod) along any dim: OpenMP over the lines of the element space
(`rows_per_task` a task), each line accumulated in order (from its end for a reverse scan), its
elements `inner` apart; an exclusive scan writes the running value before taking the element.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import standalone_operands
from agent.fusion.cpu.prelude import c_params, row_tasks_launcher
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

SCAN_REDUCE = {"cumsum": "sum", "cumprod": "prod"}  # the reduction a scan accumulates


def scan_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    x, y = standalone_operands(plan, kernel, names)
    params = [Param(x, "in"), Param(y, "out")]
    reduce = SCAN_REDUCE[node.op]
    reverse, exclusive = bool(node.attrs.get("reverse")), bool(node.attrs.get("exclusive"))
    step = f"acc = {expressions.reduce_combine(reduce, 'acc', f'{x}[i]')};"
    store = f"{y}[i] = acc;"
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {kernel.rows};
constexpr int64_t kCols = {kernel.cols};  // the scanned axis
constexpr int64_t kInner = {kernel.inner};
}}  // namespace {ns}

"""
    line = f"""      const int64_t base = r / kInner * (kCols * kInner) + r % kInner;
      float acc = {expressions.reduce_init(reduce)};
      for (int64_t s = 0; s < kCols; ++s) {{
        const int64_t c = {"kCols - 1 - s" if reverse else "s"};
        const int64_t i = base + c * kInner;
        {store if exclusive else step}
        {step if exclusive else store}
      }}"""
    code += row_tasks_launcher(ns, c_params(params), line)
    return KernelSource(
        name=ns,
        kind="scan",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, kernel.rows // 64))},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=f"{kernel.rows} lines of {kernel.cols} ({kernel.inner} apart), "
        + ", ".join(_direction(reverse, exclusive)),
    )


def _direction(reverse: bool, exclusive: bool) -> list[str]:
    return ["from the end" if reverse else "in order"] + (["exclusive"] if exclusive else [])
