"""A convolution through cuDNN, called from the extension's C++ (not through torch): forward,
or transposed as cuDNN's backward-data with x as the gradient, 1-d (as 2-d of height 1) to 3-d,
grouped.

Two layouts: NCHW, the tensors as they are (the bias by cudnnAddTensor), and NHWC, the one the
tensor cores want (Inductor runs ungrouped convolutions channels-last for that reason): x and w
are transposed into channels-last scratch, cuDNN writes y there, and one more transpose writes it
back as NCHW with the bias added on the way, through the pointwise epilogue that follows the
convolution where there is one (conv_epilogue.py). A third way, for a convolution whose reduction
is short, is no cuDNN at all: conv_tiled.py's register-tiled direct kernel. The launch parameter
`layout` picks one (1 NCHW, 2 NHWC, 3 tiled); 0, the default, times every way that takes the
shape on the first call (each whole: transposes, convolution, bias, epilogue; twice each,
interleaved) and keeps the fastest, so a shape where the transposes cost more than they buy
stays NCHW, and one where cuDNN's tensor cores have little to do runs the tiled kernel.

A kernel's shapes are compile-time constants, so a layout's descriptors, the algorithm cuDNN's
Find measured fastest (its workspace within MAX_WORKSPACE), that workspace and the scratch are
made on the first call and kept, per device, TF32 setting and `layout` value. TF32 is the same
runtime knob as the GEMM's: cuDNN's default math under the loose protocol, FMA only under the
strict one (the tiled kernel is fp32 multiply-adds either way). The code is compiled only where
the build defines KA_HAVE_CUDNN (gpu_workers/harness/build/compile.py finds the cuDNN that
torch's wheels bring); where it is missing, the launcher runs the per-output direct kernel
instead. Where it is there, a shape none
of the ways above can run is the launcher's error, never a silent switch to that kernel: the
kernel is described by its ways, and its time must be one of theirs.
"""

from __future__ import annotations

from math import prod

from agent.fusion.cuda.conv_tiled import tiled_code
from agent.fusion.plan import ConvShape

MAX_WORKSPACE = 1 << 30
# the `layout` launch parameter's values: 0 times every way that takes the shape, the others
# force one (tiled: conv_tiled.py's direct kernel)
LAYOUTS = {"measured": 0, "nchw": 1, "nhwc": 2, "tiled": 3}

HELPERS = r"""
#if defined(KA_HAVE_CUDNN)
// One cuDNN handle per device, created on first use; every call sets the current stream.
[[maybe_unused]] cudnnHandle_t ka_cudnn_handle() {
  static cudnnHandle_t handles[kMaxDevices] = {};
  const int device = ka_device();
  if (handles[device] == nullptr && cudnnCreate(&handles[device]) != CUDNN_STATUS_SUCCESS)
    handles[device] = nullptr;
  return handles[device];
}

#define KA_CUDNN_TRY(call)                                      \
  do {                                                          \
    const cudnnStatus_t ka_status_ = (call);                    \
    if (ka_status_ != CUDNN_STATUS_SUCCESS)                     \
      return cudnnGetErrorString(ka_status_);                   \
  } while (0)

#define KA_CUDA_TRY(call)                                       \
  do {                                                          \
    const cudaError_t ka_error_ = (call);                       \
    if (ka_error_ != cudaSuccess) return cudaGetErrorString(ka_error_); \
  } while (0)

constexpr int kTile = 32, kTileRows = 8;

// [outer][rows][cols] -> [outer][cols][rows] through 32 x 33 tiles of shared memory, so both the
// loads and the stores coalesce; bias[col] is added on the way where given. NCHW -> NHWC is
// rows = channels, cols = spatial; NHWC -> NCHW the other way round, with the bias.
__global__ void __launch_bounds__(kTile * kTileRows)
    ka_transpose(const float* __restrict__ in, float* __restrict__ out, long long outer,
                 long long rows, long long cols, const float* __restrict__ bias) {
  __shared__ float tile[kTile][kTile + 1];
  const long long tiles_c = (cols + kTile - 1) / kTile;
  const long long per_outer = (rows + kTile - 1) / kTile * tiles_c;
  for (long long t = blockIdx.x; t < outer * per_outer; t += gridDim.x) {
    const long long o = t / per_outer, r0 = t % per_outer / tiles_c * kTile;
    const long long c0 = t % tiles_c * kTile;
    const float* src = in + o * rows * cols;
    float* dst = out + o * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const long long r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols)
        tile[i][threadIdx.x] = src[r * cols + c] + (bias != nullptr ? bias[c] : 0.0f);
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const long long c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

[[maybe_unused]] const char* ka_transpose_on(const float* in, float* out, long long outer,
                                             long long rows, long long cols, const float* bias,
                                             cudaStream_t stream) {
  const long long tiles = outer * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  const long long cap = (long long)ka_sm_count() * 8;
  const unsigned blocks = (unsigned)(tiles < cap ? tiles : cap);
  ka_transpose<<<blocks, dim3(kTile, kTileRows), 0, stream>>>(in, out, outer, rows, cols, bias);
  return ka_error(cudaGetLastError());
}
#endif
"""

INCLUDE = "#if defined(KA_HAVE_CUDNN)\n#include <cudnn.h>\n#endif\n"

CODE = """namespace {ns} {{
#if defined(KA_HAVE_CUDNN)
// {what}
constexpr int kDims = {dims};
constexpr int kXDims[kDims] = {{{x_dims}}};
constexpr int kYDims[kDims] = {{{y_dims}}};
constexpr int kWDims[kDims] = {{{w_dims}}};
constexpr int kBDims[kDims] = {{{b_dims}}};
constexpr int kPadding[kDims - 2] = {{{padding}}};
constexpr int kStride[kDims - 2] = {{{stride}}};
constexpr int kDilation[kDims - 2] = {{{dilation}}};
constexpr size_t kMaxWorkspace = {max_workspace}ull;
// x, w and y as [outer][channels][spatial], for the transposes of the NHWC layout.
constexpr long long kBatch = {batch}, kXChannels = {x_channels}, kXSpatial = {x_spatial};
constexpr long long kYChannels = {y_channels}, kYSpatial = {y_spatial};
constexpr long long kWOuter = {w_outer}, kWChannels = {w_channels}, kWWindow = {w_window};

{tail}

{tiled}

constexpr int kNchw = 1, kNhwc = 2, kTiled = 3;

// One way's descriptors, algorithm and buffers (the bias's descriptor: NCHW only; the scratch:
// NHWC only; the tiled kernel needs none of them).
struct Layout {{
  int kind = 0;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  {algo_type} algo{{}};
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  float* x_t = nullptr;
  float* w_t = nullptr;
  float* y_t = nullptr;
}};

void release(Layout& l) {{
  if (l.x != nullptr) cudnnDestroyTensorDescriptor(l.x);
  if (l.y != nullptr) cudnnDestroyTensorDescriptor(l.y);
  if (l.b != nullptr) cudnnDestroyTensorDescriptor(l.b);
  if (l.w != nullptr) cudnnDestroyFilterDescriptor(l.w);
  if (l.conv != nullptr) cudnnDestroyConvolutionDescriptor(l.conv);
  cudaFree(l.workspace);
  cudaFree(l.x_t);
  cudaFree(l.w_t);
  cudaFree(l.y_t);
  l = Layout{{}};
}}

// The descriptors in the layout's format, then the fastest algorithm Find measures whose
// workspace fits kMaxWorkspace, its workspace and (NHWC) the scratch; the tiled kernel has
// nothing to prepare.
const char* prepare(cudnnHandle_t handle, Layout& l, int kind, int tf32) {{
  l.kind = kind;
  if (kind == kTiled) return tiled::available();
  const bool channels_last = kind == kNhwc;
  KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&l.x));
  KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&l.y));
  KA_CUDNN_TRY(cudnnCreateFilterDescriptor(&l.w));
  KA_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&l.conv));
  const cudnnTensorFormat_t format = channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(l.x, format, CUDNN_DATA_FLOAT, kDims, kXDims));
  KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(l.y, format, CUDNN_DATA_FLOAT, kDims, kYDims));
  if (!channels_last) {{  // NHWC adds the bias in its last transpose
    KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&l.b));
    KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(l.b, format, CUDNN_DATA_FLOAT, kDims, kBDims));
  }}
  KA_CUDNN_TRY(cudnnSetFilterNdDescriptor(l.w, CUDNN_DATA_FLOAT, format, kDims, kWDims));
  KA_CUDNN_TRY(cudnnSetConvolutionNdDescriptor(l.conv, kDims - 2, kPadding, kStride, kDilation,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  KA_CUDNN_TRY(cudnnSetConvolutionGroupCount(l.conv, {groups}));
  // TF32 tensor cores only when tf32 != 0 (the loose protocol); FMA alone under the strict one.
  KA_CUDNN_TRY(cudnnSetConvolutionMathType(l.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  {perf_type} perf[{algo_count}];
  int found = 0;
  KA_CUDNN_TRY({find}(handle, {find_args}, {algo_count}, &found, perf));
  int chosen = -1;
  for (int i = 0; i < found && chosen < 0; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) chosen = i;
  if (chosen < 0) return "no cuDNN algorithm runs it within the workspace allowed";
  l.algo = perf[chosen].algo;
  if (tf32) KA_CUDNN_TRY(cudnnSetConvolutionMathType(l.conv, perf[chosen].mathType));
  l.workspace_bytes = perf[chosen].memory;
  if (l.workspace_bytes > 0) KA_CUDA_TRY(cudaMalloc(&l.workspace, l.workspace_bytes));
  if (channels_last) {{
    KA_CUDA_TRY(cudaMalloc(&l.x_t, sizeof(float) * kBatch * kXChannels * kXSpatial));
    KA_CUDA_TRY(cudaMalloc(&l.w_t, sizeof(float) * kWOuter * kWChannels * kWWindow));
    KA_CUDA_TRY(cudaMalloc(&l.y_t, sizeof(float) * kBatch * kYChannels * kYSpatial));
  }}
  return nullptr;
}}

const char* convolve_in(cudnnHandle_t handle, const Layout& l, const float* x, const float* w,
                        float* y) {{
  const float one = 1.0f, zero = 0.0f;
  KA_CUDNN_TRY({run});
  return nullptr;
}}

// One whole call in the layout: NCHW, the convolution into y, cudnnAddTensor's bias, then the
// epilogue (if any) from y; NHWC, x and w to channels-last, the convolution, and the result back
// to NCHW with the bias added, through the epilogue (conv_epilogue.py); tiled, the direct kernel
// through the epilogue.
const char* run(cudnnHandle_t handle, const Layout& l, const float* x, const float* w,
                const float* b, float* y, const Tail& tail, cudaStream_t stream) {{
  if (l.kind == kTiled) return tiled::launch(x, w, b, y, tail, stream);
  if (l.kind == kNchw) {{
    const char* failure = convolve_in(handle, l, x, w, y);
    if (failure != nullptr) return failure;
    const float one = 1.0f;
    if (b != nullptr) KA_CUDNN_TRY(cudnnAddTensor(handle, &one, l.b, b, &one, l.y, y));
    return finish_nchw(y, tail, stream);
  }}
  const char* failure = ka_transpose_on(x, l.x_t, kBatch, kXChannels, kXSpatial, nullptr, stream);
  if (failure == nullptr)
    failure = ka_transpose_on(w, l.w_t, kWOuter, kWChannels, kWWindow, nullptr, stream);
  if (failure == nullptr) failure = convolve_in(handle, l, l.x_t, l.w_t, l.y_t);
  if (failure == nullptr) failure = finish_nhwc(l.y_t, b, y, tail, stream);
  return failure;
}}

// Milliseconds of three whole calls after an untimed one; negative where the layout fails.
float timed(cudnnHandle_t handle, const Layout& l, const float* x, const float* w,
            const float* b, float* y, const Tail& tail, cudaStream_t stream) {{
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess) return -1.0f;
  if (cudaEventCreate(&stop) != cudaSuccess) {{
    cudaEventDestroy(start);
    return -1.0f;
  }}
  bool ok = run(handle, l, x, w, b, y, tail, stream) == nullptr;
  ok = ok && cudaEventRecord(start, stream) == cudaSuccess;
  for (int i = 0; i < 3 && ok; ++i) ok = run(handle, l, x, w, b, y, tail, stream) == nullptr;
  ok = ok && cudaEventRecord(stop, stream) == cudaSuccess;
  ok = ok && cudaEventSynchronize(stop) == cudaSuccess;
  float ms = -1.0f;
  if (ok && cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) ms = -1.0f;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? ms : -1.0f;
}}

// The way asked for (1 NCHW, 2 NHWC, 3 tiled), or for 0 the fastest of those that take the shape:
// each whole call timed twice, interleaved.
const char* setup(cudnnHandle_t handle, Layout& chosen, int layout, int tf32, const float* x,
                  const float* w, const float* b, float* y, const Tail& tail,
                  cudaStream_t stream) {{
  Layout ways[3];
  const char* failures[3];
  int ready = 0, best = -1;
  for (int k = 0; k < 3; ++k) {{
    const bool measured = k + 1 != kTiled || tiled::kMeasured;
    failures[k] = (layout == 0 && measured) || layout == k + 1
                      ? prepare(handle, ways[k], k + 1, tf32)
                      : "not asked for";
    if (failures[k] != nullptr) release(ways[k]);
    else if (++ready == 1) best = k;
  }}
  if (ready == 0) return failures[layout == 0 ? 0 : layout - 1];
  if (ready > 1) {{
    float fastest[3] = {{-1.0f, -1.0f, -1.0f}};
    for (int round = 0; round < 2; ++round)
      for (int k = 0; k < 3; ++k) {{
        if (failures[k] != nullptr) continue;
        const float ms = timed(handle, ways[k], x, w, b, y, tail, stream);
        if (ms >= 0.0f && (fastest[k] < 0.0f || ms < fastest[k])) fastest[k] = ms;
      }}
    for (int k = 0; k < 3; ++k)
      if (fastest[k] >= 0.0f && (fastest[best] < 0.0f || fastest[k] < fastest[best])) best = k;
  }}
  for (int k = 0; k < 3; ++k)
    if (k != best) release(ways[k]);
  chosen = ways[best];
  return nullptr;
}}

// The convolution, its bias and its epilogue; the first call (per device, TF32 setting and
// layout) sets it up, and a shape cuDNN cannot run is this call's error, every time. y: where
// cuDNN's NCHW result goes (the output, or the work buffer an epilogue reads).
const char* convolve(const float* x, const float* w, const float* b, float* y, const Tail& tail,
                     int tf32, int layout, cudaStream_t stream) {{
  struct State {{
    bool tried = false;
    const char* failure = nullptr;  // why cuDNN cannot run it
    Layout layout;
  }};
  static State states[kMaxDevices][2][4];
  if (layout < 0 || layout > 3)
    return "layout must be 0 (measured), 1 (NCHW), 2 (NHWC) or 3 (tiled)";
  State& s = states[ka_device()][tf32 ? 1 : 0][layout];
  cudnnHandle_t handle = ka_cudnn_handle();
  if (handle == nullptr) return "cudnnCreate failed";
  KA_CUDNN_TRY(cudnnSetStream(handle, stream));
  if (!s.tried) {{
    s.tried = true;
    s.failure = setup(handle, s.layout, layout, tf32, x, w, b, y, tail, stream);
  }}
  if (s.failure != nullptr) return s.failure;
  return run(handle, s.layout, x, w, b, y, tail, stream);
}}
#endif
}}  // namespace {ns}
"""

FORWARD = {
    "algo_type": "cudnnConvolutionFwdAlgo_t",
    "perf_type": "cudnnConvolutionFwdAlgoPerf_t",
    "algo_count": "CUDNN_CONVOLUTION_FWD_ALGO_COUNT",
    "find": "cudnnFindConvolutionForwardAlgorithm",
    "find_args": "l.x, l.w, l.conv, l.y",
    "run": "cudnnConvolutionForward(handle, &one, l.x, x, l.w, w, l.conv, l.algo, l.workspace, "
    "l.workspace_bytes, &zero, l.y, y)",
}
# A transposed convolution is the adjoint of the forward one from y to x: cuDNN's backward data
# with x as dy, y as dx and the weight as it is ([in, out / groups, window], cuDNN's K x C/g).
TRANSPOSED = {
    "algo_type": "cudnnConvolutionBwdDataAlgo_t",
    "perf_type": "cudnnConvolutionBwdDataAlgoPerf_t",
    "algo_count": "CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT",
    "find": "cudnnFindConvolutionBackwardDataAlgorithm",
    "find_args": "l.w, l.x, l.conv, l.y",
    "run": "cudnnConvolutionBackwardData(handle, &one, l.w, w, l.x, x, l.conv, l.algo, "
    "l.workspace, l.workspace_bytes, &zero, l.y, y)",
}


def _as_2d(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    """cuDNN takes 2-d and 3-d convolutions: a 1-d one is 2-d with a leading dim of `fill`."""
    return (fill, *values) if len(values) == 1 else tuple(values)


def cudnn_code(ns: str, conv: ConvShape, what: str, tail: str) -> str:
    """The namespace `ns` with `convolve(x, w, b or nullptr, y, tail, tf32, layout, stream)`,
    nullptr or an error; `tail` is conv_epilogue.py's code for its epilogue."""
    inputs, outputs = _as_2d(conv.inputs, 1), _as_2d(conv.outputs, 1)
    window = _as_2d(conv.window, 1)
    weight = (
        (conv.in_channels, conv.out_channels // conv.groups)
        if conv.transposed
        else (conv.out_channels, conv.in_channels // conv.groups)
    )
    spatial = len(inputs)

    def joined(values) -> str:
        return ", ".join(str(int(v)) for v in values)

    return CODE.format(
        ns=ns,
        what=what,
        tail=tail,
        tiled=tiled_code(conv),
        dims=spatial + 2,
        x_dims=joined((conv.batch, conv.in_channels, *inputs)),
        y_dims=joined((conv.batch, conv.out_channels, *outputs)),
        w_dims=joined((*weight, *window)),
        b_dims=joined((1, conv.out_channels, *(1,) * spatial)),
        padding=joined(_as_2d(conv.padding, 0)),
        stride=joined(_as_2d(conv.stride, 1)),
        dilation=joined(_as_2d(conv.dilation, 1)),
        groups=conv.groups,
        max_workspace=MAX_WORKSPACE,
        batch=conv.batch,
        x_channels=conv.in_channels,
        x_spatial=prod(inputs),
        y_channels=conv.out_channels,
        y_spatial=prod(outputs),
        w_outer=weight[0],
        w_channels=weight[1],
        w_window=prod(window),
        **(TRANSPOSED if conv.transposed else FORWARD),
    )
