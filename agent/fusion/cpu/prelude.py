"""What every kernels/fused.cpp shares: the prelude, the file's assembly from the kernels'
sources, and the kernels' pointer parameters.

Plain C++17, standard library only; every kernel has an `extern "C"` launcher taking raw
pointers and its tuning knobs. Shapes are compile-time constants, as on CUDA.
"""

from __future__ import annotations

from agent.fusion.program import KernelSource

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


def c_params(reads: list[str], writes: list[str]) -> list[str]:
    return [f"const float* __restrict__ {b}" for b in reads] + [
        f"float* __restrict__ {b}" for b in writes
    ]


def fused_cpp(sources: list[KernelSource], header: str) -> str:
    parts = [header, PRELUDE]
    for s in sources:
        parts.append(f"// ---- {s.name} [{s.kind}]: {', '.join(s.nodes)}\n// {s.description}")
        parts.append(s.code)
    return "\n".join(parts)
