"""CUDA direct convolution (1-d to 3-d, forward or transposed, grouped): a thread an output,
grid-stride, neighbouring threads on neighbouring outputs of the last spatial dim (so their
loads of x coalesce and their weight loads are one broadcast), each sum in registers
(convolutions.py). Correct for every shape the planner admits; not yet cuDNN's speed.
"""

from __future__ import annotations

from agent.fusion.body import conv_operands
from agent.fusion.convolutions import conv_lines, describe
from agent.fusion.cuda.prelude import idx_type, launch_params, pointer_params
from agent.fusion.plan import Kernel, Plan, conv_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import padded

CONV_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kOutputs = {outputs};

__global__ void __launch_bounds__(1024) kernel({params}) {{
  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < kOutputs; i += stride) {{
    const int64_t o2 = (int64_t)(i % {out2});
    const int64_t o1 = (int64_t)(i / {out2} % {out1});
    const int64_t o0 = (int64_t)(i / {out12} % {out0});
    const int64_t co = (int64_t)(i / {out_plane} % {channels});
    const int64_t n = (int64_t)(i / {out_plane} / {channels});
{body}
    y[i] = value;
  }}
}}

const char* launch({host_params}, int threads, int blocks_per_sm, cudaStream_t stream) {{
  threads = ka_threads(threads);
  const unsigned blocks = ka_grid(kOutputs, threads, blocks_per_sm);
  kernel<<<blocks, threads, 0, stream>>>({args});
  return ka_error(cudaGetLastError());
}}
}}  // namespace {ns}

extern "C" const char* {ns}_launch({host_params}, int threads, int blocks_per_sm,
                                 cudaStream_t stream) {{
  return {ns}::launch({args}, threads, blocks_per_sm, stream);
}}
"""


def convolution_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    ns = kernel.name
    node = plan.graph.node_by_name[kernel.nodes[0]]
    conv = conv_geometry(plan.graph, node)
    x, w, b, y = conv_operands(plan, kernel, names)
    local = [Param("x", "in"), Param("w", "in"), *([Param("b", "in")] if b else []),
             Param("y", "out")]  # fmt: skip
    out0, out1, out2 = padded(conv.outputs, 1)
    code = CONV_NAMESPACE.format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        outputs=kernel.numel,
        params=pointer_params(local),
        out0=out0,
        out1=out1,
        out2=out2,
        out12=out1 * out2,
        out_plane=out0 * out1 * out2,
        channels=conv.out_channels,
        body="\n".join(conv_lines(conv, "x", "w", "b" if b else None, "    ")),
        host_params=launch_params(local),
        args=", ".join(p.buffer for p in local),
    )
    return KernelSource(
        name=ns,
        kind="convolution",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(x, "in"), Param(w, "in"), *([Param(b, "in")] if b else []), Param(y, "out")],
        launch={"threads": 256, "blocks_per_sm": 8},
        tunables={"threads": [128, 256, 512], "blocks_per_sm": [4, 8, 16]},
        description=f"{describe(conv)}: a thread an output (direct)",
    )
