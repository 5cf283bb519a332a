"""A convolution whose reduction is short (its group's input channels times its window: at most
MAX_REDUCTION, as in most of KernelBench level 2's, 3 to 16 input channels) as a register-tiled
direct kernel: the third way the first call times against cuDNN's two layouts (cudnn_conv.py).

Why: with a reduction of 27 to 256 products an output, cuDNN's implicit GEMMs keep the tensor
cores idle and pay their layout changes, while the work is writing the output (64 channels from
8) and the fp32 multiply-adds. Here a block holds its group of output channels' weights in
shared memory, [reduction][channels], and each thread computes a tile of channels at several
output positions 32 apart (a warp's lanes on consecutive positions, so every load of x and every
store coalesces): per window tap and input channel, a load of x per position, a broadcast float4
load of weights per four channels, and channels x positions multiply-adds. Each value
leaves through the kernel's epilogue (`emit`, conv_epilogue.py) at its NCHW position, so the
output is written once, in the layout the caller expects, and no scratch is made.

Forward or transposed (a gather: tap k reads input position (o + padding - k * dilation) /
stride where that division is exact), grouped, 1-d to 3-d (as 3-d with leading size-1 dims), the
window arithmetic as windows.py's. Exact fp32 (no TF32), so under either protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from agent.fusion.plan import ConvShape
from agent.fusion.windows import padded

MAX_REDUCTION = 256  # longer reductions are the tensor cores' (cuDNN's)
THREADS = 256
# Whether `layout` 0's first-call timing includes the tiled kernel (3 forces it either way).
MEASURED = True


@dataclass(frozen=True)
class Tiling:
    """A convolution's tiles: `channels` output channels at `positions` output positions a
    thread (channels a multiple of 4, the weights' float4 loads; channels past the group's own
    are zero weights, never stored)."""

    channels: int
    positions: int
    reduction: int  # the group's input channels x the window's taps


def tiling(conv: ConvShape) -> Tiling | None:
    """The tiles for `conv`, or None where the tiled kernel does not take it: a reduction past
    MAX_REDUCTION, or a depthwise one (a group per input channel: the direct kernel's)."""
    in_group = conv.in_channels // conv.groups
    out_group = conv.out_channels // conv.groups
    reduction = in_group * prod(conv.window)
    if reduction > MAX_REDUCTION or (conv.groups > 1 and in_group == 1):
        return None
    # A transposed gather's checks and a 3-d window's offsets hold registers a tap: at four
    # positions those kernels spilled (ptxas, sm_90a, at 128 registers), at two none did.
    positions = 2 if conv.transposed or len(conv.window) == 3 else 4
    return Tiling(min(16, (out_group + 3) // 4 * 4), positions, reduction)


CODE = """namespace tiled {{
// {tiles}
constexpr bool kMeasured = {measured};
const char* available() {{ return nullptr; }}

constexpr int kQ = {channels}, kP = {positions}, kThreads = {threads};
constexpr int kInGroup = {in_group}, kOutGroup = {out_group};
constexpr int kTilesPerGroup = (kOutGroup + kQ - 1) / kQ;
constexpr int kTaps = {taps}, kReduction = kInGroup * kTaps;
constexpr int kS0 = {s0}, kS1 = {s1}, kS2 = {s2};  // input sizes
constexpr int kO0 = {o0}, kO1 = {o1}, kO2 = {o2};  // output sizes
constexpr long long kInPlane = (long long)kS0 * kS1 * kS2, kOutPlane = (long long)kO0 * kO1 * kO2;
constexpr long long kPositions = kBatch * kOutPlane;
constexpr long long kChunk = (long long)kThreads * kP;
constexpr long long kChunks = (kPositions + kChunk - 1) / kChunk;

__global__ void __launch_bounds__(kThreads, 2)
    kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
           float* __restrict__ y, const Tail tail) {{
  __shared__ __align__(16) float ws[kReduction * kQ];
  // blockIdx.x is the channel tile, so the blocks of one chunk's tiles run side by side and
  // read its input from L2 once, not once a tile from memory
  const int group = blockIdx.x / kTilesPerGroup;
  const int first_channel = blockIdx.x % kTilesPerGroup * kQ;  // within the group
  for (int j = threadIdx.x; j < kReduction * kQ; j += kThreads) {{
    const int q = j % kQ, r = j / kQ, cg = r / kTaps, tap = r % kTaps;
    const int co = first_channel + q;  // within the group
    ws[j] = co < kOutGroup ? w[{weight_at}] : 0.0f;
  }}
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (long long chunk = blockIdx.y; chunk < kChunks; chunk += gridDim.y) {{
    long long m[kP];
    const float* xp[kP];
    int o0[kP], o1[kP], o2[kP];
#pragma unroll
    for (int p = 0; p < kP; ++p) {{
      m[p] = chunk * kChunk + (long long)warp * 32 * kP + 32 * p + lane;
      const long long at = m[p] < kPositions ? m[p] : 0;  // a dead lane reads position 0
      const long long n = at / kOutPlane, s = at % kOutPlane;
      o0[p] = (int)(s / ((long long)kO1 * kO2));
      o1[p] = (int)(s / kO2 % kO1);
      o2[p] = (int)(s % kO2);
      xp[p] = x + (n * {in_channels} + (long long)group * kInGroup) * kInPlane;  // channel 0
    }}
    float acc[kQ][kP];
#pragma unroll
    for (int q = 0; q < kQ; ++q) {{
      const int co = first_channel + q;
      const float bias = b != nullptr && co < kOutGroup ? b[group * kOutGroup + co] : 0.0f;
#pragma unroll
      for (int p = 0; p < kP; ++p) acc[q][p] = bias;
    }}
    // Taps outside, channels inside: a tap's positions and checks are worked out once for all
    // the group's input channels (and no tap's survive into the next one's registers).
#pragma unroll
    for (int k0 = 0; k0 < {k0}; ++k0) {{
#pragma unroll
      for (int k1 = 0; k1 < {k1}; ++k1) {{
#pragma unroll
        for (int k2 = 0; k2 < {k2}; ++k2) {{
          long long off[kP];
          bool inside[kP];
#pragma unroll
          for (int p = 0; p < kP; ++p) {{
{gather}
          }}
          const float* wt = ws + ((k0 * {k1} + k1) * {k2} + k2) * kQ;
#pragma unroll 2
          for (int cg = 0; cg < kInGroup; ++cg) {{
            float v[kP];
#pragma unroll
            for (int p = 0; p < kP; ++p) v[p] = inside[p] ? xp[p][off[p] + cg * kInPlane] : 0.0f;
            const float4* wq = reinterpret_cast<const float4*>(wt + cg * kTaps * kQ);
#pragma unroll
            for (int q4 = 0; q4 < kQ / 4; ++q4) {{
              const float4 c = wq[q4];
#pragma unroll
              for (int p = 0; p < kP; ++p) {{
                acc[4 * q4][p] = fmaf(c.x, v[p], acc[4 * q4][p]);
                acc[4 * q4 + 1][p] = fmaf(c.y, v[p], acc[4 * q4 + 1][p]);
                acc[4 * q4 + 2][p] = fmaf(c.z, v[p], acc[4 * q4 + 2][p]);
                acc[4 * q4 + 3][p] = fmaf(c.w, v[p], acc[4 * q4 + 3][p]);
              }}
            }}
          }}
        }}
      }}
    }}
#pragma unroll
    for (int q = 0; q < kQ; ++q) {{
      const int co = first_channel + q;
      if (co >= kOutGroup) continue;
      const long long channel = (long long)group * kOutGroup + co;
#pragma unroll
      for (int p = 0; p < kP; ++p) {{
        if (m[p] >= kPositions) continue;
        const long long n = m[p] / kOutPlane, s = m[p] % kOutPlane;
        emit(tail, y, (idx_t)((n * kYChannels + channel) * kOutPlane + s), acc[q][p]);
      }}
    }}
  }}
}}

// Enough blocks to keep two resident a multiprocessor, spread over the channel tiles.
const char* launch(const float* x, const float* w, const float* b, float* y, const Tail& tail,
                   cudaStream_t stream) {{
  const long long tiles = (long long){groups} * kTilesPerGroup;
  long long across = (long long)ka_sm_count() * 4 / tiles;
  if (across < 1) across = 1;
  if (across > kChunks) across = kChunks;
  kernel<<<dim3((unsigned)tiles, (unsigned)across), kThreads, 0, stream>>>(x, w, b, y, tail);
  return ka_error(cudaGetLastError());
}}
}}  // namespace tiled
"""

REFUSED = """namespace tiled {{
constexpr bool kMeasured = false;
const char* available() {{ return "{why}"; }}

const char* launch(const float*, const float*, const float*, float*, const Tail&, cudaStream_t) {{
  return "{why}";
}}
}}  // namespace tiled
"""


def tiled_code(conv: ConvShape) -> str:
    """The namespace `tiled` with `launch(x, w, b or nullptr, y, tail, stream)`, nullptr or an
    error, inside a convolution kernel's namespace (its Tail, emit, idx_t, kBatch and kYChannels:
    conv_epilogue.py, cudnn_conv.py); where the tiled kernel does not take `conv`, a launch that
    says why."""
    tiles = tiling(conv)
    if tiles is None:
        products = conv.in_channels // conv.groups * prod(conv.window)
        why = (f"a reduction of {products} products (past {MAX_REDUCTION}) or a depthwise "
               "convolution has no tiled kernel")  # fmt: skip
        return REFUSED.format(why=why)
    sizes, window = padded(conv.inputs, 1), padded(conv.window, 1)
    outputs = padded(conv.outputs, 1)
    in_group, out_group = conv.in_channels // conv.groups, conv.out_channels // conv.groups
    if conv.transposed:  # weight [in][out / groups][window]
        weight_at = "((long long)(group * kInGroup + cg) * kOutGroup + co) * kTaps + tap"
    else:  # weight [out][in / groups][window]
        weight_at = "((long long)(group * kOutGroup + co) * kInGroup + cg) * kTaps + tap"
    return CODE.format(
        tiles=f"{tiles.channels} channels x {tiles.positions} positions a thread, "
        f"a reduction of {tiles.reduction}",
        channels=tiles.channels,
        positions=tiles.positions,
        threads=THREADS,
        in_group=in_group,
        out_group=out_group,
        taps=prod(window),
        s0=sizes[0],
        s1=sizes[1],
        s2=sizes[2],
        o0=outputs[0],
        o1=outputs[1],
        o2=outputs[2],
        k0=window[0],
        k1=window[1],
        k2=window[2],
        weight_at=weight_at,
        measured=str(MEASURED).lower(),
        in_channels=conv.in_channels,
        gather="\n".join(" " * 12 + line for line in _gather(conv)),
        groups=conv.groups,
    )


def _gather(conv: ConvShape) -> list[str]:
    """Lines setting off[p], where the input under tap (k0, k1, k2) of position p lies in its
    plane, and inside[p], whether there is one (not in the padding; transposed, an input
    position lands on it)."""
    sizes = padded(conv.inputs, 1)
    stride, padding = padded(conv.stride, 1), padded(conv.padding, 0)
    dilation = padded(conv.dilation, 1)
    lines, checks = [], []
    for j in range(3):
        if conv.transposed:
            lines.append(f"const int t{j} = o{j}[p] + {padding[j]} - k{j} * {dilation[j]};")
            lines.append(f"const int i{j} = t{j} / {stride[j]};")
            checks += [f"t{j} >= 0", f"t{j} % {stride[j]} == 0", f"i{j} < {sizes[j]}"]
        else:
            start = f"o{j}[p] * {stride[j]} - {padding[j]}"
            lines.append(f"const int i{j} = {start} + k{j} * {dilation[j]};")
            if padding[j] > 0:  # without padding every tap of a real output is inside
                checks += [f"i{j} >= 0", f"i{j} < {sizes[j]}"]
    lines.append(f"inside[p] = {' && '.join(checks) or 'true'};")
    lines.append(f"off[p] = inside[p] ? ((long long)i0 * {sizes[1]} + i1) * {sizes[2]} + i2 : 0;")
    return lines
