"""The cuda target's kernels/fused.cu compiles with nvcc for sm_90a (no GPU needed: the file has
no torch headers). Where cuBLAS's header is not installed, a declaration-only stand-in of the
few cuBLAS calls used is put on the include path."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from fusion_cases import (
    ALL,
    axis_reductions,
    axis_softmax,
    bmm_log_softmax,
    convolutions,
    graph,
    inp,
    nd,
    node,
    residual_layer_norm,
    scaled_softmax,
    scans,
    tensor,
)

from agent.fusion import compile_graph

pytestmark = pytest.mark.slow
NVCC = shutil.which("nvcc")
FLAGS = [
    "-c",
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90a,code=sm_90a",
]

CUBLAS_STAND_IN = """#pragma once
#include <cuda_runtime.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
    int k, const float* alpha, const float* A, int lda, long long int strideA, const float* B,
    int ldb, long long int strideB, const float* beta, float* C, int ldc, long long int strideC,
    int batchCount);
"""


@pytest.fixture(scope="module")
def include_flags(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    root = tmp_path_factory.mktemp("cublas")
    probe = root / "probe.cu"
    probe.write_text("#include <cublas_v2.h>\n")
    found = subprocess.run([NVCC, "-E", str(probe), "-o", "/dev/null"], capture_output=True)
    if found.returncode == 0:
        return []
    (root / "cublas_v2.h").write_text(CUBLAS_STAND_IN)
    return ["-I", str(root)]


def _nvcc(source: str, tmp_path, include_flags) -> None:
    path = tmp_path / "fused.cu"
    path.write_text(source)
    result = subprocess.run(
        [NVCC, *FLAGS, *include_flags, str(path), "-o", str(tmp_path / "fused.o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_fused_cu_compiles(case, tmp_path, include_flags):
    _nvcc(compile_graph(case.ir, "cuda").files["kernels/fused.cu"], tmp_path, include_flags)


@pytest.mark.parametrize(
    "case",
    [
        scaled_softmax(rows=8, cols=4099),  # odd rows: no float4, shared-memory cache
        residual_layer_norm(rows=3, cols=100_000),  # rows too long to cache at 1024 threads
        bmm_log_softmax(batch=2, m=3, k=5, n=7),
        axis_softmax(n=3, c=5, h=1, w=33, long=5000),  # inner over one tile of 32 lanes
        axis_reductions(a=2, c=2**16, w=2**15 + 1),  # past 2^31 elements: 64-bit indices
        scans(a=2, c=3, w=70_000, long=3),  # short rows and long lines
    ],
    ids=lambda c: c.name,
)
def test_odd_shapes_compile(case, tmp_path, include_flags):
    _nvcc(compile_graph(case.ir, "cuda").files["kernels/fused.cu"], tmp_path, include_flags)


def _one_op(shape, op, out_shape, dtype="float32", extra_inputs=(), **attrs) -> dict:
    """The IR of one op on an input x of `shape` (KernelBench's sizes: no tensor is made)."""
    args = [inp("x")] + [inp(t["name"]) for t in extra_inputs]
    step = {**node("y", op, args, out_shape, **attrs), "dtype": dtype}
    return graph([tensor("x", shape), *extra_inputs], [], [step], ["y"], device="cuda")


def _cross_entropy(rows: int, classes: int) -> dict:
    labels = {**tensor("t", [rows]), "dtype": "int64"}
    steps = [
        node("lse", "logsumexp", [inp("x")], [rows], dim=[1], keepdim=False),
        node("logit", "pick", [inp("x"), inp("t")], [rows], dim=1),
        node("term", "sub", [nd("lse"), nd("logit")], [rows], alpha=1),
        node("loss", "mean", [nd("term")], [], dim=[0], keepdim=False),
    ]
    return graph([tensor("x", [rows, classes]), labels], [], steps, ["loss"], device="cuda")


KERNELBENCH_SIZES = {
    "argmax_middle_dim": _one_op([128, 4096, 4095], "argmax", [128, 4095], "int64", dim=[1]),
    "argmin_rows_past_2_31": _one_op([2, 2**30 + 3], "argmin", [2], "int64", dim=[1]),
    "reverse_cumsum": _one_op([32768, 32768], "cumsum", [32768, 32768], dim=1, reverse=True),
    "exclusive_cumsum": _one_op([32768, 32768], "cumsum", [32768, 32768], dim=1, exclusive=True),
    "max_pool_3d": _one_op([16, 32, 128, 128, 128], "max_pool", [16, 32, 62, 62, 62],
                           kernel_size=[3] * 3, stride=[2] * 3, padding=[1] * 3,
                           dilation=[3] * 3),
    "avg_pool_2d": _one_op([16, 64, 2048, 2048], "avg_pool", [16, 64, 186, 186],
                           kernel_size=[11] * 2, stride=[11] * 2, padding=[0] * 2),
    "cross_entropy": _cross_entropy(32768, 4096),
    # L1 40_LayerNorm: 16 rows of 4 M elements, split reductions and pointwise steps
    "layer_norm_long_rows": _one_op([16, 64, 256, 256], "layer_norm", [16, 64, 256, 256],
                                    normalized_shape=[64, 256, 256], eps=1e-5),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(KERNELBENCH_SIZES))
def test_kernelbench_sizes_compile(name, tmp_path, include_flags):
    """argmax, scans, pooling, cross-entropy and a long-row layer norm at KernelBench's sizes
    (64-bit indices past 2^31 elements), from hand-written IR."""
    program = compile_graph(KERNELBENCH_SIZES[name], "cuda")
    assert program.unsupported == []
    _nvcc(program.files["kernels/fused.cu"], tmp_path, include_flags)


# The cuDNN calls a convolution makes (agent/fusion/cuda/cudnn_conv.py), declared as cudnn.h
# declares them, for a machine without cuDNN; where the harness finds the real one, that is used.
CUDNN_STAND_IN = """#pragma once
#include <cstddef>
#include <cuda_runtime.h>
typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
typedef enum { CUDNN_STATUS_SUCCESS = 0 } cudnnStatus_t;
typedef enum { CUDNN_DATA_FLOAT = 0 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum { CUDNN_DEFAULT_MATH = 0, CUDNN_FMA_MATH = 3 } cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0 } cudnnDeterminism_t;
typedef enum { CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8 } cudnnConvolutionFwdAlgo_t;
typedef enum { CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6 } cudnnConvolutionBwdDataAlgo_t;
typedef struct {
  cudnnConvolutionFwdAlgo_t algo; cudnnStatus_t status; float time; size_t memory;
  cudnnDeterminism_t determinism; cudnnMathType_t mathType; int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;
typedef struct {
  cudnnConvolutionBwdDataAlgo_t algo; cudnnStatus_t status; float time; size_t memory;
  cudnnDeterminism_t determinism; cudnnMathType_t mathType; int reserved[3];
} cudnnConvolutionBwdDataAlgoPerf_t;
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);
const char* cudnnGetErrorString(cudnnStatus_t status);
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t desc,
    cudnnTensorFormat_t format, cudnnDataType_t type, int dims, const int sizes[]);
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
    cudnnTensorFormat_t format, int dims, const int sizes[]);
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int length,
    const int pad[], const int stride[], const int dilation[], cudnnConvolutionMode_t mode,
    cudnnDataType_t type);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t m);
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t handle,
    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int asked,
    int* returned, cudnnConvolutionFwdAlgoPerf_t* perf);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t handle,
    const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int asked,
    int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf);
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
    const cudnnTensorDescriptor_t xd, const void* x, const cudnnFilterDescriptor_t wd,
    const void* w, const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
    void* workspace, size_t bytes, const void* beta, const cudnnTensorDescriptor_t yd, void* y);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
    const cudnnFilterDescriptor_t wd, const void* w, const cudnnTensorDescriptor_t dyd,
    const void* dy, const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
    void* workspace, size_t bytes, const void* beta, const cudnnTensorDescriptor_t dxd, void* dx);
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha,
    const cudnnTensorDescriptor_t ad, const void* a, const void* beta,
    const cudnnTensorDescriptor_t cd, void* c);
"""


@pytest.fixture(scope="module")
def cudnn_flags(include_flags, tmp_path_factory):
    """KA_HAVE_CUDNN and the headers the harness's build would use, or the stand-in above."""
    from gpu_workers.harness.build.compile import _cudnn_candidates, find_cudnn

    found = find_cudnn(_cudnn_candidates(str(shutil.which("nvcc")).rsplit("/bin/", 1)[0]))
    if found is not None:
        return [*include_flags, *found.cuda_flags()]
    root = tmp_path_factory.mktemp("cudnn")
    (root / "cudnn.h").write_text(CUDNN_STAND_IN)
    return [*include_flags, "-DKA_HAVE_CUDNN=1", "-I", str(root)]


def test_convolutions_through_cudnn_compile(tmp_path, cudnn_flags):
    """Every convolution of the case (1-d to 3-d, forward and transposed, grouped, with and
    without a bias) through cuDNN in both layouts (NHWC through the transposes), the direct
    kernel beside it; `layout` is a launch parameter, 0 (measured) unless asked. The three with a
    pointwise epilogue (relu; mul, add; sigmoid) take it into their launch: NCHW runs it as a
    kernel reading the work buffer cuDNN wrote, NHWC in the transpose back (conv_epilogue.py)."""
    program = compile_graph(convolutions().ir, "cuda")
    source = program.files["kernels/fused.cu"]
    assert source.count("::convolve(") == 6  # a cuDNN call in each conv's launcher
    assert "CUDNN_TENSOR_NHWC" in source and "ka_transpose<<<" in source
    assert source.count("back_through_epilogue<<<") == 3
    assert source.count("return epilogue::launch(") == 3
    cudnn_kernels = [k.name for k in program.kernels if "cuDNN" in k.description]
    assert len(cudnn_kernels) == 6
    assert {program.launch[name]["layout"] for name in cudnn_kernels} == {0}
    assert "cudnnConvolutionBackwardData(" in source and "cudnnConvolutionForward(" in source
    # each has a short reduction: the tiled direct kernel is the third way its first call times
    assert source.count("tiled::launch(x, w, b, y, tail, stream)") == 6
    assert source.count("__launch_bounds__(kThreads, 2)") == 6
    _nvcc(source, tmp_path, cudnn_flags)


LONG_REDUCTION = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.short = nn.Conv3d(8, 16, 3)
        self.long = nn.Conv2d(64, 16, 3)

    def forward(self, x, y):
        return torch.relu(self.short(x)), self.long(y)


def get_inputs():
    return [torch.rand(2, 8, 5, 6, 7), torch.rand(2, 64, 6, 6)]


def get_init_inputs():
    return []
"""


def test_only_a_short_reduction_has_a_tiled_kernel(tmp_path, cudnn_flags):
    """8 channels x 27 taps (216 products an output) is tiled; 64 x 9 (576) is past
    MAX_REDUCTION: its tiled launch is an error that says why, never a kernel, and its
    description names cuDNN alone."""
    from gpu_workers.harness.capture import graph as capture
    from gpu_workers.harness.judge.protocol import LOOSE

    ir = capture.capture(LONG_REDUCTION, "cpu", LOOSE)
    ir["device"] = "cuda"
    program = compile_graph(ir, "cuda")
    short, long = program.kernels
    assert "register-tiled direct kernel (16 channels" in short.description
    assert "tiled" not in long.description
    source = program.files["kernels/fused.cu"]
    assert source.count("__launch_bounds__(kThreads, 2)") == 1
    assert "a reduction of 576 products (past 256)" in source
    _nvcc(source, tmp_path, cudnn_flags)


DEPTHWISE_THEN_POINTWISE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 16, 1)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


def get_inputs():
    return [torch.rand(2, 8, 12, 12)]


def get_init_inputs():
    return []
"""


def test_a_depthwise_convolution_is_the_direct_kernels_and_the_rest_cudnns(tmp_path, cudnn_flags):
    """KernelBench 86's shape of problem: the depthwise convolution a direct kernel (tuned like
    any kernel), the 1x1 one after it cuDNN's."""
    from gpu_workers.harness.capture import graph as capture
    from gpu_workers.harness.judge.protocol import LOOSE

    ir = capture.capture(DEPTHWISE_THEN_POINTWISE, "cpu", LOOSE)
    ir["device"] = "cuda"
    program = compile_graph(ir, "cuda")
    first, second = program.kernels
    assert (first.kind, second.kind) == ("convolution", "convolution")
    assert first.tunables and "direct" in first.description
    assert not second.tunables and "cuDNN" in second.description
    source = program.files["kernels/fused.cu"]
    assert source.count("::convolve(") == 1
    _nvcc(source, tmp_path, cudnn_flags)
