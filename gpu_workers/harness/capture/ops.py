"""The op tables of the Graph IR's lowering (docs/fusion.md): which torch functions, tensor
methods and calls lower to which core op, and how a call's arguments bind to names.

A call_function target or a call_method name maps to (kind, the names of its arguments in
positional order, the tensor first); None accepts any arguments (the op ignores them). The kind
names a `_lower_<kind>` method of lowering.Lowering, or is emitted as a unary op when there
is none: a new op is one entry here, plus a lowering method when its arguments need one.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import fx, nn

UNSUPPORTED = "not supported by the fusion compiler"


class Unsupported(Exception):
    """This node cannot be lowered; the message says why."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


_UNARY = ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs", "erf", "sin",
          "cos")  # fmt: skip
# The comparisons, each a core op of its own name (a bool: docs/fusion.md), with their aliases.
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_COMPARISON_NAMES = {**{op: op for op in COMPARISONS}, "greater": "gt", "greater_equal": "ge",
                     "less": "lt", "less_equal": "le", "not_equal": "ne"}  # fmt: skip
_OPERATOR_COMPARISONS = {operator.eq: "eq", operator.ne: "ne", operator.lt: "lt",
                         operator.le: "le", operator.gt: "gt", operator.ge: "ge"}  # fmt: skip
# torch.where(condition, input, other): the condition is bound as "input", the anchor
_WHERE = ("input", "if_true", "if_false")
_REDUCE = ("input", "dim", "keepdim", "dtype")
_MINMAX = ("input", "dim", "keepdim", "other")
_LOSS = ("input", "target", "size_average", "reduce", "reduction")
# the anchor is "input": every call binds its first tensor under that name
_TRIPLET = ("input", "positive", "negative", "margin", "p", "eps", "swap", "size_average", "reduce",
            "reduction")  # fmt: skip
_CROSS_ENTROPY = ("input", "target", "weight", "size_average", "ignore_index", "reduce",
                  "reduction", "label_smoothing")  # fmt: skip
_MAX_POOL = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
_AVG_POOL = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
             "divisor_override")  # fmt: skip
_LIKE = ("input", "dtype", "layout", "device", "requires_grad", "memory_format")
# F.scaled_dot_product_attention(query, key, value, ...): the query is bound as "input"
_ATTENTION = ("input", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _function_table() -> dict[Callable, tuple[str, tuple[str, ...] | None]]:
    table: dict[Callable, tuple[str, tuple[str, ...] | None]] = {}
    for name in _UNARY:
        table[getattr(torch, name)] = (name, ("input",))
    for name, op in _COMPARISON_NAMES.items():
        table[getattr(torch, name)] = (op, ("input", "other"))
    for function, op in _OPERATOR_COMPARISONS.items():
        table[function] = (op, ("input", "other"))
    table.update(
        {
            torch.negative: ("neg", ("input",)),
            torch.absolute: ("abs", ("input",)),
            operator.neg: ("neg", ("input",)),
            operator.abs: ("abs", ("input",)),
            torch.square: ("square", ("input",)),
            F.relu: ("relu", ("input", "inplace")),
            F.sigmoid: ("sigmoid", ("input",)),
            F.tanh: ("tanh", ("input",)),
            F.gelu: ("gelu", ("input", "approximate")),
            F.silu: ("silu", ("input", "inplace")),
            F.softplus: ("softplus", ("input", "beta", "threshold")),
            F.leaky_relu: ("leaky_relu", ("input", "negative_slope", "inplace")),
            F.elu: ("elu", ("input", "alpha", "inplace")),
            F.hardtanh: ("hardtanh", ("input", "min_val", "max_val", "inplace")),
            F.relu6: ("relu6", ("input", "inplace")),
            torch.selu: ("selu", ("input",)),
            F.selu: ("selu", ("input", "inplace")),
            torch.celu: ("celu", ("input", "alpha")),
            F.celu: ("celu", ("input", "alpha", "inplace")),
            F.hardsigmoid: ("hardsigmoid", ("input", "inplace")),
            F.hardswish: ("hardswish", ("input", "inplace")),
            F.mish: ("mish", ("input", "inplace")),
            F.softsign: ("softsign", ("input",)),
            F.logsigmoid: ("logsigmoid", ("input",)),
            torch.clamp: ("clamp", ("input", "min", "max")),
            torch.clip: ("clamp", ("input", "min", "max")),
            torch.clamp_min: ("clamp_min", ("input", "min")),
            torch.clamp_max: ("clamp_max", ("input", "max")),
            torch.add: ("add", ("input", "other", "alpha")),
            operator.add: ("add", ("input", "other")),
            torch.sub: ("sub", ("input", "other", "alpha")),
            torch.subtract: ("sub", ("input", "other", "alpha")),
            operator.sub: ("sub", ("input", "other")),
            torch.rsub: ("rsub", ("input", "other", "alpha")),
            torch.mul: ("mul", ("input", "other")),
            torch.multiply: ("mul", ("input", "other")),
            operator.mul: ("mul", ("input", "other")),
            torch.div: ("div", ("input", "other", "rounding_mode")),
            torch.divide: ("div", ("input", "other", "rounding_mode")),
            torch.true_divide: ("div", ("input", "other")),
            operator.truediv: ("div", ("input", "other")),
            torch.pow: ("pow", ("input", "exponent")),
            operator.pow: ("pow", ("input", "exponent")),
            torch.maximum: ("maximum", ("input", "other")),
            torch.minimum: ("minimum", ("input", "other")),
            torch.sum: ("sum", _REDUCE),
            torch.mean: ("mean", _REDUCE),
            torch.prod: ("prod", _REDUCE),
            torch.logsumexp: ("logsumexp", ("input", "dim", "keepdim")),
            torch.cumsum: ("cumsum", ("input", "dim", "dtype", "out")),
            torch.cumprod: ("cumprod", ("input", "dim", "dtype", "out")),
            torch.flip: ("flip", ("input", "dims")),
            torch.narrow: ("narrow", ("input", "dim", "start", "length")),
            torch.zeros_like: ("zeros_like", _LIKE),
            torch.ones_like: ("ones_like", _LIKE),
            torch.full_like: ("full_like", None),
            torch.tensor: ("new_tensor", None),
            torch.full: ("full", None),
            torch.ones: ("ones", None),
            torch.zeros: ("zeros", None),
            torch.arange: ("arange", None),
            torch.eye: ("eye", None),
            torch.cat: ("cat", ("input", "dim")),
            torch.concat: ("cat", ("input", "dim")),
            torch.stack: ("stack", ("input", "dim")),
            torch.split: ("split", ("input", "split_size_or_sections", "dim")),
            torch.chunk: ("chunk", ("input", "chunks", "dim")),
            torch.argmax: ("argmax", ("input", "dim", "keepdim")),
            torch.argmin: ("argmin", ("input", "dim", "keepdim")),
            F.max_pool1d: ("max_pool1d", _MAX_POOL),
            F.max_pool2d: ("max_pool2d", _MAX_POOL),
            F.max_pool3d: ("max_pool3d", _MAX_POOL),
            F.avg_pool1d: ("avg_pool1d", _AVG_POOL[:-1]),
            F.avg_pool2d: ("avg_pool2d", _AVG_POOL),
            F.avg_pool3d: ("avg_pool3d", _AVG_POOL),
            F.adaptive_avg_pool1d: ("adaptive_avg_pool1d", ("input", "output_size")),
            F.adaptive_avg_pool2d: ("adaptive_avg_pool2d", ("input", "output_size")),
            F.adaptive_avg_pool3d: ("adaptive_avg_pool3d", ("input", "output_size")),
            F.cross_entropy: ("cross_entropy", _CROSS_ENTROPY),
            torch.norm: ("norm", ("input", "p", "dim", "keepdim", "out", "dtype")),
            torch.linalg.vector_norm: ("vector_norm", ("input", "ord", "dim", "keepdim", "dtype")),
            torch.linalg.norm: ("linalg_norm", ("input", "ord", "dim", "keepdim", "dtype")),
            F.normalize: ("normalize", ("input", "p", "dim", "eps", "out")),
            F.mse_loss: ("mse_loss", _LOSS + ("weight",)),
            F.l1_loss: ("l1_loss", _LOSS + ("weight",)),
            F.smooth_l1_loss: ("smooth_l1_loss", _LOSS + ("beta",)),
            F.huber_loss: ("huber_loss", ("input", "target", "reduction", "delta", "weight")),
            F.kl_div: ("kl_div", _LOSS + ("log_target",)),
            F.cosine_similarity: ("cosine_similarity", ("input", "x2", "dim", "eps")),
            F.triplet_margin_loss: ("triplet_margin_loss", _TRIPLET),
            torch.amax: ("amax", ("input", "dim", "keepdim")),
            torch.amin: ("amin", ("input", "dim", "keepdim")),
            torch.max: ("max", _MINMAX),
            torch.min: ("min", _MINMAX),
            torch.softmax: ("softmax", ("input", "dim", "dtype")),
            F.softmax: ("softmax", ("input", "dim", "_stacklevel", "dtype")),
            torch.log_softmax: ("log_softmax", ("input", "dim", "dtype")),
            F.log_softmax: ("log_softmax", ("input", "dim", "_stacklevel", "dtype")),
            F.layer_norm: ("layer_norm", ("input", "normalized_shape", "weight", "bias", "eps")),
            F.linear: ("linear", ("input", "weight", "bias")),
            torch.matmul: ("matmul", ("input", "other")),
            operator.matmul: ("matmul", ("input", "other")),
            torch.mm: ("mm", ("input", "mat2")),
            torch.bmm: ("bmm", ("input", "mat2")),
            torch.einsum: ("einsum", None),
            F.scaled_dot_product_attention: ("scaled_dot_product_attention", _ATTENTION),
            torch.reshape: ("reshape", None),
            torch.flatten: ("reshape", None),
            torch.unsqueeze: ("reshape", None),
            torch.squeeze: ("reshape", None),
            torch.clone: ("identity", ("input", "memory_format")),
            torch.detach: ("identity", ("input",)),
            F.dropout: ("dropout", ("input", "p", "training", "inplace")),
            torch.t: ("transpose", None),
            torch.where: ("where", _WHERE),
            torch.masked_fill: ("masked_fill", ("input", "mask", "value")),
            torch.logical_not: ("logical_not", ("input",)),
            operator.invert: ("invert", ("input",)),
            torch.tril: ("triangle", ("input", "diagonal", "out")),
            torch.triu: ("triangle", ("input", "diagonal", "out")),
            torch.transpose: ("transpose", None),
            torch.permute: ("transpose", None),
            torch.swapaxes: ("transpose", None),
            torch.swapdims: ("transpose", None),
            operator.getitem: ("getitem", ("input", "index")),
            builtins.getattr: ("getattr", ("input", "name")),
        }
    )
    if hasattr(F, "rms_norm"):
        table[F.rms_norm] = ("rms_norm", ("input", "normalized_shape", "weight", "eps"))
    return table


def _method_table() -> dict[str, tuple[str, tuple[str, ...] | None]]:
    table: dict[str, tuple[str, tuple[str, ...] | None]] = {
        name: (name, ("input",)) for name in _UNARY
    }
    for name, op in _COMPARISON_NAMES.items():
        table[name] = (op, ("input", "other"))
    table.update(
        {
            "masked_fill": ("masked_fill", ("input", "mask", "value")),
            "logical_not": ("logical_not", ("input",)),
            "bool": ("convert", ("input", "memory_format")),
            "negative": ("neg", ("input",)),
            "absolute": ("abs", ("input",)),
            "square": ("square", ("input",)),
            "clamp": ("clamp", ("input", "min", "max")),
            "clip": ("clamp", ("input", "min", "max")),
            "clamp_min": ("clamp_min", ("input", "min")),
            "clamp_max": ("clamp_max", ("input", "max")),
            "add": ("add", ("input", "other", "alpha")),
            "sub": ("sub", ("input", "other", "alpha")),
            "subtract": ("sub", ("input", "other", "alpha")),
            "mul": ("mul", ("input", "other")),
            "multiply": ("mul", ("input", "other")),
            "div": ("div", ("input", "other", "rounding_mode")),
            "divide": ("div", ("input", "other", "rounding_mode")),
            "true_divide": ("div", ("input", "other")),
            "pow": ("pow", ("input", "exponent")),
            "maximum": ("maximum", ("input", "other")),
            "minimum": ("minimum", ("input", "other")),
            "sum": ("sum", _REDUCE),
            "mean": ("mean", _REDUCE),
            "prod": ("prod", _REDUCE),
            "logsumexp": ("logsumexp", ("input", "dim", "keepdim")),
            "cumsum": ("cumsum", ("input", "dim", "dtype")),
            "cumprod": ("cumprod", ("input", "dim", "dtype")),
            "flip": ("flip", ("input", "dims")),
            "narrow": ("narrow", ("input", "dim", "start", "length")),
            "split": ("split", ("input", "split_size", "dim")),
            "chunk": ("chunk", ("input", "chunks", "dim")),
            "argmax": ("argmax", ("input", "dim", "keepdim")),
            "argmin": ("argmin", ("input", "dim", "keepdim")),
            "norm": ("norm", ("input", "p", "dim", "keepdim", "dtype")),
            "amax": ("amax", ("input", "dim", "keepdim")),
            "amin": ("amin", ("input", "dim", "keepdim")),
            "max": ("max", _MINMAX),
            "min": ("min", _MINMAX),
            "softmax": ("softmax", ("input", "dim", "dtype")),
            "log_softmax": ("log_softmax", ("input", "dim", "dtype")),
            "matmul": ("matmul", ("input", "other")),
            "mm": ("mm", ("input", "mat2")),
            "bmm": ("bmm", ("input", "mat2")),
            "contiguous": ("identity", ("input", "memory_format")),
            "clone": ("identity", ("input", "memory_format")),
            "detach": ("identity", ("input",)),
            "float": ("convert", ("input", "memory_format")),
            "to": ("convert", None),
            "type_as": ("convert", ("input", "other")),
            "t": ("transpose", None),
            "tril": ("triangle", ("input", "diagonal")),
            "triu": ("triangle", ("input", "diagonal")),
            "transpose": ("transpose", None),
            "permute": ("transpose", None),
            "swapaxes": ("transpose", None),
            "swapdims": ("transpose", None),
            "size": ("static", None),
            "dim": ("static", None),
            "numel": ("static", None),
        }
    )
    for name in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "view_as", "reshape_as"):
        table[name] = ("reshape", None)
    return table


FUNCTIONS = _function_table()
METHODS = _method_table()
CONVOLUTIONS = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)
# Calls that read only their operand's shape: what computes the operand need not lower.
SHAPE_ONLY = {torch.zeros_like, torch.ones_like, torch.full_like}
# Calls whose result may share storage with their input: an in-place op on the result mutates it.
VIEWS = {
    "view", "reshape", "flatten", "unsqueeze", "squeeze", "t", "transpose", "permute", "swapaxes",
    "swapdims",
}  # fmt: skip


def is_scalar_input(value) -> bool:
    """A Python number passed to forward (KernelBench's `A * s`): an input the kernels read by
    value, never a constant (get_inputs() may draw another one for every seed)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def method_entry(name) -> tuple[str, tuple[str, ...] | None] | None:
    if not isinstance(name, str):
        return None
    if name in METHODS:
        return METHODS[name]
    if is_inplace_name(name):  # relu_, mul_, ...: lowered as the op, if nothing reads the input
        return METHODS.get(name[:-1])
    return None


def is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_")


def bind(node: fx.Node, names: tuple[str, ...] | None) -> dict:
    """The call's arguments by name (positional ones in order); unknown ones are unsupported."""
    if names is None:
        return {"input": node.args[0] if node.args else node.kwargs.get("input")}
    if len(node.args) > len(names):
        raise Unsupported(f"called with {len(node.args)} positional arguments")
    bound = dict(zip(names, node.args, strict=False))
    for key, value in node.kwargs.items():
        if key not in names or key in bound:
            raise Unsupported(f"unexpected argument {key}=")
        bound[key] = value
    if "input" not in bound:
        raise Unsupported("called without its tensor argument")
    return bound


# nn.Modules called like their functional: (class, kind, tensor arguments, module attributes
# passed as the functional's arguments of the same name)
MODULE_CALLS: list[tuple[type, str, tuple[str, ...], tuple[str, ...]]] = [
    (nn.MSELoss, "mse_loss", ("input", "target"), ("reduction",)),
    (nn.L1Loss, "l1_loss", ("input", "target"), ("reduction",)),
    (nn.SmoothL1Loss, "smooth_l1_loss", ("input", "target"), ("reduction", "beta")),
    (nn.HuberLoss, "huber_loss", ("input", "target"), ("reduction", "delta")),
    (nn.KLDivLoss, "kl_div", ("input", "target"), ("reduction", "log_target")),
    (nn.CosineSimilarity, "cosine_similarity", ("input", "x2"), ("dim", "eps")),
    (
        nn.TripletMarginLoss,
        "triplet_margin_loss",
        ("input", "positive", "negative"),
        ("margin", "p", "eps", "swap", "reduction"),
    ),
    (
        nn.CrossEntropyLoss,
        "cross_entropy",
        ("input", "target"),
        ("weight", "ignore_index", "reduction", "label_smoothing"),
    ),
    (nn.MaxPool1d, "max_pool1d", ("input",), _MAX_POOL[1:]),
    (nn.MaxPool2d, "max_pool2d", ("input",), _MAX_POOL[1:]),
    (nn.MaxPool3d, "max_pool3d", ("input",), _MAX_POOL[1:]),
    (nn.AvgPool1d, "avg_pool1d", ("input",), _AVG_POOL[1:-1]),
    (nn.AvgPool2d, "avg_pool2d", ("input",), _AVG_POOL[1:]),
    (nn.AvgPool3d, "avg_pool3d", ("input",), _AVG_POOL[1:]),
    (nn.AdaptiveAvgPool1d, "adaptive_avg_pool1d", ("input",), ("output_size",)),
    (nn.AdaptiveAvgPool2d, "adaptive_avg_pool2d", ("input",), ("output_size",)),
    (nn.AdaptiveAvgPool3d, "adaptive_avg_pool3d", ("input",), ("output_size",)),
]


def module_call(module: nn.Module) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    for cls, kind, tensors, attributes in MODULE_CALLS:
        if isinstance(module, cls):
            return kind, tensors, attributes
    return None
