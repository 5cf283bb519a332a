"""Scans lowered to the IR's one scan op per call, the ways KernelBench writes them: a reverse
scan as flip, cumsum, flip (`cumsum` with `reverse`: no flipped copy is made), and an exclusive
scan as the scan of all but the last element behind a leading zero, cat((zeros_like(x[:1]),
cumsum(x.narrow(dim, 0, n - 1))), dim) (`cumsum` with `exclusive`; cumprod behind a one alike).
A cat of tensors none of which is held is the IR's own `cat` (lowered here, beside its scan form).

A flip, narrow or fill is not a core op: it is held (`deferred`) until the scan that consumes it,
and is reported as unsupported if anything else reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx

from gpu_workers.harness.capture.norms import tensor_shape
from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported
from gpu_workers.harness.capture.slicing import parts_of

SCAN_IDENTITY = {"cumsum": 0, "cumprod": 1}  # what an exclusive scan's first output is
HELD = "is supported only around a cumsum or cumprod (a reverse or exclusive scan)"


@dataclass(frozen=True)
class Deferred:
    """A value not lowered on its own: flip(ref, dims), ref.narrow(dim, 0, n - 1) (all but the
    last element), a constant `fill` of `shape`, or the inclusive scan `op` of such a narrow."""

    what: str  # "flip" | "narrow" | "fill" | "prefix_scan"
    ref: dict | None = None
    dims: tuple[int, ...] = ()
    fill: float = 0.0
    shape: tuple[int, ...] = ()
    op: str = ""


class ScanLowering:
    """Mixed into lowering.Lowering: uses its _tensor, _value, _emit, refs and deferred."""

    def _lower_cumsum(self, node: fx.Node, bound: dict) -> None:
        self._scan(node, "cumsum", bound)

    def _lower_cumprod(self, node: fx.Node, bound: dict) -> None:
        self._scan(node, "cumprod", bound)

    def _scan(self, node: fx.Node, op: str, bound: dict) -> None:
        self._float32_only(bound.get("dtype"))
        x, dim = bound["input"], self._value(bound.get("dim"))
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise Unsupported(f"dim={dim!r} is not an int")
        dim %= max(len(tensor_shape(x)), 1)
        held = self.deferred.get(x)
        if held is None:
            return self._emit(node, op, [self._tensor(x)], {"dim": dim})
        if held.what == "flip" and held.dims == (dim,):
            # cumsum(flip(x)) is flip(R), R the reverse scan of x: held until its own flip
            self._emit(node, op, [held.ref], {"dim": dim, "reverse": True})
            self.deferred[node] = Deferred("flip", self.refs.pop(node), (dim,))
        elif held.what == "narrow" and held.dims == (dim,):
            self.deferred[node] = Deferred("prefix_scan", held.ref, (dim,), op=op)
        else:
            raise Unsupported(f"a scan of a {held.what} along another dim is {UNSUPPORTED}")

    def _lower_flip(self, node: fx.Node, bound: dict) -> None:
        x = bound["input"]
        dims = self._value(bound["dims"])
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        dims = tuple(sorted({d % len(tensor_shape(x)) for d in dims}))
        held = self.deferred.get(x)
        if held is not None and held.what == "flip" and held.dims == dims:
            self.refs[node] = held.ref  # flip(flip(v)) is v
            return
        self.deferred[node] = Deferred("flip", self._tensor(x), dims)

    def _lower_narrow(self, node: fx.Node, bound: dict) -> None:
        x = bound["input"]
        dim = self._value(bound["dim"]) % len(tensor_shape(x))
        start, length = self._value(bound["start"]), self._value(bound["length"])
        if start != 0 or length != tensor_shape(x)[dim] - 1:
            raise Unsupported(f"a narrow other than all but the last element {HELD}")
        self.deferred[node] = Deferred("narrow", self._tensor(x), (dim,))

    def _lower_cat(self, node: fx.Node, bound: dict) -> None:
        """cat of tensors: the IR's cat; cat((fill, prefix scan), dim): the exclusive scan, the
        fill its identity (a part held for a scan is read by nothing else)."""
        parts = parts_of(bound["input"])
        dim = self._value(bound.get("dim", 0))
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise Unsupported(f"dim={dim!r} is not an int")
        dim %= len(tensor_shape(node))
        held = [self.deferred.get(p) if isinstance(p, fx.Node) else None for p in parts]
        if not any(held):
            return self._emit(node, "cat", [self._tensor(p) for p in parts], {"dim": dim})
        if len(parts) != 2 or None in held:
            raise Unsupported(f"cat {HELD}, as its leading identity")
        fill, scan = held
        if (
            fill.what != "fill"
            or scan.what != "prefix_scan"
            or scan.dims != (dim,)
            or fill.shape[dim] != 1
            or fill.fill != SCAN_IDENTITY[scan.op]
        ):
            raise Unsupported(f"cat {HELD}, as its leading identity")
        self._emit(node, scan.op, [scan.ref], {"dim": dim, "exclusive": True})
