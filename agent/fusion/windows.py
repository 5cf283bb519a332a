"""A pooling's window as C++ that both code generators share (the cpu and the cuda pooling
kernels differ only in how they share out the outputs): the loops over the window of one output,
every size a compile-time constant. A 1-d or 2-d pooling is a 3-d one with leading size-1 dims,
whose loops the compilers drop.

Max pooling skips the padding (never read: torch pads with -inf) and lets a NaN win, as torch
does; average pooling divides by the window clipped to the padded input (count_include_pad) or to
the input, or by divisor_override.
"""

from __future__ import annotations

from agent.fusion.expressions import literal
from agent.fusion.ir import Node
from agent.fusion.plan import PoolShape


def padded(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    """Per spatial dim values as three dims, leading ones filled in."""
    return (fill,) * (3 - len(values)) + tuple(values)


def window_lines(pool: PoolShape, node: Node, x: str, indent: str) -> list[str]:
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
        return [indent + line for line in [*lines, "const float value = acc;"]]
    lines += _average(node, sizes, window, padding)
    return [indent + line for line in lines]


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
