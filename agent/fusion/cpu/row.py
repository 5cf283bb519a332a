"""C++ row and axis kernels: OpenMP over rows (`rows_per_task` a task), one simd sweep per
reduction depth with `reduction(+/max/min)`, then the sweep that writes the element outputs. An
axis kernel's row is one output of a reduction along a middle dim: its sweep reads elements
`inner` apart, and neighbouring rows read neighbouring elements, so a task's rows share lines.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import lower_kernel, row_passes
from agent.fusion.cpu.prelude import c_params, row_tasks_launcher
from agent.fusion.cpu.row_access import RowAccess
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource


def row_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    ns = kernel.name
    rows = RowAccess(body, kernel.rows, kernel.cols, kernel.inner)
    lines = rows.setup("      ")
    lines += rows.row_ops(0)
    for p, (what, nodes, targets) in enumerate(row_passes(body)):
        clauses = ""
        if what == "reduce":
            for t in targets:
                red = body.nodes[t]
                lines.append(f"      float acc{t} = {expressions.reduce_init(red.op)};")
                clauses += f" reduction({expressions.OMP_REDUCTION[red.op]} : acc{t})"
        lines.append(f"#pragma omp simd{clauses}")
        lines.append("      for (int64_t c = 0; c < kCols; ++c) {")
        lines += rows.loads(nodes, "        ")
        lines += rows.ops(nodes, "        ")
        if what == "reduce":
            for t in targets:
                red = body.nodes[t]
                combined = expressions.reduce_combine(red.op, f"acc{t}", rows.ref(red.args[0]))
                lines.append(f"        acc{t} = {combined};")
        else:
            for o in body.elem_outputs():
                lines.append(f"        {o.buffer}[{rows.element_index()}] = {rows.ref(o.bnode)};")
        lines.append("      }")
        if what == "reduce":
            for t in targets:
                lines.append(f"      const float s{t} = acc{t};")
            lines += rows.row_ops(p + 1)
    for o in body.row_outputs():
        lines.append(f"      {o.buffer}[r] = {rows.ref(o.bnode)};")
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {kernel.rows};
constexpr int64_t kCols = {kernel.cols};
}}  // namespace {ns}

"""
    code += row_tasks_launcher(ns, c_params(body.params()), "\n".join(lines))
    per_task = max(1, min(64, 16384 // kernel.cols, kernel.rows // 64))
    along = f" ({kernel.inner} apart)" if kernel.inner > 1 else ""
    return KernelSource(
        name=ns,
        kind=kernel.kind,
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=body.params(),
        launch={"rows_per_task": per_task},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=(
            f"{kernel.rows} rows x {kernel.cols}{along}: {len(body.reductions())} reduction(s), "
            "OpenMP over rows, simd sweeps"
        ),
    )
