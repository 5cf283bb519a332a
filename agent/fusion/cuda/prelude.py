"""What every kernels/fused.cu shares: the prelude (device queries, vector loads and stores,
warp and team reductions, the cuBLAS and cuDNN handles), the file's assembly from the kernels'
sources, and the kernels' signature conventions (pointer parameters, index types).

The file has no torch headers: every kernel comes with an `extern "C"` launcher taking raw
pointers, its launch configuration and the stream, and returning nullptr or an error message.
"""

from __future__ import annotations

from agent.fusion.cuda import cudnn_conv
from agent.fusion.program import KernelSource, Param

DIALECT = "cuda"

PRELUDE = r"""#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
{cublas_include}{cudnn_include}
namespace {{

constexpr int kMaxDevices = 64;

[[maybe_unused]] int ka_device() {{
  int device = 0;
  cudaGetDevice(&device);
  return device >= 0 && device < kMaxDevices ? device : 0;
}}

// Multiprocessor count and opt-in shared memory per block, looked up once per device.
[[maybe_unused]] int ka_sm_count() {{
  static int counts[kMaxDevices] = {{}};
  const int device = ka_device();
  if (counts[device] == 0) {{
    int value = 0;
    cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device);
    counts[device] = value > 0 ? value : 1;
  }}
  return counts[device];
}}

[[maybe_unused]] int ka_smem_optin() {{
  static int bytes[kMaxDevices] = {{}};
  const int device = ka_device();
  if (bytes[device] == 0) {{
    int value = 0;
    cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    bytes[device] = value > 0 ? value : 48 * 1024;
  }}
  return bytes[device];
}}

[[maybe_unused]] const char* ka_error(cudaError_t err) {{
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}}

// Threads per block: a multiple of 32 in [32, 1024].
[[maybe_unused]] int ka_threads(int threads) {{
  if (threads < 32) threads = 32;
  if (threads > 1024) threads = 1024;
  return threads / 32 * 32;
}}

[[maybe_unused]] bool ka_aligned(const void* p) {{
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}}

// Enough blocks to fill the GPU `per_sm` deep, never more than the work needs (grid-stride loops
// cover the rest).
[[maybe_unused]] unsigned ka_grid(long long work, int threads, int per_sm) {{
  long long blocks = (work + threads - 1) / threads;
  const long long cap = (long long)ka_sm_count() * (per_sm > 0 ? per_sm : 1);
  if (blocks > cap) blocks = cap;
  return blocks < 1 ? 1u : (unsigned)blocks;
}}

template <int V>
__device__ __forceinline__ void ka_ld(const float* p, float (&v)[V]) {{
  if constexpr (V == 4) {{
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  }} else {{
#pragma unroll
    for (int l = 0; l < V; ++l) v[l] = p[l];
  }}
}}

template <int V>
__device__ __forceinline__ void ka_st(float* p, const float (&v)[V]) {{
  if constexpr (V == 4) {{
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }} else {{
#pragma unroll
    for (int l = 0; l < V; ++l) p[l] = v[l];
  }}
}}

// Reductions: OP 0 = sum, 1 = max, 2 = min, 3 = product. The xor butterfly leaves the result in
// every lane.
template <int OP>
__device__ __forceinline__ float ka_combine(float a, float b) {{
  if constexpr (OP == 0) return a + b;
  else if constexpr (OP == 1) return fmaxf(a, b);
  else if constexpr (OP == 2) return fminf(a, b);
  else return a * b;
}}

template <int OP>
__device__ __forceinline__ float ka_warp_reduce(float v) {{
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = ka_combine<OP>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}}

// A team is a warp (WARP) or the whole block: one partial per warp in `slots`, then every warp
// reduces the partials itself, so all threads get the result after a single __syncthreads.
template <bool WARP, int OP>
__device__ __forceinline__ float ka_team_reduce(float v, float* slots, float identity) {{
  v = ka_warp_reduce<OP>(v);
  if constexpr (!WARP) {{
    const int lane = threadIdx.x & 31;
    if (lane == 0) slots[threadIdx.x >> 5] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? slots[lane] : identity;
    v = ka_warp_reduce<OP>(v);
  }}
  return v;
}}
{cublas_helpers}{cudnn_helpers}
}}  // namespace
"""

CUBLAS_HELPERS = r"""
// One cuBLAS handle per device, created on first use; every call sets the current stream.
[[maybe_unused]] cublasHandle_t ka_cublas_handle() {
  static cublasHandle_t handles[kMaxDevices] = {};
  const int device = ka_device();
  if (handles[device] == nullptr && cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS)
    handles[device] = nullptr;
  return handles[device];
}
"""


# The end of a kernel over lines (x in, y out; a block a row, or a thread a line and
# `threads` lines a block), its launcher and the launcher's C name: scans and arg reductions.
LINE_KERNEL = """__global__ void __launch_bounds__(1024) kernel({params}) {{
{body}
}}

const char* launch({host_params}, int threads, cudaStream_t stream) {{
  threads = ka_threads(threads);
  const unsigned blocks = ka_grid(kRows, {rows_per_block}, 2048 / threads);
  kernel<<<blocks, threads, 0, stream>>>(x, y);
  return ka_error(cudaGetLastError());
}}
}}  // namespace {ns}

extern "C" const char* {ns}_launch({host_params}, int threads, cudaStream_t stream) {{
  return {ns}::launch(x, y, threads, stream);
}}
"""


def row_threads(work_items: int) -> int:
    """Threads for a block a row: a power of two from a warp up to one per work item (1024 at
    most)."""
    threads = 32
    while threads < min(work_items, 1024):
        threads *= 2
    return threads


def idx_type(total: int) -> str:
    return "uint32_t" if total < 2**31 else "int64_t"


def pointer_params(params: list[Param]) -> str:
    """A kernel's parameters: pointers (inputs const, all restrict-qualified), numbers."""
    return ", ".join(p.declaration(restrict=True) for p in params)


def launch_params(params: list[Param]) -> str:
    """A host launcher's parameters (no restrict: they only pass through)."""
    return ", ".join(p.declaration(restrict=False) for p in params)


def fused_cu(sources: list[KernelSource], header: str) -> str:
    has_gemm = any(s.kind == "gemm" for s in sources)
    has_conv = any(s.kind == "convolution" for s in sources)
    prelude = PRELUDE.format(
        cublas_include="#include <cublas_v2.h>\n" if has_gemm else "",
        cublas_helpers=CUBLAS_HELPERS if has_gemm else "",
        cudnn_include=cudnn_conv.INCLUDE if has_conv else "",
        cudnn_helpers=cudnn_conv.HELPERS if has_conv else "",
    )
    parts = [header, prelude]
    for s in sources:
        parts.append(f"// ---- {s.name} [{s.kind}]: {', '.join(s.nodes)}\n// {s.description}")
        parts.append(s.code)
    return "\n".join(parts)
