"""Lowering a traced, shape-propagated fx graph to the Graph IR's nodes (docs/fusion.md).

`Lowering.run` walks the nodes the outputs depend on, in order; each call is looked up in the
op tables (ops) and handled by its `_lower_<kind>` method, each nn.Module by its entry in
MODULES below. What cannot be lowered is reported once, with the reason, and whatever depends on
it is skipped.
"""

from __future__ import annotations

import builtins
import operator
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import fx, nn

from gpu_workers.harness.capture.contractions import ContractionLowering
from gpu_workers.harness.capture.convolutions import conv_module
from gpu_workers.harness.capture.factories import FILL_HELD, FactoryLowering
from gpu_workers.harness.capture.losses import LossLowering
from gpu_workers.harness.capture.norms import NormLowering
from gpu_workers.harness.capture.ops import (
    COMPARISONS,
    CONVOLUTIONS,
    FUNCTIONS,
    SHAPE_ONLY,
    UNSUPPORTED,
    VIEWS,
    Unsupported,
    bind,
    dtype_name,
    is_inplace_name,
    is_scalar_input,
    method_entry,
    module_call,
)
from gpu_workers.harness.capture.pooling import PoolLowering
from gpu_workers.harness.capture.scans import HELD, Deferred, ScanLowering
from gpu_workers.harness.capture.slicing import SliceLowering

_NUMBER = (int, float)
# Ops whose result may be other than float32: argmax / argmin's int64, a view of a mask or index.
_OTHER_DTYPES = {"argmax": ("int64",), "argmin": ("int64",), "reshape": ("int64", "bool"),
                 "identity": ("int64", "bool"), "logical_not": ("bool",), "arange": ("int64",),
                 "eye": ("int64", "bool"),
                 **dict.fromkeys(COMPARISONS, ("bool",))}  # fmt: skip
_STATIC_ATTRIBUTES = ("shape", "ndim", "dtype", "device", "is_cuda")
# Python's own arithmetic on sizes (x.size(-1) * 2, math.sqrt(d)): a value known at capture.
_STATIC_MODULES = ("_operator", "operator", "builtins", "math")


class _Skip(Exception):
    """This node depends on one already reported: skip it without a second entry."""


class Lowering(
    NormLowering,
    LossLowering,
    ScanLowering,
    PoolLowering,
    ContractionLowering,
    FactoryLowering,
    SliceLowering,
):
    def __init__(
        self,
        traced: fx.GraphModule,
        model: nn.Module,
        values: dict[fx.Node, object],
        input_count: int,
        unsupported: list[str],
    ):
        self.traced = traced
        self.model = model
        self.values = values
        self.state_keys = set(model.state_dict(keep_vars=True))
        self.unsupported = unsupported
        self.nodes: list[dict] = []
        self.refs: dict[fx.Node, dict] = {}  # a lowered node's reference
        self.static: dict[fx.Node, object] = {}  # nodes with a value known at capture
        self.pending: dict[fx.Node, tuple[str, fx.Node, dict]] = {}  # max(x, dim): its values
        self.deferred: dict[fx.Node, Deferred] = {}  # flips and fills a scan lowers (scans)
        self.splits: dict[fx.Node, tuple] = {}  # split / chunk: their pieces' slices (slicing)
        self.transposed: dict[fx.Node, str] = {}  # w.t() of a 2-D parameter, for x @ w.t()
        self.skipped: set[fx.Node] = set()
        self.order = {node: i for i, node in enumerate(traced.graph.nodes)}
        self.input_count = input_count

    # ---- the walk ----
    def run(self) -> tuple[list[dict], list[dict]]:
        live = self._live()
        placeholders = 0
        for node in self.traced.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "output":
                return self.nodes, self._outputs(node)
            else:
                mutated = self._mutated(node)
                if mutated is not None and self._used_after(mutated, node):
                    self._report(node, f"in-place on {mutated.name}, which is used afterwards")
                elif node in live:
                    self._visit(node)
        return self.nodes, []

    def _live(self) -> set[fx.Node]:
        """The nodes the outputs depend on; fx keeps dead code, the IR does not."""
        output = next(n for n in self.traced.graph.nodes if n.op == "output")
        live, stack = set(), [output]
        while stack:
            node = stack.pop()
            if node not in live:
                live.add(node)
                if not (node.op == "call_function" and node.target in SHAPE_ONLY):
                    stack.extend(node.all_input_nodes)
        return live

    def _visit(self, node: fx.Node) -> None:
        if any(arg in self.skipped for arg in node.all_input_nodes):
            self.skipped.add(node)  # a consequence of an op already reported
            reason = self._unknown(node)
            if reason:
                self.unsupported.append(f"{_describe(node, self.model)}: {reason}")
            return
        try:
            if self._is_static(node):
                self.static[node] = self.values[node]
            elif node.op == "get_attr":
                self._get_attr(node)
            elif node.op == "call_module":
                self._call_module(node)
            else:
                self._call(node)
        except Unsupported as exc:
            self._report(node, str(exc))
        except KeyError as exc:  # a required argument under a name the tables do not know
            self._report(node, f"missing argument {exc}")
        except _Skip:
            self.skipped.add(node)

    def _report(self, node: fx.Node, reason: str) -> None:
        self.skipped.add(node)
        self.unsupported.append(f"{_describe(node, self.model)}: {reason}")

    def _unknown(self, node: fx.Node) -> str | None:
        """Why an op is unsupported whatever its operands, or None if it might lower."""
        if node.op == "call_module":
            module = self.traced.get_submodule(node.target)
            known = _module_lowering(module) or module_call(module)
            return None if known else UNSUPPORTED
        if node.op == "call_function" and node.target not in FUNCTIONS:
            # arithmetic on sizes is static where its operands are: only theirs is the reason
            static = getattr(node.target, "__module__", None) in _STATIC_MODULES
            return None if static else UNSUPPORTED
        if node.op == "call_method" and method_entry(node.target) is None:
            return UNSUPPORTED
        return None

    def _is_static(self, node: fx.Node) -> bool:
        """A Python value computed from shapes only (x.size(1), x.shape[-1] * 2, ...)."""
        if node not in self.values:
            return False
        if node.op == "call_method":
            return node.target in ("size", "dim", "numel")
        if node.op != "call_function":
            return False
        inputs = node.all_input_nodes
        if node.target is torch.ops.aten.sym_size.int:  # TorchDynamo's x.size(d)
            return True
        if node.target is builtins.getattr:
            return node.args[1] in _STATIC_ATTRIBUTES
        module = getattr(node.target, "__module__", None)
        return bool(inputs) and module in _STATIC_MODULES and all(n in self.static for n in inputs)

    def _placeholder(self, node: fx.Node, index: int) -> None:
        number = index < self.input_count and is_scalar_input(self.values.get(node))
        if index < self.input_count and "tensor_meta" in node.meta or number:
            self.refs[node] = {"input": str(node.target).lstrip("*")}
        elif node in self.values:  # a Python input (already reported) or a forward default
            self.static[node] = self.values[node]

    def _outputs(self, node: fx.Node) -> list[dict]:
        outputs = []
        for value in _flat(node.args[0]):
            if isinstance(value, fx.Node) and value in self.refs:
                outputs.append(self.refs[value])
            elif isinstance(value, fx.Node) and value in self.skipped:
                continue  # already reported
            elif isinstance(value, fx.Node) and value in self.pending:
                self._report(value, "returns values and indices; only its values ([0]) lower")
            elif isinstance(value, fx.Node) and value in self.transposed:
                outputs.append(self._weight_permuted(value))
            elif isinstance(value, fx.Node) and value in self.deferred:
                what = self.deferred[value].what
                self._report(value, FILL_HELD if what == "fill" else f"{what} {HELD}")
            else:
                name = value.name if isinstance(value, fx.Node) else repr(value)
                self.unsupported.append(f"output {name}: not a tensor the fusion compiler makes")
        return outputs

    # ---- in-place ops ----
    def _mutated(self, node: fx.Node) -> fx.Node | None:
        """The node an in-place op writes to, or None."""
        first = node.args[0] if node.args else None
        if not isinstance(first, fx.Node):
            return None
        if node.op == "call_method" and is_inplace_name(node.target):
            return first
        if node.op == "call_module":
            module = self.traced.get_submodule(node.target)
            return first if getattr(module, "inplace", False) else None
        if node.op == "call_function":
            if is_inplace_name(getattr(node.target, "__name__", "")):
                return first
            entry = FUNCTIONS.get(node.target)
            if entry and entry[1] and "inplace" in entry[1]:
                position = entry[1].index("inplace")
                flag = node.args[position] if len(node.args) > position else None
                return first if node.kwargs.get("inplace", flag) else None
        return None

    def _used_after(self, mutated: fx.Node, node: fx.Node) -> bool:
        """Whether anything reads `mutated` (or what it is a view of) after `node` writes it;
        a parameter or buffer written in forward counts: it changes the next call."""
        position, seen, stack = self.order[node], set(), [mutated]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if current.op == "get_attr":
                return True
            if any(self.order[user] > position for user in current.users if user is not node):
                return True
            if current.op in ("call_method", "call_function") and current.args:
                name = current.target if current.op == "call_method" else ""
                name = name or getattr(current.target, "__name__", "")
                if name in VIEWS or name in ("getitem", "contiguous"):
                    source = current.args[0]
                    if isinstance(source, fx.Node):
                        stack.append(source)
        return False

    # ---- references ----
    def _ref(self, value) -> dict | None:
        if value is None:
            return None
        if isinstance(value, fx.Node):
            if value in self.refs:
                return self.refs[value]
            if value in self.static:
                return self._const(self.static[value])
            if value in self.transposed:  # w.t() used other than as x @ w.t()
                return self._weight_permuted(value)
            if value in self.pending:
                self._report(value, "returns values and indices; only its values ([0]) lower")
                del self.pending[value]
                raise _Skip
            if value in self.deferred:
                if self.deferred[value].what == "fill":  # a constant operand, as it broadcasts
                    return self._const(self.deferred[value].fill)
                self._report(value, f"{self.deferred.pop(value).what} {HELD}")
                raise _Skip
            raise _Skip
        return self._const(value)

    def _tensor(self, value) -> dict:
        ref = self._ref(value)
        if ref is not None and "const" in ref and value in self.deferred:
            raise Unsupported(f"its operand {value.name}: {FILL_HELD}")
        if ref is None or "const" in ref:
            raise Unsupported(f"expected a tensor, got {value!r}")
        return ref

    @staticmethod
    def _const(value) -> dict:
        if isinstance(value, bool) or not isinstance(value, _NUMBER):
            raise Unsupported(f"operand {value!r} is neither a tensor nor a number")
        return {"const": value}

    def _value(self, value):
        """A Python argument (dim, eps, ...): a constant, or a value computed from shapes."""
        if isinstance(value, fx.Node):
            if value in self.static:
                return self.static[value]
            raise Unsupported(f"an argument computed from tensor data ({value.name})")
        if isinstance(value, list | tuple):
            return type(value)(self._value(v) for v in value)
        return value

    # ---- emitting ----
    def _emit(
        self,
        node: fx.Node,
        op: str,
        args: list,
        attrs: dict | None = None,
        name: str | None = None,
    ) -> None:
        meta = node.meta.get("tensor_meta")
        if not hasattr(meta, "shape"):
            raise Unsupported("its result is not a single tensor")
        name = name or node.name
        dtype = dtype_name(meta.dtype)
        self.nodes.append(
            {
                "name": name,
                "op": op,
                "args": args,
                "attrs": attrs or {},
                "shape": list(meta.shape),
                "dtype": dtype,
            }
        )
        self.refs[node] = {"node": name}
        if dtype != "float32" and dtype not in _OTHER_DTYPES.get(op, ()):
            self.unsupported.append(
                f"{_describe(node, self.model)}: produces {dtype}; only float32 is supported in v1"
            )

    def _get_attr(self, node: fx.Node) -> None:
        if node.target in self.state_keys:
            self.refs[node] = {"param": node.target}
            return
        if self._folded_constant(node):
            return
        raise Unsupported(
            "a tensor attribute outside the state_dict (a plain tensor or a non-persistent "
            "buffer) is not supported"
        )

    # ---- call_function and call_method ----
    def _call(self, node: fx.Node) -> None:
        if node.op == "call_function":
            entry = FUNCTIONS.get(node.target)
        else:
            entry = method_entry(node.target)
        if entry is None:
            raise Unsupported(UNSUPPORTED)
        kind, names = entry
        bound = bind(node, names)
        handler = getattr(self, f"_lower_{kind}", None)
        if handler is not None:
            handler(node, bound)
        elif kind in COMPARISONS:
            self._binary(node, kind, bound["input"], bound["other"])
        else:
            self._lower_unary(node, kind, bound)

    def _lower_unary(self, node: fx.Node, op: str, bound: dict) -> None:
        self._emit(node, op, [self._tensor(bound["input"])])

    def _lower_square(self, node: fx.Node, bound: dict) -> None:
        self._emit(node, "pow", [self._tensor(bound["input"]), {"const": 2}])

    def _lower_gelu(self, node: fx.Node, bound: dict) -> None:
        self._gelu(node, bound["input"], self._value(bound.get("approximate", "none")))

    def _gelu(self, node: fx.Node, x, approximate: str) -> None:
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"gelu approximate={approximate!r} is {UNSUPPORTED}")
        self._emit(node, "gelu", [self._tensor(x)], {"approximate": approximate})

    def _lower_silu(self, node: fx.Node, bound: dict) -> None:
        self._emit(node, "silu", [self._tensor(bound["input"])])

    def _lower_softplus(self, node: fx.Node, bound: dict) -> None:
        beta = self._value(bound.get("beta", 1))
        threshold = self._value(bound.get("threshold", 20))
        self._softplus(node, bound["input"], beta, threshold)

    def _softplus(self, node: fx.Node, x, beta, threshold) -> None:
        if beta != 1 or threshold != 20:
            raise Unsupported(f"softplus with beta != 1 or threshold != 20 is {UNSUPPORTED}")
        self._emit(node, "softplus", [self._tensor(x)])

    def _lower_leaky_relu(self, node: fx.Node, bound: dict) -> None:
        slope = float(self._value(bound.get("negative_slope", 0.01)))
        self._emit(node, "leaky_relu", [self._tensor(bound["input"])], {"negative_slope": slope})

    def _lower_elu(self, node: fx.Node, bound: dict) -> None:
        alpha = float(self._value(bound.get("alpha", 1.0)))
        self._emit(node, "elu", [self._tensor(bound["input"])], {"alpha": alpha})

    def _lower_hardtanh(self, node: fx.Node, bound: dict) -> None:
        low = self._value(bound.get("min_val", -1.0))
        high = self._value(bound.get("max_val", 1.0))
        self._hardtanh(node, bound["input"], low, high)

    def _lower_celu(self, node: fx.Node, bound: dict) -> None:
        alpha = float(self._value(bound.get("alpha", 1.0)))
        self._emit(node, "celu", [self._tensor(bound["input"])], {"alpha": alpha})

    def _lower_relu6(self, node: fx.Node, bound: dict) -> None:
        self._hardtanh(node, bound["input"], 0.0, 6.0)

    def _hardtanh(self, node: fx.Node, x, low, high) -> None:
        attrs = {"min": float(low), "max": float(high)}
        self._emit(node, "hardtanh", [self._tensor(x)], attrs)

    def _lower_clamp(self, node: fx.Node, bound: dict) -> None:
        low, high = self._bound_value(bound, "min"), self._bound_value(bound, "max")
        self._emit(node, "clamp", [self._tensor(bound["input"])], {"min": low, "max": high})

    def _lower_clamp_min(self, node: fx.Node, bound: dict) -> None:
        attrs = {"min": self._bound_value(bound, "min"), "max": None}
        self._emit(node, "clamp", [self._tensor(bound["input"])], attrs)

    def _lower_clamp_max(self, node: fx.Node, bound: dict) -> None:
        attrs = {"min": None, "max": self._bound_value(bound, "max")}
        self._emit(node, "clamp", [self._tensor(bound["input"])], attrs)

    def _bound_value(self, bound: dict, key: str):
        value = bound.get(key)
        if isinstance(value, fx.Node) and value not in self.static:
            raise Unsupported(f"clamp with a tensor {key} is {UNSUPPORTED}")
        value = self._value(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, _NUMBER)):
            raise Unsupported(f"clamp {key}={value!r} is not a number")
        return value

    def _lower_add(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "add", bound["input"], bound["other"], bound.get("alpha", 1))

    def _lower_sub(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "sub", bound["input"], bound["other"], bound.get("alpha", 1))

    def _lower_rsub(self, node: fx.Node, bound: dict) -> None:
        # torch.rsub(x, y, alpha) = y - alpha * x: kept in the order it computes
        self._binary(node, "sub", bound["other"], bound["input"], bound.get("alpha", 1))

    def _binary(self, node: fx.Node, op: str, a, b, alpha=None) -> None:
        args = [self._ref(a), self._ref(b)]
        attrs = {}
        if op in ("add", "sub"):
            attrs["alpha"] = self._value(alpha)
            if isinstance(attrs["alpha"], bool) or not isinstance(attrs["alpha"], _NUMBER):
                raise Unsupported(f"alpha={attrs['alpha']!r} is not a number")
        self._emit(node, op, args, attrs)

    def _lower_mul(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "mul", bound["input"], bound["other"])

    def _lower_div(self, node: fx.Node, bound: dict) -> None:
        if self._value(bound.get("rounding_mode")) is not None:
            raise Unsupported(f"division with a rounding_mode is {UNSUPPORTED}")
        self._binary(node, "div", bound["input"], bound["other"])

    def _lower_pow(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "pow", bound["input"], bound["exponent"])

    def _lower_maximum(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "maximum", bound["input"], bound["other"])

    def _lower_minimum(self, node: fx.Node, bound: dict) -> None:
        self._binary(node, "minimum", bound["input"], bound["other"])

    def _lower_sum(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "sum", bound)

    def _lower_mean(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "mean", bound)

    def _lower_prod(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "prod", bound)

    def _lower_logsumexp(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "logsumexp", bound)

    def _lower_argmax(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "argmax", bound)

    def _lower_argmin(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "argmin", bound)

    def _lower_amax(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "amax", bound)

    def _lower_amin(self, node: fx.Node, bound: dict) -> None:
        self._reduce(node, "amin", bound)

    def _reduce(self, node: fx.Node, op: str, bound: dict) -> None:
        self._float32_only(bound.get("dtype"))
        x = bound["input"]
        dims = self._value(bound.get("dim"))
        keepdim = bool(self._value(bound.get("keepdim", False)))
        attrs = {"dim": self._dims(x, dims), "keepdim": keepdim}
        self._emit(node, op, [self._tensor(x)], attrs)

    def _dims(self, x: fx.Node, dims) -> list[int]:
        """Non-negative and sorted; None or an empty list means every dim."""
        ndim = _ndim(x)
        if dims is None or (isinstance(dims, list | tuple) and not dims):
            return list(range(ndim))
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if not isinstance(dims, list | tuple) or not all(isinstance(d, int) for d in dims):
            raise Unsupported(f"dim={dims!r} is not an int or a list of ints")
        return sorted({_normalise(d, ndim) for d in dims})

    def _lower_max(self, node: fx.Node, bound: dict) -> None:
        self._minmax(node, bound, "amax", "maximum")

    def _lower_min(self, node: fx.Node, bound: dict) -> None:
        self._minmax(node, bound, "amin", "minimum")

    def _minmax(self, node: fx.Node, bound: dict, reduce: str, binary: str) -> None:
        other = bound.get("other", bound.get("dim"))
        if isinstance(other, fx.Node) and other not in self.static:  # max(x, y): elementwise
            if "keepdim" in bound:
                raise Unsupported("unexpected keepdim for an elementwise max or min")
            self._binary(node, binary, bound["input"], other)
        elif "dim" in bound:  # (values, indices): values lower at getitem 0
            dims = self._dims(bound["input"], self._value(bound["dim"]))
            keepdim = bool(self._value(bound.get("keepdim", False)))
            self._tensor(bound["input"])
            self.pending[node] = (reduce, bound["input"], {"dim": dims, "keepdim": keepdim})
        else:  # max(x): over every dim
            self._reduce(node, reduce, bound)

    def _lower_softmax(self, node: fx.Node, bound: dict) -> None:
        self._row(node, "softmax", bound["input"], self._value(bound.get("dim")), bound)

    def _lower_log_softmax(self, node: fx.Node, bound: dict) -> None:
        self._row(node, "log_softmax", bound["input"], self._value(bound.get("dim")), bound)

    def _row(self, node: fx.Node, op: str, x, dim, bound: dict | None = None) -> None:
        self._float32_only((bound or {}).get("dtype"))
        if dim is None:
            raise Unsupported(f"{op} without dim (the implicit, deprecated choice) is not lowered")
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise Unsupported(f"dim={dim!r} is not an int")
        self._emit(node, op, [self._tensor(x)], {"dim": _normalise(dim, _ndim(x))})

    def _lower_layer_norm(self, node: fx.Node, bound: dict) -> None:
        shape = self._value(bound["normalized_shape"])
        eps = self._value(bound.get("eps", 1e-5))
        weight, bias = bound.get("weight"), bound.get("bias")
        self._layer_norm(node, bound["input"], shape, self._ref(weight), self._ref(bias), eps)

    def _layer_norm(self, node: fx.Node, x, shape, weight, bias, eps) -> None:
        attrs = {"normalized_shape": _shape_list(shape), "eps": float(eps)}
        self._emit(node, "layer_norm", [self._tensor(x), weight, bias], attrs)

    def _lower_rms_norm(self, node: fx.Node, bound: dict) -> None:
        shape = self._value(bound["normalized_shape"])
        eps = self._value(bound.get("eps"))
        self._rms_norm(node, bound["input"], shape, self._ref(bound.get("weight")), eps)

    def _rms_norm(self, node: fx.Node, x, shape, weight, eps) -> None:
        if eps is None:  # as torch does: the machine epsilon of the input's dtype
            eps = torch.finfo(x.meta["tensor_meta"].dtype).eps
        attrs = {"normalized_shape": _shape_list(shape), "eps": float(eps)}
        self._emit(node, "rms_norm", [self._tensor(x), weight], attrs)

    def _lower_linear(self, node: fx.Node, bound: dict) -> None:
        weight = self._tensor(bound["weight"])
        bias = self._ref(bound.get("bias"))
        self._emit(node, "linear", [self._tensor(bound["input"]), weight, bias])

    def _lower_matmul(self, node: fx.Node, bound: dict) -> None:
        self._matmul(node, "matmul", bound["input"], bound["other"])

    def _lower_mm(self, node: fx.Node, bound: dict) -> None:
        self._matmul(node, "mm", bound["input"], bound["mat2"])

    def _lower_bmm(self, node: fx.Node, bound: dict) -> None:
        self._matmul(node, "bmm", bound["input"], bound["mat2"])

    def _matmul(self, node: fx.Node, op: str, a, b) -> None:
        if op != "bmm" and isinstance(b, fx.Node) and b in self.transposed:
            # x @ w.t() with w a 2-D parameter is linear(x, w) without a bias
            weight = {"param": self.transposed[b]}
            self._emit(node, "linear", [self._tensor(a), weight, None])
            return
        self._emit(node, op, [self._tensor(a), self._tensor(b)])

    def _lower_reshape(self, node: fx.Node, bound: dict) -> None:
        source = node.args[0] if node.args else node.kwargs.get("input")
        shape = list(node.meta["tensor_meta"].shape) if "tensor_meta" in node.meta else None
        self._emit(node, "reshape", [self._tensor(source)], {"shape": shape})

    def _lower_identity(self, node: fx.Node, bound: dict) -> None:
        self._emit(node, "identity", [self._tensor(bound["input"])])

    def _lower_convert(self, node: fx.Node, bound: dict) -> None:
        source = node.args[0] if node.args else node.kwargs.get("input")
        before = _meta_dtype(source)
        after = _meta_dtype(node)
        x = self._tensor(source)
        if (before, after) == ("float32", "float32"):
            self._emit(node, "identity", [x])
        elif (before, after) == ("bool", "float32"):  # a mask as 0.0 and 1.0
            self._emit(node, "where", [x, {"const": 1.0}, {"const": 0.0}])
        elif (before, after) == ("float32", "bool"):
            self._emit(node, "ne", [x, {"const": 0.0}])
        elif (before, after) == ("int64", "float32"):  # an arange's ramp, an index as a number
            self._emit(node, "to_float", [x])
        else:
            raise Unsupported(
                f"converts {before} to {after}; only float32 and bool (and int64 to float32) are "
                "supported"
            )

    def _lower_where(self, node: fx.Node, bound: dict) -> None:
        if "if_true" not in bound or "if_false" not in bound:
            raise Unsupported(f"torch.where with a condition alone (nonzero) is {UNSUPPORTED}")
        refs = [self._ref(bound[k]) for k in ("input", "if_true", "if_false")]
        self._emit(node, "where", refs)

    def _lower_masked_fill(self, node: fx.Node, bound: dict) -> None:
        """x.masked_fill(mask, value): value where the mask holds, else x."""
        refs = [self._ref(bound["mask"]), self._ref(bound["value"]), self._ref(bound["input"])]
        self._emit(node, "where", refs)

    def _lower_invert(self, node: fx.Node, bound: dict) -> None:
        dtype = _meta_dtype(bound["input"])
        if dtype != "bool":
            raise Unsupported(f"~ of a {dtype} tensor (bitwise) is {UNSUPPORTED}")
        self._emit(node, "logical_not", [self._tensor(bound["input"])])

    def _lower_dropout(self, node: fx.Node, bound: dict) -> None:
        p = self._value(bound.get("p", 0.5))
        training = self._value(bound.get("training", True))
        self._dropout(node, bound["input"], p, training)

    def _dropout(self, node: fx.Node, x, p, training) -> None:
        if p and training:
            raise Unsupported(f"dropout with p={p} in training mode is random: {UNSUPPORTED}")
        self._emit(node, "identity", [self._tensor(x)])

    def _lower_transpose(self, node: fx.Node, bound: dict) -> None:
        """x.t(), x.T, x.mT, x.transpose(a, b), x.permute(...): a permute (a copy the planner
        places; the identity permutation is an identity). A 2-D parameter's transpose waits to
        see whether it is x @ w.t() (a linear, no copy)."""
        source = node.args[0] if node.args else node.kwargs.get("input")
        if self._is_weight_transpose(node, source):
            self.transposed[node] = self.refs[source]["param"]
            return
        dims = _permutation(node, _ndim(source), self._value)
        if dims == list(range(len(dims))):
            self._emit(node, "identity", [self._tensor(source)])
            return
        self._emit(node, "permute", [self._tensor(source)], {"dims": dims})

    def _lower_triangle(self, node: fx.Node, bound: dict) -> None:
        """torch.tril / triu (the function or the method): x with the other side of the
        diagonal zeroed, over its last two dims."""
        if bound.get("out") is not None:
            raise Unsupported(f"out= is {UNSUPPORTED}")
        name = node.target if node.op == "call_method" else node.target.__name__
        diagonal = self._value(bound.get("diagonal", 0))
        source = bound["input"]
        fill = self.deferred.get(source) if isinstance(source, fx.Node) else None
        # a fill's triangle (a causal mask made in the forward) is computed from each position
        x = self._ref(source) if fill is not None and fill.what == "fill" else self._tensor(source)
        self._emit(node, name, [x], {"diagonal": int(diagonal)})

    def _weight_permuted(self, node: fx.Node) -> dict:
        """A parameter's w.t() read other than as x @ w.t(): the permute, emitted at first use."""
        weight = self.transposed.pop(node)
        self._emit(node, "permute", [{"param": weight}], {"dims": [1, 0]})
        return self.refs[node]

    def _is_weight_transpose(self, node: fx.Node, source) -> bool:
        """w.t(), w.T, w.transpose(0, 1), w.permute(1, 0) of a 2-D parameter."""
        if not isinstance(source, fx.Node) or "param" not in self.refs.get(source, {}):
            return False
        if _ndim(source) != 2:
            return False
        if node.op == "call_function" and node.target is builtins.getattr:
            return node.args[1] in ("T", "mT")
        name = node.target if node.op == "call_method" else node.target.__name__
        rest = [self._value(a) for a in node.args[1:]] + list(node.kwargs.values())
        if len(rest) == 1 and isinstance(rest[0], list | tuple):
            rest = list(rest[0])
        if name == "t":
            return not rest
        if name == "transpose" and len(rest) == 2:
            return {_normalise(d, 2) for d in rest} == {0, 1}
        return name == "permute" and [_normalise(d, 2) for d in rest] == [1, 0]

    def _lower_getitem(self, node: fx.Node, bound: dict) -> None:
        source = bound["input"]
        if isinstance(source, fx.Node) and source in self.pending:
            index = self._value(bound["index"])
            if index == 0:
                return self._values_of(node, source)
            if index == 1:
                return self._indices_of(node, source)
            raise Unsupported(f"item {index} of {source.name} is {UNSUPPORTED}")
        if isinstance(source, fx.Node) and source in self.splits:
            return self._lower_piece(node, source, self._value(bound["index"]))
        return self._lower_indexing(node, source, bound["index"])

    def _lower_getattr(self, node: fx.Node, bound: dict) -> None:
        source, name = bound["input"], bound["name"]
        if isinstance(source, fx.Node) and source in self.pending:
            if name == "values":
                return self._values_of(node, source)
            if name == "indices":
                return self._indices_of(node, source)
            raise Unsupported(f"the {name} of {source.name} are {UNSUPPORTED}")
        if name in ("T", "mT", "mH", "H"):
            return self._lower_transpose(node, bound)
        raise Unsupported(f"the tensor attribute .{name} is {UNSUPPORTED}")

    def _values_of(self, node: fx.Node, source: fx.Node) -> None:
        """max(x, dim)[0]: the values of a pending max or min, emitted once as amax or amin."""
        done = self.refs.get(source)
        if done is not None:
            self.refs[node] = done
            return
        op, x, attrs = self.pending[source]
        self._emit(node, op, [self._tensor(x)], attrs, name=source.name)
        self.refs[source] = self.refs[node]

    def _indices_of(self, node: fx.Node, source: fx.Node) -> None:
        """max(x, dim)[1]: the indices of a pending max or min, as argmax or argmin."""
        op, x, attrs = self.pending[source]
        self._emit(node, {"amax": "argmax", "amin": "argmin"}[op], [self._tensor(x)], attrs)

    def _lower_static(self, node: fx.Node, bound: dict) -> None:
        raise Unsupported("a size that could not be evaluated")

    def _float32_only(self, dtype) -> None:
        dtype = self._value(dtype)
        if dtype is not None and dtype != torch.float32:
            raise Unsupported(f"dtype={dtype} is not supported; only float32 in v1")

    # ---- call_module ----
    def _call_module(self, node: fx.Node) -> None:
        module = self.traced.get_submodule(node.target)
        call = module_call(module)
        if call is not None:
            return self._call_module_like_functional(node, module, *call)
        lowering = _module_lowering(module)
        if lowering is None:
            raise Unsupported(UNSUPPORTED)
        if len(node.args) != 1 or node.kwargs:
            raise Unsupported("called with more than one argument")
        lowering(self, node, node.args[0], module)

    def _call_module_like_functional(self, node, module, kind, tensors, attributes) -> None:
        if len(node.args) != len(tensors) or node.kwargs:
            raise Unsupported(f"called with other than its {len(tensors)} tensor arguments")
        bound = dict(zip(tensors, node.args, strict=True))
        bound |= {name: getattr(module, name) for name in attributes}
        getattr(self, f"_lower_{kind}")(node, bound)

    def _param(self, node: fx.Node, name: str, module: nn.Module) -> dict | None:
        if getattr(module, name, None) is None:
            return None
        key = f"{node.target}.{name}"
        if key not in self.state_keys:
            raise Unsupported(f"its {name} is not in the state_dict")
        return {"param": key}


def _module_lowering(module: nn.Module) -> Callable | None:
    for cls, lowering in _MODULES:
        if cls is not None and isinstance(module, cls):
            return lowering
    return None


def _simple(op: str) -> Callable:
    def lower_module(lowering: Lowering, node: fx.Node, x, module: nn.Module) -> None:
        lowering._emit(node, op, [lowering._tensor(x)])

    return lower_module


def _linear_module(lowering: Lowering, node: fx.Node, x, module: nn.Module) -> None:
    weight, bias = lowering._param(node, "weight", module), lowering._param(node, "bias", module)
    lowering._emit(node, "linear", [lowering._tensor(x), weight, bias])


def _layer_norm_module(lowering: Lowering, node: fx.Node, x, module: nn.Module) -> None:
    weight, bias = lowering._param(node, "weight", module), lowering._param(node, "bias", module)
    lowering._layer_norm(node, x, module.normalized_shape, weight, bias, module.eps)


def _rms_norm_module(lowering: Lowering, node: fx.Node, x, module: nn.Module) -> None:
    weight = lowering._param(node, "weight", module)
    lowering._rms_norm(node, x, module.normalized_shape, weight, module.eps)


def _flatten_module(lowering: Lowering, node: fx.Node, x, module: nn.Module) -> None:
    lowering._lower_reshape(node, {"input": x})


_MODULES: list[tuple[type | None, Callable]] = [
    (nn.Linear, _linear_module),
    *((cls, conv_module) for cls in CONVOLUTIONS),
    (nn.ReLU, _simple("relu")),
    (nn.Sigmoid, _simple("sigmoid")),
    (nn.Tanh, _simple("tanh")),
    (nn.SiLU, _simple("silu")),
    (nn.Identity, _simple("identity")),
    (nn.SELU, _simple("selu")),
    (nn.Hardsigmoid, _simple("hardsigmoid")),
    (nn.Hardswish, _simple("hardswish")),
    (nn.Mish, _simple("mish")),
    (nn.Softsign, _simple("softsign")),
    (nn.LogSigmoid, _simple("logsigmoid")),
    (nn.ReLU6, lambda lw, node, x, m: lw._hardtanh(node, x, 0.0, 6.0)),
    (
        nn.CELU,
        lambda lw, node, x, m: lw._emit(node, "celu", [lw._tensor(x)], {"alpha": float(m.alpha)}),
    ),
    (nn.GELU, lambda lw, node, x, m: lw._gelu(node, x, m.approximate)),
    (nn.Softplus, lambda lw, node, x, m: lw._softplus(node, x, m.beta, m.threshold)),
    (
        nn.LeakyReLU,
        lambda lw, node, x, m: lw._emit(
            node, "leaky_relu", [lw._tensor(x)], {"negative_slope": float(m.negative_slope)}
        ),
    ),
    (
        nn.ELU,
        lambda lw, node, x, m: lw._emit(node, "elu", [lw._tensor(x)], {"alpha": float(m.alpha)}),
    ),
    (nn.Hardtanh, lambda lw, node, x, m: lw._hardtanh(node, x, m.min_val, m.max_val)),
    (nn.Softmax, lambda lw, node, x, m: lw._row(node, "softmax", x, m.dim)),
    (nn.LogSoftmax, lambda lw, node, x, m: lw._row(node, "log_softmax", x, m.dim)),
    (nn.LayerNorm, _layer_norm_module),
    (getattr(nn, "RMSNorm", None), _rms_norm_module),
    (nn.Dropout, lambda lw, node, x, m: lw._dropout(node, x, m.p, m.training)),
    (nn.Flatten, _flatten_module),
    (nn.BatchNorm1d, lambda lw, node, x, m: lw._batch_norm(node, x, m)),
    (nn.BatchNorm2d, lambda lw, node, x, m: lw._batch_norm(node, x, m)),
    (nn.BatchNorm3d, lambda lw, node, x, m: lw._batch_norm(node, x, m)),
    (nn.InstanceNorm1d, lambda lw, node, x, m: lw._instance_norm(node, x, m)),
    (nn.InstanceNorm2d, lambda lw, node, x, m: lw._instance_norm(node, x, m)),
    (nn.InstanceNorm3d, lambda lw, node, x, m: lw._instance_norm(node, x, m)),
    (nn.GroupNorm, lambda lw, node, x, m: lw._group_norm(node, x, m)),
]


# ---- small helpers ----


def _describe(node: fx.Node, model: nn.Module) -> str:
    if node.op == "call_module":
        cls = type(model.get_submodule(node.target)).__name__
        return f"{_snake(cls)} (call_module {node.target}: {cls})"
    if node.op == "call_function":
        name = getattr(node.target, "__name__", str(node.target))
        if node.target is builtins.getattr and len(node.args) > 1:
            return f"{node.args[1]} (call_function getattr)"
        return f"{name} (call_function {_qualified(node.target)})"
    return f"{node.target} ({node.op} {node.target})"


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).lower()


def _qualified(target) -> str:
    name = getattr(target, "__name__", repr(target))
    for prefix, namespace in (
        ("torch.nn.functional.", F),
        ("torch.", torch),
        ("operator.", operator),
        ("", builtins),
    ):
        if getattr(namespace, name, None) is target:
            return prefix + name
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module else name


def _ndim(node) -> int:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    if not hasattr(meta, "shape"):
        raise Unsupported("its operand is not a tensor")
    return len(meta.shape)


def _meta_dtype(node) -> str | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return dtype_name(meta.dtype) if hasattr(meta, "dtype") else None


def _permutation(node: fx.Node, ndim: int, value) -> list[int]:
    """Which input dim each output dim of a transpose or permute call is (`value` gives the
    Python value of a dims argument)."""
    dims = list(range(ndim))
    if node.op == "call_function" and node.target is builtins.getattr:
        name = node.args[1]
        if name == "T" or (name in ("H",) and ndim == 2):
            return dims[::-1]
        if name in ("mT", "mH") and ndim >= 2:
            dims[-2], dims[-1] = dims[-1], dims[-2]
            return dims
        raise Unsupported(f"the tensor attribute .{name} of a {ndim}-d tensor is {UNSUPPORTED}")
    name = node.target if node.op == "call_method" else node.target.__name__
    keywords = [node.kwargs[k] for k in ("dim0", "dim1", "dims") if k in node.kwargs]
    given = list(node.args[1:]) + keywords
    rest = [value(d) for d in given]
    if len(rest) == 1 and isinstance(rest[0], list | tuple):
        rest = list(rest[0])
    if not all(isinstance(d, int) for d in rest):
        raise Unsupported(f"{name} with dims {rest}")
    if name == "t":
        return dims[::-1] if ndim == 2 else dims
    if name in ("transpose", "swapaxes", "swapdims") and len(rest) == 2:
        a, b = (_normalise(d, ndim) for d in rest)
        dims[a], dims[b] = dims[b], dims[a]
        return dims
    if name == "permute" and sorted(_normalise(d, ndim) for d in rest) == dims:
        return [_normalise(d, ndim) for d in rest]
    raise Unsupported(f"{name} with dims {rest} of a {ndim}-d tensor")


def _normalise(dim: int, ndim: int) -> int:
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise Unsupported(f"dim {dim} is out of range for {ndim} dimensions")
    return dim % size


def _shape_list(shape) -> list[int]:
    if isinstance(shape, int):
        return [shape]
    return [int(s) for s in shape]


def _flat(value) -> list:
    if isinstance(value, list | tuple):
        return [item for v in value for item in _flat(v)]
    return [value]
