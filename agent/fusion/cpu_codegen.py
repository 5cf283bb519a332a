"""C++ (OpenMP) code generation: the kernels of a Plan as `kernels/fused.cpp`.

Plain C++17, standard library only; every kernel has an `extern "C"` launcher taking raw
pointers and its tuning knobs. Shapes are compile-time constants, as on CUDA. Every loop runs
along a row of the element space with the row's operand offsets hoisted, so the innermost loop
is a `#pragma omp simd` over contiguous (or broadcast) memory:

- pointwise: OpenMP tasks of `block` elements, each walking its rows;
- row_reduction: OpenMP over rows (`rows_per_task` a task), one simd sweep per reduction depth
  with `reduction(+/max/min)`, then the sweep that writes the element outputs;
- gemm: a cache-blocked SGEMM: (mc x nc) output tiles in parallel, B packed into a kc x nc panel,
  a 4 x 16 register micro-kernel, and the epilogue (bias, pointwise chain) applied as each tile
  is written out.
"""

from __future__ import annotations

from agent.fusion import expressions
from agent.fusion.body import BNode, Body, row_passes
from agent.fusion.ir import flat_index, numel, row_base, split_rows
from agent.fusion.plan import Kernel
from agent.fusion.program import KernelSource, Param

DIALECT = "cpu"

PRELUDE = """#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {
// Below this many elements a kernel runs on the calling thread: waking the OpenMP team costs
// more than the work (and much more on a busy machine).
constexpr int64_t kParallelMin = 1 << 16;
}  // namespace
"""


def _reads(body: Body) -> list[str]:
    seen: list[str] = []
    for n in body.nodes:
        if n.kind == "load" and n.buffer not in seen:
            seen.append(n.buffer)
    return seen


def _writes(body: Body) -> list[str]:
    return list(dict.fromkeys(o.buffer for o in body.outputs))


class _Rows:
    """Element-level loads read along rows of `cols`: hoisted row offsets, per-element access."""

    def __init__(self, body: Body, rows: int, cols: int):
        self.body, self.rows, self.cols = body, rows, cols
        self.split = {n.id: split_rows(n.terms, n.total, cols) for n in body.loads("elem")}

    def setup(self, indent: str, row: str = "r") -> list[str]:
        """Per-row offsets, row-constant loads, row-level loads."""
        lines = []
        for n in self.body.loads("elem"):
            split = self.split[n.id]
            if split is None:
                continue
            lines.append(f"{indent}const int64_t b{n.id} = {row_base(split, self.rows, row)};")
            if split.col == 0:
                lines.append(f"{indent}const float a{n.id} = {n.buffer}[b{n.id}];")
        for n in self.body.loads("row"):
            lines.append(
                f"{indent}const float a{n.id} = {n.buffer}[{flat_index(n.terms, n.total, row)}];"
            )
        return lines

    def load(self, n: BNode, indent: str, row: str = "r") -> list[str]:
        split = self.split[n.id]
        if split is None:
            index = flat_index(n.terms, n.total, f"{row} * {self.cols} + c")
            return [f"{indent}const float a{n.id} = {n.buffer}[{index}];"]
        if split.col == 0:
            return []
        return [f"{indent}const float a{n.id} = {n.buffer}[b{n.id} + c];"]

    def ref(self, i: int) -> str:
        node = self.body.nodes[i]
        if node.kind == "const":
            return expressions.literal(node.value)
        if node.kind == "load":
            return f"a{i}"
        if node.kind == "acc":
            return "acc"
        return f"s{i}" if node.level == "row" else f"e{i}"

    def ops(self, nodes: list[BNode], indent: str) -> list[str]:
        lines = []
        for n in nodes:
            if n.kind == "op":
                expr = expressions.pointwise(n.op, n.attrs, [self.ref(a) for a in n.args], DIALECT)
                lines.append(f"{indent}const float e{n.id} = {expr};")
        return lines

    def loads(self, nodes: list[BNode], indent: str, row: str = "r") -> list[str]:
        return [line for n in nodes if n.kind == "load" for line in self.load(n, indent, row)]


def _c_params(reads: list[str], writes: list[str]) -> list[str]:
    return [f"const float* __restrict__ {b}" for b in reads] + [
        f"float* __restrict__ {b}" for b in writes
    ]


def _pick_cols(body: Body, shape: tuple[int, ...], total: int) -> int:
    """The longest row (a suffix product of the output shape) along which every load splits into
    a hoisted row offset plus the column: long simd loops, no per-element index arithmetic."""
    best = shape[-1] if shape else 1
    for k in range(len(shape) - 1, -1, -1):
        cols = numel(shape[k:])
        if cols and all(split_rows(n.terms, n.total, cols) is not None for n in body.loads("elem")):
            best = cols
    return max(best, 1) if total % max(best, 1) == 0 else 1


def pointwise_source(kernel: Kernel, body: Body, shape: tuple[int, ...]) -> KernelSource:
    ns = kernel.name
    total = kernel.numel
    cols = _pick_cols(body, shape, total)
    rows = _Rows(body, total // cols, cols)
    reads, writes = _reads(body), _writes(body)
    closure = body.closure([o.bnode for o in body.outputs])
    inner = rows.loads(closure, "        ")
    inner += rows.ops(closure, "        ")
    inner += [f"        {o.buffer}[r * kCols + c] = {rows.ref(o.bnode)};" for o in body.outputs]
    code = f"""namespace {ns} {{
constexpr int64_t kN = {total};
constexpr int64_t kCols = {cols};
}}  // namespace {ns}

extern "C" void {ns}_launch({", ".join(_c_params(reads, writes))}, int64_t block) {{
  using namespace {ns};
  if (block < 256) block = 256;
  const int64_t tasks = (kN + block - 1) / block;
#pragma omp parallel for schedule(static) if (tasks > 1 && kN >= kParallelMin)
  for (int64_t t = 0; t < tasks; ++t) {{
    int64_t i = t * block;
    const int64_t end = std::min(kN, i + block);
    while (i < end) {{
      const int64_t r = i / kCols;
      const int64_t c0 = i - r * kCols;
      const int64_t c1 = std::min(kCols, c0 + (end - i));
{chr(10).join(rows.setup("      "))}
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {{
{chr(10).join(inner)}
      }}
      i += c1 - c0;
    }}
  }}
}}
"""
    return KernelSource(
        name=ns,
        kind="pointwise",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(b, "in") for b in reads] + [Param(b, "out") for b in writes],
        launch={"block": _default_block(total)},
        tunables={"block": [4096, 16384, 65536]},
        description=f"{total} elements in rows of {cols}, OpenMP tasks of `block` elements",
    )


def _default_block(total: int) -> int:
    """Elements per OpenMP task: about 64 tasks, each between 1K and 64K elements."""
    block = 1024
    while block * 2 <= min(65536, total // 64):
        block *= 2
    return block


def _default_tiles(m: int, n: int, batch: int) -> tuple[int, int]:
    """(mc, nc): 64 x 256 tiles, halved while there are fewer than 16 tiles to share out."""
    mc, nc = 64, 256
    while batch * -(-m // mc) * -(-n // nc) < 16 and (mc > 16 or nc > 64):
        if mc > 16:
            mc //= 2
        else:
            nc //= 2
    return mc, nc


def row_source(kernel: Kernel, body: Body) -> KernelSource:
    ns = kernel.name
    rows = _Rows(body, kernel.rows, kernel.cols)
    reads, writes = _reads(body), _writes(body)
    lines = rows.setup("      ")
    lines += _row_ops(body, 0, rows)
    for p, (what, nodes, targets) in enumerate(row_passes(body)):
        clauses = ""
        if what == "reduce":
            for t in targets:
                red = body.nodes[t]
                lines.append(f"      float acc{t} = {expressions.reduce_init(red.op)};")
                clauses += f" reduction({expressions.OMP_REDUCTION[red.op]} : acc{t})"
        lines.append(f"#pragma omp simd{clauses}")
        lines.append("      for (int64_t c = 0; c < kCols; ++c) {")
        lines += rows.loads(nodes, "        ")
        lines += rows.ops(nodes, "        ")
        if what == "reduce":
            for t in targets:
                red = body.nodes[t]
                combined = expressions.reduce_combine(red.op, f"acc{t}", rows.ref(red.args[0]))
                lines.append(f"        acc{t} = {combined};")
        else:
            for o in body.elem_outputs():
                lines.append(f"        {o.buffer}[r * kCols + c] = {rows.ref(o.bnode)};")
        lines.append("      }")
        if what == "reduce":
            for t in targets:
                lines.append(f"      const float s{t} = acc{t};")
            lines += _row_ops(body, p + 1, rows)
    for o in body.row_outputs():
        lines.append(f"      {o.buffer}[r] = {rows.ref(o.bnode)};")
    code = f"""namespace {ns} {{
constexpr int64_t kRows = {kernel.rows};
constexpr int64_t kCols = {kernel.cols};
}}  // namespace {ns}

extern "C" void {ns}_launch({", ".join(_c_params(reads, writes))}, int64_t rows_per_task) {{
  using namespace {ns};
  if (rows_per_task < 1) rows_per_task = 1;
  const int64_t tasks = (kRows + rows_per_task - 1) / rows_per_task;
#pragma omp parallel for schedule(static) if (tasks > 1 && kRows * kCols >= kParallelMin)
  for (int64_t t = 0; t < tasks; ++t) {{
    const int64_t r_end = std::min(kRows, (t + 1) * rows_per_task);
    for (int64_t r = t * rows_per_task; r < r_end; ++r) {{
{chr(10).join(lines)}
    }}
  }}
}}
"""
    per_task = max(1, min(64, 16384 // kernel.cols, kernel.rows // 64))
    return KernelSource(
        name=ns,
        kind="row_reduction",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(b, "in") for b in reads] + [Param(b, "out") for b in writes],
        launch={"rows_per_task": per_task},
        tunables={"rows_per_task": [1, 4, 16, 64]},
        description=(
            f"{kernel.rows} rows x {kernel.cols}: {len(body.reductions())} reduction(s), "
            "OpenMP over rows, simd sweeps"
        ),
    )


def _row_ops(body: Body, depth: int, rows: _Rows) -> list[str]:
    lines = []
    for n in body.nodes:
        if n.kind == "op" and n.level == "row" and n.depth == depth:
            args = [rows.ref(a) for a in n.args]
            expr = expressions.pointwise(n.op, n.attrs, args, DIALECT)
            lines.append(f"      const float s{n.id} = {expr};")
    return lines


GEMM_TEMPLATE = """namespace {ns} {{
constexpr int64_t kBatch = {batch};
constexpr int64_t kM = {m};
constexpr int64_t kN = {n};
constexpr int64_t kK = {k};
constexpr int64_t kStrideA = {stride_a};
constexpr int64_t kStrideB = {stride_b};
constexpr int kMR = 4;   // micro-tile rows
constexpr int kNR = 16;  // micro-tile columns (the simd direction)

// Packs B[k0:k0+kc, n0:n0+nc] of batch `bt` into bp (kc rows of ldp floats, zero padded).
void pack_b(const float* __restrict__ b, int64_t bt, int64_t k0, int64_t kc, int64_t n0,
            int64_t nc, int64_t ldp, float* __restrict__ bp) {{
{pack}
}}

// ct[0:rows, 0:kNR] += a[0:rows, 0:kc] * bp[0:kc, 0:kNR], accumulators in registers.
inline void micro(const float* __restrict__ a, const float* __restrict__ bp, int64_t ldp,
                  int64_t kc, float* __restrict__ ct, int64_t ldc, int rows) {{
  float acc[kMR][kNR] = {{}};
  if (rows == kMR) {{
    for (int64_t k = 0; k < kc; ++k) {{
      const float* __restrict__ brow = bp + k * ldp;
      const float a0 = a[k], a1 = a[kK + k], a2 = a[2 * kK + k], a3 = a[3 * kK + k];
#pragma omp simd
      for (int j = 0; j < kNR; ++j) {{
        acc[0][j] += a0 * brow[j];
        acc[1][j] += a1 * brow[j];
        acc[2][j] += a2 * brow[j];
        acc[3][j] += a3 * brow[j];
      }}
    }}
  }} else {{
    for (int64_t k = 0; k < kc; ++k) {{
      const float* __restrict__ brow = bp + k * ldp;
      for (int i = 0; i < rows; ++i) {{
        const float av = a[i * kK + k];
#pragma omp simd
        for (int j = 0; j < kNR; ++j) acc[i][j] += av * brow[j];
      }}
    }}
  }}
  for (int i = 0; i < rows; ++i)
#pragma omp simd
    for (int j = 0; j < kNR; ++j) ct[i * ldc + j] += acc[i][j];
}}
}}  // namespace {ns}

extern "C" void {ns}_launch({params}, int64_t mc, int64_t nc, int64_t kc) {{
  using namespace {ns};
  mc = std::max<int64_t>(kMR, mc / kMR * kMR);
  nc = std::max<int64_t>(kNR, nc / kNR * kNR);
  kc = std::max<int64_t>(1, std::min<int64_t>(kc, kK));
  const int64_t m_tiles = (kM + mc - 1) / mc;
  const int64_t n_tiles = (kN + nc - 1) / nc;
  const int64_t tiles = kBatch * m_tiles * n_tiles;
#pragma omp parallel if (tiles > 1 && kBatch * kM * kN * kK >= kParallelMin * 64)
  {{
    std::vector<float> bp_buf((size_t)(kc * nc)), ct_buf((size_t)(mc * nc));
    float* __restrict__ bp = bp_buf.data();
    float* __restrict__ ct = ct_buf.data();
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {{
      const int64_t bt = t / (m_tiles * n_tiles);
      const int64_t m0 = (t / n_tiles) % m_tiles * mc;
      const int64_t n0 = t % n_tiles * nc;
      const int64_t m_len = std::min(mc, kM - m0);
      const int64_t n_len = std::min(nc, kN - n0);
      const int64_t ldp = (n_len + kNR - 1) / kNR * kNR;
      std::fill(ct, ct + m_len * ldp, 0.0f);
      for (int64_t k0 = 0; k0 < kK; k0 += kc) {{
        const int64_t k_len = std::min(kc, kK - k0);
        pack_b(b, bt, k0, k_len, n0, n_len, ldp, bp);
        for (int64_t m = 0; m < m_len; m += kMR) {{
          const int rows = (int)std::min<int64_t>(kMR, m_len - m);
          const float* a_tile = a + bt * kStrideA + (m0 + m) * kK + k0;
          for (int64_t j = 0; j < ldp; j += kNR)
            micro(a_tile, bp + j, ldp, k_len, ct + m * ldp + j, ldp, rows);
        }}
      }}
      // Epilogue, fused into the write-out of the finished tile.
      for (int64_t m = 0; m < m_len; ++m) {{
        const int64_t r = bt * kM + m0 + m;
        const float* __restrict__ crow = ct + m * ldp - n0;
{setup}
#pragma omp simd
        for (int64_t c = n0; c < n0 + n_len; ++c) {{
          const float acc = crow[c];
{inner}
        }}
      }}
    }}
  }}
}}
"""

PACK_NN = """  const float* __restrict__ src = b + bt * kStrideB + k0 * kN + n0;
  for (int64_t k = 0; k < kc; ++k) {
    float* __restrict__ dst = bp + k * ldp;
    for (int64_t n = 0; n < nc; ++n) dst[n] = src[k * kN + n];
    for (int64_t n = nc; n < ldp; ++n) dst[n] = 0.0f;
  }"""

PACK_NT = """  (void)bt;
  for (int64_t n = 0; n < nc; ++n) {
    const float* __restrict__ src = b + (n0 + n) * kK + k0;  // W[n, k]: B = W^T
    for (int64_t k = 0; k < kc; ++k) bp[k * ldp + n] = src[k];
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t n = nc; n < ldp; ++n) bp[k * ldp + n] = 0.0f;"""


def gemm_source(kernel: Kernel, body: Body, a: str, b: str) -> KernelSource:
    g = kernel.gemm
    ns = kernel.name
    rows = _Rows(body, g.batch * g.m, g.n)
    reads = [r for r in _reads(body)]
    writes = _writes(body)
    closure = body.closure([o.bnode for o in body.outputs])
    inner = rows.loads(closure, "          ")
    inner += rows.ops(closure, "          ")
    inner += [f"          {o.buffer}[r * kN + c] = {rows.ref(o.bnode)};" for o in body.outputs]
    params = ["const float* __restrict__ a", "const float* __restrict__ b"]
    params += _c_params(reads, writes)
    code = GEMM_TEMPLATE.format(
        ns=ns,
        batch=g.batch,
        m=g.m,
        n=g.n,
        k=g.k,
        stride_a=g.stride_a,
        stride_b=g.stride_b,
        pack=PACK_NT if g.layout == "nt" else PACK_NN,
        params=", ".join(params),
        setup="\n".join(rows.setup("        ")),
        inner="\n".join(inner),
    )
    mc, nc = _default_tiles(g.m, g.n, g.batch)
    epilogue = kernel.nodes[1:]
    desc = f"blocked OpenMP SGEMM {g.batch} x [{g.m}x{g.k}] @ [{g.k}x{g.n}]"
    if g.bias is not None or epilogue:
        desc += (
            " with the epilogue ("
            + ", ".join((["bias"] if g.bias is not None else []) + epilogue)
            + ") fused into the tile write-out"
        )
    return KernelSource(
        name=ns,
        kind="gemm",
        nodes=kernel.nodes + kernel.aliases,
        code=code,
        launcher=f"{ns}_launch",
        params=[Param(a, "in"), Param(b, "in")]
        + [Param(r, "in") for r in reads]
        + [Param(w, "out") for w in writes],
        launch={"mc": mc, "nc": nc, "kc": 256},
        tunables={"mc": [32, 64, 128], "nc": [64, 128, 256], "kc": [128, 256, 512]},
        description=desc,
    )


def fused_cpp(sources: list[KernelSource], header: str) -> str:
    parts = [header, PRELUDE]
    for s in sources:
        parts.append(f"// ---- {s.name} [{s.kind}]: {', '.join(s.nodes)}\n// {s.description}")
        parts.append(s.code)
    return "\n".join(parts)
