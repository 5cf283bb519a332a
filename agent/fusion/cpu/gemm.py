"""C++ GEMM kernels: a cache-blocked SGEMM: (mc x nc) output tiles in parallel, B packed into a
kc x nc panel, a 4 x 16 register micro-kernel, and the epilogue (bias, pointwise chain) applied as
each tile is written out.
"""

from __future__ import annotations

from agent.fusion.body import gemm_operands, lower_kernel
from agent.fusion.cpu.prelude import c_params
from agent.fusion.cpu.row_access import RowAccess
from agent.fusion.plan import Kernel, Plan
from agent.fusion.program import KernelSource, Param

GEMM_TEMPLATE = """namespace {ns} {{
constexpr int64_t kBatch = {batch};
constexpr int64_t kM = {m};
constexpr int64_t kN = {n};
constexpr int64_t kK = {k};
constexpr int64_t kStrideA = {stride_a};
constexpr int64_t kStrideB = {stride_b};
// A's element (i, k) at a[i * kRowA + k * kStepA]: [M, K] as it is, or stored transposed
constexpr int64_t kRowA = {row_a};
constexpr int64_t kStepA = {step_a};
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
      const float* __restrict__ ak = a + k * kStepA;
      const float a0 = ak[0], a1 = ak[kRowA], a2 = ak[2 * kRowA], a3 = ak[3 * kRowA];
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
        const float av = a[i * kRowA + k * kStepA];
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
          const float* a_tile = a + bt * kStrideA + (m0 + m) * kRowA + k0 * kStepA;
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

PACK_NT = """  for (int64_t n = 0; n < nc; ++n) {
    const float* __restrict__ src = b + bt * kStrideB + (n0 + n) * kK + k0;  // B^T[n, k]
    for (int64_t k = 0; k < kc; ++k) bp[k * ldp + n] = src[k];
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t n = nc; n < ldp; ++n) bp[k * ldp + n] = 0.0f;"""


def gemm_source(plan: Plan, kernel: Kernel, names: dict, allow_tf32: bool) -> KernelSource:
    body = lower_kernel(plan, kernel, names)
    a, b = gemm_operands(plan, kernel, names)
    g = kernel.gemm
    ns = kernel.name
    rows = RowAccess(body, g.batch * g.m, g.n)
    closure = body.closure([o.bnode for o in body.outputs])
    inner = rows.loads(closure, "          ")
    inner += rows.ops(closure, "          ")
    inner += [f"          {o.buffer}[r * kN + c] = {rows.ref(o.bnode)};" for o in body.outputs]
    params = ["const float* __restrict__ a", "const float* __restrict__ b"]
    params += c_params(body.params())
    code = GEMM_TEMPLATE.format(
        ns=ns,
        batch=g.batch,
        m=g.m,
        n=g.n,
        k=g.k,
        stride_a=g.stride_a,
        stride_b=g.stride_b,
        row_a=1 if g.layout[0] == "t" else g.k,
        step_a=g.m if g.layout[0] == "t" else 1,
        pack=PACK_NT if g.layout[1] == "t" else PACK_NN,
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
        params=[Param(a, "in"), Param(b, "in"), *body.params()],
        launch={"mc": mc, "nc": nc, "kc": 256},
        tunables={"mc": [32, 64, 128], "nc": [64, 128, 256], "kc": [128, 256, 512]},
        description=desc,
    )


def _default_tiles(m: int, n: int, batch: int) -> tuple[int, int]:
    """(mc, nc): 64 x 256 tiles, halved while there are fewer than 16 tiles to share out."""
    mc, nc = 64, 256
    while batch * -(-m // mc) * -(-n // nc) < 16 and (mc > 16 or nc > 64):
        if mc > 16:
            mc //= 2
        else:
            nc //= 2
    return mc, nc
