"""CUDA GEMM kernels: cuBLAS (row-major via C^T = B^T A^T) on the current stream, straight into
the output, or into a work buffer followed by one vectorised epilogue kernel (bias and the
pointwise chain that follows, a pointwise namespace) over it. TF32 is a launch knob.
"""

from __future__ import annotations

from agent.fusion.body import gemm_operands, lower_kernel
from agent.fusion.cuda.pointwise import pointwise_namespace
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param


def gemm_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    """cuBLAS writes the (only) output directly, or a work buffer the epilogue then reads."""
    g = kernel.gemm
    a, b = gemm_operands(plan, kernel, names)
    trivial = g.bias is None and len(kernel.nodes) == 1
    work = None if trivial else f"w_{kernel.name}_product"
    body = lower_kernel(plan, kernel, names, acc_buffer=work)
    ns = kernel.name
    target = work if work is not None else body.outputs[0].buffer
    call, what = _cublas_call(g, plan.graph.node_by_name[kernel.nodes[0]].op == "linear")
    code = f"""namespace {ns} {{
constexpr int kBatch = {g.batch};
constexpr int kM = {g.m};
constexpr int kN = {g.n};
constexpr int kK = {g.k};
constexpr long long kStrideA = {g.stride_a};
constexpr long long kStrideB = {g.stride_b};

// Row-major C[M, N] = A[M, K] B through column-major cuBLAS: C^T = B^T A^T, so B comes first.
const char* gemm(const float* a, const float* b, float* c, int tf32, cudaStream_t stream) {{
  (void)kStrideA;
  (void)kStrideB;
  (void)kBatch;
  cublasHandle_t handle = ka_cublas_handle();
  if (handle == nullptr) return "cublasCreate failed";
  cublasStatus_t status = cublasSetStream(handle, stream);
  // TF32 tensor cores (fp32 accumulation, 10-bit input mantissas) only when tf32 != 0: the loose
  // protocol (atol = rtol = 1e-2) admits them, the strict fp32 one does not (pass tf32 = 0).
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const float one = 1.0f, zero = 0.0f;
  if (status == CUBLAS_STATUS_SUCCESS) status = {call};
  return status == CUBLAS_STATUS_SUCCESS ? nullptr : cublasGetStatusString(status);
}}
"""
    epi_params: list[Param] = []
    if work is not None:
        epi_code, epi_params = pointwise_namespace("epilogue", body, kernel.numel)
        code += "\n" + epi_code
    writes = [p.buffer for p in epi_params if p.role == "out"]
    code += f"}}  // namespace {ns}\n"
    launcher = f"{ns}_launch"
    # what the epilogue reads besides the product: buffers, and numbers passed by value
    extra_reads = [p for p in epi_params if p.role in ("in", "scalar") and p.buffer != work]
    c_params = (
        ["const float* a", "const float* b"]
        + [p.declaration(restrict=False) for p in extra_reads]
        + [f"float* {target}"]
        + [f"float* {w}" for w in writes if w != target]
    )
    body_lines = [f"  const char* err = {ns}::gemm(a, b, {target}, tf32, stream);"]
    if work is not None:
        epi_args = ", ".join(p.buffer for p in epi_params)
        body_lines += [
            "  if (err != nullptr) return err;",
            f"  return {ns}::epilogue::launch({epi_args}, threads, blocks_per_sm, stream);",
        ]
    else:
        body_lines += ["  (void)threads;", "  (void)blocks_per_sm;", "  return err;"]
    code += f"""
extern "C" const char* {launcher}({", ".join(c_params)}, int threads, int blocks_per_sm,
                                 int tf32, cudaStream_t stream) {{
{chr(10).join(body_lines)}
}}
"""
    params = [Param(a, "in"), Param(b, "in"), *extra_reads]
    params.append(Param(target, "work" if work is not None else "out"))
    params += [Param(w, "out") for w in writes if w != target]
    epilogue = [n for n in kernel.nodes[1:]]
    desc = f"cuBLAS sgemm {what}"
    if g.bias is not None or epilogue:
        desc += (
            ", then one fused epilogue kernel ("
            + ", ".join((["bias"] if g.bias is not None else []) + epilogue)
            + ")"
        )
    return KernelSource(
        name=ns,
        kind="gemm",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=launcher,
        params=params,
        launch={"threads": 512, "blocks_per_sm": 16, "tf32": int(allow_tf32)},
        # threads and blocks_per_sm launch the epilogue; a bare cuBLAS call has nothing to tune
        # (on an H200, 11 such variants of one sgemm cost a run 150 s of the GPU lock, session 43)
        tunables={"threads": [256, 512, 1024], "blocks_per_sm": [4, 8, 16, 32]} if work else {},
        description=desc,
        work={work: kernel.numel} if work is not None else {},
    )


def _cublas_call(g, linear: bool) -> tuple[str, str]:
    """The cuBLAS call computing row-major C = A @ B as column-major C^T = B^T A^T, and what it
    multiplies. A row-major matrix is its transpose to cuBLAS, so an operand as it is takes
    CUBLAS_OP_N and a transposed one (`layout` "t": B stored [n, k], A [k, m]) CUBLAS_OP_T, its
    leading dim the length of its stored rows."""
    b_t, a_t = g.layout[1] == "t", g.layout[0] == "t"
    flags = f"{'CUBLAS_OP_T' if b_t else 'CUBLAS_OP_N'}, {'CUBLAS_OP_T' if a_t else 'CUBLAS_OP_N'}"
    ldb, lda = ("kK" if b_t else "kN"), ("kM" if a_t else "kK")
    a = f"A[{g.k}x{g.m}]^T" if a_t else f"A[{g.m}x{g.k}]"
    b = f"B[{g.n}x{g.k}]^T" if b_t else f"B[{g.k}x{g.n}]"
    if linear:  # x @ W^T, W as nn.Linear keeps it
        a, b = f"x[{g.m}x{g.k}]", f"W[{g.n}x{g.k}]^T"
    if g.batch == 1:
        call = f"cublasSgemm(handle, {flags}, kN, kM, kK, &one, b, {ldb}, a, {lda}, &zero, c, kN)"
        return call, f"{a} @ {b}"
    call = (
        f"cublasSgemmStridedBatched(handle, {flags}, kN, kM, kK, &one, b, {ldb}, "
        f"kStrideB, a, {lda}, kStrideA, &zero, c, kN, (long long)kM * kN, kBatch)"
    )
    return call, f"{g.batch} x {a} @ {b}"
