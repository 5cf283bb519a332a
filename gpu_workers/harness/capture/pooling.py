"""Max and average pooling (F.max_pool1d/2d/3d, F.avg_pool1d/2d/3d and their nn modules) lowered
to the IR's max_pool and avg_pool: per spatial dim (the trailing ones) the window's size, stride,
padding and, for max, dilation; ceil_mode needs nothing more (the output shape says how many
windows), count_include_pad and divisor_override say what an average divides by.

Adaptive average pooling (F.adaptive_avg_pool1d/2d/3d, nn.AdaptiveAvgPool1d/2d/3d) to one
output a plane (global pooling) is a mean over the spatial dims (a reduction kernel, far faster
than one window an output); to sizes that divide the input's, an avg_pool of equal windows;
other sizes (windows at no fixed stride, or of unequal sizes) are refused by name.
"""

from __future__ import annotations

from torch import fx

from gpu_workers.harness.capture.ops import UNSUPPORTED, Unsupported


class PoolLowering:
    """Mixed into lowering.Lowering: uses its _tensor, _value and _emit."""

    def _lower_max_pool1d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "max_pool", 1)

    def _lower_max_pool2d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "max_pool", 2)

    def _lower_max_pool3d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "max_pool", 3)

    def _lower_avg_pool1d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "avg_pool", 1)

    def _lower_avg_pool2d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "avg_pool", 2)

    def _lower_avg_pool3d(self, node: fx.Node, bound: dict) -> None:
        self._pool(node, bound, "avg_pool", 3)

    def _lower_adaptive_avg_pool1d(self, node: fx.Node, bound: dict) -> None:
        self._adaptive_average(node, bound, 1)

    def _lower_adaptive_avg_pool2d(self, node: fx.Node, bound: dict) -> None:
        self._adaptive_average(node, bound, 2)

    def _lower_adaptive_avg_pool3d(self, node: fx.Node, bound: dict) -> None:
        self._adaptive_average(node, bound, 3)

    def _adaptive_average(self, node: fx.Node, bound: dict, spatial: int) -> None:
        x = bound["input"]
        meta = x.meta.get("tensor_meta") if isinstance(x, fx.Node) else None
        if not hasattr(meta, "shape") or len(meta.shape) <= spatial:
            raise Unsupported(f"needs a tensor of more than {spatial} dims")
        sizes = [int(s) for s in meta.shape[-spatial:]]
        wanted = self._value(bound["output_size"])
        if isinstance(wanted, list | tuple):  # None in a dim keeps its size
            wanted = list(wanted) * spatial if len(wanted) == 1 else list(wanted)
            if len(wanted) == spatial:
                pairs = zip(sizes, wanted, strict=True)
                wanted = [size if out is None else out for size, out in pairs]
        outputs = _per_dim(wanted, spatial, "output_size")
        ndim = len(meta.shape)
        if all(out == 1 for out in outputs):
            attrs = {"dim": list(range(ndim - spatial, ndim)), "keepdim": True}
            self._emit(node, "mean", [self._tensor(x)], attrs)
            return
        if any(out < 1 or size % out for size, out in zip(sizes, outputs, strict=True)):
            raise Unsupported(
                f"adaptive average pooling of {sizes} to {outputs}: an output size that does "
                f"not divide the input's is {UNSUPPORTED}"
            )
        window = [size // out for size, out in zip(sizes, outputs, strict=True)]
        attrs = {"kernel_size": window, "stride": window, "padding": [0] * spatial}
        attrs |= {"ceil_mode": False, "count_include_pad": True, "divisor_override": None}
        self._emit(node, "avg_pool", [self._tensor(x)], attrs)

    def _pool(self, node: fx.Node, bound: dict, op: str, spatial: int) -> None:
        if self._value(bound.get("return_indices", False)):
            raise Unsupported(f"a pooling that returns its indices is {UNSUPPORTED}")
        window = _per_dim(self._value(bound["kernel_size"]), spatial, "kernel_size")
        stride = self._value(bound.get("stride"))
        attrs = {
            "kernel_size": window,
            "stride": window if stride in (None, [], ()) else _per_dim(stride, spatial, "stride"),
            "padding": _per_dim(self._value(bound.get("padding", 0)), spatial, "padding"),
            "ceil_mode": bool(self._value(bound.get("ceil_mode", False))),
        }
        if op == "max_pool":
            attrs["dilation"] = _per_dim(self._value(bound.get("dilation", 1)), spatial, "dilation")
        else:
            attrs["count_include_pad"] = bool(self._value(bound.get("count_include_pad", True)))
            attrs["divisor_override"] = self._value(bound.get("divisor_override"))
        self._emit(node, op, [self._tensor(bound["input"])], attrs)


def _per_dim(value, spatial: int, name: str) -> list[int]:
    """An int or a tuple of `spatial` ints (torch also takes one int in a tuple) as a list."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * spatial
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        if len(value) == 1:
            return list(value) * spatial
        if len(value) == spatial:
            return list(value)
    raise Unsupported(f"{name}={value!r} is not an int or {spatial} ints")
