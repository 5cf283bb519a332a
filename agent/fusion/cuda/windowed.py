"""CUDA window kernels: max and average pooling (1-d to 3-d) and direct convolution (1-d to 3-d,
forward or transposed, grouped). A thread an output, grid-stride, neighbouring threads on
neighbouring outputs of the last spatial dim (so their loads coalesce; a convolution's weight
loads are one broadcast), each window summed or maxed in registers from compile-time sizes
(windows.py). A convolution runs through cuDNN (cudnn_conv.py) or, where its reduction is short,
a register-tiled direct kernel (conv_tiled.py), whichever its first call times faster, but for
a depthwise one: the per-output direct kernel, correct for every shape the planner admits,
beats cuDNN there and is far from it elsewhere, where it runs only in a build without cuDNN.
"""

from __future__ import annotations

from agent.fusion.body import (
    conv_operands,
    conv_params,
    described_epilogue,
    epilogue_lines,
    lower_kernel,
    standalone_operands,
)
from agent.fusion.cuda.conv_epilogue import tail_code, tail_params
from agent.fusion.cuda.conv_tiled import tiling
from agent.fusion.cuda.cudnn_conv import LAYOUTS, cudnn_code
from agent.fusion.cuda.prelude import DIALECT, idx_type, launch_params, pointer_params
from agent.fusion.ir import numel
from agent.fusion.plan import ConvShape, Kernel, Plan, conv_geometry, pool_geometry
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
{store}
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


def _per_output(
    ns: str, kernel: Kernel, local: list[Param], outputs, body: list[str], store: list[str]
) -> str:
    """A kernel computing `value` for output i at (plane, o0, o1, o2) with `body`, then storing
    it with `store`."""
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
        store="\n".join(store),
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
        code=_per_output(kernel.name, kernel, local, pool.outputs, body, ["    y[i] = value;"]),
        launcher=f"{kernel.name}_launch",
        params=[Param(x, "in"), Param(y, "out")],
        launch=dict(LAUNCH),
        tunables={"threads": [128, 256, 512, 1024], "blocks_per_sm": [4, 8, 16]},
        description=f"{node.op} {window} windows over {pool.planes} planes: a thread an output",
    )


def convolution_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    """cuDNN's convolution (cudnn_conv.py) and its epilogue (conv_epilogue.py), with the direct
    kernel for a build without cuDNN; a depthwise one (a group per input channel) is the direct
    kernel's alone. The direct kernel computes the epilogue in registers."""
    node = plan.graph.node_by_name[kernel.nodes[0]]
    conv = conv_geometry(plan.graph, node)
    x, w, b, y = conv_operands(plan, kernel, names)
    ns, what = kernel.name, describe_conv(conv) + described_epilogue(kernel)
    cudnn = not depthwise(conv)
    # cuDNN's NCHW result goes to a work buffer the epilogue kernel reads, where there is one
    work = f"w_{ns}_conv" if cudnn and len(kernel.nodes) > 1 else None
    epilogue = lower_kernel(plan, kernel, names, acc_buffer=work)
    direct_params = conv_params(x, w, b, [p for p in epilogue.params() if p.buffer != work])
    lines = [
        f"const int64_t co = plane % {conv.out_channels};",
        f"const int64_t n = plane / {conv.out_channels};",
        *conv_lines(conv, x, w, b),
    ]
    store = epilogue_lines(epilogue, "value", "i", DIALECT, " " * 4)
    if not cudnn:
        return KernelSource(
            name=ns,
            kind="convolution",
            nodes=kernel.nodes + kernel.aliases,
            code=_per_output(ns, kernel, direct_params, conv.outputs, lines, store),
            launcher=f"{ns}_launch",
            params=direct_params,
            launch=dict(LAUNCH),
            tunables={"threads": [128, 256, 512], "blocks_per_sm": [4, 8, 16]},
            description=f"{what}: a thread an output (direct; depthwise, where cuDNN is slow)",
        )
    direct = f"{ns}_direct"
    code = _per_output(direct, kernel, direct_params, conv.outputs, lines, store)
    code += "\n" + cudnn_code(ns, conv, what, tail_code(epilogue if work else None, kernel.numel))
    if work is None:
        params, target, tail = direct_params, y, ""
    else:
        tail_fields = tail_params(epilogue)
        reads = [p for p in tail_fields if p.role != "out"]
        params = [*conv_params(x, w, b, reads), Param(work, "work")]
        params += [p for p in tail_fields if p.role == "out"]
        target, tail = work, ", ".join(p.buffer for p in tail_fields)
    host = launch_params(params)
    direct_args = ", ".join(p.buffer for p in direct_params)
    code += f"""
extern "C" const char* {ns}_launch({host}, int threads, int blocks_per_sm, int tf32,
                                 int layout, cudaStream_t stream) {{
#if defined(KA_HAVE_CUDNN)
  (void)threads;
  (void)blocks_per_sm;
  const {ns}::Tail tail{{{tail}}};
  return {ns}::convolve({x}, {w}, {b or "nullptr"}, {target}, tail, tf32, layout, stream);
#else
  (void)tf32;
  (void)layout;{f"{chr(10)}  (void){work};" if work else ""}
  return {direct}::launch({direct_args}, threads, blocks_per_sm, stream);
#endif
}}
"""
    return KernelSource(
        name=ns,
        kind="convolution",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=params,
        # layout: 0 times cuDNN's NCHW and NHWC and, for a short reduction, the tiled direct
        # kernel on the first call and keeps the fastest (1 NCHW, 2 NHWC, 3 tiled force one:
        # cudnn_conv.py)
        launch={**LAUNCH, "tf32": int(allow_tf32), "layout": LAYOUTS["measured"]},
        # threads and blocks_per_sm launch only the direct kernel, which runs where the build has
        # no cuDNN and is no contest where it has (31 ms against cuDNN's 1.8 ms on the H200)
        tunables={},
        description=f"{what}: {_ways(conv)} as its first call measures fastest, cuDNN's "
        "algorithm the fastest its Find measures (a direct kernel where the build has no cuDNN)",
        work={work: kernel.numel} if work else {},
    )


def _ways(conv: ConvShape) -> str:
    tiles = tiling(conv)
    if tiles is None:
        return "cuDNN in NCHW or NHWC"
    return (f"cuDNN in NCHW or NHWC, or a register-tiled direct kernel ({tiles.channels} "
            f"channels x {tiles.positions} positions a thread)")  # fmt: skip


def depthwise(conv: ConvShape) -> bool:
    """A group per input channel: on the H200 (level 1, session 46) the direct kernel beat
    torch.compile's cuDNN by 1.7-19.6x on KernelBench's four depthwise problems (82-85), where
    it lost by 5-50x on the other convolutions."""
    return conv.groups > 1 and conv.groups == conv.in_channels
