"""The seed operators: what the composer may chain, each with the layouts it accepts, the shape it
gives and a rough cost so shapes can be chosen for an eager time in a window.

A layout is the meaning of a tensor's dimensions: "features" (batch, features), "sequence"
(batch, tokens, hidden) and "image" (batch, channels, height, width). An operator's `step` turns
the current shape into a Step: the module it builds in __init__ (if any), the expression of its
forward, the shape it returns and its cost in FLOPs and bytes (fp32).
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Callable
from dataclasses import dataclass, field

FEATURES, SEQUENCE, IMAGE = "features", "sequence", "image"
LAYOUTS = (FEATURES, SEQUENCE, IMAGE)
FP32 = 4  # bytes per element

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Step:
    forward: str  # an expression in `x` (and `{m}`, the step's module, when `module` is set)
    shape: Shape  # what it returns
    flops: float
    bytes: float
    module: str = ""  # a constructor expression, e.g. "nn.Linear(1024, 2048)"
    layout: str = ""  # when it changes the layout
    imports: tuple[str, ...] = ()  # lines the source needs besides torch, nn and F


@dataclass(frozen=True)
class Operator:
    name: str
    family: str  # pointwise, norm, softmax, matmul, conv, pool, attention, reduction, layout, block
    layouts: tuple[str, ...]
    step: Callable[[Shape, random.Random], Step]
    terminal: bool = False  # ends a chain (its output is no longer in its layout)
    needs: tuple[str, ...] = field(default=())  # packages besides torch


def numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _elementwise(shape: Shape, flops_per: float = 1.0, out: Shape | None = None) -> tuple:
    out = out or shape
    return flops_per * numel(shape), FP32 * (numel(shape) + numel(out))


def pointwise(name: str, expr: str, flops_per: float = 1.0) -> Operator:
    def step(shape: Shape, rng: random.Random) -> Step:
        return Step(expr, shape, *_elementwise(shape, flops_per))

    return Operator(name, "pointwise", LAYOUTS, step)


def _scale(shape: Shape, rng: random.Random) -> Step:
    return Step(f"x * {rng.choice((0.5, 1.5, 2.0, 3.0))}", shape, *_elementwise(shape))


def _clamp(shape: Shape, rng: random.Random) -> Step:
    low = rng.choice((-1.0, -0.5, 0.0))
    return Step(f"torch.clamp(x, min={low}, max={low + 1.5})", shape, *_elementwise(shape))


def _layer_norm(shape: Shape, rng: random.Random) -> Step:
    return Step("{m}(x)", shape, *_elementwise(shape, 8), module=f"nn.LayerNorm({shape[-1]})")


def _rms_norm(shape: Shape, rng: random.Random) -> Step:
    return Step("{m}(x)", shape, *_elementwise(shape, 5), module=f"nn.RMSNorm({shape[-1]})")


def _batch_norm(shape: Shape, rng: random.Random) -> Step:
    kind = "nn.BatchNorm1d" if len(shape) == 2 else "nn.BatchNorm2d"
    return Step("{m}(x)", shape, *_elementwise(shape, 8), module=f"{kind}({shape[1]})")


def _group_norm(shape: Shape, rng: random.Random) -> Step:
    groups = rng.choice([g for g in (2, 4, 8) if shape[1] % g == 0] or [1])
    module = f"nn.GroupNorm({groups}, {shape[1]})"
    return Step("{m}(x)", shape, *_elementwise(shape, 8), module=module)


def _instance_norm(shape: Shape, rng: random.Random) -> Step:
    return Step("F.instance_norm(x)", shape, *_elementwise(shape, 8))


def _softmax(log: bool) -> Callable[[Shape, random.Random], Step]:
    def step(shape: Shape, rng: random.Random) -> Step:
        dim = 1 if len(shape) == 4 else -1
        name = "log_softmax" if log else "softmax"
        return Step(f"torch.{name}(x, dim={dim})", shape, *_elementwise(shape, 5))

    return step


WIDTHS = (256, 512, 768, 1024, 2048)


def _linear(shape: Shape, rng: random.Random) -> Step:
    width = rng.choice(WIDTHS)
    out = (*shape[:-1], width)
    rows = numel(shape[:-1])
    return Step(
        "{m}(x)",
        out,
        2.0 * rows * shape[-1] * width,
        FP32 * (numel(shape) + numel(out) + shape[-1] * width),
        module=f"nn.Linear({shape[-1]}, {width})",
    )


def _matmul_weight(shape: Shape, rng: random.Random) -> Step:
    """x @ W with W a parameter: a matmul without bias, written as torch.matmul."""
    width = rng.choice(WIDTHS)
    out = (*shape[:-1], width)
    module = f"nn.Parameter(torch.randn({shape[-1]}, {width}) / {shape[-1]} ** 0.5)"
    flops = 2.0 * numel(shape[:-1]) * shape[-1] * width
    return Step("torch.matmul(x, {m})", out, flops, FP32 * (numel(shape) + numel(out)), module)


def _conv(shape: Shape, rng: random.Random) -> Step:
    b, c, h, w = shape
    out_c = rng.choice((16, 32, 64, 128))
    kernel = rng.choice((1, 3))
    out = (b, out_c, h, w)
    module = f"nn.Conv2d({c}, {out_c}, {kernel}, padding={kernel // 2})"
    flops = 2.0 * b * out_c * h * w * c * kernel * kernel
    return Step("{m}(x)", out, flops, FP32 * (numel(shape) + numel(out)), module)


def _pool(kind: str) -> Callable[[Shape, random.Random], Step]:
    def step(shape: Shape, rng: random.Random) -> Step:
        b, c, h, w = shape
        out = (b, c, h // 2, w // 2)
        return Step(f"F.{kind}(x, 2)", out, *_elementwise(shape, 1, out))

    return step


def _flatten(shape: Shape, rng: random.Random) -> Step:
    out = (shape[0], numel(shape[1:]))
    return Step("x.flatten(1)", out, 0.0, FP32 * 2 * numel(shape), layout=FEATURES)


def _global_pool(shape: Shape, rng: random.Random) -> Step:
    out = shape[:2]
    return Step("x.mean(dim=(2, 3))", out, *_elementwise(shape, 1, out), layout=FEATURES)


def _attention(shape: Shape, rng: random.Random) -> Step:
    b, s, d = shape
    heads = rng.choice([h for h in (4, 8, 16) if d % h == 0])
    module = f"nn.MultiheadAttention({d}, {heads}, batch_first=True)"
    flops = 2.0 * b * s * d * d * 4 + 4.0 * b * s * s * d
    expr = "{m}(x, x, x, need_weights=False)[0]"
    return Step(expr, shape, flops, FP32 * 3 * numel(shape), module)


def _sdpa(shape: Shape, rng: random.Random) -> Step:
    b, s, d = shape
    causal = rng.random() < 0.5
    flops = 4.0 * b * s * s * d
    expr = f"F.scaled_dot_product_attention(x, x, x, is_causal={causal})"
    return Step(expr, shape, flops, FP32 * 2 * numel(shape))


def _reduction(expr: str) -> Callable[[Shape, random.Random], Step]:
    def step(shape: Shape, rng: random.Random) -> Step:
        out = shape[:-1]
        return Step(expr, out, *_elementwise(shape, 1, out))

    return step


# transformers building blocks: a small config built in __init__, random weights, no download.
# Dropout is off so two runs agree (the harness does not put the model in eval mode).
def _block(
    module_path: str, config_class: str, make: str, config: str, out_width: str = ""
) -> Callable[[Shape, random.Random], Step]:
    def step(shape: Shape, rng: random.Random) -> Step:
        d = shape[-1]
        inner = rng.choice((2, 3, 4)) * d
        width = inner if out_width == "inner" else d
        out = (*shape[:-1], width)
        cfg = f"{config_class}({config.format(d=d, inner=inner)})"
        flops = 2.0 * numel(shape[:-1]) * d * inner * (3 if "Llama" in module_path else 2)
        return Step(
            "{m}(x)",
            out,
            flops,
            FP32 * (numel(shape) + numel(out)),
            module=make.format(cfg=cfg, d=d, inner=inner),
            imports=(f"from {module_path} import {config_class}, {make.split('(')[0]}",),
        )

    return step


def _rms_block(module_path: str, name: str) -> Callable[[Shape, random.Random], Step]:
    def step(shape: Shape, rng: random.Random) -> Step:
        return Step(
            "{m}(x)",
            shape,
            *_elementwise(shape, 5),
            module=f"{name}({shape[-1]}, eps=1e-6)",
            imports=(f"from {module_path} import {name}",),
        )

    return step


TRANSFORMERS = ("transformers",)

OPERATORS: tuple[Operator, ...] = (
    pointwise("relu", "torch.relu(x)"),
    pointwise("gelu", "F.gelu(x)", 8),
    pointwise("gelu_tanh", "F.gelu(x, approximate='tanh')", 8),
    pointwise("silu", "F.silu(x)", 4),
    pointwise("sigmoid", "torch.sigmoid(x)", 4),
    pointwise("tanh", "torch.tanh(x)", 4),
    pointwise("softplus", "F.softplus(x)", 4),
    pointwise("elu", "F.elu(x)", 4),
    pointwise("leaky_relu", "F.leaky_relu(x, 0.01)"),
    pointwise("hardswish", "F.hardswish(x)", 3),
    pointwise("mish", "F.mish(x)", 8),
    pointwise("exp_neg_sq", "torch.exp(-x * x)", 3),
    Operator("scale", "pointwise", LAYOUTS, _scale),
    Operator("clamp", "pointwise", LAYOUTS, _clamp),
    Operator("layer_norm", "norm", (FEATURES, SEQUENCE), _layer_norm),
    Operator("rms_norm", "norm", (FEATURES, SEQUENCE), _rms_norm),
    Operator("batch_norm", "norm", (FEATURES, IMAGE), _batch_norm),
    Operator("group_norm", "norm", (IMAGE,), _group_norm),
    Operator("instance_norm", "norm", (IMAGE,), _instance_norm),
    Operator("softmax", "softmax", LAYOUTS, _softmax(log=False)),
    Operator("log_softmax", "softmax", (FEATURES, SEQUENCE), _softmax(log=True)),
    Operator("linear", "matmul", (FEATURES, SEQUENCE), _linear),
    Operator("matmul", "matmul", (FEATURES, SEQUENCE), _matmul_weight),
    Operator("conv2d", "conv", (IMAGE,), _conv),
    Operator("max_pool2d", "pool", (IMAGE,), _pool("max_pool2d")),
    Operator("avg_pool2d", "pool", (IMAGE,), _pool("avg_pool2d")),
    Operator("flatten", "layout", (IMAGE,), _flatten),
    Operator("global_avg_pool", "layout", (IMAGE,), _global_pool),
    Operator("multihead_attention", "attention", (SEQUENCE,), _attention),
    Operator("sdpa", "attention", (SEQUENCE,), _sdpa),
    Operator("sum", "reduction", LAYOUTS, _reduction("x.sum(dim=-1)"), terminal=True),
    Operator("amax", "reduction", LAYOUTS, _reduction("torch.amax(x, dim=-1)"), terminal=True),
    Operator(
        "logsumexp", "reduction", LAYOUTS, _reduction("torch.logsumexp(x, dim=-1)"), terminal=True
    ),
    Operator(
        "llama_rms_norm",
        "block",
        (SEQUENCE,),
        _rms_block("transformers.models.llama.modeling_llama", "LlamaRMSNorm"),
        needs=TRANSFORMERS,
    ),
    Operator(
        "llama_mlp",
        "block",
        (SEQUENCE,),
        _block(
            "transformers.models.llama.modeling_llama",
            "LlamaConfig",
            "LlamaMLP({cfg})",
            "hidden_size={d}, intermediate_size={inner}, hidden_act='silu'",
        ),
        needs=TRANSFORMERS,
    ),
    Operator(
        "mistral_mlp",
        "block",
        (SEQUENCE,),
        _block(
            "transformers.models.mistral.modeling_mistral",
            "MistralConfig",
            "MistralMLP({cfg})",
            "hidden_size={d}, intermediate_size={inner}, hidden_act='silu'",
        ),
        needs=TRANSFORMERS,
    ),
    Operator(
        "gpt2_mlp",
        "block",
        (SEQUENCE,),
        _block(
            "transformers.models.gpt2.modeling_gpt2",
            "GPT2Config",
            "GPT2MLP({inner}, {cfg})",
            "n_embd={d}, resid_pdrop=0.0",
        ),
        needs=TRANSFORMERS,
    ),
    Operator(
        "bert_intermediate",
        "block",
        (SEQUENCE,),
        _block(
            "transformers.models.bert.modeling_bert",
            "BertConfig",
            "BertIntermediate({cfg})",
            "hidden_size={d}, intermediate_size={inner}, hidden_act='gelu'",
            out_width="inner",
        ),
        needs=TRANSFORMERS,
    ),
    Operator(
        "t5_layer_ff",
        "block",
        (SEQUENCE,),
        _block(
            "transformers.models.t5.modeling_t5",
            "T5Config",
            "T5LayerFF({cfg})",
            "d_model={d}, d_ff={inner}, dropout_rate=0.0",
        ),
        needs=TRANSFORMERS,
    ),
)

BY_NAME = {op.name: op for op in OPERATORS}


def available(with_transformers: bool | None = None) -> tuple[Operator, ...]:
    """The operators whose packages are installed here (found, not imported: the process that
    composes never imports what the problems run). `with_transformers` forces the choice."""
    if with_transformers is None:
        with_transformers = importlib.util.find_spec("transformers") is not None
    return tuple(op for op in OPERATORS if with_transformers or not op.needs)
