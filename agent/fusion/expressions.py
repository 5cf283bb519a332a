"""One table: every core pointwise op as a C++ expression, shared by the CUDA and the C++ code
generators. Both spell the math the same way (expf, erff, tanhf: never the fast intrinsics, whose
error would show at the strict 1e-4 protocol); rsqrt is the only difference.

Operands are always plain variable names or literals (the generators give every value a name),
so a template may repeat `{x}` freely.
"""

from __future__ import annotations

import math

UNARY = {
    "relu": "fmaxf({x}, 0.0f)",
    "sigmoid": "1.0f / (1.0f + expf(-{x}))",
    "tanh": "tanhf({x})",
    "silu": "{x} / (1.0f + expf(-{x}))",
    "exp": "expf({x})",
    "log": "logf({x})",
    "sqrt": "sqrtf({x})",
    "neg": "-{x}",
    "abs": "fabsf({x})",
    "erf": "erff({x})",
    "identity": "{x}",
    "to_float": "{x}",  # an int64 as float32: its load already converts it (rounding as torch)
    "sin": "sinf({x})",
    "cos": "cosf({x})",
    # torch's constants and formulas (aten's activation kernels), in fp32
    "selu": "1.0507009873554804934f * ({x} > 0.0f ? {x} : 1.6732632423543772848f * expm1f({x}))",
    "hardsigmoid": "fminf(fmaxf({x} + 3.0f, 0.0f), 6.0f) / 6.0f",
    "hardswish": "{x} * fminf(fmaxf({x} + 3.0f, 0.0f), 6.0f) / 6.0f",
    "mish": "{x} * tanhf({x} > 20.0f ? {x} : log1pf(expf({x})))",
    "softsign": "{x} / (1.0f + fabsf({x}))",
    "logsigmoid": "(fminf({x}, 0.0f) - log1pf(expf(-fabsf({x}))))",
    # a mask's 0/1 (a bool is computed as 0.0f or 1.0f: docs/fusion.md)
    "logical_not": "({x} == 0.0f ? 1.0f : 0.0f)",
}
# Spelled per dialect: CUDA has rsqrtf (2 ulp); C++ has none.
RSQRT = {"cuda": "rsqrtf({x})", "cpu": "1.0f / sqrtf({x})"}
PARAMETRISED = ("gelu", "softplus", "leaky_relu", "clamp", "hardtanh", "elu", "celu", "rsqrt")
# Comparisons make a bool: 1.0f where it holds, else 0.0f (a NaN compares as in torch).
COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", *COMPARISONS)
TERNARY = ("where",)  # where(condition, a, b): a where the condition is nonzero, else b
BOOL_OPS = frozenset(COMPARISONS) | {"logical_not"}  # the pointwise ops whose result is a bool
POINTWISE_OPS = frozenset(UNARY) | frozenset(PARAMETRISED) | frozenset(BINARY) | frozenset(TERNARY)

# Reductions: identity element and how two partial results combine.
REDUCE_INIT = {"sum": "0.0f", "max": "-INFINITY", "min": "INFINITY", "prod": "1.0f"}
REDUCE_COMBINE = {
    "sum": "{a} + {b}",
    "max": "fmaxf({a}, {b})",
    "min": "fminf({a}, {b})",
    "prod": "{a} * {b}",
}
OMP_REDUCTION = {"sum": "+", "max": "max", "min": "min", "prod": "*"}

GELU_EXACT = "0.5f * {x} * (1.0f + erff({x} * 0.70710678118654752440f))"
GELU_TANH = (
    "0.5f * {x} * (1.0f + tanhf(0.79788456080286535588f * ({x} + 0.044715f * {x} * {x} * {x})))"
)


def literal(value: float) -> str:
    """A float32 C++ literal for a Python number (what PyTorch casts a scalar operand to)."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = repr(value)
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if value >= 0 else f"({text}f)"


def _attr(attrs: dict, key: str, default):
    value = attrs.get(key)
    return default if value is None else value


def pointwise(op: str, attrs: dict, args: list[str], dialect: str) -> str:
    """The C++ expression of `op` applied to `args` (names or literals); `const` operands arrive
    as literals, so `pow` with a literal exponent picks the exact special cases PyTorch uses."""
    if op in UNARY:
        return UNARY[op].format(x=args[0])
    if op == "rsqrt":
        return RSQRT[dialect].format(x=args[0])
    if op in PARAMETRISED:
        return _parametrised(op, attrs, args[0])
    if op == "where":
        condition, a, b = args
        return f"({condition} != 0.0f ? {a} : {b})"
    a, b = args
    if op in COMPARISONS:
        return f"({a} {COMPARISONS[op]} {b} ? 1.0f : 0.0f)"
    if op in ("add", "sub"):
        alpha = float(_attr(attrs, "alpha", 1.0))
        rhs = b if alpha == 1.0 else f"{literal(alpha)} * {b}"
        return f"{a} {'+' if op == 'add' else '-'} {rhs}"
    if op == "mul":
        return f"{a} * {b}"
    if op == "div":
        return f"{a} / {b}"
    if op == "maximum":
        return f"fmaxf({a}, {b})"
    if op == "minimum":
        return f"fminf({a}, {b})"
    if op == "pow":
        return _pow(a, b, attrs)
    raise KeyError(f"no expression for op {op!r}")


def _parametrised(op: str, attrs: dict, x: str) -> str:
    if op == "gelu":
        approx = _attr(attrs, "approximate", "none")
        return (GELU_TANH if approx == "tanh" else GELU_EXACT).format(x=x)
    if op == "softplus":
        beta = float(_attr(attrs, "beta", 1.0))
        threshold = float(_attr(attrs, "threshold", 20.0))
        if beta == 1.0:
            return f"({x} > {literal(threshold)} ? {x} : log1pf(expf({x})))"
        bx = f"({literal(beta)} * {x})"
        return f"({bx} > {literal(threshold)} ? {x} : log1pf(expf({bx})) / {literal(beta)})"
    if op == "leaky_relu":
        slope = float(_attr(attrs, "negative_slope", 0.01))
        return f"({x} > 0.0f ? {x} : {x} * {literal(slope)})"
    if op == "elu":
        alpha = float(_attr(attrs, "alpha", 1.0))
        return f"({x} > 0.0f ? {x} : {literal(alpha)} * expm1f({x}))"
    if op == "celu":
        alpha = literal(float(_attr(attrs, "alpha", 1.0)))
        return f"({x} > 0.0f ? {x} : {alpha} * expm1f({x} / {alpha}))"
    if op in ("clamp", "hardtanh"):
        default_lo, default_hi = (None, None) if op == "clamp" else (-1.0, 1.0)
        lo = attrs.get("min", default_lo) if op == "clamp" else _attr(attrs, "min", -1.0)
        hi = attrs.get("max", default_hi) if op == "clamp" else _attr(attrs, "max", 1.0)
        expr = x
        if lo is not None:
            expr = f"fmaxf({expr}, {literal(lo)})"
        if hi is not None:
            expr = f"fminf({expr}, {literal(hi)})"
        return expr
    raise KeyError(op)


def _pow(a: str, b: str, attrs: dict) -> str:
    exponent = _literal_value(b)
    if exponent is None:
        return f"powf({a}, {b})"
    special = {
        0.0: "1.0f",
        1.0: f"{a}",
        2.0: f"{a} * {a}",
        3.0: f"{a} * {a} * {a}",
        0.5: f"sqrtf({a})",
        -0.5: f"1.0f / sqrtf({a})",
        -1.0: f"1.0f / {a}",
        -2.0: f"1.0f / ({a} * {a})",
    }
    return special.get(exponent, f"powf({a}, {b})")


def _literal_value(text: str) -> float | None:
    body = text.strip("()")
    if not body.endswith("f") or body in ("INFINITY", "NAN"):
        return None
    try:
        return float(body[:-1])
    except ValueError:
        return None


def reduce_init(op: str) -> str:
    return REDUCE_INIT[op]


def reduce_combine(op: str, acc: str, value: str) -> str:
    return REDUCE_COMBINE[op].format(a=acc, b=value)


def statements(nodes, ref, indent: str, dialect: str, prefix: str = "e") -> list[str]:
    """`const float <prefix><id> = <expr>;` for every op node of `nodes` (body nodes, in order),
    `ref(id)` naming each operand as the generator stores it."""
    lines = []
    for n in nodes:
        if n.kind == "op":
            expr = pointwise(n.op, n.attrs, [ref(a) for a in n.args], dialect)
            lines.append(f"{indent}const float {prefix}{n.id} = {expr};")
    return lines


def row_statements(body, depth: int, ref, indent: str, dialect: str) -> list[str]:
    """The row-level ops known once `depth` reductions have finished, as `s<id>` values."""
    nodes = [n for n in body.nodes if n.kind == "op" and n.level == "row" and n.depth == depth]
    return statements(nodes, ref, indent, dialect, prefix="s")
