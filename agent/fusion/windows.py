"""A window op's C++ for one output that both code generators share (the cpu and the cuda
window kernels, windowed.py, differ only in how they share out the outputs): the loops over the
window of one output, every size a compile-time constant. A 1-d or 2-d window is a 3-d one with
leading size-1 dims, whose loops the compilers drop.

Pooling: max skips the padding (never read: torch pads with -inf) and lets a NaN win, as torch
does; average divides by the window clipped to the padded input (count_include_pad) or to the
input, or by divisor_override.

Convolution, direct, fp32 accumulation, the bias first. Forward: output (n, co, o) sums
x[n, ci, o * stride - padding + k * dilation] * w[co, ci', k] over the group's input channels ci
and the window k, skipping positions in the zero padding. Transposed (the adjoint of that
forward): output position o gathers the input positions i with i * stride - padding +
k * dilation == o, so each k reads i = (o + padding - k * dilation) / stride where that division
is exact and i is in range; the weight is [ci, co', k].
"""

from __future__ import annotations

from agent.fusion.expressions import literal
from agent.fusion.ir import Node, numel
from agent.fusion.plan import ConvShape, PoolShape


def padded(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    """Per spatial dim values as three dims, leading ones filled in."""
    return (fill,) * (3 - len(values)) + tuple(values)


def window_lines(pool: PoolShape, node: Node, x: str) -> list[str]:
    """Lines computing `const float value`, the output at window position (o0, o1, o2) of the
    plane whose first input element is x[base] (o0, o1, o2 and base: int64_t, declared before)."""
    sizes, window = padded(pool.inputs, 1), padded(pool.window, 1)
    stride, padding = padded(pool.stride, 1), padded(pool.padding, 0)
    dilation = padded(pool.dilation, 1)
    is_max = node.op == "max_pool"
    lines = [f"const int64_t s{j} = o{j} * {stride[j]} - {padding[j]};" for j in range(3)]
    lines.append(f"float acc = {'-INFINITY' if is_max else '0.0f'};")
    for j in range(3):
        pad = "  " * j
        lines += [
            f"{pad}for (int64_t k{j} = 0; k{j} < {window[j]}; ++k{j}) {{",
            f"{pad}  const int64_t i{j} = s{j} + k{j} * {dilation[j]};",
            f"{pad}  if (i{j} < 0 || i{j} >= {sizes[j]}) continue;",
        ]
    pad = "  " * 3
    lines.append(f"{pad}const float v = {x}[base + (i0 * {sizes[1]} + i1) * {sizes[2]} + i2];")
    lines.append(f"{pad}{'if (v > acc || v != v) acc = v;' if is_max else 'acc += v;'}")
    lines += ["  " * j + "}" for j in reversed(range(3))]
    if is_max:
        return [*lines, "const float value = acc;"]
    return lines + _average(node, sizes, window, padding)


def _average(node: Node, sizes, window, padding) -> list[str]:
    override = node.attrs.get("divisor_override")
    if override:
        return [f"const float value = acc / {literal(float(override))};"]
    lines = []
    include_pad = node.attrs.get("count_include_pad", True)
    for j in range(3):
        # the window's end, clipped to the padded input; its start too without the padding
        limit = sizes[j] + padding[j] if include_pad else sizes[j]
        end = f"s{j} + {window[j]}"
        lines.append(f"const int64_t e{j} = {end} < {limit} ? {end} : {limit};")
        start = f"s{j}" if include_pad else f"(s{j} > 0 ? s{j} : 0)"
        lines.append(f"const int64_t n{j} = e{j} - {start};")
    lines.append("const float value = acc / (float)(n0 * n1 * n2);")
    return lines


def conv_lines(conv: ConvShape, x: str, w: str, b: str | None) -> list[str]:
    """Lines computing `const float value`, the output at (n, co, o0, o1, o2) (int64_t, declared
    before) of x convolved with w, plus b[co] where there is a bias."""
    sizes, window = padded(conv.inputs, 1), padded(conv.window, 1)
    stride, padding = padded(conv.stride, 1), padded(conv.padding, 0)
    dilation = padded(conv.dilation, 1)
    in_group = conv.in_channels // conv.groups
    out_group = conv.out_channels // conv.groups
    plane, taps = numel(sizes), numel(window)
    if conv.transposed:
        weight_at = f"(ci * {out_group} + co % {out_group}) * {taps}"
    else:
        weight_at = f"(co * {in_group} + cg) * {taps}"
    lines = [
        f"float acc = {f'{b}[co]' if b else '0.0f'};",
        f"const int64_t group = co / {out_group};",
        f"for (int64_t cg = 0; cg < {in_group}; ++cg) {{",
        f"  const int64_t ci = group * {in_group} + cg;",
        f"  const float* xc = {x} + (n * {conv.in_channels} + ci) * {plane};",
        f"  const float* wc = {w} + {weight_at};",
    ]
    for j in range(3):
        pad = "  " * (j + 1)
        lines.append(f"{pad}for (int64_t k{j} = 0; k{j} < {window[j]}; ++k{j}) {{")
        if conv.transposed:
            lines += [
                f"{pad}  const int64_t t{j} = o{j} + {padding[j]} - k{j} * {dilation[j]};",
                f"{pad}  if (t{j} < 0 || t{j} % {stride[j]} != 0) continue;",
                f"{pad}  const int64_t i{j} = t{j} / {stride[j]};",
                f"{pad}  if (i{j} >= {sizes[j]}) continue;",
            ]
        else:
            lines += [
                f"{pad}  const int64_t i{j} = o{j} * {stride[j]} - {padding[j]} + k{j} * "
                f"{dilation[j]};",
                f"{pad}  if (i{j} < 0 || i{j} >= {sizes[j]}) continue;",
            ]
    pad = "  " * 4
    lines.append(
        f"{pad}acc += xc[(i0 * {sizes[1]} + i1) * {sizes[2]} + i2] * "
        f"wc[(k0 * {window[1]} + k1) * {window[2]} + k2];"
    )
    lines += ["  " * j + "}" for j in reversed(range(4))]
    lines.append("const float value = acc;")
    return lines


def describe_conv(conv: ConvShape) -> str:
    kind = "transposed convolution" if conv.transposed else "convolution"
    window = "x".join(map(str, conv.window))
    groups = f", {conv.groups} groups" if conv.groups > 1 else ""
    return (
        f"{len(conv.window)}-d {kind} {conv.in_channels} -> {conv.out_channels} channels, "
        f"{window} window{groups}"
    )
