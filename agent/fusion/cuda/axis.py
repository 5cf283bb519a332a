"""CUDA axis kernels: reductions and softmax along a dim that is not the last, over the element
space (outer, cols, inner) with inner > 1, read in place (no transpose copy).

A block is 32 lanes along `inner` (so every load and store is coalesced) by a team of `threads /
32` threads along the reduced axis; a tile is 32 outputs of one `outer` index. Each lane's team
sweeps its `cols` elements (one sweep per reduction depth, then the sweep that writes the element
outputs) and combines its partial results through shared memory, every thread of the team
reading them all, so the result is known to the whole team after one __syncthreads.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import (
    BNode,
    Body,
    fixed_operand,
    load_expression,
    lower_kernel,
    row_passes,
)
from agent.fusion.cuda.prelude import DIALECT, idx_type, launch_params, pointer_params
from agent.fusion.ir import row_base, split_axis
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource

RESIDENT_THREADS = 2**18  # about what an H100 keeps in flight (132 SMs x 2048)


class _AxisKernel:
    """The per-tile loop body of one axis kernel, as lines."""

    def __init__(self, kernel: Kernel, body: Body):
        self.kernel, self.body = kernel, body
        self.rows, self.cols, self.inner = kernel.rows, kernel.cols, kernel.inner
        self.split = {
            n.id: None if n.indexed else split_axis(n.terms, n.total, self.cols, self.inner)
            for n in body.loads("elem")
        }
        self.reductions = body.reductions()
        self.slot = {n.id: k for k, n in enumerate(self.reductions)}
        self.lines: list[str] = []

    def ref(self, i: int) -> str:
        node = self.body.nodes[i]
        if fixed_operand(node) is not None:
            return fixed_operand(node)
        if node.kind == "load":
            return f"a{i}"
        return f"s{i}" if node.level == "row" else f"e{i}"

    def setup(self) -> None:
        """Row offsets of split loads, loads constant along the axis, per-output loads."""
        add = self.lines.append
        for n in self.body.loads("elem"):
            split = self.split[n.id]
            if split is None:
                continue
            add(f"    const idx_t b{n.id} = {row_base(split, self.rows, 'r')};")
            if split.col == 0:
                add(f"    const float a{n.id} = {n.buffer}[b{n.id}];")
        for n in self.body.loads("row"):
            add(f"    const float a{n.id} = {load_expression(n, 'r')};")
        self.lines += expressions.row_statements(self.body, 0, self.ref, "    ", DIALECT)

    def element_loads(self, nodes: list[BNode]) -> list[str]:
        lines = []
        for n in nodes:
            if n.kind != "load":
                continue
            split = self.split[n.id]
            if split is None:
                value = load_expression(n, "f0 + c * kInner")
            elif split.col == 0:
                continue
            else:
                index = f"b{n.id} + c" if split.col == 1 else f"b{n.id} + c * {split.col}"
                value = f"{n.buffer}[{index}]"
            lines.append(f"        const float a{n.id} = {value};")
        return lines

    def sweep(self, what: str, nodes: list[BNode], targets: list[int], depth: int) -> None:
        add, body = self.lines.append, self.body
        if what == "reduce":
            for t in targets:
                add(f"    float acc{t} = {expressions.reduce_init(body.nodes[t].op)};")
        add("    if (active) {")
        add("      for (idx_t c = ty; c < kCols; c += team) {")
        self.lines += self.element_loads(nodes)
        self.lines += expressions.statements(nodes, self.ref, "        ", DIALECT)
        if what == "reduce":
            for t in targets:
                red = body.nodes[t]
                combined = expressions.reduce_combine(red.op, f"acc{t}", self.ref(red.args[0]))
                add(f"        acc{t} = {combined};")
        else:
            for o in body.elem_outputs():
                add(f"        {o.buffer}[f0 + c * kInner] = {self.ref(o.bnode)};")
        add("      }")
        add("    }")
        if what == "reduce":
            self.team_reduce(targets)
            self.lines += expressions.row_statements(body, depth + 1, self.ref, "    ", DIALECT)

    def team_reduce(self, targets: list[int]) -> None:
        """Every team member's partial into its slot, then each member combines them all."""
        add, body = self.lines.append, self.body
        for t in targets:
            add(f"    slots[{self.slot[t]}][ty][lane] = acc{t};")
        add("    __syncthreads();")
        for t in targets:
            red = body.nodes[t]
            add(f"    float s{t} = slots[{self.slot[t]}][0][lane];")
            combined = expressions.reduce_combine(
                red.op, f"s{t}", f"slots[{self.slot[t]}][y][lane]"
            )
            add(f"    for (int y = 1; y < team; ++y) s{t} = {combined};")

    def tile_body(self) -> str:
        self.setup()
        for depth, (what, nodes, targets) in enumerate(row_passes(self.body)):
            self.sweep(what, nodes, targets, depth)
        row_outs = self.body.row_outputs()
        if row_outs:
            self.lines.append("    if (active && ty == 0) {")
            for o in row_outs:
                self.lines.append(f"      {o.buffer}[r] = {self.ref(o.bnode)};")
            self.lines.append("    }")
        return "\n".join(self.lines)


AXIS_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kOuter = {outer};
constexpr idx_t kCols = {cols};  // the reduced axis
constexpr idx_t kInner = {inner};
constexpr idx_t kInnerTiles = (kInner + 31) / 32;
constexpr idx_t kTiles = kOuter * kInnerTiles;

// blockDim = (32 lanes along inner, team threads along the reduced axis)
__global__ void __launch_bounds__(1024) kernel({params}) {{
{shared}
  const int lane = (int)threadIdx.x;
  const int ty = (int)threadIdx.y;
  const int team = (int)blockDim.y;
  (void)lane;
  for (idx_t tile = blockIdx.x; tile < kTiles; tile += gridDim.x) {{
    const idx_t o = tile / kInnerTiles;
    const idx_t i = tile % kInnerTiles * 32 + lane;
    const bool active = i < kInner;
    const idx_t r = o * kInner + (active ? i : 0);  // the output this lane computes
    const idx_t f0 = o * (kCols * kInner) + (active ? i : 0);  // its first element
    (void)f0;
    (void)r;
{sync}{tile_body}
  }}
}}

const char* launch({host_params}, int threads, cudaStream_t stream) {{
  threads = ka_threads(threads);
  const dim3 block(32, threads / 32);
  const unsigned blocks = ka_grid(kTiles, 1, 2048 / threads);
  kernel<<<blocks, block, 0, stream>>>({args});
  return ka_error(cudaGetLastError());
}}
}}  // namespace {ns}
"""


def axis_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    ns = kernel.name
    axis = _AxisKernel(kernel, body)
    params = body.params()
    args = ", ".join(p.buffer for p in params)
    host_params = launch_params(params)
    slots = len(axis.reductions)
    code = AXIS_NAMESPACE.format(
        ns=ns,
        idx_t=idx_type(kernel.numel),
        outer=kernel.rows // kernel.inner,
        cols=kernel.cols,
        inner=kernel.inner,
        params=pointer_params(params),
        shared=f"  __shared__ float slots[{slots}][32][32];  // [reduction][ty][lane]"
        if slots
        else "",
        sync="    __syncthreads();  // the slots are reused tile after tile\n" if slots else "",
        tile_body=axis.tile_body(),
        host_params=host_params,
        args=args,
    )
    launcher = f"{ns}_launch"
    code += f"""
extern "C" const char* {launcher}({host_params}, int threads, cudaStream_t stream) {{
  return {ns}::launch({args}, threads, stream);
}}
"""
    return KernelSource(
        name=ns,
        kind="axis_reduction",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=launcher,
        params=params,
        launch={"threads": 32 * _team_size(kernel)},
        tunables={"threads": [32, 64, 128, 256, 512, 1024]},
        description=(
            f"{kernel.rows // kernel.inner} x [{kernel.cols}] x {kernel.inner}: "
            f"{slots} reduction(s) along the middle axis, 32 lanes along inner by a team "
            "along the axis"
        ),
    )


def _team_size(kernel: Kernel) -> int:
    """Threads along the reduced axis: enough to keep the GPU busy when there are few outputs,
    one when the outputs alone fill it."""
    lanes = kernel.rows // kernel.inner * (-(-kernel.inner // 32) * 32)
    team = 1
    while team < 32 and lanes * team < RESIDENT_THREADS and team * 2 <= kernel.cols:
        team *= 2
    return team
