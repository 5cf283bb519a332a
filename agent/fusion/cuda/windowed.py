"""CUDA window kernels: max and average pooling (1-d to 3-d) and direct convolution (1-d to 3-d,
forward or transposed, grouped). A thread an output, grid-stride, neighbouring threads on
neighbouring outputs of the last spatial dim (so their loads coalesce; a convolution's weight
loads are one broadcast), each window summed or maxed in registers from compile-time sizes
(windows.py). A convolution is correct for every shape the planner admits, not cuDNN's speed.
"""

from __future__ import annotations

from agent.fusion.body import conv_operands, standalone_operands
from agent.fusion.cuda.prelude import idx_type, launch_params, pointer_params
from agent.fusion.ir import numel
from agent.fusion.plan import Kernel, Plan, conv_geometry, pool_geometry
from agent.fusion.program import KernelSource, Param
from agent.fusion.windows import conv_lines, describe_conv, padded, window_lines

PER_OUTPUT = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kOutputs = {outputs};

__global__ void __launch_bounds__(1024) kernel({params}) {{
  const idx_t stride = (idx_t)gridDim.x * blockDim.x;
  for (idx_t i = (idx_t)blockIdx.x * blockDim.x + threadIdx.x; i < kOutputs; i += stride) {{
    const int64_t o2 = (int64_t)(i % {out2});
    const int64_t o1 = (int64_t)(i / {out2} % {out1});
    const int64_t o0 = (int64_t)(i / {out12} % {out0});
    const int64_t plane = (int64_t)(i / {out_plane});
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
LAUNCH = {"threads": 256, "blocks_per_sm": 8}


def _per_output(ns: str, kernel: Kernel, local: list[Param], outputs, body: list[str]) -> str:
    """A kernel computing `value` for output i at (plane, o0, o1, o2) with `body`."""
    out0, out1, out2 = padded(outputs, 1)
    return PER_OUTPUT.format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        outputs=kernel.numel,
        params=pointer_params(local),
        out0=out0,
        out1=out1,
        out2=out2,
        out12=out1 * out2,
        out_plane=out0 * out1 * out2,
        body="\n".join("    " + line for line in body),
        host_params=launch_params(local),
        args=", ".join(p.buffer for p in local),
    )


def pooling_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    node = plan.graph.node_by_name[kernel.nodes[0]]
    pool = pool_geometry(plan.graph, node)
    x, y = standalone_operands(plan, kernel, names)
    local = [Param("x", "in"), Param("y", "out")]  # the kernel's own names
    body = [f"const int64_t base = plane * {numel(pool.inputs)};", *window_lines(pool, node, "x")]
    window = "x".join(map(str, pool.window))
    return KernelSource(
        name=kernel.name,
        kind="pooling",
        nodes=kernel.nodes + kernel.aliases,
        code=_per_output(kernel.name, kernel, local, pool.outputs, body),
        launcher=f"{kernel.name}_launch",
        params=[Param(x, "in"), Param(y, "out")],
        launch=dict(LAUNCH),
        tunables={"threads": [128, 256, 512, 1024], "blocks_per_sm": [4, 8, 16]},
        description=f"{node.op} {window} windows over {pool.planes} planes: a thread an output",
    )


def convolution_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    node = plan.graph.node_by_name[kernel.nodes[0]]
    conv = conv_geometry(plan.graph, node)
    x, w, b, y = conv_operands(plan, kernel, names)
    bias = [("b", b)] if b else []
    local = [Param(n, "in") for n, _ in [("x", x), ("w", w), *bias]] + [Param("y", "out")]
    body = [
        f"const int64_t co = plane % {conv.out_channels};",
        f"const int64_t n = plane / {conv.out_channels};",
        *conv_lines(conv, "x", "w", "b" if b else None),
    ]
    return KernelSource(
        name=kernel.name,
        kind="convolution",
        nodes=kernel.nodes + kernel.aliases,
        code=_per_output(kernel.name, kernel, local, conv.outputs, body),
        launcher=f"{kernel.name}_launch",
        params=[Param(t, "in") for t in (x, w, *([b] if b else []))] + [Param(y, "out")],
        launch=dict(LAUNCH),
        tunables={"threads": [128, 256, 512], "blocks_per_sm": [4, 8, 16]},
        description=f"{describe_conv(conv)}: a thread an output (direct)",
    )
