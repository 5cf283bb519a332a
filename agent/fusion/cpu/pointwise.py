"""C++ pointwise kernels: OpenMP tasks of `block` elements, each walking its rows (the longest
suffix of the shape along which every operand's offset hoists out of the row).
"""

from __future__ import annotations

from agent.fusion.body import Body, lower_kernel
from agent.fusion.cpu.prelude import c_params
from agent.fusion.cpu.row_access import RowAccess
from agent.fusion.ir import numel, split_rows
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource


def _pick_cols(body: Body, shape: tuple[int, ...], total: int) -> int:
    """The longest row (a suffix product of the output shape) along which every load splits into
    a hoisted row offset plus the column: long simd loops, no per-element index arithmetic."""
    best = shape[-1] if shape else 1
    for k in range(len(shape) - 1, -1, -1):
        cols = numel(shape[k:])
        if cols and all(split_rows(n.terms, n.total, cols) is not None for n in body.loads("elem")):
            best = cols
    return max(best, 1) if total % max(best, 1) == 0 else 1


def pointwise_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    shape = plan.graph.node_by_name[kernel.nodes[-1]].shape
    ns = kernel.name
    total = kernel.numel
    cols = _pick_cols(body, shape, total)
    rows = RowAccess(body, total // cols, cols)
    closure = body.closure([o.bnode for o in body.outputs])
    inner = rows.loads(closure, "        ")
    inner += rows.ops(closure, "        ")
    inner += [f"        {o.buffer}[r * kCols + c] = {rows.ref(o.bnode)};" for o in body.outputs]
    code = f"""namespace {ns} {{
constexpr int64_t kN = {total};
constexpr int64_t kCols = {cols};
}}  // namespace {ns}

extern "C" void {ns}_launch({", ".join(c_params(body.params()))}, int64_t block) {{
  using namespace {ns};
  if (block < 256) block = 256;
  const int64_t tasks = (kN + block - 1) / block;
#pragma omp parallel for schedule(static) if (tasks > 1 && kN >= kParallelMin)
  for (int64_t t = 0; t < tasks; ++t) {{
    int64_t i = t * block;
    const int64_t end = std::min(kN, i + block);
    while (i < end) {{
      const int64_t r = i / kCols;
      const int64_t c0 = i - r * kCols;
      const int64_t c1 = std::min(kCols, c0 + (end - i));
{chr(10).join(rows.setup("      "))}
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {{
{chr(10).join(inner)}
      }}
      i += c1 - c0;
    }}
  }}
}}
"""
    return KernelSource(
        name=ns,
        kind="pointwise",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=body.params(),
        launch={"block": _default_block(total)},
        tunables={"block": [4096, 16384, 65536]},
        description=f"{total} elements in rows of {cols}, OpenMP tasks of `block` elements",
    )


def _default_block(total: int) -> int:
    """Elements per OpenMP task: about 64 tasks, each between 1K and 64K elements."""
    block = 1024
    while block * 2 <= min(65536, total // 64):
        block *= 2
    return block
