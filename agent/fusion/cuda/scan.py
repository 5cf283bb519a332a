"""CUDA scan kernels (cumsum, cumprod) along any dim, forward or reverse (a line read from its
end: no flipped copy), inclusive or exclusive.

Along the last dim (inner = 1) a block scans a row in chunks of blockDim elements: a warp scan
with shuffles, the warps' totals scanned by the first warp, plus the carry of the chunks before;
an exclusive scan takes the inclusive value of the lane before. Along another dim each thread
scans one line in order; neighbouring threads own neighbouring lines, so every step's loads and
stores are coalesced.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import standalone_operands
from agent.fusion.cuda.prelude import (
    LINE_KERNEL,
    idx_type,
    launch_params,
    pointer_params,
    row_threads,
)
from agent.fusion.cuda.row import REDUCE_CODE
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

SCAN_REDUCE = {"cumsum": "sum", "cumprod": "prod"}  # the reduction a scan accumulates

ROW_SCAN = """  static_assert(kInner == 1, "a row scan reads contiguous rows");
  __shared__ float totals[32];  // each warp's total, then their inclusive scan
  const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
  const int warps = (int)(blockDim.x >> 5);
  for (idx_t r = blockIdx.x; r < kRows; r += gridDim.x) {
    float carry = kIdentity;
    for (idx_t c0 = 0; c0 < kCols; c0 += blockDim.x) {
      const idx_t c = c0 + threadIdx.x;  // the position along the scan, not the column
      const idx_t at = r * kCols + (kReverse ? kCols - 1 - c : c);  // used only while c < kCols
      float v = c < kCols ? x[at] : kIdentity;
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const float before = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v = ka_combine<kOp>(before, v);
      }
      float before = __shfl_up_sync(0xffffffffu, v, 1);  // the lane before's inclusive value
      if (lane == 0) before = kIdentity;
      if (lane == 31) totals[warp] = v;
      __syncthreads();
      if (warp == 0) {
        float t = lane < warps ? totals[lane] : kIdentity;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
          const float before = __shfl_up_sync(0xffffffffu, t, offset);
          if (lane >= offset) t = ka_combine<kOp>(before, t);
        }
        totals[lane] = t;
      }
      __syncthreads();
      const float prefix = warp > 0 ? totals[warp - 1] : kIdentity;
      const float own = kExclusive ? before : v;
      if (c < kCols) y[at] = ka_combine<kOp>(carry, ka_combine<kOp>(prefix, own));
      carry = ka_combine<kOp>(carry, totals[warps - 1]);
      __syncthreads();  // the next chunk rewrites totals
    }
  }"""

LINE_SCAN = """  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  for (idx_t r = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; r < kRows; r += stride) {
    const idx_t base = r / kInner * (kCols * kInner) + r % kInner;
    float acc = kIdentity;
    for (idx_t s = 0; s < kCols; ++s) {
      const idx_t at = base + (kReverse ? kCols - 1 - s : s) * kInner;
      const float value = x[at];
      if constexpr (kExclusive) y[at] = acc;
      acc = ka_combine<kOp>(acc, value);
      if constexpr (!kExclusive) y[at] = acc;
    }
  }"""

SCAN_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kRows = {rows};
constexpr idx_t kCols = {cols};  // the scanned axis
constexpr idx_t kInner = {inner};
constexpr int kOp = {op};  // ka_combine's reduction
constexpr float kIdentity = {identity};
constexpr bool kReverse = {reverse};  // from the line's end
constexpr bool kExclusive = {exclusive};  // each output leaves its own element out

"""


def scan_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    x, y = standalone_operands(plan, kernel, names)
    reduce = SCAN_REDUCE[node.op]
    reverse, exclusive = bool(node.attrs.get("reverse")), bool(node.attrs.get("exclusive"))
    along_rows = kernel.inner == 1
    code = (SCAN_NAMESPACE + LINE_KERNEL).format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        rows=kernel.rows,
        cols=kernel.cols,
        inner=kernel.inner,
        op=REDUCE_CODE[reduce],
        identity=expressions.reduce_init(reduce),
        reverse=str(reverse).lower(),
        exclusive=str(exclusive).lower(),
        params=pointer_params([Param("x", "in"), Param("y", "out")]),
        body=ROW_SCAN if along_rows else LINE_SCAN,
        host_params=launch_params([Param("x", "in"), Param("y", "out")]),
        rows_per_block="1" if along_rows else "threads",
    )
    threads = 256
    if along_rows:  # a chunk a row when the row fits one block
        threads = row_threads(kernel.cols)
    return KernelSource(
        name=ns,
        kind="scan",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(x, "in"), Param(y, "out")],
        launch={"threads": threads},
        tunables={"threads": [64, 128, 256, 512, 1024]},
        description=(
            f"{kernel.rows} lines of {kernel.cols}: "
            + ("a block a row, chunked warp scans" if along_rows else "a thread a line")
            + (", from the end" if reverse else "")
            + (", exclusive" if exclusive else "")
        ),
    )
