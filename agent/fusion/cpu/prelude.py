"""What every kernels/fused.cpp shares: the prelude, the file's assembly from the kernels'
sources, and the kernels' pointer parameters.

Plain C++17, standard library only; every kernel has an `extern "C"` launcher taking raw
pointers and its tuning knobs. Shapes are compile-time constants, as on CUDA.
"""

from __future__ import annotations

from agent.fusion.program import KernelSource, Param

DIALECT = "cpu"

PRELUDE = """#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {
// Below this many elements a kernel runs on the calling thread: waking the OpenMP team costs
// more than the work (and much more on a busy machine).
constexpr int64_t kParallelMin = 1 << 16;
}  // namespace
"""


def row_tasks_launcher(ns: str, params: list[str], row_body: str) -> str:
    """The extern "C" launcher of a kernel over `kRows` rows (of `kCols`), OpenMP tasks of
    `rows_per_task` rows: `row_body` is the code for row `r`."""
    return f"""extern "C" void {ns}_launch({", ".join(params)}, int64_t rows_per_task) {{
  using namespace {ns};
  if (rows_per_task < 1) rows_per_task = 1;
  const int64_t tasks = (kRows + rows_per_task - 1) / rows_per_task;
#pragma omp parallel for schedule(static) if (tasks > 1 && kRows * kCols >= kParallelMin)
  for (int64_t t = 0; t < tasks; ++t) {{
    const int64_t r_end = std::min(kRows, (t + 1) * rows_per_task);
    for (int64_t r = t * rows_per_task; r < r_end; ++r) {{
{row_body}
    }}
  }}
}}
"""


def c_params(params: list[Param]) -> list[str]:
    """A launcher's parameters: pointers (the buffers read const), numbers by value."""
    return [p.declaration(restrict=True) for p in params]


def fused_cpp(sources: list[KernelSource], header: str) -> str:
    parts = [header, PRELUDE]
    for s in sources:
        parts.append(f"// ---- {s.name} [{s.kind}]: {', '.join(s.nodes)}\n// {s.description}")
        parts.append(s.code)
    return "\n".join(parts)
