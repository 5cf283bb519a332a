"""Tensors made in the forward.

`torch.arange` and `torch.eye`, whose values come from each element's position, lower to the
IR's `arange` (start, step) and `eye` nodes: no operand, computed where they are read (a mask of
positions, a ramp times a tensor), never read from memory (docs/fusion.md). Their dtype is
kept (arange of ints is int64, as torch makes it); kernels compute them as floats, exact for
the integers a float holds (up to 2^24), which bounds an int64 arange's values.

Tensors that hold one value everywhere: `torch.tensor(c)`, `torch.full`,
`torch.ones`, `torch.zeros` and their `_like` forms, and a constant fx folded into the graph
(`torch.tensor(self.c)` with no tensor argument is evaluated while tracing and becomes a
`_tensor_constant` attribute). Each is held as a fill (scans.Deferred) and read as the IR's
`{"const": value}` by the op that uses it: a pointwise op's operand broadcasts exactly as the
tensor would (the op's shape already is the broadcast one). Before a scan a fill is its identity
(scans.py); anywhere a tensor is needed (a matmul's operand, an output) it is refused by name.
"""

from __future__ import annotations

import torch
from torch import fx

from gpu_workers.harness.capture.norms import tensor_shape
from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported
from gpu_workers.harness.capture.scans import Deferred

# The dtypes a fill may have: a float32 operand stays float32 beside them (float64 or float16
# would change the op's dtype, which the op's own check then names).
_FILL_DTYPES = (torch.float32, torch.int64, torch.int32, torch.bool)
FILL_HELD = (
    "a tensor made in the forward is read only as a constant operand of a pointwise op (or as "
    "the identity before a scan)"
)


MAX_EXACT = 2.0**24  # every integer up to it is a float32
ARANGE_DTYPES = (torch.float32, torch.int64)
EYE_DTYPES = (torch.float32, torch.int64, torch.bool)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class FactoryLowering:
    """Mixed into lowering.Lowering: uses its _value, deferred and traced."""

    def _lower_new_tensor(self, node: fx.Node, bound: dict) -> None:
        data = self._value(node.args[0] if node.args else node.kwargs.get("data"))
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise Unsupported(f"torch.tensor of {type(data).__name__} data is {UNSUPPORTED}")
        self._fill(node, data)

    def _lower_full(self, node: fx.Node, bound: dict) -> None:
        value = node.args[1] if len(node.args) > 1 else node.kwargs.get("fill_value")
        self._fill(node, self._value(value))

    def _lower_ones(self, node: fx.Node, bound: dict) -> None:
        self._fill(node, 1.0)

    def _lower_zeros(self, node: fx.Node, bound: dict) -> None:
        self._fill(node, 0.0)

    def _lower_ones_like(self, node: fx.Node, bound: dict) -> None:
        self._fill(node, 1.0)

    def _lower_zeros_like(self, node: fx.Node, bound: dict) -> None:
        self._fill(node, 0.0)

    def _lower_full_like(self, node: fx.Node, bound: dict) -> None:
        value = node.args[1] if len(node.args) > 1 else node.kwargs.get("fill_value")
        self._fill(node, self._value(value))

    def _lower_arange(self, node: fx.Node, bound: dict) -> None:
        """torch.arange(end), (start, end) or (start, end, step), of floats or ints."""
        numbers = [self._value(a) for a in node.args]
        numbers += [
            self._value(node.kwargs[k]) for k in ("start", "end", "step") if k in node.kwargs
        ]
        if len(numbers) == 1:
            numbers = [0, numbers[0]]
        if len(numbers) not in (2, 3) or not all(_is_number(v) for v in numbers):
            raise Unsupported(
                f"torch.arange of {numbers!r} is {UNSUPPORTED}: numbers known at capture"
            )
        start, end, step = (*numbers, 1)[:3]
        shape = tuple(tensor_shape(node))
        exact = max(abs(float(start)), abs(float(start) + float(step) * max(shape[0] - 1, 0)))
        if exact > MAX_EXACT:
            raise Unsupported(f"an arange reaching {exact:g} is {UNSUPPORTED}: past 2^24 a float "
                              "no longer holds every integer")  # fmt: skip
        self._index_fill(
            node, "arange", {"start": float(start), "step": float(step)}, ARANGE_DTYPES
        )

    def _lower_eye(self, node: fx.Node, bound: dict) -> None:
        """torch.eye(n) or (n, m): 1 on the diagonal, 0 elsewhere."""
        self._index_fill(node, "eye", {}, EYE_DTYPES)

    def _index_fill(self, node: fx.Node, op: str, attrs: dict, dtypes: tuple) -> None:
        meta = node.meta.get("tensor_meta")
        if meta is not None and meta.dtype not in dtypes:
            name = str(meta.dtype).removeprefix("torch.")
            raise Unsupported(f"a {name} torch.{op} is {UNSUPPORTED}")
        self._emit(node, op, [], attrs)

    def _fill(self, node: fx.Node, value) -> None:
        meta = node.meta.get("tensor_meta")
        if meta is not None and meta.dtype not in _FILL_DTYPES:
            name = str(meta.dtype).removeprefix("torch.")
            raise Unsupported(f"a {name} tensor made in the forward is {UNSUPPORTED}")
        self.deferred[node] = Deferred("fill", fill=float(value), shape=tuple(tensor_shape(node)))

    def _folded_constant(self, node: fx.Node) -> bool:
        """A tensor attribute fx folded while tracing, held as a fill where it holds one value;
        False for any other attribute outside the state_dict."""
        if not str(node.target).startswith("_tensor_constant"):
            return False
        value = getattr(self.traced, str(node.target), None)
        if not isinstance(value, torch.Tensor) or value.is_meta or value.numel() == 0:
            return False
        if value.dtype not in _FILL_DTYPES or not bool((value == value.flatten()[0]).all()):
            return False
        self._fill(node, value.flatten()[0].item())
        return True
