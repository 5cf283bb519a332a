"""A cuDNN convolution's epilogue: the pointwise nodes after it (plan.py), applied as its result
leaves the library call, so the output is written once.

Two ways out, one per layout (cudnn_conv.py). NCHW: cuDNN writes the kernel's work buffer, then
one vectorised pointwise kernel (the GEMM's epilogue kernel, pointwise.py) reads it and writes
the outputs. NHWC: cuDNN writes channels-last scratch, and the transpose that brings it back to
NCHW (bias added on the way) computes the epilogue at each element's NCHW position as it stores
it: the separate read and write of the whole output that an epilogue kernel costs, and that
torch.compile's channels-last convolutions do not pay, is gone. Without an epilogue, the NCHW
call writes the output itself and the NHWC transpose writes it plainly.

Both ways are `finish_nchw(y, tail, stream)` and `finish_nhwc(y_t, b, y, tail, stream)` in the
kernel's namespace; `Tail` holds what the epilogue reads and writes besides the convolution's
result, as the launcher received them. A kernel that has the convolution's value of one element
in a register (the NHWC transpose back, the tiled direct kernel: conv_tiled.py) hands it to
`emit(tail, y, at, value)`, which stores it at NCHW position `at`, through the epilogue where
there is one.
"""

from __future__ import annotations

from agent.fusion.body import Body, epilogue_lines
from agent.fusion.cuda.pointwise import pointwise_namespace
from agent.fusion.cuda.prelude import DIALECT, idx_type
from agent.fusion.program import Param

PLAIN = """struct Tail {{}};

using idx_t = {idx_t};

__device__ __forceinline__ void emit(const Tail& tail, float* y, idx_t at, float value) {{
  (void)tail;
  y[at] = value;
}}

const char* finish_nchw(const float* y, const Tail& tail, cudaStream_t stream) {{
  (void)y;
  (void)tail;
  (void)stream;
  return nullptr;
}}

const char* finish_nhwc(const float* y_t, const float* b, float* y, const Tail& tail,
                        cudaStream_t stream) {{
  (void)tail;
  return ka_transpose_on(y_t, y, kBatch, kYSpatial, kYChannels, b, stream);
}}
"""

FUSED = """struct Tail {{
{fields}
}};

{epilogue}
// A pointwise kernel's default launch: a convolution's launch parameters are not tuned.
const char* finish_nchw(const float* y, const Tail& tail, cudaStream_t stream) {{
  return epilogue::launch({nchw_args}, 512, 16, stream);
}}

using idx_t = {idx_t};

// The convolution's value at NCHW position `at` through the epilogue into the outputs (y, the
// work buffer, is not written: the value comes here instead).
__device__ __forceinline__ void emit(const Tail& tail, float* y, idx_t at, float value) {{
  (void)y;
{aliases}
{store}
}}

// y_t as [batch][spatial][channels] through 32 x 33 tiles of shared memory (ka_transpose's
// walk), each element stored at its NCHW position `at` through the epilogue.
__global__ void __launch_bounds__(kTile * kTileRows)
    back_through_epilogue(const float* __restrict__ y_t, const float* __restrict__ b,
                          const Tail tail) {{
  __shared__ float tile[kTile][kTile + 1];
  constexpr long long rows = kYSpatial, cols = kYChannels;
  constexpr long long tiles_c = (cols + kTile - 1) / kTile;
  constexpr long long per_outer = (rows + kTile - 1) / kTile * tiles_c;
  for (long long t = blockIdx.x; t < kBatch * per_outer; t += gridDim.x) {{
    const long long o = t / per_outer, r0 = t % per_outer / tiles_c * kTile;
    const long long c0 = t % tiles_c * kTile;
    const float* src = y_t + o * rows * cols;
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {{
      const long long r = r0 + k, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        tile[k][threadIdx.x] = src[r * cols + c] + (b != nullptr ? b[c] : 0.0f);
    }}
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) {{
      const long long c = c0 + k, r = r0 + threadIdx.x;
      if (r < rows && c < cols) {{
        emit(tail, nullptr, (idx_t)(o * rows * cols + c * rows + r), tile[threadIdx.x][k]);
      }}
    }}
    __syncthreads();
  }}
}}

const char* finish_nhwc(const float* y_t, const float* b, float* y, const Tail& tail,
                        cudaStream_t stream) {{
  (void)y;
  const long long tiles =
      kBatch * ((kYSpatial + kTile - 1) / kTile) * ((kYChannels + kTile - 1) / kTile);
  const long long cap = (long long)ka_sm_count() * 8;
  const unsigned blocks = (unsigned)(tiles < cap ? tiles : cap);
  back_through_epilogue<<<blocks, dim3(kTile, kTileRows), 0, stream>>>(y_t, b, tail);
  return ka_error(cudaGetLastError());
}}
"""


def tail_params(epilogue: Body) -> list[Param]:
    """What the epilogue reads and writes besides the work buffer: Tail's fields, in order."""
    return [p for p in epilogue.params() if p.buffer != epilogue.accumulator]


def tail_code(epilogue: Body | None, total: int) -> str:
    """`Tail`, `finish_nchw` and `finish_nhwc` for a convolution of `total` outputs whose
    epilogue body (lowered with the work buffer as its accumulator) is `epilogue`, or None for
    one without."""
    if epilogue is None:
        return PLAIN.format(idx_t=idx_type(total))
    fields = tail_params(epilogue)
    code, params = pointwise_namespace("epilogue", epilogue, total)
    work = epilogue.accumulator
    return FUSED.format(
        fields="\n".join(f"  {p.declaration(restrict=False)};" for p in fields),
        epilogue=code,
        nchw_args=", ".join("y" if p.buffer == work else f"tail.{p.buffer}" for p in params),
        idx_t=idx_type(total),
        aliases="\n".join(f"  {p.declaration(restrict=False)} = tail.{p.buffer};" for p in fields),
        store="\n".join(epilogue_lines(epilogue, "value", "at", DIALECT, " " * 2)),
    )
