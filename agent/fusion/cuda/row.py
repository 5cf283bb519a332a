"""CUDA row kernels: a team per row (a block, or a warp for short rows: `warp_per_row`), one
sweep per reduction depth with warp-shuffle + shared-memory team reductions, then a final sweep
that writes the element outputs. Row operands read in several sweeps are kept in shared memory
after the first read (`cache`), so a softmax or layer_norm row crosses DRAM once each way;
`unroll` puts up to 4 chunks' loads of a sweep in flight (for long rows).
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
from agent.fusion.ir import row_base, split_rows
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

REDUCE_CODE = {"sum": 0, "max": 1, "min": 2, "prod": 3}  # ka_combine's OP
MAX_UNROLL = 4  # chunks of a sweep whose loads are in flight at once


class _RowAccess:
    """How each element-level load of a row kernel is read along its row."""

    def __init__(self, body: Body, cols: int):
        self.kind: dict[int, str] = {}
        self.split = {}
        for n in body.loads("elem"):
            split = None if n.indexed else split_rows(n.terms, n.total, cols)
            self.split[n.id] = split
            if split is None or (n.dtype != "float32" and split.col != 0):
                self.kind[n.id] = "lanes"  # a mask's bools convert one by one, no float4
            elif split.col == 0:
                self.kind[n.id] = "rowconst"
            elif not split.row_terms:
                self.kind[n.id] = "col"
            else:
                self.kind[n.id] = "row"


class _RowKernel:
    """The code of one row kernel, built as lines of the per-row loop body."""

    def __init__(self, kernel: Kernel, body: Body):
        self.kernel, self.body = kernel, body
        self.rows, self.cols = kernel.rows, kernel.cols
        self.access = _RowAccess(body, self.cols)
        self.passes = row_passes(body)
        self.uses: dict[int, list[int]] = {}  # load -> the passes that read it
        for p, (_, nodes, _) in enumerate(self.passes):
            for n in nodes:
                if n.kind == "load":
                    self.uses.setdefault(n.id, []).append(p)
        self.cached = [
            i for i, ps in self.uses.items() if self.access.kind[i] == "row" and len(ps) > 1
        ]
        self.slot_of = {i: k for k, i in enumerate(self.cached)}
        self.reductions = body.reductions()
        self.red_slot = {n.id: k for k, n in enumerate(self.reductions)}
        self.lines: list[str] = []
        self.unrolled = False

    def add(self, line: str) -> None:
        self.lines.append(line)

    def ref(self, i: int) -> str:
        node = self.body.nodes[i]
        if fixed_operand(node) is not None:
            return fixed_operand(node)
        if node.level == "row":
            return f"a{i}" if node.kind == "load" else f"s{i}"
        if node.kind == "load":
            return f"a{i}" if self.access.kind[i] == "rowconst" else f"a{i}[u][l]"
        return f"e{i}"

    # ---- the per-row loop body ----
    def row_setup(self) -> None:
        """Bases of split loads, row-constant loads, row-level loads and ops."""
        for n in self.body.loads("elem"):
            kind = self.access.kind[n.id]
            if kind in ("row", "rowconst"):
                base = row_base(self.access.split[n.id], self.rows, "r")
                self.add(f"    const idx_t b{n.id} = {base};")
            if kind == "rowconst":
                self.add(f"    const float a{n.id} = {n.buffer}[b{n.id}];")
        for n in self.body.loads("row"):
            self.add(f"    const float a{n.id} = {load_expression(n, 'r')};")
        self.lines += expressions.row_statements(self.body, 0, self.ref, "    ", DIALECT)

    def sweep(self, p: int, what: str, nodes, targets: list[int], u_count: int, shift: int) -> None:
        """One stretch of a sweep: u_count chunks of V elements, `step` apart; every load of
        the chunks is issued before their arithmetic."""
        add, lines, body = self.add, self.lines, self.body
        start = len(lines)
        loads = [n for n in nodes if n.kind == "load" and self.access.kind[n.id] != "rowconst"]
        if loads:  # none when every operand is constant along the row (a row of one)
            for n in loads:
                add(f"      float a{n.id}[{u_count}][V];")
            add("#pragma unroll")
            add(f"      for (int u = 0; u < {u_count}; ++u) {{")
            add("        const idx_t cu = c + u * step;")
            for n in loads:
                lines.extend(self.load(n, p))
            add("      }")
        add("#pragma unroll")
        add(f"      for (int u = 0; u < {u_count}; ++u) {{")
        if what == "write":
            add("        const idx_t cu = c + u * step;")
            for j in range(len(targets)):
                add(f"        float o{j}[V];")
        add("#pragma unroll")
        add("        for (int l = 0; l < V; ++l) {")
        lines.extend(expressions.statements(nodes, self.ref, "          ", DIALECT))
        if what == "reduce":
            for r in targets:
                red = body.nodes[r]
                combined = expressions.reduce_combine(red.op, f"acc{r}", self.ref(red.args[0]))
                add(f"          acc{r} = {combined};")
        else:
            for j, t in enumerate(targets):
                add(f"          o{j}[l] = {self.ref(t)};")
        add("        }")
        if what == "write":
            for j, o in enumerate(body.elem_outputs()):
                add(f"        ka_st<V>({o.buffer} + r * kCols + cu, o{j});")
        add("      }")
        pad = " " * shift
        lines[start:] = [x if x.startswith("#") else pad + x for x in lines[start:]]

    def load(self, n: BNode, p: int) -> list[str]:
        """Loads chunk u (at column cu) of a load into a{id}[u]."""
        kind = self.access.kind[n.id]
        dst = f"a{n.id}[u]"
        if kind == "lanes":
            value = load_expression(n, f"r * {self.cols} + cu + l")
            return ["#pragma unroll", f"        for (int l = 0; l < V; ++l) {dst}[l] = {value};"]
        src = f"{n.buffer} + cu" if kind == "col" else f"{n.buffer} + b{n.id} + cu"
        if n.id not in self.slot_of:
            return [f"        ka_ld<V>({src}, {dst});"]
        spot = f"cache + {self.slot_of[n.id]} * kCols + cu"
        if self.uses[n.id][0] == p:
            return [
                f"        ka_ld<V>({src}, {dst});",
                f"        if constexpr (CACHE) ka_st<V>({spot}, {dst});",
            ]
        return [
            "        if constexpr (CACHE)",
            f"          ka_ld<V>({spot}, {dst});",
            "        else",
            f"          ka_ld<V>({src}, {dst});",
        ]

    def unroll_for(self, nodes: list[BNode]) -> int:
        """At most 32 floats of loads in flight a thread (64 registers at 1024 threads)."""
        count = sum(1 for n in nodes if n.kind == "load" and self.access.kind[n.id] != "rowconst")
        u = MAX_UNROLL
        while u > 1 and u * 4 * count > 32:
            u //= 2
        return u

    def one_pass(self, p: int, what: str, nodes, targets: list[int]) -> None:
        add, body = self.add, self.body
        if what == "reduce":
            for r in targets:
                add(f"    float acc{r} = {expressions.reduce_init(body.nodes[r].op)};")
        add("    {")
        add("      const idx_t step = team_size * V;")
        add("      idx_t c = (idx_t)tid * V;")
        u_count = self.unroll_for(nodes)
        if u_count > 1:
            self.unrolled = True
            add("      if constexpr (UNROLL) {")
            add(f"        for (; c + {u_count - 1} * step < kCols; c += {u_count} * step) {{")
            self.sweep(p, what, nodes, targets, u_count, 4)
            add("        }")
            add("      }")
        add("      for (; c < kCols; c += step) {")
        self.sweep(p, what, nodes, targets, 1, 2)
        add("      }")
        add("    }")
        if what == "reduce":
            for r in targets:
                red = body.nodes[r]
                code, init = REDUCE_CODE[red.op], expressions.reduce_init(red.op)
                add(
                    f"    const float s{r} = ka_team_reduce<WARP, {code}>(acc{r}, "
                    f"slots[{self.red_slot[r]}], {init});"
                )
            self.lines += expressions.row_statements(body, p + 1, self.ref, "    ", DIALECT)

    def row_loop_body(self) -> str:
        self.row_setup()
        for p, (what, nodes, targets) in enumerate(self.passes):
            self.one_pass(p, what, nodes, targets)
        row_outs = self.body.row_outputs()
        if row_outs:
            self.add("    if (tid == 0) {")
            for o in row_outs:
                self.add(f"      {o.buffer}[r] = {self.ref(o.bnode)};")
            self.add("    }")
        return "\n".join(self.lines)

    # ---- the namespace ----
    def shared_declarations(self) -> str:
        shared = []
        if self.reductions:
            shared.append(f"  __shared__ float slots[{len(self.reductions)}][32];")
        if self.cached:
            shared += [
                "  extern __shared__ float4 ka_dynamic_smem[];",
                "  float* cache = reinterpret_cast<float*>(ka_dynamic_smem) +",
                "                 (WARP ? (threadIdx.x >> 5) : 0u) * (kCached * kCols);",
            ]
        return "\n".join(shared)

    def aligned_check(self) -> str:
        body = self.body
        vec_bufs = [
            n.buffer for n in body.loads("elem") if self.access.kind[n.id] in ("row", "col")
        ] + [o.buffer for o in body.elem_outputs()]
        return " && ".join(f"ka_aligned({b})" for b in dict.fromkeys(vec_bufs)) or "true"

    def code(self, params: list[Param]) -> str:
        ns, vec_ok = self.kernel.name, self.cols % 4 == 0
        loop_body = self.row_loop_body()
        args = ", ".join(p.buffer for p in params)
        host_params = launch_params(params)
        sync = "    if constexpr (!WARP) __syncthreads();  // slots are reused row after row\n"
        dispatch = _dispatch(
            [
                ("vec" if vec_ok else None, "4", "1"),
                ("warp", "true", "false"),
                ("keep" if self.cached else None, "true", "false"),
                ("unroll != 0" if self.unrolled else None, "true", "false"),
            ],
            args,
        )
        vec = "(kCols % 4 == 0) && " + self.aligned_check() if vec_ok else "false"
        return ROW_NAMESPACE.format(
            ns=ns,
            idx_t=idx_type(self.kernel.numel),
            rows=self.rows,
            cols=self.cols,
            cached=len(self.cached),
            params=pointer_params(params),
            shared=self.shared_declarations(),
            sync=sync if self.reductions else "",
            loop_body=loop_body,
            host_params=host_params,
            args=args,
            vec=vec,
            dispatch=dispatch,
        )


ROW_NAMESPACE = """namespace {ns} {{
using idx_t = {idx_t};
constexpr idx_t kRows = {rows};
constexpr idx_t kCols = {cols};
constexpr idx_t kCached = {cached};  // row operands kept in shared memory between sweeps

template <int V, bool WARP, bool CACHE, bool UNROLL>
__global__ void __launch_bounds__(1024) kernel({params}) {{
{shared}
  const int tid = WARP ? (int)(threadIdx.x & 31) : (int)threadIdx.x;
  const idx_t team_size = WARP ? 32u : (idx_t)blockDim.x;
  const idx_t team =
      WARP ? (idx_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5) : (idx_t)blockIdx.x;
  const idx_t teams = WARP ? (idx_t)gridDim.x * (blockDim.x >> 5) : (idx_t)gridDim.x;
  for (idx_t r = team; r < kRows; r += teams) {{
{sync}{loop_body}
  }}
}}

template <int V, bool WARP, bool CACHE, bool UNROLL>
const char* run({host_params}, int threads, cudaStream_t stream) {{
  const int teams_per_block = WARP ? threads / 32 : 1;
  const size_t smem = CACHE ? (size_t)teams_per_block * kCached * kCols * sizeof(float) : 0;
  const int device = ka_device();
  if constexpr (CACHE) {{
    static size_t raised[kMaxDevices] = {{}};  // beyond 48 KiB needs an opt-in per kernel
    if (smem > 48 * 1024 && raised[device] < smem) {{
      const cudaError_t err = cudaFuncSetAttribute(
          kernel<V, WARP, CACHE, UNROLL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
          (int)smem);
      if (err != cudaSuccess) return ka_error(err);
      raised[device] = smem;
    }}
  }}
  static int occupancy[kMaxDevices][33] = {{}};
  int& per_sm = occupancy[device][threads / 32];
  if (per_sm == 0) {{
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel<V, WARP, CACHE, UNROLL>,
                                                  threads, smem);
    if (per_sm < 1) per_sm = 1;
  }}
  const long long team_blocks = ((long long)kRows + teams_per_block - 1) / teams_per_block;
  const unsigned blocks = ka_grid(team_blocks, 1, per_sm);
  kernel<V, WARP, CACHE, UNROLL><<<blocks, threads, smem, stream>>>({args});
  return ka_error(cudaGetLastError());
}}

const char* launch({host_params}, int threads, int warp_per_row, int cache, int unroll,
                   cudaStream_t stream) {{
  threads = ka_threads(threads);
  const bool warp = warp_per_row != 0;
  bool keep = kCached > 0 && cache != 0;
  if (keep) {{
    const size_t bytes = (size_t)(warp ? threads / 32 : 1) * kCached * kCols * sizeof(float);
    keep = bytes + 8192 <= (size_t)ka_smem_optin();  // too long a row: re-read it (from L2)
  }}
  const bool vec = {vec};
  (void)keep;
  (void)vec;
  (void)unroll;
{dispatch}
}}
}}  // namespace {ns}
"""


def row_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    ns, rows, cols = kernel.name, kernel.rows, kernel.cols
    row_kernel = _RowKernel(kernel, body)
    params = body.params()
    code = row_kernel.code(params)
    launcher = f"{ns}_launch"
    args = ", ".join(p.buffer for p in params)
    code += f"""
extern "C" const char* {launcher}({launch_params(params)}, int threads, int warp_per_row,
                                 int cache, int unroll, cudaStream_t stream) {{
  return {ns}::launch({args}, threads, warp_per_row, cache, unroll, stream);
}}
"""
    warp_default = cols <= 1024
    threads = 256 if warp_default else min(1024, max(128, _pow2_at_least(cols // 16)))
    # Chunks of V elements a thread takes per sweep at the default launch: unrolled sweeps
    # (UNROLL: up to 4 chunks' loads in flight, more registers) pay off from about 8.
    chunks = cols // ((32 if warp_default else threads) * 4)
    sweeps = body.sweeps + (1 if body.elem_outputs() else 0)
    reductions, cached = row_kernel.reductions, row_kernel.cached
    return KernelSource(
        name=ns,
        kind="row_reduction",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=launcher,
        params=params,
        launch={
            "threads": threads,
            "warp_per_row": int(warp_default),
            "cache": 1,
            "unroll": int(chunks >= 8),
        },
        tunables={
            "threads": [64, 128, 256, 512, 1024],
            "warp_per_row": [0, 1],
            "cache": [1, 0],
            "unroll": [0, 1],
        },
        description=(
            f"{rows} rows x {cols}: {len(reductions)} reduction(s) in {sweeps} sweep(s), "
            f"{len(cached)} row operand(s) cached in shared memory"
        ),
    )


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _dispatch(choices: list[tuple[str | None, str, str]], args: str) -> str:
    """Nested ifs from run-time conditions to `run<...>` instantiations: one (condition, template
    argument when true, when false) per template parameter; a None condition always takes the
    second (the instantiation it would select is never generated)."""

    def nest(i: int, chosen: list[str], indent: str) -> list[str]:
        if i == len(choices):
            return [f"{indent}return run<{', '.join(chosen)}>({args}, threads, stream);"]
        condition, when_true, when_false = choices[i]
        if condition is None:
            return nest(i + 1, [*chosen, when_false], indent)
        return (
            [f"{indent}if ({condition}) {{"]
            + nest(i + 1, [*chosen, when_true], indent + "  ")
            + [f"{indent}}}"]
            + nest(i + 1, [*chosen, when_false], indent)
        )

    return "\n".join(nest(0, [], "  "))
