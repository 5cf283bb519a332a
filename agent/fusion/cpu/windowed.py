"""C++ window kernels: max and average pooling (1-d to 3-d) and direct convolution (1-d to 3-d,
forward or transposed, grouped). OpenMP over the output rows (each plane's outputs along the
last spatial dim), `rows_per_task` rows a task, each output's window maxed or summed in place
(windows.py).
"""

from __future__ import annotations

from agent.fusion.body import (
    conv_operands,
    conv_params,
    described_epilogue,
    epilogue_lines,
    lower_kernel,
    standalone_operands,
)
from agent.fusion.cpu.prelude import DIALECT, c_params, row_tasks_launcher
from agent.fusion.ir import numel
from agent.fusion.plan import Kernel, Plan, conv_geometry, pool_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import conv_lines, describe_conv, padded, window_lines

TUNABLES = {"rows_per_task": [1, 4, 16, 64]}


def _output_rows(ns: str, params: list[Param], planes: int, outputs, body: list[str], store):
    """The code of a kernel over every (plane, o0, o1) row, computing `value` for each o2 with
    `body`, then `store(index)`'s lines with the output's flat index; and its row count."""
    out0, out1, out2 = padded(outputs, 1)
    rows = planes * out0 * out1
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {rows};  // (plane, o0, o1)
constexpr int64_t kCols = {out2};  // o2
}}  // namespace {ns}

"""
    line = [
        f"      const int64_t plane = r / {out0 * out1};",
        f"      const int64_t o0 = r / {out1} % {out0};",
        f"      const int64_t o1 = r % {out1};",
        "      for (int64_t o2 = 0; o2 < kCols; ++o2) {",
        *("        " + line for line in body),
        *store("r * kCols + o2"),
        "      }",
    ]
    return code + row_tasks_launcher(ns, c_params(params), "\n".join(line)), rows


def pooling_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    node = plan.graph.node_by_name[kernel.nodes[0]]
    pool = pool_geometry(plan.graph, node)
    x, y = standalone_operands(plan, kernel, names)
    params = [Param(x, "in"), Param(y, "out")]
    body = [f"const int64_t base = plane * {numel(pool.inputs)};", *window_lines(pool, node, x)]
    store = lambda index: [f"        {y}[{index}] = value;"]  # noqa: E731
    code, rows = _output_rows(kernel.name, params, pool.planes, pool.outputs, body, store)
    return KernelSource(
        name=kernel.name,
        kind="pooling",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{kernel.name}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, rows // 64))},
        tunables=TUNABLES,
        description=f"{node.op} {'x'.join(map(str, pool.window))} windows over {pool.planes} "
        "planes, OpenMP over output rows",
    )


def convolution_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    """The direct loop, its epilogue (the pointwise nodes after it) applied to each output."""
    node = plan.graph.node_by_name[kernel.nodes[0]]
    conv = conv_geometry(plan.graph, node)
    x, w, b, _ = conv_operands(plan, kernel, names)
    epilogue = lower_kernel(plan, kernel, names)
    params = conv_params(x, w, b, epilogue.params())
    lines = [
        f"const int64_t co = plane % {conv.out_channels};",
        f"const int64_t n = plane / {conv.out_channels};",
        *conv_lines(conv, x, w, b),
    ]
    store = lambda index: epilogue_lines(epilogue, "value", index, DIALECT, " " * 8)  # noqa: E731
    planes = conv.batch * conv.out_channels
    code, rows = _output_rows(kernel.name, params, planes, conv.outputs, lines, store)
    return KernelSource(
        name=kernel.name,
        kind="convolution",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{kernel.name}_launch",
        params=params,
        launch={"rows_per_task": max(1, min(64, rows // 64))},
        tunables=TUNABLES,
        description=f"{describe_conv(conv)}, direct, OpenMP over output rows"
        + described_epilogue(kernel),
    )
