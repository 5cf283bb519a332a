"""A convolution through cuDNN, called from the extension's C++ (not through torch): forward,
or transposed as cuDNN's backward-data with x as the gradient, 1-d (as 2-d of height 1) to 3-d,
grouped, with the bias added by cudnnAddTensor.

A kernel's shapes are compile-time constants, so its descriptors, the algorithm cuDNN's Find
measured fastest (its workspace within MAX_WORKSPACE) and that workspace are made on the first
call and kept, per device and TF32 setting. TF32 is the same runtime knob as the GEMM's: cuDNN's
default math under the loose protocol, FMA only under the strict one. The code is compiled only
where the build defines KA_HAVE_CUDNN (gpu_workers/harness/build/compile.py finds the cuDNN that
torch's wheels bring); where it is missing, the launcher runs the direct kernel instead. Where it
is there, a shape cuDNN cannot run is the launcher's error, never a silent switch to the direct
kernel: the kernel is described as cuDNN's, and its time must be.
"""

from __future__ import annotations

from agent.fusion.plan import ConvShape

MAX_WORKSPACE = 1 << 30

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

struct State {{
  bool tried = false;
  const char* failure = nullptr;  // why cuDNN cannot run it
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  {algo_type} algo{{}};
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
}};

// The descriptors, then the fastest algorithm Find measures whose workspace fits kMaxWorkspace.
const char* setup(cudnnHandle_t handle, State& s, int tf32) {{
  KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.x));
  KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.y));
  KA_CUDNN_TRY(cudnnCreateTensorDescriptor(&s.b));
  KA_CUDNN_TRY(cudnnCreateFilterDescriptor(&s.w));
  KA_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s.conv));
  const cudnnTensorFormat_t nchw = CUDNN_TENSOR_NCHW;
  KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(s.x, nchw, CUDNN_DATA_FLOAT, kDims, kXDims));
  KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(s.y, nchw, CUDNN_DATA_FLOAT, kDims, kYDims));
  KA_CUDNN_TRY(cudnnSetTensorNdDescriptorEx(s.b, nchw, CUDNN_DATA_FLOAT, kDims, kBDims));
  KA_CUDNN_TRY(cudnnSetFilterNdDescriptor(s.w, CUDNN_DATA_FLOAT, nchw, kDims, kWDims));
  KA_CUDNN_TRY(cudnnSetConvolutionNdDescriptor(s.conv, kDims - 2, kPadding, kStride, kDilation,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  KA_CUDNN_TRY(cudnnSetConvolutionGroupCount(s.conv, {groups}));
  // TF32 tensor cores only when tf32 != 0 (the loose protocol); FMA alone under the strict one.
  KA_CUDNN_TRY(cudnnSetConvolutionMathType(s.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  {perf_type} perf[{algo_count}];
  int found = 0;
  KA_CUDNN_TRY({find}(handle, {find_args}, {algo_count}, &found, perf));
  for (int i = 0; i < found; ++i) {{
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    s.algo = perf[i].algo;
    if (tf32) KA_CUDNN_TRY(cudnnSetConvolutionMathType(s.conv, perf[i].mathType));
    if (perf[i].memory > 0 && cudaMalloc(&s.workspace, perf[i].memory) != cudaSuccess)
      return "no memory for cuDNN's workspace";
    s.workspace_bytes = perf[i].memory;
    return nullptr;
  }}
  return "no cuDNN algorithm runs it within the workspace allowed";
}}

// The convolution, then the bias; the first call (per device and TF32 setting) sets it up, and
// a shape cuDNN cannot run is this call's error, every time.
const char* convolve(const float* x, const float* w, const float* b, float* y, int tf32,
                     cudaStream_t stream) {{
  static State states[kMaxDevices][2];
  State& s = states[ka_device()][tf32 ? 1 : 0];
  cudnnHandle_t handle = ka_cudnn_handle();
  if (handle == nullptr) return "cudnnCreate failed";
  KA_CUDNN_TRY(cudnnSetStream(handle, stream));
  if (!s.tried) {{
    s.tried = true;
    s.failure = setup(handle, s, tf32);
  }}
  if (s.failure != nullptr) return s.failure;
  const float one = 1.0f, zero = 0.0f;
  KA_CUDNN_TRY({run});
  if (b != nullptr) KA_CUDNN_TRY(cudnnAddTensor(handle, &one, s.b, b, &one, s.y, y));
  return nullptr;
}}
#endif
}}  // namespace {ns}
"""

FORWARD = {
    "algo_type": "cudnnConvolutionFwdAlgo_t",
    "perf_type": "cudnnConvolutionFwdAlgoPerf_t",
    "algo_count": "CUDNN_CONVOLUTION_FWD_ALGO_COUNT",
    "find": "cudnnFindConvolutionForwardAlgorithm",
    "find_args": "s.x, s.w, s.conv, s.y",
    "run": "cudnnConvolutionForward(handle, &one, s.x, x, s.w, w, s.conv, s.algo, s.workspace, "
    "s.workspace_bytes, &zero, s.y, y)",
}
# A transposed convolution is the adjoint of the forward one from y to x: cuDNN's backward data
# with x as dy, y as dx and the weight as it is ([in, out / groups, window], cuDNN's K x C/g).
TRANSPOSED = {
    "algo_type": "cudnnConvolutionBwdDataAlgo_t",
    "perf_type": "cudnnConvolutionBwdDataAlgoPerf_t",
    "algo_count": "CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT",
    "find": "cudnnFindConvolutionBackwardDataAlgorithm",
    "find_args": "s.w, s.x, s.conv, s.y",
    "run": "cudnnConvolutionBackwardData(handle, &one, s.w, w, s.x, x, s.conv, s.algo, "
    "s.workspace, s.workspace_bytes, &zero, s.y, y)",
}


def _as_2d(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    """cuDNN takes 2-d and 3-d convolutions: a 1-d one is 2-d with a leading dim of `fill`."""
    return (fill, *values) if len(values) == 1 else tuple(values)


def cudnn_code(ns: str, conv: ConvShape, what: str) -> str:
    """The namespace `ns` with `convolve(x, w, b or nullptr, y, tf32, stream)`, nullptr or an
    error."""
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
        **(TRANSPOSED if conv.transposed else FORWARD),
    )
