"""CUDA argmax / argmin along any dim (int64 out).

Along the last dim (inner = 1) a block takes a row: each thread keeps the best of its strided
elements, then (value, index) pairs meet by warp shuffles and through shared memory, equal values
resolved to the smaller index. Along another dim each thread walks one line in order; neighbouring
threads own neighbouring lines, so every step's loads are coalesced. NaN beats every number (the
first NaN's index is the answer), as in torch.
"""

from __future__ import annotations

from agent.fusion.body import standalone_operands
from agent.fusion.cuda.prelude import (
    LINE_KERNEL,
    idx_type,
    launch_params,
    pointer_params,
    row_threads,
)
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

BEATS = {"argmax": "v > best", "argmin": "v < best"}
WORST = {"argmax": "-INFINITY", "argmin": "INFINITY"}

ROW_ARG = """  static_assert(kInner == 1, "a row's elements are contiguous");
  __shared__ float best_of[32];
  __shared__ long long at_of[32];
  const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
  const int warps = (int)(blockDim.x >> 5);
  for (idx_t r = blockIdx.x; r < kRows; r += gridDim.x) {
    float best = kWorst;
    long long at = kCols;  // no element yet: loses every tie
    for (idx_t c = threadIdx.x; c < kCols; c += blockDim.x) {
      const float v = x[r * kCols + c];
      if (at == kCols || beats(v, best)) {
        best = v;
        at = (long long)c;
      }
    }
    warp_best(best, at);
    if (lane == 0) {
      best_of[warp] = best;
      at_of[warp] = at;
    }
    __syncthreads();
    if (warp == 0) {
      best = lane < warps ? best_of[lane] : kWorst;
      at = lane < warps ? at_of[lane] : (long long)kCols;
      warp_best(best, at);
      if (lane == 0) y[r] = at;
    }
    __syncthreads();  // the next row rewrites the slots
  }"""

LINE_ARG = """  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  for (idx_t r = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; r < kRows; r += stride) {
    const idx_t base = r / kInner * (kCols * kInner) + r % kInner;
    float best = kWorst;
    long long at = 0;  // kept when every element is kWorst
    for (idx_t c = 0; c < kCols; ++c) {
      const float v = x[base + c * kInner];
      if (beats(v, best)) {
        best = v;
        at = (long long)c;
      }
    }
    y[r] = at;
  }"""

ARG_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kRows = {rows};
constexpr idx_t kCols = {cols};  // the reduced axis
constexpr idx_t kInner = {inner};
constexpr float kWorst = {worst};  // what every element at least ties

// v replaces the best so far: it is better, or the first NaN
__device__ __forceinline__ bool beats(float v, float best) {{
  return {beats} || (v != v && best == best);
}}

// The best (value, index) of the warp in every lane: equal values (NaNs included) keep the smaller
// index, so the pair is the first best whatever the order the lanes meet in.
[[maybe_unused]] __device__ __forceinline__ void warp_best(float& best, long long& at) {{
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {{
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const long long i = __shfl_xor_sync(0xffffffffu, at, offset);
    const bool ties = v == best || (v != v && best != best);
    if (beats(v, best) || (ties && i < at)) {{
      best = v;
      at = i;
    }}
  }}
}}

"""


def arg_reduction_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    op = plan.graph.node_by_name[kernel.nodes[0]].op
    x, y = standalone_operands(plan, kernel, names)
    local = [Param("x", "in"), Param("y", "out", "int64")]  # the kernel's own names
    along_rows = kernel.inner == 1
    code = (ARG_NAMESPACE + LINE_KERNEL).format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        rows=kernel.rows,
        cols=kernel.cols,
        inner=kernel.inner,
        beats=BEATS[op],
        params=pointer_params(local),
        worst=WORST[op],
        body=ROW_ARG if along_rows else LINE_ARG,
        host_params=launch_params(local),
        rows_per_block="1" if along_rows else "threads",
    )
    threads = 256
    if along_rows:  # about 8 elements a thread, at least a warp
        threads = row_threads(kernel.cols // 8)
    return KernelSource(
        name=ns,
        kind="arg_reduction",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(x, "in"), Param(y, "out", "int64")],
        launch={"threads": threads},
        tunables={"threads": [64, 128, 256, 512, 1024]},
        description=(
            f"{op} of {kernel.rows} lines of {kernel.cols}: "
            + ("a block a row, (value, index) warp shuffles" if along_rows else "a thread a line")
        ),
    )
