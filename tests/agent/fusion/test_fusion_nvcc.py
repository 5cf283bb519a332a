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
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(KERNELBENCH_SIZES))
def test_kernelbench_sizes_compile(name, tmp_path, include_flags):
    """argmax, scans, pooling and cross-entropy at KernelBench's sizes (64-bit indices past
    2^31 elements), from hand-written IR."""
    program = compile_graph(KERNELBENCH_SIZES[name], "cuda")
    assert program.unsupported == []
    _nvcc(program.files["kernels/fused.cu"], tmp_path, include_flags)
