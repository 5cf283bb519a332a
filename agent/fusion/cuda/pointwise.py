"""CUDA pointwise kernels (also a GEMM's epilogue): grid-stride over groups of V = 4 elements
(float4 loads and stores when every 16-byte access is aligned: checked at run time, else V = 1),
up to 4 groups a thread with all their loads issued first, a scalar tail; each operand is read as
its broadcast allows: a float4 (full-size, or per-channel on the last dim: `i % C`), one value
for the four lanes (broadcast along the last dims), or one load a lane (anything else).
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import BNode, Body, fixed_operand, load_expression, lower_kernel
from agent.fusion.cuda.prelude import DIALECT, idx_type, launch_params, pointer_params
from agent.fusion.ir import flat_index
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param


def _flat_access(node: BNode) -> str:
    """How V = 4 consecutive elements read a load: 'vec' (one aligned float4), 'splat' (one
    value for the four lanes) or 'lanes' (a load per lane: also any buffer not of floats, whose
    elements convert one by one, and a pick's)."""
    if node.indexed:
        return "lanes"
    inner = [t for t in node.terms if t.div == 1]
    outer = [t for t in node.terms if t.div != 1]
    if any(t.div % 4 for t in outer):
        return "lanes"
    if not inner:
        return "splat"
    if inner[0].mult != 1:  # a transposed read: consecutive elements lie apart
        return "lanes"
    vec = node.dtype == "float32" and (inner[0].mod % 4 == 0 or inner[0].mod == node.total)
    return "vec" if vec else "lanes"


def pointwise_namespace(ns: str, body: Body, total: int) -> tuple[str, list[Param]]:
    """The namespace `ns` with step/kernel/launch for a flat element-wise body; returns the code
    and its pointer parameters."""
    params = body.params()
    writes = body.writes()
    closure = body.closure([o.bnode for o in body.outputs])
    access = {n.id: _flat_access(n) for n in closure if n.kind == "load"}

    def ref(i: int) -> str:
        node = body.nodes[i]
        if fixed_operand(node) is not None:
            return fixed_operand(node)
        if node.kind == "load":
            return f"a{i}[u]" if access[i] == "splat" else f"a{i}[u][l]"
        return f"e{i}"

    # U groups of V elements, `stride` apart: every load of the U groups is issued before any
    # arithmetic (the math functions branch, which would otherwise keep loads from moving up).
    step = ["#pragma unroll", "  for (int u = 0; u < U; ++u) {"]
    step.append("    const idx_t i = i0 + u * stride;")
    decls = []
    for n in closure:
        if n.kind != "load":
            continue
        if access[n.id] == "vec":
            decls.append(f"  float a{n.id}[U][V];")
            step.append(f"    ka_ld<V>({n.buffer} + {_idx(n, 'i')}, a{n.id}[u]);")
        elif access[n.id] == "splat":
            decls.append(f"  float a{n.id}[U];")
            step.append(f"    a{n.id}[u] = {n.buffer}[{_idx(n, 'i')}];")
        else:
            decls.append(f"  float a{n.id}[U][V];")
            step += [
                "#pragma unroll",
                f"    for (int l = 0; l < V; ++l) a{n.id}[u][l] = {load_expression(n, 'i + l')};",
            ]
    step += ["  }", "#pragma unroll", "  for (int u = 0; u < U; ++u) {"]
    step += ["    const idx_t i = i0 + u * stride;"]
    step += [f"    float o{j}[V];" for j in range(len(body.outputs))]
    step += ["#pragma unroll", "    for (int l = 0; l < V; ++l) {"]
    step += expressions.statements(closure, ref, "      ", DIALECT)
    step += [f"      o{j}[l] = {ref(o.bnode)};" for j, o in enumerate(body.outputs)]
    step.append("    }")
    step += [f"    ka_st<V>({o.buffer} + i, o{j});" for j, o in enumerate(body.outputs)]
    step.append("  }")
    step = decls + step

    floats = sum(1 if access[n.id] == "splat" else 4 for n in closure if n.kind == "load")
    unroll = 4
    while unroll > 1 and unroll * floats > 32:
        unroll //= 2
    host_params = launch_params(params)
    args = ", ".join(p.buffer for p in params)  # buffers read, numbers, buffers written
    aligned = [n.buffer for n in closure if n.kind == "load" and access[n.id] == "vec"] + writes
    aligned_check = " && ".join(f"ka_aligned({b})" for b in dict.fromkeys(aligned))
    code = f"""namespace {ns} {{
using idx_t = {idx_type(total)};
constexpr idx_t kN = {total};

template <int V, int U>
__device__ __forceinline__ void step(idx_t i0, idx_t stride, {pointer_params(params)}) {{
{chr(10).join(step)}
}}

template <int V>
__global__ void __launch_bounds__(1024) kernel({pointer_params(params)}) {{
  constexpr idx_t kGroups = kN / V;
  constexpr int kUnroll = {unroll};  // groups in flight per thread (<= 32 floats of loads)
  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  const idx_t first = (idx_t)blockIdx.x * blockDim.x + threadIdx.x;
  idx_t g = first;
  for (; g + (kUnroll - 1) * stride < kGroups; g += kUnroll * stride)
    step<V, kUnroll>(g * V, stride * V, {args});
  for (; g < kGroups; g += stride) step<V, 1>(g * V, 0, {args});
  if constexpr (V > 1) {{
    for (idx_t i = kGroups * V + first; i < kN; i += stride) step<1, 1>(i, 0, {args});
  }}
}}

const char* launch({host_params}, int threads, int blocks_per_sm, cudaStream_t stream) {{
  threads = ka_threads(threads);
  const bool vec = kN >= 4 && {aligned_check};
  const long long work = vec ? (long long)(kN / 4) : (long long)kN;
  const unsigned blocks = ka_grid(work, threads, blocks_per_sm);
  if (vec)
    kernel<4><<<blocks, threads, 0, stream>>>({args});
  else
    kernel<1><<<blocks, threads, 0, stream>>>({args});
  return ka_error(cudaGetLastError());
}}
}}  // namespace {ns}
"""
    return code, params


def _idx(node: BNode, index: str) -> str:
    return flat_index(node.terms, node.total, index)


def pointwise_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    ns = kernel.name
    code, params = pointwise_namespace(ns, body, kernel.numel)
    launcher = f"{ns}_launch"
    args = ", ".join(p.buffer for p in params)
    host_params = launch_params(params)
    code += f"""
extern "C" const char* {launcher}({host_params}, int threads, int blocks_per_sm,
                                 cudaStream_t stream) {{
  return {ns}::launch({args}, threads, blocks_per_sm, stream);
}}
"""
    return KernelSource(
        name=ns,
        kind="pointwise",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=launcher,
        params=params,
        launch={"threads": 512, "blocks_per_sm": 16},
        tunables={"threads": [256, 512, 1024], "blocks_per_sm": [4, 8, 16, 32]},
        description=f"{kernel.numel} elements, float4 grid-stride loop",
    )
