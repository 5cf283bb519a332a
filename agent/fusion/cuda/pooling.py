"""CUDA max and average pooling (1-d to 3-d): a thread an output, grid-stride, neighbouring
threads on neighbouring outputs of the last spatial dim (so their windows' loads coalesce), each
window summed or maxed in registers (windows.py).
"""

from __future__ import annotations

from agent.fusion.body import standalone_operands
from agent.fusion.cuda.prelude import idx_type, launch_params, pointer_params
from agent.fusion.ir import numel
from agent.fusion.plan import Kernel, Plan, pool_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import padded, window_lines

POOL_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kOutputs = {outputs};

__global__ void __launch_bounds__(1024) kernel({params}) {{
  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < kOutputs; i += stride) {{
    const int64_t o2 = (int64_t)(i % {out2});
    const int64_t o1 = (int64_t)(i / {out2} % {out1});
    const int64_t o0 = (int64_t)(i / {out12} % {out0});
    const int64_t base = (int64_t)(i / {out_plane}) * {in_plane};
{window}
    y[i] = value;
  }}
}}

const char* launch({host_params}, int threads, int blocks_per_sm, cudaStream_t stream) {{
  threads = ka_threads(threads);
  const unsigned blocks = ka_grid(kOutputs, threads, blocks_per_sm);
  kernel<<<blocks, threads, 0, stream>>>(x, y);
  return ka_error(cudaGetLastError());
}}
}}  // namespace {ns}

extern "C" const char* {ns}_launch({host_params}, int threads, int blocks_per_sm,
                                 cudaStream_t stream) {{
  return {ns}::launch(x, y, threads, blocks_per_sm, stream);
}}
"""


def pooling_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    pool = pool_geometry(plan.graph, node)
    x, y = standalone_operands(plan, kernel, names)
    local = [Param("x", "in"), Param("y", "out")]  # the kernel's own names
    out0, out1, out2 = padded(pool.outputs, 1)
    code = POOL_NAMESPACE.format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        outputs=kernel.numel,
        params=pointer_params(local),
        out0=out0,
        out1=out1,
        out2=out2,
        out12=out1 * out2,
        out_plane=out0 * out1 * out2,
        in_plane=numel(pool.inputs),
        window="\n".join(window_lines(pool, node, "x", "    ")),
        host_params=launch_params(local),
    )
    window = "x".join(map(str, pool.window))
    return KernelSource(
        name=ns,
        kind="pooling",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(x, "in"), Param(y, "out")],
        launch={"threads": 256, "blocks_per_sm": 8},
        tunables={"threads": [128, 256, 512, 1024], "blocks_per_sm": [4, 8, 16]},
        description=f"{node.op} {window} windows over {pool.planes} planes: a thread an output",
    )
